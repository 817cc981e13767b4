/*
 * store_gauges.c — the scrape's gauges over every visible stream, by one
 * walk shared by the asks that arrive while it is under way. See
 * store_gauges.h.
 */
#include "ops/store_gauges.h"
#include "util/buf.h"
#include "util/metrics.h"

#include <assert.h>
#include <stdlib.h>

typedef struct asker {
    void (*cb)(void *arg, const rn_store_gauges *g);
    void *arg;
    struct asker *next;
} asker;

struct rn_gauge_walk {
    rn_store_walk *walker;
    asker *askers; /* waiting for the walk under way; NULL: none under way */
    rn_store_gauges sums;
};

static void add_stream(rn_stream *s, void *arg) {
    rn_store_gauges *g = &((rn_gauge_walk *)arg)->sums;
    g->streams++;
    g->producers += s->producers.count;
    /* a stream's own retained bytes: below hot_start in the cold store */
    uint64_t own = s->retained > s->fork_offset ? s->retained : s->fork_offset;
    uint64_t hot_start = s->cold_end > own ? s->cold_end : own;
    g->hot_bytes += s->tail - hot_start;
    g->history_cold_bytes += hot_start - own;
    if (s->snapshot.present) {
        if (s->snapshot.cold)
            g->cold_bytes += s->snapshot.size;
        else
            g->snapshot_bytes += s->snapshot.size;
    }
}

static void restart(void *arg) {
    ((rn_gauge_walk *)arg)->sums = (rn_store_gauges){0};
}

static void finish(void *arg, int whole) {
    rn_gauge_walk *g = arg;
    asker *list = g->askers;
    g->askers = NULL;
    rn_store_gauges sums = g->sums;
    if (whole)
        rn_metric.gauge_walks++;
    while (list) { /* a callback may ask again: a new walk */
        asker *next = list->next;
        list->cb(list->arg, whole ? &sums : NULL);
        free(list);
        list = next;
    }
}

rn_gauge_walk *rn_gauge_walk_new(rn_store_walk *walker) {
    rn_gauge_walk *g = rn_xcalloc(1, sizeof *g);
    g->walker = walker;
    return g;
}

void rn_gauge_walk_ask(rn_gauge_walk *g, void (*cb)(void *arg, const rn_store_gauges *g),
                       void *arg) {
    asker *a = rn_xmalloc(sizeof *a);
    *a = (asker){.cb = cb, .arg = arg, .next = g->askers};
    int under_way = g->askers != NULL;
    g->askers = a;
    if (under_way)
        return;
    g->sums = (rn_store_gauges){0};
    rn_store_walk_job job = {.visit = add_stream,
                             .restart = restart,
                             .finish = finish,
                             .arg = g,
                             .slices = &rn_metric.gauge_walk_slices};
    rn_store_walk_run(g->walker, &job);
}

void rn_gauge_walk_free(rn_gauge_walk *g) {
    assert(!g || !g->askers);
    free(g);
}
