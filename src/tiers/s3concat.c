/*
 * s3concat.c — the S3 store's concat (store.h, s3store_int.h): HEADs for
 * the sizes and the bound, then each source read by ranged GETs of at most
 * 1 MiB fed to the observer, and copied by the store itself with
 * UploadPartCopy (no byte goes back up); where S3 cannot copy (a source
 * below its 5 MiB least part that is not the last, or a store answering
 * 501 to the copy, which the store then remembers) the bytes read are
 * uploaded as parts of part_bytes instead.
 */
#include "tiers/s3store_int.h"
#include "util/buf.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define MAX_COPY_PART (5ull << 30) /* S3's largest part */
#define READ_PIECE (1u << 20)      /* a concat's GETs for the observer */

typedef struct {
    s3store_req r;
    char key[S3STORE_KEY_MAX];
    char **src; /* full keys */
    uint64_t *sizes;
    size_t n;
    uint64_t max_bytes, total;
    rn_store_observe_fn observe;
    void *observe_arg;
    int copy;          /* 1: parts are UploadPartCopy of whole sources */
    int copied;        /* copy: source `at` is copied (its pieces then feed the observer) */
    uint64_t observed; /* bytes passed to the observer */
    size_t at;         /* the source being read (or HEADed) */
    uint64_t at_off;   /* bytes of it read */
    uint8_t *buf;      /* READ_PIECE (copy) or part_bytes (upload) */
    uint64_t buf_len, buf_cap;
    char *upload_id;
    rn_s3_part *parts;
    uint32_t nparts;
    rn_store_size_fn done;
    void *arg;
} concat_op;

static void concat_free(concat_op *c) {
    s3store_free_keys(c->src, c->n);
    for (uint32_t i = 0; i < c->nparts; i++)
        free((char *)c->parts[i].etag);
    free(c->sizes);
    free(c->buf);
    free(c->parts);
    free(c->upload_id);
    free(c);
}

static void concat_finish(concat_op *c, int64_t result) {
    if (c->upload_id && result < 0)
        s3store_abort_upload(c->r.st, c->key, c->upload_id);
    c->done(c->arg, result);
    concat_free(c);
}

static rn_s3_call *issue_head(s3store_req *r) {
    concat_op *c = (concat_op *)r;
    return rn_s3_head(r->st->s3, c->src[c->at], s3store_on_answer, r);
}

static rn_s3_call *issue_concat_create(s3store_req *r) {
    return rn_s3_mpu_create(r->st->s3, ((concat_op *)r)->key, s3store_on_answer, r);
}

static void concat_read_next(concat_op *c);
static void concat_created(s3store_req *r, const rn_s3_result *res);

/* Whether S3 can copy the sources as they are (every one but the last at
 * least its least part, none above its largest). */
static int copyable(const concat_op *c) {
    if (c->r.st->no_part_copy)
        return 0;
    for (size_t i = 0; i < c->n; i++)
        if ((i + 1 < c->n && c->sizes[i] < S3STORE_MIN_PART) || c->sizes[i] > MAX_COPY_PART)
            return 0;
    return 1;
}

/* Starts (or restarts, in upload mode) the copy: a fresh upload. */
static void concat_begin(concat_op *c) {
    c->copy = copyable(c);
    c->buf_cap = c->copy ? READ_PIECE : c->r.st->part_bytes;
    free(c->buf);
    c->buf = rn_xmalloc(c->buf_cap);
    c->buf_len = 0;
    c->at = 0;
    c->at_off = 0;
    c->copied = 0;
    s3store_call(&c->r, RN_COLD_MULTIPART, issue_concat_create, concat_created);
}

static void concat_headed(s3store_req *r, const rn_s3_result *res) {
    concat_op *c = (concat_op *)r;
    if (res->outcome != RN_S3_OK) {
        concat_finish(c, s3store_answer_errno(res));
        return;
    }
    c->sizes[c->at] = res->object_size;
    c->total += res->object_size;
    if (++c->at < c->n) {
        s3store_call(r, RN_COLD_HEAD, issue_head, concat_headed);
        return;
    }
    if (c->total > c->max_bytes) {
        concat_finish(c, -EFBIG);
        return;
    }
    concat_begin(c);
}

static void concat_created(s3store_req *r, const rn_s3_result *res) {
    concat_op *c = (concat_op *)r;
    if (res->outcome != RN_S3_OK) {
        concat_finish(c, s3store_answer_errno(res));
        return;
    }
    free(c->upload_id);
    c->upload_id = rn_xstrdup(res->upload_id);
    for (uint32_t i = 0; i < c->nparts; i++)
        free((char *)c->parts[i].etag);
    c->nparts = 0;
    concat_read_next(c);
}

static rn_s3_call *issue_get_piece(s3store_req *r) {
    concat_op *c = (concat_op *)r;
    uint64_t left = c->sizes[c->at] - c->at_off;
    uint64_t room = c->buf_cap - c->buf_len;
    return rn_s3_get(r->st->s3, c->src[c->at], c->at_off, left < room ? left : room,
                     rn_s3_into(c->buf + c->buf_len), s3store_on_answer, r);
}

static rn_s3_call *issue_part_copy(s3store_req *r) {
    concat_op *c = (concat_op *)r;
    return rn_s3_mpu_part_copy(r->st->s3, c->key, c->upload_id, c->nparts + 1, c->src[c->at], 0,
                               c->sizes[c->at], s3store_on_answer, r);
}

static rn_s3_call *issue_part_upload(s3store_req *r) {
    concat_op *c = (concat_op *)r;
    return rn_s3_mpu_part(r->st->s3, c->key, c->upload_id, c->nparts + 1,
                          rn_s3_mem(c->buf, c->buf_len), s3store_on_answer, r);
}

static rn_s3_call *issue_concat_complete(s3store_req *r) {
    concat_op *c = (concat_op *)r;
    return rn_s3_mpu_complete(r->st->s3, c->key, c->upload_id, c->parts, c->nparts,
                              s3store_on_answer, r);
}

static void concat_completed(s3store_req *r, const rn_s3_result *res) {
    concat_op *c = (concat_op *)r;
    int status = s3store_answer_errno(res);
    concat_finish(c, status < 0 ? status : (int64_t)c->total);
}

static void part_done(s3store_req *r, const rn_s3_result *res) {
    concat_op *c = (concat_op *)r;
    if (res->outcome != RN_S3_OK) {
        if (c->copy && res->status == 501 && !c->observed) { /* cannot copy: upload instead */
            c->r.st->no_part_copy = 1;
            s3store_abort_upload(r->st, c->key, c->upload_id);
            free(c->upload_id);
            c->upload_id = NULL;
            concat_begin(c);
            return;
        }
        concat_finish(c, s3store_answer_errno(res));
        return;
    }
    s3store_add_part(&c->parts, &c->nparts, res->etag);
    c->buf_len = 0;
    c->copied = c->copy;
    concat_read_next(c);
}

static void piece_read(s3store_req *r, const rn_s3_result *res) {
    concat_op *c = (concat_op *)r;
    if (res->outcome != RN_S3_OK) {
        concat_finish(c, res->outcome == RN_S3_NOT_FOUND ? -ENOENT : s3store_answer_errno(res));
        return;
    }
    rn_metric.cold_get_bytes += res->length;
    if (res->length == 0) { /* the source shrank under us: objects never change */
        concat_finish(c, -EIO);
        return;
    }
    if (c->observe)
        c->observe(c->observe_arg, c->buf + c->buf_len, res->length);
    c->observed += res->length;
    c->at_off += res->length;
    if (!c->copy) {
        c->buf_len += res->length;
        if (c->at_off == c->sizes[c->at]) {
            c->at++;
            c->at_off = 0;
        }
        if (c->buf_len == c->buf_cap || c->at == c->n) {
            s3store_call(r, RN_COLD_MULTIPART, issue_part_upload, part_done);
            return;
        }
    }
    concat_read_next(c);
}

/* The next step: copy a source (then read its pieces for the observer),
 * or read the next piece to upload, or complete. A source is copied before
 * any of it is observed, so a store that cannot copy is found before the
 * observer saw a byte. */
static void concat_read_next(concat_op *c) {
    for (;;) {
        while (c->at < c->n && c->sizes[c->at] == 0) {
            c->at++; /* an empty source adds nothing */
            c->at_off = 0;
        }
        if (c->at == c->n)
            break;
        if (!c->copy) {
            s3store_call(&c->r, RN_COLD_GET, issue_get_piece, piece_read);
            return;
        }
        if (!c->copied) {
            s3store_call(&c->r, RN_COLD_MULTIPART, issue_part_copy, part_done);
            return;
        }
        if (c->observe && c->at_off < c->sizes[c->at]) {
            s3store_call(&c->r, RN_COLD_GET, issue_get_piece, piece_read);
            return;
        }
        c->at++; /* copied and observed: the next source */
        c->at_off = 0;
        c->copied = 0;
    }
    if (c->nparts == 0) { /* nothing at all: one empty part */
        c->buf_len = 0;
        s3store_call(&c->r, RN_COLD_MULTIPART, issue_part_upload, part_done);
        return;
    }
    s3store_call(&c->r, RN_COLD_MULTIPART, issue_concat_complete, concat_completed);
}

void s3store_concat(rn_store *store, const char *key, const char *const *src, size_t n,
                    uint64_t max_bytes, rn_store_observe_fn observe, void *observe_arg,
                    rn_store_size_fn done, void *arg) {
    s3store *st = (s3store *)store;
    assert(n >= 1);
    if (st->foreign) {
        done(arg, -EPERM);
        return;
    }
    concat_op *c = rn_xcalloc(1, sizeof *c);
    c->r.st = st;
    s3store_full_key(st, key, c->key);
    c->n = n;
    c->src = s3store_full_keys(st, src, n);
    c->sizes = rn_xcalloc(n, sizeof *c->sizes);
    c->max_bytes = max_bytes;
    c->observe = observe;
    c->observe_arg = observe_arg;
    c->done = done;
    c->arg = arg;
    s3store_call(&c->r, RN_COLD_HEAD, issue_head, concat_headed);
}
