/*
 * parts.c — snapshots uploaded in parts (extensions.txt §2.2 "Upload in
 * Parts"). See parts.h.
 *
 * A part is a cold-store object "parts/<stream id>/<incarnation>/<part id>",
 * written durably before its 201. A stream's staged parts are counted in
 * memory (rebuilt from a listing the first time the stream needs them) so
 * the bounds are decided from the request head. A commit checks the latest
 * snapshot first (a repeat succeeds, a conflict answers 409 naming the
 * latest), then resolves the listed parts, copies them into one snapshot
 * object on a worker thread while hashing, compares the digest, and
 * publishes the object through the engine like a single-request publish.
 * The parts are deleted once the commit's answer is final. One commit or
 * discard runs per stream incarnation at a time; parts nobody committed are
 * swept after --parts-grace-ms.
 */
#include "surface/parts.h"
#include "util/fault.h"
#include "surface/bucket.h"
#include "surface/offset.h"
#include "surface/params.h"
#include "surface/reply.h"
#include "surface/snapshots.h"
#include "tiers/blobs.h"
#include "util/blake3.h"
#include "util/map.h"
#include "util/text.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#define MAX_PARTS_PER_COMMIT 4096
#define MAX_STAGED_PARTS 8192
#define MAX_STAGED_BYTES (2ull << 30)
#define MAX_SNAPSHOT_BYTES (1ull << 30)
#define MAX_PART_BYTES (32ull << 20) /* the request limit (ext §10) */
#define PART_ID_LEN 32

/* Staged parts of one stream incarnation. */
typedef struct {
    uint64_t key[2]; /* map key: stream id, incarnation */
    uint64_t count, bytes;
    int busy; /* a commit or discard runs */
} staged;

struct rn_parts {
    rn_surface *sf;
    rn_map staged; /* (stream id, incarnation) -> staged */
    uv_timer_t sweep;
    uint64_t grace_ms;
};

static void part_dir(const rn_stream *s, uint64_t incarnation, char *out, size_t cap) {
    snprintf(out, cap, "parts/%016llx/%llu/", (unsigned long long)s->id,
             (unsigned long long)incarnation);
}

static rn_blobs *cold(rn_parts *p) {
    return rn_engine_blobs(rn_surface_engine(p->sf), 1);
}

typedef struct {
    staged *st;
    rn_blobs *blobs;
} listing;

static int count_part(const char *key, void *arg) {
    listing *l = arg;
    int64_t size = rn_blobs_size(l->blobs, key);
    l->st->count++;
    l->st->bytes += size > 0 ? (uint64_t)size : 0;
    return 0;
}

/* The staged-part record of s's current incarnation, listed on first use. */
static staged *staged_for(rn_parts *p, const rn_stream *s) {
    uint64_t key[2] = {s->id, s->incarnation};
    staged *st = rn_map_get(&p->staged, key, sizeof key);
    if (st)
        return st;
    st = rn_xcalloc(1, sizeof *st);
    memcpy(st->key, key, sizeof key);
    char dir[96];
    part_dir(s, s->incarnation, dir, sizeof dir);
    listing l = {st, cold(p)};
    rn_blobs_list(cold(p), dir, count_part, &l);
    rn_map_put(&p->staged, st->key, sizeof st->key, st);
    return st;
}

/* ---- request contexts ---- */

typedef struct {
    rn_parts *parts;
    rn_request *req;
    char *key;
    size_t key_len;
    uint64_t stream_id, incarnation;
    char dir[96];
    char part_id[PART_ID_LEN + 1];
    int status;
    uv_work_t work;
    /* commit */
    char **ids;
    size_t nids;
    char *content_type;
    uint8_t want_digest[32];
    rn_blake3 hash;
    rn_op op;
    char blob_key[RN_BLOB_KEY_MAX];
} part_ctx;

static part_ctx *ctx_new(rn_parts *p, rn_request *req, const char *key, size_t key_len,
                         const rn_stream *s) {
    part_ctx *c = rn_xcalloc(1, sizeof *c);
    c->parts = p;
    c->req = req;
    rn_request_hold(req);
    c->key = rn_xstrndup(key, key_len);
    c->key_len = key_len;
    c->stream_id = s->id;
    c->incarnation = s->incarnation;
    part_dir(s, s->incarnation, c->dir, sizeof c->dir);
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

static staged *ctx_staged(part_ctx *c) {
    uint64_t key[2] = {c->stream_id, c->incarnation};
    return rn_map_get(&c->parts->staged, key, sizeof key);
}

/* Finds the stream of a parts request and applies its Stream-Incarnation
 * precondition. Returns -1 with *out set, or the refusal (400, 404, 410,
 * 412, 501; *out is the stream for 412). */
static int find_stream(rn_parts *p, const rn_request *req, const char *key, size_t key_len,
                       rn_stream **out) {
    *out = NULL;
    if (!cold(p))
        return RN_E_NO_COLD_STORE;
    int has_token;
    uint64_t token;
    if (rn_request_incarnation(req, &has_token, &token))
        return RN_E_INVALID_INCARNATION;
    rn_engine *e = rn_surface_engine(p->sf);
    *out = rn_engine_find(e, key, key_len);
    if (!*out)
        return rn_bucket_missing_error(e, key, key_len);
    return has_token && token != (*out)->incarnation ? RN_E_INCARNATION_MISMATCH : -1;
}

/* find_stream(), answering its refusal; NULL when it answered. A request
 * that reaches the stream renews its TTL window (PROTOCOL §5.1). */
static rn_stream *stream_or_answer(rn_parts *p, rn_request *req, const char *key, size_t key_len) {
    rn_stream *s;
    int refusal = find_stream(p, req, key, key_len, &s);
    if (s)
        rn_engine_touch(rn_surface_engine(p->sf), s);
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

static void stage_work(uv_work_t *w) {
    part_ctx *c = w->data;
    char key[160];
    snprintf(key, sizeof key, "%s%s", c->dir, c->part_id);
    c->status = rn_blobs_put(cold(c->parts), key, c->req->body.data, c->req->body.len);
}

static void stage_done(uv_work_t *w, int status) {
    part_ctx *c = w->data;
    staged *st = ctx_staged(c);
    if (status || c->status) {
        if (st)
            st->bytes -= c->req->body.len;
        rn_reply_error(c->req, RN_E_COLD_STORE_FAILED, NULL);
    } else {
        if (st)
            st->count++;
        rn_buf h = {0}, body = {0};
        rn_reply_common(&h);
        rn_buf_appendf(&h, "Stream-Snapshot-Part: %s\r\nStream-Incarnation: %llu\r\n", c->part_id,
                       (unsigned long long)c->incarnation);
        rn_http_respond(c->req, 201, &h, &body);
    }
    ctx_free(c);
}

/* Answers 429 STAGED_PARTS_LIMIT and returns 1 when a part of part_bytes
 * would pass a bound of s's staged parts (ext §2.2); else returns 0. */
static int answer_staged_limit(rn_parts *p, rn_request *req, const rn_stream *s,
                               uint64_t part_bytes) {
    const staged *st = staged_for(p, s);
    rn_buf extra = {0};
    if (st->count >= MAX_STAGED_PARTS)
        rn_buf_appendf(&extra, "Ursula-Max-Staged-Parts: %d\r\n", MAX_STAGED_PARTS);
    else if (st->bytes + part_bytes > MAX_STAGED_BYTES)
        rn_buf_appendf(&extra, "Ursula-Max-Staged-Bytes: %llu\r\n", MAX_STAGED_BYTES);
    if (!extra.len)
        return 0;
    rn_reply_incarnation(&extra, s);
    rn_reply_error(req, RN_E_STAGED_PARTS_LIMIT, &extra);
    return 1;
}

void rn_parts_answer_early(rn_parts *p, rn_request *req, const char *key, size_t key_len,
                           const char *offset, size_t offset_len) {
    rn_stream *s;
    if (!offset_ok(offset, offset_len) || find_stream(p, req, key, key_len, &s) >= 0)
        return; /* refused the usual way, once the body is in */
    size_t count;
    const rn_header *cl = rn_request_header(req, "content-length", &count);
    uint64_t declared;
    if (!cl || count != 1 || rn_parse_strict_u64(cl->value, cl->value_len, UINT64_MAX, &declared))
        declared = MAX_PART_BYTES; /* a part without a length counts as the largest */
    answer_staged_limit(p, req, s, declared);
}

void rn_parts_stage(rn_parts *p, rn_request *req, const char *key, size_t key_len,
                    const char *offset, size_t offset_len) {
    if (!offset_ok(offset, offset_len)) {
        rn_reply_error(req, RN_E_INVALID_OFFSET, NULL);
        return;
    }
    rn_stream *s = stream_or_answer(p, req, key, key_len);
    if (!s || answer_staged_limit(p, req, s, req->body.len))
        return;
    staged *st = staged_for(p, s);
    part_ctx *c = ctx_new(p, req, key, key_len, s);
    uint8_t rnd[PART_ID_LEN / 2];
    if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd)
        memset(rnd, 0, sizeof rnd);
    for (size_t i = 0; i < sizeof rnd; i++)
        snprintf(c->part_id + 2 * i, 3, "%02x", rnd[i]);
    st->bytes += req->body.len; /* counted while it uploads */
    c->work.data = c;
    uv_queue_work(rn_surface_loop(p->sf), &c->work, stage_work, stage_done);
}

/* ---- discard ---- */

/* Deletes one part; a failure stops the listing and is its result. */
static int delete_key(const char *key, void *arg) {
    return rn_blobs_delete(arg, key);
}

/* Forgets the counts of the context's stream incarnation: its next use
 * lists the parts again (after a commit used some, or a discard failed). */
static void forget_staged(part_ctx *c) {
    staged *st = ctx_staged(c);
    if (!st)
        return;
    rn_map_remove(&c->parts->staged, st->key, sizeof st->key);
    free(st);
}

static void discard_work(uv_work_t *w) {
    part_ctx *c = w->data;
    c->status = rn_blobs_list(cold(c->parts), c->dir, delete_key, cold(c->parts));
}

static void discard_done(uv_work_t *w, int status) {
    part_ctx *c = w->data;
    staged *st = ctx_staged(c);
    if (status || c->status) {
        /* Some parts may remain: never 204 (ext §2.2); count them anew. */
        forget_staged(c);
        rn_reply_error(c->req, RN_E_COLD_STORE_FAILED, NULL);
    } else {
        if (st) {
            st->busy = 0;
            st->count = 0;
            st->bytes = 0;
        }
        rn_buf h = {0}, body = {0};
        rn_reply_common(&h);
        rn_buf_appendf(&h, "Stream-Incarnation: %llu\r\n", (unsigned long long)c->incarnation);
        rn_http_respond(c->req, 204, &h, &body);
    }
    ctx_free(c);
}

void rn_parts_discard(rn_parts *p, rn_request *req, const char *key, size_t key_len) {
    rn_stream *s = stream_or_answer(p, req, key, key_len);
    if (!s)
        return;
    staged *st = staged_for(p, s);
    if (st->busy) {
        answer_busy(req, s);
        return;
    }
    st->busy = 1;
    part_ctx *c = ctx_new(p, req, key, key_len, s);
    c->work.data = c;
    uv_queue_work(rn_surface_loop(p->sf), &c->work, discard_work, discard_done);
}

/* ---- commit ---- */

/* Parses the commit body: exactly n distinct part ids, each followed by one
 * LF. Returns 0 and fills c->ids, or -1. */
static int parse_part_list(part_ctx *c, const rn_buf *body, uint64_t n) {
    if (body->len > n * (PART_ID_LEN * 2 + 1))
        return -1; /* longer than any list of n ids we issue */
    c->ids = rn_xcalloc(n, sizeof *c->ids);
    size_t i = 0;
    while (i < body->len) {
        const uint8_t *lf = memchr(body->data + i, '\n', body->len - i);
        if (!lf || c->nids == n)
            return -1;
        size_t len = (size_t)(lf - body->data) - i;
        if (len == 0 || len > 64)
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

static void delete_parts_work(uv_work_t *w) {
    part_ctx *c = w->data;
    for (size_t i = 0; i < c->nids; i++) {
        char key[160];
        snprintf(key, sizeof key, "%s%s", c->dir, c->ids[i]);
        rn_blobs_delete(cold(c->parts), key);
    }
}

static void delete_parts_done(uv_work_t *w, int status) {
    part_ctx *c = w->data;
    (void)status;
    forget_staged(c); /* the next use counts what is left */
    ctx_free(c);
}

/* Ends a commit whose answer is final: its parts go. */
static void commit_finish(part_ctx *c) {
    c->work.data = c;
    uv_queue_work(rn_surface_loop(c->parts->sf), &c->work, delete_parts_work, delete_parts_done);
}

/* Ends a commit refused with a retryable answer: its parts stay for the
 * repeat (ext §2.2). */
static void commit_keep_parts(part_ctx *c) {
    staged *st = ctx_staged(c);
    if (st)
        st->busy = 0;
    ctx_free(c);
}

/* True when a publish's result is a final answer for the commit's key (ext
 * §2.2: 204, 400, 404, 409, 410, 412); the 503s of a full disk, a failed log
 * sync, an unverified JSON boundary, a lost leadership and a busy
 * replicated log are repeated with the same parts. */
static int publish_final(rn_result r) {
    return r != RN_ERR_DISK_FULL && r != RN_ERR_UNAVAILABLE && r != RN_ERR_BOUNDARY_UNVERIFIED &&
           r != RN_ERR_NO_LEADER && r != RN_ERR_LOG_BUSY;
}

static void commit_published(rn_op *op) {
    part_ctx *c = op->arg;
    rn_snapshot_answer_publish(c->req, op, cold(c->parts), c->blob_key);
    if (publish_final(op->out.result))
        commit_finish(c);
    else
        commit_keep_parts(c);
}

static void assemble_work(uv_work_t *w) {
    part_ctx *c = w->data;
    const char **src = rn_xcalloc(c->nids, sizeof *src);
    char **keys = rn_xcalloc(c->nids, sizeof *keys);
    for (size_t i = 0; i < c->nids; i++) {
        keys[i] = rn_xmalloc(160);
        snprintf(keys[i], 160, "%s%s", c->dir, c->ids[i]);
        src[i] = keys[i];
    }
    c->status = rn_blobs_concat(cold(c->parts), c->blob_key, src, c->nids, hash_piece, &c->hash);
    for (size_t i = 0; i < c->nids; i++)
        free(keys[i]);
    free(keys);
    free(src);
}

static void assembled(uv_work_t *w, int status) {
    part_ctx *c = w->data;
    if (status || c->status) {
        rn_reply_error(c->req, c->status == -ENOENT ? RN_E_UNKNOWN_PART : RN_E_COLD_STORE_FAILED,
                       NULL);
        commit_keep_parts(c); /* the copy used nothing up */
        return;
    }
    rn_blake3_final(&c->hash, c->op.in.digest);
    if (memcmp(c->op.in.digest, c->want_digest, 32) != 0) {
        rn_blobs_delete(cold(c->parts), c->blob_key);
        rn_reply_error(c->req, RN_E_SNAPSHOT_DIGEST_MISMATCH, NULL);
        commit_finish(c); /* the copy used the parts up */
        return;
    }
    rn_fault_point("commit-after-assemble");
    c->op.done = commit_published;
    rn_engine_submit(rn_surface_engine(c->parts->sf), &c->op);
}

static int parse_digest(const rn_header *h, uint8_t out[32]) {
    return h && h->value_len == 64 ? rn_parse_lower_hex(h->value, h->value_len, out) : -1;
}

void rn_parts_commit(rn_parts *p, rn_request *req, const char *key, size_t key_len,
                     const char *offset, size_t offset_len) {
    rn_stream *s = stream_or_answer(p, req, key, key_len);
    if (!s)
        return;
    uint64_t pos, n;
    int has_count;
    const rn_header *digest, *ct;
    rn_param_fault f;
    part_ctx *c = ctx_new(p, req, key, key_len, s);
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
        if (pos == s->snapshot.offset && memcmp(c->want_digest, s->snapshot.digest, 32) == 0) {
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
        ctx_free(c);
        return;
    }
    if (parse_part_list(c, &req->body, n)) {
        rn_reply_error(req, RN_E_INVALID_PARTS_COMMIT, NULL);
        ctx_free(c);
        return;
    }
    staged *st = staged_for(p, s);
    if (st->busy) {
        answer_busy(req, s);
        ctx_free(c);
        return;
    }
    uint64_t total = 0;
    for (size_t i = 0; i < c->nids; i++) {
        char pkey[160];
        snprintf(pkey, sizeof pkey, "%s%s", c->dir, c->ids[i]);
        int64_t size = rn_blobs_size(cold(p), pkey);
        if (size < 0) {
            rn_reply_error(req, RN_E_UNKNOWN_PART, NULL);
            ctx_free(c);
            return;
        }
        total += (uint64_t)size;
    }
    if (total > MAX_SNAPSHOT_BYTES) {
        rn_buf extra = {0};
        rn_buf_appendf(&extra, "Ursula-Max-Snapshot-Bytes: %llu\r\n", MAX_SNAPSHOT_BYTES);
        rn_reply_error(req, RN_E_SNAPSHOT_TOO_LARGE, &extra);
        ctx_free(c);
        return;
    }
    st->busy = 1;
    c->content_type =
        ct ? rn_xstrndup(ct->value, ct->value_len) : rn_xstrdup("application/octet-stream");
    size_t ct_len = strlen(c->content_type);
    uint8_t le[8];
    for (int i = 0; i < 8; i++)
        le[i] = (uint8_t)((uint64_t)ct_len >> (8 * i));
    rn_blake3_init(&c->hash);
    rn_blake3_update(&c->hash, le, 8);
    rn_blake3_update(&c->hash, c->content_type, ct_len);
    rn_engine *e = rn_surface_engine(p->sf);
    rn_engine_blob_key(e, s, c->blob_key);
    c->op.in.kind = RN_OP_PUBLISH;
    c->op.in.path = c->key;
    c->op.in.path_len = c->key_len;
    c->op.in.ttl_s = c->op.in.expires_at_ms = -1;
    c->op.in.has_incarnation = 1; /* publish into the incarnation the parts belong to */
    c->op.in.incarnation = c->incarnation;
    c->op.in.target_offset = pos;
    c->op.in.content_type = c->content_type;
    c->op.in.content_type_len = ct_len;
    c->op.in.blob_key = c->blob_key;
    c->op.in.blob_key_len = strlen(c->blob_key);
    c->op.in.blob_cold = 1;
    c->op.in.blob_size = total;
    c->op.arg = c;
    c->work.data = c;
    uv_queue_work(rn_surface_loop(p->sf), &c->work, assemble_work, assembled);
}

/* ---- lifecycle ---- */

static void on_sweep(uv_timer_t *t) {
    rn_parts *p = t->data;
    rn_blobs *b = cold(p);
    if (!b)
        return;
    /* Runs on the loop: a sweep lists and unlinks old files only. */
    rn_blobs_sweep(b, "parts/", (int64_t)time(NULL) - (int64_t)(p->grace_ms / 1000));
    /* Forget the counts of idle incarnations: the next use lists again. */
    staged **idle = rn_xcalloc(p->staged.count + 1, sizeof *idle);
    size_t n = 0, i = 0;
    void *v;
    while (rn_map_next(&p->staged, &i, &v))
        if (!((staged *)v)->busy)
            idle[n++] = v;
    for (size_t k = 0; k < n; k++) {
        rn_map_remove(&p->staged, idle[k]->key, sizeof idle[k]->key);
        free(idle[k]);
    }
    free(idle);
}

rn_parts *rn_parts_new(rn_surface *sf, uint64_t grace_ms) {
    rn_parts *p = rn_xcalloc(1, sizeof *p);
    p->sf = sf;
    p->grace_ms = grace_ms;
    uv_timer_init(rn_surface_loop(sf), &p->sweep);
    p->sweep.data = p;
    uint64_t every = grace_ms / 4 ? grace_ms / 4 : 1;
    uv_timer_start(&p->sweep, on_sweep, every, every);
    return p;
}

static void on_sweep_closed(uv_handle_t *h) {
    rn_parts *p = h->data;
    size_t i = 0;
    void *v;
    while (rn_map_next(&p->staged, &i, &v))
        free(v);
    rn_map_free(&p->staged);
    free(p);
}

void rn_parts_close(rn_parts *p) {
    uv_close((uv_handle_t *)&p->sweep, on_sweep_closed);
}
