/*
 * router.c — request routing. See router.h.
 */
#include "ops/router.h"
#include "surface/bucket.h"
#include "protocol/reply.h"
#include "protocol/routing.h"
#include "surface/v1.h"
#include "util/log.h"
#include "util/metrics.h"
#include "util/text.h"

#include <stdbool.h>
#include <string.h>

#define V1_PREFIX "/v1/stream/"
#define ADMIN_PREFIX "/__runnel/"
#define RESERVED_SEGMENT "__ds"

/* Length of the first segment of path when it names the reserved __ds
 * prefix (percent-encoded or not: the v1 surface decodes paths, so an
 * encoded "__ds" must not reach it either), else 0. */
static size_t reserved_prefix(const char *path, size_t len) {
    const char *slash = memchr(path, '/', len);
    size_t seg = slash ? (size_t)(slash - path) : len;
    char decoded[16];
    if (seg >= sizeof decoded)
        return 0;
    long n = rn_percent_decode(path, seg, decoded);
    return n == sizeof RESERVED_SEGMENT - 1 && memcmp(decoded, RESERVED_SEGMENT, (size_t)n) == 0
               ? seg
               : 0;
}

/* Whether the gate judges req: it guards the public listener; the peer
 * listener's peers and operators prove themselves to the routes. */
static bool gated_here(const rn_router *rt, const rn_request *req) {
    return rt->gate && !(req->route_flags & RN_REQUEST_PEER_LISTENER);
}

void rn_router_answer_early(rn_request *req, void *arg) {
    rn_router *rt = arg;
    if (gated_here(rt, req) && rn_gate_check(rt->gate, req, 0, NULL, NULL) == RN_GATE_DONE)
        return; /* refused from its head: none of its body is read */
    int write =
        req->method == RN_HTTP_POST || req->method == RN_HTTP_PUT || req->method == RN_HTTP_DELETE;
    /* a POST may get an early answer (ext §5.5); in cluster mode every
     * write is routed from its head (§5.7) */
    if (!rt->ready || !(req->method == RN_HTTP_POST || (write && rn_routing_active())) ||
        (req->route_flags & RN_REQUEST_PEER_LISTENER)) /* refused by rn_router_handle */
        return;
    const char *target = req->target;
    const char *q = memchr(target, '?', req->target_len);
    size_t path_len = q ? (size_t)(q - target) : req->target_len;
    size_t plen = sizeof V1_PREFIX - 1, alen = sizeof ADMIN_PREFIX - 1;
    if (path_len > plen && memcmp(target, V1_PREFIX, plen) == 0) {
        if (reserved_prefix(target + plen, path_len - plen))
            return;
        req->route = RN_ROUTE_V1;
        rn_v1_answer_early(rt->streams, req, target + plen, path_len - plen);
    } else if (path_len > 1 && target[0] == '/' &&
               !(path_len > alen && memcmp(target, ADMIN_PREFIX, alen) == 0)) {
        req->route = RN_ROUTE_BUCKET;
        rn_bucket_answer_early(rt->streams, req, target, path_len);
    }
}

/* The routing decision at debug level: method, path without the query (which
 * may carry credentials), and where the request went. */
static void log_route(const rn_request *req, const char *to) {
    const char *q = memchr(req->target, '?', req->target_len);
    int path_len = (int)(q ? (size_t)(q - req->target) : req->target_len);
    rn_log(RN_LOG_DEBUG, "route", "%s %.*s -> %s", req->method_name ? req->method_name : "-",
           path_len, req->target, to);
}

/* The gate's wait for req ended: it goes on when admitted. */
static void gated(rn_request *req, void *arg) {
    if (rn_gate_admitted(req) && !rn_request_gone(req))
        rn_router_handle(req, arg);
}

void rn_router_handle(rn_request *req, void *arg) {
    rn_router *rt = arg;
    if (req->timed_out && req->body_grace_ms) { /* the gate's floor cut it: the gate answers */
        log_route(req, "408 BODY_TOO_SLOW (below the tenant's min_body_bytes_per_second)");
        rn_gate_refuse(req, RN_E_GW_BODY_TOO_SLOW, 0);
        return;
    }
    if (req->timed_out) { /* nothing of it reached a route: refused */
        log_route(req, "408 BODY_TOO_SLOW (not received within --request-timeout-ms)");
        rn_reply_error(req, RN_E_REQUEST_TIMEOUT, NULL);
        return;
    }
    if (gated_here(rt, req) && rn_gate_check(rt->gate, req, 1, gated, rt) != RN_GATE_PASS)
        return; /* answered, or waiting */
    if (req->body_too_large) {
        log_route(req, "413 REQUEST_TOO_LARGE (body over --max-body-bytes)");
        rn_buf extra = {0};
        rn_buf_appendf(&extra, "Ursula-Max-Request-Bytes: %zu\r\n", rt->max_body_bytes);
        rn_reply_error(req, RN_E_REQUEST_TOO_LARGE, &extra);
        return;
    }
    if (req->body_over_budget) { /* admission: nothing was read or applied */
        log_route(req, "503 (request bodies over --max-body-bytes-in-flight)");
        rn_buf extra = {0};
        rn_buf_append_str(&extra, "Retry-After: 1\r\n");
        rn_reply_error(req, RN_E_INGRESS_BODY_BYTES, &extra);
        return;
    }
    const char *target = req->target;
    const char *q = memchr(target, '?', req->target_len);
    size_t path_len = q ? (size_t)(q - target) : req->target_len;
    const char *query = q ? q + 1 : target + req->target_len;
    size_t query_len = req->target_len - (size_t)(query - target);
    if (req->method == RN_HTTP_OPTIONS) {
        log_route(req, "CORS preflight");
        rn_reply_preflight(req, 1);
        return;
    }
    size_t alen = sizeof ADMIN_PREFIX - 1;
    if (path_len > alen && memcmp(target, ADMIN_PREFIX, alen) == 0) {
        req->route = RN_ROUTE_OPS;
        log_route(req, "operations (/__runnel/)");
        rt->ops_handler(req, target + alen, path_len - alen, query, query_len, rt->ops_arg);
        return;
    }
    if (req->route_flags & RN_REQUEST_PEER_LISTENER) {
        log_route(req, "404 (a stream route on the peer listener)");
        rn_reply_error(req, RN_E_PUBLIC_LISTENER_ONLY, NULL);
        return;
    }
    if (!rt->ready) {
        log_route(req, "503 (recovering)");
        rn_buf extra = {0};
        rn_buf_append_str(&extra, "Retry-After: 1\r\n");
        rn_reply_error(req, RN_E_RECOVERING, &extra);
        return;
    }
    size_t plen = sizeof V1_PREFIX - 1;
    if (path_len > plen && memcmp(target, V1_PREFIX, plen) == 0) {
        const char *rest = target + plen;
        size_t rest_len = path_len - plen, seg = reserved_prefix(rest, rest_len);
        req->route = seg ? RN_ROUTE_SUBS : RN_ROUTE_V1;
        log_route(req, seg ? "subscriptions (/v1/stream/__ds/)" : "v1 stream");
        if (seg)
            rn_subs_handle(rt->subs, req, rest + seg, rest_len - seg);
        else
            rn_v1_route(rt->streams, req, rest, rest_len, query, query_len);
        return;
    }
    if (path_len < 1 || target[0] != '/') {
        log_route(req, "404 (not a path)");
        rn_reply_error(req, RN_E_NOT_FOUND, NULL);
        return;
    }
    req->route = RN_ROUTE_BUCKET;
    log_route(req, "bucket stream");
    rn_bucket_route(rt->streams, req, target, path_len, query, query_len);
}
