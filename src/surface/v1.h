/*
 * v1.h — the base Durable Streams protocol surface at /v1/stream/{path}
 * (PROTOCOL.md): create, append, close, delete, HEAD, catch-up reads,
 * long-poll and SSE, mapped onto engine calls and rendered as HTTP.
 */
#ifndef RN_V1_H
#define RN_V1_H

#include <stdint.h>
#include <uv.h>

#include "engine/engine.h"
#include "transport/http.h"

typedef struct rn_surface rn_surface;

typedef struct {
    uint64_t long_poll_timeout_ms;
    uint64_t sse_max_duration_ms; /* SSE responses end after this (CDN collapsing) */
    size_t max_read_bytes;        /* per catch-up response and per SSE event */
    size_t sse_queue_bytes;       /* pause an SSE reader with this much unsent */
} rn_surface_config;

rn_surface *rn_surface_new(uv_loop_t *loop, rn_engine *engine, const rn_surface_config *cfg);
/* Handles a request whose target starts with /v1/stream/. */
void rn_v1_handle(rn_surface *sf, rn_request *req, const char *path, size_t path_len,
                  const char *query, size_t query_len);
/* Answers every parked live read as if it had timed out (shutdown). */
void rn_surface_end_live_reads(rn_surface *sf);
/* Number of live reads (long-poll and SSE) in progress. */
size_t rn_surface_live_reads(const rn_surface *sf);
void rn_surface_free(rn_surface *sf);

#endif
