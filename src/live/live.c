/*
 * live.c — the registry of live readers: their bounds, their lifecycle
 * (registration, timeout, abort, end) and their wake-up. See live.h; the
 * long-poll and SSE readers themselves are longpoll.c and sse.c.
 *
 * A stream with readers points (rn_stream.live_room) to a room this file
 * allocates: the stream's list of readers, linked into the list of rooms
 * so that shutdown reaches every reader. A room is freed when its last
 * reader leaves, except while a walk of its readers is under way (then
 * when the walk ends). So there is one list of readers, a stream costs
 * nothing until it has one, and the rooms are bounded by the readers.
 *
 * Walks save the next pointer before each call, and new readers are added
 * at the head, so a reader may end while it is visited, and one that
 * registers meanwhile is not visited. The walk of a changed stream is
 * bracketed by the wake hooks. A reader's memory is the surface's: live
 * gives it back (ops->release) only once its timer has closed.
 */
#include "live/live_int.h"
#include "util/clock.h"

#include <assert.h>
#include <stdlib.h>

typedef struct {
    rn_list readers;   /* rn_live_reader.node, newest first */
    rn_list_node link; /* in rn_live.rooms */
    rn_stream *stream;
    int walking; /* a walk of readers is under way: kept until it ends */
} room;

rn_live *rn_live_new(uv_loop_t *loop, rn_engine *engine, const rn_live_config *cfg) {
    rn_live *live = rn_xcalloc(1, sizeof *live);
    live->loop = loop;
    live->engine = engine;
    live->cfg = *cfg;
    return live;
}

void rn_live_free(rn_live *live) {
    if (!live)
        return;
    assert(live->count == 0 && rn_list_empty(&live->rooms));
    rn_live_sse_free_shared(live);
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
    rm->stream->live_room = NULL;
    free(rm);
}

static void unregister(rn_live_reader *r) {
    if (!r->stream)
        return;
    room *rm = r->stream->live_room;
    rn_list_remove(&rm->readers, &r->node);
    r->stream->live_readers--;
    r->live->count--;
    r->stream = NULL;
    room_release(r->live, rm);
}

/* Ends r because of why, as its kind of read does. */
static void end_reader(rn_live_reader *r, rn_stream *s, rn_live_end why) {
    if (r->sse)
        rn_live_sse_end(r, why);
    else
        rn_live_poll_end(r, s, why);
}

static void on_timeout(uv_timer_t *t) {
    rn_live_reader *r = t->data;
    assert(r->stream); /* a reader that ended has no running timer */
    end_reader(r, r->stream, r->sse && r->until_expiry ? RN_LIVE_EXPIRED : RN_LIVE_TIMEOUT);
}

static void on_abort(rn_request *req) {
    rn_live_finish(req->handler_data);
}

/* The client half-closed: until the server writes, that looks the same as
 * a client that went away, so the read ends now, as at its timeout; the
 * connection stays up for what that sends. */
static void on_input_end(rn_request *req) {
    rn_live_reader *r = req->handler_data;
    assert(r->stream); /* an ended reader dropped this hook */
    end_reader(r, r->stream, RN_LIVE_TIMEOUT);
}

static void on_timer_closed(uv_handle_t *h) {
    rn_live_reader *r = h->data;
    if (r->cold_wait) {
        r->release_due = 1; /* a fetch's callback still holds it (sse.c) */
        return;
    }
    r->ops->release(r);
}

void rn_live_register(rn_live *live, rn_live_reader *r, rn_stream *s, uint64_t timeout_ms) {
    assert(r->req && r->ops && !r->live && !r->stream);
    assert(r->ops->answer_poll && r->ops->sse_error && r->ops->append_offset && r->ops->release);
    assert(rn_live_admit(live, s) == RN_LIVE_ADMITTED);
    room *rm = s->live_room;
    if (!rm) {
        rm = rn_xcalloc(1, sizeof *rm);
        rm->stream = s;
        rn_list_push_back(&live->rooms, &rm->link);
        s->live_room = rm;
    }
    rn_list_push_front(&rm->readers, &r->node);
    r->live = live;
    r->stream = s;
    s->live_readers++;
    live->count++;
    r->req->handler_data = r;
    r->req->on_abort = on_abort;
    r->req->on_input_end = on_input_end;
    int64_t expires = r->req->credential_expires_ms, now = rn_now_ms();
    if (expires && (expires <= now || (uint64_t)(expires - now) < timeout_ms)) {
        timeout_ms = expires > now ? (uint64_t)(expires - now) : 0;
        r->until_expiry = 1;
    }
    uv_timer_init(live->loop, &r->timer);
    r->timer.data = r;
    uv_timer_start(&r->timer, on_timeout, timeout_ms, 0);
}

void rn_live_finish(rn_live_reader *r) {
    assert(r->live);
    if (r->ended)
        return;
    r->ended = 1;
    unregister(r);
    r->req->on_abort = NULL;
    r->req->on_drain = NULL;
    r->req->on_input_end = NULL;
    uv_close((uv_handle_t *)&r->timer, on_timer_closed);
}

static rn_live_reader *first_reader(const room *rm) {
    return rn_list_entry(rm->readers.first, rn_live_reader, node);
}

void rn_live_observer(rn_stream *s, rn_stream_event ev, void *arg) {
    rn_live *live = arg;
    room *rm = s->live_room;
    if (!rm || (ev != RN_STREAM_CHANGED && ev != RN_STREAM_REWRITTEN && ev != RN_STREAM_REMOVED))
        return;
    assert(!rm->walking);
    rm->walking = 1;
    if (ev == RN_STREAM_CHANGED) {
        if (live->cfg.wake_begin)
            live->cfg.wake_begin(live->cfg.wake_arg);
        for (rn_list_node *n = rm->readers.first, *next; n; n = next) {
            next = n->next;
            rn_live_reader *r = rn_list_entry(n, rn_live_reader, node);
            if (r->sse)
                rn_live_sse_changed(r, s);
            else
                rn_live_poll_changed(r, s);
        }
        if (live->cfg.wake_end)
            live->cfg.wake_end(live->cfg.wake_arg);
    } else {
        /* Unregistered before they answer: what their answers set off
         * (a pipelined request) sees the stream without them. */
        rn_live_end why = ev == RN_STREAM_REWRITTEN ? RN_LIVE_REWRITTEN : RN_LIVE_REMOVED;
        while (!rn_list_empty(&rm->readers)) {
            rn_live_reader *r = first_reader(rm);
            unregister(r);
            end_reader(r, s, why);
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
            rn_live_reader *r = first_reader(rm);
            end_reader(r, rm->stream, RN_LIVE_TIMEOUT);
            assert(r->ended);
        }
        rm->walking = 0;
        room_release(live, rm);
    }
}

size_t rn_live_count(const rn_live *live) {
    return live->count;
}
