/*
 * s3store.c — the S3 store (s3store.h): the operations of store.h as S3
 * calls, with retries, the mapping of S3's answers to -errno, and the
 * cold store's metrics.
 *
 * put: one PutObject, or above part_bytes a multipart upload of parts sent
 * from the caller's memory one after another. concat: HEADs for the sizes
 * and the bound, then each source read by ranged GETs of at most 1 MiB fed
 * to the observer, and copied by the store itself with UploadPartCopy (no
 * byte goes back up); where S3 cannot copy (a source below its 5 MiB least
 * part that is not the last, or a store answering 501 to the copy, which
 * the store then remembers) the bytes read are uploaded as parts of
 * part_bytes instead. open: a ranged GET into an unnamed temporary file
 * (O_TMPFILE under tmp_dir), handed back as the descriptor the caller
 * sends with rn_http_respond_file: memory stays bounded by the client's
 * buffers whatever the range, and a regular file is what the answer path
 * already sends (a pipe would need a second sending path, and a stalled
 * client would stall the GET). list: ListObjectsV2 pages. remove:
 * DeleteObjects by 1,000 keys. sweep: a listing whose pages' old objects
 * are deleted page by page (memory bounded by a page).
 */
#define _GNU_SOURCE /* O_TMPFILE */
#include "tiers/s3store.h"
#include "util/backoff.h"
#include "util/buf.h"
#include "util/clock.h"
#include "util/metrics.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MIN_PART (5ull << 20)      /* S3's least part but the last */
#define MAX_COPY_PART (5ull << 30) /* S3's largest part */
#define READ_PIECE (1u << 20)      /* a concat's GETs for the observer */
#define PAGE_KEYS 1000             /* a listing page, a DeleteObjects batch */
#define RETRY_BASE_MS 100
#define RETRY_CAP_MS 2000
#define FULL_KEY_MAX 1100

typedef struct s3store s3store;
typedef struct req req;

/* One S3 call of an operation, tried again while the answer says it may
 * succeed later. Operations embed it first. */
struct req {
    s3store *st;
    rn_s3_call *(*issue)(req *r); /* makes the call, answering to on_answer */
    void (*answered)(req *r, const rn_s3_result *res);
    rn_cold_op metric;
    uint32_t attempt;
    uint64_t started_us, due_ms;
    rn_s3_call *running; /* the call made, or NULL while waiting to retry */
    req *prev, *next;    /* the store's operations in progress */
};

struct s3store {
    rn_store base;
    uv_loop_t *loop;
    rn_s3 *s3;
    char *prefix, *tmp_dir;
    uint64_t part_bytes;
    uint32_t attempts;
    int no_part_copy; /* the store answered 501 to UploadPartCopy */
    uv_timer_t retry_timer;
    req *reqs; /* every operation in progress, running or waiting to retry */
    int stopped;
};

static s3store *s3st(rn_store *st) {
    return (s3store *)st;
}

static void full_key(const s3store *st, const char *key, char out[FULL_KEY_MAX]) {
    snprintf(out, FULL_KEY_MAX, "%s%s", st->prefix, key);
}

/* The full keys of keys[0..n), each allocated. */
static char **full_keys(const s3store *st, const char *const *keys, size_t n) {
    char **out = rn_xcalloc(n, sizeof *out);
    for (size_t i = 0; i < n; i++) {
        out[i] = rn_xmalloc(FULL_KEY_MAX);
        full_key(st, keys[i], out[i]);
    }
    return out;
}

static void free_keys(char **keys, size_t n) {
    for (size_t i = 0; i < n; i++)
        free(keys[i]);
    free(keys);
}

/* -errno of a failed answer (s3store.h). */
static int answer_errno(const rn_s3_result *res) {
    switch (res->outcome) {
    case RN_S3_OK:
        return 0;
    case RN_S3_NOT_FOUND:
        return -ENOENT;
    case RN_S3_RETRY:
        if (res->status == 503 || res->status == 429 || strcmp(res->code, "Timeout") == 0 ||
            strcmp(res->code, "SlowDown") == 0 || strcmp(res->code, "Busy") == 0)
            return -EAGAIN;
        return -EIO;
    case RN_S3_FAILED:
        break;
    }
    return -EIO;
}

/* ---- calls and retries ---- */

static void req_start(req *r);
static void on_retry_timer_cb(uv_timer_t *timer);

static void link_req(req *r) {
    s3store *st = r->st;
    r->prev = NULL;
    r->next = st->reqs;
    if (st->reqs)
        st->reqs->prev = r;
    st->reqs = r;
}

static void unlink_req(req *r) {
    if (r->prev)
        r->prev->next = r->next;
    else
        r->st->reqs = r->next;
    if (r->next)
        r->next->prev = r->prev;
}

/* Answers r's call (off the list first: answered may start another). */
static void req_answer(req *r, const rn_s3_result *res) {
    unlink_req(r);
    r->running = NULL;
    r->answered(r, res);
}

/* Arms the timer for the earliest retry due. */
static void arm_retry_timer(s3store *st) {
    uint64_t first = UINT64_MAX, now = rn_mono_ms();
    for (const req *r = st->reqs; r; r = r->next)
        if (!r->running && r->due_ms < first)
            first = r->due_ms;
    if (first != UINT64_MAX && !st->stopped)
        uv_timer_start(&st->retry_timer, on_retry_timer_cb, first > now ? first - now : 0, 0);
}

static void on_retry_timer_cb(uv_timer_t *timer) {
    s3store *st = timer->data;
    uint64_t now = rn_mono_ms();
    for (;;) { /* one due retry at a time: starting one changes the list */
        req *due = NULL;
        for (req *r = st->reqs; r && !due; r = r->next)
            if (!r->running && r->due_ms <= now)
                due = r;
        if (!due)
            break;
        unlink_req(due);
        req_start(due);
    }
    arm_retry_timer(st);
}

static void on_answer(void *arg, const rn_s3_result *res) {
    req *r = arg;
    s3store *st = r->st;
    rn_metric.cold_requests[r->metric]++;
    rn_metric.cold_us_sum[r->metric] += (uv_hrtime() / 1000) - r->started_us;
    if (res->outcome != RN_S3_OK && res->outcome != RN_S3_NOT_FOUND)
        rn_metric.cold_errors[r->metric]++;
    if (res->outcome == RN_S3_RETRY && r->attempt < st->attempts && !st->stopped) {
        r->running = NULL;
        r->due_ms = rn_mono_ms() +
                    rn_backoff_ms(r->attempt, RETRY_BASE_MS, RETRY_CAP_MS, 0.5, rn_backoff_unit());
        arm_retry_timer(st);
        return;
    }
    req_answer(r, res);
}

/* Makes r's call (again); a client with no room answers Busy at once, a
 * stopped store Stopped. */
static void req_start(req *r) {
    r->attempt++;
    r->started_us = (uv_hrtime() / 1000);
    link_req(r);
    r->running = r->st->stopped ? NULL : r->issue(r);
    if (r->running)
        return;
    rn_s3_result fail = {.outcome = RN_S3_RETRY, .code = "Busy", .message = "too many calls"};
    if (r->st->stopped)
        fail = (rn_s3_result){.outcome = RN_S3_FAILED, .code = "Stopped", .message = "stopped"};
    req_answer(r, &fail);
}

/* Starts a fresh call of r (its first try). */
static void call(req *r, rn_cold_op metric, rn_s3_call *(*issue)(req *),
                 void (*answered)(req *, const rn_s3_result *)) {
    r->metric = metric;
    r->issue = issue;
    r->answered = answered;
    r->attempt = 0;
    req_start(r);
}

static void ignore_answer(void *arg, const rn_s3_result *res) {
    (void)arg;
    (void)res;
}

/* Best effort: S3's lifecycle rules reclaim uploads never aborted. */
static void abort_upload(s3store *st, const char *key, const char *upload_id) {
    if (!st->stopped)
        rn_s3_mpu_abort(st->s3, key, upload_id, ignore_answer, NULL);
}

/* ---- put ---- */

typedef struct {
    req r;
    char key[FULL_KEY_MAX];
    const uint8_t *data;
    size_t len;
    char *upload_id;
    rn_s3_part *parts;
    uint32_t nparts;
    rn_store_done_fn done;
    void *arg;
} put_op;

static void put_finish(put_op *p, int status) {
    if (p->upload_id && status < 0)
        abort_upload(p->r.st, p->key, p->upload_id);
    if (status == 0)
        rn_metric.cold_put_bytes += p->len;
    p->done(p->arg, status);
    for (uint32_t i = 0; i < p->nparts; i++)
        free((char *)p->parts[i].etag);
    free(p->parts);
    free(p->upload_id);
    free(p);
}

static rn_s3_call *issue_put(req *r) {
    put_op *p = (put_op *)r;
    return rn_s3_put(r->st->s3, p->key, rn_s3_mem(p->data, p->len), on_answer, r);
}

static void put_answered(req *r, const rn_s3_result *res) {
    put_finish((put_op *)r, answer_errno(res));
}

static rn_s3_call *issue_put_part(req *r) {
    put_op *p = (put_op *)r;
    uint64_t off = (uint64_t)p->nparts * r->st->part_bytes;
    uint64_t n = p->len - off < r->st->part_bytes ? p->len - off : r->st->part_bytes;
    return rn_s3_mpu_part(r->st->s3, p->key, p->upload_id, p->nparts + 1,
                          rn_s3_mem(p->data + off, n), on_answer, r);
}

static rn_s3_call *issue_put_complete(req *r) {
    put_op *p = (put_op *)r;
    return rn_s3_mpu_complete(r->st->s3, p->key, p->upload_id, p->parts, p->nparts, on_answer, r);
}

static void put_part_answered(req *r, const rn_s3_result *res) {
    put_op *p = (put_op *)r;
    if (res->outcome != RN_S3_OK) {
        put_finish(p, answer_errno(res));
        return;
    }
    p->parts = rn_xrealloc(p->parts, (p->nparts + 1) * sizeof *p->parts);
    p->parts[p->nparts] = (rn_s3_part){p->nparts + 1, rn_xstrdup(res->etag)};
    p->nparts++;
    if ((uint64_t)p->nparts * r->st->part_bytes < p->len)
        call(r, RN_COLD_MULTIPART, issue_put_part, put_part_answered);
    else
        call(r, RN_COLD_MULTIPART, issue_put_complete, put_answered);
}

static rn_s3_call *issue_put_create(req *r) {
    return rn_s3_mpu_create(r->st->s3, ((put_op *)r)->key, on_answer, r);
}

static void put_created(req *r, const rn_s3_result *res) {
    put_op *p = (put_op *)r;
    if (res->outcome != RN_S3_OK) {
        put_finish(p, answer_errno(res));
        return;
    }
    p->upload_id = rn_xstrdup(res->upload_id);
    call(r, RN_COLD_MULTIPART, issue_put_part, put_part_answered);
}

static void s3_put(rn_store *store, const char *key, const void *data, size_t len,
                   rn_store_done_fn done, void *arg) {
    s3store *st = s3st(store);
    put_op *p = rn_xcalloc(1, sizeof *p);
    p->r.st = st;
    full_key(st, key, p->key);
    p->data = data;
    p->len = len;
    p->done = done;
    p->arg = arg;
    if (len > st->part_bytes)
        call(&p->r, RN_COLD_MULTIPART, issue_put_create, put_created);
    else
        call(&p->r, RN_COLD_PUT, issue_put, put_answered);
}

/* ---- concat ---- */

typedef struct {
    req r;
    char key[FULL_KEY_MAX];
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
    free_keys(c->src, c->n);
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
        abort_upload(c->r.st, c->key, c->upload_id);
    c->done(c->arg, result);
    concat_free(c);
}

static rn_s3_call *issue_head(req *r) {
    concat_op *c = (concat_op *)r;
    return rn_s3_head(r->st->s3, c->src[c->at], on_answer, r);
}

static rn_s3_call *issue_concat_create(req *r) {
    return rn_s3_mpu_create(r->st->s3, ((concat_op *)r)->key, on_answer, r);
}

static void concat_read_next(concat_op *c);
static void concat_created(req *r, const rn_s3_result *res);

/* Whether S3 can copy the sources as they are (every one but the last at
 * least its least part, none above its largest). */
static int copyable(const concat_op *c) {
    if (c->r.st->no_part_copy)
        return 0;
    for (size_t i = 0; i < c->n; i++)
        if ((i + 1 < c->n && c->sizes[i] < MIN_PART) || c->sizes[i] > MAX_COPY_PART)
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
    call(&c->r, RN_COLD_MULTIPART, issue_concat_create, concat_created);
}

static void concat_headed(req *r, const rn_s3_result *res) {
    concat_op *c = (concat_op *)r;
    if (res->outcome != RN_S3_OK) {
        concat_finish(c, answer_errno(res));
        return;
    }
    c->sizes[c->at] = res->object_size;
    c->total += res->object_size;
    if (++c->at < c->n) {
        call(r, RN_COLD_HEAD, issue_head, concat_headed);
        return;
    }
    if (c->total > c->max_bytes) {
        concat_finish(c, -EFBIG);
        return;
    }
    concat_begin(c);
}

static void concat_created(req *r, const rn_s3_result *res) {
    concat_op *c = (concat_op *)r;
    if (res->outcome != RN_S3_OK) {
        concat_finish(c, answer_errno(res));
        return;
    }
    free(c->upload_id);
    c->upload_id = rn_xstrdup(res->upload_id);
    for (uint32_t i = 0; i < c->nparts; i++)
        free((char *)c->parts[i].etag);
    c->nparts = 0;
    concat_read_next(c);
}

static rn_s3_call *issue_get_piece(req *r) {
    concat_op *c = (concat_op *)r;
    uint64_t left = c->sizes[c->at] - c->at_off;
    uint64_t room = c->buf_cap - c->buf_len;
    return rn_s3_get(r->st->s3, c->src[c->at], c->at_off, left < room ? left : room,
                     rn_s3_into(c->buf + c->buf_len), on_answer, r);
}

static rn_s3_call *issue_part_copy(req *r) {
    concat_op *c = (concat_op *)r;
    return rn_s3_mpu_part_copy(r->st->s3, c->key, c->upload_id, c->nparts + 1, c->src[c->at], 0,
                               c->sizes[c->at], on_answer, r);
}

static rn_s3_call *issue_part_upload(req *r) {
    concat_op *c = (concat_op *)r;
    return rn_s3_mpu_part(r->st->s3, c->key, c->upload_id, c->nparts + 1,
                          rn_s3_mem(c->buf, c->buf_len), on_answer, r);
}

static rn_s3_call *issue_concat_complete(req *r) {
    concat_op *c = (concat_op *)r;
    return rn_s3_mpu_complete(r->st->s3, c->key, c->upload_id, c->parts, c->nparts, on_answer, r);
}

static void concat_completed(req *r, const rn_s3_result *res) {
    concat_op *c = (concat_op *)r;
    int status = answer_errno(res);
    concat_finish(c, status < 0 ? status : (int64_t)c->total);
}

static void add_concat_part(concat_op *c, const char *etag) {
    c->parts = rn_xrealloc(c->parts, (c->nparts + 1) * sizeof *c->parts);
    c->parts[c->nparts] = (rn_s3_part){c->nparts + 1, rn_xstrdup(etag)};
    c->nparts++;
}

static void part_done(req *r, const rn_s3_result *res) {
    concat_op *c = (concat_op *)r;
    if (res->outcome != RN_S3_OK) {
        if (c->copy && res->status == 501 && !c->observed) { /* cannot copy: upload instead */
            c->r.st->no_part_copy = 1;
            abort_upload(r->st, c->key, c->upload_id);
            free(c->upload_id);
            c->upload_id = NULL;
            concat_begin(c);
            return;
        }
        concat_finish(c, answer_errno(res));
        return;
    }
    add_concat_part(c, res->etag);
    c->buf_len = 0;
    c->copied = c->copy;
    concat_read_next(c);
}

static void piece_read(req *r, const rn_s3_result *res) {
    concat_op *c = (concat_op *)r;
    if (res->outcome != RN_S3_OK) {
        concat_finish(c, res->outcome == RN_S3_NOT_FOUND ? -ENOENT : answer_errno(res));
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
            call(r, RN_COLD_MULTIPART, issue_part_upload, part_done);
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
            call(&c->r, RN_COLD_GET, issue_get_piece, piece_read);
            return;
        }
        if (!c->copied) {
            call(&c->r, RN_COLD_MULTIPART, issue_part_copy, part_done);
            return;
        }
        if (c->observe && c->at_off < c->sizes[c->at]) {
            call(&c->r, RN_COLD_GET, issue_get_piece, piece_read);
            return;
        }
        c->at++; /* copied and observed: the next source */
        c->at_off = 0;
        c->copied = 0;
    }
    if (c->nparts == 0) { /* nothing at all: one empty part */
        c->buf_len = 0;
        call(&c->r, RN_COLD_MULTIPART, issue_part_upload, part_done);
        return;
    }
    call(&c->r, RN_COLD_MULTIPART, issue_concat_complete, concat_completed);
}

static void s3_concat(rn_store *store, const char *key, const char *const *src, size_t n,
                      uint64_t max_bytes, rn_store_observe_fn observe, void *observe_arg,
                      rn_store_size_fn done, void *arg) {
    s3store *st = s3st(store);
    assert(n >= 1);
    concat_op *c = rn_xcalloc(1, sizeof *c);
    c->r.st = st;
    full_key(st, key, c->key);
    c->n = n;
    c->src = full_keys(st, src, n);
    c->sizes = rn_xcalloc(n, sizeof *c->sizes);
    c->max_bytes = max_bytes;
    c->observe = observe;
    c->observe_arg = observe_arg;
    c->done = done;
    c->arg = arg;
    call(&c->r, RN_COLD_HEAD, issue_head, concat_headed);
}

/* ---- open ---- */

typedef struct {
    req r;
    char key[FULL_KEY_MAX];
    uint64_t off, len;
    int fd;
    rn_store_open_fn done;
    void *arg;
} open_op;

static rn_s3_call *issue_get_range(req *r) {
    open_op *o = (open_op *)r;
    return rn_s3_get(r->st->s3, o->key, o->off, o->len, rn_s3_to_file(o->fd, 0), on_answer, r);
}

static void range_read(req *r, const rn_s3_result *res) {
    open_op *o = (open_op *)r;
    int status = answer_errno(res);
    if (status == 0)
        rn_metric.cold_get_bytes += res->length;
    if (status < 0) {
        close(o->fd);
        o->done(o->arg, status, 0);
    } else {
        o->done(o->arg, o->fd, 0);
    }
    free(o);
}

static void s3_open(rn_store *store, const char *key, uint64_t off, uint64_t len,
                    rn_store_open_fn done, void *arg) {
    s3store *st = s3st(store);
    int fd = open(st->tmp_dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (fd < 0 || len == 0) {
        done(arg, fd < 0 ? -errno : fd, 0);
        return;
    }
    open_op *o = rn_xcalloc(1, sizeof *o);
    o->r.st = st;
    full_key(st, key, o->key);
    o->off = off;
    o->len = len;
    o->fd = fd;
    o->done = done;
    o->arg = arg;
    call(&o->r, RN_COLD_GET, issue_get_range, range_read);
}

/* ---- list, sweep ---- */

typedef struct {
    req r;
    char prefix[FULL_KEY_MAX];
    char *token;
    int any_depth;      /* sweep: every depth */
    int all_depths;     /* list_all: entries at every depth */
    int64_t older_than; /* sweep: Unix seconds */
    char **doomed;      /* sweep: this page's old keys */
    size_t ndoomed;
    int first_failure;
    rn_store_entry_fn each;
    rn_store_done_fn done;
    void *arg;
} list_op;

static void list_finish(list_op *l, int status) {
    l->done(l->arg, status);
    free(l->token);
    free(l);
}

static rn_s3_call *issue_list(req *r) {
    list_op *l = (list_op *)r;
    return rn_s3_list(r->st->s3, l->prefix, l->token, PAGE_KEYS, on_answer, r);
}

static void page_listed(req *r, const rn_s3_result *res);

static void list_next_page(list_op *l, const rn_s3_result *res) {
    if (!res->truncated) {
        list_finish(l, l->first_failure);
        return;
    }
    free(l->token);
    l->token = rn_xstrdup(res->next_token);
    call(&l->r, RN_COLD_LIST, issue_list, page_listed);
}

static rn_s3_call *issue_delete_doomed(req *r) {
    list_op *l = (list_op *)r;
    return rn_s3_delete_many(r->st->s3, (const char *const *)l->doomed, l->ndoomed, on_answer, r);
}

static void free_doomed(list_op *l) {
    free_keys(l->doomed, l->ndoomed);
    l->doomed = NULL;
    l->ndoomed = 0;
}

static void doomed_deleted(req *r, const rn_s3_result *res);

static void page_listed(req *r, const rn_s3_result *res) {
    list_op *l = (list_op *)r;
    size_t skip = strlen(r->st->prefix);
    if (res->outcome != RN_S3_OK) {
        list_finish(l, answer_errno(res));
        return;
    }
    for (size_t i = 0; i < res->nentries; i++) {
        const rn_s3_entry *e = &res->entries[i];
        const char *name = e->key + strlen(l->prefix);
        if (l->any_depth) {
            if (e->last_modified_ms >= 0 && e->last_modified_ms / 1000 < l->older_than) {
                l->doomed = rn_xrealloc(l->doomed, (l->ndoomed + 1) * sizeof *l->doomed);
                l->doomed[l->ndoomed++] = rn_xstrdup(e->key);
            }
        } else if (*name && (l->all_depths || !strchr(name, '/'))) {
            l->each(l->arg, e->key + skip, e->size);
        }
    }
    if (l->ndoomed) {
        /* the page's listing goes on after its deletes: keep its token */
        free(l->token);
        l->token = res->truncated ? rn_xstrdup(res->next_token) : NULL;
        call(r, RN_COLD_DELETE, issue_delete_doomed, doomed_deleted);
        return;
    }
    list_next_page(l, res);
}

static void doomed_deleted(req *r, const rn_s3_result *res) {
    list_op *l = (list_op *)r;
    int status = answer_errno(res);
    if (status < 0 && !l->first_failure)
        l->first_failure = status;
    free_doomed(l);
    if (!l->token) {
        list_finish(l, l->first_failure);
        return;
    }
    call(r, RN_COLD_LIST, issue_list, page_listed);
}

static list_op *list_new(s3store *st, const char *prefix, rn_store_done_fn done, void *arg) {
    list_op *l = rn_xcalloc(1, sizeof *l);
    l->r.st = st;
    full_key(st, prefix, l->prefix);
    l->done = done;
    l->arg = arg;
    return l;
}

static void s3_list(rn_store *store, const char *prefix, rn_store_entry_fn each,
                    rn_store_done_fn done, void *arg) {
    list_op *l = list_new(s3st(store), prefix, done, arg);
    l->each = each;
    call(&l->r, RN_COLD_LIST, issue_list, page_listed);
}

static void s3_list_all(rn_store *store, const char *prefix, rn_store_entry_fn each,
                        rn_store_done_fn done, void *arg) {
    list_op *l = list_new(s3st(store), prefix, done, arg);
    l->each = each;
    l->all_depths = 1;
    call(&l->r, RN_COLD_LIST, issue_list, page_listed);
}

static void s3_sweep(rn_store *store, const char *prefix, int64_t older_than, rn_store_done_fn done,
                     void *arg) {
    list_op *l = list_new(s3st(store), prefix, done, arg);
    l->any_depth = 1;
    l->older_than = older_than;
    call(&l->r, RN_COLD_LIST, issue_list, page_listed);
}

/* ---- remove ---- */

typedef struct {
    req r;
    char **keys; /* full keys */
    size_t n, at, batch;
    int first_failure;
    rn_store_done_fn done;
    void *arg;
} remove_op;

static rn_s3_call *issue_remove(req *r) {
    remove_op *m = (remove_op *)r;
    return rn_s3_delete_many(r->st->s3, (const char *const *)m->keys + m->at, m->batch, on_answer,
                             r);
}

static void removed(req *r, const rn_s3_result *res) {
    remove_op *m = (remove_op *)r;
    int status = answer_errno(res);
    if (status < 0 && !m->first_failure)
        m->first_failure = status;
    m->at += m->batch;
    if (m->at < m->n) {
        m->batch = m->n - m->at < PAGE_KEYS ? m->n - m->at : PAGE_KEYS;
        call(r, RN_COLD_DELETE, issue_remove, removed);
        return;
    }
    m->done(m->arg, m->first_failure);
    free_keys(m->keys, m->n);
    free(m);
}

static void s3_remove(rn_store *store, const char *const *keys, size_t n, rn_store_done_fn done,
                      void *arg) {
    s3store *st = s3st(store);
    if (n == 0) {
        done(arg, 0);
        return;
    }
    remove_op *m = rn_xcalloc(1, sizeof *m);
    m->r.st = st;
    m->keys = full_keys(st, keys, n);
    m->n = n;
    m->batch = n < PAGE_KEYS ? n : PAGE_KEYS;
    m->done = done;
    m->arg = arg;
    call(&m->r, RN_COLD_DELETE, issue_remove, removed);
}

/* ---- lifecycle ---- */

/* Every operation in progress ends with a failure (Stopped), so their
 * callers hear back and nothing leaks. */
static void s3_stop(rn_store *store) {
    s3store *st = s3st(store);
    if (st->stopped)
        return;
    st->stopped = 1;
    uv_close((uv_handle_t *)&st->retry_timer, NULL);
    rn_s3_result stopped = {.outcome = RN_S3_FAILED, .code = "Stopped", .message = "stopped"};
    while (st->reqs) {
        req *r = st->reqs;
        if (r->running)
            rn_s3_cancel(r->running);
        req_answer(r, &stopped);
    }
    rn_s3_stop(st->s3);
}

static void s3_close(rn_store *store) {
    s3store *st = s3st(store);
    assert(st->stopped && !st->reqs); /* stopped, and the loop ran since */
    rn_s3_free(st->s3);
    free(st->prefix);
    free(st->tmp_dir);
    free(st);
}

static const rn_store_ops s3store_ops = {
    .put = s3_put,
    .concat = s3_concat,
    .open = s3_open,
    .list = s3_list,
    .list_all = s3_list_all,
    .remove = s3_remove,
    .sweep = s3_sweep,
    .stop = s3_stop,
    .close = s3_close,
};

void rn_s3store_config_defaults(rn_s3store_config *cfg) {
    memset(cfg, 0, sizeof *cfg);
    rn_s3_config_defaults(&cfg->s3);
    cfg->prefix = "";
    cfg->part_bytes = 8ull << 20;
    cfg->attempts = 4;
}

rn_store *rn_s3store_open(uv_loop_t *loop, const rn_s3store_config *cfg, char *err, size_t errcap) {
    size_t plen = strlen(cfg->prefix);
    if (plen >= 512 || (plen && cfg->prefix[plen - 1] != '/') || cfg->part_bytes < MIN_PART ||
        cfg->attempts < 1 || !cfg->tmp_dir) {
        snprintf(err, errcap, "the S3 prefix must be empty or end in \"/\" (at most 511 bytes)");
        return NULL;
    }
    int probe = open(cfg->tmp_dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (probe < 0) {
        snprintf(err, errcap, "cannot make temporary files in %s: %s", cfg->tmp_dir,
                 strerror(errno));
        return NULL;
    }
    close(probe);
    rn_s3 *s3 = rn_s3_new(loop, &cfg->s3, err, errcap);
    if (!s3)
        return NULL;
    s3store *st = rn_xcalloc(1, sizeof *st);
    st->base.ops = &s3store_ops;
    st->base.network = 1;
    st->loop = loop;
    st->s3 = s3;
    st->prefix = rn_xstrdup(cfg->prefix);
    st->tmp_dir = rn_xstrdup(cfg->tmp_dir);
    st->part_bytes = cfg->part_bytes;
    st->attempts = cfg->attempts;
    uv_timer_init(loop, &st->retry_timer);
    st->retry_timer.data = st;
    return &st->base;
}
