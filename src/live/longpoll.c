/*
 * longpoll.c — long-polls parked at a stream's tail. See live.h.
 *
 * A parked long-poll waits for data past its offset, which it is answered
 * with; a close of the stream, its timeout or the shutdown answer it with
 * nothing new (204), a rewrite or removal of the stream in error. The
 * answers are the surface's (ops->answer_poll); the reader is finished
 * after each.
 */
#include "live/live_int.h"

#include <assert.h>

void rn_live_poll(rn_live *live, rn_live_reader *r, rn_stream *s, uint64_t timeout_ms) {
    assert(r->offset == s->tail && !s->closed);
    r->sse = 0;
    rn_live_register(live, r, s, timeout_ms);
}

void rn_live_poll_changed(rn_live_reader *r, rn_stream *s) {
    if (r->offset < s->tail)
        rn_live_poll_end(r, s, RN_LIVE_DATA);
    else if (s->closed)
        rn_live_poll_end(r, s, RN_LIVE_TIMEOUT);
}

void rn_live_poll_end(rn_live_reader *r, rn_stream *s, rn_live_end why) {
    assert(why != RN_LIVE_FAILED && why != RN_LIVE_DAMAGED && !r->ended);
    r->ops->answer_poll(r, s, why);
    rn_live_finish(r);
}
