/*
 * store_gauges.h — the scrape's gauges summed over every visible stream
 * (streams, producers, stored bytes), without stalling the loop on a large
 * store: a walk over a small stream map is done at once; over a large one
 * it is spread over loop turns, a slice of the map per turn, and the
 * scrapes that arrive meanwhile share it.
 */
#ifndef RN_STORE_GAUGES_H
#define RN_STORE_GAUGES_H

#include <stdint.h>
#include <uv.h>

#include "engine/engine.h"

typedef struct {
    uint64_t streams, producers;
    uint64_t hot_bytes;          /* retained bytes in local stream files */
    uint64_t history_cold_bytes; /* retained bytes only in the cold store */
    uint64_t cold_bytes;         /* snapshot bodies in the cold store */
    uint64_t snapshot_bytes;     /* snapshot bodies in the local store */
} rn_store_gauges;

typedef struct rn_store_walk rn_store_walk;

/* Slot counts: a map of at most RN_STORE_WALK_AT_ONCE slots is walked
 * inside the ask; a larger one RN_STORE_WALK_SLICE slots per loop turn
 * (measured: a million streams, 2 Mi slots, cost 80-90 ms in one turn). */
#define RN_STORE_WALK_AT_ONCE 65536u
#define RN_STORE_WALK_SLICE 4096u

rn_store_walk *rn_store_walk_new(uv_loop_t *loop, rn_engine *engine);

/* Calls cb(arg, g) with the sums over the visible streams: inside this
 * call for a small map with no walk under way, else when the walk under
 * way or started here completes (an ask during a walk joins it: its sums
 * may be partly of the state just before the ask). cb gets g NULL when the
 * walk stops first. The sums are exact when no stream is created or
 * removed during the walk (rn_engine_foreach_slice). Loop thread. */
void rn_store_walk_ask(rn_store_walk *w, void (*cb)(void *arg, const rn_store_gauges *g),
                       void *arg);

/* Answers every waiting ask with NULL and closes the walk's handle; free
 * it once the loop ran. NULL is allowed in both. */
void rn_store_walk_stop(rn_store_walk *w);
void rn_store_walk_free(rn_store_walk *w);

#endif
