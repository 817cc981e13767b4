/*
 * streams.c — stream operations for both surfaces. See streams.h.
 *
 * Each request gets a stream_ctx holding its parsed inputs and its surface's
 * profile. Mutations become an
 * rn_op for the engine and are answered from its done callback. Reads are
 * answered from applied (durable) state; a long-poll at the tail or an SSE
 * reader parks on the stream's waiter list (live.c) with a timer, and is
 * woken by the engine's change hook. A ctx that owns a timer is freed from
 * the timer's close callback; every other ctx is freed when answered.
 */
#include "surface/streams.h"
#include "live/live.h"
#include "surface/bucket.h"
#include "surface/offset.h"
#include "surface/params.h"
#include "surface/reply.h"
#include "surface/routing.h"
#include "util/clock.h"
#include "util/json_text.h"
#include "util/metrics.h"
#include "util/text.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CURSOR_EPOCH_MS 1728432000000ll /* 2024-10-09T00:00:00Z */
#define CURSOR_INTERVAL_MS 20000
#define BUCKET_READ_CAP (8u << 20) /* ext §9.3: bytes per response or SSE event */
#define BUCKET_POLL_DEFAULT_MS 1000
#define BUCKET_POLL_MAX_MS 60000

const rn_profile RN_PROFILE_V1 = {.name = "v1"};
const rn_profile RN_PROFILE_BUCKET = {.name = "bucket",
                                      .ndjson_reads = 1,
                                      .read_parameters = 1,
                                      .sse_error_events = 1,
                                      .offset_past_tail_416 = 1,
                                      .bucket_not_found = 1};

typedef enum { READ_CATCHUP, READ_LONG_POLL, READ_SSE } read_mode;

typedef struct stream_ctx {
    rn_surface *sf;
    const rn_profile *prof;
    rn_request *req;
    char *path; /* percent-decoded stream path */
    size_t path_len;
    char *fork_source; /* percent-decoded Stream-Forked-From, or NULL */
    rn_op op;
    /* reads */
    read_mode mode;
    rn_offset_kind offset_kind;
    uint64_t offset; /* current read position */
    int has_cursor;
    uint64_t client_cursor;
    size_t max_bytes;         /* this request's response / SSE event cap */
    uint64_t poll_timeout_ms; /* this request's long-poll wait */
    /* live reads */
    rn_waiter waiter;
    uv_timer_t timer;
    int timer_started;
    int finished;
    int sse_paused; /* waiting for the socket to drain */
    struct stream_ctx *live_prev, *live_next;
} stream_ctx;

struct rn_surface {
    uv_loop_t *loop;
    rn_engine *engine;
    rn_surface_config cfg;
    stream_ctx *live; /* live reads in progress */
    struct rn_parts *parts;
    size_t live_count;
};

/* The last SSE data event built, with what it was built from, and the
 * chunk that carries it with its control event. After an append, every
 * reader parked at the old tail wants the same event: they share one read
 * of the stream and one encoding. Readers whose control event is the same
 * too (the cursor of the current interval, the same closure) share the
 * framed chunk as well, which the transport writes from its own bytes:
 * fan-out then costs no formatting, allocation or copy per reader. A reader
 * whose cursor differs (it sent one that is not behind the interval) gets
 * its own chunk. Bounded by one event's size, plus chunks the transport
 * still holds for sockets that did not take them at once. */
static struct {
    uint64_t stream_id, incarnation, offset, tail;
    size_t max_bytes;
    const rn_profile *prof;
    long got;
    rn_buf event;
    rn_http_chunk *chunk;  /* event + control event, framed; NULL until built */
    uint64_t chunk_cursor; /* the cursor interval its control event carries */
    int chunk_closed;      /* the stream was closed when it was built */
} shared_event;

rn_surface *rn_surface_new(uv_loop_t *loop, rn_engine *engine, const rn_surface_config *cfg) {
    rn_surface *sf = rn_xcalloc(1, sizeof *sf);
    sf->loop = loop;
    sf->engine = engine;
    sf->cfg = *cfg;
    return sf;
}

rn_engine *rn_surface_engine(const rn_surface *sf) {
    return sf->engine;
}

struct rn_parts *rn_surface_parts(const rn_surface *sf) {
    return sf->parts;
}

void rn_surface_set_parts(rn_surface *sf, struct rn_parts *p) {
    sf->parts = p;
}

uv_loop_t *rn_surface_loop(const rn_surface *sf) {
    return sf->loop;
}

const rn_surface_config *rn_surface_cfg(const rn_surface *sf) {
    return &sf->cfg;
}

void rn_surface_free(rn_surface *sf) {
    rn_buf_free(&shared_event.event);
    if (shared_event.chunk)
        rn_http_chunk_release(shared_event.chunk);
    shared_event.chunk = NULL;
    free(sf);
}

size_t rn_surface_live_reads(const rn_surface *sf) {
    return sf->live_count;
}

/* ---- context lifetime ---- */

static void ctx_free(stream_ctx *c) {
    rn_request_release(c->req);
    free(c->path);
    free(c->fork_source);
    free(c);
}

static void on_timer_closed(uv_handle_t *h) {
    ctx_free(h->data);
}

/* Ends a ctx: unregisters it everywhere and frees it (after its timer
 * closed, if it has one). Idempotent. */
static void ctx_finish(stream_ctx *c) {
    if (c->finished)
        return;
    c->finished = 1;
    rn_live_remove(&c->waiter);
    c->req->on_abort = NULL;
    c->req->on_drain = NULL;
    c->req->on_input_end = NULL;
    if (c->timer_started) {
        rn_surface *sf = c->sf;
        if (c->live_prev)
            c->live_prev->live_next = c->live_next;
        else
            sf->live = c->live_next;
        if (c->live_next)
            c->live_next->live_prev = c->live_prev;
        sf->live_count--;
        uv_close((uv_handle_t *)&c->timer, on_timer_closed);
    } else {
        ctx_free(c);
    }
}

static void on_abort(rn_request *req) {
    stream_ctx *c = req->handler_data;
    if (c->op.done && !c->timer_started)
        return; /* an engine op is in flight; its done callback frees */
    ctx_finish(c);
}

/* ---- small helpers ---- */

static void append_content_type(rn_buf *h, const rn_stream *s) {
    rn_buf_append_str(h, "Content-Type: ");
    rn_buf_append(h, s->content_type, s->content_type_len);
    rn_buf_append_str(h, "\r\n");
}

/* The current cursor interval: CURSOR_INTERVAL_MS steps since
 * CURSOR_EPOCH_MS. */
static uint64_t cursor_interval(void) {
    int64_t now = rn_now_ms();
    return now > CURSOR_EPOCH_MS ? (uint64_t)(now - CURSOR_EPOCH_MS) / CURSOR_INTERVAL_MS : 0;
}

/* The cursor to send c in the given interval: the interval, or past the
 * client's own cursor by a random jitter when that is not behind it (so a
 * cursor never repeats and caches along the way cannot loop). Only the
 * jittered value differs from the interval. */
static uint64_t cursor_after(const stream_ctx *c, uint64_t interval) {
    if (c->has_cursor && c->client_cursor >= interval)
        return c->client_cursor + 1 + (uint64_t)(rand() % 180);
    return interval;
}

static uint64_t next_cursor(const stream_ctx *c) {
    return cursor_after(c, cursor_interval());
}

static void append_cursor(rn_buf *h, const stream_ctx *c) {
    rn_buf_appendf(h, "Stream-Cursor: %llu\r\n", (unsigned long long)next_cursor(c));
}

static void append_expiry(rn_buf *h, const rn_stream *s) {
    if (s->ttl_s >= 0)
        rn_buf_appendf(h, "Stream-TTL: %lld\r\n", (long long)s->ttl_s);
    if (s->expires_at_ms >= 0) {
        char ts[48];
        rn_format_rfc3339(s->expires_at_ms, ts);
        rn_buf_appendf(h, "Stream-Expires-At: %s\r\n", ts);
    }
}

/* Wraps stored JSON message text ("m1\nm2\n") as an array "[m1,m2]". */
static void json_array_from_messages(rn_buf *out, const uint8_t *text, size_t len) {
    rn_buf_reserve(out, len + 2);
    out->data[out->len++] = '[';
    if (len) {
        memcpy(out->data + out->len, text, len);
        for (size_t i = 0; i + 1 < len; i++)
            if (out->data[out->len + i] == '\n')
                out->data[out->len + i] = ',';
        out->len += len - 1; /* drop the final LF */
    }
    out->data[out->len++] = ']';
}

/* ---- mutations ---- */

static void op_done(rn_op *op);
static rn_error missing_error(const stream_ctx *c);

static stream_ctx *ctx_new(rn_surface *sf, rn_request *req, const char *path, size_t path_len) {
    stream_ctx *c = rn_xcalloc(1, sizeof *c);
    c->sf = sf;
    c->req = req;
    rn_request_hold(req);
    c->path = rn_xstrndup(path, path_len);
    c->path_len = path_len;
    req->handler_data = c;
    req->on_abort = on_abort;
    c->op.in.path = c->path;
    c->op.in.path_len = path_len;
    c->op.in.ttl_s = -1;
    c->op.in.expires_at_ms = -1;
    c->op.arg = c;
    return c;
}

static void reply_and_finish(stream_ctx *c, rn_error e, rn_buf *extra) {
    rn_reply_error(c->req, e, extra);
    ctx_finish(c);
}

static void submit(stream_ctx *c) {
    c->op.done = op_done;
    rn_engine_submit(c->sf->engine, &c->op);
}

/* Answers a request that its headers or query refused (params.h). */
static void reply_fault(stream_ctx *c, const rn_param_fault *f) {
    rn_reply_param_fault(c->req, f);
    ctx_finish(c);
}

#define MAX_HEADER_INT ((1ull << 53) - 1) /* PROTOCOL: integers up to 2^53-1 */

/* Reads Content-Type into op (left NULL when absent). */
static int parse_content_type(const rn_request *req, rn_op *op, rn_param_fault *f) {
    const rn_header *ct;
    if (rn_param_header(req, "Content-Type", RN_E_INVALID_CONTENT_TYPE, &ct, f))
        return -1;
    if (ct) {
        op->in.content_type = ct->value;
        op->in.content_type_len = ct->value_len;
    }
    return 0;
}

/* Reads Stream-Closed into op: only "true" (any case) closes; PROTOCOL
 * §4.1 makes every other value, the empty one too, mean absent. */
static int parse_closed(const rn_request *req, rn_op *op, rn_param_fault *f) {
    const rn_header *h;
    if (rn_param_header(req, "Stream-Closed", RN_PARAM_LENIENT, &h, f))
        return -1;
    op->in.close = h && rn_ieq(h->value, h->value_len, "true");
    return 0;
}

/* Reads the fork headers of a create. Returns 0, or -1 with *f set. The
 * source is named by its URL path (/v1/stream/...) or its stream path. */
static int parse_fork(stream_ctx *c, rn_param_fault *f) {
    rn_request *req = c->req;
    const rn_header *from, *off;
    int has_sub;
    if (rn_param_header(req, "Stream-Forked-From", RN_E_INVALID_FORK_SOURCE, &from, f) ||
        rn_param_header(req, "Stream-Fork-Offset", RN_E_INVALID_FORK_OFFSET, &off, f) ||
        rn_param_header_u64(req, "Stream-Fork-Sub-Offset", MAX_HEADER_INT, RN_E_INVALID_SUB_OFFSET,
                            &has_sub, &c->op.in.fork_sub_offset, f))
        return -1;
    if (has_sub && !from)
        return rn_param_refuse(f, RN_E_INVALID_SUB_OFFSET);
    if (!from)
        return off ? rn_param_refuse(f, RN_E_INVALID_FORK_OFFSET) : 0;
    if (c->op.in.fork_sub_offset > 0 && !off)
        return rn_param_refuse(f, RN_E_INVALID_SUB_OFFSET);
    if (off) {
        rn_offset_kind kind;
        if (rn_offset_parse(off->value, off->value_len, &kind, &c->op.in.fork_offset) ||
            kind == RN_OFFSET_NOW)
            return rn_param_refuse(f, RN_E_INVALID_FORK_OFFSET);
        c->op.in.has_fork_offset = 1;
    }
    const char *p = from->value;
    size_t n = from->value_len;
    static const char prefix[] = "/v1/stream/";
    if (n > sizeof prefix - 1 && memcmp(p, prefix, sizeof prefix - 1) == 0) {
        p += sizeof prefix - 1;
        n -= sizeof prefix - 1;
    }
    c->fork_source = rn_xmalloc(n + 1);
    long dlen = rn_percent_decode(p, n, c->fork_source);
    if (dlen <= 0)
        return rn_param_refuse(f, RN_E_INVALID_FORK_SOURCE);
    c->op.in.fork_source = c->fork_source;
    c->op.in.fork_source_len = (size_t)dlen;
    return 0;
}

/* True when the request carries any producer header. */
static int has_producer_headers(const rn_request *req) {
    static const char *const names[] = {"producer-id", "producer-epoch", "producer-seq",
                                        "producer-digest"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (rn_request_header(req, names[i], NULL))
            return 1;
    return 0;
}

/* A create. Producer headers are refused (ext §5.1): a create has no
 * producer key; the producer claims an epoch once the stream exists. */
static void handle_put(stream_ctx *c) {
    rn_request *req = c->req;
    if (has_producer_headers(req)) {
        reply_and_finish(c, RN_E_PRODUCER_ON_CREATE, NULL);
        return;
    }
    rn_param_fault f;
    const rn_header *exp;
    int has_ttl;
    uint64_t ttl;
    if (parse_fork(c, &f) ||
        rn_param_header_u64(req, "Stream-TTL", MAX_HEADER_INT, RN_E_INVALID_HEADER_TTL, &has_ttl,
                            &ttl, &f) ||
        rn_param_header(req, "Stream-Expires-At", RN_E_INVALID_HEADER_EXPIRES, &exp, &f) ||
        parse_content_type(req, &c->op, &f) || parse_closed(req, &c->op, &f)) {
        reply_fault(c, &f);
        return;
    }
    if (has_ttl && exp) {
        reply_and_finish(c, RN_E_INVALID_HEADER_TTL_AND_EXPIRES, NULL);
        return;
    }
    /* whether or not the source exists: a replica of the fork's group may
     * not have applied the source's group yet, the answer must not depend
     * on it */
    if (c->op.in.fork_source &&
        !rn_routing_colocated(c->op.in.fork_source, c->op.in.fork_source_len, c->path,
                              c->path_len)) {
        reply_and_finish(c, RN_E_FORK_NOT_COLOCATED, NULL);
        return;
    }
    if (has_ttl)
        c->op.in.ttl_s = (int64_t)ttl;
    if (exp) {
        int64_t ms;
        if (rn_parse_rfc3339(exp->value, exp->value_len, &ms) || ms < 0) {
            reply_and_finish(c, RN_E_INVALID_HEADER_EXPIRES, NULL);
            return;
        }
        c->op.in.expires_at_ms = ms;
    }
    c->op.in.kind = RN_OP_CREATE;
    c->op.in.body = req->body.data;
    c->op.in.body_len = req->body.len;
    submit(c);
}

/* Parses Producer-Digest (64 lowercase hex digits) into op. Returns 0, or
 * -1 with *f set. */
static int parse_digest(const rn_request *req, rn_op *op, rn_param_fault *f) {
    const rn_header *h;
    if (rn_param_header(req, "Producer-Digest", RN_E_INVALID_PRODUCER_DIGEST, &h, f))
        return -1;
    if (!h)
        return 0;
    if (h->value_len != 64 || !op->in.has_producer ||
        rn_parse_lower_hex(h->value, h->value_len, op->in.producer_digest))
        return rn_param_refuse(f, RN_E_INVALID_PRODUCER_DIGEST);
    op->in.has_producer_digest = 1;
    return 0;
}

/* Parses the producer headers (the three of PROTOCOL §5.2.1 and
 * Producer-Digest) into op. Returns 0, or -1 with *f set. */
static int parse_producer(const rn_request *req, rn_op *op, rn_param_fault *f) {
    const rn_header *id;
    int has_epoch, has_seq;
    if (rn_param_header(req, "Producer-Id", RN_E_INVALID_PRODUCER, &id, f) ||
        rn_param_header_u64(req, "Producer-Epoch", MAX_HEADER_INT, RN_E_INVALID_PRODUCER,
                            &has_epoch, &op->in.producer_epoch, f) ||
        rn_param_header_u64(req, "Producer-Seq", MAX_HEADER_INT, RN_E_INVALID_PRODUCER, &has_seq,
                            &op->in.producer_seq, f))
        return -1;
    if (id || has_epoch || has_seq) {
        if (!id || !has_epoch || !has_seq)
            return rn_param_refuse(f, RN_E_INVALID_PRODUCER);
        op->in.has_producer = 1;
        op->in.producer_id = id->value;
        op->in.producer_id_len = id->value_len;
    }
    return parse_digest(req, op, f);
}

/* An append or close. Shape errors answer at once; without producer
 * headers the content faults may too (ext §5.3 lets them come before the
 * stream); with them, every other check is the engine's, in §5.3's order.
 * The Content-Type of a POST without a body is ignored (PROTOCOL §5.2). */
static void handle_post(stream_ctx *c) {
    rn_request *req = c->req;
    rn_param_fault f;
    const rn_header *seq;
    if (parse_producer(req, &c->op, &f) || parse_closed(req, &c->op, &f) ||
        rn_param_header(req, "Stream-Seq", RN_E_INVALID_STREAM_SEQ, &seq, &f) ||
        (req->body.len && parse_content_type(req, &c->op, &f))) {
        reply_fault(c, &f);
        return;
    }
    c->op.in.kind = RN_OP_APPEND;
    c->op.in.body = req->body.data;
    c->op.in.body_len = req->body.len;
    if (!c->op.in.has_producer && !c->op.in.body_len && !c->op.in.close) {
        reply_and_finish(c, RN_E_EMPTY_APPEND, NULL);
        return;
    }
    if (!c->op.in.has_producer && c->op.in.body_len && !c->op.in.content_type) {
        reply_and_finish(c, RN_E_MISSING_CONTENT_TYPE, NULL);
        return;
    }
    if (seq) {
        c->op.in.has_seq = 1;
        c->op.in.seq = seq->value;
        c->op.in.seq_len = seq->value_len;
    }
    submit(c);
}

/* Producer-Closed-Epoch and -Seq, when the answer reports a closed epoch. */
static void append_closure(rn_buf *h, const rn_op *op) {
    if (op->out.closes_epoch)
        rn_buf_appendf(h, "Producer-Closed-Epoch: %llu\r\nProducer-Closed-Seq: %llu\r\n",
                       (unsigned long long)op->out.closed_epoch,
                       (unsigned long long)op->out.closed_seq);
}

/* The answer of an applied or repeated producer write (ext §5.3): the
 * write's receipt (Stream-Offset, Stream-Next-Offset, Stream-Closed when it
 * closed the stream) or Producer-Outcome: receipt-evicted, the epoch and its
 * highest seq, and a claim's closure report. */
static void append_producer_receipt(rn_buf *h, const rn_op *op) {
    if (op->out.receipt) {
        rn_reply_offset(h, "Stream-Offset", op->out.receipt_start);
        rn_reply_offset(h, "Stream-Next-Offset", op->out.receipt_end);
        if (op->out.receipt_closed)
            rn_buf_append_str(h, "Stream-Closed: true\r\n");
    } else {
        rn_buf_append_str(h, "Producer-Outcome: receipt-evicted\r\n");
    }
    rn_buf_appendf(h, "Producer-Epoch: %llu\r\nProducer-Seq: %llu\r\n",
                   (unsigned long long)op->out.ack_epoch, (unsigned long long)op->out.ack_seq);
    append_closure(h, op);
}

static void append_incarnation(rn_buf *h, const rn_stream *s) {
    rn_reply_incarnation(h, s);
}

static void append_state(rn_buf *h, const rn_op *op) {
    rn_reply_offset(h, "Stream-Next-Offset", op->out.next_offset);
    if (op->out.stream_closed)
        rn_buf_append_str(h, "Stream-Closed: true\r\n");
    if (op->out.stream)
        append_incarnation(h, op->out.stream);
}

/* Appends a request path for a header: llhttp accepts request-targets with
 * bytes a header value must not carry (controls such as form feed, DEL,
 * non-ASCII); those are percent-encoded, which names the same stream. */
static void append_uri_path(rn_buf *h, const char *p, size_t n) {
    static const char hex[] = "0123456789ABCDEF";
    for (size_t i = 0; i < n; i++) {
        uint8_t b = (uint8_t)p[i];
        if (b > 0x20 && b < 0x7F) {
            rn_buf_append_byte(h, b);
        } else {
            char e[3] = {'%', hex[b >> 4], hex[b & 15]};
            rn_buf_append(h, e, 3);
        }
    }
}

static void answer_create(stream_ctx *c, rn_op *op) {
    rn_buf h = {0}, body = {0};
    rn_reply_common(&h);
    append_content_type(&h, op->out.stream);
    append_state(&h, op);
    if (op->out.result == RN_OK_CREATED) {
        const rn_header *host = rn_request_header(c->req, "host", NULL);
        const char *q = memchr(c->req->target, '?', c->req->target_len);
        size_t tlen = q ? (size_t)(q - c->req->target) : c->req->target_len;
        rn_buf_appendf(&h, "Location: http://%.*s", host ? (int)host->value_len : 9,
                       host ? host->value : "localhost");
        append_uri_path(&h, c->req->target, tlen);
        rn_buf_append_str(&h, "\r\n");
    }
    rn_http_respond(c->req, op->out.result == RN_OK_CREATED ? 201 : 200, &h, &body);
}

/* The error and headers for each engine refusal (one table for both
 * surfaces and every subresource). */
static rn_error refusal_error(rn_result r) {
    switch (r) {
    case RN_ERR_NOT_FOUND:
        return RN_E_STREAM_NOT_FOUND;
    case RN_ERR_CONFIG_MISMATCH:
        return RN_E_STREAM_EXISTS_CONFLICT;
    case RN_ERR_CLOSED:
        return RN_E_STREAM_CLOSED;
    case RN_ERR_CONTENT_TYPE:
        return RN_E_CONTENT_TYPE_MISMATCH;
    case RN_ERR_SEQ_REGRESSION:
        return RN_E_STREAM_SEQ_CONFLICT;
    case RN_ERR_INCARNATION:
        return RN_E_INCARNATION_MISMATCH;
    case RN_ERR_STALE_EPOCH:
        return RN_E_PRODUCER_EPOCH_STALE;
    case RN_ERR_EPOCH_CLOSED:
        return RN_E_PRODUCER_EPOCH_CLOSED;
    case RN_ERR_KEY_CONFLICT:
        return RN_E_PRODUCER_KEY_CONFLICT;
    case RN_ERR_PRODUCER_EXPIRED:
        return RN_E_PRODUCER_EXPIRED;
    case RN_ERR_PRODUCER_LIMIT:
        return RN_E_PRODUCER_LIMIT;
    case RN_ERR_MISSING_CONTENT_TYPE:
        return RN_E_MISSING_CONTENT_TYPE;
    case RN_ERR_DIGEST_MISMATCH:
        return RN_E_PRODUCER_DIGEST_MISMATCH;
    case RN_ERR_EPOCH_SEQ:
        return RN_E_PRODUCER_EPOCH_SEQ;
    case RN_ERR_SEQ_GAP:
        return RN_E_PRODUCER_SEQ_CONFLICT;
    case RN_ERR_EMPTY_BODY:
        return RN_E_EMPTY_APPEND;
    case RN_ERR_JSON_INVALID:
        return RN_E_INVALID_JSON;
    case RN_ERR_JSON_EMPTY_ARRAY:
        return RN_E_JSON_EMPTY_ARRAY;
    case RN_ERR_JSON_TOO_DEEP:
        return RN_E_JSON_TOO_DEEP;
    case RN_ERR_GONE:
        return RN_E_STREAM_GONE;
    case RN_ERR_SOURCE_NOT_FOUND:
        return RN_E_FORK_SOURCE_NOT_FOUND;
    case RN_ERR_SOURCE_GONE:
        return RN_E_FORK_SOURCE_GONE;
    case RN_ERR_FORK_OFFSET:
        return RN_E_INVALID_FORK_OFFSET;
    case RN_ERR_SUB_OFFSET:
        return RN_E_INVALID_SUB_OFFSET;
    case RN_ERR_FORK_DEPTH:
        return RN_E_FORK_TOO_DEEP;
    case RN_ERR_OFFSET_BEYOND_TAIL:
        return RN_E_SNAPSHOT_BEYOND_TAIL;
    case RN_ERR_NOT_BOUNDARY:
        return RN_E_NOT_JSON_BOUNDARY;
    case RN_ERR_BOUNDARY_UNVERIFIED:
        return RN_E_JSON_BOUNDARY_UNVERIFIED;
    case RN_ERR_BELOW_RETAINED:
        return RN_E_OFFSET_RETAINED_AWAY;
    case RN_ERR_SNAPSHOT_CONFLICT:
        return RN_E_SNAPSHOT_CONFLICT;
    case RN_ERR_RETENTION_PAST_SNAPSHOT:
        return RN_E_INVALID_RETENTION;
    case RN_ERR_DISK_FULL:
        return RN_E_WAL_DISK_PRESSURE;
    case RN_ERR_UNAVAILABLE:
        return RN_E_OUTCOME_UNKNOWN;
    case RN_ERR_NO_LEADER:
        return RN_E_NO_LEADER;
    case RN_ERR_LOG_BUSY:
        return RN_E_RAFT_BACKPRESSURE;
    default:
        return RN_E_INTERNAL; /* a success code: a caller bug */
    }
}

/* The Producer-Outcome token (RFC 9651) of a producer 403. */
static const char *producer_outcome(const rn_op *op) {
    switch (op->out.result) {
    case RN_ERR_EPOCH_CLOSED:
        return op->out.closed_by_history ? "epoch-closed;by=history" : "epoch-closed;by=claim";
    case RN_ERR_KEY_CONFLICT:
        return "key-conflict";
    case RN_ERR_PRODUCER_EXPIRED:
        return "producer-expired";
    default:
        return "stale-epoch";
    }
}

/* Appends what the message of a refusal names, from what the request
 * named: the stream's path for a missing stream, Stream-Forked-From for a
 * missing fork source, both content types for a mismatch. Nothing for
 * other refusals. */
static void refusal_detail(rn_buf *out, const rn_request *req, const rn_op *op) {
    const rn_header *from;
    switch (op->out.result) {
    case RN_ERR_NOT_FOUND:
        rn_reply_stream_path(out, req, op->in.path, op->in.path_len);
        break;
    case RN_ERR_SOURCE_NOT_FOUND:
        from = rn_request_header(req, "stream-forked-from", NULL);
        if (from)
            rn_buf_append(out, from->value, from->value_len);
        break;
    case RN_ERR_CONTENT_TYPE:
        rn_buf_append_str(out, op->in.kind == RN_OP_CREATE ? "source: \"" : "stream: \"");
        rn_buf_append(out, op->out.conflicting_type, op->out.conflicting_type_len);
        rn_buf_append_str(out, "\", request: \"");
        rn_buf_append(out, op->in.content_type, op->in.content_type_len);
        rn_buf_append_str(out, "\"");
        break;
    default:
        break;
    }
}

void rn_reply_refusal(rn_request *req, const rn_op *op) {
    rn_buf extra = {0};
    const rn_stream *s = op->out.stream;
    switch (op->out.result) {
    case RN_ERR_CLOSED:
        append_state(&extra, op);
        break;
    case RN_ERR_SEQ_REGRESSION:
        rn_buf_append_str(&extra, "Stream-Last-Seq: ");
        rn_buf_append(&extra, s->last_seq, s->last_seq_len);
        rn_buf_append_str(&extra, "\r\n");
        break;
    case RN_ERR_STALE_EPOCH:
    case RN_ERR_EPOCH_CLOSED:
    case RN_ERR_KEY_CONFLICT:
    case RN_ERR_PRODUCER_EXPIRED:
        /* Every producer 403 names the epoch and exactly one outcome. */
        rn_buf_appendf(&extra, "Producer-Epoch: %llu\r\nProducer-Outcome: %s\r\n",
                       (unsigned long long)op->out.current_epoch, producer_outcome(op));
        append_closure(&extra, op);
        break;
    case RN_ERR_EPOCH_SEQ:
        rn_buf_appendf(&extra, "Producer-Expected-Seq: %llu\r\n",
                       (unsigned long long)op->out.expected_seq);
        break;
    case RN_ERR_SEQ_GAP:
        rn_buf_appendf(&extra, "Producer-Expected-Seq: %llu\r\nProducer-Received-Seq: %llu\r\n",
                       (unsigned long long)op->out.expected_seq,
                       (unsigned long long)op->in.producer_seq);
        break;
    case RN_ERR_PRODUCER_LIMIT:
        rn_buf_appendf(&extra, "Retry-After: %llu\r\n", (unsigned long long)op->out.retry_after_s);
        break;
    case RN_ERR_SNAPSHOT_CONFLICT:
        rn_reply_snapshot_id(&extra, s);
        break;
    case RN_ERR_DISK_FULL:
    case RN_ERR_UNAVAILABLE:
    case RN_ERR_BOUNDARY_UNVERIFIED:
        rn_buf_append_str(&extra, "Retry-After: 1\r\n");
        break;
    case RN_ERR_NO_LEADER:
    case RN_ERR_LOG_BUSY:
        rn_buf_append_str(&extra, "Retry-After: 1\r\n");
        rn_routing_group_header(&extra, op->in.path, op->in.path_len);
        break;
    default:
        break;
    }
    if (s && op->out.result != RN_ERR_CLOSED && op->out.result != RN_ERR_NOT_FOUND)
        append_incarnation(&extra, s);
    rn_buf detail = {0};
    refusal_detail(&detail, req, op);
    rn_error e = op->out.result == RN_ERR_CONTENT_TYPE && op->in.kind == RN_OP_CREATE
                     ? RN_E_FORK_CONTENT_TYPE_MISMATCH
                     : refusal_error(op->out.result);
    rn_reply_error_detail(req, e, &extra, detail.len ? (const char *)detail.data : NULL,
                          detail.len);
    rn_buf_free(&detail);
}

/* Answers an append or close: applied, repeated or refused. A producer
 * write answers 200 when it applied a body, else 204 (a close-only write
 * too, PROTOCOL §5.2), with its receipt. */
static void answer_append(rn_request *req, const rn_op *op) {
    if (op->out.result != RN_OK_APPENDED && op->out.result != RN_OK_DUPLICATE) {
        rn_reply_refusal(req, op);
        return;
    }
    rn_buf h = {0}, body = {0};
    rn_reply_common(&h);
    if (op->in.has_producer) {
        append_producer_receipt(&h, op);
        append_incarnation(&h, op->out.stream);
    } else {
        append_state(&h, op);
    }
    int status =
        op->out.result == RN_OK_APPENDED && op->in.has_producer && op->in.body_len ? 200 : 204;
    rn_http_respond(req, status, &h, &body);
}

static void op_done(rn_op *op) {
    stream_ctx *c = op->arg;
    switch (op->out.result) {
    case RN_OK_CREATED:
    case RN_OK_EXISTS:
        answer_create(c, op);
        break;
    case RN_OK_APPENDED:
    case RN_OK_DUPLICATE: {
        if (op->out.appended_bytes) {
            rn_metric.appends++;
            rn_metric.append_bytes += op->out.appended_bytes;
            rn_metric.append_messages += op->out.appended_messages;
        }
        answer_append(c->req, op);
        break;
    }
    case RN_OK_DELETED: {
        rn_buf h = {0}, body = {0};
        rn_reply_common(&h);
        rn_http_respond(c->req, 204, &h, &body);
        break;
    }
    case RN_ERR_NOT_FOUND:
        rn_reply_missing(c->req, missing_error(c), c->path, c->path_len, NULL);
        break;
    default:
        answer_append(c->req, op);
        break;
    }
    c->op.done = NULL;
    ctx_finish(c);
}

/* ---- reads ---- */

/* The answer for a stream the engine did not find: 410 when soft-deleted,
 * else 404 (on the bucket surface, BUCKET_NOT_FOUND for an empty bucket). */
static rn_error missing_error(const stream_ctx *c) {
    if (c->prof->bucket_not_found)
        return rn_bucket_missing_error(c->sf->engine, c->path, c->path_len);
    return rn_engine_is_gone(c->sf->engine, c->path, c->path_len) ? RN_E_STREAM_GONE
                                                                  : RN_E_STREAM_NOT_FOUND;
}

/* Answers 404, or 410 for a soft-deleted stream, when s is NULL. */
static int answer_missing(stream_ctx *c, const rn_stream *s) {
    if (s)
        return 0;
    rn_reply_missing(c->req, missing_error(c), c->path, c->path_len, NULL);
    ctx_finish(c);
    return 1;
}

/* Answers 412 with the current token when the request's Stream-Incarnation
 * names another incarnation of s. Returns 1 when it answered. */
static int answer_precondition(stream_ctx *c, const rn_stream *s) {
    if (!c->op.in.has_incarnation || c->op.in.incarnation == s->incarnation)
        return 0;
    rn_buf extra = {0};
    append_incarnation(&extra, s);
    reply_and_finish(c, RN_E_INCARNATION_MISMATCH, &extra);
    return 1;
}

static void handle_head(stream_ctx *c) {
    rn_stream *s = rn_engine_find(c->sf->engine, c->path, c->path_len);
    if (answer_missing(c, s) || answer_precondition(c, s))
        return;
    rn_buf h = {0}, body = {0};
    rn_reply_common(&h);
    append_content_type(&h, s);
    rn_reply_offset(&h, "Stream-Next-Offset", s->tail);
    append_expiry(&h, s);
    if (s->closed)
        rn_buf_append_str(&h, "Stream-Closed: true\r\n");
    append_incarnation(&h, s);
    rn_reply_offset(&h, "Stream-Retained-Offset", s->retained);
    rn_reply_snapshot_id(&h, s);
    if (s->has_previous) {
        rn_buf_appendf(&h, "Stream-Previous-Incarnation: %llu\r\n",
                       (unsigned long long)s->previous_incarnation);
        rn_reply_offset(&h, "Stream-Inherited-Offset", s->inherited_offset);
    }
    rn_buf_appendf(&h, "Ursula-Max-Request-Bytes: %zu\r\n", c->sf->cfg.max_body_bytes);
    if (c->sf->cfg.cold_store)
        rn_buf_append_str(&h, "Ursula-Max-Snapshot-Bytes: 1073741824\r\n");
    rn_buf_append_str(&h, "Cache-Control: no-store\r\n");
    rn_http_respond(c->req, 200, &h, &body);
    ctx_finish(c);
}

/* Answers a read with the data at c->offset (possibly none): catch-up 200,
 * or a long-poll 200 with a cursor. */
/* True when this read renders the stream's JSON message text as NDJSON. */
static int reads_ndjson(const stream_ctx *c, const rn_stream *s) {
    return s->json && c->prof->ndjson_reads;
}

/* The most bytes this answer reads: the request's cap, shortened while
 * answers for slow clients hold the server's answer budget (the answer is
 * then partial, and the client continues from Stream-Next-Offset). */
static size_t answer_cap(const stream_ctx *c) {
    size_t room = rn_http_answer_room(c->req);
    return room < c->max_bytes ? room : c->max_bytes;
}

static void answer_data(stream_ctx *c, rn_stream *s) {
    rn_buf data = {0}, body = {0}, h = {0};
    uint64_t start = c->offset;
    long got = 0;
    if (c->offset_kind != RN_OFFSET_NOW) {
        got = rn_engine_read(c->sf->engine, s, start, answer_cap(c), !reads_ndjson(c, s), &data);
        if (got == -EAGAIN) { /* bytes this replica has not fetched yet */
            rn_buf_free(&data);
            rn_routing_read_elsewhere(c->req, c->path, c->path_len);
            ctx_finish(c);
            return;
        }
        if (got < 0) {
            rn_buf_free(&data);
            reply_and_finish(c, RN_E_INTERNAL, NULL);
            return;
        }
    }
    uint64_t end = start + (uint64_t)got;
    int at_tail = end == s->tail;
    if (got > 0) {
        rn_metric.reads++;
        rn_metric.read_bytes += (uint64_t)got;
    }
    rn_reply_common(&h);
    if (reads_ndjson(c, s))
        rn_buf_append_str(&h, "Content-Type: application/x-ndjson\r\n");
    else
        append_content_type(&h, s);
    rn_reply_offset(&h, "Stream-Next-Offset", end);
    if (at_tail)
        rn_buf_append_str(&h, "Stream-Up-To-Date: true\r\n");
    if (at_tail && s->closed)
        rn_buf_append_str(&h, "Stream-Closed: true\r\n");
    if (c->mode == READ_LONG_POLL && !(at_tail && s->closed))
        append_cursor(&h, c);
    append_incarnation(&h, s);
    if (c->offset_kind == RN_OFFSET_NOW || got == 0) {
        rn_buf_append_str(&h, "Cache-Control: no-store\r\n");
    } else {
        rn_buf_append_str(&h, "Cache-Control: public, max-age=60, stale-while-revalidate=300\r\n");
    }
    int status = 200;
    if (c->offset_kind != RN_OFFSET_NOW) {
        /* The ETag names the incarnation, the range, closure at the tail and
         * the representation (JSON arrays and NDJSON differ in bytes). */
        char etag[128];
        snprintf(etag, sizeof etag, "\"%llu:%llu:%llu:%s%s\"", (unsigned long long)s->incarnation,
                 (unsigned long long)start, (unsigned long long)end, c->prof->name,
                 at_tail && s->closed ? ":c" : "");
        rn_buf_appendf(&h, "ETag: %s\r\n", etag);
        if (rn_if_none_match(c->req, etag))
            status = 304;
    }
    if (status == 200) {
        if (s->json && !reads_ndjson(c, s))
            json_array_from_messages(&body, data.data, data.len);
        else
            body = data, data = (rn_buf){0};
    }
    rn_buf_free(&data);
    rn_http_respond(c->req, status, &h, &body);
    ctx_finish(c);
}

static void answer_poll_timeout(stream_ctx *c, rn_stream *s) {
    rn_buf h = {0}, body = {0};
    rn_reply_common(&h);
    rn_reply_offset(&h, "Stream-Next-Offset", s->tail);
    rn_buf_append_str(&h, "Stream-Up-To-Date: true\r\nCache-Control: no-store\r\n");
    if (s->closed)
        rn_buf_append_str(&h, "Stream-Closed: true\r\n");
    else
        append_cursor(&h, c);
    append_incarnation(&h, s);
    rn_http_respond(c->req, 204, &h, &body);
    ctx_finish(c);
}

/* --- SSE --- */

/* Binary content types travel base64-encoded over SSE. */
static int sse_base64(const rn_stream *s) {
    return !s->json && !rn_iprefix(s->content_type, s->content_type_len, "text/");
}

/* Appends one data event: JSON arrays (v1), base64 for binary types, else
 * text (NDJSON included), one data: line per line of the payload. */
static void sse_data_event(rn_buf *out, const stream_ctx *c, const rn_stream *s, const uint8_t *d,
                           size_t n) {
    rn_buf_append_str(out, "event: data\n");
    if (s->json && !reads_ndjson(c, s)) {
        rn_buf_append_str(out, "data:");
        json_array_from_messages(out, d, n);
        rn_buf_append_str(out, "\n\n");
        return;
    }
    if (sse_base64(s)) {
        rn_buf_append_str(out, "data:");
        rn_base64_append(out, d, n);
        rn_buf_append_str(out, "\n\n");
        return;
    }
    /* Text: one data: line per line of the payload, split at CR, LF and
     * CRLF so that no payload byte can end the event early. */
    size_t i = 0;
    for (;;) {
        size_t j = i;
        while (j < n && d[j] != '\n' && d[j] != '\r')
            j++;
        rn_buf_append_str(out, j > i && d[i] == ' ' ? "data: " : "data:");
        rn_buf_append(out, d + i, j - i);
        rn_buf_append_byte(out, '\n');
        if (j >= n)
            break;
        i = j + ((d[j] == '\r' && j + 1 < n && d[j + 1] == '\n') ? 2 : 1);
    }
    rn_buf_append_byte(out, '\n');
}

/* Appends the control event for c's position; `cursor` is sent unless the
 * event reports the closure. */
static void sse_control_event(rn_buf *out, const stream_ctx *c, const rn_stream *s, int at_tail,
                              uint64_t cursor) {
    char tok[RN_OFFSET_LEN + 1];
    rn_offset_format(c->offset, tok);
    rn_buf_appendf(out, "event: control\ndata:{\"streamNextOffset\":\"%s\"", tok);
    if (at_tail && s->closed) {
        rn_buf_append_str(out, ",\"streamClosed\":true,\"upToDate\":true}\n\n");
        return;
    }
    rn_buf_appendf(out, ",\"streamCursor\":\"%llu\"", (unsigned long long)cursor);
    if (at_tail)
        rn_buf_append_str(out, ",\"upToDate\":true");
    rn_buf_append_str(out, "}\n\n");
}

static void sse_end(stream_ctx *c) {
    rn_http_stream_end(c->req);
    ctx_finish(c);
}

/* Ends a live SSE read in error: on surfaces that send them, an error event
 * whose data is the error body on one line (ext §11). */
static void sse_fail(stream_ctx *c, rn_error e) {
    if (c->prof->sse_error_events) {
        rn_buf ev = {0};
        rn_buf path = {0};
        if (e == RN_E_STREAM_NOT_FOUND) /* named as rn_reply_missing() names it */
            rn_reply_stream_path(&path, c->req, c->path, c->path_len);
        rn_buf_append_str(&ev, "event: error\ndata:");
        rn_error_body(e, path.len ? (const char *)path.data : NULL, path.len, &ev);
        rn_buf_free(&path);
        rn_buf_append_str(&ev, "\n\n");
        rn_http_stream_write(c->req, &ev);
    }
    sse_end(c);
}

/* Makes shared_event hold the data event at c->offset (reading and
 * encoding it unless it already does). Returns the stream bytes it covers
 * (<= 0 on a read failure). */
static long sse_next_event(stream_ctx *c, rn_stream *s) {
    if (shared_event.event.len && shared_event.stream_id == s->id &&
        shared_event.incarnation == s->incarnation && shared_event.offset == c->offset &&
        shared_event.tail == s->tail && shared_event.max_bytes == c->max_bytes &&
        shared_event.prof == c->prof)
        return shared_event.got;
    rn_buf data = {0};
    long got =
        rn_engine_read(c->sf->engine, s, c->offset, c->max_bytes, !reads_ndjson(c, s), &data);
    if (got <= 0) {
        rn_buf_free(&data);
        return got;
    }
    shared_event.event.len = 0;
    sse_data_event(&shared_event.event, c, s, data.data, data.len);
    rn_buf_free(&data);
    if (shared_event.chunk)
        rn_http_chunk_release(shared_event.chunk);
    shared_event.chunk = NULL;
    shared_event.stream_id = s->id;
    shared_event.incarnation = s->incarnation;
    shared_event.offset = c->offset;
    shared_event.tail = s->tail;
    shared_event.max_bytes = c->max_bytes;
    shared_event.prof = c->prof;
    shared_event.got = got;
    return got;
}

/* Sends shared_event's data event and then c's control event (c->offset
 * already past the data, in cursor interval `interval`): the shared chunk
 * when c's cursor is the interval, else a chunk of its own. Returns bytes
 * still queued on the socket. */
static size_t sse_send_event(stream_ctx *c, const rn_stream *s, int at_tail, uint64_t interval) {
    uint64_t cursor = at_tail && s->closed ? interval : cursor_after(c, interval);
    int shared = cursor == interval;
    if (shared && shared_event.chunk && shared_event.chunk_cursor == interval &&
        shared_event.chunk_closed == s->closed)
        return rn_http_stream_write_chunk(c->req, shared_event.chunk);
    rn_buf ev = {0};
    rn_buf_append(&ev, shared_event.event.data, shared_event.event.len);
    sse_control_event(&ev, c, s, at_tail, cursor);
    if (!shared)
        return rn_http_stream_write(c->req, &ev);
    if (shared_event.chunk)
        rn_http_chunk_release(shared_event.chunk);
    shared_event.chunk = rn_http_chunk_new(ev.data, ev.len);
    shared_event.chunk_cursor = interval;
    shared_event.chunk_closed = s->closed;
    rn_buf_free(&ev);
    return rn_http_stream_write_chunk(c->req, shared_event.chunk);
}

/* Sends every event available from c->offset; ends the response on
 * closure. `force_control` sends a control even without new data (the
 * first one of a response). */
static void sse_pump(stream_ctx *c, rn_stream *s, int force_control) {
    for (;;) {
        if (c->offset >= s->tail) {
            if (force_control || s->closed) {
                rn_buf ev = {0};
                sse_control_event(&ev, c, s, 1, next_cursor(c));
                rn_http_stream_write(c->req, &ev);
            }
            if (s->closed)
                sse_end(c);
            return;
        }
        long got = sse_next_event(c, s);
        if (got <= 0) {
            sse_fail(c, RN_E_INTERNAL);
            return;
        }
        rn_metric.sse_events++;
        rn_metric.sse_bytes += (uint64_t)got;
        c->offset += (uint64_t)got;
        int at_tail = c->offset == s->tail;
        force_control = 0;
        size_t queued = sse_send_event(c, s, at_tail, cursor_interval());
        if (at_tail && s->closed) {
            sse_end(c);
            return;
        }
        if (queued > c->sf->cfg.sse_queue_bytes) {
            c->sse_paused = 1;
            return;
        }
    }
}

static void on_sse_drain(rn_request *req) {
    stream_ctx *c = req->handler_data;
    if (!c->sse_paused || c->finished)
        return;
    c->sse_paused = 0;
    rn_stream *s = c->waiter.stream;
    if (s)
        sse_pump(c, s, 0);
}

/* --- parking --- */

/* Ends a live read as its time is up: an SSE response ends, a long-poll
 * answers 204. */
static void end_live_read(stream_ctx *c) {
    rn_stream *s = c->waiter.stream;
    if (c->mode == READ_SSE)
        sse_end(c);
    else if (s)
        answer_poll_timeout(c, s);
    else
        ctx_finish(c);
}

static void on_live_timer(uv_timer_t *t) {
    end_live_read(t->data);
}

/* The client half-closed (or left): end the read now, as its time would. */
static void on_live_input_end(rn_request *req) {
    end_live_read(req->handler_data);
}

/* A live read ends in error when its stream goes away (404) or its
 * history is rewritten: the read was opened under the retired incarnation
 * and its offsets belong to the old history, so it answers 412 with the
 * current token whether or not it carried the precondition (an SSE read
 * sends the same error as its last event). */
static void on_live_event(rn_waiter *w, rn_stream *s, rn_live_event ev) {
    stream_ctx *c = (stream_ctx *)((char *)w - offsetof(stream_ctx, waiter));
    if (ev != RN_LIVE_CHANGED) {
        rn_error e = ev == RN_LIVE_REMOVED ? RN_E_STREAM_NOT_FOUND : RN_E_HISTORY_REWRITTEN;
        if (c->mode == READ_SSE) {
            sse_fail(c, e);
            return;
        }
        if (ev == RN_LIVE_REMOVED) {
            rn_reply_missing(c->req, e, c->path, c->path_len, NULL);
            ctx_finish(c);
            return;
        }
        rn_buf extra = {0};
        append_incarnation(&extra, s);
        reply_and_finish(c, e, &extra);
        return;
    }
    if (c->mode == READ_SSE) {
        if (!c->sse_paused)
            sse_pump(c, s, 0);
        return;
    }
    if (c->offset < s->tail)
        answer_data(c, s);
    else if (s->closed)
        answer_poll_timeout(c, s);
}

/* Registers a live read: waiter on the stream, timer, live list. */
static void park(stream_ctx *c, rn_stream *s, uint64_t timeout_ms) {
    rn_surface *sf = c->sf;
    uv_timer_init(sf->loop, &c->timer);
    c->timer.data = c;
    c->timer_started = 1;
    c->live_next = sf->live;
    if (sf->live)
        sf->live->live_prev = c;
    sf->live = c;
    sf->live_count++;
    rn_live_add(s, &c->waiter, on_live_event);
    uv_timer_start(&c->timer, on_live_timer, timeout_ms, 0);
    c->req->on_input_end = on_live_input_end;
}

/* Applies the read-path parameters of ext §9: timeout_ms and max_bytes
 * that do not parse mean the default, consistency must be local or leader
 * (*leader). Returns 0, or -1 with *f set. */
static int read_parameters(stream_ctx *c, const char *q, size_t len, int *leader,
                           rn_param_fault *f) {
    char val[32];
    long n;
    uint64_t v;
    if (rn_param_query(q, len, "timeout_ms", RN_PARAM_LENIENT, val, sizeof val, &n, f))
        return -1;
    if (n > 0 && rn_parse_strict_u64(val, (size_t)n, UINT64_MAX / 2, &v) == 0)
        c->poll_timeout_ms = v < 1 ? 1 : v > BUCKET_POLL_MAX_MS ? BUCKET_POLL_MAX_MS : v;
    if (rn_param_query(q, len, "max_bytes", RN_PARAM_LENIENT, val, sizeof val, &n, f))
        return -1;
    if (n > 0 && rn_parse_strict_u64(val, (size_t)n, UINT64_MAX / 2, &v) == 0 && v < c->max_bytes)
        c->max_bytes = v ? (size_t)v : 1;
    if (rn_param_query(q, len, "consistency", RN_E_INVALID_QUERY_CONSISTENCY, val, sizeof val, &n,
                       f))
        return -1;
    if (n == 6 && memcmp(val, "leader", 6) == 0)
        *leader = 1; /* one node: every read is linearizable */
    else if (n >= 0 && !(n == 5 && memcmp(val, "local", 5) == 0))
        return rn_param_refuse(f, RN_E_INVALID_QUERY_CONSISTENCY);
    return 0;
}

/* Parses the query: offset, live, cursor (an echo: one this server could
 * not have sent is ignored), and the profile's read parameters; each at
 * most once (params.h). Unknown names are ignored. Returns 0, or -1 with
 * *f set. */
static int parse_query(stream_ctx *c, const char *q, size_t len, int *has_offset,
                       rn_param_fault *f) {
    char val[256];
    long n;
    int leader = 0;
    c->offset_kind = RN_OFFSET_START;
    c->mode = READ_CATCHUP;
    if (rn_param_query(q, len, "offset", RN_E_INVALID_OFFSET, val, sizeof val, &n, f))
        return -1;
    *has_offset = n >= 0;
    if (n >= 0 && rn_offset_parse(val, (size_t)n, &c->offset_kind, &c->offset))
        return rn_param_refuse(f, RN_E_INVALID_OFFSET);
    if (rn_param_query(q, len, "live", RN_E_INVALID_QUERY_LIVE, val, sizeof val, &n, f))
        return -1;
    if (n == 9 && memcmp(val, "long-poll", 9) == 0)
        c->mode = READ_LONG_POLL;
    else if (n == 3 && memcmp(val, "sse", 3) == 0)
        c->mode = READ_SSE;
    else if (n >= 0)
        return rn_param_refuse(f, RN_E_INVALID_QUERY_LIVE);
    if (rn_param_query(q, len, "cursor", RN_PARAM_LENIENT, val, sizeof val, &n, f))
        return -1;
    uint64_t v;
    if (n > 0 && rn_parse_strict_u64(val, (size_t)n, UINT64_MAX / 2, &v) == 0) {
        c->has_cursor = 1;
        c->client_cursor = v;
    }
    if (c->prof->read_parameters && read_parameters(c, q, len, &leader, f))
        return -1;
    if (leader && c->mode != READ_CATCHUP)
        return rn_param_refuse(f, RN_E_INVALID_QUERY_CONSISTENCY);
    if (c->mode == READ_SSE && c->max_bytes < 4)
        c->max_bytes = 4; /* room for one UTF-8 character in a text event */
    return 0;
}

/* Refuses a live read that would park past the server's or the stream's
 * bound (a long-poll that can answer at once is not refused). Returns 1
 * when it answered. */
static int answer_live_limit(stream_ctx *c, const rn_stream *s) {
    if (c->mode == READ_CATCHUP ||
        (c->mode == READ_LONG_POLL && (c->offset < s->tail || s->closed)))
        return 0;
    rn_error e;
    if (c->sf->cfg.max_live_reads && c->sf->live_count >= c->sf->cfg.max_live_reads)
        e = RN_E_LIVE_READ_BACKPRESSURE;
    else if (c->sf->cfg.max_live_reads_per_stream &&
             s->live_readers >= c->sf->cfg.max_live_reads_per_stream)
        e = RN_E_LIVE_READS_EXHAUSTED;
    else
        return 0;
    rn_buf extra = {0};
    rn_buf_append_str(&extra, "Retry-After: 1\r\n");
    append_incarnation(&extra, s);
    reply_and_finish(c, e, &extra);
    return 1;
}

static void handle_get(stream_ctx *c, const char *query, size_t query_len) {
    int has_offset;
    rn_param_fault f;
    if (parse_query(c, query, query_len, &has_offset, &f)) {
        reply_fault(c, &f);
        return;
    }
    if (c->mode != READ_CATCHUP && !has_offset) {
        reply_and_finish(c, RN_E_INVALID_QUERY_OFFSET_REQUIRED, NULL);
        return;
    }
    rn_engine *e = c->sf->engine;
    rn_stream *s = rn_engine_find(e, c->path, c->path_len);
    if (answer_missing(c, s))
        return;
    rn_engine_touch(e, s);
    if (c->offset_kind != RN_OFFSET_NOW && c->offset < s->retained) {
        rn_buf extra = {0};
        append_incarnation(&extra, s);
        reply_and_finish(c, RN_E_OFFSET_RETAINED_AWAY, &extra);
        return;
    }
    if (c->offset_kind == RN_OFFSET_NOW) {
        c->offset = s->tail;
    } else if (c->offset_kind == RN_OFFSET_POSITION && c->offset > s->tail &&
               c->prof->offset_past_tail_416) {
        rn_buf extra = {0};
        append_incarnation(&extra, s);
        reply_and_finish(c, RN_E_OFFSET_OUT_OF_RANGE, &extra);
        return;
    } else if (c->offset_kind == RN_OFFSET_POSITION) {
        int valid = c->offset > s->tail  ? 0
                    : reads_ndjson(c, s) ? 1
                                         : rn_engine_offset_valid(e, s, c->offset);
        if (valid <= 0) { /* unverified (< 0): a failed read, retryable */
            rn_buf extra = {0};
            if (valid < 0)
                rn_buf_append_str(&extra, "Retry-After: 1\r\n");
            reply_and_finish(c, valid < 0 ? RN_E_JSON_BOUNDARY_UNVERIFIED : RN_E_INVALID_OFFSET,
                             &extra);
            return;
        }
    }
    if (answer_precondition(c, s))
        return;
    if (answer_live_limit(c, s))
        return;
    switch (c->mode) {
    case READ_CATCHUP:
        answer_data(c, s);
        return;
    case READ_LONG_POLL:
        c->offset_kind = RN_OFFSET_POSITION; /* a long-poll 200 carries data and an ETag */
        if (c->offset < s->tail)
            answer_data(c, s);
        else if (s->closed)
            answer_poll_timeout(c, s);
        else
            park(c, s, c->poll_timeout_ms);
        return;
    case READ_SSE: {
        rn_buf h = {0};
        rn_reply_common(&h);
        rn_buf_append_str(&h, "Content-Type: text/event-stream\r\nCache-Control: no-cache\r\n");
        if (sse_base64(s))
            rn_buf_append_str(&h, "Stream-SSE-Data-Encoding: base64\r\n");
        if (reads_ndjson(c, s)) {
            rn_buf_append_str(&h, "Stream-Data-Content-Type: application/x-ndjson\r\n");
        } else {
            rn_buf_append_str(&h, "Stream-Data-Content-Type: ");
            rn_buf_append(&h, s->content_type, s->content_type_len);
            rn_buf_append_str(&h, "\r\n");
        }
        append_incarnation(&h, s);
        rn_http_stream_start(c->req, 200, &h);
        c->req->on_drain = on_sse_drain;
        park(c, s, c->sf->cfg.sse_max_duration_ms);
        sse_pump(c, s, 1);
        return;
    }
    }
}

static void handle_delete(stream_ctx *c) {
    c->op.in.kind = RN_OP_DELETE;
    submit(c);
}

int rn_request_incarnation(const rn_request *req, int *present, uint64_t *token) {
    rn_param_fault f;
    if (rn_param_header_u64(req, "Stream-Incarnation", RN_INCARNATION_MAX, RN_E_INVALID_INCARNATION,
                            present, token, &f))
        return -1;
    return *present && *token < RN_INCARNATION_MIN ? -1 : 0;
}

void rn_streams_handle(rn_surface *sf, rn_request *req, const rn_profile *prof, const char *key,
                       size_t key_len, const char *query, size_t query_len) {
    stream_ctx *c = ctx_new(sf, req, key, key_len);
    c->prof = prof;
    c->max_bytes = prof->read_parameters ? BUCKET_READ_CAP : sf->cfg.max_read_bytes;
    c->poll_timeout_ms =
        prof->read_parameters ? BUCKET_POLL_DEFAULT_MS : sf->cfg.long_poll_timeout_ms;
    if (rn_request_incarnation(req, &c->op.in.has_incarnation, &c->op.in.incarnation)) {
        reply_and_finish(c, RN_E_INVALID_INCARNATION, NULL);
        return;
    }
    switch (req->method) {
    case RN_HTTP_PUT:
        handle_put(c);
        break;
    case RN_HTTP_POST:
        handle_post(c);
        break;
    case RN_HTTP_GET:
        handle_get(c, query, query_len);
        break;
    case RN_HTTP_HEAD:
        handle_head(c);
        break;
    case RN_HTTP_DELETE:
        handle_delete(c);
        break;
    default: {
        rn_buf extra = {0};
        rn_buf_append_str(&extra, "Allow: GET, HEAD, PUT, POST, DELETE, OPTIONS\r\n");
        reply_and_finish(c, RN_E_METHOD_NOT_ALLOWED, &extra);
        break;
    }
    }
}

int rn_streams_answer_early(rn_surface *sf, rn_request *req, const char *key, size_t key_len) {
    rn_op op = {.in = {.kind = RN_OP_APPEND, .path = key, .path_len = key_len}};
    rn_param_fault f;
    if (req->method != RN_HTTP_POST || parse_producer(req, &op, &f) || !op.in.has_producer ||
        rn_request_incarnation(req, &op.in.has_incarnation, &op.in.incarnation) ||
        !op.in.has_incarnation)
        return 0; /* not eligible; a shape error is answered with the body */
    if (!rn_engine_answer_early(sf->engine, &op))
        return 0;
    answer_append(req, &op);
    return 1;
}

void rn_surface_end_live_reads(rn_surface *sf) {
    while (sf->live)
        end_live_read(sf->live);
}
