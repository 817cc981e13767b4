/*
 * snapshots.c — snapshot publish and read, retention, and the immutable
 * snapshot resource (extensions.txt §2.2, §2.5, §4.1). See snapshots.h.
 *
 * Publish: the body is hashed (BLAKE3 of the content type's length, the
 * content type and the body) on the loop, written durably by the tiers
 * (which choose its store and name it), and only then submitted to the
 * engine, which validates against the stream's state at that moment and
 * logs the publish. Appends are never held up: the stream is busy only for
 * the log sync of the small PUBLISH command. A body the engine did not
 * adopt is dropped.
 *
 * Reads stream the body from the descriptor the tiers open for its range
 * (rn_http_respond_file), so a range of a large snapshot reads only that
 * range.
 */
#include "surface/snapshots.h"
#include "util/fault.h"
#include "surface/missing.h"
#include "protocol/offset.h"
#include "protocol/params.h"
#include "protocol/reply.h"
#include "protocol/routing.h"
#include "tiers/tiers.h"
#include "util/blake3.h"
#include "util/text.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char DEFAULT_SNAPSHOT_TYPE[] = "application/octet-stream";

typedef struct {
    rn_surface *sf;
    rn_request *req;
    char *key;
    size_t key_len;
    char *content_type;
    rn_op op;
    char body_key[RN_TIERS_KEY_MAX];
} snap_ctx;

static rn_tiers *tiers(const rn_surface *sf) {
    return rn_surface_cfg(sf)->tiers;
}

static snap_ctx *ctx_new(rn_surface *sf, rn_request *req, const char *key, size_t key_len) {
    snap_ctx *c = rn_xcalloc(1, sizeof *c);
    c->sf = sf;
    c->req = req;
    rn_request_hold(req);
    c->key = rn_xstrndup(key, key_len);
    c->key_len = key_len;
    c->op.in.path = c->key;
    c->op.in.path_len = key_len;
    c->op.in.ttl_s = -1;
    c->op.in.expires_at_ms = -1;
    c->op.arg = c;
    return c;
}

static void ctx_free(snap_ctx *c) {
    rn_request_release(c->req);
    free(c->key);
    free(c->content_type);
    free(c);
}

/* Sets up the op's Stream-Incarnation precondition; answers 400 and returns
 * -1 when the header is malformed. */
static int take_precondition(snap_ctx *c) {
    if (rn_request_incarnation(c->req, &c->op.in.has_incarnation, &c->op.in.incarnation) == 0)
        return 0;
    rn_reply_error(c->req, RN_E_INVALID_INCARNATION, NULL);
    ctx_free(c);
    return -1;
}

/* ---- publish ---- */

/* The answer to a publish the engine decided. */
static void answer_publish(rn_request *req, const rn_op *op) {
    if (op->out.result == RN_OK_PUBLISHED) {
        rn_buf h = {0}, body = {0};
        rn_reply_common(&h);
        rn_reply_snapshot_id(&h, op->out.stream);
        rn_reply_incarnation(&h, op->out.stream);
        rn_http_respond(req, 204, &h, &body);
    } else {
        rn_reply_refusal(req, op);
    }
}

void rn_snapshot_answer_publish(rn_tiers *t, rn_request *req, const rn_op *op) {
    /* The engine did not adopt the body, unless its outcome is unknown: a
     * replicated entry, or a log batch recovery replays, may still apply
     * (the start's orphan sweep removes it when none did). */
    if (!(op->out.result == RN_OK_PUBLISHED && !op->out.repeat) &&
        op->out.result != RN_ERR_UNAVAILABLE)
        rn_tiers_body_drop(t, op->in.blob_cold, op->in.blob_key);
    answer_publish(req, op);
}

static void publish_done(rn_op *op) {
    snap_ctx *c = op->arg;
    rn_snapshot_answer_publish(tiers(c->sf), c->req, op);
    ctx_free(c);
}

static void body_written(void *arg, int status, int cold, const char *body_key) {
    snap_ctx *c = arg;
    if (status < 0) {
        rn_buf extra = {0};
        if (status == -ENOSPC) {
            rn_buf_append_str(&extra, "Retry-After: 1\r\n");
            rn_reply_error(c->req, RN_E_WAL_DISK_PRESSURE, &extra);
        } else {
            rn_reply_cold_failure(c->req, status, NULL);
        }
        ctx_free(c);
        return;
    }
    rn_fault_point("publish-after-blob");
    snprintf(c->body_key, sizeof c->body_key, "%s", body_key);
    c->op.in.blob_key = c->body_key;
    c->op.in.blob_key_len = strlen(c->body_key);
    c->op.in.blob_cold = cold;
    c->op.done = publish_done;
    rn_engine_submit(rn_surface_engine(c->sf), &c->op);
}

/* The snapshot digest of ext §2.2: BLAKE3 of the content type's length (u64
 * little-endian), the content type and the body. */
static void snapshot_digest(const char *ct, size_t ct_len, const uint8_t *body, size_t len,
                            uint8_t out[32]) {
    uint8_t n[8];
    for (int i = 0; i < 8; i++)
        n[i] = (uint8_t)((uint64_t)ct_len >> (8 * i));
    rn_blake3 h;
    rn_blake3_init(&h);
    rn_blake3_update(&h, n, 8);
    rn_blake3_update(&h, ct, ct_len);
    rn_blake3_update(&h, body, len);
    rn_blake3_final(&h, out);
}

/* A context for a write addressed to an offset of the stream: its
 * Stream-Incarnation precondition and offset parsed into the op. Returns
 * NULL after answering 400 for a malformed header or offset. */
static snap_ctx *offset_write(rn_surface *sf, rn_request *req, const char *key, size_t key_len,
                              const char *offset, size_t offset_len) {
    snap_ctx *c = ctx_new(sf, req, key, key_len);
    if (take_precondition(c))
        return NULL;
    if (rn_offset_parse_segment(offset, offset_len, &c->op.in.target_offset)) {
        rn_reply_error(req, RN_E_INVALID_OFFSET, NULL);
        ctx_free(c);
        return NULL;
    }
    return c;
}

void rn_snapshot_publish(rn_surface *sf, rn_request *req, const char *key, size_t key_len,
                         const char *offset, size_t offset_len) {
    snap_ctx *c = offset_write(sf, req, key, key_len, offset, offset_len);
    if (!c)
        return;
    rn_engine *e = rn_surface_engine(sf);
    rn_stream *s = rn_engine_find(e, key, key_len);
    if (!s) {
        rn_reply_missing(req, rn_bucket_missing_error(e, key, key_len), key, key_len, NULL);
        ctx_free(c);
        return;
    }
    const rn_header *ct;
    rn_param_fault f;
    if (rn_param_header(req, "Content-Type", RN_E_INVALID_CONTENT_TYPE, &ct, &f)) {
        rn_reply_param_fault(req, &f);
        ctx_free(c);
        return;
    }
    c->content_type =
        ct ? rn_xstrndup(ct->value, ct->value_len) : rn_xstrdup(DEFAULT_SNAPSHOT_TYPE);
    c->op.in.kind = RN_OP_PUBLISH;
    c->op.in.content_type = c->content_type;
    c->op.in.content_type_len = strlen(c->content_type);
    c->op.in.blob_size = req->body.len;
    snapshot_digest(c->op.in.content_type, c->op.in.content_type_len, req->body.data, req->body.len,
                    c->op.in.digest);
    if (rn_engine_publish_early(e, &c->op)) { /* a repeat or a conflict: store nothing */
        answer_publish(c->req, &c->op);
        ctx_free(c);
        return;
    }
    rn_tiers_body_write(tiers(sf), s->id, req->body.data, req->body.len, body_written, c);
}

/* ---- retention ---- */

static void retain_done(rn_op *op) {
    snap_ctx *c = op->arg;
    if (op->out.result == RN_OK_RETAINED) {
        rn_buf h = {0}, body = {0};
        rn_reply_common(&h);
        rn_reply_offset(&h, "Stream-Retained-Offset", op->out.stream->retained);
        rn_reply_incarnation(&h, op->out.stream);
        rn_http_respond(c->req, 204, &h, &body);
    } else {
        rn_reply_refusal(c->req, op);
    }
    ctx_free(c);
}

void rn_retention_set(rn_surface *sf, rn_request *req, const char *key, size_t key_len,
                      const char *offset, size_t offset_len) {
    snap_ctx *c = offset_write(sf, req, key, key_len, offset, offset_len);
    if (!c)
        return;
    c->op.in.kind = RN_OP_RETAIN;
    c->op.done = retain_done;
    rn_engine_submit(rn_surface_engine(sf), &c->op);
}

/* ---- read ---- */

/* A single byte range of RFC 9110 against a body of `total` bytes: 1 when
 * parsed (first/last set, possibly unsatisfiable: first >= total), 0 when
 * the header is absent or not one range we honour (serve the whole body). */
static int parse_range(const rn_request *req, uint64_t total, uint64_t *first, uint64_t *last) {
    size_t count;
    const rn_header *h = rn_request_header(req, "range", &count);
    if (!h || count != 1 || rn_request_header(req, "if-range", NULL) ||
        !rn_iprefix(h->value, h->value_len, "bytes="))
        return 0;
    const char *p = h->value + 6, *end = h->value + h->value_len;
    const char *dash = memchr(p, '-', (size_t)(end - p));
    if (!dash || memchr(p, ',', (size_t)(end - p)))
        return 0;
    uint64_t a, b;
    int has_a = dash > p, has_b = dash + 1 < end;
    if (has_a && rn_parse_strict_u64(p, (size_t)(dash - p), UINT64_MAX / 2, &a))
        return 0;
    if (has_b && rn_parse_strict_u64(dash + 1, (size_t)(end - dash - 1), UINT64_MAX / 2, &b))
        return 0;
    if (has_a) {
        if (has_b && b < a)
            return 0;
        *first = a;
        *last = has_b && b < total ? b : total - 1;
        return 1;
    }
    if (!has_b)
        return 0;
    if (b == 0) { /* bytes=-0: a suffix of nothing cannot be satisfied */
        *first = *last = total;
        return 1;
    }
    *first = b >= total ? 0 : total - b; /* suffix range (empty body: unsatisfiable) */
    *last = total ? total - 1 : 0;
    return 1;
}

/* Snapshot headers shared by 200, 206 and 304 answers. */
static void snapshot_headers(rn_buf *h, const rn_stream *s, int immutable) {
    rn_reply_common(h);
    rn_buf_append_str(h, "Content-Type: ");
    rn_buf_append(h, s->snapshot.content_type, s->snapshot.content_type_len);
    rn_buf_append_str(h, "\r\n");
    rn_reply_snapshot_id(h, s);
    rn_reply_offset(h, "Stream-Next-Offset", s->snapshot.offset);
    if (!immutable && s->snapshot.offset == s->tail)
        rn_buf_append_str(h, "Stream-Up-To-Date: true\r\n");
    if (immutable)
        rn_buf_append_str(h, "Stream-Immutable: true\r\n");
    rn_reply_incarnation(h, s);
    rn_buf_append_str(h, "ETag: \"");
    for (int i = 0; i < 32; i++)
        rn_buf_appendf(h, "%02x", s->snapshot.digest[i]);
    rn_buf_append_str(h, "\"\r\nAccept-Ranges: bytes\r\nCache-Control: no-store\r\n");
}

/* The header lines of a refused snapshot read. Every answer of a snapshot
 * read says that byte ranges are honoured (ext §2.5); one about an existing
 * stream s (else NULL) names its token; `line` (may be NULL) is one more
 * header line. */
static void read_refusal_lines(rn_buf *extra, const rn_stream *s, const char *line) {
    rn_buf_append_str(extra, "Accept-Ranges: bytes\r\n");
    if (s)
        rn_reply_incarnation(extra, s);
    if (line)
        rn_buf_append_str(extra, line);
}

/* Answers a snapshot read with refusal e (see read_refusal_lines). */
static void refuse_read(rn_request *req, rn_error e, const rn_stream *s, const char *line) {
    rn_buf extra = {0};
    read_refusal_lines(&extra, s, line);
    rn_reply_error(req, e, &extra);
}

void rn_snapshot_read(rn_surface *sf, rn_request *req, const char *key, size_t key_len,
                      const char *offset, size_t offset_len, const char *token, size_t token_len) {
    int immutable = token != NULL;
    uint64_t pos, want_token = 0;
    int has_token = 0;
    if (immutable) {
        if (rn_token_parse_segment(token, token_len, &want_token) ||
            rn_offset_parse_segment(offset, offset_len, &pos)) {
            refuse_read(req, RN_E_INVALID_RESOURCE, NULL, NULL);
            return;
        }
        has_token = 1;
    } else {
        if (rn_request_incarnation(req, &has_token, &want_token)) {
            refuse_read(req, RN_E_INVALID_INCARNATION, NULL, NULL);
            return;
        }
        if (rn_offset_parse_segment(offset, offset_len, &pos)) {
            refuse_read(req, RN_E_INVALID_OFFSET, NULL, NULL);
            return;
        }
    }
    rn_engine *e = rn_surface_engine(sf);
    rn_stream *s = rn_engine_find(e, key, key_len);
    if (!s) {
        rn_buf extra = {0};
        rn_buf_append_str(&extra, "Accept-Ranges: bytes\r\n");
        rn_reply_missing(req, rn_bucket_missing_error(e, key, key_len), key, key_len, &extra);
        return;
    }
    if (req->method == RN_HTTP_GET)
        rn_engine_touch(e, s); /* a read renews the TTL window, HEAD does not */
    if (pos < s->retained) {
        refuse_read(req, RN_E_OFFSET_RETAINED_AWAY, s, NULL);
        return;
    }
    if (!s->snapshot.present || s->snapshot.offset != pos) {
        refuse_read(req, RN_E_SNAPSHOT_NOT_FOUND, s, NULL);
        return;
    }
    uint64_t total = s->snapshot.size, first = 0, last = total ? total - 1 : 0;
    char etag[68] = "\"";
    rn_blake3_hex(s->snapshot.digest, etag + 1);
    strcat(etag, "\"");
    int not_modified = rn_if_none_match(req, etag);
    int ranged = !not_modified && parse_range(req, total, &first, &last);
    if (ranged && first >= total) {
        char content_range[64];
        snprintf(content_range, sizeof content_range, "Content-Range: bytes */%llu\r\n",
                 (unsigned long long)total);
        refuse_read(req, RN_E_RANGE_NOT_SATISFIABLE, s, content_range);
        return;
    }
    if (has_token && want_token != s->incarnation) {
        refuse_read(req, RN_E_INCARNATION_MISMATCH, s, NULL);
        return;
    }
    rn_buf h = {0}, empty = {0}, suffix = {0};
    snapshot_headers(&h, s, immutable);
    if (not_modified) {
        rn_http_respond(req, 304, &h, &empty);
        return;
    }
    if (ranged)
        rn_buf_appendf(&h, "Content-Range: bytes %llu-%llu/%llu\r\n", (unsigned long long)first,
                       (unsigned long long)last, (unsigned long long)total);
    uint64_t len = total ? last - first + 1 : 0;
    rn_buf refusal = {0};
    read_refusal_lines(&refusal, s, NULL);
    rn_snapshot_respond_body(sf, req, ranged ? 206 : 200, &h, &empty, s, first, len, &suffix,
                             &refusal);
}

/* An answer waiting for the tiers to open the snapshot body it carries. */
typedef struct {
    rn_request *req;
    int status;
    rn_buf head, prefix, suffix;
    uint64_t len;
    rn_buf refusal; /* header lines of the 502 when the body cannot be read */
    char *key;      /* the stream's path: a replica still fetching the body redirects */
    size_t key_len;
} body_answer;

static void body_opened(void *arg, int fd, uint64_t fd_off) {
    body_answer *a = arg;
    if (fd < 0) {
        rn_buf_free(&a->head);
        rn_buf_free(&a->prefix);
        rn_buf_free(&a->suffix);
        if (fd == -ENOENT && rn_routing_active()) { /* a replica still fetching the body */
            rn_buf_free(&a->refusal);
            rn_routing_read_elsewhere(a->req, a->key, a->key_len);
        } else {
            rn_reply_cold_failure(a->req, fd, &a->refusal);
        }
    } else {
        rn_http_respond_file(a->req, a->status, &a->head, &a->prefix, fd, fd_off, a->len,
                             &a->suffix);
        rn_buf_free(&a->refusal);
    }
    rn_request_release(a->req);
    free(a->key);
    free(a);
}

static rn_buf take(rn_buf *b) {
    rn_buf taken = *b;
    *b = (rn_buf){0};
    return taken;
}

void rn_snapshot_respond_body(rn_surface *sf, rn_request *req, int status, rn_buf *head,
                              rn_buf *prefix, const rn_stream *s, uint64_t off, uint64_t len,
                              rn_buf *suffix, rn_buf *refusal) {
    assert(s->snapshot.present);
    body_answer *a = rn_xcalloc(1, sizeof *a);
    a->req = req;
    rn_request_hold(req);
    a->status = status;
    a->head = take(head);
    a->prefix = take(prefix);
    a->suffix = take(suffix);
    a->refusal = refusal ? take(refusal) : (rn_buf){0};
    a->len = len;
    a->key = rn_xstrndup(s->path, s->path_len);
    a->key_len = s->path_len;
    rn_tiers_body_read(tiers(sf), s->snapshot.cold, s->snapshot.key, off, len, body_opened, a);
}
