/*
 * jwt_keys.h — what the verifier's files share about the key set
 * (jwt_keys.c): the algorithms, adding an OpenSSL public key, moving keys
 * between sets, and the signature check. Not for the gateway: it uses jwt.h.
 */
#ifndef RN_GATEWAY_JWT_KEYS_H
#define RN_GATEWAY_JWT_KEYS_H

#include <openssl/types.h>
#include <stddef.h>
#include <stdint.h>

#include "gateway/jwt.h"

typedef enum { RN_JWT_HS256, RN_JWT_ES256, RN_JWT_EDDSA } rn_jwt_alg;

/* The algorithm of a JWS "alg" name (exact, case-sensitive): 0, or -1 for
 * any other name ("none" included). */
int rn_jwt_alg_parse(const char *name, rn_jwt_alg *out);

/* Adds a public key, taking ownership of pkey whatever the outcome: an EC
 * key on P-256 (ES256) or an Ed25519 key (EdDSA). Otherwise -1 with the reason in err, as the adds
 * of jwt.h. */
int rn_jwt_keys_add_pkey(rn_jwt_keys *k, const char *kid, EVP_PKEY *pkey, char *err, size_t cap);

/* Moves every key of src to the end of dst (src ends empty): 0, or -1
 * with the reason in err and both sets unchanged when dst would pass
 * RN_JWT_MAX_KEYS. */
int rn_jwt_keys_move(rn_jwt_keys *dst, rn_jwt_keys *src, char *err, size_t cap);

/* Checks sig over input with the keys a token selects: those whose kid
 * equals kid (every key when kid is NULL), of algorithm alg. RN_JWT_OK when
 * one verifies; RN_JWT_UNKNOWN_KEY when kid names no key; RN_JWT_ALG_REFUSED
 * when no selected key has algorithm alg; else RN_JWT_BAD_SIGNATURE (a
 * signature of the wrong length for alg included). Leaves the calling
 * thread's OpenSSL error queue as it found it. */
rn_jwt_status rn_jwt_keys_check(const rn_jwt_keys *k, rn_jwt_alg alg, const char *kid,
                                const uint8_t *input, size_t n, const uint8_t *sig, size_t sig_len);

#endif
