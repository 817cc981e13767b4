/*
 * jwks.c — JWK Set documents (RFC 7517) into the verifier's key set: which
 * keys are usable, their members decoded and checked, the document added
 * whole or not at all. See rn_jwt_keys_add_jwks in jwt.h.
 *
 * Each JWK is one of: usable (added), skipped (another kty or curve, an
 * "alg" for another algorithm, a "use" other than "sig"), or malformed
 * (a usable kind with a bad member: the whole document is refused, so a
 * publisher's mistake shows at once instead of as tokens refused later).
 * The keys are built into a set of their own and moved into the caller's
 * at the end, so a refused document changes nothing.
 */
#include "gateway/jwt_keys.h"
#include "util/buf.h"
#include "util/text.h"

#include <assert.h>
#include <jansson.h>
#include <openssl/core_names.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/params.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { JWK_ADDED, JWK_SKIPPED, JWK_MALFORMED };

/* An optional string member: 0 with *out NULL when absent or the value;
 * -1 when present but not a string. */
static int opt_string(const json_t *jwk, const char *name, const char **out) {
    const json_t *v = json_object_get(jwk, name);
    *out = json_string_value(v);
    return v && !*out ? -1 : 0;
}

/* A base64url member decoded into a new buffer of *len bytes, or NULL when
 * absent, not a string, or not canonical base64url. */
static uint8_t *b64_member(const json_t *jwk, const char *name, size_t *len) {
    const char *text;
    if (opt_string(jwk, name, &text) != 0 || !text)
        return NULL;
    size_t tlen = strlen(text);
    uint8_t *out = rn_xmalloc(tlen / 4 * 3 + 3);
    long n = rn_b64url_decode(text, tlen, out);
    if (n < 0) {
        free(out);
        return NULL;
    }
    *len = (size_t)n;
    return out;
}

/* A fixed-length base64url member into out: 0, or -1. */
static int fixed_member(const json_t *jwk, const char *name, uint8_t *out, size_t want) {
    size_t n = 0;
    uint8_t *b = b64_member(jwk, name, &n);
    int ok = b && n == want;
    if (ok)
        memcpy(out, b, want);
    free(b);
    return ok ? 0 : -1;
}

static EVP_PKEY *p256_key(const uint8_t x[32], const uint8_t y[32]) {
    uint8_t point[65] = {0x04}; /* uncompressed: 04 || x || y */
    memcpy(point + 1, x, 32);
    memcpy(point + 33, y, 32);
    OSSL_PARAM params[] = {
        OSSL_PARAM_construct_utf8_string(OSSL_PKEY_PARAM_GROUP_NAME, (char *)"P-256", 0),
        OSSL_PARAM_construct_octet_string(OSSL_PKEY_PARAM_PUB_KEY, point, sizeof point),
        OSSL_PARAM_construct_end(),
    };
    EVP_PKEY *pkey = NULL;
    EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_from_name(NULL, "EC", NULL);
    if (!ctx || EVP_PKEY_fromdata_init(ctx) != 1 ||
        EVP_PKEY_fromdata(ctx, &pkey, EVP_PKEY_PUBLIC_KEY, params) != 1)
        pkey = NULL;
    EVP_PKEY_CTX_free(ctx);
    return pkey;
}

/* The key of an EC or OKP JWK (crv already checked), or NULL with the
 * reason in err. */
static EVP_PKEY *public_key(const json_t *jwk, int ec, size_t i, char *err, size_t cap) {
    uint8_t x[32], y[32];
    if (fixed_member(jwk, "x", x, sizeof x) != 0 ||
        (ec && fixed_member(jwk, "y", y, sizeof y) != 0)) {
        snprintf(err, cap, "keys[%zu]: %s must be 32 bytes of base64url", i, ec ? "x and y" : "x");
        return NULL;
    }
    ERR_set_mark();
    EVP_PKEY *pkey =
        ec ? p256_key(x, y) : EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, NULL, x, sizeof x);
    ERR_pop_to_mark();
    if (!pkey)
        snprintf(err, cap, "keys[%zu]: not a valid public key", i);
    return pkey;
}

/* One JWK into set (its index i names it in err). */
static int add_jwk(rn_jwt_keys *set, const json_t *jwk, size_t i, char *err, size_t cap) {
    static const char *const names[] = {"kty", "kid", "use", "alg", "crv"};
    const char *v[5];
    if (!json_is_object(jwk)) {
        snprintf(err, cap, "keys[%zu] is not an object", i);
        return JWK_MALFORMED;
    }
    for (size_t m = 0; m < 5; m++) {
        if (opt_string(jwk, names[m], &v[m]) != 0) {
            snprintf(err, cap, "keys[%zu]: %s is not a string", i, names[m]);
            return JWK_MALFORMED;
        }
    }
    const char *kty = v[0], *kid = v[1], *use = v[2], *alg = v[3], *crv = v[4];
    if (!kty) {
        snprintf(err, cap, "keys[%zu]: kty missing", i);
        return JWK_MALFORMED;
    }
    int oct = strcmp(kty, "oct") == 0, ec = strcmp(kty, "EC") == 0;
    int okp = strcmp(kty, "OKP") == 0;
    const char *want = oct ? "HS256" : ec ? "ES256" : "EdDSA";
    if ((!oct && !ec && !okp) || (use && strcmp(use, "sig") != 0) ||
        (alg && strcmp(alg, want) != 0))
        return JWK_SKIPPED;
    if (!oct && !crv) {
        snprintf(err, cap, "keys[%zu]: crv missing", i);
        return JWK_MALFORMED;
    }
    if (!oct && strcmp(crv, ec ? "P-256" : "Ed25519") != 0)
        return JWK_SKIPPED;
    char why[128];
    int rc;
    if (oct) {
        size_t n = 0;
        uint8_t *secret = b64_member(jwk, "k", &n);
        if (!secret) {
            snprintf(err, cap, "keys[%zu]: k missing or not base64url", i);
            return JWK_MALFORMED;
        }
        rc = rn_jwt_keys_add_secret(set, kid, secret, n, why, sizeof why);
        OPENSSL_cleanse(secret, n);
        free(secret);
    } else {
        EVP_PKEY *pkey = public_key(jwk, ec, i, err, cap);
        if (!pkey)
            return JWK_MALFORMED;
        rc = rn_jwt_keys_add_pkey(set, kid, pkey, why, sizeof why);
    }
    if (rc != 0) {
        snprintf(err, cap, "keys[%zu]: %s", i, why);
        return JWK_MALFORMED;
    }
    return JWK_ADDED;
}

int rn_jwt_keys_add_jwks(rn_jwt_keys *k, const char *json, size_t len, size_t *skipped, char *err,
                         size_t cap) {
    assert(k && (json || len == 0) && (err || cap == 0));
    json_error_t je;
    json_t *doc = json_loadb(json, len, JSON_REJECT_DUPLICATES, &je);
    const json_t *list = doc ? json_object_get(doc, "keys") : NULL;
    if (!json_is_array(list)) {
        /* jansson's own text may quote the document, secrets included */
        if (doc)
            snprintf(err, cap, "the JWK Set has no \"keys\" array");
        else
            snprintf(err, cap, "the JWK Set is not JSON (line %d, column %d)", je.line, je.column);
        json_decref(doc);
        return -1;
    }
    rn_jwt_keys *set = rn_jwt_keys_new();
    size_t skips = 0;
    int rc = 0;
    for (size_t i = 0; i < json_array_size(list) && rc == 0; i++) {
        int what = add_jwk(set, json_array_get(list, i), i, err, cap);
        skips += what == JWK_SKIPPED;
        rc = what == JWK_MALFORMED ? -1 : 0;
    }
    if (rc == 0 && rn_jwt_keys_count(set) == 0) {
        snprintf(err, cap, "the JWK Set has no usable key (%zu skipped)", skips);
        rc = -1;
    }
    if (rc == 0)
        rc = rn_jwt_keys_move(k, set, err, cap);
    if (rc == 0 && skipped)
        *skipped = skips;
    rn_jwt_keys_free(set);
    json_decref(doc);
    return rc;
}
