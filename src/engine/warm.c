/*
 * warm.c — reads that do not wait for the disk on the loop thread: the
 * range a page-cache-only read missed (rn_engine_read_again with
 * may_block 0, forkread.c) is read on libuv's pool into the page cache,
 * and the reader is called back to read it again (engine.h,
 * rn_engine_warm_missed).
 *
 * A warm holds copies of the files' paths, not the engine: it may outlive
 * the engine and the reader (rn_engine_warm_cancel), and frees itself when
 * its worker is done.
 */
#include "engine/engine_int.h"
#include "util/metrics.h"

#include <limits.h>
#include <stdlib.h>

struct rn_engine_warm {
    uv_work_t work;
    char data_path[PATH_MAX], sum_path[PATH_MAX];
    uint64_t off;
    size_t len;
    void (*done)(void *arg); /* NULL once cancelled */
    void *arg;
};

static void warm_work(uv_work_t *req) {
    rn_engine_warm *w = req->data;
    rn_streamfiles_warm(w->data_path, w->sum_path, w->off, w->len); /* a failure: read again */
}

static void warm_done(uv_work_t *req, int status) {
    (void)status; /* cancelled by libuv only at loop teardown: the reader reads blocking */
    rn_engine_warm *w = req->data;
    if (w->done)
        w->done(w->arg);
    free(w);
}

rn_engine_warm *rn_engine_warm_missed(rn_engine *e, rn_warm_for who, void (*done)(void *arg),
                                      void *arg) {
    return engine_warm_range(e, who, e->read_miss.id, e->read_miss.off, e->read_miss.len, done,
                             arg);
}

rn_engine_warm *engine_warm_range(rn_engine *e, rn_warm_for who, uint64_t id, uint64_t off,
                                  size_t len, void (*done)(void *arg), void *arg) {
    assert(done && len > 0);
    rn_engine_warm *w = rn_xcalloc(1, sizeof *w);
    rn_streamfiles_paths(e->files, id, w->data_path, w->sum_path);
    w->off = off;
    w->len = len;
    w->done = done;
    w->arg = arg;
    w->work.data = w;
    if (uv_queue_work(e->loop, &w->work, warm_work, warm_done) < 0) {
        free(w);
        return NULL;
    }
    switch (who) {
    case RN_WARM_FOR_READ:
        rn_metric.reads_warmed++;
        break;
    case RN_WARM_FOR_SCRUB:
        rn_metric.scrub_warmed++;
        break;
    case RN_WARM_FOR_HISTORY:
        rn_metric.history_warmed++;
        break;
    }
    return w;
}

void rn_engine_warm_cancel(rn_engine_warm *w) {
    assert(w && w->done);
    w->done = NULL;
}
