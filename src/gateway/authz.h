/*
 * authz.h — the external authorizer (docs/GATEWAY.md): an HTTP endpoint
 * asked before a request is forwarded, like nginx's auth_request. It gets
 * `POST url` with {"tenant","method","path","bucket","stream"}; 200 or 204
 * allows, 402 answers PAYMENT_REQUIRED, 403 ACCOUNT_REVOKED (when its body's
 * error.code says so) or FORBIDDEN, 429 RATE_LIMITED with its Retry-After;
 * anything else, or no answer in time, AUTHORIZATION_UNAVAILABLE. Verdicts
 * are cached per tenant, method and stream for the configured time.
 */
#ifndef RN_GATEWAY_AUTHZ_H
#define RN_GATEWAY_AUTHZ_H

#include <stdint.h>
#include <uv.h>

#include "gateway/rights.h"
#include "gateway/tenants.h"
#include "net/outbound.h"
#include "protocol/errors.h"

typedef struct rn_authz rn_authz;

typedef struct {
    rn_error refusal; /* 0: allowed */
    uint64_t retry_after_s;
} rn_authz_verdict;

typedef void (*rn_authz_fn)(rn_request *req, void *arg, const rn_authz_verdict *v);

rn_authz *rn_authz_new(uv_loop_t *loop, rn_outbound *outbound);
/* The authorizer to ask from now on (cfg->url NULL: none); the cache is
 * emptied. */
void rn_authz_use(rn_authz *a, const rn_authorizer_config *cfg);
/* Whether an authorizer is configured. */
int rn_authz_active(const rn_authz *a);
/* Asks about req of tenant on t: returns 1 with the verdict in *v (from
 * the cache), or 0 when it asked: fn(req, arg, verdict) runs later, once
 * (req is held meanwhile). */
int rn_authz_check(rn_authz *a, rn_request *req, const char *tenant, const rn_target *t,
                   int64_t now_ms, rn_authz_verdict *v, rn_authz_fn fn, void *arg);
void rn_authz_stop(rn_authz *a);
void rn_authz_free(rn_authz *a);

#endif
