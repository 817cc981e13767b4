/*
 * live.c — per-stream waiter lists. See live.h.
 *
 * Notification walks the list with the next pointer saved before each
 * callback, and new waiters are added at the head, so a callback may remove
 * itself, and one that re-registers elsewhere is not visited twice. The
 * walk of a changed stream is bracketed by the wake hooks.
 */
#include "live/live.h"

static size_t waiter_count;
static struct {
    void (*before)(void *arg);
    void (*after)(void *arg);
    void *arg;
} hooks;

void rn_live_set_wake_hooks(void (*before)(void *arg), void (*after)(void *arg), void *arg) {
    hooks.before = before;
    hooks.after = after;
    hooks.arg = arg;
}

void rn_live_add(rn_stream *s, rn_waiter *w, rn_waiter_fn fn) {
    w->stream = s;
    w->fn = fn;
    w->prev = NULL;
    w->next = s->waiters;
    if (w->next)
        w->next->prev = w;
    s->waiters = w;
    s->live_readers++;
    waiter_count++;
}

void rn_live_remove(rn_waiter *w) {
    if (!w->stream)
        return;
    if (w->prev)
        w->prev->next = w->next;
    else
        w->stream->waiters = w->next;
    if (w->next)
        w->next->prev = w->prev;
    w->stream->live_readers--;
    w->stream = NULL;
    w->prev = w->next = NULL;
    waiter_count--;
}

void rn_live_observer(rn_stream *s, rn_stream_event ev, void *arg) {
    (void)arg;
    if (ev == RN_STREAM_CHANGED && s->waiters) {
        if (hooks.before)
            hooks.before(hooks.arg);
        for (rn_waiter *w = s->waiters, *next; w; w = next) {
            next = w->next;
            w->fn(w, s, RN_LIVE_CHANGED);
        }
        if (hooks.after)
            hooks.after(hooks.arg);
    } else if (ev == RN_STREAM_REWRITTEN || ev == RN_STREAM_REMOVED) {
        rn_live_event lev = ev == RN_STREAM_REWRITTEN ? RN_LIVE_REWRITTEN : RN_LIVE_REMOVED;
        while (s->waiters) {
            rn_waiter *w = s->waiters;
            rn_live_remove(w);
            w->fn(w, s, lev);
        }
    }
}

size_t rn_live_count(void) {
    return waiter_count;
}
