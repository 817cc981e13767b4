/*
 * live.h — waiters for stream changes (parked long-polls and SSE readers).
 *
 * Each stream keeps an intrusive list of waiters. rn_live_observer(),
 * registered with the engine, wakes them after an append or close is
 * applied; it unregisters them and then tells them when the stream's history
 * was rewritten (no read opened before may go on: its offsets belong to the
 * old history) and before a stream disappears. A woken waiter's callback may
 * remove itself (or leave itself registered to keep waiting).
 */
#ifndef RN_LIVE_H
#define RN_LIVE_H

#include "engine/engine.h"

typedef enum {
    RN_LIVE_CHANGED,   /* data appended and/or the stream closed; still registered */
    RN_LIVE_REWRITTEN, /* the history was rewritten; already unregistered */
    RN_LIVE_REMOVED,   /* the stream is about to disappear; already unregistered */
} rn_live_event;

typedef struct rn_waiter rn_waiter;
/* s is the stream the waiter was registered on (still valid during the call). */
typedef void (*rn_waiter_fn)(rn_waiter *w, rn_stream *s, rn_live_event ev);

struct rn_waiter {
    rn_waiter *prev, *next;
    rn_stream *stream; /* NULL when not registered */
    rn_waiter_fn fn;
};

/* Registers w on s (w must not be registered). */
void rn_live_add(rn_stream *s, rn_waiter *w, rn_waiter_fn fn);
/* Unregisters w if registered. */
void rn_live_remove(rn_waiter *w);
/* The engine observer (rn_engine_observe) that wakes waiters. */
void rn_live_observer(rn_stream *s, rn_stream_event ev, void *arg);
/* Hooks called with arg before and after the waiters of a changed stream
 * are woken (the server brackets the wake-up with the transport's write
 * batch, so that the writes it makes go out in parallel). NULL: none. */
void rn_live_set_wake_hooks(void (*before)(void *arg), void (*after)(void *arg), void *arg);
/* Number of registered waiters (for limits and metrics). */
size_t rn_live_count(void);

#endif
