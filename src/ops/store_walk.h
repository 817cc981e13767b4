/*
 * store_walk.h — walks over every visible stream that do not stall the
 * loop on a large store: a walk over a small stream map is done inside the
 * call that asks for it; over a large one it is spread over loop turns, a
 * slice of the map per turn. Several walks may be under way at once (the
 * scrape's gauges, the operator's listings); they take turns, one slice
 * per loop turn in all, so that their number does not lengthen a turn.
 */
#ifndef RN_STORE_WALK_H
#define RN_STORE_WALK_H

#include <stdint.h>
#include <uv.h>

#include "engine/engine.h"

/* Slot counts: a map of at most RN_STORE_WALK_AT_ONCE slots is walked
 * inside the ask; a larger one RN_STORE_WALK_SLICE slots per loop turn
 * (measured: a million streams, 2 Mi slots, cost 80-90 ms in one turn). */
#define RN_STORE_WALK_AT_ONCE 65536u
#define RN_STORE_WALK_SLICE 4096u

typedef struct rn_store_walk rn_store_walk;

/* One walk's visitor. visit sees each visible stream (it must not mutate
 * the engine, and must not keep s past its return: the next slice comes
 * in another loop turn); restart drops what visit gathered (the map grew:
 * the walk starts over; NULL when nothing is gathered); finish ends the
 * walk, whole 1 when it went through the map, 0 when the walker stopped
 * first. slices, when set, counts the walk's slices (a metric). */
typedef struct {
    void (*visit)(rn_stream *s, void *arg);
    void (*restart)(void *arg);
    void (*finish)(void *arg, int whole);
    void *arg;
    uint64_t *slices;
} rn_store_walk_job;

/* A walker over engine's streams: maps of at most at_once slots are
 * walked inside the ask, larger ones `slice` (> 0) slots per loop turn
 * (the server: RN_STORE_WALK_AT_ONCE, RN_STORE_WALK_SLICE). */
rn_store_walk *rn_store_walk_new(uv_loop_t *loop, rn_engine *engine, size_t at_once, size_t slice);

/* Walks every visible stream for job: inside this call (finish included)
 * on a small map, else over loop turns. A stopped walker finishes the job at once with whole 0. The
 * walk's visits are exact when no stream is created or removed during it
 * (rn_engine_foreach_slice). Loop thread. */
void rn_store_walk_run(rn_store_walk *w, const rn_store_walk_job *job);

/* Finishes every walk under way with whole 0 and closes the walker's
 * handle; free it once the loop ran. NULL is allowed in both. */
void rn_store_walk_stop(rn_store_walk *w);
void rn_store_walk_free(rn_store_walk *w);

#endif
