/*
 * bucket_usage.h — each bucket's requests and bytes in and out since this
 * process started (the operator's usage report, docs/ADMIN.md): counted
 * when a request of a stream route completes, per namespace of the state
 * (a bucket; engine.h), so the table never holds more entries than the
 * state holds namespaces, whatever paths clients send.
 */
#ifndef RN_OPS_BUCKET_USAGE_H
#define RN_OPS_BUCKET_USAGE_H

#include <stdint.h>

#include "engine/engine.h"
#include "transport/http.h"
#include "util/map.h"

typedef struct {
    uint64_t reads;               /* GET and HEAD */
    uint64_t writes;              /* POST, PUT, DELETE */
    uint64_t other;               /* every other method */
    uint64_t bytes_in, bytes_out; /* request bodies received, answer bodies sent */
} rn_bucket_counters;

typedef struct {
    rn_map by_ns; /* namespace -> rn_bucket_counters (the key follows the counters) */
} rn_bucket_usage;

/* Counts a completed request (the transport's on_complete) of the v1 or
 * the bucket surface (req->route), for the namespace its path names when
 * e (NULL: not ready) holds it. */
void rn_bucket_usage_count(rn_bucket_usage *u, rn_engine *e, const rn_request *req);
/* The counters of namespace ns, or NULL when nothing was counted. */
const rn_bucket_counters *rn_bucket_usage_of(const rn_bucket_usage *u, const char *ns, size_t len);
void rn_bucket_usage_free(rn_bucket_usage *u);

#endif
