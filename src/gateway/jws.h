/*
 * jws.h — the signature layer of the verifier: a JWS in compact
 * serialization (RFC 7515 §7.1) checked against a key set, with no
 * JWT claim or RFC 9068 rule (those are jwt.c's). jwt.c and the unit tests
 * call it; the gateway calls rn_jwt_verify.
 */
#ifndef RN_GATEWAY_JWS_H
#define RN_GATEWAY_JWS_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "gateway/jwt.h"

/* Room for every decoded part of a token of RN_JWT_MAX_TOKEN bytes. */
#define RN_JWS_DECODED_MAX (RN_JWT_MAX_TOKEN / 4 * 3)

typedef struct {
    json_t *header;         /* the protected header, a JSON object; owned */
    const uint8_t *payload; /* the decoded payload, inside the caller's buffer */
    size_t payload_len;
} rn_jws;

/* Checks token (len bytes, never read past): at most RN_JWT_MAX_TOKEN
 * bytes; three parts of canonical base64url split by two dots; a header that
 * is a JSON object without duplicate members, without a \u0000 in any
 * string, and without "crit" (no extension is understood), whose "alg" is a
 * string and "kid", when present, a string; then rn_jwt_keys_check over the
 * first two parts as sent. Returns its status, or RN_JWT_MALFORMED, or
 * RN_JWT_ALG_REFUSED for an alg other than HS256, ES256 and EdDSA. On
 * RN_JWT_OK fills *out (the payload decoded into buf); release it with
 * rn_jws_release. On any other status *out owns nothing. */
rn_jwt_status rn_jws_verify(const rn_jwt_keys *k, const char *token, size_t len,
                            uint8_t buf[RN_JWS_DECODED_MAX], rn_jws *out);
void rn_jws_release(rn_jws *j);

#endif
