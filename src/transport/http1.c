/*
 * http1.c — HTTP/1.1 on a connection (rn_protocol): llhttp parsing and the
 * request-head limits, keep-alive and pipelining, 100-continue and answers
 * before the body, half-closed clients, and the framing of answers (status
 * line, Content-Length or chunked). See http.h for the model.
 *
 * States: READING (receiving a request; request timer armed), HANDLING
 * (request handed to the handler; parser paused; socket still read for EOF
 * and pipelined bytes), IDLE (keep-alive, idle timer armed) and CLOSING.
 * Parse errors and limit violations answer 4xx and close.
 *
 * EOF (a half-close) stops reading; what was received is still served in
 * order (a held request is told through on_input_end), then the connection
 * closes (input_exhausted). A read error closes it at once.
 *
 * Answers before the body: a request whose body is still to come, from a
 * client that waits for 100 Continue or declared at least
 * RN_HTTP_EARLY_BODY_BYTES, is first shown to the on_headers hook (state
 * EARLY). When the hook answers, no 100 Continue is sent: after Expect the
 * connection closes (its client sends no body); otherwise the body is read
 * and dropped (DISCARDING) within DISCARD_IDLE_MS of silence and
 * DISCARD_TOTAL_MS in all, or the connection closes. Otherwise the body is
 * read as usual, after a 100 Continue when the client asked for one.
 *
 * Bodies taken as they arrive (rn_request_stream_body, from the hook):
 * state STREAMING, in which the parser goes on feeding the body's bytes to
 * the request's sink, a slice at a time, and stops when the sink pauses
 * (reading stops too once the input holds INPUT_PAUSE_BYTES); the request
 * timer, with its body rate, runs only while the sink takes bytes. The
 * body's end (or its failure: too slow, too large, cut by a half-close)
 * goes to the sink, and the request then waits for its answer (HANDLING);
 * an answer that finishes first leaves the rest of the body to be dropped
 * (DISCARDING), as after an early answer.
 */
#include "transport/http1.h"
#include "transport/status.h"
#include "transport/http2.h"
#include "transport/request.h"
#include "transport/request_head.h"
#include "transport/response.h"
#include "transport/write.h"
#include "util/text.h"

#include <assert.h>
#include <llhttp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define INPUT_PAUSE_BYTES (256 * 1024) /* stop reading past this much pipelined input */
#define DISCARD_IDLE_MS 5000           /* an answered body may pause this long ... */
#define DISCARD_TOTAL_MS 30000         /* ... and take this long in all */
#define EXTEND_STEP_MS 1000            /* a body's earned time moves the request timer in steps */
#define FLOOR_STEP_MS 50               /* ... finer under a request's own floor (body_grace_ms) */

enum { ST_IDLE, ST_READING, ST_EARLY, ST_DISCARDING, ST_STREAMING, ST_HANDLING, ST_CLOSING };

/* A header's position inside the request's raw bytes while it is being
 * received. */
typedef struct {
    size_t name_off, name_len, value_off, value_len;
} header_span;

/* HTTP/1.1 on a connection: the parser and the request under way. */
typedef struct {
    rn_conn *conn;
    llhttp_t parser;
    int state;
    int close_after_response;
    uint64_t discard_deadline; /* DISCARDING: uv_now() past which the connection closes */
    int processing;            /* process_input is on the stack */
    rn_exchange *cur;          /* current request, or NULL */
    header_span *spans;
    size_t span_count, span_cap;
    int last_was_value;
    int refusal;            /* status for a head a callback refused (414, 431, 400, 501) */
    rn_fold_scan fold;      /* obs-fold in the current head (request_head.h) */
    const char *fold_from;  /* head bytes from here on are not fed to it yet; NULL: none */
    uint64_t request_began; /* uv_now() when the current request's first byte arrived */
    int fresh;              /* no request began yet: the input may be HTTP/2's preface */
    int wants_continue;     /* the current request's client waits for 100 Continue */
    int sink_paused;        /* STREAMING: the sink asked for no more bytes */
    uint64_t body_seen;     /* STREAMING: body bytes handed to the sink */
} rn_http1;

static rn_http1 *http1_of(const rn_conn *c) {
    return c->proto_state;
}

static void process_input(rn_http1 *h);
static void dispatch(rn_http1 *h);

/* Detaches the current request from its connection (connection closing or
 * response finished). */
static void detach_request(rn_http1 *h, int aborted) {
    rn_exchange *x = h->cur;
    if (!x)
        return;
    h->cur = NULL;
    exchange_detach(x, aborted);
}

/* Tells the sink that the body ended (RN_BODY_END) or failed: the request
 * then waits for its answer, on a connection that closes after it unless
 * the body was complete. Safe to call from inside the parser. */
static void end_streamed_body(rn_http1 *h, rn_body_event ev) {
    assert(h->state == ST_STREAMING && h->cur);
    h->state = ST_HANDLING;
    conn_arm_timer(h->conn, 0);
    if (ev != RN_BODY_END)
        h->close_after_response = 1;
    rn_exchange *x = h->cur;
    x->sink.end(&x->req, ev);
}

/* The timer of an HTTP/1.1 connection ran out: the request timeout, the
 * idle timeout or the time an answered body may take to be dropped. */
static void http1_timeout(rn_conn *c) {
    rn_http1 *h = http1_of(c);
    if (h->state == ST_HANDLING)
        return; /* a send watch outlived its bytes; the handler owns the connection */
    if (h->state == ST_STREAMING && h->cur && !h->cur->responding) {
        end_streamed_body(h, RN_BODY_SLOW);
        return;
    }
    if (h->state == ST_READING && h->cur && !h->cur->responding) {
        /* Slow or stalled request: the handler answers 408, then close. */
        rn_request *r = &h->cur->req;
        if (!r->headers) /* the head is cut short: its target so far opens the raw bytes */
            r->target = r->target_len ? (const char *)h->cur->raw.data : "";
        r->timed_out = 1;
        h->close_after_response = 1;
        dispatch(h);
        return;
    }
    conn_close(c);
}

/* ---- parser callbacks ---- */

static int on_message_begin(llhttp_t *p) {
    rn_http1 *h = p->data;
    rn_conn *c = h->conn;
    h->fresh = 0;
    h->cur = exchange_new(c);
    h->cur->req.start_ns = uv_hrtime();
    h->span_count = 0;
    h->last_was_value = 0;
    h->refusal = 0;
    h->fold = (rn_fold_scan){0};
    h->fold_from = NULL;
    if (h->state == ST_IDLE) {
        h->state = ST_READING;
        h->request_began = uv_now(c->srv->loop);
        conn_arm_timer(c, c->srv->cfg.request_timeout_ms);
    }
    return 0;
}

static int header_budget_ok(rn_http1 *h, size_t more) {
    if (h->cur->raw.len + more <= h->conn->srv->cfg.max_header_bytes)
        return 1;
    h->refusal = 431;
    return 0;
}

/* Feeds the fold scan the head bytes up to a span at `at` and the span's
 * first byte, then moves past the span. */
static void fold_scan_to(rn_http1 *h, const char *at, size_t len) {
    if (h->fold_from)
        rn_fold_scan_feed(&h->fold, h->fold_from, at + (len > 0));
    h->fold_from = at + len;
}

static int on_url(llhttp_t *p, const char *at, size_t len) {
    rn_http1 *h = p->data;
    if (!header_budget_ok(h, len)) {
        h->refusal = 414;
        return -1;
    }
    rn_buf_append(&h->cur->raw, at, len);
    h->cur->req.target_len += len;
    h->fold_from = at + len; /* the scan starts after the target */
    return 0;
}

/* Trailer fields of a chunked body arrive through the same callbacks after
 * on_headers_complete: they are ignored, never appended to the raw bytes,
 * which the request's target and headers already point into. */
static int in_trailer(const rn_http1 *h) {
    return h->cur->req.headers != NULL;
}

static int on_header_field(llhttp_t *p, const char *at, size_t len) {
    rn_http1 *h = p->data;
    if (in_trailer(h))
        return 0;
    if (!header_budget_ok(h, len))
        return -1;
    fold_scan_to(h, at, len);
    if (h->span_count == 0 || h->last_was_value) {
        if (h->span_count >= h->conn->srv->cfg.max_headers) {
            h->refusal = 431;
            return -1;
        }
        if (h->span_count == h->span_cap) {
            h->span_cap = h->span_cap ? h->span_cap * 2 : 16;
            h->spans = rn_xrealloc(h->spans, h->span_cap * sizeof *h->spans);
        }
        h->spans[h->span_count++] = (header_span){h->cur->raw.len, 0, 0, 0};
        h->last_was_value = 0;
    }
    rn_buf_append(&h->cur->raw, at, len);
    h->spans[h->span_count - 1].name_len += len;
    return 0;
}

static int on_header_value(llhttp_t *p, const char *at, size_t len) {
    rn_http1 *h = p->data;
    if (in_trailer(h))
        return 0;
    if (!header_budget_ok(h, len))
        return -1;
    fold_scan_to(h, at, len);
    header_span *span = &h->spans[h->span_count - 1];
    if (!h->last_was_value) {
        span->value_off = h->cur->raw.len;
        h->last_was_value = 1;
    }
    rn_buf_append(&h->cur->raw, at, len);
    span->value_len += len;
    return 0;
}

static rn_http_method map_method(int m) {
    switch (m) {
    case HTTP_GET:
        return RN_HTTP_GET;
    case HTTP_HEAD:
        return RN_HTTP_HEAD;
    case HTTP_POST:
        return RN_HTTP_POST;
    case HTTP_PUT:
        return RN_HTTP_PUT;
    case HTTP_DELETE:
        return RN_HTTP_DELETE;
    case HTTP_OPTIONS:
        return RN_HTTP_OPTIONS;
    default:
        return RN_HTTP_OTHER;
    }
}

static void dispatch(rn_http1 *h) {
    rn_http_server *srv = h->conn->srv;
    h->state = ST_HANDLING;
    conn_arm_timer(h->conn, 0);
    srv->on_request(&h->cur->req, srv->arg);
}

/* Shows a request whose body is still to come to the on_headers hook when
 * its client waits for 100 Continue or declared at least
 * RN_HTTP_EARLY_BODY_BYTES. Returns 1 when the hook answered: the
 * connection is then closing (after Expect: 100-continue, whose client sends
 * no body, or when it was to close anyway) or DISCARDING the body. Returns
 * 0 when the body is to be read as usual. */
static void extend_request_timeout(rn_http1 *h, uint64_t received);

static int early_answer(rn_http1 *h, llhttp_t *p, int wants_continue) {
    rn_http_server *srv = h->conn->srv;
    int declared = (p->flags & F_CONTENT_LENGTH) != 0;
    int body_follows = declared ? p->content_length > 0 : (p->flags & F_CHUNKED) != 0;
    if (!srv->cfg.on_headers || !body_follows ||
        !(wants_continue || srv->cfg.on_headers_every_body ||
          (declared && p->content_length >= RN_HTTP_EARLY_BODY_BYTES)))
        return 0;
    int close_after = h->close_after_response;
    h->close_after_response = close_after || wants_continue;
    h->state = ST_EARLY;
    rn_request *req = &h->cur->req;
    req->body_pending = 1;
    rn_request_hold(req); /* an answer that closes the connection detaches it meanwhile */
    srv->cfg.on_headers(req, srv->arg); /* may answer: see response_finished() */
    req->body_pending = 0;
    rn_request_release(req);
    if (h->state == ST_STREAMING)
        h->close_after_response = close_after;
    if (h->state == ST_STREAMING)
        extend_request_timeout(h, 0); /* the hook may have set a floor */
    if (h->state != ST_EARLY)
        return 1;
    h->state = ST_READING;
    h->close_after_response = close_after;
    extend_request_timeout(h, 0);
    return 0;
}

static int on_headers_complete(llhttp_t *p) {
    rn_http1 *h = p->data;
    rn_request *r = &h->cur->req;
    const uint8_t *raw = h->cur->raw.data;
    r->method = map_method(p->method);
    r->method_name = llhttp_method_name((llhttp_method_t)p->method);
    r->target = (const char *)raw;
    r->header_count = h->span_count;
    r->headers = rn_xcalloc(h->span_count ? h->span_count : 1, sizeof *r->headers);
    for (size_t i = 0; i < h->span_count; i++) {
        header_span *span = &h->spans[i];
        /* Trim trailing whitespace of values (llhttp leaves it). */
        while (span->value_len && (raw[span->value_off + span->value_len - 1] == ' ' ||
                                   raw[span->value_off + span->value_len - 1] == '\t'))
            span->value_len--;
        r->headers[i] = (rn_header){(const char *)raw + span->name_off, span->name_len,
                                    (const char *)raw + span->value_off, span->value_len};
    }
    h->fold_from = NULL;
    h->refusal = rn_request_head_check(r, p->http_major, p->http_minor, h->fold.folded);
    if (h->refusal)
        return -1;
    if (!llhttp_should_keep_alive(p))
        h->close_after_response = 1;
    if ((p->flags & F_CONTENT_LENGTH) && p->content_length > h->conn->srv->cfg.max_body_bytes) {
        r->body_too_large = 1;
        h->close_after_response = 1;
        dispatch(h);
        return HPE_PAUSED;
    }
    const rn_header *expect = rn_request_header(r, "expect", NULL);
    int wants_continue = expect && rn_ieq(expect->value, expect->value_len, "100-continue");
    h->wants_continue = wants_continue;
    if (early_answer(h, p, wants_continue))
        return h->state == ST_DISCARDING || h->state == ST_STREAMING ? 0 : HPE_PAUSED;
    /* Load comes after size and the early answer (ext §5.5): a body that
     * would pass the in-flight bound is refused unread. */
    if ((p->flags & F_CONTENT_LENGTH) && p->content_length > 0 &&
        exchange_charge_body(h->cur, p->content_length)) {
        r->body_over_budget = 1;
        h->close_after_response = 1;
        dispatch(h);
        return HPE_PAUSED;
    }
    if (p->flags & F_CONTENT_LENGTH)
        rn_buf_reserve(&r->body, (size_t)p->content_length);
    if (wants_continue) {
        rn_buf cont = {0};
        rn_buf_append_str(&cont, "HTTP/1.1 100 Continue\r\n\r\n");
        conn_write(h->conn, &cont, NULL, 0);
    }
    return 0;
}

/* Moves the request timer to request_began + base + received /
 * min_body_rate, the base being the request timeout (or the request's
 * body_grace_ms): an upload that keeps that rate is never cut, a dribbled
 * body still is (about at the base when it is much slower). With the
 * request timeout as base the timer only moves later, and only once the
 * deadline passed it by EXTEND_STEP_MS, so a small body costs no timer
 * update; a request's own grace makes the rate a floor: the timer then
 * follows the deadline both ways within FLOOR_STEP_MS. */
static void extend_request_timeout(rn_http1 *h, uint64_t received) {
    rn_conn *c = h->conn;
    const rn_http_config *cfg = &c->srv->cfg;
    const rn_request *req = &h->cur->req;
    uint64_t rate = req->min_body_rate ? req->min_body_rate : cfg->min_body_rate;
    if (!rate || (h->state != ST_READING && h->state != ST_STREAMING))
        return;
    uint64_t base = req->body_grace_ms ? req->body_grace_ms : cfg->request_timeout_ms;
    uint64_t deadline = h->request_began + base + received * 1000 / rate;
    uint64_t now = uv_now(c->srv->loop);
    uint64_t due = now + uv_timer_get_due_in(&c->timer);
    uint64_t step = req->body_grace_ms ? FLOOR_STEP_MS : EXTEND_STEP_MS;
    if (deadline >= due + step || (req->body_grace_ms && deadline + step <= due))
        conn_arm_timer(c, deadline > now ? deadline - now : 0);
}

/* STREAMING: hands body bytes to the sink, within max_body_bytes. */
static int stream_body_bytes(rn_http1 *h, const char *at, size_t len) {
    rn_exchange *x = h->cur;
    if (h->body_seen + len > h->conn->srv->cfg.max_body_bytes) {
        end_streamed_body(h, RN_BODY_TOO_LARGE);
        return HPE_PAUSED;
    }
    h->body_seen += len;
    if (x->sink.data(&x->req, (const uint8_t *)at, len))
        h->sink_paused = 1;
    if (h->state != ST_STREAMING)
        return HPE_PAUSED; /* answered meanwhile */
    if (h->sink_paused)
        conn_arm_timer(h->conn, 0); /* the wait is ours, not the client's */
    else
        extend_request_timeout(h, h->body_seen);
    return 0;
}

static int on_body(llhttp_t *p, const char *at, size_t len) {
    rn_http1 *h = p->data;
    if (h->state == ST_DISCARDING)
        return 0;
    if (h->state == ST_STREAMING)
        return stream_body_bytes(h, at, len);
    rn_request *r = &h->cur->req;
    if (r->body.len + len > h->conn->srv->cfg.max_body_bytes) {
        r->body_too_large = 1;
        rn_buf_free(&r->body);
        exchange_uncharge_body(h->cur);
        h->close_after_response = 1;
        dispatch(h);
        return HPE_PAUSED;
    }
    /* A chunked body is counted as it arrives (a declared one was counted
     * whole from its headers). */
    if (!(p->flags & F_CONTENT_LENGTH) && exchange_charge_body(h->cur, len)) {
        r->body_over_budget = 1;
        rn_buf_free(&r->body);
        exchange_uncharge_body(h->cur);
        h->close_after_response = 1;
        dispatch(h);
        return HPE_PAUSED;
    }
    rn_buf_append(&r->body, at, len);
    extend_request_timeout(h, r->body.len);
    return 0;
}

static int on_message_complete(llhttp_t *p) {
    rn_http1 *h = p->data;
    if (h->state == ST_DISCARDING) { /* an answered body ended: next request */
        h->state = ST_IDLE;
        conn_arm_timer(h->conn, h->conn->srv->cfg.idle_timeout_ms);
        return 0;
    }
    if (h->state == ST_STREAMING) {
        end_streamed_body(h, RN_BODY_END);
        return HPE_PAUSED;
    }
    dispatch(h);
    return HPE_PAUSED;
}

static const llhttp_settings_t parser_settings = {
    .on_message_begin = on_message_begin,
    .on_url = on_url,
    .on_header_field = on_header_field,
    .on_header_value = on_header_value,
    .on_headers_complete = on_headers_complete,
    .on_body = on_body,
    .on_message_complete = on_message_complete,
};

/* ---- writing ---- */

/* True while answers of this connection wait unsent in its write queue: the
 * next pipelined request is not parsed until they are out, so a client that
 * sends requests without reading the answers holds at most one answer in
 * the server's memory (and its input stops being read past
 * INPUT_PAUSE_BYTES). */
static int output_blocked(rn_conn *c) {
    return conn_queued(c) > 0;
}

/* What follows a completed write on an HTTP/1.1 connection: the idle timer
 * of a connection whose last answer just left, the next body piece, a
 * drained streaming response's hook, pipelined requests, or the end of an
 * ending connection. */
static void http1_written(rn_conn *c, int body_piece) {
    rn_http1 *h = http1_of(c);
    if (h->state == ST_IDLE && c->pending_writes == 0 && !c->closed)
        conn_arm_timer(c, c->srv->cfg.idle_timeout_ms); /* idle from the last byte out */
    if (body_piece && !c->closed) {
        answer_pump(h->cur);
        return;
    }
    rn_exchange *x = h->cur;
    if (x && x->streaming && x->req.on_drain && !c->closed && conn_queued(c) == 0)
        x->req.on_drain(&x->req);
    if (c->ending)
        conn_finish_when_written(c);
    else if (!c->closed && h->state != ST_HANDLING && !output_blocked(c))
        process_input(h); /* pipelined requests waited for the answers to go out */
}

/* ---- HTTP/1.1 answers ---- */

/* Sends the status line, the handler's header lines, the framing of a body
 * of `length` bytes (or chunked, or none) and the blank line, then body
 * (may be NULL). */
static void http1_send_head(rn_exchange *x, int status, rn_buf *head, uint64_t length,
                            rn_buf *body) {
    rn_conn *c = x->conn;
    rn_buf out = {0};
    rn_buf_appendf(&out, "HTTP/1.1 %d %s\r\n", status, rn_http_reason(status));
    rn_buf_append(&out, head->data, head->len);
    if (length == RN_ANSWER_STREAMED)
        rn_buf_append_str(&out, "Transfer-Encoding: chunked\r\n");
    else if (length != RN_ANSWER_NO_BODY)
        rn_buf_appendf(&out, "Content-Length: %llu\r\n", (unsigned long long)length);
    if (http1_of(c)->close_after_response || c->srv->stopping)
        rn_buf_append_str(&out, "Connection: close\r\n");
    rn_buf_append_str(&out, "\r\n");
    rn_buf_free(head);
    conn_write(c, &out, body, 0);
}

/* A streamed answer's chunk goes out framed (size line, bytes, CRLF); the
 * bytes of a sized body go out as they are. */
static void http1_send_body(rn_exchange *x, rn_buf *bytes, rn_body_kind kind) {
    rn_conn *c = x->conn;
    if (kind != RN_BODY_CHUNK) {
        conn_write(c, bytes, NULL, kind == RN_BODY_PIECE);
        return;
    }
    rn_buf frame = {0};
    rn_buf_reserve(&frame, CHUNK_LINE_MAX);
    frame.len = chunk_size_line((char *)frame.data, bytes->len);
    rn_buf_append(bytes, "\r\n", 2);
    conn_write(c, &frame, bytes, 0);
}

/* A shared chunk holds its HTTP/1.1 framing: it goes out whole. */
static void http1_send_chunk(rn_exchange *x, rn_http_chunk *ch) {
    conn_write_chunk(x->conn, ch);
}

static void http1_end_stream(rn_exchange *x) {
    rn_buf end = {0};
    rn_buf_append_str(&end, "0\r\n\r\n");
    conn_write(x->conn, &end, NULL, 0);
}

/* Called when the current request's response has been fully queued. An
 * answer given before the body (state EARLY) leaves the parser inside the
 * request: it closes the connection or goes on DISCARDING the body. No
 * request is answered while READING: the on_headers hook answers inside
 * itself or lets the body be read first (a request it kept and answered
 * while its body arrived lost the rest of its body to no request). */
static void response_finished(rn_http1 *h) {
    rn_conn *c = h->conn;
    assert(h->state != ST_READING);
    if (c->srv->cfg.on_complete && h->cur)
        c->srv->cfg.on_complete(&h->cur->req);
    detach_request(h, 0);
    if (h->close_after_response || c->srv->stopping) {
        h->state = ST_CLOSING;
        conn_end(c);
        return;
    }
    if (h->state == ST_EARLY || h->state == ST_STREAMING) {
        h->state = ST_DISCARDING;
        h->discard_deadline = uv_now(c->srv->loop) + DISCARD_TOTAL_MS;
        conn_arm_timer(c, DISCARD_IDLE_MS);
        return;
    }
    h->state = ST_IDLE;
    conn_arm_timer(c, c->srv->cfg.idle_timeout_ms);
    llhttp_resume(&h->parser);
    process_input(h);
}

static void http1_finished(rn_exchange *x) {
    rn_http1 *h = http1_of(x->conn);
    assert(h->cur == x);
    response_finished(h);
}

/* An answer that cannot be completed (its length was promised) can only
 * end the connection. */
static void http1_fail(rn_exchange *x) {
    conn_close(x->conn);
}

/* Answer bytes still queued on the connection's socket. */
static size_t http1_queued(const rn_exchange *x) {
    return conn_queued(x->conn);
}

/* ---- reading ---- */

/* Answers a request the parser rejected and closes the connection. */
static void reject_raw(rn_http1 *h, int status) {
    static char buf[128];
    int n = snprintf(buf, sizeof buf,
                     "HTTP/1.1 %d %s\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", status,
                     rn_http_reason(status));
    rn_buf head = {0};
    rn_buf_append(&head, buf, (size_t)n);
    detach_request(h, 1);
    h->state = ST_CLOSING;
    conn_write(h->conn, &head, NULL, 0);
    conn_end(h->conn);
}

/* Called once the input of a connection whose client ended it is all
 * parsed. Between requests the connection closes once its answers are out;
 * inside a request (cut short: nothing of it was handed on) it answers 400,
 * unless it was answered from its head (DISCARDING). */
static void input_exhausted(rn_http1 *h) {
    switch (h->state) {
    case ST_READING:
        reject_raw(h, 400);
        return;
    case ST_STREAMING:
        end_streamed_body(h, RN_BODY_CUT);
        return;
    case ST_IDLE:
    case ST_DISCARDING:
        h->state = ST_CLOSING;
        conn_end(h->conn);
        return;
    default:
        return;
    }
}

/* The client shut its sending side: what was received is served (see the
 * top of this file). A held request is told through its on_input_end
 * hook. */
static void http1_input_end(rn_conn *c) {
    rn_http1 *h = http1_of(c);
    if (h->state == ST_HANDLING) {
        assert(h->cur);
        rn_request *r = &h->cur->req;
        void (*fn)(rn_request *) = r->on_input_end;
        r->on_input_end = NULL;
        if (fn)
            fn(r);
        return;
    }
    if (!output_blocked(c))
        process_input(h);
}

/* Feeds buffered input to the parser until a request is dispatched. A call
 * made while an outer call is on the stack (a handler answered at once and
 * the next pipelined request follows) returns and lets the outer loop go on,
 * so pipelining never deepens the stack. */
/* True while the parser must not go on: a request is handled, the
 * connection closes, or a streamed body's sink paused. */
static int parser_parked(const rn_http1 *h) {
    return h->state == ST_HANDLING || h->state == ST_CLOSING ||
           (h->state == ST_STREAMING && h->sink_paused);
}

static void process_input(rn_http1 *h) {
    rn_conn *c = h->conn;
    if (h->processing)
        return;
    h->processing = 1;
    while (!parser_parked(h) && !output_blocked(c) && c->input_off < c->input.len) {
        const char *data = (const char *)c->input.data + c->input_off;
        size_t len = c->input.len - c->input_off;
        if (h->state == ST_STREAMING && len > RN_HTTP_BODY_SLICE_BYTES)
            len = RN_HTTP_BODY_SLICE_BYTES; /* so that a pause stops it soon */
        if (h->fold_from) /* a head continues: its bytes before this read were fed */
            h->fold_from = data;
        llhttp_errno_t err = llhttp_execute(&h->parser, data, len);
        if (err == HPE_OK) {
            c->input_off += len;
            if (h->fold_from)
                rn_fold_scan_feed(&h->fold, h->fold_from, data + len);
        } else if (err == HPE_PAUSED) {
            c->input_off += (size_t)(llhttp_get_error_pos(&h->parser) - data);
            if (h->state != ST_HANDLING && h->state != ST_CLOSING)
                llhttp_resume(&h->parser); /* answered already, or a body goes on: go on */
        } else {
            reject_raw(h, h->refusal ? h->refusal : 400);
            break;
        }
    }
    h->processing = 0;
    if (c->input_off == c->input.len) {
        c->input.len = 0;
        c->input_off = 0;
        if (c->input_ended && !c->closed)
            input_exhausted(h);
    }
    if (!c->reading && !c->closed && !c->input_ended && h->state != ST_CLOSING &&
        c->input.len - c->input_off < INPUT_PAUSE_BYTES)
        conn_read_start(c);
}

/* ---- bodies taken as they arrive ---- */

static void http1_stream_body(rn_exchange *x) {
    rn_http1 *h = http1_of(x->conn);
    assert(h->cur == x && h->state == ST_EARLY);
    h->state = ST_STREAMING;
    h->sink_paused = 0;
    h->body_seen = 0;
    if (h->wants_continue) {
        rn_buf cont = {0};
        rn_buf_append_str(&cont, "HTTP/1.1 100 Continue\r\n\r\n");
        conn_write(h->conn, &cont, NULL, 0);
    }
}

static void http1_body_resume(rn_exchange *x) {
    rn_http1 *h = http1_of(x->conn);
    if (h->cur != x || h->state != ST_STREAMING || !h->sink_paused)
        return;
    h->sink_paused = 0;
    /* the time paused was the handler's: the body's deadline starts over */
    rn_conn *c = h->conn;
    const rn_http_config *cfg = &c->srv->cfg;
    uint64_t rate = x->req.min_body_rate ? x->req.min_body_rate : cfg->min_body_rate;
    uint64_t earned = rate ? h->body_seen * 1000 / rate : 0;
    uint64_t now = uv_now(c->srv->loop);
    h->request_began = now > earned ? now - earned : 0;
    conn_arm_timer(c, cfg->request_timeout_ms);
    process_input(h);
}

static void http1_free(rn_conn *c);

/* A connection's first bytes that are HTTP/2's connection preface (h2c by
 * prior knowledge) switch it to HTTP/2, which takes the input as it is.
 * Returns 1 when it switched, or when the bytes so far are a beginning of
 * the preface (more are awaited: at most HTTP2_PREFACE_LEN - 1 bytes). */
static int switched_to_http2(rn_http1 *h) {
    rn_conn *c = h->conn;
    int match = http2_preface_match(c->input.data + c->input_off, c->input.len - c->input_off);
    if (match == 0) {
        h->fresh = 0;
        return 0;
    }
    if (match < 0)
        return 1;
    http1_free(c);
    c->proto = NULL;
    c->proto_state = NULL;
    http2_attach(c);
    return 1;
}

/* Bytes arrived on an HTTP/1.1 connection: parsed at once, unless a
 * request is being handled or its answer waits to go out (pipelining);
 * then they wait in the input, which stops being read past
 * INPUT_PAUSE_BYTES. */
static void http1_received(rn_conn *c) {
    rn_http1 *h = http1_of(c);
    if (h->fresh && switched_to_http2(h))
        return;
    if (h->state == ST_DISCARDING) {
        uint64_t now = uv_now(c->srv->loop);
        if (now >= h->discard_deadline) {
            conn_close(c);
            return;
        }
        uint64_t left = h->discard_deadline - now;
        conn_arm_timer(c, left < DISCARD_IDLE_MS ? left : DISCARD_IDLE_MS);
    }
    if (parser_parked(h) || output_blocked(c)) {
        if (c->input.len - c->input_off > INPUT_PAUSE_BYTES && c->reading)
            conn_read_stop(c);
        return;
    }
    process_input(h);
}

/* The connection closes: a response under way (SSE, a chunked body) that
 * ends with it was still answered, and is reported like a finished one;
 * the request is aborted. */
static void http1_closing(rn_conn *c) {
    rn_http1 *h = http1_of(c);
    h->state = ST_CLOSING;
    if (h->cur && h->cur->req.status > 0 && c->srv->cfg.on_complete)
        c->srv->cfg.on_complete(&h->cur->req);
    detach_request(h, 1);
}

static int http1_idle(const rn_conn *c) {
    return http1_of(c)->state == ST_IDLE;
}

static int http1_busy(const rn_conn *c) {
    return http1_of(c)->cur != NULL;
}

static void http1_free(rn_conn *c) {
    rn_http1 *h = http1_of(c);
    free(h->spans);
    free(h);
}

static const rn_protocol http1_protocol = {
    .received = http1_received,
    .input_end = http1_input_end,
    .timeout = http1_timeout,
    .written = http1_written,
    .closing = http1_closing,
    .idle = http1_idle,
    .busy = http1_busy,
    .free = http1_free,
    .send_head = http1_send_head,
    .send_body = http1_send_body,
    .send_chunk = http1_send_chunk,
    .end_stream = http1_end_stream,
    .finished = http1_finished,
    .fail = http1_fail,
    .queued = http1_queued,
    .stream_body = http1_stream_body,
    .body_resume = http1_body_resume,
    .streams_as_it_arrives = 1,
};

void http1_attach(rn_conn *c) {
    assert(!c->closed && !c->proto);
    rn_http1 *h = rn_xcalloc(1, sizeof *h);
    h->conn = c;
    llhttp_init(&h->parser, HTTP_REQUEST, &parser_settings);
    h->parser.data = h;
    h->state = ST_IDLE;
    h->fresh = 1;
    c->proto = &http1_protocol;
    c->proto_state = h;
}
