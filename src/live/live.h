/*
 * live.h — live reads: long-polls parked at a stream's tail and SSE
 * responses that follow a stream, held by an rn_live that the server makes.
 *
 * A surface parses a live read, answers at once what it can (a long-poll
 * with data, a closed stream), asks rn_live_admit() whether one more reader
 * fits the bounds, and then hands the reader over: rn_live_poll() parks a
 * long-poll, rn_live_sse() starts and streams an SSE response. From then on
 * live owns the reader: its timer, its request's abort, drain and input-end
 * hooks, its wake-ups (rn_live_observer, which the engine calls after a
 * change is applied), the SSE events, and its end: a long-poll when data
 * arrives, any read at its timeout, when the stream's history is rewritten
 * (its offsets belong to the old history) or the stream disappears, at
 * shutdown (rn_live_end_all), when its client goes away, or when its client
 * half-closes (as at its timeout: the connection stays up for that answer).
 * What the answers look like, the surface says through rn_live_ops; when
 * live no longer holds a reader, ops->release gives it back.
 *
 * Each stream with readers has one list of them; rn_live counts them all,
 * for the bounds and the metrics. Everything runs on the loop thread.
 */
#ifndef RN_LIVE_H
#define RN_LIVE_H

#include <uv.h>

#include "engine/engine.h"
#include "live/cursor.h"
#include "transport/http.h"
#include "util/buf.h"
#include "util/list.h"

typedef struct rn_live rn_live;
typedef struct rn_live_reader rn_live_reader;

typedef struct {
    size_t max_reads;             /* readers at once (0: no bound) */
    size_t max_reads_per_stream;  /* readers of one stream at once (0: no bound) */
    size_t sse_queue_bytes;       /* an SSE reader with more unsent pauses until it drains */
    uint64_t sse_max_duration_ms; /* an SSE response ends after this (CDN collapsing) */
    /* Called around the wake-up of a changed stream's readers with
     * wake_arg (the server brackets it with the transport's write batch, so
     * that the writes it makes go out in parallel). NULL: none. */
    void (*wake_begin)(void *arg);
    void (*wake_end)(void *arg);
    void *wake_arg;
} rn_live_config;

/* Why a live read is answered or ends. */
typedef enum {
    RN_LIVE_DATA,      /* long-poll: the stream has bytes past its offset */
    RN_LIVE_TIMEOUT,   /* its time is up, the stream closed at its offset, or shutdown */
    RN_LIVE_REWRITTEN, /* the stream's history was rewritten */
    RN_LIVE_REMOVED,   /* the stream is about to disappear */
    RN_LIVE_FAILED,    /* SSE: a read of the stream failed */
    RN_LIVE_DAMAGED,   /* SSE: bytes it needs do not match their checksums (none sent) */
    RN_LIVE_COLD,      /* SSE: history it needs could not be fetched from the cold store */
    RN_LIVE_EXPIRED,   /* SSE: the request's credential expired (its gate said when) */
} rn_live_end;

/* How SSE data events carry the stream's bytes. */
typedef enum {
    RN_SSE_TEXT,       /* one data: line per line (text, NDJSON) */
    RN_SSE_JSON_ARRAY, /* a JSON stream's messages as one array per event */
    RN_SSE_BASE64,     /* binary content types (extensions §9.5) */
} rn_sse_encoding;

/* What live needs from the surface that hands it readers: how to answer
 * and how to spell what it writes. Called on the loop thread; the stream
 * passed is the reader's, valid during the call. */
typedef struct {
    /* Answers the long-poll r (its whole response) because of why: DATA,
     * TIMEOUT (204: nothing new), REWRITTEN or REMOVED. */
    void (*answer_poll)(rn_live_reader *r, rn_stream *s, rn_live_end why);
    /* Appends the data of the error event that ends the SSE response of r
     * because of why (REWRITTEN, REMOVED, FAILED or COLD): one line.
     * Appending nothing sends no error event. */
    void (*sse_error)(const rn_live_reader *r, rn_live_end why, rn_buf *out);
    /* Appends the offset token of a position (SSE control events). */
    void (*append_offset)(rn_buf *out, uint64_t position);
    /* Live no longer holds r (called once, after it ended): the surface
     * may free it and drop its hold on r->req. */
    void (*release)(rn_live_reader *r);
} rn_live_ops;

/* A live read; the surface embeds it in its request state. */
struct rn_live_reader {
    /* Set by the surface before it hands the reader over. */
    rn_request *req; /* held by the surface until ops->release */
    const rn_live_ops *ops;
    uint64_t offset;          /* the next byte to deliver (SSE: advances) */
    size_t max_bytes;         /* SSE: stream bytes per data event */
    rn_cursor_echo cursor;    /* the client's echo, for the cursors sent */
    rn_sse_encoding encoding; /* SSE */
    /* Private to live/. */
    rn_live *live;     /* set when handed over */
    rn_stream *stream; /* registered on; NULL once unregistered */
    rn_list_node node; /* in its stream's list */
    uv_timer_t timer;  /* its timeout */
    int sse;           /* an SSE response, else a long-poll */
    int paused;        /* SSE: waiting for its socket to drain, or for cold_wait */
    int cold_wait;     /* SSE: a fetch of cold history holds it (its callback resumes it) */
    int release_due;   /* its timer closed during cold_wait: the fetch's callback releases it */
    int ended;
    int until_expiry; /* its timer runs to its credential's expiry, not its own time */
};

/* Whether one more reader of s fits the bounds. */
typedef enum {
    RN_LIVE_ADMITTED,
    RN_LIVE_FULL,        /* the server holds max_reads readers */
    RN_LIVE_STREAM_FULL, /* s has max_reads_per_stream readers */
} rn_live_admission;

/* The engine is the one whose streams live reads follow (SSE reads it). */
rn_live *rn_live_new(uv_loop_t *loop, rn_engine *engine, const rn_live_config *cfg);
/* Frees live, which holds no reader (NULL: nothing). */
void rn_live_free(rn_live *live);
rn_live_admission rn_live_admit(const rn_live *live, const rn_stream *s);
/* Parks the long-poll r on s for timeout_ms: r was admitted, its offset is
 * s's tail and s is open. */
void rn_live_poll(rn_live *live, rn_live_reader *r, rn_stream *s, uint64_t timeout_ms);
/* Starts r's SSE response (200, chunked) with the surface's header lines
 * head (taken over: what the surface says of the stream and its data's
 * content type) and the event stream's own, then streams s to r from
 * r->offset (<= the tail) for at most sse_max_duration_ms: r was admitted
 * and nothing was answered on r->req. Sends what is there and a control
 * event at once. */
void rn_live_sse(rn_live *live, rn_live_reader *r, rn_stream *s, rn_buf *head);
/* The engine observer (rn_engine_observe, with the rn_live as arg). */
void rn_live_observer(rn_stream *s, rn_stream_event ev, void *arg);
/* Ends every reader as at its timeout (shutdown). */
void rn_live_end_all(rn_live *live);
/* Readers registered (the runnel_live_readers gauge). */
size_t rn_live_count(const rn_live *live);

#endif
