/*
 * s3store.c — the S3 store (s3store.h): the operations of store.h as S3
 * calls, with retries, all tries of a call within the bound of one (one
 * timer, the store's clock, for the earliest retry or bound due), the
 * mapping of S3's answers to -errno and the last failure in the store's
 * words, and the cold store's metrics; concat is in s3concat.c, the owner
 * object (claimed at start, checked before every removal) in s3owner.c
 * (s3store_int.h).
 *
 * put: one PutObject, or above part_bytes a multipart upload of parts sent
 * from the caller's memory one after another. open: a ranged GET into an
 * unnamed temporary file (O_TMPFILE under tmp_dir), handed back as the
 * descriptor the caller
 * sends with rn_http_respond_file: memory stays bounded by the client's
 * buffers whatever the range, and a regular file is what the answer path
 * already sends (a pipe would need a second sending path, and a stalled
 * client would stall the GET). list: ListObjectsV2 pages. remove:
 * DeleteObjects by 1,000 keys. sweep: a listing whose pages' old objects
 * are deleted page by page (memory bounded by a page). remove and sweep
 * read the owner object first.
 */
#define _GNU_SOURCE /* O_TMPFILE */
#include "tiers/s3store_int.h"
#include "util/backoff.h"
#include "util/buf.h"
#include "util/clock.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PAGE_KEYS 1000 /* a listing page, a DeleteObjects batch */
#define RETRY_BASE_MS 100
#define RETRY_CAP_MS 2000

static s3store *s3st(rn_store *st) {
    return (s3store *)st;
}

void s3store_full_key(const s3store *st, const char *key, char out[S3STORE_KEY_MAX]) {
    snprintf(out, S3STORE_KEY_MAX, "%s%s", st->prefix, key);
}

/* The full keys of keys[0..n), each allocated. */
char **s3store_full_keys(const s3store *st, const char *const *keys, size_t n) {
    char **out = rn_xcalloc(n, sizeof *out);
    for (size_t i = 0; i < n; i++) {
        out[i] = rn_xmalloc(S3STORE_KEY_MAX);
        s3store_full_key(st, keys[i], out[i]);
    }
    return out;
}

void s3store_free_keys(char **keys, size_t n) {
    for (size_t i = 0; i < n; i++)
        free(keys[i]);
    free(keys);
}

/* -errno of a failed answer (s3store.h). */
int s3store_answer_errno(const rn_s3_result *res) {
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
    return -EPERM;
}

/* ---- calls, retries and their bound ---- */

static void req_start(s3store_req *r);
static void on_clock_cb(uv_timer_t *timer);

static void link_req(s3store_req *r) {
    rn_list_push_front(&r->st->reqs, &r->link);
}

static void unlink_req(s3store_req *r) {
    rn_list_remove(&r->st->reqs, &r->link);
}

static s3store_req *req_of(rn_list_node *n) {
    return n ? rn_list_entry(n, s3store_req, link) : NULL;
}

/* Keeps the store's own words for a failed answer (s3store_why). */
static void note_failure(s3store *st, const rn_s3_result *res) {
    if (res->outcome == RN_S3_OK || res->outcome == RN_S3_NOT_FOUND)
        return;
    if (res->status)
        snprintf(st->why, sizeof st->why, "%s, HTTP %ld", res->code, res->status);
    else
        snprintf(st->why, sizeof st->why, "%s", res->code);
}

/* Answers r's call (off the list first: answered may start another). */
static void req_answer(s3store_req *r, const rn_s3_result *res) {
    unlink_req(r);
    r->running = NULL;
    note_failure(r->st, res);
    r->answered(r, res);
}

/* When r next needs the clock: its retry, or the end of its bound. */
static uint64_t req_due(const s3store_req *r) {
    return r->running || r->due_ms > r->deadline_ms ? r->deadline_ms : r->due_ms;
}

/* Arms the clock for the earliest retry or bound due. */
static void arm_clock(s3store *st) {
    uint64_t first = UINT64_MAX, now = rn_mono_ms();
    for (rn_list_node *n = st->reqs.first; n; n = n->next)
        if (req_due(req_of(n)) < first)
            first = req_due(req_of(n));
    if (first != UINT64_MAX && !st->stopped)
        uv_timer_start(&st->clock, on_clock_cb, first > now ? first - now : 0, 0);
}

/* Every try of a call together ends within its bound: a try still running
 * at the bound is cancelled and the call answers Timeout (-EAGAIN). */
static void on_clock_cb(uv_timer_t *timer) {
    s3store *st = timer->data;
    uint64_t now = rn_mono_ms();
    for (;;) { /* one due call at a time: answering or starting one changes the list */
        s3store_req *due = NULL;
        for (rn_list_node *n = st->reqs.first; n && !due; n = n->next)
            if (req_due(req_of(n)) <= now)
                due = req_of(n);
        if (!due)
            break;
        if (!due->running && due->due_ms < due->deadline_ms) {
            unlink_req(due);
            req_start(due);
            continue;
        }
        if (due->running) {
            rn_s3_cancel(due->running);
            rn_metric.cold_requests[due->metric]++;
            rn_metric.cold_errors[due->metric]++;
        }
        rn_s3_result late = {.outcome = RN_S3_RETRY,
                             .code = "Timeout",
                             .message = "no answer "
                                        "in time"};
        req_answer(due, &late);
    }
    arm_clock(st);
}

void s3store_on_answer(void *arg, const rn_s3_result *res) {
    s3store_req *r = arg;
    s3store *st = r->st;
    uint64_t now = rn_mono_ms();
    rn_metric.cold_requests[r->metric]++;
    rn_metric.cold_us_sum[r->metric] += (uv_hrtime() / 1000) - r->started_us;
    if (res->outcome != RN_S3_OK && res->outcome != RN_S3_NOT_FOUND)
        rn_metric.cold_errors[r->metric]++;
    if (res->outcome == RN_S3_RETRY && r->attempt < st->attempts && !st->stopped) {
        uint64_t due =
            now + rn_backoff_ms(r->attempt, RETRY_BASE_MS, RETRY_CAP_MS, 0.5, rn_backoff_unit());
        if (due < r->deadline_ms) { /* else no time is left for another try */
            r->running = NULL;
            r->due_ms = due;
            note_failure(st, res);
            arm_clock(st);
            return;
        }
    }
    req_answer(r, res);
}

/* Makes r's call (again); a client with no room answers Busy at once, a
 * stopped store Stopped. The first try sets the bound of them all. */
static void req_start(s3store_req *r) {
    r->attempt++;
    r->started_us = (uv_hrtime() / 1000);
    link_req(r);
    r->running = r->st->stopped ? NULL : r->issue(r);
    if (r->running) {
        if (r->attempt == 1) {
            r->deadline_ms = rn_mono_ms() + rn_s3_call_budget_ms(r->running);
            arm_clock(r->st);
        }
        return;
    }
    rn_s3_result fail = {.outcome = RN_S3_RETRY, .code = "Busy", .message = "too many calls"};
    if (r->st->stopped)
        fail = (rn_s3_result){.outcome = RN_S3_FAILED, .code = "Stopped", .message = "stopped"};
    req_answer(r, &fail);
}

/* Starts a fresh call of r (its first try). */
void s3store_call(s3store_req *r, rn_cold_op metric, rn_s3_call *(*issue)(s3store_req *),
                  void (*answered)(s3store_req *, const rn_s3_result *)) {
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
void s3store_add_part(rn_s3_part **parts, uint32_t *n, const char *etag) {
    *parts = rn_xrealloc(*parts, (*n + 1) * sizeof **parts);
    (*parts)[*n] = (rn_s3_part){*n + 1, rn_xstrdup(etag)};
    (*n)++;
}

void s3store_abort_upload(s3store *st, const char *key, const char *upload_id) {
    if (!st->stopped)
        rn_s3_mpu_abort(st->s3, key, upload_id, ignore_answer, NULL);
}

/* ---- put ---- */

typedef struct {
    s3store_req r;
    char key[S3STORE_KEY_MAX];
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
        s3store_abort_upload(p->r.st, p->key, p->upload_id);
    if (status == 0)
        rn_metric.cold_put_bytes += p->len;
    p->done(p->arg, status);
    for (uint32_t i = 0; i < p->nparts; i++)
        free((char *)p->parts[i].etag);
    free(p->parts);
    free(p->upload_id);
    free(p);
}

static rn_s3_call *issue_put(s3store_req *r) {
    put_op *p = (put_op *)r;
    return rn_s3_put(r->st->s3, p->key, rn_s3_mem(p->data, p->len), s3store_on_answer, r);
}

static void put_answered(s3store_req *r, const rn_s3_result *res) {
    put_finish((put_op *)r, s3store_answer_errno(res));
}

static rn_s3_call *issue_put_part(s3store_req *r) {
    put_op *p = (put_op *)r;
    uint64_t off = (uint64_t)p->nparts * r->st->part_bytes;
    uint64_t n = p->len - off < r->st->part_bytes ? p->len - off : r->st->part_bytes;
    return rn_s3_mpu_part(r->st->s3, p->key, p->upload_id, p->nparts + 1,
                          rn_s3_mem(p->data + off, n), s3store_on_answer, r);
}

static rn_s3_call *issue_put_complete(s3store_req *r) {
    put_op *p = (put_op *)r;
    return rn_s3_mpu_complete(r->st->s3, p->key, p->upload_id, p->parts, p->nparts,
                              s3store_on_answer, r);
}

static void put_part_answered(s3store_req *r, const rn_s3_result *res) {
    put_op *p = (put_op *)r;
    if (res->outcome != RN_S3_OK) {
        put_finish(p, s3store_answer_errno(res));
        return;
    }
    s3store_add_part(&p->parts, &p->nparts, res->etag);
    if ((uint64_t)p->nparts * r->st->part_bytes < p->len)
        s3store_call(r, RN_COLD_MULTIPART, issue_put_part, put_part_answered);
    else
        s3store_call(r, RN_COLD_MULTIPART, issue_put_complete, put_answered);
}

static rn_s3_call *issue_put_create(s3store_req *r) {
    return rn_s3_mpu_create(r->st->s3, ((put_op *)r)->key, s3store_on_answer, r);
}

static void put_created(s3store_req *r, const rn_s3_result *res) {
    put_op *p = (put_op *)r;
    if (res->outcome != RN_S3_OK) {
        put_finish(p, s3store_answer_errno(res));
        return;
    }
    p->upload_id = rn_xstrdup(res->upload_id);
    s3store_call(r, RN_COLD_MULTIPART, issue_put_part, put_part_answered);
}

static void s3_put(rn_store *store, const char *key, const void *data, size_t len,
                   rn_store_done_fn done, void *arg) {
    s3store *st = s3st(store);
    if (st->foreign) {
        done(arg, -EPERM);
        return;
    }
    put_op *p = rn_xcalloc(1, sizeof *p);
    p->r.st = st;
    s3store_full_key(st, key, p->key);
    p->data = data;
    p->len = len;
    p->done = done;
    p->arg = arg;
    if (len > st->part_bytes)
        s3store_call(&p->r, RN_COLD_MULTIPART, issue_put_create, put_created);
    else
        s3store_call(&p->r, RN_COLD_PUT, issue_put, put_answered);
}

/* ---- open ---- */

typedef struct {
    s3store_req r;
    char key[S3STORE_KEY_MAX];
    uint64_t off, len;
    int fd;
    rn_store_open_fn done;
    void *arg;
} open_op;

static rn_s3_call *issue_get_range(s3store_req *r) {
    open_op *o = (open_op *)r;
    return rn_s3_get(r->st->s3, o->key, o->off, o->len, rn_s3_to_file(o->fd, 0), s3store_on_answer,
                     r);
}

static void range_read(s3store_req *r, const rn_s3_result *res) {
    open_op *o = (open_op *)r;
    int status = s3store_answer_errno(res);
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
    s3store_full_key(st, key, o->key);
    o->off = off;
    o->len = len;
    o->fd = fd;
    o->done = done;
    o->arg = arg;
    s3store_call(&o->r, RN_COLD_GET, issue_get_range, range_read);
}

/* ---- list, sweep ---- */

typedef struct {
    s3store_req r;
    char prefix[S3STORE_KEY_MAX];
    char *token;
    int any_depth;      /* sweep: every depth */
    int walk;           /* walk: each() sees every depth */
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

static rn_s3_call *issue_list(s3store_req *r) {
    list_op *l = (list_op *)r;
    return rn_s3_list(r->st->s3, l->prefix, l->token, PAGE_KEYS, s3store_on_answer, r);
}

static void page_listed(s3store_req *r, const rn_s3_result *res);

static void list_next_page(list_op *l, const rn_s3_result *res) {
    if (!res->truncated) {
        list_finish(l, l->first_failure);
        return;
    }
    free(l->token);
    l->token = rn_xstrdup(res->next_token);
    s3store_call(&l->r, RN_COLD_LIST, issue_list, page_listed);
}

static rn_s3_call *issue_delete_doomed(s3store_req *r) {
    list_op *l = (list_op *)r;
    return rn_s3_delete_many(r->st->s3, (const char *const *)l->doomed, l->ndoomed,
                             s3store_on_answer, r);
}

static void free_doomed(list_op *l) {
    s3store_free_keys(l->doomed, l->ndoomed);
    l->doomed = NULL;
    l->ndoomed = 0;
}

static void doomed_deleted(s3store_req *r, const rn_s3_result *res);

static void page_listed(s3store_req *r, const rn_s3_result *res) {
    list_op *l = (list_op *)r;
    size_t skip = strlen(r->st->prefix);
    if (res->outcome != RN_S3_OK) {
        list_finish(l, s3store_answer_errno(res));
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
        } else if (l->walk || (*name && !strchr(name, '/'))) {
            l->each(l->arg, e->key + skip, e->size);
        }
    }
    if (l->ndoomed) {
        /* the page's listing goes on after its deletes: keep its token */
        free(l->token);
        l->token = res->truncated ? rn_xstrdup(res->next_token) : NULL;
        s3store_call(r, RN_COLD_DELETE, issue_delete_doomed, doomed_deleted);
        return;
    }
    list_next_page(l, res);
}

static void doomed_deleted(s3store_req *r, const rn_s3_result *res) {
    list_op *l = (list_op *)r;
    int status = s3store_answer_errno(res);
    if (status < 0 && !l->first_failure)
        l->first_failure = status;
    free_doomed(l);
    if (!l->token) {
        list_finish(l, l->first_failure);
        return;
    }
    s3store_call(r, RN_COLD_LIST, issue_list, page_listed);
}

static list_op *list_new(s3store *st, const char *prefix, rn_store_done_fn done, void *arg) {
    list_op *l = rn_xcalloc(1, sizeof *l);
    l->r.st = st;
    s3store_full_key(st, prefix, l->prefix);
    l->done = done;
    l->arg = arg;
    return l;
}

static void s3_list(rn_store *store, const char *prefix, rn_store_entry_fn each,
                    rn_store_done_fn done, void *arg) {
    list_op *l = list_new(s3st(store), prefix, done, arg);
    l->each = each;
    s3store_call(&l->r, RN_COLD_LIST, issue_list, page_listed);
}

static void s3_walk(rn_store *store, const char *prefix, rn_store_entry_fn each,
                    rn_store_done_fn done, void *arg) {
    list_op *l = list_new(s3st(store), prefix, done, arg);
    l->each = each;
    l->walk = 1;
    s3store_call(&l->r, RN_COLD_LIST, issue_list, page_listed);
}

/* A sweep goes on once the owner check passed. */
static void sweep_owned(void *arg, int status) {
    list_op *l = arg;
    if (status < 0)
        list_finish(l, status);
    else
        s3store_call(&l->r, RN_COLD_LIST, issue_list, page_listed);
}

static void s3_sweep(rn_store *store, const char *prefix, int64_t older_than, rn_store_done_fn done,
                     void *arg) {
    list_op *l = list_new(s3st(store), prefix, done, arg);
    l->any_depth = 1;
    l->older_than = older_than;
    s3owner_check(s3st(store), sweep_owned, l);
}

/* ---- remove ---- */

typedef struct {
    s3store_req r;
    char **keys; /* full keys */
    size_t n, at, batch;
    int first_failure;
    rn_store_done_fn done;
    void *arg;
} remove_op;

static void remove_finish(remove_op *m, int status) {
    m->done(m->arg, status);
    s3store_free_keys(m->keys, m->n);
    free(m);
}

static rn_s3_call *issue_remove(s3store_req *r) {
    remove_op *m = (remove_op *)r;
    return rn_s3_delete_many(r->st->s3, (const char *const *)m->keys + m->at, m->batch,
                             s3store_on_answer, r);
}

static void removed(s3store_req *r, const rn_s3_result *res) {
    remove_op *m = (remove_op *)r;
    int status = s3store_answer_errno(res);
    if (status < 0 && !m->first_failure)
        m->first_failure = status;
    m->at += m->batch;
    if (m->at < m->n) {
        m->batch = m->n - m->at < PAGE_KEYS ? m->n - m->at : PAGE_KEYS;
        s3store_call(r, RN_COLD_DELETE, issue_remove, removed);
        return;
    }
    remove_finish(m, m->first_failure);
}

/* A removal goes on once the owner check passed. */
static void remove_owned(void *arg, int status) {
    remove_op *m = arg;
    if (status < 0)
        remove_finish(m, status);
    else
        s3store_call(&m->r, RN_COLD_DELETE, issue_remove, removed);
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
    m->keys = s3store_full_keys(st, keys, n);
    m->n = n;
    m->batch = n < PAGE_KEYS ? n : PAGE_KEYS;
    m->done = done;
    m->arg = arg;
    s3owner_check(st, remove_owned, m);
}

/* ---- lifecycle ---- */

/* Every operation in progress ends with a failure (Stopped), so their
 * callers hear back and nothing leaks. */
static void s3_stop(rn_store *store) {
    s3store *st = s3st(store);
    if (st->stopped)
        return;
    st->stopped = 1;
    uv_close((uv_handle_t *)&st->clock, NULL);
    rn_s3_result stopped = {.outcome = RN_S3_FAILED, .code = "Stopped", .message = "stopped"};
    while (!rn_list_empty(&st->reqs)) {
        s3store_req *r = req_of(st->reqs.first);
        if (r->running)
            rn_s3_cancel(r->running);
        req_answer(r, &stopped);
    }
    rn_s3_stop(st->s3);
}

static size_t s3_why(rn_store *store, char *out, size_t cap) {
    s3store *st = s3st(store);
    snprintf(out, cap, "%s", st->why);
    return strlen(out);
}

static void s3_close(rn_store *store) {
    s3store *st = s3st(store);
    assert(st->stopped && rn_list_empty(&st->reqs)); /* stopped, and the loop ran since */
    rn_s3_free(st->s3);
    free(st->owner);
    free(st->prefix);
    free(st->tmp_dir);
    free(st);
}

static const rn_store_ops s3store_ops = {
    .put = s3_put,
    .concat = s3store_concat,
    .open = s3_open,
    .list = s3_list,
    .walk = s3_walk,
    .remove = s3_remove,
    .sweep = s3_sweep,
    .claim = s3owner_claim,
    .why = s3_why,
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
    if (plen >= 512 || (plen && cfg->prefix[plen - 1] != '/') ||
        cfg->part_bytes < S3STORE_MIN_PART || cfg->attempts < 1 || !cfg->tmp_dir) {
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
    st->owner = cfg->owner ? rn_xstrdup(cfg->owner) : NULL;
    st->tmp_dir = rn_xstrdup(cfg->tmp_dir);
    st->part_bytes = cfg->part_bytes;
    st->attempts = cfg->attempts;
    uv_timer_init(loop, &st->clock);
    st->clock.data = st;
    return &st->base;
}
