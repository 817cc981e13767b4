/*
 * live_int.h — what the files of src/live/ share: the rn_live structure,
 * the reader lifecycle of live.c, and the entry points of the long-poll
 * (longpoll.c) and SSE (sse.c) readers that live.c dispatches to. Private
 * to src/live/.
 */
#ifndef RN_LIVE_INT_H
#define RN_LIVE_INT_H

#include "live/live.h"

/* The last SSE data event built, with what it was built from, and the
 * chunk that carries it with its control event (sse.c). After an append,
 * every reader at the old tail wants the same event: they share one read
 * of the stream and one encoding. Readers whose control event is the same
 * too (the cursor of the current interval, the same closure) share the
 * framed chunk as well, which the transport writes from its own bytes:
 * fan-out then costs no formatting, allocation or copy per reader. A reader
 * whose cursor differs (it sent one that is not behind the interval) gets
 * its own chunk. Bounded by one event's size, plus chunks the transport
 * still holds for sockets that did not take them at once. */
typedef struct {
    uint64_t stream_id, incarnation, offset, tail;
    size_t max_bytes;
    rn_sse_encoding encoding;
    long got; /* stream bytes the event carries */
    rn_buf event;
    rn_http_chunk *chunk;  /* event + control event, framed; NULL until built */
    uint64_t chunk_cursor; /* the cursor interval its control event carries */
    int chunk_closed;      /* the stream was closed when it was built */
} rn_sse_shared;

struct rn_live {
    uv_loop_t *loop;
    rn_engine *engine;
    rn_live_config cfg;
    rn_list rooms; /* the streams that have readers (live.c) */
    size_t count;  /* readers registered */
    rn_sse_shared shared;
};

/* live.c: registers the admitted reader r on s, with its timeout; from
 * then on live handles r->req's abort. */
void rn_live_register(rn_live *live, rn_live_reader *r, rn_stream *s, uint64_t timeout_ms);
/* live.c: ends r's hold on everything (idempotent): unregisters it, drops
 * its request hooks and closes its timer, after which ops->release runs. */
void rn_live_finish(rn_live_reader *r);

/* longpoll.c: the stream of the parked long-poll r changed. */
void rn_live_poll_changed(rn_live_reader *r, rn_stream *s);
/* longpoll.c: answers r because of why, and finishes it. */
void rn_live_poll_end(rn_live_reader *r, rn_stream *s, rn_live_end why);

/* sse.c: the stream of the SSE reader r changed. */
void rn_live_sse_changed(rn_live_reader *r, rn_stream *s);
/* sse.c: ends r's response because of why (with an error event when
 * REWRITTEN, REMOVED or FAILED and the surface sends one), and finishes
 * it. */
void rn_live_sse_end(rn_live_reader *r, rn_live_end why);
/* sse.c: frees the shared event. */
void rn_live_sse_free_shared(rn_live *live);

#endif
