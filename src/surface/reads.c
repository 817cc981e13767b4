/*
 * reads.c — the read path of both surfaces: HEAD, catch-up reads, and live
 * reads up to their hand-off to live/. See streams.h.
 *
 * Reads are answered from applied (durable) state. A GET's query is parsed
 * strictly (params.h), its offset checked against the retained offset, the
 * tail and, for JSON arrays, a message boundary, and its Stream-Incarnation
 * precondition applied. A long-poll with nothing to answer yet, or an SSE
 * read, is then admitted by live/'s bounds and handed over with the ctx's
 * reader and live_ops: the long-poll answers (the same as a catch-up's),
 * the SSE error body and the offset token, which live/ cannot spell itself
 * (it includes nothing from surface/). live/ gives the ctx back
 * (release_reader) when it is done with it.
 */
#include "live/cursor.h"
#include "live/live.h"
#include "protocol/offset.h"
#include "protocol/params.h"
#include "protocol/read_query.h"
#include "protocol/reply.h"
#include "protocol/routing.h"
#include "tiers/tiers.h"
#include "surface/streams_int.h"
#include "util/metrics.h"
#include "util/text.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BUCKET_READ_CAP (8u << 20) /* ext §9.3: bytes per response or SSE event */
#define BUCKET_POLL_DEFAULT_MS 1000

static void append_cursor(rn_buf *h, const stream_ctx *c) {
    rn_buf_appendf(h, "Stream-Cursor: %llu\r\n",
                   (unsigned long long)rn_cursor_next(&c->read.cursor));
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

/* Answers 404, or 410 for a soft-deleted stream, when s is NULL. */
static int answer_missing(stream_ctx *c, const rn_stream *s) {
    if (s)
        return 0;
    rn_reply_missing(c->req, rn_streams_missing_error(c), c->path, c->path_len, NULL);
    rn_streams_ctx_finish(c);
    return 1;
}

/* Answers 412 with the current token when the request's Stream-Incarnation
 * names another incarnation of s. Returns 1 when it answered. */
static int answer_precondition(stream_ctx *c, const rn_stream *s) {
    if (!c->op.in.has_incarnation || c->op.in.incarnation == s->incarnation)
        return 0;
    rn_buf extra = {0};
    rn_reply_incarnation(&extra, s);
    rn_streams_reply(c, RN_E_INCARNATION_MISMATCH, &extra);
    return 1;
}

void rn_streams_head(stream_ctx *c) {
    rn_stream *s = rn_engine_find(c->sf->engine, c->path, c->path_len);
    if (answer_missing(c, s) || answer_precondition(c, s))
        return;
    rn_buf h = {0}, body = {0};
    rn_reply_common(&h);
    rn_streams_append_content_type(&h, s);
    rn_reply_offset(&h, "Stream-Next-Offset", s->tail);
    append_expiry(&h, s);
    if (s->closed)
        rn_buf_append_str(&h, "Stream-Closed: true\r\n");
    rn_reply_incarnation(&h, s);
    rn_reply_offset(&h, "Stream-Retained-Offset", s->retained);
    rn_reply_snapshot_id(&h, s);
    if (s->has_previous) {
        rn_buf_appendf(&h, "Stream-Previous-Incarnation: %llu\r\n",
                       (unsigned long long)s->previous_incarnation);
        rn_reply_offset(&h, "Stream-Inherited-Offset", s->inherited_offset);
    }
    rn_buf_appendf(&h, "Ursula-Max-Request-Bytes: %zu\r\n", c->sf->cfg.max_body_bytes);
    if (rn_tiers_keeps_parts(c->sf->cfg.tiers)) /* snapshots in parts are accepted */
        rn_buf_append_str(&h, "Ursula-Max-Snapshot-Bytes: 1073741824\r\n");
    rn_buf_append_str(&h, "Cache-Control: no-store\r\n");
    rn_http_respond(c->req, 200, &h, &body);
    rn_streams_ctx_finish(c);
}

/* True when this read renders the stream's JSON message text as NDJSON. */
static int reads_ndjson(const stream_ctx *c, const rn_stream *s) {
    return s->json && c->prof->ndjson_reads;
}

/* A catch-up answer's body, read from the stream a piece at a time
 * (rn_http_pieces) or whole: the stream's bytes [start, start + len) as
 * the read found them; for a JSON array, the message text with every LF
 * turned into a comma ("[" and "]" go around it, the last LF left out).
 * A piece is read from the page cache only; one that is not all there is
 * read into it on a worker first (rn_engine_warm_missed), then read again,
 * blocking this once, so that it cannot miss forever. A whole answer
 * that misses runs again from the start the same way (disk_read), so
 * that a read that then fails still gets its typed answer. */
typedef struct {
    rn_engine *engine;
    rn_request *req;
    uint64_t stream_id, incarnation;
    uint64_t start;
    int commas;
    rn_engine_warm *warming; /* in flight, or NULL */
    int warmed;              /* the next read may block */
    rn_buf first;            /* the answer's first bytes, read before its head was sent */
} read_source;

/* Appends the answer's bytes [pos, pos + len) to out, reading from the
 * page cache only unless may_block. Returns 0, or < 0 when they are no
 * longer the stream's bytes the answer began with (rn_engine_read_again),
 * could not be read (-ENODATA: cold bytes no longer cached), or are not
 * in the page cache (-EINPROGRESS: out unchanged). */
static int read_bytes(const read_source *r, uint64_t pos, size_t len, int may_block, rn_buf *out) {
    rn_buf_reserve(out, len);
    uint8_t *p = out->data + out->len;
    int rc = rn_engine_read_again(r->engine, r->stream_id, r->incarnation, r->start + pos, len,
                                  may_block, p);
    if (rc < 0)
        return rc;
    for (size_t i = 0; r->commas && i < len; i++)
        if (p[i] == '\n')
            p[i] = ',';
    out->len += len;
    return 0;
}

static void read_warmed(void *ctx) {
    read_source *r = ctx;
    r->warming = NULL;
    r->warmed = 1;
    rn_http_pieces_resume(r->req);
}

static int read_fill(void *ctx, uint64_t pos, size_t len, rn_buf *out) {
    read_source *r = ctx;
    if (r->first.len && pos + len <= r->first.len) {
        rn_buf_append(out, r->first.data + pos, len);
        if (pos + len == r->first.len)
            rn_buf_free(&r->first);
        return 0;
    }
    rn_buf_free(&r->first); /* pieces of another size: read again */
    if (r->warming)
        return RN_HTTP_PIECE_LATER;
    int rc = read_bytes(r, pos, len, r->warmed, out);
    if (rc == -EINPROGRESS) {
        r->warming = rn_engine_warm_missed(r->engine, RN_WARM_FOR_READ, read_warmed, r);
        if (r->warming)
            return RN_HTTP_PIECE_LATER;
        rc = read_bytes(r, pos, len, 1, out);
    }
    r->warmed = 0;
    return rc;
}

static void read_release(void *ctx) {
    read_source *r = ctx;
    if (r->warming)
        rn_engine_warm_cancel(r->warming);
    rn_buf_free(&r->first);
    free(r);
}

/* Sends a 200 catch-up answer: head h, then the `got` stream bytes at
 * src->start, rendered as a JSON array or as they are. One that fits one
 * piece of the transport is read here and sent whole, from the page cache
 * only unless may_block; a longer one is read and sent a piece at a time
 * (rn_http_respond_pieces), so it never holds the loop, or memory, for
 * more than a piece, nor waits for the disk on it (read_fill); its first
 * piece is read before the head is sent, so that a failure there (a
 * damaged block) gets its typed answer: after the head only the
 * connection can be cut. Returns < 0 (nothing sent) when the bytes of a
 * whole answer, or of that first piece, could not be read: -EINPROGRESS
 * when they are not in the page cache. */
static int send_data(stream_ctx *c, rn_buf *h, const read_source *src, uint64_t got,
                     int may_block) {
    rn_buf prefix = {0}, body = {0}, suffix = {0};
    if (src->commas) { /* "[" text-without-its-last-LF "]" */
        rn_buf_append_str(&prefix, "[");
        rn_buf_append_str(&suffix, "]");
        got = got ? got - 1 : 0;
    }
    if (got > rn_http_piece_bytes(c->req)) {
        read_source *pieces_src = rn_xmalloc(sizeof *pieces_src);
        *pieces_src = *src;
        pieces_src->req = c->req;
        pieces_src->first = (rn_buf){0};
        int rc = read_bytes(src, 0, rn_http_piece_bytes(c->req), may_block, &pieces_src->first);
        if (rc < 0) {
            read_release(pieces_src);
            rn_buf_free(&prefix);
            rn_buf_free(&suffix);
            return rc;
        }
        rn_http_pieces pieces = {.fill = read_fill, .release = read_release, .ctx = pieces_src};
        rn_http_respond_pieces(c->req, 200, h, &prefix, &pieces, got, &suffix);
        return 0;
    }
    body = prefix;
    int rc = got ? read_bytes(src, 0, (size_t)got, may_block, &body) : 0;
    if (rc < 0) {
        rn_buf_free(&body);
        rn_buf_free(&suffix);
        return rc;
    }
    rn_buf_append(&body, suffix.data, suffix.len);
    rn_buf_free(&suffix);
    rn_http_respond(c->req, 200, h, &body);
    return 0;
}

static void wait_cold(stream_ctx *c);
static void disk_read(void *arg);

/* A read of bytes this replica lacks: restored and not fetched yet, or
 * found damaged and being fetched again (then the refusal says so). */
static void read_elsewhere(stream_ctx *c, const rn_stream *s) {
    if (s->damaged_blocks)
        rn_routing_read_repairing(c->req, c->path, c->path_len);
    else
        rn_routing_read_elsewhere(c->req, c->path, c->path_len);
}

/* Answers a read with the data at its offset (possibly none): catch-up 200,
 * or a long-poll 200 with a cursor. Bytes in the cold store that the read
 * cache lacks are fetched first when the read `may_wait` (it then runs
 * again: returns 1); a woken long-poll, which live/ holds, answers 503
 * COLD_BACKPRESSURE instead and starts the fetch for its retry. Returns 0
 * once answered. */
static int answer_data(stream_ctx *c, rn_stream *s, int may_wait) {
    rn_buf h = {0};
    uint64_t start = c->read.offset;
    long got = 0;
    if (c->offset_kind != RN_OFFSET_NOW) {
        got =
            rn_engine_read_length(c->sf->engine, s, start, c->read.max_bytes, !reads_ndjson(c, s));
        int ready = got > 0 ? rn_engine_read_ready(c->sf->engine, s, start, (size_t)got) : 0;
        if (ready < 0) /* every cold byte of the answer is cached before it starts */
            got = ready;
        if (got == -EAGAIN) { /* bytes this replica has not fetched (or, for a fork across
                                 groups, whose source's pin it has not applied) yet */
            read_elsewhere(c, s);
            return 0;
        }
        if (got == -ENODATA && may_wait) {
            wait_cold(c);
            return 1;
        }
        if (got == -ENODATA) {
            rn_engine_cold_fetch(c->sf->engine, NULL, NULL);
            rn_reply_cold_failure(c->req, -EAGAIN, NULL);
            return 0;
        }
        if (got < 0) {
            rn_reply_error(c->req, got == -EUCLEAN ? RN_E_STREAM_DATA_DAMAGED : RN_E_INTERNAL,
                           NULL);
            return 0;
        }
    }
    uint64_t end = start + (uint64_t)got;
    int at_tail = end == s->tail;
    rn_reply_common(&h);
    if (reads_ndjson(c, s))
        rn_buf_append_str(&h, "Content-Type: application/x-ndjson\r\n");
    else
        rn_streams_append_content_type(&h, s);
    rn_reply_offset(&h, "Stream-Next-Offset", end);
    if (at_tail)
        rn_buf_append_str(&h, "Stream-Up-To-Date: true\r\n");
    if (at_tail && s->closed)
        rn_buf_append_str(&h, "Stream-Closed: true\r\n");
    if (c->mode == RN_READ_LONG_POLL && !(at_tail && s->closed))
        append_cursor(&h, c);
    rn_reply_incarnation(&h, s);
    if (c->offset_kind == RN_OFFSET_NOW || got == 0) {
        rn_buf_append_str(&h, "Cache-Control: no-store\r\n");
    } else {
        rn_buf_append_str(&h, "Cache-Control: public, max-age=60, stale-while-revalidate=300\r\n");
    }
    if (c->offset_kind != RN_OFFSET_NOW) {
        /* The ETag names the incarnation, the range, closure at the tail and
         * the representation (JSON arrays and NDJSON differ in bytes). */
        char etag[128];
        snprintf(etag, sizeof etag, "\"%llu:%llu:%llu:%s%s\"", (unsigned long long)s->incarnation,
                 (unsigned long long)start, (unsigned long long)end, c->prof->name,
                 at_tail && s->closed ? ":c" : "");
        rn_buf_appendf(&h, "ETag: %s\r\n", etag);
        if (rn_if_none_match(c->req, etag)) {
            rn_buf empty = {0};
            rn_http_respond(c->req, 304, &h, &empty);
            return 0;
        }
    }
    read_source src = {.engine = c->sf->engine,
                       .stream_id = s->id,
                       .incarnation = s->incarnation,
                       .start = start,
                       .commas = s->json && !reads_ndjson(c, s)};
    int may_block = !may_wait || c->disk_read;
    c->disk_read = 0;
    int rc = send_data(c, &h, &src, (uint64_t)got, may_block);
    if (rc == -EINPROGRESS) { /* not in the page cache: read into it on a worker, then again */
        c->cold_waiting = 1;
        if (rn_engine_warm_missed(c->sf->engine, RN_WARM_FOR_READ, disk_read, c)) {
            rn_buf_free(&h);
            return 1;
        }
        c->cold_waiting = 0;
        rc = send_data(c, &h, &src, (uint64_t)got, 1);
    }
    if (rc == 0 && got > 0) {
        rn_metric.reads++;
        rn_metric.read_bytes += (uint64_t)got;
    }
    if (rc < 0)
        rn_buf_free(&h);
    if (rc == -EAGAIN) /* damaged here, being fetched again from a peer (cluster) */
        read_elsewhere(c, s);
    else if (rc < 0)
        rn_reply_error(c->req, rc == -EUCLEAN ? RN_E_STREAM_DATA_DAMAGED : RN_E_INTERNAL, NULL);
    return 0;
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
    rn_reply_incarnation(&h, s);
    rn_http_respond(c->req, 204, &h, &body);
}

/* --- live reads, held by live/ once handed over --- */

/* How c's SSE data events carry the stream's bytes: JSON arrays (v1),
 * base64 for binary content types, else text (NDJSON included). */
static rn_sse_encoding sse_encoding(const stream_ctx *c, const rn_stream *s) {
    if (s->json)
        return reads_ndjson(c, s) ? RN_SSE_TEXT : RN_SSE_JSON_ARRAY;
    return rn_iprefix(s->content_type, s->content_type_len, "text/") ? RN_SSE_TEXT : RN_SSE_BASE64;
}

static stream_ctx *reader_ctx(const rn_live_reader *r) {
    return (stream_ctx *)((char *)r - offsetof(stream_ctx, read));
}

/* The error a live read ends in when its stream goes away (404) or its
 * history is rewritten: the read was opened under the retired incarnation
 * and its offsets belong to the old history, so it answers 412 with the
 * current token whether or not it carried the precondition (an SSE read
 * sends the same error as its last event). */
static rn_error live_end_error(rn_live_end why) {
    assert(why == RN_LIVE_REMOVED || why == RN_LIVE_REWRITTEN || why == RN_LIVE_FAILED ||
           why == RN_LIVE_COLD || why == RN_LIVE_EXPIRED || why == RN_LIVE_DAMAGED);
    return why == RN_LIVE_REMOVED     ? RN_E_STREAM_NOT_FOUND
           : why == RN_LIVE_REWRITTEN ? RN_E_HISTORY_REWRITTEN
           : why == RN_LIVE_COLD      ? RN_E_COLD_STORE_FAILED
           : why == RN_LIVE_EXPIRED   ? RN_E_GW_CREDENTIAL_EXPIRED
           : why == RN_LIVE_DAMAGED   ? RN_E_STREAM_DATA_DAMAGED
                                      : RN_E_INTERNAL;
}

static void answer_live_poll(rn_live_reader *r, rn_stream *s, rn_live_end why) {
    stream_ctx *c = reader_ctx(r);
    if (why == RN_LIVE_DATA) {
        answer_data(c, s, 0);
    } else if (why == RN_LIVE_TIMEOUT) {
        answer_poll_timeout(c, s);
    } else if (why == RN_LIVE_REMOVED) {
        rn_reply_missing(c->req, live_end_error(why), c->path, c->path_len, NULL);
    } else {
        rn_buf extra = {0};
        rn_reply_incarnation(&extra, s);
        rn_reply_error(c->req, live_end_error(why), &extra);
    }
}

/* On surfaces that send them, an SSE read ending in error sends an error
 * event whose data is the error body on one line (ext §11). */
static void sse_error_body(const rn_live_reader *r, rn_live_end why, rn_buf *out) {
    const stream_ctx *c = reader_ctx(r);
    if (!c->prof->sse_error_events && why != RN_LIVE_EXPIRED) /* a gate's event: any surface */
        return;
    rn_error e = live_end_error(why);
    rn_buf path = {0};
    if (e == RN_E_STREAM_NOT_FOUND) /* named as rn_reply_missing() names it */
        rn_reply_stream_path(&path, c->req, c->path, c->path_len);
    rn_error_body(e, path.len ? (const char *)path.data : NULL, path.len, out);
    rn_buf_free(&path);
}

static void append_offset_token(rn_buf *out, uint64_t position) {
    char tok[RN_OFFSET_LEN + 1];
    rn_offset_format(position, tok);
    rn_buf_append_str(out, tok);
}

static void release_reader(rn_live_reader *r) {
    rn_streams_ctx_free(reader_ctx(r));
}

static const rn_live_ops live_ops = {.answer_poll = answer_live_poll,
                                     .sse_error = sse_error_body,
                                     .append_offset = append_offset_token,
                                     .release = release_reader};

/* Parses the query (protocol/read_query.h) into c, over the profile's
 * defaults. Returns 0, or -1 with *f set. */
static int parse_query(stream_ctx *c, const char *q, size_t len, rn_param_fault *f) {
    rn_read_query rq = {.timeout_ms = c->poll_timeout_ms, .max_bytes = c->read.max_bytes};
    if (rn_read_query_parse(q, len, &rq, f))
        return -1;
    c->offset_kind = rq.offset_kind;
    c->read.offset = rq.offset;
    c->mode = rq.mode;
    /* the cursor is an echo: one this server could not have sent is ignored */
    c->read.cursor.present = rq.has_cursor;
    c->read.cursor.value = rq.cursor;
    c->poll_timeout_ms = rq.timeout_ms;
    c->read.max_bytes = rq.max_bytes;
    return 0;
}

/* Refuses a live read that would park past the server's or the stream's
 * bound (a long-poll that can answer at once is not refused). Returns 1
 * when it answered. */
static int answer_live_limit(stream_ctx *c, const rn_stream *s) {
    if (c->mode == RN_READ_CATCHUP ||
        (c->mode == RN_READ_LONG_POLL && (c->read.offset < s->tail || s->closed)))
        return 0;
    rn_live_admission a = rn_live_admit(c->sf->live, s);
    if (a == RN_LIVE_ADMITTED)
        return 0;
    rn_error e =
        a == RN_LIVE_FULL ? RN_E_LIVE_READ_BACKPRESSURE : RN_E_STREAM_LIVE_READ_BACKPRESSURE;
    rn_buf extra = {0};
    rn_buf_append_str(&extra, "Retry-After: 1\r\n");
    rn_reply_incarnation(&extra, s);
    rn_streams_reply(c, e, &extra);
    return 1;
}

/* The end of a wait for cold bytes: the read runs again from the start
 * (the stream may have changed meanwhile), or answers the store's failure. */
static void cold_fetched(void *arg, int status) {
    stream_ctx *c = arg;
    c->cold_waiting = 0;
    if (status < 0) {
        rn_reply_cold_failure(c->req, status, NULL);
        rn_streams_ctx_finish(c);
        return;
    }
    rn_streams_get(c, c->query, c->query_len);
}

/* The end of a wait for the disk (the bytes of a whole answer were not in
 * the page cache): the read runs again from the start, its bytes read
 * blocking this time, so that it cannot miss forever. */
static void disk_read(void *arg) {
    stream_ctx *c = arg;
    c->cold_waiting = 0;
    c->disk_read = 1;
    rn_streams_get(c, c->query, c->query_len);
}

/* Fetches the cold bytes the read missed (rn_engine_cold_fetch) and runs
 * it again; a read that waited RN_COLD_WAITS times already (its bytes
 * evicted as fast as they come: a read cache too small for its readers)
 * answers 503 COLD_BACKPRESSURE. */
#define RN_COLD_WAITS 32
static void wait_cold(stream_ctx *c) {
    c->cold_waiting = 1; /* the ctx outlives a client that leaves meanwhile */
    if (c->cold_waits++ >= RN_COLD_WAITS)
        cold_fetched(c, -EAGAIN);
    else
        rn_engine_cold_fetch(c->sf->engine, cold_fetched, c);
}

void rn_streams_get(stream_ctx *c, const char *query, size_t query_len) {
    c->query = query;
    c->query_len = query_len;
    c->read.req = c->req;
    c->read.ops = &live_ops;
    c->read.max_bytes = c->prof->ext_read_defaults ? BUCKET_READ_CAP : c->sf->cfg.max_read_bytes;
    c->poll_timeout_ms =
        c->prof->ext_read_defaults ? BUCKET_POLL_DEFAULT_MS : c->sf->cfg.long_poll_timeout_ms;
    rn_param_fault f;
    if (parse_query(c, query, query_len, &f)) {
        rn_streams_reply_fault(c, &f);
        return;
    }
    rn_engine *e = c->sf->engine;
    rn_stream *s = rn_engine_find(e, c->path, c->path_len);
    if (answer_missing(c, s))
        return;
    rn_engine_touch(e, s);
    uint64_t *offset = &c->read.offset;
    if (c->offset_kind != RN_OFFSET_NOW && *offset < s->retained) {
        rn_buf extra = {0};
        rn_reply_incarnation(&extra, s);
        rn_streams_reply(c, RN_E_OFFSET_RETAINED_AWAY, &extra);
        return;
    }
    if (c->offset_kind == RN_OFFSET_NOW) {
        *offset = s->tail;
    } else if (c->offset_kind == RN_OFFSET_POSITION && *offset > s->tail &&
               c->prof->offset_past_tail_416) {
        rn_buf extra = {0};
        rn_reply_incarnation(&extra, s);
        rn_streams_reply(c, RN_E_OFFSET_OUT_OF_RANGE, &extra);
        return;
    } else if (c->offset_kind == RN_OFFSET_POSITION) {
        int valid = *offset > s->tail    ? 0
                    : reads_ndjson(c, s) ? 1
                                         : rn_engine_offset_valid(e, s, *offset);
        if (valid == -ENODATA) { /* the byte before it is cold */
            wait_cold(c);
            return;
        }
        if (valid <= 0) { /* unverified (< 0): a failed read, retryable */
            rn_buf extra = {0};
            if (valid < 0)
                rn_buf_append_str(&extra, "Retry-After: 1\r\n");
            rn_streams_reply(c, valid < 0 ? RN_E_JSON_BOUNDARY_UNVERIFIED : RN_E_INVALID_OFFSET,
                             &extra);
            return;
        }
    }
    if (answer_precondition(c, s))
        return;
    if (answer_live_limit(c, s))
        return;
    switch (c->mode) {
    case RN_READ_CATCHUP:
        if (answer_data(c, s, 1))
            return;
        break;
    case RN_READ_LONG_POLL:
        c->offset_kind = RN_OFFSET_POSITION; /* a long-poll 200 carries data and an ETag */
        if (*offset < s->tail) {
            if (answer_data(c, s, 1))
                return;
        } else if (s->closed) {
            answer_poll_timeout(c, s);
        } else {
            rn_live_poll(c->sf->live, &c->read, s, c->poll_timeout_ms);
            return;
        }
        break;
    case RN_READ_SSE: {
        c->read.encoding = sse_encoding(c, s);
        rn_buf h = {0};
        rn_reply_common(&h);
        if (reads_ndjson(c, s)) {
            rn_buf_append_str(&h, "Stream-Data-Content-Type: application/x-ndjson\r\n");
        } else {
            rn_buf_append_str(&h, "Stream-Data-Content-Type: ");
            rn_buf_append(&h, s->content_type, s->content_type_len);
            rn_buf_append_str(&h, "\r\n");
        }
        rn_reply_incarnation(&h, s);
        rn_live_sse(c->sf->live, &c->read, s, &h);
        return;
    }
    }
    rn_streams_ctx_finish(c);
}
