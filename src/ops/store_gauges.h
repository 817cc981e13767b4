/*
 * store_gauges.h — the scrape's gauges summed over every visible stream
 * (streams, producers, stored bytes), by a walk of ops/store_walk.h (over
 * loop turns on a large store); the scrapes that arrive while one is
 * under way share it.
 */
#ifndef RN_STORE_GAUGES_H
#define RN_STORE_GAUGES_H

#include <stdint.h>

#include "ops/store_walk.h"

typedef struct {
    uint64_t streams, producers;
    uint64_t hot_bytes;          /* retained bytes in local stream files */
    uint64_t history_cold_bytes; /* retained bytes only in the cold store */
    uint64_t cold_bytes;         /* snapshot bodies in the cold store */
    uint64_t snapshot_bytes;     /* snapshot bodies in the local store */
} rn_store_gauges;

typedef struct rn_gauge_walk rn_gauge_walk;

/* The gauges' walks go through walker (kept by the caller, who stops it
 * before freeing this). */
rn_gauge_walk *rn_gauge_walk_new(rn_store_walk *walker);

/* Calls cb(arg, g) with the sums over the visible streams: inside this
 * call for a small map with no walk under way, else when the walk under
 * way or started here completes (an ask during a walk joins it: its sums
 * may be partly of the state just before the ask). cb gets g NULL when the
 * walker stops first. The sums are exact when no stream is created or
 * removed during the walk. Loop thread. */
void rn_gauge_walk_ask(rn_gauge_walk *g, void (*cb)(void *arg, const rn_store_gauges *g),
                       void *arg);

/* NULL is allowed. No ask may be waiting (the walker was stopped). */
void rn_gauge_walk_free(rn_gauge_walk *g);

#endif
