/*
 * http.c — connections, llhttp parsing, response writing, limits and
 * timeouts. See http.h for the model.
 *
 * Connection states: READING (receiving a request; request timer armed),
 * HANDLING (request handed to the handler; parser paused; socket still read
 * for EOF and pipelined bytes), IDLE (keep-alive, idle timer armed) and
 * CLOSING. Parse errors and limit violations answer 4xx and close.
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
 * Writes: tried at once when nothing is queued (try_now), the rest queued
 * with uv_write. Inside a write batch (rn_http_batch_begin) such writes are
 * collected as batch entries instead, and the flush sends them from the
 * loop thread and the fan-out threads (fanout.c), which touch only the
 * entries: descriptor, bytes, result. Everything else is loop-thread only.
 * While bytes stay queued, the send watch closes a client that takes none
 * of them for a whole idle-timeout period (see output_progressed).
 */
#include "transport/http.h"
#include "transport/fanout.h"
#include "transport/listen.h"
#include "transport/request_head.h"
#include "util/map.h"
#include "util/metrics.h"
#include "util/text.h"

#include <assert.h>
#include <errno.h>
#include <linux/sockios.h>
#include <llhttp.h>
#include <stdint.h>
#include <sys/ioctl.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/uio.h>

#define INPUT_PAUSE_BYTES (256 * 1024) /* stop reading past this much pipelined input */
#define FILE_PIECE_BYTES (256 * 1024)  /* rn_http_respond_file reads this much at a time */
#define DISCARD_IDLE_MS 5000           /* an answered body may pause this long ... */
#define DISCARD_TOTAL_MS 30000         /* ... and take this long in all */
#define LINGER_MS 2000                 /* closing: read and drop input this long */
#define EXTEND_STEP_MS 1000            /* a body's earned time moves the request timer in steps */
#define FANOUT_MIN_BATCH 64            /* smaller write batches are sent by the loop thread */

enum { ST_IDLE, ST_READING, ST_EARLY, ST_DISCARDING, ST_HANDLING, ST_CLOSING };

typedef struct batch_entry batch_entry;

struct rn_http_server {
    uv_loop_t *loop;
    rn_listeners listeners;
    rn_http_config cfg;
    rn_request_fn on_request;
    void *arg;
    rn_conn *conns; /* doubly linked list of open connections */
    size_t conn_count;
    int stopping;
    /* write batches (rn_http_batch_begin/flush) */
    rn_fanout *fanout; /* helper threads; NULL: batches are off */
    int batch_depth;   /* begin calls not yet flushed */
    int flushing;      /* writes made meanwhile are not collected */
    batch_entry *batch;
    size_t batch_len, batch_cap;
    uint64_t answer_bytes_held; /* owned bytes of queued writes (max_answer_bytes_in_flight) */
    rn_map peers;               /* client address -> peer (max_connections_per_ip) */
};

/* The open connections of one client address. */
typedef struct {
    uint8_t addr[16]; /* the map key: an IPv6 address, or an IPv4 one mapped into it */
    int count;
} peer;

/* A header's position inside req->raw while it is being received. */
typedef struct {
    size_t name_off, name_len, value_off, value_len;
} header_span;

struct rn_conn {
    uv_tcp_t tcp;
    uv_timer_t timer;
    rn_http_server *srv;
    rn_conn *prev, *next;
    llhttp_t parser;
    int state;
    int reading; /* uv_read_start active */
    int close_after_response;
    uint64_t discard_deadline; /* DISCARDING: uv_now() past which the connection closes */
    int closed;                /* uv_close called */
    int lingering;             /* response sent, write side shut: dropping input */
    int input_ended;           /* EOF read: the client sends nothing more */
    int processing;            /* process_input is on the stack */
    int handles_open;
    rn_buf input; /* received bytes not yet parsed (while HANDLING) */
    size_t input_off;
    rn_request *req; /* current request, or NULL */
    header_span *spans;
    size_t span_count, span_cap;
    int last_was_value;
    int refusal;            /* status for a head a callback refused (414, 431, 400, 501) */
    rn_fold_scan fold;      /* obs-fold in the current head (request_head.h) */
    const char *fold_from;  /* head bytes from here on are not fed to it yet; NULL: none */
    uint64_t request_began; /* uv_now() when the current request's first byte arrived */
    size_t pending_writes;  /* uv_write requests and batch entries not yet settled */
    size_t batch_slot;      /* 1 + index of its entry in the server's batch; 0: none */
    peer *peer;             /* its client address's count, when max_connections_per_ip */
    /* the send watch (see output_progressed) */
    uint64_t writes_done;  /* uv_write requests completed */
    int watching;          /* the watch_* fields hold a reading */
    uint64_t watch_writes; /* writes_done, */
    size_t watch_queued;   /* bytes in libuv's write queue, */
    int watch_unsent;      /* bytes the kernel holds unacknowledged, when last read */
};

/* Bytes queued with uv_write, and what keeps them alive: owned buffers, or
 * a reference to a shared chunk. */
struct write_req {
    uv_write_t w;
    rn_conn *conn;
    rn_buf head, body;
    rn_http_chunk *chunk;
    int file_piece; /* a piece of rn_http_respond_file: send the next one when done */
    size_t held;    /* head and body bytes counted in answer_bytes_held */
};
typedef struct write_req write_req;

struct rn_http_chunk {
    int refs;
    size_t payload_len;
    size_t len;      /* of bytes: size line, payload, CRLF */
    uint8_t bytes[]; /* flexible */
};

/* A write collected by a batch: its bytes (owned head and body, or a
 * referenced chunk), the socket, and what sending them did. Helper threads
 * touch only fd, the bytes, sent and tried. */
struct batch_entry {
    rn_conn *conn; /* NULL once settled */
    int fd;
    rn_buf head, body;
    rn_http_chunk *chunk;
    size_t sent; /* bytes the socket took */
    int tried;   /* the send was made */
};

static llhttp_settings_t parser_settings;

/* Request body bytes held, counted against max_body_bytes_in_flight. A
 * request can outlive its connection (a handler holds it until the log
 * answers), so the count belongs to the module; only the loop thread
 * touches it. */
static uint64_t body_bytes_held;

/* Counts n more body bytes for the connection's current request. Returns
 * -1 (nothing counted) when that would pass the server's bound. Bodies
 * under RN_HTTP_EARLY_BODY_BYTES may use a reserve of an eighth more, so
 * that clients stalling large uploads cannot starve small writes. */
static int body_charge(rn_conn *c, uint64_t n) {
    uint64_t cap = c->srv->cfg.max_body_bytes_in_flight;
    if (cap && c->req->body_charged + n < RN_HTTP_EARLY_BODY_BYTES)
        cap += cap / 8;
    if (cap && (n > cap || body_bytes_held > cap - n))
        return -1;
    body_bytes_held += n;
    c->req->body_charged += n;
    return 0;
}

static void body_uncharge(rn_request *r) {
    body_bytes_held -= r->body_charged;
    r->body_charged = 0;
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf);
static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf);

static void conn_close(rn_conn *c);
static void conn_finish(rn_conn *c);
static void process_input(rn_conn *c);
static void arm_timer(rn_conn *c, uint64_t ms);
static int conn_write(rn_conn *c, rn_buf *head, rn_buf *body, int file_piece);

/* ---- requests ---- */

static rn_request *request_new(rn_conn *c) {
    rn_request *r = rn_xcalloc(1, sizeof *r);
    r->conn = c;
    r->refs = 1;
    r->file_fd = -1;
    return r;
}

void rn_request_hold(rn_request *req) {
    req->refs++;
}

void rn_request_release(rn_request *req) {
    if (--req->refs > 0)
        return;
    body_uncharge(req);
    rn_buf_free(&req->body);
    rn_buf_free(&req->raw);
    rn_buf_free(&req->file_suffix);
    if (req->file_fd >= 0)
        close(req->file_fd);
    free(req->headers);
    free(req);
}

int rn_request_gone(const rn_request *req) {
    return req->conn == NULL;
}

const rn_header *rn_request_header(const rn_request *req, const char *name, size_t *count) {
    const rn_header *first = NULL;
    size_t n = 0;
    for (size_t i = 0; i < req->header_count; i++) {
        if (rn_ieq(req->headers[i].name, req->headers[i].name_len, name)) {
            if (!first)
                first = &req->headers[i];
            n++;
        }
    }
    if (count)
        *count = n;
    return first;
}

/* Detaches the current request from its connection (connection closing or
 * response finished). */
static void detach_request(rn_conn *c, int aborted) {
    rn_request *r = c->req;
    if (!r)
        return;
    c->req = NULL;
    r->conn = NULL;
    if (aborted && r->on_abort) {
        void (*fn)(rn_request *) = r->on_abort;
        r->on_abort = NULL;
        fn(r);
    }
    rn_request_release(r);
}

/* ---- timers ----
 * One timer per connection: the request timeout while READING, the idle
 * timeout while IDLE, and the send watch while answer bytes wait.
 *
 * The send watch: while answer bytes wait for a client (pending_writes), the connection's
 * timer checks every idle-timeout period whether the client took any:
 * a uv_write completed, libuv's write queue shrank, or the kernel's
 * unacknowledged bytes (SIOCOUTQ) shrank since the last reading. A client
 * that took nothing for a whole period is closed; a slow one that keeps
 * reading is not, however long its answer takes. */

/* Records the current send state of c as the reference for the next check. */
static void watch_read(rn_conn *c) {
    int fd = -1, unsent = 0;
    uv_fileno((const uv_handle_t *)&c->tcp, &fd);
    if (fd < 0 || ioctl(fd, SIOCOUTQ, &unsent) < 0)
        unsent = 0;
    c->watch_writes = c->writes_done;
    c->watch_queued = uv_stream_get_write_queue_size((uv_stream_t *)&c->tcp);
    c->watch_unsent = unsent;
    c->watching = 1;
}

/* True when the client took bytes since watch_read (or there was none);
 * takes a new reading either way. */
static int output_progressed(rn_conn *c) {
    int had = c->watching;
    uint64_t writes = c->watch_writes;
    size_t queued = c->watch_queued;
    int unsent = c->watch_unsent;
    watch_read(c);
    return !had || c->writes_done != writes || c->watch_queued < queued || c->watch_unsent < unsent;
}

static void on_timeout(uv_timer_t *t) {
    rn_conn *c = t->data;
    if (c->pending_writes > 0) {
        if (output_progressed(c))
            arm_timer(c, c->srv->cfg.idle_timeout_ms);
        else
            conn_close(c); /* a whole period without taking a byte */
        return;
    }
    c->watching = 0;
    if (c->state == ST_HANDLING)
        return; /* a send watch outlived its bytes; the handler owns the connection */
    if (c->state == ST_READING && c->req && !c->req->responding) {
        /* Slow or stalled request: answer 408 and close. */
        c->close_after_response = 1;
        rn_buf head = {0}, body = {0};
        rn_buf_append_str(&head, "Connection: close\r\n");
        c->state = ST_HANDLING;
        rn_http_respond(c->req, 408, &head, &body);
        return;
    }
    conn_close(c);
}

static void arm_timer(rn_conn *c, uint64_t ms) {
    if (ms)
        uv_timer_start(&c->timer, on_timeout, ms, 0);
    else
        uv_timer_stop(&c->timer);
}

/* ---- parser callbacks ---- */

static int on_message_begin(llhttp_t *p) {
    rn_conn *c = p->data;
    c->req = request_new(c);
    c->req->start_ns = uv_hrtime();
    c->span_count = 0;
    c->last_was_value = 0;
    c->refusal = 0;
    c->fold = (rn_fold_scan){0};
    c->fold_from = NULL;
    if (c->state == ST_IDLE) {
        c->state = ST_READING;
        c->request_began = uv_now(c->srv->loop);
        arm_timer(c, c->srv->cfg.request_timeout_ms);
    }
    return 0;
}

static int header_budget_ok(rn_conn *c, size_t more) {
    if (c->req->raw.len + more <= c->srv->cfg.max_header_bytes)
        return 1;
    c->refusal = 431;
    return 0;
}

/* Feeds the fold scan the head bytes up to a span at `at` and the span's
 * first byte, then moves past the span. */
static void fold_scan_to(rn_conn *c, const char *at, size_t len) {
    if (c->fold_from)
        rn_fold_scan_feed(&c->fold, c->fold_from, at + (len > 0));
    c->fold_from = at + len;
}

static int on_url(llhttp_t *p, const char *at, size_t len) {
    rn_conn *c = p->data;
    if (!header_budget_ok(c, len)) {
        c->refusal = 414;
        return -1;
    }
    rn_buf_append(&c->req->raw, at, len);
    c->req->target_len += len;
    c->fold_from = at + len; /* the scan starts after the target */
    return 0;
}

/* Trailer fields of a chunked body arrive through the same callbacks after
 * on_headers_complete: they are ignored, never appended to req->raw, which
 * req->target and req->headers already point into. */
static int in_trailer(const rn_conn *c) {
    return c->req->headers != NULL;
}

static int on_header_field(llhttp_t *p, const char *at, size_t len) {
    rn_conn *c = p->data;
    if (in_trailer(c))
        return 0;
    if (!header_budget_ok(c, len))
        return -1;
    fold_scan_to(c, at, len);
    if (c->span_count == 0 || c->last_was_value) {
        if (c->span_count >= c->srv->cfg.max_headers) {
            c->refusal = 431;
            return -1;
        }
        if (c->span_count == c->span_cap) {
            c->span_cap = c->span_cap ? c->span_cap * 2 : 16;
            c->spans = rn_xrealloc(c->spans, c->span_cap * sizeof *c->spans);
        }
        c->spans[c->span_count++] = (header_span){c->req->raw.len, 0, 0, 0};
        c->last_was_value = 0;
    }
    rn_buf_append(&c->req->raw, at, len);
    c->spans[c->span_count - 1].name_len += len;
    return 0;
}

static int on_header_value(llhttp_t *p, const char *at, size_t len) {
    rn_conn *c = p->data;
    if (in_trailer(c))
        return 0;
    if (!header_budget_ok(c, len))
        return -1;
    fold_scan_to(c, at, len);
    header_span *h = &c->spans[c->span_count - 1];
    if (!c->last_was_value) {
        h->value_off = c->req->raw.len;
        c->last_was_value = 1;
    }
    rn_buf_append(&c->req->raw, at, len);
    h->value_len += len;
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

static void dispatch(rn_conn *c) {
    c->state = ST_HANDLING;
    arm_timer(c, 0);
    c->srv->on_request(c->req, c->srv->arg);
}

/* Shows a request whose body is still to come to the on_headers hook when
 * its client waits for 100 Continue or declared at least
 * RN_HTTP_EARLY_BODY_BYTES. Returns 1 when the hook answered: the
 * connection is then closing (after Expect: 100-continue, whose client sends
 * no body, or when it was to close anyway) or DISCARDING the body. Returns
 * 0 when the body is to be read as usual. */
static int early_answer(rn_conn *c, llhttp_t *p, int wants_continue) {
    rn_http_server *srv = c->srv;
    int declared = (p->flags & F_CONTENT_LENGTH) != 0;
    int body_follows = declared ? p->content_length > 0 : (p->flags & F_CHUNKED) != 0;
    if (!srv->cfg.on_headers || !body_follows ||
        !(wants_continue || srv->cfg.on_headers_every_body ||
          (declared && p->content_length >= RN_HTTP_EARLY_BODY_BYTES)))
        return 0;
    int close_after = c->close_after_response;
    c->close_after_response = close_after || wants_continue;
    c->state = ST_EARLY;
    srv->cfg.on_headers(c->req, srv->arg); /* may answer: see response_finished() */
    if (c->state != ST_EARLY)
        return 1;
    c->state = ST_READING;
    c->close_after_response = close_after;
    return 0;
}

static int on_headers_complete(llhttp_t *p) {
    rn_conn *c = p->data;
    rn_request *r = c->req;
    r->method = map_method(p->method);
    r->method_name = llhttp_method_name((llhttp_method_t)p->method);
    r->target = (const char *)r->raw.data;
    r->header_count = c->span_count;
    r->headers = rn_xcalloc(c->span_count ? c->span_count : 1, sizeof *r->headers);
    for (size_t i = 0; i < c->span_count; i++) {
        header_span *h = &c->spans[i];
        /* Trim trailing whitespace of values (llhttp leaves it). */
        while (h->value_len && (r->raw.data[h->value_off + h->value_len - 1] == ' ' ||
                                r->raw.data[h->value_off + h->value_len - 1] == '\t'))
            h->value_len--;
        r->headers[i] = (rn_header){(const char *)r->raw.data + h->name_off, h->name_len,
                                    (const char *)r->raw.data + h->value_off, h->value_len};
    }
    c->fold_from = NULL;
    c->refusal = rn_request_head_check(r, p->http_major, p->http_minor, c->fold.folded);
    if (c->refusal)
        return -1;
    if (!llhttp_should_keep_alive(p))
        c->close_after_response = 1;
    if ((p->flags & F_CONTENT_LENGTH) && p->content_length > c->srv->cfg.max_body_bytes) {
        r->body_too_large = 1;
        c->close_after_response = 1;
        dispatch(c);
        return HPE_PAUSED;
    }
    const rn_header *expect = rn_request_header(r, "expect", NULL);
    int wants_continue = expect && rn_ieq(expect->value, expect->value_len, "100-continue");
    if (early_answer(c, p, wants_continue))
        return c->state == ST_DISCARDING ? 0 : HPE_PAUSED;
    /* Load comes after size and the early answer (ext §5.5): a body that
     * would pass the in-flight bound is refused unread. */
    if ((p->flags & F_CONTENT_LENGTH) && p->content_length > 0 &&
        body_charge(c, p->content_length)) {
        r->body_over_budget = 1;
        c->close_after_response = 1;
        dispatch(c);
        return HPE_PAUSED;
    }
    if (p->flags & F_CONTENT_LENGTH)
        rn_buf_reserve(&r->body, (size_t)p->content_length);
    if (wants_continue) {
        rn_buf cont = {0};
        rn_buf_append_str(&cont, "HTTP/1.1 100 Continue\r\n\r\n");
        conn_write(c, &cont, NULL, 0);
    }
    return 0;
}

/* Moves the request timer to request_began + request timeout + received /
 * min_body_rate: an upload that keeps that rate is never cut, a dribbled
 * body still is (about at the timeout when it is much slower). The timer
 * moves only once the deadline passed it by EXTEND_STEP_MS, so a small body
 * costs no timer update. */
static void extend_request_timeout(rn_conn *c, uint64_t received) {
    const rn_http_config *cfg = &c->srv->cfg;
    if (!cfg->min_body_rate || c->state != ST_READING)
        return;
    uint64_t deadline =
        c->request_began + cfg->request_timeout_ms + received * 1000 / cfg->min_body_rate;
    uint64_t now = uv_now(c->srv->loop);
    if (deadline >= now + uv_timer_get_due_in(&c->timer) + EXTEND_STEP_MS)
        arm_timer(c, deadline - now);
}

static int on_body(llhttp_t *p, const char *at, size_t len) {
    rn_conn *c = p->data;
    if (c->state == ST_DISCARDING)
        return 0;
    rn_request *r = c->req;
    if (r->body.len + len > c->srv->cfg.max_body_bytes) {
        r->body_too_large = 1;
        rn_buf_free(&r->body);
        body_uncharge(r);
        c->close_after_response = 1;
        dispatch(c);
        return HPE_PAUSED;
    }
    /* A chunked body is counted as it arrives (a declared one was counted
     * whole from its headers). */
    if (!(p->flags & F_CONTENT_LENGTH) && body_charge(c, len)) {
        r->body_over_budget = 1;
        rn_buf_free(&r->body);
        body_uncharge(r);
        c->close_after_response = 1;
        dispatch(c);
        return HPE_PAUSED;
    }
    rn_buf_append(&r->body, at, len);
    extend_request_timeout(c, r->body.len);
    return 0;
}

static int on_message_complete(llhttp_t *p) {
    rn_conn *c = p->data;
    if (c->state == ST_DISCARDING) { /* an answered body ended: next request */
        c->state = ST_IDLE;
        arm_timer(c, c->srv->cfg.idle_timeout_ms);
        return 0;
    }
    dispatch(c);
    return HPE_PAUSED;
}

/* ---- writing ---- */

static void file_pump(rn_conn *c);

/* True while answers of this connection wait unsent in its write queue: the
 * next pipelined request is not parsed until they are out, so a client that
 * sends requests without reading the answers holds at most one answer in
 * the server's memory (and its input stops being read past
 * INPUT_PAUSE_BYTES). */
static int output_blocked(rn_conn *c) {
    return uv_stream_get_write_queue_size((uv_stream_t *)&c->tcp) > 0;
}

/* What follows a completed write: the idle timer of a connection whose
 * last answer just left, the next file piece, a drained streaming
 * response's hook, pipelined requests, or the end of a closing connection. */
static void after_write(rn_conn *c, int file_piece) {
    if (c->state == ST_IDLE && c->pending_writes == 0 && !c->closed)
        arm_timer(c, c->srv->cfg.idle_timeout_ms); /* idle from the last byte out */
    if (file_piece && !c->closed) {
        file_pump(c);
        return;
    }
    rn_request *r = c->req;
    if (r && r->streaming && r->on_drain && !c->closed &&
        uv_stream_get_write_queue_size((uv_stream_t *)&c->tcp) == 0)
        r->on_drain(r);
    if (c->state == ST_CLOSING && c->pending_writes == 0)
        conn_finish(c);
    else if (!c->closed && c->state != ST_HANDLING && !output_blocked(c))
        process_input(c); /* pipelined requests waited for the answers to go out */
}

static void write_req_free(write_req *wr) {
    if (wr->held)
        wr->conn->srv->answer_bytes_held -= wr->held;
    rn_buf_free(&wr->head);
    rn_buf_free(&wr->body);
    if (wr->chunk)
        rn_http_chunk_release(wr->chunk);
    free(wr);
}

static void on_written(uv_write_t *w, int status) {
    write_req *wr = (write_req *)w;
    rn_conn *c = wr->conn;
    int file_piece = wr->file_piece;
    write_req_free(wr);
    c->pending_writes--;
    c->writes_done++;
    if (status < 0) {
        conn_close(c);
        return;
    }
    after_write(c, file_piece);
}

/* Writes bufs at once (uv_try_write) when nothing is queued on the socket:
 * a write the socket takes whole needs no request, no callback and no
 * change to the poll set. Returns the bytes the socket took; 0 when
 * something is queued, the connection is closed or the write failed
 * (errors surface through the uv_write of the rest). */
static size_t try_now(rn_conn *c, const uv_buf_t *bufs, unsigned n) {
    if (c->pending_writes || c->closed)
        return 0;
    int w = uv_try_write((uv_stream_t *)&c->tcp, bufs, n);
    return w > 0 ? (size_t)w : 0;
}

/* Bookkeeping of a write the socket took whole at once (or a batch entry
 * it took whole): a closing connection with nothing else pending ends. */
static void written_at_once(rn_conn *c) {
    if (c->state == ST_CLOSING && c->pending_writes == 0)
        conn_finish(c);
}

/* Queues the bytes of bufs[0..n) (n <= 3) past the first `sent` with uv_write. wr
 * owns those bytes (its head, body or chunk) and is freed once they are
 * written or the connection fails. Returns -1 when the connection failed,
 * else 0. */
static int queue_rest(rn_conn *c, write_req *wr, const uv_buf_t *bufs, unsigned n, size_t sent) {
    uv_buf_t rest[3];
    unsigned m = 0;
    for (unsigned i = 0; i < n; i++) {
        size_t skip = sent < bufs[i].len ? sent : bufs[i].len;
        sent -= skip;
        if (skip < bufs[i].len)
            rest[m++] = uv_buf_init(bufs[i].base + skip, (unsigned)(bufs[i].len - skip));
    }
    wr->conn = c;
    c->pending_writes++;
    if (uv_write(&wr->w, (uv_stream_t *)&c->tcp, rest, m, on_written) < 0) {
        c->pending_writes--;
        write_req_free(wr);
        conn_close(c);
        return -1;
    }
    wr->held = wr->head.len + wr->body.len;
    c->srv->answer_bytes_held += wr->held;
    if (!uv_is_active((uv_handle_t *)&c->timer)) {
        watch_read(c);
        arm_timer(c, c->srv->cfg.idle_timeout_ms);
    } else if (!c->watching)
        watch_read(c);
    return 0;
}

/* ---- write batches ---- */

/* True when a write to c is to be collected by the open batch: one is
 * open, not being flushed, and nothing is queued on c (a write behind
 * queued bytes joins their queue). */
static int batch_takes(const rn_conn *c) {
    return c->srv->batch_depth > 0 && !c->srv->flushing && c->pending_writes == 0 && !c->closed;
}

/* Collects a write to c: takes over head and body (either may be NULL),
 * or takes a reference to ch. The entry counts as a pending write until it
 * is settled, so that a closing connection waits for it. */
static void batch_add(rn_conn *c, rn_buf *head, rn_buf *body, rn_http_chunk *ch) {
    rn_http_server *srv = c->srv;
    if (srv->batch_len == srv->batch_cap) {
        srv->batch_cap = srv->batch_cap ? srv->batch_cap * 2 : 256;
        srv->batch = rn_xrealloc(srv->batch, srv->batch_cap * sizeof *srv->batch);
    }
    batch_entry *e = &srv->batch[srv->batch_len++];
    *e = (batch_entry){.conn = c, .fd = -1, .chunk = ch};
    uv_fileno((const uv_handle_t *)&c->tcp, &e->fd);
    if (head) {
        e->head = *head;
        *head = (rn_buf){0};
    }
    if (body) {
        e->body = *body;
        *body = (rn_buf){0};
    }
    if (ch)
        ch->refs++;
    c->batch_slot = srv->batch_len;
    c->pending_writes++;
}

/* The entry's bytes in order (head, body, chunk; empty ones left out) into
 * bufs[3]; returns their count and their total in *total. */
static unsigned entry_bufs(const batch_entry *e, uv_buf_t *bufs, size_t *total) {
    unsigned n = 0;
    if (e->head.len)
        bufs[n++] = uv_buf_init((char *)e->head.data, (unsigned)e->head.len);
    if (e->body.len)
        bufs[n++] = uv_buf_init((char *)e->body.data, (unsigned)e->body.len);
    if (e->chunk)
        bufs[n++] = uv_buf_init((char *)e->chunk->bytes, (unsigned)e->chunk->len);
    *total = 0;
    for (unsigned i = 0; i < n; i++)
        *total += bufs[i].len;
    return n;
}

/* Sends an entry's bytes with one non-blocking sendmsg and records how many
 * the socket took (0 on any error: the queued write surfaces it). Runs on
 * the loop thread or a helper; touches only the entry. */
static void entry_send(void *item) {
    batch_entry *e = item;
    uv_buf_t bufs[3];
    size_t total;
    unsigned n = entry_bufs(e, bufs, &total);
    struct iovec iov[3];
    for (unsigned i = 0; i < n; i++)
        iov[i] = (struct iovec){.iov_base = bufs[i].base, .iov_len = bufs[i].len};
    struct msghdr m = {.msg_iov = iov, .msg_iovlen = n};
    ssize_t w;
    do
        w = sendmsg(e->fd, &m, MSG_DONTWAIT | MSG_NOSIGNAL);
    while (w < 0 && errno == EINTR);
    e->sent = w > 0 ? (size_t)w : 0;
    e->tried = 1;
}

/* Settles an entry on the loop thread, sending it first unless that was
 * done: written whole, it is done like a write taken at once; otherwise
 * what remains is queued with uv_write (which surfaces a failed socket as
 * conn_write does). The bytes of a closed connection are dropped. */
static void entry_settle(batch_entry *e) {
    rn_conn *c = e->conn;
    e->conn = NULL;
    c->batch_slot = 0;
    c->pending_writes--;
    if (!e->tried && !c->closed)
        entry_send(e);
    uv_buf_t bufs[3];
    size_t total;
    unsigned n = entry_bufs(e, bufs, &total);
    if (c->closed || e->sent == total) {
        rn_buf_free(&e->head);
        rn_buf_free(&e->body);
        if (e->chunk)
            rn_http_chunk_release(e->chunk);
        if (!c->closed)
            written_at_once(c);
        return;
    }
    write_req *wr = rn_xcalloc(1, sizeof *wr); /* takes the bytes bufs point at */
    wr->head = e->head;
    wr->body = e->body;
    wr->chunk = e->chunk;
    queue_rest(c, wr, bufs, n, e->sent);
}

/* Settles c's entry before anything else is written to c, so that its
 * bytes keep their order. */
static void batch_settle(rn_conn *c) {
    if (c->batch_slot)
        entry_settle(&c->srv->batch[c->batch_slot - 1]);
}

void rn_http_batch_begin(rn_http_server *srv) {
    if (srv->fanout)
        srv->batch_depth++;
}

void rn_http_batch_flush(rn_http_server *srv) {
    if (!srv->fanout || --srv->batch_depth > 0 || srv->flushing)
        return;
    srv->flushing = 1;
    size_t n = 0;
    for (size_t i = 0; i < srv->batch_len; i++) {
        batch_entry *e = &srv->batch[i];
        if (!e->conn)
            continue; /* settled already */
        if (e->conn->closed) {
            entry_settle(e); /* its descriptor is closed: no thread may use it */
            continue;
        }
        srv->batch[n] = *e;
        srv->batch[n].conn->batch_slot = n + 1;
        n++;
    }
    if (n >= FANOUT_MIN_BATCH) {
        rn_fanout_run(srv->fanout, entry_send, srv->batch, sizeof *srv->batch, n);
    } else {
        for (size_t i = 0; i < n; i++)
            entry_send(&srv->batch[i]);
    }
    for (size_t i = 0; i < n; i++)
        if (srv->batch[i].conn) /* settling one may settle others (their writes) */
            entry_settle(&srv->batch[i]);
    srv->batch_len = 0;
    srv->flushing = 0;
}

/* Sends head then body (may be NULL) on the socket; takes both over. The
 * bytes are collected by an open batch, or tried at once (try_now), and
 * whatever remains is queued. A file piece is always queued, so that its
 * completion pumps the next one. Returns -1 when the connection failed,
 * else 0. */
static int conn_write(rn_conn *c, rn_buf *head, rn_buf *body, int file_piece) {
    batch_settle(c);
    if (!file_piece && batch_takes(c)) {
        batch_add(c, head, body, NULL);
        return 0;
    }
    uv_buf_t bufs[2] = {
        uv_buf_init((char *)head->data, (unsigned)head->len),
        uv_buf_init(body ? (char *)body->data : NULL, body ? (unsigned)body->len : 0)};
    unsigned n = bufs[1].len ? 2 : 1;
    size_t sent = file_piece ? 0 : try_now(c, bufs, n);
    if (sent == bufs[0].len + bufs[1].len) {
        rn_buf_free(head);
        if (body)
            rn_buf_free(body);
        written_at_once(c);
        return 0;
    }
    write_req *wr = rn_xcalloc(1, sizeof *wr); /* takes the bytes bufs point at */
    wr->file_piece = file_piece;
    wr->head = *head;
    *head = (rn_buf){0};
    if (body) {
        wr->body = *body;
        *body = (rn_buf){0};
    }
    return queue_rest(c, wr, bufs, n, sent);
}

/* Sends a shared chunk: collected by an open batch, or tried at once from
 * its own bytes; only when the socket does not take them whole is a request
 * made, holding a reference. Returns as conn_write. */
static int conn_write_chunk(rn_conn *c, rn_http_chunk *ch) {
    batch_settle(c);
    if (batch_takes(c)) {
        batch_add(c, NULL, NULL, ch);
        return 0;
    }
    uv_buf_t buf = uv_buf_init((char *)ch->bytes, (unsigned)ch->len);
    size_t sent = try_now(c, &buf, 1);
    if (sent == ch->len) {
        written_at_once(c);
        return 0;
    }
    write_req *wr = rn_xcalloc(1, sizeof *wr);
    wr->chunk = ch;
    ch->refs++;
    return queue_rest(c, wr, &buf, 1, sent);
}

static const char *reason(int status) {
    switch (status) {
    case 100:
        return "Continue";
    case 200:
        return "OK";
    case 201:
        return "Created";
    case 204:
        return "No Content";
    case 206:
        return "Partial Content";
    case 304:
        return "Not Modified";
    case 307:
        return "Temporary Redirect";
    case 400:
        return "Bad Request";
    case 403:
        return "Forbidden";
    case 404:
        return "Not Found";
    case 405:
        return "Method Not Allowed";
    case 408:
        return "Request Timeout";
    case 409:
        return "Conflict";
    case 410:
        return "Gone";
    case 412:
        return "Precondition Failed";
    case 413:
        return "Content Too Large";
    case 414:
        return "URI Too Long";
    case 416:
        return "Range Not Satisfiable";
    case 429:
        return "Too Many Requests";
    case 431:
        return "Request Header Fields Too Large";
    case 500:
        return "Internal Server Error";
    case 501:
        return "Not Implemented";
    case 503:
        return "Service Unavailable";
    default:
        return "Unknown";
    }
}

/* Builds the status line + given header lines + framing headers. */
static void build_head(rn_buf *out, rn_request *req, int status, rn_buf *head,
                       const char *framing) {
    rn_conn *c = req->conn;
    req->status = status;
    if (status > 0 && status < RN_STATUS_SLOTS && req->route >= 0 && req->route < RN_ROUTE_COUNT)
        rn_metric.http_requests[req->route][req->method][status]++;
    rn_buf_appendf(out, "HTTP/1.1 %d %s\r\n", status, reason(status));
    rn_buf_append(out, head->data, head->len);
    if (framing)
        rn_buf_append_str(out, framing);
    if (c->close_after_response || c->srv->stopping)
        rn_buf_append_str(out, "Connection: close\r\n");
    rn_buf_append_str(out, "\r\n");
    rn_buf_free(head);
}

/* Called when the current request's response has been fully queued. An
 * answer given before the body (state EARLY) leaves the parser inside the
 * request: it closes the connection or goes on DISCARDING the body. */
static void response_finished(rn_conn *c) {
    if (c->srv->cfg.on_complete && c->req)
        c->srv->cfg.on_complete(c->req);
    detach_request(c, 0);
    if (c->close_after_response || c->srv->stopping) {
        c->state = ST_CLOSING;
        uv_read_stop((uv_stream_t *)&c->tcp);
        c->reading = 0;
        if (c->pending_writes == 0)
            conn_finish(c);
        return;
    }
    if (c->state == ST_EARLY) {
        c->state = ST_DISCARDING;
        c->discard_deadline = uv_now(c->srv->loop) + DISCARD_TOTAL_MS;
        arm_timer(c, DISCARD_IDLE_MS);
        return;
    }
    c->state = ST_IDLE;
    arm_timer(c, c->srv->cfg.idle_timeout_ms);
    llhttp_resume(&c->parser);
    process_input(c);
}

void rn_http_respond(rn_request *req, int status, rn_buf *head, rn_buf *body) {
    rn_conn *c = req->conn;
    if (!c || req->responding) {
        rn_buf_free(head);
        rn_buf_free(body);
        return;
    }
    req->responding = 1;
    int no_body = status == 204 || status == 304 || req->method == RN_HTTP_HEAD;
    char framing[64] = "";
    if (!no_body)
        snprintf(framing, sizeof framing, "Content-Length: %zu\r\n", body->len);
    rn_buf out = {0};
    build_head(&out, req, status, head, framing);
    if (no_body)
        rn_buf_free(body);
    if (!no_body)
        req->bytes_out = body->len;
    conn_write(c, &out, no_body ? NULL : body, 0);
    if (req->conn)
        response_finished(c);
}

/* Sends the next piece of a file body, or the suffix and the end of the
 * response once the file is sent. One piece is in flight at a time. */
static void file_pump(rn_conn *c) {
    rn_request *r = c->req;
    if (!r || r->file_fd < 0)
        return;
    if (r->file_left == 0) {
        close(r->file_fd);
        r->file_fd = -1;
        if (r->file_suffix.len)
            conn_write(c, &r->file_suffix, NULL, 0);
        if (r->conn)
            response_finished(c);
        return;
    }
    size_t piece_max =
        rn_http_answer_room(r) < FILE_PIECE_BYTES ? RN_HTTP_SMALL_PIECE_BYTES : FILE_PIECE_BYTES;
    size_t n = r->file_left < piece_max ? (size_t)r->file_left : piece_max;
    rn_buf piece = {0};
    rn_buf_reserve(&piece, n);
    ssize_t got = pread(r->file_fd, piece.data, n, (off_t)r->file_off);
    if (got <= 0) {
        /* The body was promised with its length: a short file can only end
         * the connection. */
        rn_buf_free(&piece);
        conn_close(c);
        return;
    }
    piece.len = (size_t)got;
    r->file_off += (uint64_t)got;
    r->file_left -= (uint64_t)got;
    conn_write(c, &piece, NULL, 1);
}

uint64_t rn_http_answer_bytes_held(const rn_http_server *srv) {
    return srv->answer_bytes_held;
}

size_t rn_http_answer_room(const rn_request *req) {
    const rn_http_server *srv = req->conn ? req->conn->srv : NULL;
    if (!srv || !srv->cfg.max_answer_bytes_in_flight)
        return SIZE_MAX;
    uint64_t held = srv->answer_bytes_held, bound = srv->cfg.max_answer_bytes_in_flight;
    uint64_t room = held < bound ? bound - held : 0;
    return room > RN_HTTP_SMALL_PIECE_BYTES ? (size_t)room : RN_HTTP_SMALL_PIECE_BYTES;
}

void rn_http_respond_file(rn_request *req, int status, rn_buf *head, rn_buf *prefix, int fd,
                          uint64_t off, uint64_t len, rn_buf *suffix) {
    rn_conn *c = req->conn;
    if (!c || req->responding || req->method == RN_HTTP_HEAD) {
        if (c && !req->responding) {
            /* HEAD: the headers of the whole answer, no body. */
            close(fd);
            rn_buf_free(prefix);
            rn_buf_free(suffix);
            rn_buf empty = {0};
            rn_http_respond(req, status, head, &empty);
            return;
        }
        close(fd);
        rn_buf_free(head);
        rn_buf_free(prefix);
        rn_buf_free(suffix);
        return;
    }
    req->responding = 1;
    char framing[64];
    snprintf(framing, sizeof framing, "Content-Length: %llu\r\n",
             (unsigned long long)(prefix->len + len + suffix->len));
    rn_buf out = {0};
    build_head(&out, req, status, head, framing);
    req->bytes_out = prefix->len + len + suffix->len;
    req->file_fd = fd;
    req->file_off = off;
    req->file_left = len;
    req->file_suffix = *suffix;
    *suffix = (rn_buf){0};
    if (conn_write(c, &out, prefix, 0) < 0)
        return;
    file_pump(c);
}

void rn_http_stream_start(rn_request *req, int status, rn_buf *head) {
    rn_conn *c = req->conn;
    if (!c || req->responding) {
        rn_buf_free(head);
        return;
    }
    req->responding = 1;
    req->streaming = 1;
    rn_buf out = {0};
    build_head(&out, req, status, head, "Transfer-Encoding: chunked\r\n");
    conn_write(c, &out, NULL, 0);
}

/* Writes the size line of a chunk of n bytes ("<hex>\r\n") to out, which
 * has room for CHUNK_LINE_MAX bytes; returns its length. */
#define CHUNK_LINE_MAX (2 * sizeof(size_t) + 2)
static size_t chunk_line(char *out, size_t n) {
    static const char hex[] = "0123456789abcdef";
    char digits[2 * sizeof(size_t)];
    size_t k = 0;
    do {
        digits[k++] = hex[n & 15];
        n >>= 4;
    } while (n);
    for (size_t i = 0; i < k; i++)
        out[i] = digits[k - 1 - i];
    out[k] = '\r';
    out[k + 1] = '\n';
    return k + 2;
}

/* Bytes still queued on the streamed response's socket (0 once gone). */
static size_t stream_queued(const rn_request *req) {
    return req->conn ? uv_stream_get_write_queue_size((uv_stream_t *)&req->conn->tcp) : 0;
}

size_t rn_http_stream_write(rn_request *req, rn_buf *chunk) {
    rn_conn *c = req->conn;
    if (!c || !req->streaming || chunk->len == 0) {
        rn_buf_free(chunk);
        return 0;
    }
    req->bytes_out += chunk->len;
    rn_buf frame = {0};
    rn_buf_reserve(&frame, CHUNK_LINE_MAX);
    frame.len = chunk_line((char *)frame.data, chunk->len);
    rn_buf_append(chunk, "\r\n", 2);
    conn_write(c, &frame, chunk, 0);
    return stream_queued(req);
}

rn_http_chunk *rn_http_chunk_new(const void *payload, size_t len) {
    rn_http_chunk *ch = rn_xmalloc(sizeof *ch + CHUNK_LINE_MAX + len + 2);
    ch->refs = 1;
    ch->payload_len = len;
    size_t n = chunk_line((char *)ch->bytes, len);
    memcpy(ch->bytes + n, payload, len);
    memcpy(ch->bytes + n + len, "\r\n", 2);
    ch->len = n + len + 2;
    return ch;
}

void rn_http_chunk_release(rn_http_chunk *ch) {
    if (--ch->refs == 0)
        free(ch);
}

size_t rn_http_stream_write_chunk(rn_request *req, rn_http_chunk *ch) {
    rn_conn *c = req->conn;
    if (!c || !req->streaming)
        return 0;
    req->bytes_out += ch->payload_len;
    conn_write_chunk(c, ch);
    return stream_queued(req);
}

void rn_http_stream_end(rn_request *req) {
    rn_conn *c = req->conn;
    if (!c || !req->streaming)
        return;
    req->streaming = 0;
    rn_buf end = {0};
    rn_buf_append_str(&end, "0\r\n\r\n");
    conn_write(c, &end, NULL, 0);
    if (req->conn)
        response_finished(c);
}

/* ---- reading ---- */

/* Answers a request the parser rejected and closes the connection. */
static void reject_raw(rn_conn *c, int status) {
    static char buf[128];
    int n = snprintf(buf, sizeof buf,
                     "HTTP/1.1 %d %s\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", status,
                     reason(status));
    rn_buf head = {0};
    rn_buf_append(&head, buf, (size_t)n);
    detach_request(c, 1);
    c->state = ST_CLOSING;
    uv_read_stop((uv_stream_t *)&c->tcp);
    c->reading = 0;
    conn_write(c, &head, NULL, 0);
}

/* Called once the input of a connection whose client ended it is all
 * parsed. Between requests the connection closes once its answers are out;
 * inside a request (cut short: nothing of it was handed on) it answers 400,
 * unless it was answered from its head (DISCARDING). */
static void input_exhausted(rn_conn *c) {
    switch (c->state) {
    case ST_READING:
        reject_raw(c, 400);
        return;
    case ST_IDLE:
    case ST_DISCARDING:
        c->state = ST_CLOSING;
        if (c->pending_writes == 0)
            conn_close(c);
        return;
    default:
        return;
    }
}

/* The client shut its sending side: reading stops, and what was received
 * is served (see the top of this file). A held request is told through its
 * on_input_end hook. */
static void input_end(rn_conn *c) {
    uv_read_stop((uv_stream_t *)&c->tcp);
    c->reading = 0;
    c->input_ended = 1;
    if (c->state == ST_CLOSING) {
        if (c->pending_writes == 0)
            conn_close(c);
        return;
    }
    if (c->state == ST_HANDLING) {
        rn_request *r = c->req;
        assert(r);
        void (*fn)(rn_request *) = r->on_input_end;
        r->on_input_end = NULL;
        if (fn)
            fn(r);
        return;
    }
    if (!output_blocked(c))
        process_input(c);
}

/* Feeds buffered input to the parser until a request is dispatched. A call
 * made while an outer call is on the stack (a handler answered at once and
 * the next pipelined request follows) returns and lets the outer loop go on,
 * so pipelining never deepens the stack. */
static void process_input(rn_conn *c) {
    if (c->processing)
        return;
    c->processing = 1;
    while (c->state != ST_HANDLING && c->state != ST_CLOSING && !output_blocked(c) &&
           c->input_off < c->input.len) {
        const char *data = (const char *)c->input.data + c->input_off;
        size_t len = c->input.len - c->input_off;
        if (c->fold_from) /* a head continues: its bytes before this read were fed */
            c->fold_from = data;
        llhttp_errno_t err = llhttp_execute(&c->parser, data, len);
        if (err == HPE_OK) {
            c->input_off = c->input.len;
            if (c->fold_from)
                rn_fold_scan_feed(&c->fold, c->fold_from, data + len);
        } else if (err == HPE_PAUSED) {
            c->input_off += (size_t)(llhttp_get_error_pos(&c->parser) - data);
            if (c->state != ST_HANDLING && c->state != ST_CLOSING)
                llhttp_resume(&c->parser); /* answered already: go on */
        } else {
            reject_raw(c, c->refusal ? c->refusal : 400);
            break;
        }
    }
    c->processing = 0;
    if (c->input_off == c->input.len) {
        c->input.len = 0;
        c->input_off = 0;
        if (c->input_ended && !c->closed)
            input_exhausted(c);
    }
    if (!c->reading && !c->closed && !c->input_ended && c->state != ST_CLOSING &&
        c->input.len - c->input_off < INPUT_PAUSE_BYTES) {
        uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
        c->reading = 1;
    }
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
    rn_conn *c = h->data;
    (void)suggested;
    rn_buf_reserve(&c->input, 65536);
    *buf =
        uv_buf_init((char *)c->input.data + c->input.len, (unsigned)(c->input.cap - c->input.len));
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf) {
    rn_conn *c = s->data;
    (void)buf;
    if (c->lingering) { /* the answer is out: drop input until EOF or LINGER_MS */
        if (n < 0)
            conn_close(c);
        c->input.len = c->input_off = 0;
        return;
    }
    if (n == UV_EOF) {
        input_end(c);
        return;
    }
    if (n < 0) {
        conn_close(c);
        return;
    }
    c->input.len += (size_t)n;
    if (c->state == ST_DISCARDING) {
        uint64_t now = uv_now(c->srv->loop);
        if (now >= c->discard_deadline) {
            conn_close(c);
            return;
        }
        uint64_t left = c->discard_deadline - now;
        arm_timer(c, left < DISCARD_IDLE_MS ? left : DISCARD_IDLE_MS);
    }
    if (c->state == ST_HANDLING || c->state == ST_CLOSING || output_blocked(c)) {
        if (c->input.len - c->input_off > INPUT_PAUSE_BYTES && c->reading) {
            uv_read_stop(s);
            c->reading = 0;
        }
        return;
    }
    process_input(c);
}

/* ---- connection lifecycle ---- */

static void on_handle_closed(uv_handle_t *h) {
    rn_conn *c = h->data;
    if (--c->handles_open > 0)
        return;
    rn_http_server *srv = c->srv;
    if (c->prev)
        c->prev->next = c->next;
    else
        srv->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    srv->conn_count--;
    rn_buf_free(&c->input);
    free(c->spans);
    free(c);
}

/* Counts c against its client address; returns 0, or -1 when the address
 * already holds max_connections_per_ip (or cannot be read). */
static int peer_join(rn_conn *c) {
    rn_http_server *srv = c->srv;
    struct sockaddr_storage ss;
    int len = sizeof ss;
    if (uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&ss, &len) < 0)
        return -1;
    uint8_t addr[16] = {0};
    if (ss.ss_family == AF_INET) {
        addr[10] = addr[11] = 0xff; /* ::ffff:a.b.c.d */
        memcpy(addr + 12, &((struct sockaddr_in *)&ss)->sin_addr, 4);
    } else {
        memcpy(addr, &((struct sockaddr_in6 *)&ss)->sin6_addr, 16);
    }
    peer *p = rn_map_get(&srv->peers, addr, sizeof addr);
    if (p && p->count >= srv->cfg.max_connections_per_ip)
        return -1;
    if (!p) {
        p = rn_xcalloc(1, sizeof *p);
        memcpy(p->addr, addr, sizeof addr);
        rn_map_put(&srv->peers, p->addr, sizeof p->addr, p);
    }
    p->count++;
    c->peer = p;
    return 0;
}

/* Uncounts c from its client address, forgetting an address left with none. */
static void peer_leave(rn_conn *c) {
    peer *p = c->peer;
    if (!p)
        return;
    c->peer = NULL;
    if (--p->count == 0) {
        rn_map_remove(&c->srv->peers, p->addr, sizeof p->addr);
        free(p);
    }
}

static void conn_close(rn_conn *c) {
    if (c->closed)
        return;
    c->closed = 1;
    c->state = ST_CLOSING;
    peer_leave(c);
    /* A response under way (SSE, a chunked body) that ends with the
     * connection was still answered: report it like a finished one. */
    if (c->req && c->req->status > 0 && c->srv->cfg.on_complete)
        c->srv->cfg.on_complete(c->req);
    detach_request(c, 1);
    uv_close((uv_handle_t *)&c->tcp, on_handle_closed);
    uv_close((uv_handle_t *)&c->timer, on_handle_closed);
}

static void on_shutdown(uv_shutdown_t *sr, int status) {
    rn_conn *c = sr->data;
    free(sr);
    if (status < 0)
        conn_close(c); /* idempotent; also runs (ECANCELED) before a close completes */
}

/* Ends a connection whose last response is written: shuts the write side
 * and reads (and drops) what the client still sends until it closes or
 * LINGER_MS pass; closes at once when the client's input ended. Closing
 * with unread input would make the kernel send a reset, and the client
 * could lose the response it was sent (a 413, 431 or 400 to a client still
 * sending). */
static void conn_finish(rn_conn *c) {
    if (c->closed || c->lingering)
        return;
    if (c->input_ended) {
        conn_close(c);
        return;
    }
    c->lingering = 1;
    uv_shutdown_t *sr = rn_xcalloc(1, sizeof *sr);
    sr->data = c;
    if (uv_shutdown(sr, (uv_stream_t *)&c->tcp, on_shutdown) < 0) {
        free(sr);
        conn_close(c);
        return;
    }
    c->input.len = c->input_off = 0;
    arm_timer(c, LINGER_MS); /* on_timeout closes: the state is ST_CLOSING */
    if (!c->reading && uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) == 0)
        c->reading = 1;
}

static void on_connection(uv_stream_t *listener, int status) {
    rn_http_server *srv = listener->data;
    if (status < 0)
        return;
    rn_conn *c = rn_xcalloc(1, sizeof *c);
    c->srv = srv;
    uv_tcp_init(srv->loop, &c->tcp);
    c->tcp.data = c;
    if (uv_accept(listener, (uv_stream_t *)&c->tcp) < 0) {
        free(c);
        return;
    }
    uv_timer_init(srv->loop, &c->timer);
    c->timer.data = c;
    c->handles_open = 2;
    c->next = srv->conns;
    if (srv->conns)
        srv->conns->prev = c;
    srv->conns = c;
    srv->conn_count++;
    if (srv->stopping ||
        (srv->cfg.max_connections && (int)srv->conn_count > srv->cfg.max_connections) ||
        (srv->cfg.max_connections_per_ip && peer_join(c) < 0)) {
        conn_close(c);
        return;
    }
    uv_tcp_nodelay(&c->tcp, 1);
    llhttp_init(&c->parser, HTTP_REQUEST, &parser_settings);
    c->parser.data = c;
    c->state = ST_IDLE;
    arm_timer(c, srv->cfg.idle_timeout_ms);
    uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
    c->reading = 1;
}

rn_http_server *rn_http_listen(uv_loop_t *loop, const rn_http_config *cfg, rn_request_fn on_request,
                               void *arg, char *err, size_t errcap) {
    llhttp_settings_init(&parser_settings);
    parser_settings.on_message_begin = on_message_begin;
    parser_settings.on_url = on_url;
    parser_settings.on_header_field = on_header_field;
    parser_settings.on_header_value = on_header_value;
    parser_settings.on_headers_complete = on_headers_complete;
    parser_settings.on_body = on_body;
    parser_settings.on_message_complete = on_message_complete;

    rn_http_server *srv = rn_xcalloc(1, sizeof *srv);
    srv->loop = loop;
    srv->cfg = *cfg;
    srv->on_request = on_request;
    srv->arg = arg;
    if (rn_listeners_open(&srv->listeners, loop, cfg->host, cfg->port, on_connection, srv, err,
                          errcap) != 0) {
        uv_run(loop, UV_RUN_NOWAIT); /* the listeners that were opened finish closing */
        rn_http_free(srv);
        return NULL;
    }
    if (cfg->fanout_threads > 0)
        srv->fanout = rn_fanout_new(cfg->fanout_threads);
    return srv;
}

int rn_http_listen_addresses(const rn_http_server *srv, char *out, size_t cap) {
    return rn_listeners_describe(&srv->listeners, out, cap);
}

void rn_http_stop_accepting(rn_http_server *srv) {
    if (srv->stopping)
        return;
    srv->stopping = 1;
    rn_listeners_close(&srv->listeners);
    for (rn_conn *c = srv->conns, *next; c; c = next) {
        next = c->next;
        if (c->state == ST_IDLE)
            conn_close(c);
    }
}

size_t rn_http_connections(const rn_http_server *srv) {
    return srv->conn_count;
}

size_t rn_http_active_connections(const rn_http_server *srv) {
    size_t n = 0;
    for (rn_conn *c = srv->conns; c; c = c->next)
        if (c->req && !c->closed)
            n++;
    return n;
}

void rn_http_close(rn_http_server *srv) {
    if (!srv->stopping)
        rn_http_stop_accepting(srv);
    for (rn_conn *c = srv->conns, *next; c; c = next) {
        next = c->next;
        conn_close(c);
    }
}

void rn_http_free(rn_http_server *srv) {
    rn_map_free(&srv->peers); /* empty: every connection left its peer */
    rn_fanout_free(srv->fanout);
    free(srv->batch);
    free(srv);
}
