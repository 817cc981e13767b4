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
#include "util/log.h"

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
    uv_timer_t timer;
    uint64_t seq, synced;
    int writing, stopped;
    rn_durable_waiter *head, *tail;
};

typedef struct {
    uv_work_t req;
    rn_durable *d;
    rn_buf data;
    uint64_t covers;
    int status;
} write_job;

static int write_all(int fd, const uint8_t *p, size_t n) {
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return -errno;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

int rn_atomic_write_file(const char *dir, const char *name, const void *data, size_t len,
                         mode_t mode) {
    char tmp[PATH_MAX], dst[PATH_MAX];
    if ((size_t)snprintf(tmp, sizeof tmp, "%s/%s.tmp", dir, name) >= sizeof tmp ||
        (size_t)snprintf(dst, sizeof dst, "%s/%s", dir, name) >= sizeof dst)
        return -ENAMETOOLONG;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
    if (fd < 0)
        return -errno;
    int rc = fchmod(fd, mode) < 0 ? -errno : write_all(fd, data, len);
    if (rc == 0 && fsync(fd) < 0)
        rc = -errno;
    if (close(fd) < 0 && rc == 0)
        rc = -errno;
    if (rc == 0 && rename(tmp, dst) < 0)
        rc = -errno;
    if (rc != 0) {
        unlink(tmp);
        return rc;
    }
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        return -errno;
    rc = fsync(dfd) < 0 ? -errno : 0;
    close(dfd);
    return rc;
}

int rn_read_file(const char *dir, const char *name, rn_buf *out) {
    char path[PATH_MAX];
    if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, name) >= sizeof path)
        return -ENAMETOOLONG;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    int rc = 0;
    for (;;) {
        rn_buf_reserve(out, 65536);
        ssize_t r = read(fd, out->data + out->len, out->cap - out->len);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            rc = r < 0 ? -errno : 0;
            break;
        }
        out->len += (size_t)r;
    }
    close(fd);
    return rc;
}

/* Answers the waiters whose changes are covered by a write up to `upto`. */
static void answer_waiters(rn_durable *d, uint64_t upto, int status) {
    while (d->head && d->head->need <= upto) {
        rn_durable_waiter *w = d->head;
        d->head = w->next;
        if (!d->head)
            d->tail = NULL;
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

static void write_done(uv_work_t *req, int status) {
    write_job *job = req->data;
    rn_durable *d = job->d;
    int rc = status < 0 ? status : job->status;
    uint64_t covers = job->covers;
    rn_buf_free(&job->data);
    free(job);
    d->writing = 0;
    if (rc == 0) {
        d->synced = covers;
        if (d->written)
            d->written(d->arg);
        answer_waiters(d, covers, 0);
        schedule(d, 0);
    } else {
        rn_log(RN_LOG_ERROR, "state_write_failed", "writing %s/%s failed: %s; retrying in 1 s",
               d->dir, d->name, strerror(-rc));
        answer_waiters(d, covers, rc);
        schedule(d, RETRY_MS);
    }
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
    uv_queue_work(d->loop, &job->req, write_work, write_done);
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
    w->next = NULL;
    if (d->tail)
        d->tail->next = w;
    else
        d->head = w;
    d->tail = w;
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
    int rc = 0;
    if (d->synced < d->seq) {
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
