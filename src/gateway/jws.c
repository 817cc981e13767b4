/*
 * jws.c — JWS compact serialization: the token split into its parts, each
 * decoded into one fixed buffer, the header read, the signature checked by
 * the key set. See jws.h.
 *
 * Order: the size first, then the shape, the header and the signature; the
 * payload is decoded only once the signature holds (and parsed by jwt.c), so
 * an unsigned token costs one header parse and the key checks.
 */
#include "gateway/jws.h"
#include "gateway/jwt_keys.h"
#include "util/text.h"

#include <assert.h>
#include <string.h>

/* The header's alg and kid: RN_JWT_OK, RN_JWT_MALFORMED or
 * RN_JWT_ALG_REFUSED. */
static rn_jwt_status read_header(const json_t *h, rn_jwt_alg *alg, const char **kid) {
    if (!json_is_object(h) || json_object_get(h, "crit"))
        return RN_JWT_MALFORMED;
    const json_t *a = json_object_get(h, "alg"), *id = json_object_get(h, "kid");
    if (!json_is_string(a) || (id && !json_is_string(id)))
        return RN_JWT_MALFORMED;
    *kid = id ? json_string_value(id) : NULL;
    return rn_jwt_alg_parse(json_string_value(a), alg) == 0 ? RN_JWT_OK : RN_JWT_ALG_REFUSED;
}

rn_jwt_status rn_jws_verify(const rn_jwt_keys *k, const char *token, size_t len,
                            uint8_t buf[RN_JWS_DECODED_MAX], rn_jws *out) {
    assert(k && (token || len == 0) && buf && out);
    memset(out, 0, sizeof *out);
    if (len == 0 || len > RN_JWT_MAX_TOKEN) /* 0: memchr must not see a NULL token */
        return RN_JWT_MALFORMED;
    const char *dot1 = memchr(token, '.', len);
    const char *dot2 = dot1 ? memchr(dot1 + 1, '.', len - (size_t)(dot1 + 1 - token)) : NULL;
    if (!dot2)
        return RN_JWT_MALFORMED;
    const char *sig_text = dot2 + 1, *end = token + len;
    /* the parts (a third dot fails as a non-alphabet character) decoded one
     * after another, the payload only once the signature holds: together at
     * most 3/4 of len */
    long hn = rn_b64url_decode(token, (size_t)(dot1 - token), buf);
    if (hn < 0)
        return RN_JWT_MALFORMED;
    uint8_t *sig = buf + hn;
    long sn = rn_b64url_decode(sig_text, (size_t)(end - sig_text), sig);
    if (sn < 0)
        return RN_JWT_MALFORMED;
    json_t *h = json_loadb((const char *)buf, (size_t)hn, JSON_REJECT_DUPLICATES, NULL);
    rn_jwt_alg alg;
    const char *kid = NULL;
    rn_jwt_status st = read_header(h, &alg, &kid);
    if (st == RN_JWT_OK)
        st = rn_jwt_keys_check(k, alg, kid, (const uint8_t *)token, (size_t)(dot2 - token), sig,
                               (size_t)sn);
    uint8_t *payload = sig + sn;
    long pn = st == RN_JWT_OK ? rn_b64url_decode(dot1 + 1, (size_t)(dot2 - dot1 - 1), payload) : -1;
    if (st == RN_JWT_OK && pn < 0)
        st = RN_JWT_MALFORMED;
    if (st != RN_JWT_OK) {
        json_decref(h);
        return st;
    }
    out->header = h;
    out->payload = payload;
    out->payload_len = (size_t)pn;
    return RN_JWT_OK;
}

void rn_jws_release(rn_jws *j) {
    json_decref(j->header);
    memset(j, 0, sizeof *j);
}
