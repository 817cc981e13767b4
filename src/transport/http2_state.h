/*
 * http2_state.h — the state of an HTTP/2 connection and of its streams,
 * shared by the two halves of the protocol (private to http2*.c):
 * http2_recv.c holds nghttp2's callbacks (each stream's request built from
 * its fields and body and handed to the handler, the reset that ends an
 * early answer, the control-frame bound), http2.c the session and what
 * leaves it (answers queued per stream, frames written, the timer, the
 * rn_protocol calls).
 *
 * Every nghttp2 call on the session runs from http2.c, inside enter/leave;
 * the callbacks of http2_recv.c run inside those calls and touch nghttp2
 * only to submit frames. A stream is freed only by the outermost leave.
 */
#ifndef RN_TRANSPORT_HTTP2_STATE_H
#define RN_TRANSPORT_HTTP2_STATE_H

#include <nghttp2/nghttp2.h>
#include <stddef.h>
#include <stdint.h>

#include "transport/conn.h"
#include "transport/request.h"

typedef struct rn_http2 rn_http2;
typedef struct h2_piece h2_piece; /* answer bytes not yet in frames (http2.c) */
typedef struct h2_span h2_span;   /* a header's place in the raw bytes (http2_recv.c) */

typedef struct h2_stream {
    rn_http2 *h;
    struct h2_stream *prev, *next; /* the connection's streams */
    struct h2_stream *ready_next;  /* requests to hand to the handler */
    int32_t id;
    rn_exchange *x; /* NULL once its answer finished or it was aborted */
    h2_span *spans;
    size_t span_count, span_cap;
    size_t method_off, path_off, path_len, authority_off, authority_len;
    int has_method, has_path, has_authority;
    int refusal;         /* 431: the head passed its bounds */
    int headers_done;    /* the request's head arrived (later headers are trailers) */
    int declared;        /* content-length given */
    int awaits_continue; /* Expect: 100-continue, and no 100 sent */
    int draining;        /* answered early: the body's rest is dropped as it comes */
    uint64_t body_declared, body_received; /* the content-length; DATA bytes so far */
    uint64_t answered_at;                  /* uv_now() when a draining stream's answer left */
    int ready;                             /* on the ready list, or dispatched */
    int early;                             /* handed over before its body was received */
    int closed;                            /* nghttp2 closed it */
    int eof;                               /* every answer byte was queued */
    int deferred;                          /* nghttp2 waits for resume_data */
    int file_piece;     /* a file piece is queued: pump the next once it is taken */
    int drain_wanted;   /* queued() reported bytes: tell on_drain once they are taken */
    uint64_t body_left; /* of a sized answer, still to be queued */
    uint64_t began;     /* uv_now() at its first frame */
    uint64_t taken;     /* answer bytes taken into frames */
    uint64_t watch_taken, progress_at; /* the stall watch: taken when it last moved */
    h2_piece *out, *out_tail;
    size_t out_bytes;
} h2_stream;

struct rn_http2 {
    rn_conn *conn;
    nghttp2_session *session;
    h2_stream *streams;
    h2_stream *ready, *ready_tail;
    size_t open;    /* streams nghttp2 has not closed */
    int depth;      /* calls into http2.c on the stack */
    int in_session; /* inside nghttp2_session_mem_recv/mem_send */
    int flushing, flush_again;
    uint64_t idle_since;   /* uv_now() when the last stream closed */
    uint64_t window_start; /* control frames counted since */
    uint32_t window_frames;
};

/* ---- http2.c: streams ---- */

/* A new stream `id` of h for a request whose HEADERS begin: its exchange
 * made (method "-", empty target until the head is complete), linked
 * first in h's streams, counted open. */
h2_stream *h2_stream_new(rn_http2 *h, int32_t id);

/* nghttp2 closed s (s not closed before): its queued answer bytes are
 * dropped, it no longer counts open, and its request is aborted unless its
 * answer was all queued (then the call that queued it finishes it). */
void h2_stream_closed(h2_stream *s);

/* ---- http2_recv.c: what arrives ---- */

/* The callbacks every server session is made with (made once, never
 * freed); their user data is the connection's rn_http2. */
nghttp2_session_callbacks *h2_session_callbacks(void);

/* Hands the requests made ready by the callbacks to the server's handler
 * (a refused head is answered with its refusal instead), in the order they
 * became ready, until none is left or the connection closed. Called
 * outside nghttp2 (never from a callback), inside enter/leave. */
void h2_dispatch_ready(rn_http2 *h);

#endif
