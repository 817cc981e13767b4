/*
 * fences.c — the fences of bucket purges in the state machine: the table
 * (namespace -> rn_fence, state.h), and how FENCE and PURGE commands and a
 * create in a fenced namespace apply. Deterministic, like the rest of
 * apply: no I/O but through the caller's rn_effects, time from the
 * command.
 *
 * A fence is permanent: nothing removes one, a checkpoint, a manifest and
 * a backup's image carry it (checkpoint.c, replica.c), and a create its
 * fence covers is refused where it is decided for good, at apply (a create
 * validated before the fence applied may be logged after it). Which
 * streams a fence covers: all of them on a single node; in a replicated
 * log, the streams of each group whose own log applied the FENCE (the
 * group is an id's low byte), so that every replica decides a group's
 * creates from that group's log alone.
 *
 * Forks. A fork whose source chain reaches a purged stream read the bytes
 * below its fork point through it. Those bytes are the purged bucket's, so
 * they go: the fork's retained offset rises to where its chain reaches the
 * purged stream (reads below answer 410, as after a retention advance), a
 * snapshot of it below that offset goes (the updates after it are gone),
 * and the fork that read directly from it no longer has a source. Its own
 * bytes stay. A fork in another group (apart) is cut the same way by a CUT
 * of its own group's log, which the purged stream's leader asks for
 * (engine/cutforks.c) before it logs the PURGE: a PURGE of a stream still
 * pinned changes nothing.
 */
#include "engine/fences.h"
#include "util/buf.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

const rn_fence *rn_state_fence(const rn_state *st, const char *ns, size_t len) {
    return len && st->fences.count ? rn_map_get(&st->fences, ns, len) : NULL;
}

const rn_fence *rn_state_path_fence(const rn_state *st, const char *path, size_t len) {
    if (!st->fences.count)
        return NULL;
    const char *slash = memchr(path, '/', len);
    return slash && slash > path ? rn_state_fence(st, path, (size_t)(slash - path)) : NULL;
}

int rn_fence_covers(const rn_fence *f, uint64_t id) {
    unsigned g = (unsigned)(id & 0xff);
    return f->all || ((f->groups[g >> 3] >> (g & 7)) & 1);
}

void rn_state_add_fence(rn_state *st, const char *ns, size_t len, uint16_t scope, int64_t time_ms) {
    assert(len > 0 && (scope == RN_FENCE_ALL || scope < 256));
    rn_fence *f = rn_map_get(&st->fences, ns, len);
    if (!f) {
        f = rn_xcalloc(1, sizeof *f);
        f->ns = rn_xstrndup(ns, len);
        f->ns_len = len;
        f->time_ms = time_ms;
        rn_map_put(&st->fences, f->ns, f->ns_len, f);
    }
    if (scope == RN_FENCE_ALL)
        f->all = 1;
    else
        f->groups[scope >> 3] |= (uint8_t)(1u << (scope & 7));
}

void rn_state_free_fences(rn_state *st) {
    size_t i = 0;
    void *v;
    while (rn_map_next(&st->fences, &i, &v)) {
        rn_fence *f = v;
        free(f->ns);
        free(f);
    }
    rn_map_free(&st->fences);
}

void rn_fences_apply_fence(rn_state *st, const rn_cmd *c) {
    assert(c->type == RN_CMD_FENCE);
    rn_state_add_namespace(st, c->path, c->path_len); /* a purged bucket is still listed */
    rn_state_add_fence(st, c->path, c->path_len, c->fence_scope, c->time_ms);
}

int rn_fences_refuse_create(const rn_state *st, const rn_cmd *c, rn_applied *out) {
    const rn_fence *f = rn_state_path_fence(st, c->path, c->path_len);
    if (!f || !rn_fence_covers(f, c->stream_id))
        return 0;
    out->erased = 1;
    return 1;
}

uint64_t rn_fences_reach(const rn_stream *x, const rn_stream *s) {
    uint64_t floor = UINT64_MAX;
    for (int depth = 0; x->source && depth <= RN_MAX_FORK_DEPTH; depth++) {
        if (x->fork_offset < floor)
            floor = x->fork_offset;
        if (x->source == s)
            return floor;
        x = x->source;
    }
    return UINT64_MAX;
}

/* The depth of x's fork chain: the links to its top in this group, plus
 * the depth the top's CREATE recorded when the top is a fork apart. */
static uint32_t depth_of(const rn_stream *x) {
    uint32_t d = 0;
    for (; x->source && d <= RN_MAX_FORK_DEPTH; x = x->source)
        d++;
    return d + (x->apart_source ? x->fork_depth : 0);
}

/* Raises x's retained offset to floor: the bytes below it went with a
 * purged bucket. They are not x's own (they are below its fork offset),
 * so its file has none to give back, except where this replica keeps a
 * copy of them (inherit.c); a snapshot below goes (the updates after it
 * are gone). */
static void cut_at(rn_stream *x, uint64_t floor, const rn_effects *fx) {
    if (floor > x->retained) {
        uint64_t end = floor < x->fork_offset ? floor : x->fork_offset;
        if (x->inherit && end > x->retained)
            fx->retain(fx->ctx, x->id, x->retained, end - x->retained);
        x->retained = floor;
    }
    if (x->snapshot.present && x->snapshot.offset < x->retained) {
        fx->drop_body(fx->ctx, x, x->snapshot.cold, x->snapshot.key);
        free(x->snapshot.content_type);
        free(x->snapshot.key);
        memset(&x->snapshot, 0, sizeof x->snapshot);
    }
    x->touched = 1;
}

/* Cuts every fork of this group whose chain reaches s off the bytes it
 * read through s below limit (UINT64_MAX: all of s's); the forks that
 * read s directly forget it when s goes (gone). */
static void cut_forks(rn_state *st, rn_stream *s, uint64_t limit, int gone, const rn_effects *fx) {
    size_t n;
    rn_stream **all = rn_state_streams_by_id(st, &n);
    uint64_t *floors = rn_xcalloc(n ? n : 1, sizeof *floors);
    for (size_t k = 0; k < n; k++) {
        uint64_t f = all[k] == s ? UINT64_MAX : rn_fences_reach(all[k], s);
        floors[k] = f == UINT64_MAX || f < limit ? f : limit; /* UINT64_MAX: not a fork of s */
    }
    for (size_t k = 0; k < n; k++) {
        rn_stream *x = all[k];
        if (floors[k] == UINT64_MAX)
            continue;
        cut_at(x, floors[k], fx);
        if (gone && x->source == s) {
            x->source = NULL;
            s->refcount--;
        }
    }
    for (size_t k = 0; k < n; k++)
        if (floors[k] != UINT64_MAX)
            all[k]->fork_depth = depth_of(all[k]);
    free(floors);
    free(all);
}

int rn_fences_covers(const rn_state *st, const rn_stream *s) {
    const rn_fence *f = rn_state_path_fence(st, s->path, s->path_len);
    return f && rn_fence_covers(f, s->id);
}

void rn_fences_apply_purge(rn_state *st, rn_stream *s, const rn_effects *fx) {
    if (!rn_fences_covers(st, s) || s->npins > 0)
        return; /* pinned: its forks apart are cut first (cutforks.c), then unpinned */
    if (s->refcount > 0)
        cut_forks(st, s, UINT64_MAX, 1, fx);
    assert(s->refcount == 0);
    fx->purged(fx->ctx, s);
    rn_state_destroy(st, s, fx);
}

void rn_fences_apply_cut(rn_state *st, rn_stream *x, const rn_cmd *c, const rn_effects *fx) {
    assert(c->type == RN_CMD_CUT);
    if (x->apart_source != c->source_id)
        return; /* cut already (the source forgotten), or never its fork */
    uint64_t floor = c->offset < x->fork_offset ? c->offset : x->fork_offset;
    if (c->offset == RN_CUT_SOURCE)
        x->apart_source = 0;
    cut_at(x, floor, fx);
    cut_forks(st, x, floor, 0, fx);
    x->fork_depth = depth_of(x);
}
