/*
 * bucket_usage.c — per-bucket request counters. See bucket_usage.h.
 */
#include "ops/bucket_usage.h"
#include "util/metrics.h"
#include "util/text.h"

#include <stdlib.h>
#include <string.h>

#define V1_PREFIX "/v1/stream/"
#define NS_MAX 1024

/* The namespace a stream route's target names into out: the bucket of
 * /{bucket}/..., or the first segment of a /v1/stream/ name (decoded).
 * Returns its length, 0 for none. */
static size_t namespace_of(const rn_request *req, char out[NS_MAX]) {
    const char *t = req->target, *q = memchr(t, '?', req->target_len);
    size_t len = q ? (size_t)(q - t) : req->target_len, plen = sizeof V1_PREFIX - 1;
    if (req->route == RN_ROUTE_V1 && len > plen && memcmp(t, V1_PREFIX, plen) == 0) {
        t += plen;
        len -= plen;
    } else if ((req->route == RN_ROUTE_BUCKET || req->route == RN_ROUTE_SUBRESOURCE) && len > 1) {
        t++;
        len--;
    } else {
        return 0;
    }
    char decoded[NS_MAX];
    long n = len <= NS_MAX ? rn_percent_decode(t, len, decoded) : -1;
    if (n <= 0)
        return 0;
    const char *slash = memchr(decoded, '/', (size_t)n);
    if (!slash || slash == decoded)
        return 0; /* a name without a namespace */
    memcpy(out, decoded, (size_t)(slash - decoded));
    return (size_t)(slash - decoded);
}

void rn_bucket_usage_count(rn_bucket_usage *u, rn_engine *e, const rn_request *req) {
    char ns[NS_MAX];
    size_t len = e ? namespace_of(req, ns) : 0;
    if (!len || !rn_engine_namespace_exists(e, ns, len))
        return;
    rn_bucket_counters *c = rn_map_get(&u->by_ns, ns, len);
    if (!c) {
        c = rn_xcalloc(1, sizeof *c + len);
        memcpy(c + 1, ns, len);
        rn_map_put(&u->by_ns, (char *)(c + 1), len, c);
    }
    if (req->method == RN_HTTP_GET || req->method == RN_HTTP_HEAD)
        c->reads++;
    else if (req->method == RN_HTTP_POST || req->method == RN_HTTP_PUT ||
             req->method == RN_HTTP_DELETE)
        c->writes++;
    else
        c->other++;
    c->bytes_in += req->body.len;
    c->bytes_out += req->bytes_out;
}

const rn_bucket_counters *rn_bucket_usage_of(const rn_bucket_usage *u, const char *ns, size_t len) {
    return rn_map_get(&u->by_ns, ns, len);
}

void rn_bucket_usage_free(rn_bucket_usage *u) {
    rn_map_free_values(&u->by_ns);
}
