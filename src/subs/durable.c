/*
 * durable.c — atomic whole-file rewrites with group commit. See durable.h.
 *
 * At most one write job is in flight. The timer defers a write to the next
 * loop iteration (so a handler that makes several changes is serialized
 * once, after it returned) and, after a failed write, retries a second
 * later. Waiters form a FIFO whose `need` never decreases, so answering
 * them is a walk from the head.
 */
#include "subs/durable.h"
#include "util/files.h"
#include "util/log.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define RETRY_MS 1000

struct rn_durable {
    uv_loop_t *loop;
    char *dir, *name;
    void (*encode)(void *arg, rn_buf *out);
    void (*written)(void *arg);
    void *arg;
    rn_durable_sink sink; /* NULL: the file */
    void *sink_arg;
    uv_timer_t timer;
    uint64_t seq, synced;
    int writing, stopped;
    rn_list waiters; /* rn_durable_waiter.node, oldest first */
};

typedef struct {
    uv_work_t req;
    rn_durable *d;
    rn_buf data;
    uint64_t covers;
    int status;
} write_job;

/* Answers the waiters whose changes are covered by a write up to `upto`. */
static void answer_waiters(rn_durable *d, uint64_t upto, int status) {
    while (!rn_list_empty(&d->waiters)) {
        rn_durable_waiter *w = rn_list_entry(d->waiters.first, rn_durable_waiter, node);
        if (w->need > upto)
            break;
        rn_list_remove(&d->waiters, &w->node);
        w->fn(w, status);
    }
}

static void on_timer(uv_timer_t *t);

static void schedule(rn_durable *d, uint64_t delay_ms) {
    if (!d->stopped && !d->writing && d->synced < d->seq)
        uv_timer_start(&d->timer, on_timer, delay_ms, 0);
}

static void write_work(uv_work_t *req) {
    write_job *job = req->data;
    job->status =
        rn_atomic_write_file(job->d->dir, job->d->name, job->data.data, job->data.len, 0600);
}

static void job_done(void *arg, int status) {
    write_job *job = arg;
    rn_durable *d = job->d;
    uint64_t covers = job->covers;
    rn_buf_free(&job->data);
    free(job);
    d->writing = 0;
    if (status == 0) {
        if (covers > d->synced)
            d->synced = covers;
        if (d->written)
            d->written(d->arg);
        answer_waiters(d, covers, 0);
        schedule(d, 0);
    } else {
        rn_log(RN_LOG_ERROR, "state_write_failed", "writing %s/%s failed: %s; retrying in 1 s",
               d->dir, d->name, strerror(-status));
        answer_waiters(d, covers, status);
        schedule(d, RETRY_MS);
    }
}

static void write_done(uv_work_t *req, int status) {
    write_job *job = req->data;
    job_done(job, status < 0 ? status : job->status);
}

static void on_timer(uv_timer_t *t) {
    rn_durable *d = t->data;
    if (d->writing || d->synced == d->seq)
        return;
    write_job *job = rn_xcalloc(1, sizeof *job);
    job->d = d;
    job->covers = d->seq;
    job->req.data = job;
    d->encode(d->arg, &job->data);
    d->writing = 1;
    if (d->sink)
        d->sink(d->sink_arg, job->data.data, job->data.len, job_done, job);
    else
        uv_queue_work(d->loop, &job->req, write_work, write_done);
}

void rn_durable_set_sink(rn_durable *d, rn_durable_sink sink, void *arg) {
    assert(d->seq == 0 && sink);
    d->sink = sink;
    d->sink_arg = arg;
}

void rn_durable_discard(rn_durable *d, int status) {
    assert(status < 0);
    d->synced = d->seq;
    answer_waiters(d, UINT64_MAX, status);
}

rn_durable *rn_durable_open(uv_loop_t *loop, const char *dir, const char *name,
                            void (*encode)(void *arg, rn_buf *out), void (*written)(void *arg),
                            void *arg) {
    rn_durable *d = rn_xcalloc(1, sizeof *d);
    d->loop = loop;
    d->dir = rn_xstrdup(dir);
    d->name = rn_xstrdup(name);
    d->encode = encode;
    d->written = written;
    d->arg = arg;
    uv_timer_init(loop, &d->timer);
    d->timer.data = d;
    return d;
}

void rn_durable_changed(rn_durable *d) {
    d->seq++;
    schedule(d, 0);
}

void rn_durable_wait(rn_durable *d, rn_durable_waiter *w) {
    if (d->synced == d->seq) {
        w->fn(w, 0);
        return;
    }
    w->need = d->seq;
    rn_list_push_back(&d->waiters, &w->node);
}

uint64_t rn_durable_seq(const rn_durable *d) {
    return d->seq;
}

uint64_t rn_durable_synced(const rn_durable *d) {
    return d->synced;
}

void rn_durable_stop(rn_durable *d) {
    d->stopped = 1;
    uv_close((uv_handle_t *)&d->timer, NULL);
}

int rn_durable_close(rn_durable *d) {
    int rc = d->sink && d->synced < d->seq ? -EAGAIN : 0;
    if (!d->sink && d->synced < d->seq) {
        rn_buf data = {0};
        d->encode(d->arg, &data);
        rc = rn_atomic_write_file(d->dir, d->name, data.data, data.len, 0600);
        rn_buf_free(&data);
        if (rc == 0)
            d->synced = d->seq;
    }
    answer_waiters(d, UINT64_MAX, rc);
    free(d->dir);
    free(d->name);
    free(d);
    return rc;
}
