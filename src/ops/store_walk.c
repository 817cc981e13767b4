/*
 * store_walk.c — walks over every visible stream, spread over loop turns
 * on a large store. See store_walk.h.
 *
 * A walk over a million streams in one loop turn held every connection
 * for 80-90 ms (a scrape, an operator's listing page). A large map is
 * walked a slice per turn from a uv_idle handle, which runs once per loop
 * iteration and keeps the loop from blocking while walks last; the turns
 * between slices serve requests. The walks under way form a queue: each
 * turn the first takes one slice and goes to the back, so that a turn
 * holds one slice however many walks there are. A walk that finds the map
 * rebuilt (grown) starts over.
 */
#include "ops/store_walk.h"
#include "util/buf.h"

#include <assert.h>
#include <stdlib.h>

typedef struct walk {
    rn_store_walk_job job;
    rn_engine_slice at;
    struct walk *next;
} walk;

struct rn_store_walk {
    rn_engine *engine;
    size_t at_once, slice;
    uv_idle_t idle;
    walk *head, *tail; /* the walks under way, the next to take a slice first */
    int stopped;
};

/* Puts k at the back of the queue. */
static void enqueue(rn_store_walk *w, walk *k) {
    k->next = NULL;
    if (w->tail)
        w->tail->next = k;
    else
        w->head = k;
    w->tail = k;
}

static void on_idle(uv_idle_t *h) {
    rn_store_walk *w = h->data;
    walk *k = w->head;
    assert(k);
    w->head = k->next;
    if (!w->head)
        w->tail = NULL;
    int rc = rn_engine_foreach_slice(w->engine, &k->at, w->slice, k->job.visit, k->job.arg);
    if (k->job.slices)
        (*k->job.slices)++;
    if (rc < 0 && k->job.restart)
        k->job.restart(k->job.arg);
    if (rc <= 0) {
        enqueue(w, k);
        return;
    }
    if (!w->head)
        uv_idle_stop(&w->idle);
    rn_store_walk_job job = k->job;
    free(k);
    job.finish(job.arg, 1); /* it may start another walk */
}

rn_store_walk *rn_store_walk_new(uv_loop_t *loop, rn_engine *engine, size_t at_once, size_t slice) {
    assert(slice > 0);
    rn_store_walk *w = rn_xcalloc(1, sizeof *w);
    w->engine = engine;
    w->at_once = at_once;
    w->slice = slice;
    uv_idle_init(loop, &w->idle);
    w->idle.data = w;
    return w;
}

void rn_store_walk_run(rn_store_walk *w, const rn_store_walk_job *job) {
    assert(job->visit && job->finish);
    if (w->stopped) {
        job->finish(job->arg, 0);
        return;
    }
    if (rn_engine_stream_slots(w->engine) <= w->at_once) {
        rn_engine_foreach(w->engine, job->visit, job->arg);
        job->finish(job->arg, 1);
        return;
    }
    walk *k = rn_xcalloc(1, sizeof *k);
    k->job = *job;
    enqueue(w, k);
    uv_idle_start(&w->idle, on_idle); /* no-op when started */
}

void rn_store_walk_stop(rn_store_walk *w) {
    if (!w)
        return;
    w->stopped = 1;
    while (w->head) {
        walk *k = w->head;
        w->head = k->next;
        rn_store_walk_job job = k->job;
        free(k);
        job.finish(job.arg, 0);
    }
    w->tail = NULL;
    uv_close((uv_handle_t *)&w->idle, NULL);
}

void rn_store_walk_free(rn_store_walk *w) {
    free(w);
}
