/*
 * localdir.c — the local-directory store: the store operations of store.h
 * over the files of blobs.c. What moves bytes (put, concat) or many objects
 * (removing more than one) runs on the loop's worker pool; what costs a
 * system call or two (open, list, removing one object, the sweep's walk) is
 * done at once on the calling thread, as a directory listing on the loop has
 * always been. Removing one object is therefore safe on the recovery thread
 * (store.h).
 */
#include "tiers/blobs.h"
#include "tiers/store.h"
#include "util/buf.h"
#include "util/fault.h"

#include <assert.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

typedef struct {
    rn_store base;
    uv_loop_t *loop;
    uv_thread_t loop_thread;
    rn_blobs *files;
} localdir;

/* One operation on a worker thread. */
typedef struct job {
    uv_work_t work;
    localdir *ld;
    void (*run)(struct job *);
    const char *key;
    const void *data;
    size_t len;
    const char *const *keys;
    size_t n;
    uint64_t max_bytes;
    rn_store_observe_fn observe;
    void *observe_arg;
    int64_t result; /* 0, a size, or -errno */
    rn_store_done_fn done;
    rn_store_size_fn done_size;
    void *arg;
} job;

static localdir *local(rn_store *st) {
    return (localdir *)st;
}

static void job_work(uv_work_t *w) {
    job *j = w->data;
    j->run(j);
}

static void job_done(uv_work_t *w, int status) {
    job *j = w->data;
    int64_t result = status < 0 ? status : j->result;
    if (j->done_size)
        j->done_size(j->arg, result);
    else
        j->done(j->arg, (int)result);
    free(j);
}

static inline int on_loop_thread(const localdir *ld) {
    uv_thread_t self = uv_thread_self();
    return uv_thread_equal(&ld->loop_thread, &self);
}

/* Runs j on a worker; only the loop thread may queue work. */
static void queue(localdir *ld, job *j) {
    assert(on_loop_thread(ld));
    j->ld = ld;
    j->work.data = j;
    uv_queue_work(ld->loop, &j->work, job_work, job_done);
}

static job *job_new(void (*run)(job *), void *arg) {
    job *j = rn_xcalloc(1, sizeof *j);
    j->run = run;
    j->arg = arg;
    return j;
}

/* ---- put ---- */

static void run_put(job *j) {
    j->result = rn_blobs_put(j->ld->files, j->key, j->data, j->len);
}

static void local_put(rn_store *st, const char *key, const void *data, size_t len,
                      rn_store_done_fn done, void *arg) {
    job *j = job_new(run_put, arg);
    j->key = key;
    j->data = data;
    j->len = len;
    j->done = done;
    queue(local(st), j);
}

/* ---- concat ---- */

static void run_concat(job *j) {
    if (rn_fault_fail("copy-stall"))
        sleep(2); /* a slow copy (test hooks): this worker only */
    uint64_t total = 0;
    for (size_t i = 0; i < j->n; i++) {
        int64_t size = rn_blobs_size(j->ld->files, j->keys[i]);
        if (size < 0) {
            j->result = size == -EISDIR ? -ENOENT : size;
            return;
        }
        total += (uint64_t)size;
    }
    if (total > j->max_bytes) {
        j->result = -EFBIG;
        return;
    }
    int rc = rn_blobs_concat(j->ld->files, j->key, j->keys, j->n, j->observe, j->observe_arg);
    j->result = rc < 0 ? rc : (int64_t)total;
}

static void local_concat(rn_store *st, const char *key, const char *const *src, size_t n,
                         uint64_t max_bytes, rn_store_observe_fn observe, void *observe_arg,
                         rn_store_size_fn done, void *arg) {
    job *j = job_new(run_concat, arg);
    j->key = key;
    j->keys = src;
    j->n = n;
    j->max_bytes = max_bytes;
    j->observe = observe;
    j->observe_arg = observe_arg;
    j->done_size = done;
    queue(local(st), j);
}

/* ---- open, list ---- */

static void local_open(rn_store *st, const char *key, uint64_t off, uint64_t len,
                       rn_store_open_fn done, void *arg) {
    (void)len; /* the file holds the whole object */
    int fd = rn_blobs_open_read(local(st)->files, key);
    done(arg, fd, fd < 0 ? 0 : off);
}

typedef struct {
    rn_blobs *files;
    rn_store_entry_fn each;
    void *arg;
} listing;

static int list_one(const char *key, void *arg) {
    listing *l = arg;
    int64_t size = rn_blobs_size(l->files, key);
    if (size >= 0) /* directories and files gone meanwhile are no objects */
        l->each(l->arg, key, (uint64_t)size);
    return 0;
}

static void local_list(rn_store *st, const char *prefix, rn_store_entry_fn each,
                       rn_store_done_fn done, void *arg) {
    listing l = {local(st)->files, each, arg};
    done(arg, rn_blobs_list(l.files, prefix, list_one, &l));
}

static void local_walk(rn_store *st, const char *prefix, rn_store_entry_fn each,
                       rn_store_done_fn done, void *arg) {
    done(arg, rn_blobs_walk(local(st)->files, prefix, each, arg));
}

/* ---- remove, sweep ---- */

static int remove_all(rn_blobs *files, const char *const *keys, size_t n) {
    int first = 0;
    for (size_t i = 0; i < n; i++) {
        int rc = rn_blobs_delete(files, keys[i]);
        if (rc < 0 && first == 0)
            first = rc;
    }
    return first;
}

static void run_remove(job *j) {
    j->result = remove_all(j->ld->files, j->keys, j->n);
}

static void local_remove(rn_store *st, const char *const *keys, size_t n, rn_store_done_fn done,
                         void *arg) {
    if (n <= 1) { /* one unlink costs less than the trip to a worker */
        done(arg, remove_all(local(st)->files, keys, n));
        return;
    }
    job *j = job_new(run_remove, arg);
    j->keys = keys;
    j->n = n;
    j->done = done;
    queue(local(st), j);
}

static void local_sweep(rn_store *st, const char *prefix, int64_t older_than, rn_store_done_fn done,
                        void *arg) {
    long removed = rn_blobs_sweep(local(st)->files, prefix, older_than);
    done(arg, removed < 0 ? (int)removed : 0);
}

static void local_close(rn_store *st) {
    rn_blobs_close(local(st)->files);
    free(st);
}

static const rn_store_ops localdir_ops = {
    .put = local_put,
    .concat = local_concat,
    .open = local_open,
    .list = local_list,
    .walk = local_walk,
    .remove = local_remove,
    .sweep = local_sweep,
    .close = local_close,
};

rn_store *rn_localdir_open(uv_loop_t *loop, const char *dir) {
    rn_blobs *files = rn_blobs_open(dir);
    if (!files)
        return NULL;
    localdir *ld = rn_xcalloc(1, sizeof *ld);
    ld->base.ops = &localdir_ops;
    ld->loop = loop;
    ld->loop_thread = uv_thread_self();
    ld->files = files;
    return &ld->base;
}

struct rn_blobs *rn_localdir_files(rn_store *st) {
    return st->ops == &localdir_ops ? local(st)->files : NULL;
}
