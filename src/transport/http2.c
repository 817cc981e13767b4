/*
 * http2.c — HTTP/2 on a connection (rn_protocol) over libnghttp2: the
 * session and what leaves it. Each stream is one request (an rn_exchange
 * built by http2_recv.c and handed to the server's handler); its answer is
 * submitted as HEADERS and DATA frames, the frames written through the
 * shared write path (conn_write). The state both files share is in
 * http2_state.h.
 *
 * Input: received() feeds c->input to nghttp2_session_mem_recv, whose
 * callbacks (http2_recv.c) build the requests; those completed meanwhile
 * are dispatched once it returns. Output: an answer's bytes wait in its
 * stream's queue (h2_piece: owned bytes counted in the answer budget, or a
 * reference to a shared SSE chunk, whose payload goes out without its
 * HTTP/1.1 framing); flush() pulls frames from nghttp2 into conn_write
 * until the socket holds OUTPUT_HIGH_BYTES, and `written` resumes it, so
 * per-stream flow control and a slow socket both leave the bytes in the
 * stream's queue, which is what queued(x) reports: an SSE reader pauses at
 * --sse-queue-bytes of its own, not of the connection's. Streams are freed
 * outside nghttp2 and the handler's calls (leave()), never while an outer
 * call is on the stack.
 *
 * The connection's one timer ticks every TICK_MS while streams are open: a
 * request not received within --request-timeout-ms answers 408, a stream
 * whose answer bytes wait and that took none for --idle-timeout-ms (a
 * window the client never opens) is reset with CANCEL; with no stream open
 * for --idle-timeout-ms the connection ends with GOAWAY.
 */
#include "transport/http2.h"
#include "transport/http2_state.h"
#include "transport/response.h"
#include "transport/write.h"
#include "util/metrics.h"
#include "util/text.h"

#include <assert.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define OUTPUT_HIGH_BYTES (256 * 1024) /* stop pulling frames (and reading) past this */
#define FRAME_BATCH_BYTES (64 * 1024)  /* frames gathered into one conn_write */
#define TICK_MS 1000

/* Answer bytes of a stream not yet taken into DATA frames. */
struct h2_piece {
    h2_piece *next;
    rn_buf owned;         /* owned bytes (counted in answer_bytes_held), or */
    rn_http_chunk *chunk; /* a shared chunk's reference */
    const uint8_t *at;    /* what is left to take */
    size_t left;
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

h2_stream *h2_stream_new(rn_http2 *h, int32_t id) {
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

/* The connection lets go of s's request (no-op when it already did):
 * reported to the access log when it was answered (an SSE response the
 * client ended), aborted when `aborted`. s itself stays until leave. */
static void h2_stream_detach(h2_stream *s, int aborted) {
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

void h2_stream_closed(h2_stream *s) {
    assert(!s->closed);
    rn_http2 *h = s->h;
    s->closed = 1;
    queue_clear(s);
    h->open--;
    if (!h->open)
        h->idle_since = uv_now(h->conn->srv->loop);
    /* An answer all queued is finished by the call that queued it. */
    if (s->x && !(s->x->responding && s->eof))
        h2_stream_detach(s, 1);
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
    h2_dispatch_ready(h);
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
            s->ready = 1; /* handed over only to be refused: the handler answers 408 */
            s->early = 1;
            s->x->req.timed_out = 1;
            if (s->x->sink.data) /* its handler answers */
                s->x->sink.end(&s->x->req, RN_BODY_SLOW);
            else
                c->srv->on_request(&s->x->req, c->srv->arg);
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
        if (s->draining && !s->closed) { /* the rest of its body cannot come now */
            nghttp2_submit_rst_stream(h->session, NGHTTP2_FLAG_NONE, s->id, NGHTTP2_NO_ERROR);
            continue;
        }
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
        h2_stream_detach(s, 1);
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
    h2_stream_detach(s, 0);
    leave(h);
}

/* x's answer cannot be completed: its stream is reset. */
static void http2_fail(rn_exchange *x) {
    h2_stream *s = stream_of(x);
    rn_http2 *h = s->h;
    enter(h);
    nghttp2_submit_rst_stream(h->session, NGHTTP2_FLAG_NONE, s->id, NGHTTP2_INTERNAL_ERROR);
    h2_stream_detach(s, 1);
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

/* HTTP/2 receives a streamed body whole (h2_dispatch_ready delivers it):
 * nothing to set up, nothing to resume. */
static void http2_stream_body(rn_exchange *x) {
    (void)x;
}

static void http2_body_resume(rn_exchange *x) {
    (void)x;
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
    .stream_body = http2_stream_body,
    .body_resume = http2_body_resume,
};

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
    if (nghttp2_session_server_new2(&h->session, h2_session_callbacks(), h, opt) != 0)
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
