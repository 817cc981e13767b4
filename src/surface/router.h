/*
 * router.h — the first stop of every request: refuses oversized bodies,
 * answers CORS preflights, and hands the request to the surface that owns
 * its path: /v1/stream/__ds/... (the reserved subscription APIs, subs.h),
 * /v1/stream/... (v1.c), /__... (operational routes; none yet: 404),
 * everything else the bucket surface (bucket.c).
 */
#ifndef RN_ROUTER_H
#define RN_ROUTER_H

#include "subs/subs.h"
#include "surface/streams.h"
#include "transport/http.h"

typedef struct {
    rn_surface *streams;
    rn_subs *subs;
    size_t max_body_bytes; /* reported with 413 answers */
    int test_hooks;        /* /__runnel/test/ routes exist */
} rn_router;

/* rn_request_fn for the transport; arg is an rn_router. */
void rn_router_handle(rn_request *req, void *arg);

#endif
