/*
 * token.c — HS256 callback tokens. See token.h.
 *
 * The header is fixed, so verification compares it byte for byte instead of
 * parsing it (no "alg" confusion is possible). The signature is checked in
 * constant time before the claims are parsed.
 */
#include "subs/token.h"
#include "util/text.h"

#include <jansson.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <string.h>

#define MAX_TOKEN_LEN 2048

static const char HEADER[] = "{\"alg\":\"HS256\",\"typ\":\"JWT\"}";

static void sign(const uint8_t key[RN_TOKEN_KEY_LEN], const void *data, size_t len,
                 uint8_t mac[32]) {
    unsigned int mac_len = 32;
    HMAC(EVP_sha256(), key, RN_TOKEN_KEY_LEN, data, len, mac, &mac_len);
}

void rn_token_mint(const uint8_t key[RN_TOKEN_KEY_LEN], const char *sub, uint64_t gen,
                   const char *wake_id, int64_t exp_s, rn_buf *out) {
    json_t *claims = json_pack("{s:s, s:I, s:s, s:I}", "sub", sub, "gen", (json_int_t)gen, "wid",
                               wake_id, "exp", (json_int_t)exp_s);
    char *text = json_dumps(claims, JSON_COMPACT);
    json_decref(claims);
    size_t start = out->len;
    rn_b64url_append(out, (const uint8_t *)HEADER, sizeof HEADER - 1);
    rn_buf_append_byte(out, '.');
    rn_b64url_append(out, (const uint8_t *)text, strlen(text));
    free(text);
    uint8_t mac[32];
    sign(key, out->data + start, out->len - start, mac);
    rn_buf_append_byte(out, '.');
    rn_b64url_append(out, mac, sizeof mac);
}

rn_token_status rn_token_verify(const uint8_t key[RN_TOKEN_KEY_LEN], const char *token, size_t len,
                                const char *sub, int64_t now_s, uint64_t *gen,
                                char wake_id[RN_WAKE_ID_MAX]) {
    if (len == 0 || len > MAX_TOKEN_LEN)
        return RN_TOKEN_INVALID;
    const char *dot1 = memchr(token, '.', len);
    const char *dot2 = dot1 ? memchr(dot1 + 1, '.', len - (size_t)(dot1 + 1 - token)) : NULL;
    if (!dot2)
        return RN_TOKEN_INVALID;
    rn_buf expected_header = {0};
    rn_b64url_append(&expected_header, (const uint8_t *)HEADER, sizeof HEADER - 1);
    int header_ok = (size_t)(dot1 - token) == expected_header.len &&
                    memcmp(token, expected_header.data, expected_header.len) == 0;
    rn_buf_free(&expected_header);
    if (!header_ok)
        return RN_TOKEN_INVALID;
    uint8_t mac[32], got[MAX_TOKEN_LEN];
    const char *sig = dot2 + 1;
    size_t sig_len = len - (size_t)(sig - token);
    if (rn_b64url_decode(sig, sig_len, got) != (long)sizeof mac)
        return RN_TOKEN_INVALID;
    sign(key, token, (size_t)(dot2 - token), mac);
    if (CRYPTO_memcmp(mac, got, sizeof mac) != 0)
        return RN_TOKEN_INVALID;
    long claims_len = rn_b64url_decode(dot1 + 1, (size_t)(dot2 - dot1 - 1), got);
    if (claims_len < 0)
        return RN_TOKEN_INVALID;
    json_t *claims =
        json_loadb((const char *)got, (size_t)claims_len, JSON_REJECT_DUPLICATES, NULL);
    const char *c_sub = NULL, *c_wid = NULL;
    json_int_t c_gen = -1, c_exp = 0;
    rn_token_status st = RN_TOKEN_INVALID;
    if (claims &&
        json_unpack(claims, "{s:s, s:I, s:s, s:I}", "sub", &c_sub, "gen", &c_gen, "wid", &c_wid,
                    "exp", &c_exp) == 0 &&
        c_gen >= 0 && strcmp(c_sub, sub) == 0 && strlen(c_wid) < RN_WAKE_ID_MAX) {
        *gen = (uint64_t)c_gen;
        strcpy(wake_id, c_wid);
        st = now_s > c_exp ? RN_TOKEN_EXPIRED : RN_TOKEN_VALID;
    }
    json_decref(claims);
    return st;
}
