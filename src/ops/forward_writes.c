/*
 * forward_writes.c — a node's forwarding of writes to their group's
 * leader. See forward_writes.h.
 */
#include "ops/forward_writes.h"
#include "gateway/forward.h"
#include "protocol/reply.h"
#include "util/routes.h"
#include "util/text.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct rn_write_forwarder {
    rn_forwarder *fwd;
};

static uint64_t max_body_bytes; /* for the 413 a forwarded body earns (one node per process) */

/* A server's answer where the forwarder answers itself. */
static void refuse(rn_request *req, rn_forward_failure why) {
    rn_buf extra = {0};
    switch (why) {
    case RN_FWD_NO_NODE:
    case RN_FWD_UNREACHABLE:
    case RN_FWD_NOT_LED: /* nothing of it applied */
        rn_buf_append_str(&extra, "Retry-After: 1\r\n");
        rn_reply_error(req, RN_E_NO_LEADER, &extra);
        return;
    case RN_FWD_FAILED:
    case RN_FWD_TIMEOUT:
    case RN_FWD_BODY_STALLED: /* some of it went to the leader */
        rn_buf_append_str(&extra, "Retry-After: 1\r\n");
        rn_reply_error(req, RN_E_OUTCOME_UNKNOWN, &extra);
        return;
    case RN_FWD_BODY_SLOW:
        rn_reply_error(req, RN_E_REQUEST_TIMEOUT, NULL);
        return;
    case RN_FWD_BODY_TOO_LARGE:
        rn_buf_appendf(&extra, "Ursula-Max-Request-Bytes: %llu\r\n",
                       (unsigned long long)max_body_bytes);
        rn_reply_error(req, RN_E_REQUEST_TOO_LARGE, &extra);
        return;
    case RN_FWD_BODY_CUT:
    case RN_FWD_FAILURES:
        break;
    }
    rn_reply_error(req, RN_E_INVALID_REQUEST, NULL);
}

rn_write_forwarder *rn_write_forwarder_new(uv_loop_t *loop, const rn_config *cfg) {
    rn_write_forwarder *w = rn_xcalloc(1, sizeof *w);
    static char mark[64];
    snprintf(mark, sizeof mark, RN_NO_FORWARD_HEADER ": node-%llu\r\n",
             (unsigned long long)cfg->node_id);
    max_body_bytes = cfg->max_body_bytes;
    rn_forward_config fc = {.upstream_timeout_ms = cfg->request_timeout_ms,
                            .hold_body_bytes = 1 << 20,
                            .max_request_bytes = cfg->max_body_bytes,
                            .idle_ms = cfg->idle_timeout_ms / 2,
                            .mark = mark,
                            .refuse = refuse,
                            .keep_credentials = 1};
    w->fwd = rn_forwarder_new(loop, &fc);
    return w;
}

int rn_write_forwarder_take(void *ctx, rn_request *req, const rn_group_route *r) {
    rn_write_forwarder *w = ctx;
    size_t n = r->leader_url ? strlen(r->leader_url) : 0;
    if (!r->leader_id || !n || !rn_iprefix(r->leader_url, n, "http://") ||
        rn_request_header(req, RN_NO_FORWARD_HEADER, NULL))
        return 0; /* no leader to go to (or https: not spoken), or the sender wants the 307 */
    rn_forward_to(w->fwd, req, r->leader_url, req->body_pending);
    return 1;
}

void rn_write_forwarder_stop(rn_write_forwarder *w) {
    if (w)
        rn_forwarder_stop(w->fwd);
}

void rn_write_forwarder_free(rn_write_forwarder *w) {
    if (!w)
        return;
    rn_forwarder_free(w->fwd);
    free(w);
}
