/*
 * routing.c — the routing answers of cluster mode. See routing.h.
 */
#include "protocol/routing.h"
#include "protocol/params.h"
#include "protocol/reply.h"
#include "util/text.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ROUTE_CONFIRMED 1u /* rn_request.route_flags: a leader read confirmed */
#define ROUTE_AWAITED 2u   /* rn_request.route_flags: waited once for its group's leader */

static struct {
    int active;
    rn_cluster_view view;
    void (*redispatch)(rn_request *, void *);
    void *arg;
} routing;

void rn_routing_setup(const rn_cluster_view *view, void (*redispatch)(rn_request *, void *),
                      void *arg) {
    assert(view && view->route && view->confirm && redispatch);
    routing.active = 1;
    routing.view = *view;
    routing.redispatch = redispatch;
    routing.arg = arg;
}

int rn_routing_active(void) {
    return routing.active;
}

rn_elsewhere_ask *rn_routing_ask_elsewhere(rn_elsewhere_fn each, void (*done)(void *arg), void *arg,
                                           const rn_elsewhere_cursor *cursors, rn_group_set *far) {
    memset(far, 0, sizeof *far);
    if (!routing.active || !routing.view.ask_elsewhere)
        return NULL;
    return routing.view.ask_elsewhere(routing.view.ctx, each, done, arg, cursors, far);
}

void rn_routing_ask_elsewhere_cancel(rn_elsewhere_ask *a) {
    assert(a && routing.view.ask_elsewhere_cancel);
    routing.view.ask_elsewhere_cancel(a);
}

int rn_routing_route(const char *key, size_t len, rn_group_route *out) {
    memset(out, 0, sizeof *out);
    if (!routing.active)
        return 0;
    routing.view.route(routing.view.ctx, key, len, out);
    return 1;
}

void rn_routing_group_header(rn_buf *h, const char *key, size_t len) {
    if (!routing.active)
        return;
    rn_group_route r;
    routing.view.route(routing.view.ctx, key, len, &r);
    rn_buf_appendf(h, "x-ursula-raft-group: %u\r\n", r.group);
}

/* 307 to the leader, or 503 NO_LEADER when no leader (with its URL) is
 * known or a redirect is not allowed any more. */
static void answer_elsewhere(rn_request *req, const rn_group_route *r, int may_redirect) {
    rn_buf h = {0};
    if (!r->hosted && may_redirect && r->host_url) { /* a node without a replica: §5.7 */
        rn_reply_common(&h);
        rn_buf_appendf(&h,
                       "Location: %s%.*s\r\nx-ursula-raft-group: %u\r\n"
                       "Cache-Control: no-store\r\n",
                       r->host_url, (int)req->target_len, req->target, r->group);
        rn_buf body = {0};
        rn_http_respond(req, 307, &h, &body);
        return;
    }
    if (r->hosted && may_redirect && r->leader_id && r->leader_url && r->term) {
        rn_reply_common(&h);
        rn_buf_appendf(&h,
                       "Location: %s%.*s\r\nx-ursula-raft-leader-id: %llu\r\n"
                       "x-ursula-raft-group: %u\r\nx-ursula-raft-term: %llu\r\n"
                       "Cache-Control: no-store\r\n",
                       r->leader_url, (int)req->target_len, req->target,
                       (unsigned long long)r->leader_id, r->group, (unsigned long long)r->term);
        rn_buf body = {0};
        rn_http_respond(req, 307, &h, &body);
        return;
    }
    rn_buf_appendf(&h, "Retry-After: 1\r\nx-ursula-raft-group: %u\r\n", r->group);
    rn_reply_error(req, RN_E_NO_LEADER, &h);
}

static int awaits_leader(rn_request *req, const char *key, size_t len, const rn_group_route *r);

/* 307 to the key's group's leader when another node leads it, else 503
 * `code` with Retry-After. */
static void read_elsewhere(rn_request *req, const char *key, size_t len, rn_error code) {
    rn_group_route r = {0};
    if (routing.active)
        routing.view.route(routing.view.ctx, key, len, &r);
    if (r.hosted ? r.leader_url && r.leader_id && r.term : r.host_url != NULL) {
        answer_elsewhere(req, &r, 1);
        return;
    }
    rn_buf h = {0};
    rn_buf_append_str(&h, "Retry-After: 1\r\n");
    rn_reply_error(req, code, &h);
}

void rn_routing_read_elsewhere(rn_request *req, const char *key, size_t len) {
    read_elsewhere(req, key, len, RN_E_RECOVERING);
}

void rn_routing_read_repairing(rn_request *req, const char *key, size_t len) {
    read_elsewhere(req, key, len, RN_E_STREAM_DATA_REPAIRING);
}

/* 503 with code, Retry-After and the group: nothing was read or proposed. */
static void refuse_here(rn_request *req, const rn_group_route *r, rn_error code) {
    rn_buf h = {0};
    rn_buf_appendf(&h, "Retry-After: 1\r\nx-ursula-raft-group: %u\r\n", r->group);
    rn_reply_error(req, code, &h);
}

int rn_routing_write(rn_request *req, const char *key, size_t len) {
    if (!routing.active)
        return 0;
    rn_group_route r;
    routing.view.route(routing.view.ctx, key, len, &r);
    if (r.serves && r.write_refusal) {
        refuse_here(req, &r, (rn_error)r.write_refusal);
        return 1;
    }
    if (r.serves)
        return 0;
    if (awaits_leader(req, key, len, &r))
        return 1;
    if (routing.view.forward && routing.view.forward(routing.view.forward_ctx, req, &r))
        return 1;
    answer_elsewhere(req, &r, req->body.len == 0);
    return 1;
}

/* True when the query asks consistency=`level` (once, exactly that value);
 * anything malformed is left to the read, which refuses it. */
static int wants(const char *query, size_t query_len, const char *level) {
    char val[8];
    long n;
    rn_param_fault f;
    if (rn_param_query(query, query_len, "consistency", RN_PARAM_LENIENT, val, sizeof val, &n,
                       &f) != 0)
        return 0;
    return n == (long)strlen(level) && memcmp(val, level, (size_t)n) == 0;
}

typedef struct {
    rn_request *req;
    char *key;
    size_t len;
} confirming;

static void confirmed(void *arg, int ok) {
    confirming *c = arg;
    rn_request *req = c->req;
    if (!rn_request_gone(req)) {
        if (ok) {
            req->route_flags |= ROUTE_CONFIRMED;
            routing.redispatch(req, routing.arg);
        } else {
            rn_group_route r;
            routing.view.route(routing.view.ctx, c->key, c->len, &r);
            if (r.serves) /* leading again, unconfirmed: no answer from this state */
                r.leader_id = 0;
            answer_elsewhere(req, &r, 1);
        }
    }
    rn_request_release(req);
    free(c->key);
    free(c);
}

/* req held until its confirmation reports (confirmed). */
static confirming *confirming_new(rn_request *req, const char *key, size_t len) {
    confirming *c = rn_xmalloc(sizeof *c);
    c->req = req;
    c->key = rn_xstrndup(key, len);
    c->len = len;
    rn_request_hold(req);
    return c;
}

static void leader_awaited(void *arg, int moved) {
    (void)moved; /* routed again either way: the route decides */
    confirming *c = arg;
    rn_request *req = c->req;
    if (!rn_request_gone(req))
        routing.redispatch(req, routing.arg);
    rn_request_release(req);
    free(c->key);
    free(c);
}

/* A write or leader read of a group this node leads but does not serve
 * (not ready yet, or handing the leadership over) waits once for the
 * group's next state and is routed again. Returns 1 when it waits, or,
 * asked from the request's head (body_pending), to leave the request to
 * be routed once its body is in: it must not run again while its body
 * still arrives. */
static int awaits_leader(rn_request *req, const char *key, size_t len, const rn_group_route *r) {
    if (!r->held_here || !routing.view.await_leader || (req->route_flags & ROUTE_AWAITED))
        return 0;
    if (req->body_pending)
        return 1; /* from the head: decided once the body is in (a request waiting here
                     while its body arrived was run again with the body in part) */
    req->route_flags |= ROUTE_AWAITED;
    routing.view.await_leader(routing.view.ctx, r->group, leader_awaited,
                              confirming_new(req, key, len));
    return 1;
}

/* A local read on a follower, run again once this replica applied what
 * the group's leader committed before it (read-your-writes); a follower
 * that could not learn that answers as it answers a leader read. Returns 1
 * (waiting, or answered). */
static int follower_confirmed(rn_request *req, const char *key, size_t len,
                              const rn_group_route *r) {
    routing.view.follower_confirm(routing.view.ctx, r->group, confirmed,
                                  confirming_new(req, key, len));
    return 1;
}

/* A read only the leader answers: a follower redirects it; the leader
 * confirms first and runs it again. Returns 1 (answered, or waiting). */
static int leader_only(rn_request *req, const char *key, size_t len, const rn_group_route *r) {
    if (awaits_leader(req, key, len, r))
        return 1;
    if (!r->serves) {
        answer_elsewhere(req, r, 1);
        return 1;
    }
    if (r->apply_stopped) { /* its state lags what it would confirm */
        refuse_here(req, r, RN_E_APPLY_STOPPED);
        return 1;
    }
    routing.view.confirm(routing.view.ctx, r->group, confirmed, confirming_new(req, key, len));
    return 1;
}

int rn_routing_read(rn_request *req, const char *key, size_t len, const char *query,
                    size_t query_len, int leader_param) {
    if (!routing.active || (req->route_flags & ROUTE_CONFIRMED))
        return 0;
    rn_group_route r;
    routing.view.route(routing.view.ctx, key, len, &r);
    if (!r.hosted) { /* no replica here: nothing of the group is read here */
        answer_elsewhere(req, &r, 1);
        return 1;
    }
    if (!(leader_param && wants(query, query_len, "leader"))) {
        int local = leader_param && wants(query, query_len, "local");
        if (r.apply_stopped && !local && (r.serves || routing.view.follower_confirm)) {
            refuse_here(req, &r, RN_E_APPLY_STOPPED); /* it cannot reflect every write */
            return 1;
        }
        if (r.caught_up && (r.serves || !routing.view.follower_confirm || local))
            return 0;
        if (r.caught_up)
            return follower_confirmed(req, key, len, &r);
        rn_buf h = {0};
        rn_buf_appendf(&h, "Retry-After: 1\r\nx-ursula-raft-group: %u\r\n", r.group);
        rn_reply_error(req, RN_E_RECOVERING, &h);
        return 1;
    }
    return leader_only(req, key, len, &r);
}

int rn_routing_authoritative(rn_request *req, const char *key, size_t len) {
    if (!routing.active || (req->route_flags & ROUTE_CONFIRMED))
        return 0;
    rn_group_route r;
    routing.view.route(routing.view.ctx, key, len, &r);
    return leader_only(req, key, len, &r);
}

int rn_elsewhere_cursor_parse(const char *text, size_t len, rn_elsewhere_cursor *out) {
    uint8_t raw[8];
    uint64_t seq, incarnation = 0;
    if (len < 18 || text[16] != '.' || rn_parse_lower_hex(text, 16, raw) != 0 ||
        rn_parse_strict_u64(text + 17, len - 17, UINT64_MAX, &seq) != 0)
        return -1;
    for (int b = 0; b < 8; b++)
        incarnation = incarnation << 8 | raw[b];
    if (!incarnation)
        return -1;
    *out = (rn_elsewhere_cursor){.incarnation = incarnation, .seq = seq};
    return 0;
}

void rn_elsewhere_cursor_format(const rn_elsewhere_cursor *c, char out[RN_ELSEWHERE_CURSOR_MAX]) {
    snprintf(out, RN_ELSEWHERE_CURSOR_MAX, "%016llx.%llu", (unsigned long long)c->incarnation,
             (unsigned long long)c->seq);
}
