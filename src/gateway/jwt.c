/*
 * jwt.c — the JWT access-token rules on top of the signature layer
 * (jws.c): the RFC 9068 header type, the claims iss, aud, exp, nbf and iat
 * against the policy, and the verified claims handed to the gateway. See
 * jwt.h.
 *
 * Claims are parsed only once the signature holds, and every check runs
 * before expiry, so RN_JWT_EXPIRED (which the gateway answers with its own
 * code, asking the client for a new token) means "valid but expired" and
 * nothing else.
 */
#include "gateway/jwt.h"
#include "gateway/jws.h"
#include "util/buf.h"
#include "util/text.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

struct rn_jwt_claims {
    json_t *payload; /* the claims object */
    uint64_t exp, nbf, iat;
    int has_nbf, has_iat;
};

/* The largest NumericDate accepted: 2^53, exact as a double. */
#define MAX_DATE 9007199254740992.0

/* A NumericDate (RFC 7519 §2) member: 1 and the value in *out (a fraction
 * rounded down or up), 0 when absent, -1 when not a number in [0, 2^53]. */
static int numeric_date(const json_t *claims, const char *name, int round_up, uint64_t *out) {
    const json_t *v = json_object_get(claims, name);
    if (!v)
        return 0;
    if (json_is_integer(v)) {
        json_int_t i = json_integer_value(v);
        if (i < 0 || (double)i > MAX_DATE)
            return -1;
        *out = (uint64_t)i;
        return 1;
    }
    if (!json_is_real(v))
        return -1;
    double d = json_real_value(v);
    if (!(d >= 0 && d <= MAX_DATE)) /* NaN fails too */
        return -1;
    *out = (uint64_t)d; /* rounded down: d >= 0 */
    *out += round_up && (double)*out < d;
    return 1;
}

/* 1 when v is the JSON string lit (jansson refuses a NUL inside a string
 * unless asked, so C string comparison is byte for byte). */
static int string_is(const json_t *v, const char *lit) {
    return json_is_string(v) && strcmp(json_string_value(v), lit) == 0;
}

/* RFC 9068 §4: typ "at+jwt", or the media type "application/at+jwt". */
static int access_token_type(const json_t *header) {
    const char *typ = json_string_value(json_object_get(header, "typ"));
    if (!typ)
        return 0;
    size_t n = strlen(typ);
    return rn_ieq(typ, n, "at+jwt") || rn_ieq(typ, n, "application/at+jwt");
}

/* aud (RFC 7519 §4.1.3): a string or an array of strings, one of which
 * must equal the audience. */
static rn_jwt_status check_audience(const json_t *aud, const char *audience) {
    if (!aud)
        return RN_JWT_MISSING_CLAIM;
    if (json_is_string(aud))
        return string_is(aud, audience) ? RN_JWT_OK : RN_JWT_WRONG_AUDIENCE;
    if (!json_is_array(aud))
        return RN_JWT_MALFORMED;
    rn_jwt_status st = RN_JWT_WRONG_AUDIENCE;
    for (size_t i = 0; i < json_array_size(aud); i++) {
        const json_t *a = json_array_get(aud, i);
        if (!json_is_string(a))
            return RN_JWT_MALFORMED;
        if (string_is(a, audience))
            st = RN_JWT_OK;
    }
    return st;
}

/* Every claim rule; fills c's times. */
static rn_jwt_status check_claims(const json_t *claims, const rn_jwt_policy *p, rn_jwt_claims *c) {
    const json_t *iss = json_object_get(claims, "iss");
    if (!iss)
        return RN_JWT_MISSING_CLAIM;
    if (!json_is_string(iss))
        return RN_JWT_MALFORMED;
    if (!string_is(iss, p->issuer))
        return RN_JWT_WRONG_ISSUER;
    rn_jwt_status st = check_audience(json_object_get(claims, "aud"), p->audience);
    if (st != RN_JWT_OK)
        return st;
    int has_exp = numeric_date(claims, "exp", 0, &c->exp);
    c->has_nbf = numeric_date(claims, "nbf", 1, &c->nbf);
    c->has_iat = numeric_date(claims, "iat", 1, &c->iat);
    if (has_exp < 0 || c->has_nbf < 0 || c->has_iat < 0)
        return RN_JWT_MALFORMED;
    if (!has_exp)
        return RN_JWT_MISSING_CLAIM;
    /* now + leeway and exp + leeway saturate instead of wrapping */
    uint64_t later = p->now_s > UINT64_MAX - p->leeway_s ? UINT64_MAX : p->now_s + p->leeway_s;
    if ((c->has_nbf && c->nbf > later) || (c->has_iat && c->iat > later))
        return RN_JWT_NOT_YET_VALID;
    uint64_t until = c->exp > UINT64_MAX - p->leeway_s ? UINT64_MAX : c->exp + p->leeway_s;
    return p->now_s < until ? RN_JWT_OK : RN_JWT_EXPIRED;
}

rn_jwt_status rn_jwt_verify(const rn_jwt_keys *k, const rn_jwt_policy *policy, const char *token,
                            size_t len, rn_jwt_claims **claims_out) {
    assert(k && policy && policy->issuer && policy->audience && (token || len == 0));
    if (claims_out)
        *claims_out = NULL;
    uint8_t buf[RN_JWS_DECODED_MAX];
    rn_jws jws;
    rn_jwt_status st = rn_jws_verify(k, token, len, buf, &jws);
    if (st != RN_JWT_OK)
        return st;
    rn_jwt_claims c = {0};
    if (!access_token_type(jws.header))
        st = RN_JWT_WRONG_TYPE;
    else {
        c.payload =
            json_loadb((const char *)jws.payload, jws.payload_len, JSON_REJECT_DUPLICATES, NULL);
        st = json_is_object(c.payload) ? check_claims(c.payload, policy, &c) : RN_JWT_MALFORMED;
    }
    rn_jws_release(&jws);
    if (st != RN_JWT_OK || !claims_out) {
        json_decref(c.payload);
        return st;
    }
    *claims_out = rn_xmalloc(sizeof c);
    **claims_out = c;
    return RN_JWT_OK;
}

uint64_t rn_jwt_claims_exp(const rn_jwt_claims *c) {
    return c->exp;
}

int rn_jwt_claims_nbf(const rn_jwt_claims *c, uint64_t *out) {
    *out = c->nbf;
    return c->has_nbf ? 0 : -1;
}

int rn_jwt_claims_iat(const rn_jwt_claims *c, uint64_t *out) {
    *out = c->iat;
    return c->has_iat ? 0 : -1;
}

const char *rn_jwt_claims_string(const rn_jwt_claims *c, const char *name) {
    return json_string_value(json_object_get(c->payload, name)); /* NULL: not a string */
}

int rn_jwt_claims_has_scope(const rn_jwt_claims *c, const char *scope) {
    const char *s = rn_jwt_claims_string(c, "scope");
    size_t want = strlen(scope);
    if (!s || want == 0)
        return 0;
    while (*s) {
        size_t n = strcspn(s, " ");
        if (n == want && memcmp(s, scope, n) == 0)
            return 1;
        s += n;
        s += *s == ' ';
    }
    return 0;
}

void rn_jwt_claims_free(rn_jwt_claims *c) {
    if (!c)
        return;
    json_decref(c->payload);
    free(c);
}

const char *rn_jwt_status_text(rn_jwt_status s) {
    switch (s) {
    case RN_JWT_OK:
        return "valid";
    case RN_JWT_MALFORMED:
        return "malformed token";
    case RN_JWT_ALG_REFUSED:
        return "algorithm refused";
    case RN_JWT_UNKNOWN_KEY:
        return "unknown key id";
    case RN_JWT_BAD_SIGNATURE:
        return "bad signature";
    case RN_JWT_WRONG_TYPE:
        return "not an access token (typ)";
    case RN_JWT_WRONG_ISSUER:
        return "wrong issuer";
    case RN_JWT_WRONG_AUDIENCE:
        return "wrong audience";
    case RN_JWT_MISSING_CLAIM:
        return "missing claim";
    case RN_JWT_NOT_YET_VALID:
        return "not yet valid";
    case RN_JWT_EXPIRED:
        return "expired";
    }
    return "unknown status";
}
