/*
 * live.c — the registry of live readers, their bounds and their wake-up.
 * See live.h.
 *
 * A stream with readers points (rn_stream.waiters) to a room this module
 * allocates: the stream's list of readers, linked into the list of rooms
 * so that shutdown reaches every reader. A room is freed when its last
 * reader leaves, except while a walk of its readers is under way (then
 * when the walk ends). So there is one list of readers, a stream costs
 * nothing until it has one, and the rooms are bounded by the readers.
 *
 * Walks save the next pointer before each callback, and new readers are
 * added at the head, so a callback may remove itself, and one that
 * registers again is not visited twice. The walk of a changed stream is
 * bracketed by the wake hooks.
 */
#include "live/live.h"
#include "util/buf.h"

#include <assert.h>
#include <stdlib.h>

typedef struct {
    rn_list readers;   /* rn_waiter.node, newest first */
    rn_list_node link; /* in rn_live.rooms */
    rn_stream *stream;
    int walking; /* a walk of readers is under way: kept until it ends */
} room;

struct rn_live {
    rn_live_config cfg;
    rn_list rooms; /* room.link: the streams that have readers */
    size_t count;  /* readers registered */
};

rn_live *rn_live_new(const rn_live_config *cfg) {
    rn_live *live = rn_xcalloc(1, sizeof *live);
    live->cfg = *cfg;
    return live;
}

void rn_live_free(rn_live *live) {
    if (!live)
        return;
    assert(live->count == 0 && rn_list_empty(&live->rooms));
    free(live);
}

rn_live_admission rn_live_admit(const rn_live *live, const rn_stream *s) {
    if (live->cfg.max_reads && live->count >= live->cfg.max_reads)
        return RN_LIVE_FULL;
    if (live->cfg.max_reads_per_stream && s->live_readers >= live->cfg.max_reads_per_stream)
        return RN_LIVE_STREAM_FULL;
    return RN_LIVE_ADMITTED;
}

/* Frees rm, and forgets it in its stream, once nothing holds it. */
static void room_release(rn_live *live, room *rm) {
    if (rm->walking || !rn_list_empty(&rm->readers))
        return;
    rn_list_remove(&live->rooms, &rm->link);
    rm->stream->waiters = NULL;
    free(rm);
}

void rn_live_add(rn_live *live, rn_stream *s, rn_waiter *w, rn_waiter_fn fn) {
    assert(!w->stream);
    assert(rn_live_admit(live, s) == RN_LIVE_ADMITTED);
    room *rm = s->waiters;
    if (!rm) {
        rm = rn_xcalloc(1, sizeof *rm);
        rm->stream = s;
        rn_list_push_back(&live->rooms, &rm->link);
        s->waiters = rm;
    }
    rn_list_push_front(&rm->readers, &w->node);
    w->live = live;
    w->stream = s;
    w->fn = fn;
    s->live_readers++;
    live->count++;
}

void rn_live_remove(rn_waiter *w) {
    if (!w->stream)
        return;
    room *rm = w->stream->waiters;
    rn_list_remove(&rm->readers, &w->node);
    w->stream->live_readers--;
    w->live->count--;
    w->stream = NULL;
    room_release(w->live, rm);
}

static rn_waiter *first_reader(const room *rm) {
    return rn_list_entry(rm->readers.first, rn_waiter, node);
}

void rn_live_observer(rn_stream *s, rn_stream_event ev, void *arg) {
    rn_live *live = arg;
    room *rm = s->waiters;
    if (!rm || (ev != RN_STREAM_CHANGED && ev != RN_STREAM_REWRITTEN && ev != RN_STREAM_REMOVED))
        return;
    assert(!rm->walking);
    rm->walking = 1;
    if (ev == RN_STREAM_CHANGED) {
        if (live->cfg.wake_begin)
            live->cfg.wake_begin(live->cfg.wake_arg);
        for (rn_list_node *n = rm->readers.first, *next; n; n = next) {
            next = n->next;
            rn_waiter *w = rn_list_entry(n, rn_waiter, node);
            w->fn(w, s, RN_LIVE_CHANGED);
        }
        if (live->cfg.wake_end)
            live->cfg.wake_end(live->cfg.wake_arg);
    } else {
        rn_live_event lev = ev == RN_STREAM_REWRITTEN ? RN_LIVE_REWRITTEN : RN_LIVE_REMOVED;
        while (!rn_list_empty(&rm->readers)) {
            rn_waiter *w = first_reader(rm);
            rn_live_remove(w);
            w->fn(w, s, lev);
        }
    }
    rm->walking = 0;
    room_release(live, rm);
}

void rn_live_end_all(rn_live *live) {
    while (!rn_list_empty(&live->rooms)) {
        room *rm = rn_list_entry(live->rooms.first, room, link);
        rm->walking = 1;
        while (!rn_list_empty(&rm->readers)) {
            rn_waiter *w = first_reader(rm);
            w->fn(w, rm->stream, RN_LIVE_STOPPING);
            assert(!w->stream); /* it ended */
        }
        rm->walking = 0;
        room_release(live, rm);
    }
}

size_t rn_live_count(const rn_live *live) {
    return live->count;
}
