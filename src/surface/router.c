/*
 * router.c — request routing. See router.h.
 */
#include "surface/router.h"
#include "surface/bucket.h"
#include "surface/reply.h"
#include "surface/v1.h"

#include <string.h>

#define V1_PREFIX "/v1/stream/"

void rn_router_handle(rn_request *req, void *arg) {
    rn_router *rt = arg;
    if (req->body_too_large) {
        rn_buf extra = {0};
        rn_buf_appendf(&extra, "Ursula-Max-Request-Bytes: %zu\r\n", rt->max_body_bytes);
        rn_reply_error(req, RN_E_REQUEST_TOO_LARGE, &extra);
        return;
    }
    const char *target = req->target;
    const char *q = memchr(target, '?', req->target_len);
    size_t path_len = q ? (size_t)(q - target) : req->target_len;
    const char *query = q ? q + 1 : target + req->target_len;
    size_t query_len = req->target_len - (size_t)(query - target);
    if (req->method == RN_HTTP_OPTIONS) {
        rn_reply_preflight(req);
        return;
    }
    size_t plen = sizeof V1_PREFIX - 1;
    if (path_len > plen && memcmp(target, V1_PREFIX, plen) == 0) {
        rn_v1_route(rt->streams, req, target + plen, path_len - plen, query, query_len);
        return;
    }
    if (path_len < 1 || target[0] != '/' || (path_len >= 3 && memcmp(target, "/__", 3) == 0)) {
        rn_reply_error(req, RN_E_NOT_FOUND, NULL);
        return;
    }
    rn_bucket_route(rt->streams, req, target, path_len, query, query_len);
}
