/*
 * fanout.h — persistent helper threads that run the items of one job in
 * parallel with the thread that submits it (the transport's parallel
 * fan-out of a write batch).
 *
 * rn_fanout_run() blocks its caller until every item is done, and the
 * caller works on the items itself meanwhile: a job never waits for a
 * helper to be scheduled, helpers only take items nobody has taken yet.
 * Items are claimed one at a time from a shared counter, so a helper that
 * starts late or runs slowly takes fewer. Only one thread submits jobs.
 */
#ifndef RN_FANOUT_H
#define RN_FANOUT_H

#include <stddef.h>

typedef struct rn_fanout rn_fanout;

/* Starts `threads` (> 0) helper threads with every signal blocked. Returns
 * NULL when not one could be started. */
rn_fanout *rn_fanout_new(int threads);
/* Calls fn on each of the n items (item i at items + i * item_size), on the
 * calling thread and the helpers, and returns once all calls returned. fn
 * must be safe to run on any thread and on several items at once. */
void rn_fanout_run(rn_fanout *f, void (*fn)(void *item), void *items, size_t item_size, size_t n);
/* Stops and joins the helpers and frees f (NULL: nothing). */
void rn_fanout_free(rn_fanout *f);

#endif
