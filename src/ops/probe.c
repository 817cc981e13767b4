/*
 * probe.c — the periodic read of the data directory behind readiness. See
 * probe.h.
 *
 * The read runs in libuv's pool; only a read that has started counts
 * toward "hanging" (a busy pool delays the probe, it does not fail it).
 * The worker writes `started_ms` and the result, the loop reads them: both
 * are atomics.
 */
#define _GNU_SOURCE
#include "ops/probe.h"
#include "util/buf.h"
#include "util/clock.h"
#include "util/fault.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define HANG_MS 5000
#define BLOCK 4096

struct rn_probe {
    uv_timer_t timer;
    uv_work_t work;
    char path[PATH_MAX];
    int in_flight;         /* a read is queued or running (loop thread) */
    int stopping;          /* free once the read returns (loop thread) */
    atomic_ullong started; /* monotonic ms the running read began, 0: none */
    atomic_int result;     /* 0 or -errno of the last finished read */
};

/* Reads the first block of the file past the page cache: O_DIRECT, or
 * where the file system refuses it, a read after dropping the cached
 * pages. Returns 0 or -errno. */
static int read_uncached(const char *path) {
    int rc = rn_fault_fail("data-read");
    if (rc)
        return rc;
    int fd = open(path, O_RDONLY | O_DIRECT | O_CLOEXEC);
    int direct = fd >= 0;
    if (fd < 0 && errno == EINVAL)
        fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    if (!direct)
        posix_fadvise(fd, 0, BLOCK, POSIX_FADV_DONTNEED);
    void *buf = NULL;
    if (posix_memalign(&buf, BLOCK, BLOCK) != 0)
        abort(); /* out of memory */
    ssize_t got = pread(fd, buf, BLOCK, 0);
    rc = got < 0 ? -errno : 0;
    free(buf);
    close(fd);
    return rc;
}

static void probe_work(uv_work_t *w) {
    rn_probe *p = w->data;
    atomic_store(&p->started, rn_mono_ms());
    atomic_store(&p->result, read_uncached(p->path));
    atomic_store(&p->started, 0);
}

static void on_closed(uv_handle_t *h) {
    rn_probe *p = h->data;
    if (!p->in_flight)
        free(p);
    else
        p->stopping = 2; /* timer closed: the read's end frees */
}

static void probe_done(uv_work_t *w, int status) {
    rn_probe *p = w->data;
    p->in_flight = 0;
    if (p->stopping == 2)
        free(p);
}

static void on_tick(uv_timer_t *t) {
    rn_probe *p = t->data;
    if (p->in_flight)
        return;
    p->in_flight = 1;
    p->work.data = p;
    uv_queue_work(t->loop, &p->work, probe_work, probe_done);
}

rn_probe *rn_probe_start(uv_loop_t *loop, const char *data_dir, uint64_t interval_ms) {
    rn_probe *p = rn_xcalloc(1, sizeof *p);
    snprintf(p->path, sizeof p->path, "%s/FORMAT", data_dir);
    uv_timer_init(loop, &p->timer);
    p->timer.data = p;
    uv_timer_start(&p->timer, on_tick, 0, interval_ms);
    return p;
}

int rn_probe_failing(rn_probe *p, char *out, size_t cap) {
    if (!p)
        return 0;
    uint64_t started = atomic_load(&p->started);
    uint64_t now = rn_mono_ms();
    if (started && now > started + HANG_MS) {
        snprintf(out, cap, "a read of the data directory (%s) has not returned for %llu ms",
                 p->path, (unsigned long long)(now - started));
        return 1;
    }
    int rc = atomic_load(&p->result);
    if (rc == 0)
        return 0;
    snprintf(out, cap, "the data directory fails reads: %s: %s", p->path, strerror(-rc));
    return 1;
}

void rn_probe_stop(rn_probe *p) {
    if (!p || p->stopping)
        return;
    p->stopping = 1;
    uv_timer_stop(&p->timer);
    uv_close((uv_handle_t *)&p->timer, on_closed);
}
