/*
 * durable.h — one small file kept durable by whole-file atomic rewrites.
 *
 * The owner keeps its state in memory and calls rn_durable_changed() after
 * every change that must survive a crash. A write serializes the whole
 * state (through the owner's encode callback, on the loop thread, after
 * the current callback returned) and a libuv worker writes it to
 * "<name>.tmp", fsyncs it, renames it over "<name>" and fsyncs the
 * directory. Changes made while a write is in flight are gathered into the
 * next one (group commit), so a burst of changes costs two writes, not one
 * per change.
 *
 * Changes are numbered: rn_durable_seq() is the number of the latest one,
 * rn_durable_synced() the latest one known to be on disk. A waiter
 * registered with rn_durable_wait() runs once every change made before the
 * call is on disk (status 0), or when the write meant to cover them failed
 * (status < 0; the state stays dirty and is written again a second later).
 *
 * With a sink (cluster mode: the replicated log, rn_durable_set_sink) a
 * write hands the encoded state to the sink instead of the file, and
 * "on disk" means what the sink says (committed and applied).
 */
#ifndef RN_SUBS_DURABLE_H
#define RN_SUBS_DURABLE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <uv.h>

#include "util/buf.h"
#include "util/list.h"

typedef struct rn_durable rn_durable;
typedef struct rn_durable_waiter rn_durable_waiter;
typedef void (*rn_durable_wait_fn)(rn_durable_waiter *w, int status);

struct rn_durable_waiter {
    rn_durable_wait_fn fn;
    /* private */
    uint64_t need;
    rn_list_node node; /* on the waiters' FIFO */
};

/* encode serializes the whole state into out (appending). written, if not
 * NULL, runs after every successful write (before the waiters). */
rn_durable *rn_durable_open(uv_loop_t *loop, const char *dir, const char *name,
                            void (*encode)(void *arg, rn_buf *out), void (*written)(void *arg),
                            void *arg);
/* A write's end: status 0 when the state handed over is durable, else
 * < 0 (the sink's code, passed on to the waiters it covered). */
typedef void (*rn_durable_done)(void *job, int status);
/* Stores len bytes (valid only during the call) and calls done(job,
 * status) once, on the loop thread, possibly before returning. */
typedef void (*rn_durable_sink)(void *arg, const uint8_t *data, size_t len, rn_durable_done done,
                                void *job);

/* Writes go to sink instead of the file from now on (set before any
 * change). */
void rn_durable_set_sink(rn_durable *d, rn_durable_sink sink, void *arg);
/* Forgets the changes not yet durable (the state they were made to was
 * dropped): their waiters run with status, nothing is written for them. */
void rn_durable_discard(rn_durable *d, int status);
/* Records a change and schedules a write. */
void rn_durable_changed(rn_durable *d);
/* Runs w->fn once every change so far is on disk; at once (before this
 * returns) when it already is. w must stay valid until then. */
void rn_durable_wait(rn_durable *d, rn_durable_waiter *w);
uint64_t rn_durable_seq(const rn_durable *d);
uint64_t rn_durable_synced(const rn_durable *d);
/* Closes the timer handle (shutdown; run the loop afterwards). A write in
 * flight completes; no new one starts until rn_durable_close(). */
void rn_durable_stop(rn_durable *d);
/* After the loop ended: writes the state one last time if it is dirty
 * (blocking; with a sink nothing is written: what the sink did not take
 * was never acknowledged), fails any remaining waiters, and frees d.
 * Returns 0 or the write's -errno. */
int rn_durable_close(rn_durable *d);

#endif
