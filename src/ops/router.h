/*
 * router.h — the first stop of every request: refuses oversized bodies,
 * answers CORS preflights, and hands the request to the surface that owns
 * its path: /__runnel/... (operational routes, handled by ops_handler),
 * /v1/stream/__ds/... (the reserved subscription APIs, subs.h),
 * /v1/stream/... (v1.c), everything else the bucket surface (bucket.c).
 * Until `ready` (the store is still recovering) every route but the
 * operational ones answers 503. It is part of the composition layer (ops/):
 * it joins the surfaces and the subscriptions, which include neither each
 * other nor ops/ (docs/ARCHITECTURE.md, "Layers").
 *
 * With a gate (runnel serve --tenants, gateway/gate.h), every request meets
 * it first: from its head when its body follows (a refusal then reads none
 * of the body), else, or when the decision must wait, once it is whole.
 */
#ifndef RN_ROUTER_H
#define RN_ROUTER_H

#include "gateway/gate.h"
#include "subs/subs.h"
#include "surface/streams.h"
#include "transport/http.h"

typedef void (*rn_ops_handler)(rn_request *req, const char *path, size_t path_len,
                               const char *query, size_t query_len, void *arg);

typedef struct {
    rn_surface *streams;
    rn_subs *subs;
    size_t max_body_bytes;      /* reported with 413 answers */
    int ready;                  /* recovery finished: streams and subs are set */
    rn_ops_handler ops_handler; /* /__runnel/ (path after the prefix) */
    void *ops_arg;
    rn_gate *gate; /* NULL: none (anyone who reaches the port may do anything) */
} rn_router;

/* The transport's on_headers hook; arg is an rn_router. Offers a POST to a
 * stream of either surface, whose body is not read yet, to the early
 * answers of ext §5.5 (streams.h); answers nothing otherwise. */
void rn_router_answer_early(rn_request *req, void *arg);

/* rn_request_fn for the transport; arg is an rn_router. */
void rn_router_handle(rn_request *req, void *arg);

#endif
