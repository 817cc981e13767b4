/*
 * http2.c — HTTP/2 on a connection (rn_protocol) over libnghttp2: each
 * stream one request (an rn_exchange handed to the server's handler), its
 * answer submitted as HEADERS and DATA frames, the frames written through
 * the shared write path (conn_write), the protocol's limits and floods.
 *
 * Input: received() feeds c->input to nghttp2_session_mem_recv; requests
 * completed meanwhile are handed to the handler only after it returns (no
 * nghttp2 call from inside its callbacks). Output: an answer's bytes wait
 * in its stream's queue (h2_piece: owned bytes counted in the answer
 * budget, or a reference to a shared SSE chunk, whose payload goes out
 * without its HTTP/1.1 framing); flush() pulls frames from nghttp2 into
 * conn_write until the socket holds OUTPUT_HIGH_BYTES, and `written`
 * resumes it, so per-stream flow control and a slow socket both leave the
 * bytes in the stream's queue, which is what queued(x) reports: an SSE
 * reader pauses at --sse-queue-bytes of its own, not of the connection's.
 *
 * An answer given before the request's body was received (an early answer
 * from the on_headers hook, 413, 503 over the body budget, 408) resets the
 * stream with NO_ERROR once its last frame is sent (RFC 9113 §8.1): the
 * body is never read. Unless the rest of a declared body fits in the
 * stream's receive window and no 100 Continue is awaited: the client then
 * sends it without waiting for us, and it is dropped as it comes until the
 * client ends the stream (or the request timeout resets it). Clients that
 * fail an upload whose stream is reset under them (curl 7.88, Debian 12's,
 * fails about a third of the writes a cluster follower redirects) then see
 * an ordinary end. Streams are freed outside nghttp2 and the handler's
 * calls (leave()), never while an outer call is on the stack.
 *
 * The connection's one timer ticks every TICK_MS while streams are open: a
 * request not received within --request-timeout-ms answers 408, a stream
 * whose answer bytes wait and that took none for --idle-timeout-ms (a
 * window the client never opens) is reset with CANCEL; with no stream open
 * for --idle-timeout-ms the connection ends with GOAWAY.
 */
#include "transport/http2.h"
#include "transport/request.h"
#include "transport/response.h"
#include "transport/write.h"
#include "util/metrics.h"
#include "util/text.h"

#include <assert.h>
#include <ctype.h>
#include <nghttp2/nghttp2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define OUTPUT_HIGH_BYTES (256 * 1024) /* stop pulling frames (and reading) past this */
#define FRAME_BATCH_BYTES (64 * 1024)  /* frames gathered into one conn_write */
#define TICK_MS 1000

typedef struct rn_http2 rn_http2;

/* Answer bytes of a stream not yet taken into DATA frames. */
typedef struct h2_piece {
    struct h2_piece *next;
    rn_buf owned;         /* owned bytes (counted in answer_bytes_held), or */
    rn_http_chunk *chunk; /* a shared chunk's reference */
    const uint8_t *at;    /* what is left to take */
    size_t left;
} h2_piece;

/* A header's position in the exchange's raw bytes while the head arrives. */
typedef struct {
    size_t name_off, name_len, value_off, value_len;
} h2_span;

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
    int depth;      /* calls into this file on the stack */
    int in_session; /* inside nghttp2_session_mem_recv/mem_send */
    int flushing, flush_again;
    uint64_t idle_since;   /* uv_now() when the last stream closed */
    uint64_t window_start; /* control frames counted since */
    uint32_t window_frames;
};

static rn_http2 *http2_of(const rn_conn *c) {
    return c->proto_state;
}

static h2_stream *stream_of(const rn_exchange *x) {
    return x->stream;
}

int http2_preface_match(const uint8_t *bytes, size_t len) {
    size_t n = len < HTTP2_PREFACE_LEN ? len : HTTP2_PREFACE_LEN;
    if (memcmp(bytes, HTTP2_PREFACE, n) != 0)
        return 0;
    return len >= HTTP2_PREFACE_LEN ? 1 : -1;
}

static void leave(rn_http2 *h);
static void flush(rn_http2 *h);

static void enter(rn_http2 *h) {
    h->depth++;
}

/* ---- the answer queue of a stream ---- */

static void piece_free(rn_conn *c, h2_piece *p) {
    if (p->chunk)
        rn_http_chunk_release(p->chunk);
    if (p->owned.len)
        c->srv->answer_bytes_held -= p->owned.len;
    rn_buf_free(&p->owned);
    free(p);
}

static void queue_piece(h2_stream *s, h2_piece *p) {
    if (s->out_tail)
        s->out_tail->next = p;
    else
        s->out = p;
    s->out_tail = p;
    s->out_bytes += p->left;
}

/* Queues owned bytes (taken over) for s's answer. */
static void queue_bytes(h2_stream *s, rn_buf *bytes) {
    if (!bytes->len) {
        rn_buf_free(bytes);
        return;
    }
    h2_piece *p = rn_xcalloc(1, sizeof *p);
    p->owned = *bytes;
    *bytes = (rn_buf){0};
    p->at = p->owned.data;
    p->left = p->owned.len;
    s->h->conn->srv->answer_bytes_held += p->owned.len;
    queue_piece(s, p);
}

static void queue_clear(h2_stream *s) {
    while (s->out) {
        h2_piece *p = s->out;
        s->out = p->next;
        piece_free(s->h->conn, p);
    }
    s->out_tail = NULL;
    s->out_bytes = 0;
}

/* nghttp2 asks for DATA of s: what is queued, up to length. */
static ssize_t read_answer(nghttp2_session *session, int32_t id, uint8_t *buf, size_t length,
                           uint32_t *flags, nghttp2_data_source *source, void *user) {
    (void)session, (void)id, (void)user;
    h2_stream *s = source->ptr;
    size_t n = 0;
    while (n < length && s->out) {
        h2_piece *p = s->out;
        size_t k = p->left < length - n ? p->left : length - n;
        memcpy(buf + n, p->at, k);
        n += k;
        p->at += k;
        p->left -= k;
        if (p->left == 0) {
            s->out = p->next;
            if (!s->out)
                s->out_tail = NULL;
            piece_free(s->h->conn, p);
        }
    }
    s->out_bytes -= n;
    s->taken += n;
    if (!s->out && s->eof)
        *flags |= NGHTTP2_DATA_FLAG_EOF;
    else if (n == 0) {
        s->deferred = 1;
        return NGHTTP2_ERR_DEFERRED;
    }
    return (ssize_t)n;
}

/* Tells nghttp2 that s has bytes (or its end) again. */
static void resume(h2_stream *s) {
    if (s->deferred && !s->closed) {
        s->deferred = 0;
        nghttp2_session_resume_data(s->h->session, s->id);
    }
}

/* ---- streams ---- */

static h2_stream *stream_new(rn_http2 *h, int32_t id) {
    h2_stream *s = rn_xcalloc(1, sizeof *s);
    s->h = h;
    s->id = id;
    s->x = exchange_new(h->conn);
    s->x->stream = s;
    s->x->req.start_ns = uv_hrtime();
    s->x->req.method_name = "-";
    s->x->req.target = "";
    s->began = s->progress_at = uv_now(h->conn->srv->loop);
    s->next = h->streams;
    if (h->streams)
        h->streams->prev = s;
    h->streams = s;
    h->open++;
    rn_metric.h2_streams++;
    return s;
}

/* The connection lets go of s's request: reported to the access log when
 * it was answered (an SSE response the client ended), aborted when
 * `aborted`. */
static void stream_detach(h2_stream *s, int aborted) {
    rn_exchange *x = s->x;
    if (!x)
        return;
    s->x = NULL;
    x->stream = NULL;
    rn_http_server *srv = s->h->conn->srv;
    if (srv->cfg.on_complete && x->req.status > 0)
        srv->cfg.on_complete(&x->req);
    exchange_detach(x, aborted);
}

static void stream_free(h2_stream *s) {
    rn_http2 *h = s->h;
    if (s->prev)
        s->prev->next = s->next;
    else
        h->streams = s->next;
    if (s->next)
        s->next->prev = s->prev;
    queue_clear(s);
    free(s->spans);
    free(s);
}

/* ---- requests ---- */

static rn_http_method method_of(const char *m, size_t len) {
    static const struct {
        const char *name;
        rn_http_method method;
    } methods[] = {{"GET", RN_HTTP_GET}, {"HEAD", RN_HTTP_HEAD},     {"POST", RN_HTTP_POST},
                   {"PUT", RN_HTTP_PUT}, {"DELETE", RN_HTTP_DELETE}, {"OPTIONS", RN_HTTP_OPTIONS}};
    for (size_t i = 0; i < sizeof methods / sizeof methods[0]; i++)
        if (strlen(methods[i].name) == len && memcmp(methods[i].name, m, len) == 0)
            return methods[i].method;
    return RN_HTTP_OTHER;
}

/* Fills s's rn_request from the head received: method, target, headers
 * (:authority as Host when the request has none). */
static void build_request(h2_stream *s) {
    rn_exchange *x = s->x;
    rn_request *r = &x->req;
    const char *raw = (const char *)x->raw.data;
    r->method_name = s->has_method ? raw + s->method_off : "-";
    r->method = s->has_method ? method_of(r->method_name, strlen(r->method_name)) : RN_HTTP_OTHER;
    r->target = s->has_path ? raw + s->path_off : "";
    r->target_len = s->has_path ? s->path_len : 0;
    r->headers = rn_xcalloc(s->span_count + 1, sizeof *r->headers);
    size_t n = 0;
    for (size_t i = 0; i < s->span_count; i++)
        r->headers[n++] = (rn_header){raw + s->spans[i].name_off, s->spans[i].name_len,
                                      raw + s->spans[i].value_off, s->spans[i].value_len};
    if (s->has_authority && !rn_request_header(r, "host", NULL))
        r->headers[n++] = (rn_header){"host", 4, raw + s->authority_off, s->authority_len};
    r->header_count = n;
}

/* Queues s to be handed to the handler once nghttp2 returns. */
static void make_ready(h2_stream *s, int early) {
    if (s->ready || !s->x)
        return;
    s->ready = 1;
    s->early = early;
    rn_http2 *h = s->h;
    if (h->ready_tail)
        h->ready_tail->ready_next = s;
    else
        h->ready = s;
    h->ready_tail = s;
}

static void dispatch_ready(rn_http2 *h) {
    while (h->ready && !h->conn->closed) {
        h2_stream *s = h->ready;
        h->ready = s->ready_next;
        if (!h->ready)
            h->ready_tail = NULL;
        if (!s->x)
            continue; /* reset meanwhile */
        rn_http_server *srv = h->conn->srv;
        if (s->refusal) {
            rn_buf head = {0}, body = {0};
            rn_http_respond(&s->x->req, s->refusal, &head, &body);
        } else {
            srv->on_request(&s->x->req, srv->arg);
        }
    }
}

/* The head of s's request arrived and its body follows: the on_headers
 * hook may answer now (ext §5.5), a declared body past the limits is
 * refused unread, else the body is read. Returns 1 when s was handed over. */
static int head_with_body(h2_stream *s) {
    rn_exchange *x = s->x;
    rn_request *r = &x->req;
    rn_http_server *srv = s->h->conn->srv;
    const rn_header *cl = rn_request_header(r, "content-length", NULL);
    uint64_t declared = 0;
    s->declared = cl && rn_parse_strict_u64(cl->value, cl->value_len, UINT64_MAX, &declared) == 0;
    s->body_declared = declared;
    if (s->declared && declared > srv->cfg.max_body_bytes) {
        r->body_too_large = 1;
        make_ready(s, 1);
        return 1;
    }
    const rn_header *expect = rn_request_header(r, "expect", NULL);
    int wants_continue = expect && rn_ieq(expect->value, expect->value_len, "100-continue");
    s->awaits_continue = wants_continue;
    if (srv->cfg.on_headers && (wants_continue || srv->cfg.on_headers_every_body ||
                                (s->declared && declared >= RN_HTTP_EARLY_BODY_BYTES))) {
        s->ready = 1; /* a hook's answer is the whole answer: never dispatched */
        s->early = 1;
        srv->cfg.on_headers(r, srv->arg);
        if (!s->x || x->responding) /* answered (and finished: x is gone) */
            return 1;
        s->ready = 0;
        s->early = 0;
    }
    if (s->declared && declared > 0 && exchange_charge_body(x, declared)) {
        r->body_over_budget = 1;
        make_ready(s, 1);
        return 1;
    }
    if (s->declared)
        rn_buf_reserve(&r->body, (size_t)declared);
    if (wants_continue) {
        s->awaits_continue = 0;
        const nghttp2_nv nv = {(uint8_t *)":status", (uint8_t *)"100", 7, 3, NGHTTP2_NV_FLAG_NONE};
        nghttp2_submit_headers(s->h->session, NGHTTP2_FLAG_NONE, s->id, NULL, &nv, 1, NULL);
    }
    return 0;
}

/* ---- nghttp2 callbacks (no call back into nghttp2's session from here,
 * except submissions) ---- */

static int on_begin_headers(nghttp2_session *session, const nghttp2_frame *frame, void *user) {
    rn_http2 *h = user;
    if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST)
        return 0;
    h2_stream *s = stream_new(h, frame->hd.stream_id);
    nghttp2_session_set_stream_user_data(session, s->id, s);
    return 0;
}

static void append_cstr(rn_buf *b, const uint8_t *v, size_t len) {
    rn_buf_append(b, v, len);
    rn_buf_append(b, "", 1);
}

static int on_header(nghttp2_session *session, const nghttp2_frame *frame, const uint8_t *name,
                     size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags,
                     void *user) {
    (void)flags;
    rn_http2 *h = user;
    h2_stream *s = nghttp2_session_get_stream_user_data(session, frame->hd.stream_id);
    if (!s || !s->x || s->headers_done || s->refusal)
        return 0; /* trailers are ignored */
    rn_exchange *x = s->x;
    const rn_http_config *cfg = &h->conn->srv->cfg;
    if (x->raw.len + namelen + valuelen + 2 > cfg->http2_max_header_list_bytes ||
        s->span_count >= cfg->max_headers) {
        s->refusal = 431;
        return 0;
    }
    if (namelen > 0 && name[0] == ':') {
        size_t off = x->raw.len;
        if (namelen == 7 && memcmp(name, ":method", 7) == 0) {
            s->has_method = 1;
            s->method_off = off;
        } else if (namelen == 5 && memcmp(name, ":path", 5) == 0) {
            s->has_path = 1;
            s->path_off = off;
            s->path_len = valuelen;
        } else if (namelen == 10 && memcmp(name, ":authority", 10) == 0) {
            s->has_authority = 1;
            s->authority_off = off;
            s->authority_len = valuelen;
        } else {
            return 0; /* :scheme */
        }
        append_cstr(&x->raw, value, valuelen);
        return 0;
    }
    if (s->span_count == s->span_cap) {
        s->span_cap = s->span_cap ? s->span_cap * 2 : 16;
        s->spans = rn_xrealloc(s->spans, s->span_cap * sizeof *s->spans);
    }
    h2_span *sp = &s->spans[s->span_count++];
    sp->name_off = x->raw.len;
    sp->name_len = namelen;
    append_cstr(&x->raw, name, namelen);
    sp->value_off = x->raw.len;
    sp->value_len = valuelen;
    append_cstr(&x->raw, value, valuelen);
    return 0;
}

static int on_data_chunk(nghttp2_session *session, uint8_t flags, int32_t id, const uint8_t *data,
                         size_t len, void *user) {
    (void)flags, (void)user;
    h2_stream *s = nghttp2_session_get_stream_user_data(session, id);
    if (s)
        s->body_received += len;
    if (!s || !s->x || s->ready)
        return 0; /* answered already: the body is dropped */
    rn_request *r = &s->x->req;
    rn_http_server *srv = s->h->conn->srv;
    if (r->body.len + len > srv->cfg.max_body_bytes) {
        r->body_too_large = 1;
    } else if (!s->declared && exchange_charge_body(s->x, len)) {
        r->body_over_budget = 1;
    } else {
        rn_buf_append(&r->body, data, len);
        return 0;
    }
    rn_buf_free(&r->body);
    exchange_uncharge_body(s->x);
    make_ready(s, 1);
    return 0;
}

/* Counts a PING, SETTINGS or RST_STREAM frame against the connection's
 * bound per second; past it the connection ends (GOAWAY
 * ENHANCE_YOUR_CALM). */
static void control_frame(rn_http2 *h) {
    uint64_t now = uv_now(h->conn->srv->loop);
    if (now - h->window_start >= 1000) {
        h->window_start = now;
        h->window_frames = 0;
    }
    if (++h->window_frames == h->conn->srv->cfg.http2_max_control_frames + 1) {
        rn_metric.h2_flood_closes++;
        nghttp2_session_terminate_session(h->session, NGHTTP2_ENHANCE_YOUR_CALM);
    }
}

static int on_frame_recv(nghttp2_session *session, const nghttp2_frame *frame, void *user) {
    rn_http2 *h = user;
    switch (frame->hd.type) {
    case NGHTTP2_PING:
        if (!(frame->hd.flags & NGHTTP2_FLAG_ACK)) {
            rn_metric.h2_ping_frames++;
            control_frame(h);
        }
        return 0;
    case NGHTTP2_SETTINGS:
        if (!(frame->hd.flags & NGHTTP2_FLAG_ACK)) {
            rn_metric.h2_settings_frames++;
            control_frame(h);
        }
        return 0;
    case NGHTTP2_RST_STREAM:
        rn_metric.h2_rst_frames++;
        control_frame(h);
        return 0;
    case NGHTTP2_HEADERS:
    case NGHTTP2_DATA:
        break;
    default:
        return 0;
    }
    h2_stream *s = nghttp2_session_get_stream_user_data(session, frame->hd.stream_id);
    if (!s || !s->x)
        return 0;
    int end = (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0;
    if (frame->hd.type == NGHTTP2_HEADERS && !s->headers_done) {
        s->headers_done = 1;
        build_request(s);
        if (s->refusal) {
            make_ready(s, !end);
            return 0;
        }
        if (!end && head_with_body(s))
            return 0;
    }
    if (end)
        make_ready(s, 0);
    return 0;
}

/* True when the client sends the rest of s's declared body without
 * waiting for us: it fits in the stream's receive window and no 100
 * Continue is awaited. */
static int body_rest_in_flight(nghttp2_session *session, const h2_stream *s) {
    if (!s->declared || s->awaits_continue)
        return 0;
    uint64_t rest = s->body_declared > s->body_received ? s->body_declared - s->body_received : 0;
    int32_t window = nghttp2_session_get_stream_local_window_size(session, s->id);
    return window >= 0 && rest <= (uint64_t)window;
}

/* The last frame of an answer left while the client still sends its
 * request: the stream is reset with NO_ERROR (RFC 9113 §8.1), or drained
 * when the rest of its body is in flight anyway (see the top comment). */
static int on_frame_send(nghttp2_session *session, const nghttp2_frame *frame, void *user) {
    rn_http2 *h = user;
    if ((frame->hd.type != NGHTTP2_HEADERS && frame->hd.type != NGHTTP2_DATA) ||
        !(frame->hd.flags & NGHTTP2_FLAG_END_STREAM) ||
        nghttp2_session_get_stream_remote_close(session, frame->hd.stream_id))
        return 0;
    h2_stream *s = nghttp2_session_get_stream_user_data(session, frame->hd.stream_id);
    if (s && body_rest_in_flight(session, s)) {
        s->draining = 1;
        s->answered_at = uv_now(h->conn->srv->loop);
        return 0;
    }
    nghttp2_submit_rst_stream(session, NGHTTP2_FLAG_NONE, frame->hd.stream_id, NGHTTP2_NO_ERROR);
    return 0;
}

static int on_stream_close(nghttp2_session *session, int32_t id, uint32_t error, void *user) {
    (void)error;
    rn_http2 *h = user;
    h2_stream *s = nghttp2_session_get_stream_user_data(session, id);
    if (!s)
        return 0;
    s->closed = 1;
    queue_clear(s);
    h->open--;
    if (!h->open)
        h->idle_since = uv_now(h->conn->srv->loop);
    /* An answer all queued is finished by the call that queued it. */
    if (s->x && !(s->x->responding && s->eof))
        stream_detach(s, 1);
    return 0;
}

/* ---- writing ---- */

/* True when s's answer may not send a byte: its window or the
 * connection's is used up. */
static int window_shut(rn_http2 *h, const h2_stream *s) {
    return nghttp2_session_get_stream_remote_window_size(h->session, s->id) <= 0 ||
           nghttp2_session_get_remote_window_size(h->session) <= 0;
}

/* After frames left: a stream a half-closed client cannot unblock is
 * reset; the next file piece of a stream whose piece was
 * taken, on_drain of a streamed answer whose queue emptied. */
static void after_frames(rn_http2 *h) {
    for (h2_stream *s = h->streams; s && !h->conn->closed; s = s->next) {
        if (s->out_bytes && !s->closed && h->conn->input_ended && window_shut(h, s)) {
            /* a client that half-closed can open no window any more */
            nghttp2_submit_rst_stream(h->session, NGHTTP2_FLAG_NONE, s->id, NGHTTP2_CANCEL);
            h->flush_again = 1;
            continue;
        }
        if (!s->x || s->out_bytes)
            continue;
        if (s->file_piece) {
            s->file_piece = 0;
            answer_pump(s->x);
        } else if (s->drain_wanted && s->x->streaming && s->x->req.on_drain) {
            s->drain_wanted = 0;
            s->x->req.on_drain(&s->x->req);
        }
    }
}

/* Pulls frames from nghttp2 into the socket until none are left or the
 * socket holds OUTPUT_HIGH_BYTES. Reentrant calls (a drained stream
 * writing more) make the outer call go round again. */
static void flush(rn_http2 *h) {
    rn_conn *c = h->conn;
    if (h->flushing) {
        h->flush_again = 1;
        return;
    }
    if (h->in_session)
        return; /* an answer from inside a callback: the caller flushes after */
    h->flushing = 1;
    do {
        h->flush_again = 0;
        rn_buf out = {0};
        while (!c->closed && conn_queued(c) + out.len < OUTPUT_HIGH_BYTES) {
            const uint8_t *data;
            h->in_session = 1;
            ssize_t n = nghttp2_session_mem_send(h->session, &data);
            h->in_session = 0;
            if (n < 0) {
                rn_buf_free(&out);
                conn_close(c);
                break;
            }
            if (n == 0)
                break;
            rn_buf_append(&out, data, (size_t)n);
            if (out.len >= FRAME_BATCH_BYTES) {
                conn_write(c, &out, NULL, 0);
                out = (rn_buf){0};
            }
        }
        if (out.len && !c->closed)
            conn_write(c, &out, NULL, 0);
        rn_buf_free(&out);
        if (!c->closed)
            after_frames(h);
    } while (h->flush_again && !c->closed);
    h->flushing = 0;
    if (!c->closed && !nghttp2_session_want_read(h->session) &&
        !nghttp2_session_want_write(h->session))
        conn_end(c); /* GOAWAY sent (a flood, an error, the idle end) */
}

/* Arms the tick while streams are open, else the idle timeout; not while
 * answer bytes wait in the socket (the send watch owns the timer then). */
static void arm_timer(rn_http2 *h) {
    rn_conn *c = h->conn;
    if (c->closed || c->ending || c->pending_writes)
        return;
    conn_arm_timer(c, h->open ? TICK_MS : c->srv->cfg.idle_timeout_ms);
}

/* Leaves a call into this file: the outermost one frees closed streams
 * done with, and ends a connection whose client half-closed or a
 * stopping server's once no stream is left. */
static void leave(rn_http2 *h) {
    assert(h->depth > 0);
    if (--h->depth > 0)
        return;
    rn_conn *c = h->conn;
    if (c->closed)
        return;
    for (h2_stream *s = h->streams, *next; s; s = next) {
        next = s->next;
        if (s->closed && !s->x)
            stream_free(s);
    }
    if (!h->open && (c->input_ended || c->srv->stopping) && !c->ending) {
        nghttp2_session_terminate_session(h->session, NGHTTP2_NO_ERROR);
        flush(h);
        conn_end(c);
    }
}

/* ---- the protocol ---- */

static void http2_received(rn_conn *c) {
    rn_http2 *h = http2_of(c);
    enter(h);
    h->in_session = 1;
    ssize_t rv = nghttp2_session_mem_recv(h->session, c->input.data + c->input_off,
                                          c->input.len - c->input_off);
    h->in_session = 0;
    c->input.len = c->input_off = 0;
    if (rv < 0) {
        if (rv == NGHTTP2_ERR_FLOODED)
            rn_metric.h2_flood_closes++;
        flush(h); /* nghttp2's GOAWAY, when it made one */
        conn_end(c);
        leave(h);
        return;
    }
    dispatch_ready(h);
    flush(h);
    if (c->reading && conn_queued(c) >= OUTPUT_HIGH_BYTES)
        conn_read_stop(c); /* a client that sends without reading */
    arm_timer(h);
    leave(h);
}

static void http2_written(rn_conn *c, int file_piece) {
    (void)file_piece; /* frames are written, never file pieces */
    rn_http2 *h = http2_of(c);
    if (c->closed)
        return;
    enter(h);
    flush(h);
    if (!c->closed && c->ending)
        conn_finish_when_written(c);
    else if (!c->closed && !c->reading && !c->input_ended && conn_queued(c) < OUTPUT_HIGH_BYTES)
        conn_read_start(c);
    arm_timer(h);
    leave(h);
}

static void http2_timeout(rn_conn *c) {
    rn_http2 *h = http2_of(c);
    enter(h);
    const rn_http_config *cfg = &c->srv->cfg;
    uint64_t now = uv_now(c->srv->loop);
    if (!h->open && now - h->idle_since >= cfg->idle_timeout_ms) {
        nghttp2_session_terminate_session(h->session, NGHTTP2_NO_ERROR);
        flush(h);
        conn_end(c);
        leave(h);
        return;
    }
    for (h2_stream *s = h->streams; s && !c->closed; s = s->next) {
        if (s->closed)
            continue;
        if (s->draining && now - s->answered_at >= cfg->request_timeout_ms) {
            nghttp2_submit_rst_stream(h->session, NGHTTP2_FLAG_NONE, s->id, NGHTTP2_NO_ERROR);
            continue;
        }
        if (s->x && !s->ready && now - s->began >= cfg->request_timeout_ms) {
            s->ready = 1;
            s->early = 1;
            rn_buf head = {0}, body = {0};
            rn_http_respond(&s->x->req, 408, &head, &body);
            continue;
        }
        if (s->taken != s->watch_taken || !s->out_bytes) {
            s->watch_taken = s->taken;
            s->progress_at = now;
        } else if (now - s->progress_at >= cfg->idle_timeout_ms) {
            nghttp2_submit_rst_stream(h->session, NGHTTP2_FLAG_NONE, s->id, NGHTTP2_CANCEL);
        }
    }
    flush(h);
    arm_timer(h);
    leave(h);
}

/* The client shut its sending side: held requests are told (a live read
 * answers now), requests still arriving are reset, and the connection
 * ends once no stream is left. */
static void http2_input_end(rn_conn *c) {
    rn_http2 *h = http2_of(c);
    enter(h);
    for (h2_stream *s = h->streams; s && !c->closed; s = s->next) {
        if (!s->x || s->closed)
            continue;
        if (!s->ready) {
            nghttp2_submit_rst_stream(h->session, NGHTTP2_FLAG_NONE, s->id, NGHTTP2_CANCEL);
            continue;
        }
        void (*fn)(rn_request *) = s->x->req.on_input_end;
        s->x->req.on_input_end = NULL;
        if (fn)
            fn(&s->x->req);
    }
    flush(h);
    leave(h);
}

static void http2_closing(rn_conn *c) {
    rn_http2 *h = http2_of(c);
    for (h2_stream *s = h->streams; s; s = s->next)
        stream_detach(s, 1);
}

static int http2_idle(const rn_conn *c) {
    return http2_of(c)->open == 0;
}

static int http2_busy(const rn_conn *c) {
    for (const h2_stream *s = http2_of(c)->streams; s; s = s->next)
        if (s->x)
            return 1;
    return 0;
}

static void http2_free(rn_conn *c) {
    rn_http2 *h = http2_of(c);
    nghttp2_session_del(h->session);
    while (h->streams)
        stream_free(h->streams);
    free(h);
}

/* ---- answers ---- */

/* The header lines of head ("Name: value\r\n" each) as HTTP/2 fields with
 * lowercase names, after :status and a content-length of `length` bytes
 * (when sized); the connection-specific fields HTTP/2 forbids are left
 * out. nv points into names (the lowercased copy of head) and status. */
static size_t answer_fields(rn_buf *head, int status, uint64_t length, char *status_text,
                            char *length_text, nghttp2_nv **nv_out) {
    size_t lines = 0;
    for (size_t i = 0; i < head->len; i++)
        lines += head->data[i] == '\n';
    nghttp2_nv *nv = rn_xcalloc(lines + 2, sizeof *nv);
    size_t n = 0;
    snprintf(status_text, 4, "%03d", status);
    nv[n++] = (nghttp2_nv){(uint8_t *)":status", (uint8_t *)status_text, 7, 3, 0};
    if (length != RN_ANSWER_NO_BODY && length != RN_ANSWER_STREAMED) {
        int k = snprintf(length_text, 24, "%llu", (unsigned long long)length);
        nv[n++] =
            (nghttp2_nv){(uint8_t *)"content-length", (uint8_t *)length_text, 14, (size_t)k, 0};
    }
    char *p = (char *)head->data, *end = p + head->len;
    while (p < end) {
        char *eol = memchr(p, '\n', (size_t)(end - p));
        char *line_end = eol ? eol : end;
        char *colon = memchr(p, ':', (size_t)(line_end - p));
        if (colon) {
            size_t name_len = (size_t)(colon - p);
            char *v = colon + 1;
            while (v < line_end && (*v == ' ' || *v == '\t'))
                v++;
            char *v_end = line_end;
            while (v_end > v && (v_end[-1] == '\r' || v_end[-1] == ' '))
                v_end--;
            for (size_t i = 0; i < name_len; i++)
                p[i] = (char)tolower((unsigned char)p[i]);
            if (!rn_ieq(p, name_len, "connection") && !rn_ieq(p, name_len, "keep-alive") &&
                !rn_ieq(p, name_len, "transfer-encoding"))
                nv[n++] =
                    (nghttp2_nv){(uint8_t *)p, (uint8_t *)v, name_len, (size_t)(v_end - v), 0};
        }
        p = line_end + 1;
    }
    *nv_out = nv;
    return n;
}

static void http2_send_head(rn_exchange *x, int status, rn_buf *head, uint64_t length,
                            rn_buf *body) {
    h2_stream *s = stream_of(x);
    rn_http2 *h = s->h;
    enter(h);
    char status_text[4], length_text[24];
    nghttp2_nv *nv;
    size_t n = answer_fields(head, status, length, status_text, length_text, &nv);
    nghttp2_data_provider provider = {.source = {.ptr = s}, .read_callback = read_answer};
    int sized = length != RN_ANSWER_NO_BODY && length != RN_ANSWER_STREAMED;
    if (length == RN_ANSWER_NO_BODY || length == 0) {
        s->eof = 1;
        nghttp2_submit_response(h->session, s->id, nv, n, NULL);
    } else {
        s->body_left = sized ? length : 0;
        if (body) {
            s->body_left -= sized ? body->len : 0;
            queue_bytes(s, body);
        }
        s->eof = sized && s->body_left == 0;
        nghttp2_submit_response(h->session, s->id, nv, n, &provider);
    }
    free(nv);
    rn_buf_free(head);
    if (body)
        rn_buf_free(body);
    flush(h);
    leave(h);
}

/* More of s's answer is queued (or its end): nghttp2 is told, the frames
 * go out, and the call into this file ends. */
static void answer_moved(h2_stream *s) {
    resume(s);
    flush(s->h);
    leave(s->h);
}

static void http2_send_body(rn_exchange *x, rn_buf *bytes, rn_body_kind kind) {
    h2_stream *s = stream_of(x);
    enter(s->h);
    if (kind != RN_BODY_CHUNK) {
        s->body_left -= bytes->len < s->body_left ? bytes->len : s->body_left;
        s->eof = s->body_left == 0;
        s->file_piece = kind == RN_BODY_PIECE;
    }
    queue_bytes(s, bytes);
    answer_moved(s);
}

/* A shared chunk's payload, without its HTTP/1.1 framing, referenced. */
static void http2_send_chunk(rn_exchange *x, rn_http_chunk *ch) {
    h2_stream *s = stream_of(x);
    enter(s->h);
    h2_piece *p = rn_xcalloc(1, sizeof *p);
    p->chunk = ch;
    ch->refs++;
    p->at = ch->bytes + ch->len - ch->payload_len - 2;
    p->left = ch->payload_len;
    queue_piece(s, p);
    answer_moved(s);
}

static void http2_end_stream(rn_exchange *x) {
    h2_stream *s = stream_of(x);
    enter(s->h);
    s->eof = 1;
    answer_moved(s);
}

/* x's answer is all queued: the request is done for the handler; its
 * stream goes on until nghttp2 sent the bytes (or the client reset it). */
static void http2_finished(rn_exchange *x) {
    h2_stream *s = stream_of(x);
    rn_http2 *h = s->h;
    enter(h);
    stream_detach(s, 0);
    leave(h);
}

/* x's answer cannot be completed: its stream is reset. */
static void http2_fail(rn_exchange *x) {
    h2_stream *s = stream_of(x);
    rn_http2 *h = s->h;
    enter(h);
    nghttp2_submit_rst_stream(h->session, NGHTTP2_FLAG_NONE, s->id, NGHTTP2_INTERNAL_ERROR);
    stream_detach(s, 1);
    flush(h);
    leave(h);
}

/* The answer bytes of x's stream not yet taken into frames: its own, not
 * the connection's (the socket holds at most OUTPUT_HIGH_BYTES more). */
static size_t http2_queued(const rn_exchange *x) {
    h2_stream *s = stream_of(x);
    if (s->out_bytes)
        s->drain_wanted = 1;
    return s->out_bytes;
}

static const rn_protocol http2_protocol = {
    .received = http2_received,
    .input_end = http2_input_end,
    .timeout = http2_timeout,
    .written = http2_written,
    .closing = http2_closing,
    .idle = http2_idle,
    .busy = http2_busy,
    .free = http2_free,
    .send_head = http2_send_head,
    .send_body = http2_send_body,
    .send_chunk = http2_send_chunk,
    .end_stream = http2_end_stream,
    .finished = http2_finished,
    .fail = http2_fail,
    .queued = http2_queued,
};

static nghttp2_session_callbacks *session_callbacks(void) {
    static nghttp2_session_callbacks *cbs;
    if (!cbs) {
        if (nghttp2_session_callbacks_new(&cbs) != 0)
            abort();
        nghttp2_session_callbacks_set_on_begin_headers_callback(cbs, on_begin_headers);
        nghttp2_session_callbacks_set_on_header_callback(cbs, on_header);
        nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, on_data_chunk);
        nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, on_frame_recv);
        nghttp2_session_callbacks_set_on_frame_send_callback(cbs, on_frame_send);
        nghttp2_session_callbacks_set_on_stream_close_callback(cbs, on_stream_close);
    }
    return cbs;
}

void http2_attach(rn_conn *c) {
    assert(!c->closed && !c->proto);
    const rn_http_config *cfg = &c->srv->cfg;
    rn_http2 *h = rn_xcalloc(1, sizeof *h);
    h->conn = c;
    h->idle_since = h->window_start = uv_now(c->srv->loop);
    nghttp2_option *opt;
    if (nghttp2_option_new(&opt) != 0)
        abort();
    nghttp2_option_set_max_deflate_dynamic_table_size(opt, 4096);
    if (nghttp2_session_server_new2(&h->session, session_callbacks(), h, opt) != 0)
        abort();
    nghttp2_option_del(opt);
    nghttp2_settings_entry settings[] = {
        {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, cfg->http2_max_streams},
        {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, cfg->http2_max_header_list_bytes},
        {NGHTTP2_SETTINGS_HEADER_TABLE_SIZE, cfg->http2_header_table_bytes},
    };
    nghttp2_submit_settings(h->session, NGHTTP2_FLAG_NONE, settings,
                            sizeof settings / sizeof settings[0]);
    c->proto = &http2_protocol;
    c->proto_state = h;
    rn_metric.h2_connections++;
    if (c->input.len > c->input_off)
        http2_received(c);
    else {
        enter(h);
        flush(h);
        arm_timer(h);
        leave(h);
    }
}
