/*
 * pins.c — forks apart from their source (cluster mode: the fork's key
 * hashes to another group than its source's). The source's group records
 * each such fork as a pin (a PIN command of the source's log) and forgets
 * it by an UNPIN; a pin holds the source as a fork of its own group does
 * (soft deletion, retention). The fork's group records only the source's
 * id (rn_stream.apart_source): neither group's apply reads or changes the
 * other's state. See docs/ARCHITECTURE.md ("Forks across groups").
 */
#include "engine/fences.h"
#include "engine/state.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "util/buf.h"

int rn_stream_held(const rn_stream *s) {
    return s->refcount > 0 || s->npins > 0;
}

const rn_pin *rn_stream_pin(const rn_stream *s, uint64_t fork_id) {
    for (uint32_t k = 0; k < s->npins; k++)
        if (s->pins[k].fork_id == fork_id)
            return &s->pins[k];
    return NULL;
}

rn_stream *rn_state_fork_source(const rn_state *st, const rn_stream *s) {
    if (!s->apart_source)
        return s->source;
    rn_stream *src = rn_state_stream(st, s->apart_source);
    return src && rn_stream_pin(src, s->id) ? src : NULL;
}

void rn_state_apply_pin(rn_stream *s, const rn_cmd *c) {
    assert(c->type == RN_CMD_PIN && c->fork_id);
    if (rn_stream_pin(s, c->fork_id))
        return;
    s->pins = rn_xrealloc(s->pins, (s->npins + 1) * sizeof *s->pins);
    s->pins[s->npins++] = (rn_pin){.fork_id = c->fork_id, .time_ms = c->time_ms};
}

void rn_state_apply_unpin(rn_state *st, rn_stream *s, const rn_cmd *c, const rn_effects *fx) {
    assert(c->type == RN_CMD_UNPIN && c->fork_id);
    const rn_pin *p = rn_stream_pin(s, c->fork_id);
    if (!p)
        return;
    size_t k = (size_t)(p - s->pins);
    memmove(&s->pins[k], &s->pins[k + 1], (s->npins - k - 1) * sizeof *s->pins);
    s->npins--;
    if (s->soft_deleted && !rn_stream_held(s)) {
        if (rn_fences_covers(st, s))
            fx->purged(fx->ctx, s); /* its PURGE would have found nothing left */
        rn_state_destroy(st, s, fx);
    }
}
