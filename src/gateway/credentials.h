/*
 * credentials.h — who a request is. The credential comes as
 * `Authorization: Bearer CREDENTIAL`, or as the `access_token` query
 * parameter of a GET or HEAD (a browser's EventSource cannot set headers);
 * it is an API key (rnk_..., found by its SHA-256 in the tenants file) or
 * a JWT access token (verified with its issuer's keys: those of the file,
 * and those fetched from the issuer's JWKS URL, refreshed every few
 * minutes and when a token names a key not yet known). Verified JWTs are
 * cached by their hash until they expire, so a client sending the same
 * token pays for its signature once.
 *
 * Everything runs on the loop thread.
 */
#ifndef RN_GATEWAY_CREDENTIALS_H
#define RN_GATEWAY_CREDENTIALS_H

#include <stdint.h>
#include <uv.h>

#include "gateway/tenants.h"
#include "net/outbound.h"
#include "protocol/errors.h"
#include "transport/http.h"

typedef struct rn_credentials rn_credentials;
typedef struct rn_jwt_grant rn_jwt_grant;

/* Who a request is, once identified. */
typedef struct {
    rn_error refusal;        /* 0: identified; else the 401 or 503 to answer */
    const rn_tenant *tenant; /* valid while the tenants set it came from lives */
    int64_t expires_ms;      /* the credential's expiry (0: none) */
    const rn_rights *narrow; /* a JWT's scope rights (NULL: the tenant's alone) */
    rn_jwt_grant *grant;     /* what narrow lives in (released by rn_identity_release) */
    int from_query;          /* it came as access_token */
} rn_identity;

rn_credentials *rn_credentials_new(uv_loop_t *loop, rn_outbound *outbound);
/* Takes a reference to t as the set identities are checked against: the
 * cache is emptied, and the JWKS URLs t names are fetched (those already
 * known keep their keys). */
void rn_credentials_use(rn_credentials *c, rn_tenants *t);
void rn_credentials_stop(rn_credentials *c);
void rn_credentials_free(rn_credentials *c);

/* Identifies req: returns 1 with *id filled, or 0 when it waits for an
 * issuer's keys to be fetched: then cb(req, arg) runs once they came (or
 * could not come), and the caller asks again (req is held meanwhile). With
 * cb NULL nothing waits: 0 says only that the answer needs the wait. */
int rn_credentials_identify(rn_credentials *c, rn_request *req, int64_t now_ms, rn_identity *id,
                            void (*cb)(rn_request *req, void *arg), void *arg);
void rn_identity_release(rn_identity *id);

/* The request's target without its access_token parameter, in out (cap
 * bytes). Returns its length, or -1 when it does not fit. */
long rn_credentials_strip_token(const rn_request *req, char *out, size_t cap);

#endif
