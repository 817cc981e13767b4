/*
 * streams.h — the stream operations of both HTTP surfaces: create, append,
 * close, delete, HEAD, catch-up reads, long-poll and SSE, mapped onto engine
 * calls and rendered as HTTP. The two surfaces route to the same code and
 * differ only in an rn_profile: the v1 surface (/v1/stream/{path}) follows
 * PROTOCOL.md (JSON reads as arrays), the bucket surface
 * (/{bucket_id}/{stream_id}) follows extensions.txt (NDJSON reads, read-path
 * parameters, SSE error events). streams.c dispatches and answers the
 * mutations, reads.c the reads; long-polls that wait and SSE responses are
 * handed to live/ (live.h).
 */
#ifndef RN_STREAMS_H
#define RN_STREAMS_H

#include <stdint.h>
#include <uv.h>

#include "engine/engine.h"
#include "live/live.h"
#include "transport/http.h"

typedef struct rn_surface rn_surface;

/* How a surface renders the shared operations. */
typedef struct {
    const char *name;         /* "v1" or "bucket", also the ETag's representation tag */
    int ndjson_reads;         /* JSON streams read as NDJSON, not as an array */
    int ext_read_defaults;    /* without timeout_ms and max_bytes (ext §9, every surface), a
                               * long-poll waits 1 s and a read takes 8 MiB at most, as the
                               * extension's server; else --long-poll-timeout-ms and
                               * --max-read-bytes */
    int sse_error_events;     /* a live SSE read ending in error sends an error event */
    int offset_past_tail_416; /* a read offset past the tail answers 416, not 400 */
    int bucket_not_found;     /* 404s name an empty bucket BUCKET_NOT_FOUND */
} rn_profile;

extern const rn_profile RN_PROFILE_V1;
extern const rn_profile RN_PROFILE_BUCKET;

typedef struct {
    uint64_t long_poll_timeout_ms; /* v1 surface; the bucket surface uses timeout_ms */
    size_t max_read_bytes;         /* per catch-up response and per SSE event */
    size_t max_body_bytes;         /* reported as Ursula-Max-Request-Bytes */
    struct rn_tiers *tiers;        /* snapshot bodies and staged parts (tiers/tiers.h) */
    /* Large appends may be taken while their body arrives (arriving.c):
     * nothing in front of the surface reads the body first (no gate). */
    int bodies_arrive;
} rn_surface_config;

/* The surfaces park and stream their live reads in live, whose bounds they
 * answer (503 LIVE_READ_BACKPRESSURE, for the server's and the stream's). */
rn_surface *rn_surface_new(uv_loop_t *loop, rn_engine *engine, rn_live *live,
                           const rn_surface_config *cfg);
rn_engine *rn_surface_engine(const rn_surface *sf);
const rn_surface_config *rn_surface_cfg(const rn_surface *sf);

/* Parses a request's Stream-Incarnation header. Returns 0 when absent (and
 * sets *present = 0) or valid, -1 when malformed or repeated (answer 400). */
int rn_request_incarnation(const rn_request *req, int *present, uint64_t *token);

/* Handles a request for the stream whose engine key (its path: the v1 path,
 * or "bucket_id/stream_id") is key. The query is the raw query string. */
void rn_streams_handle(rn_surface *sf, rn_request *req, const rn_profile *prof, const char *key,
                       size_t key_len, const char *query, size_t query_len);

/* From the request's head (the transport's on_headers hook): req is a POST
 * to the stream whose engine key is key, on surface prof. Answers a
 * producer write before its body is read (ext §5.5) when the answer
 * depends on its headers alone (producer headers and Stream-Incarnation,
 * and the engine finds it a repeat, 204 with its receipt, or a key
 * conflict, 403); or takes a large append whose body is to be written as
 * it arrives (arriving.c). Returns 1 when it did either (the request is
 * the surface's); 0 (nothing sent) when the request goes on to
 * rn_streams_handle() with its body. */
int rn_streams_answer_early(rn_surface *sf, rn_request *req, const rn_profile *prof,
                            const char *key, size_t key_len);

/* Answers a request with the refusal an engine op ended in (any result but
 * a success), with the headers that refusal carries. */
void rn_reply_refusal(rn_request *req, const rn_op *op);

void rn_surface_free(rn_surface *sf);

#endif
