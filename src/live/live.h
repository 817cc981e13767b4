/*
 * live.h — live reads: the readers waiting for stream changes (parked
 * long-polls and SSE readers), held by an rn_live that the server makes.
 *
 * Each stream with readers has one list of them, and rn_live counts them
 * all, for the server's and the stream's bounds (rn_live_admit) and the
 * metrics. rn_live_observer(), registered with the engine, wakes them after
 * an append or close is applied; it unregisters them and then tells them
 * when the stream's history was rewritten (no read opened before may go on:
 * its offsets belong to the old history) and before a stream disappears. A
 * woken waiter's callback may remove itself (or leave itself registered to
 * keep waiting). Everything runs on the loop thread.
 */
#ifndef RN_LIVE_H
#define RN_LIVE_H

#include "engine/engine.h"
#include "util/list.h"

typedef struct rn_live rn_live;

typedef struct {
    size_t max_reads;            /* readers at once (0: no bound) */
    size_t max_reads_per_stream; /* readers of one stream at once (0: no bound) */
    /* Called around the wake-up of a changed stream's readers with
     * wake_arg (the server brackets it with the transport's write batch, so
     * that the writes it makes go out in parallel). NULL: none. */
    void (*wake_begin)(void *arg);
    void (*wake_end)(void *arg);
    void *wake_arg;
} rn_live_config;

typedef enum {
    RN_LIVE_CHANGED,   /* data appended and/or the stream closed; still registered */
    RN_LIVE_REWRITTEN, /* the history was rewritten; already unregistered */
    RN_LIVE_REMOVED,   /* the stream is about to disappear; already unregistered */
    RN_LIVE_STOPPING,  /* the server stops: end now (and unregister); still registered */
} rn_live_event;

typedef struct rn_waiter rn_waiter;
/* s is the stream the waiter was registered on (still valid during the call). */
typedef void (*rn_waiter_fn)(rn_waiter *w, rn_stream *s, rn_live_event ev);

struct rn_waiter {
    rn_list_node node; /* in its stream's list */
    rn_live *live;
    rn_stream *stream; /* NULL when not registered */
    rn_waiter_fn fn;
};

/* Whether one more reader of s fits the bounds. */
typedef enum {
    RN_LIVE_ADMITTED,
    RN_LIVE_FULL,        /* the server holds max_reads readers */
    RN_LIVE_STREAM_FULL, /* s has max_reads_per_stream readers */
} rn_live_admission;

rn_live *rn_live_new(const rn_live_config *cfg);
/* Frees live, which holds no reader. */
void rn_live_free(rn_live *live);
rn_live_admission rn_live_admit(const rn_live *live, const rn_stream *s);
/* Registers w on s (w must not be registered, and rn_live_admit must admit
 * it). */
void rn_live_add(rn_live *live, rn_stream *s, rn_waiter *w, rn_waiter_fn fn);
/* Unregisters w if registered. */
void rn_live_remove(rn_waiter *w);
/* The engine observer (rn_engine_observe, with the rn_live as arg). */
void rn_live_observer(rn_stream *s, rn_stream_event ev, void *arg);
/* Tells every reader RN_LIVE_STOPPING (shutdown); each must unregister. */
void rn_live_end_all(rn_live *live);
/* Readers registered (the runnel_live_readers gauge). */
size_t rn_live_count(const rn_live *live);

#endif
