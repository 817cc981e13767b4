/*
 * test_subs_token.c - unit tests for the subscription secrets: callback
 * tokens (src/subs/token.c), base64url (src/util/text.c) and the webhook
 * signing and token keys (src/subs/keys.c).
 *
 * How: RFC 4648 test vectors and strictness cases for base64url; tokens
 * minted and verified, then every single-byte change of a token (each
 * position, a substituted character) must be refused, as must tokens for
 * another subscription, under another key, with another header, expired or
 * malformed; keys are generated in a temporary directory, reloaded (same
 * key id, files 0600), and a webhook signature is checked with OpenSSL's
 * verifier against the public key taken back out of the JWK Set document,
 * including refusal of a tampered body.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "subs/keys.h"
#include "subs/token.h"
#include "util/text.h"

static const uint8_t KEY[RN_TOKEN_KEY_LEN] = "0123456789abcdef0123456789abcdef";

static void test_b64url_vectors(void **state) {
    (void)state;
    static const char *plain[] = {"", "f", "fo", "foo", "foob", "fooba", "foobar"};
    static const char *coded[] = {"", "Zg", "Zm8", "Zm9v", "Zm9vYg", "Zm9vYmE", "Zm9vYmFy"};
    for (int i = 0; i < 7; i++) {
        rn_buf b = {0};
        rn_b64url_append(&b, (const uint8_t *)plain[i], strlen(plain[i]));
        assert_int_equal(b.len, strlen(coded[i]));
        assert_memory_equal(b.data ? (char *)b.data : "", coded[i], b.len);
        uint8_t out[16];
        assert_int_equal(rn_b64url_decode(coded[i], strlen(coded[i]), out), strlen(plain[i]));
        assert_memory_equal(out, plain[i], strlen(plain[i]));
        rn_buf_free(&b);
    }
    /* the url-safe alphabet: 0xfb 0xff encodes with '-' and '_' */
    rn_buf b = {0};
    const uint8_t bytes[] = {0xfb, 0xff, 0xbf};
    rn_b64url_append(&b, bytes, 3);
    assert_memory_equal(b.data, "-_-_", 4);
    rn_buf_free(&b);
    uint8_t out[8];
    assert_int_equal(rn_b64url_decode("Zg==", 4, out), -1); /* padding */
    assert_int_equal(rn_b64url_decode("Zm+v", 4, out), -1); /* standard alphabet */
    assert_int_equal(rn_b64url_decode("Z", 1, out), -1);    /* impossible length */
    assert_int_equal(rn_b64url_decode("Zh", 2, out), -1);   /* non-zero trailing bits */
}

static void mint(const char *sub, uint64_t gen, const char *wid, int64_t exp, rn_buf *out) {
    out->len = 0;
    rn_token_mint(KEY, sub, gen, wid, exp, out);
}

static rn_token_status verify(const rn_buf *t, const char *sub, int64_t now, uint64_t *gen,
                              char wid[RN_WAKE_ID_MAX]) {
    return rn_token_verify(KEY, (const char *)t->data, t->len, sub, now, gen, wid);
}

static void test_token_round_trip(void **state) {
    (void)state;
    rn_buf t = {0};
    mint("sub-1", 7, "w_abc", 2000, &t);
    assert_memory_equal(t.data, "eyJ", 3); /* a JWT: base64url of {" */
    uint64_t gen = 0;
    char wid[RN_WAKE_ID_MAX] = "";
    assert_int_equal(verify(&t, "sub-1", 1999, &gen, wid), RN_TOKEN_VALID);
    assert_int_equal(gen, 7);
    assert_string_equal(wid, "w_abc");
    assert_int_equal(verify(&t, "sub-1", 2000, &gen, wid), RN_TOKEN_VALID);
    assert_int_equal(verify(&t, "sub-1", 2001, &gen, wid), RN_TOKEN_EXPIRED);
    assert_int_equal(verify(&t, "sub-2", 1000, &gen, wid), RN_TOKEN_INVALID);
    assert_int_equal(verify(&t, "sub-", 1000, &gen, wid), RN_TOKEN_INVALID);
    static const uint8_t other[RN_TOKEN_KEY_LEN] = "another key, 32 bytes long......";
    assert_int_equal(rn_token_verify(other, (const char *)t.data, t.len, "sub-1", 1000, &gen, wid),
                     RN_TOKEN_INVALID);
    rn_buf_free(&t);
}

static void test_token_tampering(void **state) {
    (void)state;
    rn_buf t = {0};
    mint("sub-1", 3, "w_0123456789abcdef01234567", 4000000000, &t);
    uint64_t gen;
    char wid[RN_WAKE_ID_MAX];
    char *copy = malloc(t.len);
    static const char subst[] = "AQgw-_.Z";
    for (size_t i = 0; i < t.len; i++) {
        for (const char *c = subst; *c; c++) {
            if (*c == t.data[i])
                continue;
            memcpy(copy, t.data, t.len);
            copy[i] = *c;
            rn_token_status st = rn_token_verify(KEY, copy, t.len, "sub-1", 1000, &gen, wid);
            if (st != RN_TOKEN_INVALID)
                fail_msg("changing byte %zu to '%c' was accepted", i, *c);
        }
    }
    /* truncations and extensions */
    for (size_t n = 0; n < t.len; n++)
        assert_int_equal(rn_token_verify(KEY, (const char *)t.data, n, "sub-1", 1000, &gen, wid),
                         RN_TOKEN_INVALID);
    rn_buf longer = {0};
    rn_buf_append(&longer, t.data, t.len);
    rn_buf_append_str(&longer, "A");
    assert_int_equal(
        rn_token_verify(KEY, (const char *)longer.data, longer.len, "sub-1", 1000, &gen, wid),
        RN_TOKEN_INVALID);
    free(copy);
    rn_buf_free(&longer);
    rn_buf_free(&t);
}

/* A token with a chosen header and claims, correctly signed with KEY. */
static void forge(const char *header, const char *claims, rn_buf *out) {
    out->len = 0;
    rn_b64url_append(out, (const uint8_t *)header, strlen(header));
    rn_buf_append_byte(out, '.');
    rn_b64url_append(out, (const uint8_t *)claims, strlen(claims));
    uint8_t mac[32];
    size_t mac_len = sizeof mac;
    EVP_Q_mac(NULL, "HMAC", NULL, "SHA256", NULL, KEY, sizeof KEY, out->data, out->len, mac,
              sizeof mac, &mac_len);
    rn_buf_append_byte(out, '.');
    rn_b64url_append(out, mac, mac_len);
}

static void test_token_forged_shapes(void **state) {
    (void)state;
    static const char *good_header = "{\"alg\":\"HS256\",\"typ\":\"JWT\"}";
    static const struct {
        const char *header, *claims;
        rn_token_status want;
    } cases[] = {
        {"{\"alg\":\"HS256\",\"typ\":\"JWT\"}",
         "{\"sub\":\"s\",\"gen\":1,\"wid\":\"w\",\"exp\":9999999999}", RN_TOKEN_VALID},
        {"{\"alg\":\"none\",\"typ\":\"JWT\"}",
         "{\"sub\":\"s\",\"gen\":1,\"wid\":\"w\",\"exp\":9999999999}", RN_TOKEN_INVALID},
        {"{\"typ\":\"JWT\",\"alg\":\"HS256\"}",
         "{\"sub\":\"s\",\"gen\":1,\"wid\":\"w\",\"exp\":9999999999}", RN_TOKEN_INVALID},
        {NULL, "{\"sub\":\"s\",\"gen\":-1,\"wid\":\"w\",\"exp\":9999999999}", RN_TOKEN_INVALID},
        {NULL, "{\"sub\":\"s\",\"gen\":\"1\",\"wid\":\"w\",\"exp\":9999999999}", RN_TOKEN_INVALID},
        {NULL, "{\"sub\":\"s\",\"gen\":1,\"exp\":9999999999}", RN_TOKEN_INVALID},
        {NULL, "{\"sub\":\"s\",\"gen\":1,\"wid\":\"w\"}", RN_TOKEN_INVALID},
        {NULL, "{\"sub\":\"s\",\"sub\":\"s\",\"gen\":1,\"wid\":\"w\",\"exp\":9999999999}",
         RN_TOKEN_INVALID},
        {NULL, "[1,2,3]", RN_TOKEN_INVALID},
        {NULL, "not json", RN_TOKEN_INVALID},
    };
    rn_buf t = {0};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        forge(cases[i].header ? cases[i].header : good_header, cases[i].claims, &t);
        uint64_t gen;
        char wid[RN_WAKE_ID_MAX];
        rn_token_status st =
            rn_token_verify(KEY, (const char *)t.data, t.len, "s", 1000, &gen, wid);
        if (st != cases[i].want)
            fail_msg("case %zu: status %d, want %d", i, st, cases[i].want);
    }
    rn_buf_free(&t);
    uint64_t gen;
    char wid[RN_WAKE_ID_MAX];
    assert_int_equal(rn_token_verify(KEY, "a.b", 3, "s", 0, &gen, wid), RN_TOKEN_INVALID);
    assert_int_equal(rn_token_verify(KEY, "", 0, "s", 0, &gen, wid), RN_TOKEN_INVALID);
    assert_int_equal(rn_token_verify(KEY, "...", 3, "s", 0, &gen, wid), RN_TOKEN_INVALID);
}

/* ---- keys ---- */

static char dir[64];

static int make_dir(void **state) {
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/runnel-keys-XXXXXX");
    return mkdtemp(dir) ? 0 : -1;
}

static int remove_dir(void **state) {
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    return system(cmd) == 0 ? 0 : -1;
}

static mode_t file_mode(const char *name) {
    char path[128];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    assert_int_equal(stat(path, &st), 0);
    return st.st_mode & 0777;
}

/* Verifies a Webhook-Signature value against the JWK Set document. */
static int verify_signature(const char *jwks, const char *header, const char *body) {
    json_t *doc = json_loads(jwks, 0, NULL);
    const char *x = NULL, *kid = NULL, *kty = NULL, *crv = NULL, *alg = NULL;
    assert_int_equal(json_unpack(doc, "{s:[{s:s, s:s, s:s, s:s, s:s}]}", "keys", "x", &x, "kid",
                                 &kid, "kty", &kty, "crv", &crv, "alg", &alg),
                     0);
    assert_string_equal(kty, "OKP");
    assert_string_equal(crv, "Ed25519");
    assert_string_equal(alg, "EdDSA");
    long ts;
    char hkid[128], sig_text[128];
    assert_int_equal(sscanf(header, "t=%ld,kid=%127[^,],ed25519=%127s", &ts, hkid, sig_text), 3);
    assert_string_equal(hkid, kid);
    uint8_t pub[64], sig[96];
    assert_int_equal(rn_b64url_decode(x, strlen(x), pub), 32);
    long sig_len = rn_b64url_decode(sig_text, strlen(sig_text), sig);
    assert_int_equal(sig_len, 64);
    EVP_PKEY *pkey = EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, NULL, pub, 32);
    char msg[512];
    int n = snprintf(msg, sizeof msg, "%ld.%s", ts, body);
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    EVP_DigestVerifyInit(ctx, NULL, NULL, NULL, pkey);
    int ok = EVP_DigestVerify(ctx, sig, (size_t)sig_len, (const uint8_t *)msg, (size_t)n) == 1;
    EVP_MD_CTX_free(ctx);
    EVP_PKEY_free(pkey);
    json_decref(doc);
    return ok;
}

static void test_keys_persist_and_sign(void **state) {
    (void)state;
    char err[256];
    rn_subs_keys *k = rn_subs_keys_open(dir, err, sizeof err);
    assert_non_null(k);
    assert_int_equal(file_mode("webhook-signing-key.pem"), 0600);
    assert_int_equal(file_mode("token.key"), 0600);
    char kid[128];
    snprintf(kid, sizeof kid, "%s", rn_subs_keys_kid(k));
    assert_memory_equal(kid, "ds_", 3);
    assert_int_equal(strlen(kid), 3 + 43); /* a base64url SHA-256 thumbprint */
    uint8_t token_key[RN_TOKEN_KEY_LEN];
    memcpy(token_key, rn_subs_keys_token_key(k), sizeof token_key);

    rn_buf jwks = {0}, sig = {0};
    rn_subs_keys_jwks(k, &jwks);
    rn_buf_append_byte(&jwks, 0);
    const char *body = "{\"subscription_id\":\"s\",\"generation\":1}";
    rn_subs_keys_sign_webhook(k, 1778324210, (const uint8_t *)body, strlen(body), &sig);
    rn_buf_append_byte(&sig, 0);
    assert_true(verify_signature((char *)jwks.data, (char *)sig.data, body));
    assert_false(verify_signature((char *)jwks.data, (char *)sig.data,
                                  "{\"subscription_id\":\"s\",\"generation\":2}"));
    rn_subs_keys_free(k);

    /* reopening loads the same keys */
    k = rn_subs_keys_open(dir, err, sizeof err);
    assert_non_null(k);
    assert_string_equal(rn_subs_keys_kid(k), kid);
    assert_memory_equal(rn_subs_keys_token_key(k), token_key, sizeof token_key);
    rn_buf jwks2 = {0};
    rn_subs_keys_jwks(k, &jwks2);
    rn_buf_append_byte(&jwks2, 0);
    assert_string_equal((char *)jwks2.data, (char *)jwks.data);
    rn_subs_keys_free(k);
    rn_buf_free(&jwks);
    rn_buf_free(&jwks2);
    rn_buf_free(&sig);
}

static void test_keys_refuse_corrupt_files(void **state) {
    (void)state;
    char path[128], err[256];
    snprintf(path, sizeof path, "%s/token.key", dir);
    FILE *f = fopen(path, "w");
    fputs("short", f);
    fclose(f);
    assert_null(rn_subs_keys_open(dir, err, sizeof err));
    assert_non_null(strstr(err, "token.key"));
    unlink(path);
    snprintf(path, sizeof path, "%s/webhook-signing-key.pem", dir);
    f = fopen(path, "w");
    fputs("-----BEGIN PRIVATE KEY-----\nnonsense\n-----END PRIVATE KEY-----\n", f);
    fclose(f);
    assert_null(rn_subs_keys_open(dir, err, sizeof err));
    assert_non_null(strstr(err, "Ed25519"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_b64url_vectors),
        cmocka_unit_test(test_token_round_trip),
        cmocka_unit_test(test_token_tampering),
        cmocka_unit_test(test_token_forged_shapes),
        cmocka_unit_test_setup_teardown(test_keys_persist_and_sign, make_dir, remove_dir),
        cmocka_unit_test_setup_teardown(test_keys_refuse_corrupt_files, make_dir, remove_dir),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
