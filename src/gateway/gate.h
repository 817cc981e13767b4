/*
 * gate.h — the gate: before a handler sees a request, its credential, its
 * rights on what it names, its tenant's status, limits and quotas, and the
 * external authorizer decide whether it goes on; refusals are answered
 * here, as an intermediary's own answers (docs/GATEWAY.md; ext §10-§11.1).
 * One gate serves the standalone gateway (ops/gateway_cmd.c, in front of
 * nodes) and a node started with --tenants (ops/router.c), so both answer
 * alike.
 *
 * An admitted request carries the gate's ticket (rn_request.gate_ticket):
 * its tenant, what it holds of the quotas (released when the request is
 * freed, when its bytes are charged and counted), and the rewrite of its
 * answer's head: the tenant's CORS origin instead of "*", and a lowered
 * Ursula-Max-Request-Bytes. Everything runs on the loop thread.
 */
#ifndef RN_GATEWAY_GATE_H
#define RN_GATEWAY_GATE_H

#include <stdint.h>
#include <uv.h>

#include "gateway/rights.h"
#include "net/outbound.h"
#include "protocol/errors.h"
#include "transport/http.h"
#include "util/buf.h"

typedef struct rn_gate rn_gate;

typedef struct {
    const char *tenants_path;
    uint64_t max_request_bytes;   /* the gate's own request limit (a node's at most) */
    uint64_t upload_budget_bytes; /* declared upload bytes at once, all tenants (0: none) */
    const char *usage_log;        /* JSON lines file (NULL or "": none) */
    uint64_t usage_log_max_bytes; /* rotated to .1 past this */
    uint64_t usage_log_interval_ms;
} rn_gate_config;

/* Loads the tenants file (a broken one refuses the start: NULL with why in
 * err; a missing one lets nobody in, and the log says so). */
rn_gate *rn_gate_new(uv_loop_t *loop, const rn_gate_config *cfg, char *err, size_t cap);
/* Loads the tenants file again (SIGHUP): requests in flight keep the set
 * they started with. Returns 0, or -1 with why in err (the old set stays). */
int rn_gate_reload(rn_gate *g, char *err, size_t cap);
/* Ends the gate's timers and outbound requests (shutdown); requests that
 * wait on it are answered. */
void rn_gate_stop(rn_gate *g);
void rn_gate_free(rn_gate *g);

/* A program that embeds the gate may refuse an identified request before it
 * goes on (ext §11.1: PAYMENT_REQUIRED, ACCOUNT_REVOKED, FORBIDDEN or
 * RATE_LIMITED with the seconds in retry_after_s; 0: no refusal). */
typedef struct {
    const char *tenant;
    const rn_request *req;
    const rn_target *target;
} rn_gate_info;
typedef struct {
    rn_error refusal;
    uint64_t retry_after_s;
} rn_gate_refusal;
typedef rn_gate_refusal (*rn_gate_refusal_fn)(void *arg, const rn_gate_info *info);
void rn_gate_set_refusal_hook(rn_gate *g, rn_gate_refusal_fn fn, void *arg);

typedef enum {
    RN_GATE_PASS,  /* admitted: the caller goes on */
    RN_GATE_DONE,  /* answered by the gate (a refusal, a preflight) */
    RN_GATE_WAIT,  /* waiting: cb(req, arg) runs later, once, admitted or answered */
    RN_GATE_LATER, /* (may_wait 0) needs a wait: ask again where waiting is possible */
} rn_gate_verdict;

/* Decides req from its head (its body may not have come). A request
 * already admitted passes. may_wait: whether the decision may wait (an
 * issuer's keys, the authorizer); a request without it gets RN_GATE_LATER
 * and nothing is started. */
rn_gate_verdict rn_gate_check(rn_gate *g, rn_request *req, int may_wait,
                              void (*cb)(rn_request *req, void *arg), void *arg);
/* Whether req was admitted (it carries an admitted ticket). */
int rn_gate_admitted(const rn_request *req);
/* Whether the request's Authorization is not a tenant's credential but the
 * server's own token (a subscription's callback, ack or release), which
 * must reach the node. */
int rn_gate_passes_authorization(const rn_request *req);

/* Of an admitted request: its tenant ("-" for an open route) and the
 * expiry of its credential (0: none). An admitted request's target holds no
 * access_token parameter any more (the gate took it out: it must never be
 * forwarded or logged). */
const char *rn_gate_tenant(const rn_request *req);
int64_t rn_gate_expires_ms(const rn_request *req);
/* Counts n more body bytes the request sent on (a streamed body). */
void rn_gate_count_bytes_in(rn_request *req, uint64_t n);

/* Answers req with the gate's own refusal e (Retry-After when
 * retry_after_s > 0, and on every 503), counted for its tenant. */
void rn_gate_refuse(rn_request *req, rn_error e, uint64_t retry_after_s);

/* Appends the gate's metrics (Prometheus text). */
void rn_gate_metrics(const rn_gate *g, rn_buf *out);

#endif
