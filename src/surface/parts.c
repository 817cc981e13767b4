/*
 * parts.c — snapshots uploaded in parts (extensions.txt §2.2 "Upload in
 * Parts"): the requests and their answers. See parts.h.
 *
 * The parts themselves are the tiers' (tiers.h): staged, counted, assembled
 * into a snapshot body and removed there. Here: the bounds, decided from
 * the counts the tiers keep (from the request head when they are known);
 * a commit's order of checks (the latest snapshot first: a repeat succeeds,
 * a conflict answers 409 naming the latest; then the listed parts,
 * assembled while hashed; then the digest); and the publish of the body
 * through the engine like a single-request publish. The parts go once the
 * commit's answer is final for its key and stay for a repeat otherwise.
 * One commit or discard runs per stream at a time (the tiers' claim). The
 * bounds count a stream's staged parts of every incarnation, and a
 * discard removes them all.
 */
#include "surface/parts.h"
#include "util/fault.h"
#include "surface/missing.h"
#include "protocol/offset.h"
#include "protocol/params.h"
#include "protocol/reply.h"
#include "surface/snapshots.h"
#include "tiers/tiers.h"
#include "util/blake3.h"
#include "util/text.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define MAX_PARTS_PER_COMMIT 4096
#define MAX_STAGED_PARTS 8192
#define MAX_STAGED_BYTES (2ull << 30)
#define MAX_SNAPSHOT_BYTES (1ull << 30)
#define MAX_PART_BYTES (32ull << 20) /* the request limit (ext §10) */
#define MAX_PART_ID_BYTES 64

static rn_tiers *tiers(const rn_surface *sf) {
    return rn_surface_cfg(sf)->tiers;
}

/* ---- request contexts ---- */

typedef struct {
    rn_surface *sf;
    rn_request *req;
    char *key;
    size_t key_len;
    uint64_t stream_id, incarnation;
    /* commit */
    char **ids;
    size_t nids;
    char *content_type;
    uint8_t want_digest[32];
    rn_blake3 hash;
    rn_op op;
    char body_key[RN_TIERS_KEY_MAX];
} part_ctx;

static part_ctx *ctx_new(rn_surface *sf, rn_request *req, const char *key, size_t key_len,
                         const rn_stream *s) {
    part_ctx *c = rn_xcalloc(1, sizeof *c);
    c->sf = sf;
    c->req = req;
    rn_request_hold(req);
    c->key = rn_xstrndup(key, key_len);
    c->key_len = key_len;
    c->stream_id = s->id;
    c->incarnation = s->incarnation;
    return c;
}

static void ctx_free(part_ctx *c) {
    for (size_t i = 0; i < c->nids; i++)
        free(c->ids[i]);
    free(c->ids);
    free(c->content_type);
    rn_request_release(c->req);
    free(c->key);
    free(c);
}

static void incarnation_line(rn_buf *h, uint64_t incarnation) {
    rn_buf_appendf(h, "Stream-Incarnation: %llu\r\n", (unsigned long long)incarnation);
}

/* Finds the stream of a parts request and applies its Stream-Incarnation
 * precondition. Returns -1 with *out set, or the refusal (400, 404, 410,
 * 412, 501; *out is the stream for 412). */
static int find_stream(rn_surface *sf, const rn_request *req, const char *key, size_t key_len,
                       rn_stream **out) {
    *out = NULL;
    if (!rn_tiers_keeps_parts(tiers(sf)))
        return RN_E_NO_COLD_STORE;
    int has_token;
    uint64_t token;
    if (rn_request_incarnation(req, &has_token, &token))
        return RN_E_INVALID_INCARNATION;
    rn_engine *e = rn_surface_engine(sf);
    *out = rn_engine_find(e, key, key_len);
    if (!*out)
        return rn_bucket_missing_error(e, key, key_len);
    return has_token && token != (*out)->incarnation ? RN_E_INCARNATION_MISMATCH : -1;
}

/* find_stream(), answering its refusal; NULL when it answered. A request
 * that reaches the stream renews its TTL window (PROTOCOL §5.1). */
static rn_stream *stream_or_answer(rn_surface *sf, rn_request *req, const char *key,
                                   size_t key_len) {
    rn_stream *s;
    int refusal = find_stream(sf, req, key, key_len, &s);
    if (s)
        rn_engine_touch(rn_surface_engine(sf), s);
    if (refusal < 0)
        return s;
    rn_buf extra = {0};
    if (s)
        rn_reply_incarnation(&extra, s);
    rn_reply_missing(req, (rn_error)refusal, key, key_len, &extra); /* names a missing stream */
    return NULL;
}

/* True when a part's offset segment is an offset: checked, then ignored. */
static int offset_ok(const char *seg, size_t len) {
    uint64_t pos;
    return rn_offset_parse_segment(seg, len, &pos) == 0;
}

static void answer_busy(rn_request *req, const rn_stream *s) {
    rn_buf extra = {0};
    rn_buf_append_str(&extra, "Retry-After: 1\r\n");
    rn_reply_incarnation(&extra, s);
    rn_reply_error(req, RN_E_SNAPSHOT_COMMIT_IN_PROGRESS, &extra);
}

/* ---- stage ---- */

/* Answers 429 STAGED_PARTS_LIMIT and returns 1 when a part of part_bytes
 * would pass a bound of a stream that holds `count` staged parts of
 * `bytes` (ext §2.2; the answer names its current incarnation); else
 * returns 0. */
static int answer_staged_limit(rn_request *req, uint64_t incarnation, uint64_t count,
                               uint64_t bytes, uint64_t part_bytes) {
    rn_buf extra = {0};
    if (count >= MAX_STAGED_PARTS)
        rn_buf_appendf(&extra, "Ursula-Max-Staged-Parts: %d\r\n", MAX_STAGED_PARTS);
    else if (bytes + part_bytes > MAX_STAGED_BYTES)
        rn_buf_appendf(&extra, "Ursula-Max-Staged-Bytes: %llu\r\n", MAX_STAGED_BYTES);
    if (!extra.len)
        return 0;
    incarnation_line(&extra, incarnation);
    rn_reply_error(req, RN_E_STAGED_PARTS_LIMIT, &extra);
    return 1;
}

void rn_parts_answer_early(rn_surface *sf, rn_request *req, const char *key, size_t key_len,
                           const char *offset, size_t offset_len) {
    rn_stream *s;
    if (!offset_ok(offset, offset_len) || find_stream(sf, req, key, key_len, &s) >= 0)
        return; /* refused the usual way, once the body is in */
    size_t count;
    const rn_header *cl = rn_request_header(req, "content-length", &count);
    uint64_t declared, parts, bytes;
    if (!cl || count != 1 || rn_parse_strict_u64(cl->value, cl->value_len, UINT64_MAX, &declared))
        declared = MAX_PART_BYTES; /* a part without a length counts as the largest */
    if (rn_tiers_parts_staged(tiers(sf), s->id, &parts, &bytes) == 0)
        answer_staged_limit(req, s->incarnation, parts, bytes, declared);
    /* else the counts are still being listed: the stage decides */
}

static void part_staged(void *arg, int status, const char *part_id) {
    part_ctx *c = arg;
    if (status < 0) {
        rn_reply_cold_failure(c->req, status, NULL);
    } else {
        rn_buf h = {0}, body = {0};
        rn_reply_common(&h);
        rn_buf_appendf(&h, "Stream-Snapshot-Part: %s\r\n", part_id);
        incarnation_line(&h, c->incarnation);
        rn_http_respond(c->req, 201, &h, &body);
    }
    ctx_free(c);
}

static void staged_counted(void *arg, uint64_t count, uint64_t bytes) {
    part_ctx *c = arg;
    const rn_buf *body = &c->req->body;
    if (answer_staged_limit(c->req, c->incarnation, count, bytes, body->len)) {
        ctx_free(c);
        return;
    }
    rn_tiers_part_stage(tiers(c->sf), c->stream_id, c->incarnation, body->data, body->len,
                        part_staged, c);
}

void rn_parts_stage(rn_surface *sf, rn_request *req, const char *key, size_t key_len,
                    const char *offset, size_t offset_len) {
    if (!offset_ok(offset, offset_len)) {
        rn_reply_error(req, RN_E_INVALID_OFFSET, NULL);
        return;
    }
    rn_stream *s = stream_or_answer(sf, req, key, key_len);
    if (!s)
        return;
    part_ctx *c = ctx_new(sf, req, key, key_len, s);
    rn_tiers_parts_count(tiers(sf), s->id, staged_counted, c);
}

/* ---- discard ---- */

static void discarded(void *arg, int status) {
    part_ctx *c = arg;
    if (status < 0) {
        rn_reply_cold_failure(c->req, status, NULL); /* never 204: some may remain */
    } else {
        rn_buf h = {0}, body = {0};
        rn_reply_common(&h);
        incarnation_line(&h, c->incarnation);
        rn_http_respond(c->req, 204, &h, &body);
    }
    ctx_free(c);
}

void rn_parts_discard(rn_surface *sf, rn_request *req, const char *key, size_t key_len) {
    rn_stream *s = stream_or_answer(sf, req, key, key_len);
    if (!s)
        return;
    if (rn_tiers_parts_claim(tiers(sf), s->id) < 0) {
        answer_busy(req, s);
        return;
    }
    part_ctx *c = ctx_new(sf, req, key, key_len, s);
    rn_tiers_parts_discard(tiers(sf), s->id, discarded, c);
}

/* ---- commit ---- */

/* Parses the commit body: exactly n distinct part ids, each followed by one
 * LF. Returns 0 and fills c->ids, or -1. */
static int parse_part_list(part_ctx *c, const rn_buf *body, uint64_t n) {
    if (body->len > n * (MAX_PART_ID_BYTES + 1))
        return -1; /* longer than any list of n ids we issue */
    c->ids = rn_xcalloc(n, sizeof *c->ids);
    size_t i = 0;
    while (i < body->len) {
        const uint8_t *lf = memchr(body->data + i, '\n', body->len - i);
        if (!lf || c->nids == n)
            return -1;
        size_t len = (size_t)(lf - body->data) - i;
        if (len == 0 || len > MAX_PART_ID_BYTES)
            return -1;
        for (size_t k = 0; k < len; k++)
            if (body->data[i + k] <= 0x20 || body->data[i + k] >= 0x7f || body->data[i + k] == '/')
                return -1;
        for (size_t k = 0; k < c->nids; k++)
            if (strlen(c->ids[k]) == len && memcmp(c->ids[k], body->data + i, len) == 0)
                return -1;
        c->ids[c->nids++] = rn_xstrndup((const char *)body->data + i, len);
        i += len + 1;
    }
    return c->nids == n ? 0 : -1;
}

static void hash_piece(void *arg, const uint8_t *data, size_t len) {
    rn_blake3_update(arg, data, len);
}

/* Ends a commit whose answer is final: its parts go. */
static void commit_finish(part_ctx *c) {
    rn_tiers_parts_release(tiers(c->sf), c->stream_id, c->incarnation, (const char *const *)c->ids,
                           c->nids);
    ctx_free(c);
}

/* Ends a commit refused with a retryable answer: its parts stay for the
 * repeat (ext §2.2). */
static void commit_keep_parts(part_ctx *c) {
    rn_tiers_parts_unclaim(tiers(c->sf), c->stream_id);
    ctx_free(c);
}

/* True when a publish's result is a final answer for the commit's key (ext
 * §2.2: 204, 400, 404, 409, 410, 412); the 503s of a full disk, a failed log
 * sync, an unverified JSON boundary, a lost leadership, a busy
 * replicated log and a replica that stopped applying are repeated with the
 * same parts. */
static int publish_final(rn_result r) {
    return r != RN_ERR_DISK_FULL && r != RN_ERR_UNAVAILABLE && r != RN_ERR_BOUNDARY_UNVERIFIED &&
           r != RN_ERR_NO_LEADER && r != RN_ERR_LOG_BUSY && r != RN_ERR_APPLY_STOPPED;
}

static void commit_published(rn_op *op) {
    part_ctx *c = op->arg;
    rn_snapshot_answer_publish(tiers(c->sf), c->req, op);
    if (publish_final(op->out.result))
        commit_finish(c);
    else
        commit_keep_parts(c);
}

/* Answers a commit whose parts could not be assembled (status < 0). */
static void refuse_assembly(rn_request *req, int status) {
    if (status == -EFBIG) {
        rn_buf extra = {0};
        rn_buf_appendf(&extra, "Ursula-Max-Snapshot-Bytes: %llu\r\n", MAX_SNAPSHOT_BYTES);
        rn_reply_error(req, RN_E_SNAPSHOT_TOO_LARGE, &extra);
    } else if (status == -ENOENT) {
        rn_reply_error(req, RN_E_UNKNOWN_PART, NULL);
    } else if (status == -EBUSY) { /* the node's copies: refused before copying (ext §11.1) */
        rn_buf extra = {0};
        rn_buf_append_str(&extra, "Retry-After: 1\r\n");
        rn_reply_error(req, RN_E_SNAPSHOT_COMMITS_BUSY, &extra);
    } else {
        rn_reply_cold_failure(req, status, NULL);
    }
}

static void assembled(void *arg, int status, int cold, const char *body_key, uint64_t size) {
    part_ctx *c = arg;
    if (status < 0) {
        refuse_assembly(c->req, status);
        commit_keep_parts(c); /* the copy used nothing up */
        return;
    }
    rn_blake3_final(&c->hash, c->op.in.digest);
    if (memcmp(c->op.in.digest, c->want_digest, 32) != 0) {
        rn_tiers_body_drop(tiers(c->sf), cold, body_key);
        rn_reply_error(c->req, RN_E_SNAPSHOT_DIGEST_MISMATCH, NULL);
        commit_finish(c); /* the copy used the parts up */
        return;
    }
    rn_fault_point("commit-after-assemble");
    snprintf(c->body_key, sizeof c->body_key, "%s", body_key);
    c->op.in.blob_key = c->body_key;
    c->op.in.blob_key_len = strlen(c->body_key);
    c->op.in.blob_cold = cold;
    c->op.in.blob_size = size;
    c->op.done = commit_published;
    rn_engine_submit(rn_surface_engine(c->sf), &c->op);
}

static int parse_digest(const rn_header *h, uint8_t out[32]) {
    return h && h->value_len == 64 ? rn_parse_lower_hex(h->value, h->value_len, out) : -1;
}

/* Answers a commit of s at pos that the latest snapshot decides (pos at
 * or below it): 204 for a repeat of it, else 409 naming it. */
static void answer_against_latest(rn_request *req, const rn_stream *s, uint64_t pos,
                                  const uint8_t digest[32]) {
    if (pos == s->snapshot.offset && memcmp(digest, s->snapshot.digest, 32) == 0) {
        rn_buf h = {0}, body = {0};
        rn_reply_common(&h);
        rn_reply_snapshot_id(&h, s);
        rn_reply_incarnation(&h, s);
        rn_http_respond(req, 204, &h, &body);
    } else {
        rn_buf extra = {0};
        rn_reply_snapshot_id(&extra, s);
        rn_reply_incarnation(&extra, s);
        rn_reply_error(req, RN_E_SNAPSHOT_CONFLICT, &extra);
    }
}

/* Sets up the PUBLISH that a commit's assembled body becomes, and starts
 * hashing it (ext §2.2: the content type's length and the content type
 * come first). */
static void prepare_publish(part_ctx *c, const rn_header *ct, uint64_t pos) {
    c->content_type =
        ct ? rn_xstrndup(ct->value, ct->value_len) : rn_xstrdup("application/octet-stream");
    size_t ct_len = strlen(c->content_type);
    uint8_t le[8];
    for (int i = 0; i < 8; i++)
        le[i] = (uint8_t)((uint64_t)ct_len >> (8 * i));
    rn_blake3_init(&c->hash);
    rn_blake3_update(&c->hash, le, 8);
    rn_blake3_update(&c->hash, c->content_type, ct_len);
    c->op.in.kind = RN_OP_PUBLISH;
    c->op.in.path = c->key;
    c->op.in.path_len = c->key_len;
    c->op.in.ttl_s = c->op.in.expires_at_ms = -1;
    c->op.in.has_incarnation = 1; /* publish into the incarnation the parts belong to */
    c->op.in.incarnation = c->incarnation;
    c->op.in.target_offset = pos;
    c->op.in.content_type = c->content_type;
    c->op.in.content_type_len = ct_len;
    c->op.arg = c;
}

void rn_parts_commit(rn_surface *sf, rn_request *req, const char *key, size_t key_len,
                     const char *offset, size_t offset_len) {
    rn_stream *s = stream_or_answer(sf, req, key, key_len);
    if (!s)
        return;
    uint64_t pos, n;
    int has_count;
    const rn_header *digest, *ct;
    rn_param_fault f;
    part_ctx *c = ctx_new(sf, req, key, key_len, s);
    if (rn_offset_parse_segment(offset, offset_len, &pos)) {
        rn_reply_error(req, RN_E_INVALID_OFFSET, NULL);
        ctx_free(c);
        return;
    }
    if (rn_param_header_u64(req, "Stream-Snapshot-Parts", MAX_PARTS_PER_COMMIT,
                            RN_E_INVALID_PARTS_COMMIT, &has_count, &n, &f) ||
        rn_param_header(req, "Stream-Snapshot-Digest", RN_E_INVALID_PARTS_COMMIT, &digest, &f) ||
        rn_param_header(req, "Content-Type", RN_E_INVALID_CONTENT_TYPE, &ct, &f)) {
        rn_reply_param_fault(req, &f);
        ctx_free(c);
        return;
    }
    if (!has_count || n == 0 || parse_digest(digest, c->want_digest)) {
        rn_reply_error(req, RN_E_INVALID_PARTS_COMMIT, NULL);
        ctx_free(c);
        return;
    }
    /* The latest snapshot first: a repeat succeeds, a conflicting or
     * superseded commit answers 409 naming the latest, parts or not. */
    if (s->snapshot.present && pos <= s->snapshot.offset) {
        answer_against_latest(req, s, pos, c->want_digest);
        ctx_free(c);
        return;
    }
    if (parse_part_list(c, &req->body, n)) {
        rn_reply_error(req, RN_E_INVALID_PARTS_COMMIT, NULL);
        ctx_free(c);
        return;
    }
    if (rn_tiers_parts_claim(tiers(sf), s->id) < 0) {
        answer_busy(req, s);
        ctx_free(c);
        return;
    }
    prepare_publish(c, ct, pos);
    rn_tiers_parts_assemble(tiers(sf), c->stream_id, c->incarnation, (const char *const *)c->ids,
                            c->nids, MAX_SNAPSHOT_BYTES, hash_piece, &c->hash, assembled, c);
}
