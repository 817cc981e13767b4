/*
 * keys.c — signing and token keys. See keys.h.
 */
#include "subs/keys.h"
#include "util/files.h"
#include "util/log.h"
#include "util/text.h"

#include <errno.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SIGNING_FILE "webhook-signing-key.pem"
#define TOKEN_FILE "token.key"

struct rn_subs_keys {
    EVP_PKEY *signing;
    char kid[64];
    char x[64]; /* base64url public key */
    uint8_t token_key[RN_TOKEN_KEY_LEN];
};

/* Loads the PEM signing key, or generates and stores one. */
static EVP_PKEY *load_signing_key(const char *dir, char *err, size_t errcap) {
    rn_buf pem = {0};
    int rc = rn_read_file(dir, SIGNING_FILE, &pem);
    EVP_PKEY *pkey = NULL;
    if (rc == 0) {
        BIO *bio = BIO_new_mem_buf(pem.data, (int)pem.len);
        pkey = bio ? PEM_read_bio_PrivateKey(bio, NULL, NULL, NULL) : NULL;
        BIO_free(bio);
        rn_buf_free(&pem);
        if (!pkey || EVP_PKEY_get_id(pkey) != EVP_PKEY_ED25519) {
            EVP_PKEY_free(pkey);
            snprintf(err, errcap, "%s/%s is not an Ed25519 private key", dir, SIGNING_FILE);
            return NULL;
        }
        return pkey;
    }
    rn_buf_free(&pem);
    if (rc != -ENOENT) {
        snprintf(err, errcap, "cannot read %s/%s: %s", dir, SIGNING_FILE, strerror(-rc));
        return NULL;
    }
    pkey = EVP_PKEY_Q_keygen(NULL, NULL, "ED25519");
    BIO *bio = BIO_new(BIO_s_mem());
    char *data = NULL;
    long len = 0;
    if (pkey && bio && PEM_write_bio_PrivateKey(bio, pkey, NULL, NULL, 0, NULL, NULL) == 1)
        len = BIO_get_mem_data(bio, &data);
    rc = len > 0 ? rn_atomic_write_file(dir, SIGNING_FILE, data, (size_t)len, 0600) : -EIO;
    BIO_free(bio);
    if (rc != 0) {
        EVP_PKEY_free(pkey);
        snprintf(err, errcap, "cannot create %s/%s: %s", dir, SIGNING_FILE, strerror(-rc));
        return NULL;
    }
    return pkey;
}

static int load_token_key(const char *dir, uint8_t key[RN_TOKEN_KEY_LEN], char *err,
                          size_t errcap) {
    rn_buf b = {0};
    int rc = rn_read_file(dir, TOKEN_FILE, &b);
    size_t got = b.len;
    if (rc == 0 && got == RN_TOKEN_KEY_LEN)
        memcpy(key, b.data, RN_TOKEN_KEY_LEN);
    rn_buf_free(&b);
    if (rc == 0 && got != RN_TOKEN_KEY_LEN) {
        snprintf(err, errcap, "%s/%s does not hold a %d-byte key", dir, TOKEN_FILE,
                 RN_TOKEN_KEY_LEN);
        return -1;
    }
    if (rc == -ENOENT) {
        rc = RAND_bytes(key, RN_TOKEN_KEY_LEN) == 1
                 ? rn_atomic_write_file(dir, TOKEN_FILE, key, RN_TOKEN_KEY_LEN, 0600)
                 : -EIO;
    }
    if (rc != 0) {
        snprintf(err, errcap, "cannot load %s/%s: %s", dir, TOKEN_FILE, strerror(-rc));
        return -1;
    }
    return 0;
}

/* Sets the public key's text and the key id from k->signing. */
static void derive_kid(rn_subs_keys *k) {
    uint8_t pub[32];
    size_t pub_len = sizeof pub;
    EVP_PKEY_get_raw_public_key(k->signing, pub, &pub_len);
    rn_buf b = {0};
    rn_b64url_append(&b, pub, pub_len);
    snprintf(k->x, sizeof k->x, "%.*s", (int)b.len, (const char *)b.data);
    /* RFC 7638: SHA-256 over the required members in lexicographic order. */
    char canon[128];
    int n =
        snprintf(canon, sizeof canon, "{\"crv\":\"Ed25519\",\"kty\":\"OKP\",\"x\":\"%s\"}", k->x);
    uint8_t digest[32];
    unsigned int dlen = sizeof digest;
    EVP_Digest(canon, (size_t)n, digest, &dlen, EVP_sha256(), NULL);
    b.len = 0;
    rn_b64url_append(&b, digest, dlen);
    snprintf(k->kid, sizeof k->kid, "ds_%.*s", (int)b.len, (const char *)b.data);
    rn_buf_free(&b);
}

rn_subs_keys *rn_subs_keys_open(const char *dir, char *err, size_t errcap) {
    rn_subs_keys *k = rn_xcalloc(1, sizeof *k);
    k->signing = load_signing_key(dir, err, errcap);
    if (!k->signing || load_token_key(dir, k->token_key, err, errcap) < 0) {
        rn_subs_keys_free(k);
        return NULL;
    }
    derive_kid(k);
    return k;
}

json_t *rn_subs_keys_json(const rn_subs_keys *k) {
    uint8_t priv[32];
    size_t priv_len = sizeof priv;
    EVP_PKEY_get_raw_private_key(k->signing, priv, &priv_len);
    rn_buf a = {0}, b = {0};
    rn_b64url_append(&a, priv, priv_len);
    rn_b64url_append(&b, k->token_key, RN_TOKEN_KEY_LEN);
    OPENSSL_cleanse(priv, sizeof priv);
    json_t *o = json_pack("{s:s%, s:s%}", "signing", (const char *)a.data, a.len, "token",
                          (const char *)b.data, b.len);
    OPENSSL_cleanse(a.data, a.len);
    OPENSSL_cleanse(b.data, b.len);
    rn_buf_free(&a);
    rn_buf_free(&b);
    return o;
}

/* Decodes a base64url member of exactly 32 bytes into out. */
static int key_member(const json_t *o, const char *name, uint8_t out[32]) {
    const json_t *v = json_object_get(o, name);
    uint8_t buf[48];
    if (!json_is_string(v) || json_string_length(v) > 44)
        return -1;
    long n = rn_b64url_decode(json_string_value(v), json_string_length(v), buf);
    if (n != 32)
        return -1;
    memcpy(out, buf, 32);
    OPENSSL_cleanse(buf, sizeof buf);
    return 0;
}

rn_subs_keys *rn_subs_keys_from_json(const json_t *o) {
    uint8_t priv[32];
    rn_subs_keys *k = rn_xcalloc(1, sizeof *k);
    if (key_member(o, "signing", priv) == 0 && key_member(o, "token", k->token_key) == 0)
        k->signing = EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, NULL, priv, sizeof priv);
    OPENSSL_cleanse(priv, sizeof priv);
    if (!k->signing) {
        rn_subs_keys_free(k);
        return NULL;
    }
    derive_kid(k);
    return k;
}

void rn_subs_keys_free(rn_subs_keys *k) {
    if (!k)
        return;
    EVP_PKEY_free(k->signing);
    OPENSSL_cleanse(k->token_key, sizeof k->token_key);
    free(k);
}

const char *rn_subs_keys_kid(const rn_subs_keys *k) {
    return k->kid;
}

const uint8_t *rn_subs_keys_token_key(const rn_subs_keys *k) {
    return k->token_key;
}

void rn_subs_keys_jwks(const rn_subs_keys *k, rn_buf *out) {
    rn_buf_appendf(out,
                   "{\"keys\":[{\"kty\":\"OKP\",\"crv\":\"Ed25519\",\"kid\":\"%s\",\"use\":\"sig\","
                   "\"alg\":\"EdDSA\",\"x\":\"%s\"}]}",
                   k->kid, k->x);
}

void rn_subs_keys_sign_webhook(const rn_subs_keys *k, int64_t ts, const uint8_t *body, size_t len,
                               rn_buf *out) {
    rn_buf msg = {0};
    rn_buf_appendf(&msg, "%lld.", (long long)ts);
    rn_buf_append(&msg, body, len);
    uint8_t sig[64];
    size_t sig_len = sizeof sig;
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    if (!ctx || EVP_DigestSignInit(ctx, NULL, NULL, NULL, k->signing) != 1 ||
        EVP_DigestSign(ctx, sig, &sig_len, msg.data, msg.len) != 1) {
        /* Ed25519 signing of a buffer cannot fail short of memory exhaustion. */
        rn_log(RN_LOG_ERROR, "fatal", "Ed25519 signing failed");
        abort();
    }
    EVP_MD_CTX_free(ctx);
    rn_buf_free(&msg);
    rn_buf_appendf(out, "t=%lld,kid=%s,ed25519=", (long long)ts, k->kid);
    rn_b64url_append(out, sig, sig_len);
}
