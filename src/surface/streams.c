/*
 * streams.c — stream operations for both surfaces. See streams.h.
 *
 * Each request gets a stream_ctx (streams_int.h) holding its parsed inputs
 * and its surface's profile. This file dispatches requests, and owns the
 * ctx's lifetime and the mutations: they become an rn_op for the engine and
 * are answered from its done callback. Reads are reads.c's. A ctx is freed
 * when answered, or, when live/ holds it, when live/ gives it back.
 */
#include "surface/streams_int.h"
#include "surface/missing.h"
#include "protocol/offset.h"
#include "protocol/params.h"
#include "protocol/reply.h"
#include "protocol/routing.h"
#include "util/json_text.h"
#include "util/metrics.h"
#include "util/text.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const rn_profile RN_PROFILE_V1 = {.name = "v1"};
const rn_profile RN_PROFILE_BUCKET = {.name = "bucket",
                                      .ndjson_reads = 1,
                                      .ext_read_defaults = 1,
                                      .sse_error_events = 1,
                                      .offset_past_tail_416 = 1,
                                      .bucket_not_found = 1};

rn_surface *rn_surface_new(uv_loop_t *loop, rn_engine *engine, rn_live *live,
                           const rn_surface_config *cfg) {
    rn_surface *sf = rn_xcalloc(1, sizeof *sf);
    sf->loop = loop;
    sf->engine = engine;
    sf->live = live;
    sf->cfg = *cfg;
    return sf;
}

rn_engine *rn_surface_engine(const rn_surface *sf) {
    return sf->engine;
}

const rn_surface_config *rn_surface_cfg(const rn_surface *sf) {
    return &sf->cfg;
}

void rn_surface_free(rn_surface *sf) {
    free(sf);
}

/* ---- context lifetime ---- */

void rn_streams_ctx_free(stream_ctx *c) {
    rn_request_release(c->req);
    free(c->path);
    free(c->fork_source);
    free(c);
}

void rn_streams_ctx_finish(stream_ctx *c) {
    assert(!c->read.live);
    c->req->on_abort = NULL;
    rn_streams_ctx_free(c);
}

static void on_abort(rn_request *req) {
    stream_ctx *c = req->handler_data;
    if (c->op.done || c->cold_waiting)
        return; /* an engine op, a cold fetch or a disk read is in flight; its callback frees */
    rn_streams_ctx_finish(c);
}

stream_ctx *rn_streams_ctx_new(rn_surface *sf, rn_request *req, const char *path, size_t path_len) {
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

void rn_streams_reply(stream_ctx *c, rn_error e, rn_buf *extra) {
    rn_reply_error(c->req, e, extra);
    rn_streams_ctx_finish(c);
}

void rn_streams_reply_fault(stream_ctx *c, const rn_param_fault *f) {
    rn_reply_param_fault(c->req, f);
    rn_streams_ctx_finish(c);
}

/* ---- small helpers ---- */

void rn_streams_append_content_type(rn_buf *h, const rn_stream *s) {
    rn_buf_append_str(h, "Content-Type: ");
    rn_buf_append(h, s->content_type, s->content_type_len);
    rn_buf_append_str(h, "\r\n");
}

rn_error rn_streams_missing_error(const stream_ctx *c) {
    if (rn_engine_path_erased(c->sf->engine, c->path, c->path_len, 0))
        return RN_E_BUCKET_ERASED;
    if (c->prof->bucket_not_found)
        return rn_bucket_missing_error(c->sf->engine, c->path, c->path_len);
    return rn_engine_is_gone(c->sf->engine, c->path, c->path_len) ? RN_E_STREAM_GONE
                                                                  : RN_E_STREAM_NOT_FOUND;
}

/* ---- mutations ---- */

static void submit(stream_ctx *c) {
    c->op.done = rn_streams_op_done;
    rn_engine_submit(c->sf->engine, &c->op);
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
        rn_streams_reply(c, RN_E_PRODUCER_ON_CREATE, NULL);
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
        rn_streams_reply_fault(c, &f);
        return;
    }
    if (has_ttl && exp) {
        rn_streams_reply(c, RN_E_INVALID_HEADER_TTL_AND_EXPIRES, NULL);
        return;
    }
    if (has_ttl)
        c->op.in.ttl_s = (int64_t)ttl;
    if (exp) {
        int64_t ms;
        if (rn_parse_rfc3339(exp->value, exp->value_len, &ms) || ms < 0) {
            rn_streams_reply(c, RN_E_INVALID_HEADER_EXPIRES, NULL);
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

int rn_streams_read_append(stream_ctx *c, size_t body_len, rn_param_fault *f, rn_error *e) {
    rn_request *req = c->req;
    const rn_header *seq;
    if (parse_producer(req, &c->op, f) || parse_closed(req, &c->op, f) ||
        rn_param_header(req, "Stream-Seq", RN_E_INVALID_STREAM_SEQ, &seq, f) ||
        (body_len && parse_content_type(req, &c->op, f)))
        return -1;
    c->op.in.kind = RN_OP_APPEND;
    c->op.in.body_len = body_len;
    if (!c->op.in.has_producer && !body_len && !c->op.in.close) {
        *e = RN_E_EMPTY_APPEND;
        return 1;
    }
    if (!c->op.in.has_producer && body_len && !c->op.in.content_type) {
        *e = RN_E_MISSING_CONTENT_TYPE;
        return 1;
    }
    if (seq) {
        c->op.in.has_seq = 1;
        c->op.in.seq = seq->value;
        c->op.in.seq_len = seq->value_len;
    }
    return 0;
}

/* An append or close (rn_streams_read_append), with its body read. */
static void handle_post(stream_ctx *c) {
    rn_param_fault f;
    rn_error e;
    int refused = rn_streams_read_append(c, c->req->body.len, &f, &e);
    if (refused < 0)
        rn_streams_reply_fault(c, &f);
    else if (refused)
        rn_streams_reply(c, e, NULL);
    else {
        c->op.in.body = c->req->body.data;
        submit(c);
    }
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
    rn_streams_append_content_type(&h, op->out.stream);
    append_state(&h, op);
    if (op->out.result == RN_OK_CREATED) {
        const rn_header *host = rn_request_header(c->req, "host", NULL);
        const char *q = memchr(c->req->target, '?', c->req->target_len);
        size_t tlen = q ? (size_t)(q - c->req->target) : c->req->target_len;
        rn_buf_appendf(&h, "Location: %s://%.*s", c->req->tls ? "https" : "http",
                       host ? (int)host->value_len : 9, host ? host->value : "localhost");
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
    case RN_ERR_APPLY_STOPPED:
        return RN_E_APPLY_STOPPED;
    case RN_ERR_COLD_BACKPRESSURE:
        return RN_E_COLD_BACKPRESSURE;
    case RN_ERR_COLD_STORE_FAILED:
        return RN_E_COLD_STORE_FAILED;
    case RN_ERR_BUCKET_ERASED:
        return RN_E_BUCKET_ERASED;
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
 * missing fork source, both content types for a mismatch; and for a cold
 * store that refuses the moves of history, its own words (an error code
 * and status: nothing of its internals, ext §11). Nothing for other
 * refusals. */
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
    case RN_ERR_COLD_STORE_FAILED:
        rn_buf_appendf(out, "it refuses the moves of history: %s", op->out.cause);
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
    case RN_ERR_COLD_BACKPRESSURE:
    case RN_ERR_COLD_STORE_FAILED:
        rn_buf_append_str(&extra, "Retry-After: 1\r\n");
        break;
    case RN_ERR_NO_LEADER:
    case RN_ERR_LOG_BUSY:
    case RN_ERR_APPLY_STOPPED:
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

void rn_streams_op_done(rn_op *op) {
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
        rn_reply_missing(c->req, rn_streams_missing_error(c), c->path, c->path_len, NULL);
        break;
    default:
        answer_append(c->req, op);
        break;
    }
    c->op.done = NULL;
    rn_streams_ctx_finish(c);
}

static void handle_delete(stream_ctx *c) {
    c->op.in.kind = RN_OP_DELETE;
    submit(c);
}

/* ---- dispatch ---- */

int rn_request_incarnation(const rn_request *req, int *present, uint64_t *token) {
    rn_param_fault f;
    if (rn_param_header_u64(req, "Stream-Incarnation", RN_INCARNATION_MAX, RN_E_INVALID_INCARNATION,
                            present, token, &f))
        return -1;
    return *present && *token < RN_INCARNATION_MIN ? -1 : 0;
}

void rn_streams_handle(rn_surface *sf, rn_request *req, const rn_profile *prof, const char *key,
                       size_t key_len, const char *query, size_t query_len) {
    stream_ctx *c = rn_streams_ctx_new(sf, req, key, key_len);
    c->prof = prof;
    if (rn_request_incarnation(req, &c->op.in.has_incarnation, &c->op.in.incarnation)) {
        rn_streams_reply(c, RN_E_INVALID_INCARNATION, NULL);
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
        rn_streams_get(c, query, query_len);
        break;
    case RN_HTTP_HEAD:
        rn_streams_head(c);
        break;
    case RN_HTTP_DELETE:
        handle_delete(c);
        break;
    default: {
        rn_buf extra = {0};
        rn_buf_append_str(&extra, "Allow: GET, HEAD, PUT, POST, DELETE, OPTIONS\r\n");
        rn_streams_reply(c, RN_E_METHOD_NOT_ALLOWED, &extra);
        break;
    }
    }
}

/* Answers a producer write from its headers alone (rn_streams_answer_early). */
static int answer_producer_early(rn_surface *sf, rn_request *req, const char *key, size_t key_len) {
    rn_op op = {.in = {.kind = RN_OP_APPEND, .path = key, .path_len = key_len}};
    rn_param_fault f;
    if (parse_producer(req, &op, &f) || !op.in.has_producer ||
        rn_request_incarnation(req, &op.in.has_incarnation, &op.in.incarnation) ||
        !op.in.has_incarnation)
        return 0; /* not eligible; a shape error is answered with the body */
    if (!rn_engine_answer_early(sf->engine, &op))
        return 0;
    answer_append(req, &op);
    return 1;
}

int rn_streams_answer_early(rn_surface *sf, rn_request *req, const rn_profile *prof,
                            const char *key, size_t key_len) {
    if (req->method != RN_HTTP_POST)
        return 0;
    return answer_producer_early(sf, req, key, key_len) ||
           rn_streams_take_arriving(sf, req, prof, key, key_len);
}
