/*
 * jwt_keys.c — the verifier's key set: HS256 secrets and P-256/Ed25519
 * public keys (from PEM here, from JWK Sets in jwks.c), each with its one
 * algorithm and optional kid, and the signature check a token's header
 * selects. See jwt.h and jwt_keys.h.
 *
 * Each key's algorithm is fixed when it is added, from what the key is, so a
 * token can never have a public key used as an HMAC secret. The set is a
 * fixed array written only by the adds; the check reads it and allocates
 * nothing that depends on the token.
 */
#include "gateway/jwt_keys.h"
#include "util/buf.h"

#include <assert.h>
#include <limits.h>
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/crypto.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/objects.h>
#include <openssl/pem.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    char *kid; /* NULL: the key has none */
    rn_jwt_alg alg;
    EVP_PKEY *pkey;  /* ES256, EdDSA */
    uint8_t *secret; /* HS256 */
    size_t secret_len;
} jwt_key;

struct rn_jwt_keys {
    jwt_key keys[RN_JWT_MAX_KEYS];
    size_t n;
};

static void fail(char *err, size_t cap, const char *msg) {
    snprintf(err, cap, "%s", msg);
}

int rn_jwt_alg_parse(const char *name, rn_jwt_alg *out) {
    if (strcmp(name, "HS256") == 0)
        *out = RN_JWT_HS256;
    else if (strcmp(name, "ES256") == 0)
        *out = RN_JWT_ES256;
    else if (strcmp(name, "EdDSA") == 0)
        *out = RN_JWT_EDDSA;
    else
        return -1;
    return 0;
}

rn_jwt_keys *rn_jwt_keys_new(void) {
    return rn_xcalloc(1, sizeof(rn_jwt_keys));
}

size_t rn_jwt_keys_count(const rn_jwt_keys *k) {
    return k->n;
}

static void key_clear(jwt_key *key) {
    free(key->kid);
    EVP_PKEY_free(key->pkey);
    if (key->secret)
        OPENSSL_cleanse(key->secret, key->secret_len);
    free(key->secret);
    memset(key, 0, sizeof *key);
}

void rn_jwt_keys_free(rn_jwt_keys *k) {
    if (!k)
        return;
    for (size_t i = 0; i < k->n; i++)
        key_clear(&k->keys[i]);
    free(k);
}

/* The checks every add shares: room in the set, a kid of a valid length.
 * Returns the slot to fill, or NULL with the reason in err. */
static jwt_key *next_slot(rn_jwt_keys *k, const char *kid, char *err, size_t cap) {
    if (k->n == RN_JWT_MAX_KEYS) {
        fail(err, cap, "the key set is full");
        return NULL;
    }
    if (kid && (kid[0] == '\0' || strlen(kid) > RN_JWT_MAX_KID)) {
        fail(err, cap, "a kid must be 1 to 256 bytes");
        return NULL;
    }
    jwt_key *key = &k->keys[k->n];
    key->kid = kid ? rn_xstrdup(kid) : NULL;
    return key;
}

int rn_jwt_keys_add_secret(rn_jwt_keys *k, const char *kid, const uint8_t *secret, size_t len,
                           char *err, size_t cap) {
    assert(k && (secret || len == 0));
    if (len < RN_JWT_MIN_SECRET) {
        fail(err, cap, "an HS256 secret must be at least 32 bytes");
        return -1;
    }
    jwt_key *key = next_slot(k, kid, err, cap);
    if (!key)
        return -1;
    key->alg = RN_JWT_HS256;
    key->secret = rn_xmalloc(len);
    memcpy(key->secret, secret, len);
    key->secret_len = len;
    k->n++;
    return 0;
}

/* 1 when pkey is an EC key on P-256 (OpenSSL refuses a point not on the
 * curve when it decodes one, from PEM or from a JWK's coordinates). */
static int is_p256(const EVP_PKEY *pkey) {
    char group[32];
    size_t glen = 0;
    if (!EVP_PKEY_is_a(pkey, "EC") ||
        EVP_PKEY_get_group_name(pkey, group, sizeof group, &glen) != 1)
        return 0;
    int nid = OBJ_sn2nid(group);
    if (nid == NID_undef)
        nid = EC_curve_nist2nid(group);
    return nid == NID_X9_62_prime256v1;
}

int rn_jwt_keys_add_pkey(rn_jwt_keys *k, const char *kid, EVP_PKEY *pkey, char *err, size_t cap) {
    assert(k && pkey);
    ERR_set_mark();
    int ed = EVP_PKEY_is_a(pkey, "ED25519"), usable = ed || is_p256(pkey);
    ERR_pop_to_mark();
    jwt_key *key = NULL;
    if (!usable)
        fail(err, cap, "not a valid EC P-256 or Ed25519 public key");
    else
        key = next_slot(k, kid, err, cap);
    if (!key) {
        EVP_PKEY_free(pkey);
        return -1;
    }
    key->alg = ed ? RN_JWT_EDDSA : RN_JWT_ES256;
    key->pkey = pkey;
    k->n++;
    return 0;
}

int rn_jwt_keys_add_pem(rn_jwt_keys *k, const char *kid, const char *pem, size_t len, char *err,
                        size_t cap) {
    assert(k && (pem || len == 0));
    if (len > INT_MAX) {
        fail(err, cap, "the PEM text is too long");
        return -1;
    }
    ERR_set_mark();
    BIO *bio = BIO_new_mem_buf(pem, (int)len);
    EVP_PKEY *pkey = bio ? PEM_read_bio_PUBKEY(bio, NULL, NULL, NULL) : NULL;
    BIO_free(bio);
    ERR_pop_to_mark();
    if (!pkey) {
        fail(err, cap, "no PEM public key (BEGIN PUBLIC KEY) in the text");
        return -1;
    }
    return rn_jwt_keys_add_pkey(k, kid, pkey, err, cap);
}

int rn_jwt_keys_move(rn_jwt_keys *dst, rn_jwt_keys *src, char *err, size_t cap) {
    assert(dst && src && dst != src);
    if (src->n > RN_JWT_MAX_KEYS - dst->n) {
        fail(err, cap, "the key set would hold more than 64 keys");
        return -1;
    }
    memcpy(&dst->keys[dst->n], src->keys, src->n * sizeof src->keys[0]);
    dst->n += src->n;
    memset(src->keys, 0, src->n * sizeof src->keys[0]);
    src->n = 0;
    return 0;
}

/* ES256's raw r||s (RFC 7518 §3.4) as the DER ECDSA-Sig-Value OpenSSL
 * verifies. Returns the DER length, or 0. */
static size_t es256_der(const uint8_t sig[64], uint8_t der[80]) {
    ECDSA_SIG *s = ECDSA_SIG_new();
    BIGNUM *r = BN_bin2bn(sig, 32, NULL), *v = BN_bin2bn(sig + 32, 32, NULL);
    size_t n = 0;
    if (s && r && v && ECDSA_SIG_set0(s, r, v) == 1) {
        r = v = NULL; /* owned by s now */
        int need = i2d_ECDSA_SIG(s, NULL);
        uint8_t *p = der;
        if (need > 0 && need <= 80 && i2d_ECDSA_SIG(s, &p) == need)
            n = (size_t)need;
    }
    BN_free(r);
    BN_free(v);
    ECDSA_SIG_free(s);
    return n;
}

/* 1 when sig is the key's signature of input. */
static int signature_ok(const jwt_key *key, const uint8_t *input, size_t n, const uint8_t *sig,
                        size_t sig_len) {
    if (key->alg == RN_JWT_HS256) {
        uint8_t mac[32];
        size_t mac_len = 0;
        return sig_len == sizeof mac &&
               EVP_Q_mac(NULL, "HMAC", NULL, "SHA256", NULL, key->secret, key->secret_len, input, n,
                         mac, sizeof mac, &mac_len) != NULL &&
               mac_len == sizeof mac && CRYPTO_memcmp(mac, sig, sizeof mac) == 0;
    }
    if (sig_len != 64)
        return 0;
    uint8_t der[80];
    const uint8_t *s = sig;
    if (key->alg == RN_JWT_ES256) {
        sig_len = es256_der(sig, der);
        s = der;
        if (sig_len == 0)
            return 0;
    }
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    int ok = ctx &&
             EVP_DigestVerifyInit(ctx, NULL, key->alg == RN_JWT_ES256 ? EVP_sha256() : NULL, NULL,
                                  key->pkey) == 1 &&
             EVP_DigestVerify(ctx, s, sig_len, input, n) == 1;
    EVP_MD_CTX_free(ctx);
    return ok;
}

rn_jwt_status rn_jwt_keys_check(const rn_jwt_keys *k, rn_jwt_alg alg, const char *kid,
                                const uint8_t *input, size_t n, const uint8_t *sig,
                                size_t sig_len) {
    assert(k && input && (sig || sig_len == 0));
    size_t named = 0, tried = 0;
    int ok = 0;
    ERR_set_mark();
    for (size_t i = 0; i < k->n && !ok; i++) {
        const jwt_key *key = &k->keys[i];
        if (kid && (!key->kid || strcmp(key->kid, kid) != 0))
            continue;
        named++;
        if (key->alg != alg)
            continue;
        tried++;
        ok = signature_ok(key, input, n, sig, sig_len);
    }
    ERR_pop_to_mark();
    if (ok)
        return RN_JWT_OK;
    if (kid && named == 0)
        return RN_JWT_UNKNOWN_KEY;
    return tried == 0 ? RN_JWT_ALG_REFUSED : RN_JWT_BAD_SIGNATURE;
}
