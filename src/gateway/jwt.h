/*
 * jwt.h — the gateway's credential verifier: JWT access tokens (RFC 7519,
 * profiled by RFC 9068) in JWS compact serialization (RFC 7515), the key
 * set they are checked against, and the claims of a verified token.
 *
 * Pure: no I/O, no clock, no globals. A key set is built once (the adds),
 * then only read: rn_jwt_verify takes it const and keeps no state in it, so
 * any number of threads may verify against one set at once. Fetching a key
 * set document (a file, a URL) and replacing it are the caller's.
 *
 * Algorithms: HS256, ES256 (P-256, the signature raw r||s) and EdDSA
 * (Ed25519); "none" and every other name are refused. The key decides the
 * algorithm: each key in a set has exactly one, and a token is checked only
 * against keys of the algorithm its header names.
 *
 * Work per token is bounded: tokens over RN_JWT_MAX_TOKEN bytes are refused
 * before any decoding, decoding uses a fixed stack buffer, and at most
 * RN_JWT_MAX_KEYS signatures are checked (a token without kid, against every
 * key of its algorithm).
 */
#ifndef RN_GATEWAY_JWT_H
#define RN_GATEWAY_JWT_H

#include <stddef.h>
#include <stdint.h>

#define RN_JWT_MAX_TOKEN 8192 /* bytes of compact serialization */
#define RN_JWT_MAX_KEYS 64    /* keys in one set */
#define RN_JWT_MAX_KID 256    /* bytes of a key id */
#define RN_JWT_MIN_SECRET 32  /* bytes of an HS256 secret (RFC 7518 §3.2) */

typedef struct rn_jwt_keys rn_jwt_keys;

/* An empty key set (never NULL: allocation failure aborts). */
rn_jwt_keys *rn_jwt_keys_new(void);

/* Every add below either adds all it was given or changes nothing and
 * returns -1 with a one-line reason in err (cap bytes; err may be NULL when
 * cap is 0); the reason never contains key material. kid may be NULL (a key
 * without id); otherwise 1..RN_JWT_MAX_KID bytes. A set holds at most
 * RN_JWT_MAX_KEYS keys. Adds must all happen before the set is shared. */

/* Adds an HS256 key: at least RN_JWT_MIN_SECRET bytes of secret (copied). */
int rn_jwt_keys_add_secret(rn_jwt_keys *k, const char *kid, const uint8_t *secret, size_t len,
                           char *err, size_t cap);
/* Adds the first public key ("BEGIN PUBLIC KEY", SubjectPublicKeyInfo) of a
 * PEM text: an EC key on P-256 (ES256) or an Ed25519 key (EdDSA). */
int rn_jwt_keys_add_pem(rn_jwt_keys *k, const char *kid, const char *pem, size_t len, char *err,
                        size_t cap);
/* Adds the keys of a JWK Set document (RFC 7517 §5: an object whose "keys"
 * is an array of JWKs): kty "oct" with "k" (HS256), kty "EC" crv "P-256" with
 * "x" and "y" (ES256), kty "OKP" crv "Ed25519" with "x" (EdDSA), each with
 * its "kid" when it has one. A key of another kty or crv, whose "alg" names
 * another algorithm or whose "use" is not "sig" is skipped and counted in
 * *skipped (may be NULL). Refused: text that is not such a document, a
 * usable key with a malformed member (a missing or non-string member, bad
 * base64url, wrong length, a point not on the curve, a short secret), a
 * document with no usable key, and one that would pass RN_JWT_MAX_KEYS. */
int rn_jwt_keys_add_jwks(rn_jwt_keys *k, const char *json, size_t len, size_t *skipped, char *err,
                         size_t cap);
size_t rn_jwt_keys_count(const rn_jwt_keys *k);
/* Frees the set and wipes its secrets. NULL is a no-op. */
void rn_jwt_keys_free(rn_jwt_keys *k);

/* What a valid token must satisfy besides its signature. */
typedef struct {
    const char *issuer;   /* iss must equal it exactly */
    const char *audience; /* aud (a string, or an array of strings) must contain it */
    uint64_t now_s;       /* the current time, Unix seconds */
    uint64_t leeway_s;    /* clock skew allowed on exp, nbf and iat */
} rn_jwt_policy;

typedef enum {
    RN_JWT_OK,
    RN_JWT_MALFORMED,      /* too long, not three base64url parts, not JSON objects
                            * (duplicate members and \u0000 in strings refused), crit,
                            * a claim or header member of the wrong type */
    RN_JWT_ALG_REFUSED,    /* alg is not HS256/ES256/EdDSA, or not the selected key's */
    RN_JWT_UNKNOWN_KEY,    /* the kid names no key of the set */
    RN_JWT_BAD_SIGNATURE,  /* no selected key verifies the signature */
    RN_JWT_WRONG_TYPE,     /* typ is not at+jwt (RFC 9068 §4) */
    RN_JWT_WRONG_ISSUER,   /* iss differs from the policy's */
    RN_JWT_WRONG_AUDIENCE, /* aud does not contain the policy's */
    RN_JWT_MISSING_CLAIM,  /* iss, aud or exp absent */
    RN_JWT_NOT_YET_VALID,  /* nbf or iat later than now + leeway */
    RN_JWT_EXPIRED,        /* exp + leeway not after now */
} rn_jwt_status;

/* The claims of a verified token; owned by the caller. */
typedef struct rn_jwt_claims rn_jwt_claims;

/* Verifies token (len bytes, not necessarily NUL-terminated, never read
 * past len) against the key set and the policy: the JWS structure and its
 * signature first, then the RFC 9068 header type, then iss, aud, exp, nbf
 * and iat. Only a token whose signature verifies can be answered anything
 * past RN_JWT_BAD_SIGNATURE; RN_JWT_EXPIRED only one that fails nothing
 * else. On RN_JWT_OK stores the claims in *claims_out when claims_out is not
 * NULL; on any other status stores NULL there. policy->issuer and
 * policy->audience must be set. The gateway answers RN_JWT_EXPIRED with 401
 * CREDENTIAL_EXPIRED and every other failure with 401 INVALID_CREDENTIAL.
 * Not required, unlike RFC 9068 §2.2: sub, client_id, jti (the gateway
 * names the claim that carries the tenant). */
rn_jwt_status rn_jwt_verify(const rn_jwt_keys *k, const rn_jwt_policy *policy, const char *token,
                            size_t len, rn_jwt_claims **claims_out);

/* exp, in Unix seconds (a fractional value rounded down). */
uint64_t rn_jwt_claims_exp(const rn_jwt_claims *c);
/* nbf and iat (a fractional value rounded up): 0 and the value in *out, or
 * -1 when the token has no such claim. */
int rn_jwt_claims_nbf(const rn_jwt_claims *c, uint64_t *out);
int rn_jwt_claims_iat(const rn_jwt_claims *c, uint64_t *out);
/* A string claim's value, valid while c lives (never with a NUL inside: a
 * token with one is malformed); NULL when the claim is absent or not a
 * string. */
const char *rn_jwt_claims_string(const rn_jwt_claims *c, const char *name);
/* 1 when the space-separated "scope" claim (RFC 9068 §2.2.3) contains
 * scope as one of its tokens, else 0 (also when there is no scope claim). */
int rn_jwt_claims_has_scope(const rn_jwt_claims *c, const char *scope);
/* NULL is a no-op. */
void rn_jwt_claims_free(rn_jwt_claims *c);

/* A short fixed name for logs ("expired", "bad signature", ...); never any
 * part of a token. */
const char *rn_jwt_status_text(rn_jwt_status s);

#endif
