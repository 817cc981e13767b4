/*
 * router.h — the first stop of every request: refuses oversized bodies,
 * answers CORS preflights, and hands the request to the surface that owns
 * its path (/v1/stream/... today; the bucket surface and /__runnel/ later).
 */
#ifndef RN_ROUTER_H
#define RN_ROUTER_H

#include "surface/v1.h"
#include "transport/http.h"

typedef struct {
    rn_surface *v1;
    size_t max_body_bytes; /* reported with 413 answers */
} rn_router;

/* rn_request_fn for the transport; arg is an rn_router. */
void rn_router_handle(rn_request *req, void *arg);

#endif
