/*
 * tiering.c — the engine's side of history tiering (tiers/history.c):
 * which chunks of which streams are due to move to the cold store, the
 * internal mutation that records a move (a TIER command, logged like any
 * other, so replay and a replicated log see it), the hot budget that
 * refuses appends while the backlog of due chunks is over it, and the
 * fetch of the cold bytes a read missed.
 *
 * A chunk is due once the stream's tail passed its end: every whole chunk
 * of the grid below the tail moves, from the stream's first chunk that
 * holds bytes of its own that are still kept (at or above its fork offset
 * and, unless forks read it, its retained offset). The backlog is the
 * bytes of due chunks not moved yet, counted at every tick of the flush.
 *
 * In a cluster every replica holds every stream's bytes, so the backlog
 * counts every stream (the disk it bounds holds them all), but a chunk is
 * moved only where the log takes its stream's commands: by the leader of
 * its group, once; every replica gives its copy back when the move's
 * TIER command applies (effects.c). A chunk that overlaps the replica's
 * gap (bytes it has yet to fetch from peers: engine.h) waits until it is
 * filled, since its file holds no bytes there to move.
 */
#include "engine/engine_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* The first offset of s's history that may still move: its cold end, or
 * the chunk holding the first byte of its own it keeps. Bytes below the
 * retained offset are kept too while forks read through them (retention
 * did not punch them: apply.c), and forks made later start at or above
 * it, so skipping them is safe only while no fork reads the stream. */
static uint64_t move_start(const rn_stream *s) {
    uint64_t retained = rn_stream_held(s) ? 0 : s->retained;
    uint64_t keep = s->fork_offset > retained ? s->fork_offset : retained;
    uint64_t start = keep / RN_CHUNK_BYTES * RN_CHUNK_BYTES;
    return s->cold_end > start ? s->cold_end : start;
}

static int tier_next(void *ctx, uint64_t *id, uint64_t *off) {
    rn_engine *e = ctx;
    uint64_t backlog = 0, most = 0;
    size_t i = 0;
    void *v;
    while (rn_map_next(&e->state.by_id, &i, &v)) {
        const rn_stream *s = v;
        if (s->pending_create || s->soft_deleted)
            continue;
        uint64_t start = move_start(s), due_end = s->tail / RN_CHUNK_BYTES * RN_CHUNK_BYTES;
        if (due_end <= start)
            continue;
        backlog += due_end - start;
        int movable = !(s->gap_from < s->gap_to && s->gap_from < start + RN_CHUNK_BYTES) &&
                      engine_log_accepts(e, s->path, s->path_len);
        if (movable && due_end - start > most) { /* the longest backlog first */
            most = due_end - start;
            *id = s->id;
            *off = start;
        }
    }
    e->cold_backlog = backlog;
    return most > 0;
}

static void history_warmed(void *arg) {
    rn_engine *e = arg;
    e->history_warm = NULL;
}

/* The bytes of a due chunk; the incarnation they belong to is kept for the
 * record, whose precondition it becomes (a rewrite meanwhile may have
 * changed them: the move is then refused and tried again). From the page
 * cache only: a chunk not all there is read into it on a worker and
 * -EINPROGRESS says to ask again later (the oldest bytes of a stream are
 * the likeliest to have left the cache, and the loop must not wait). */
static int tier_read(void *ctx, uint64_t id, uint64_t off, size_t len, uint8_t *out) {
    rn_engine *e = ctx;
    const rn_stream *s = rn_state_stream(&e->state, id);
    if (!s)
        return -ENOENT;
    if (e->history_warm)
        return -EINPROGRESS;
    e->tier_incarnation = s->incarnation;
    uint64_t bad = 0;
    ssize_t got = rn_streamfiles_read_cached(e->files, id, out, len, off, &bad);
    if (got == -EINPROGRESS) {
        e->history_warm =
            engine_warm_range(e, RN_WARM_FOR_HISTORY, id, off, len, history_warmed, e);
        if (e->history_warm)
            return -EINPROGRESS;
        got = rn_streamfiles_read(e->files, id, out, len, off, &bad);
    }
    if (got == -EUCLEAN) /* never moved: repaired first in a cluster */
        return engine_data_damaged(e, id, bad, 0);
    return got < 0 ? (int)got : (size_t)got == len ? 0 : -EIO;
}

typedef struct {
    rn_op op;
    rn_tiers_status_fn done;
    void *arg;
    char path[]; /* the op's stream path, kept until it is answered */
} tier_op;

static void tier_done(rn_op *op) {
    tier_op *t = op->arg;
    rn_result r = op->out.result;
    /* a stream deleted, soft-deleted, fenced by a bucket purge or cut
     * below the chunk meanwhile no longer wants it (its object is an
     * orphan), and a replica that no longer leads the stream's group
     * leaves the move to the one that does; other refusals (a rewrite's
     * new incarnation among them: the chunk is read again) retry */
    int settled = r == RN_OK_TIERED || r == RN_ERR_NOT_FOUND || r == RN_ERR_GONE ||
                  r == RN_ERR_BUCKET_ERASED || r == RN_ERR_CONFIG_MISMATCH || r == RN_ERR_NO_LEADER;
    t->done(t->arg, settled ? 0 : -EAGAIN);
    free(t);
}

static void tier_record(void *ctx, uint64_t id, uint64_t end, rn_tiers_status_fn done, void *arg) {
    rn_engine *e = ctx;
    const rn_stream *s = rn_state_stream(&e->state, id);
    if (!s || s->pending_create || s->soft_deleted) {
        done(arg, 0);
        return;
    }
    tier_op *t = rn_xcalloc(1, sizeof *t + s->path_len + 1);
    memcpy(t->path, s->path, s->path_len);
    t->done = done;
    t->arg = arg;
    t->op.in = (rn_op_request){.kind = RN_OP_TIER,
                               .path = t->path,
                               .path_len = s->path_len,
                               .ttl_s = -1,
                               .expires_at_ms = -1,
                               .has_incarnation = 1,
                               .incarnation = e->tier_incarnation,
                               .target_offset = end,
                               .stream_id = id};
    t->op.done = tier_done;
    t->op.arg = t;
    rn_engine_submit(e, &t->op);
}

void rn_engine_tier_history(rn_engine *e) {
    rn_tiers_history_source src = {
        .ctx = e, .next = tier_next, .read = tier_read, .record = tier_record};
    e->tiering = 1;
    rn_tiers_history_flush(e->cfg.tiers, &src);
}

int engine_hot_budget_spent(const rn_engine *e) {
    return e->tiering && e->cold_backlog >= e->cfg.hot_bytes;
}

rn_result engine_hot_budget_refusal(rn_engine *e, const char **cause) {
    /* a store that refuses the moves (credentials, permissions) is no
     * backpressure: waiting does not lift it */
    if (rn_tiers_history_failing(e->cfg.tiers, cause) == -EPERM)
        return RN_ERR_COLD_STORE_FAILED;
    return RN_ERR_COLD_BACKPRESSURE;
}

uint64_t rn_engine_cold_backlog(const rn_engine *e) {
    return e->cold_backlog;
}

void engine_cold_read_ahead(rn_engine *e, const rn_stream *s, uint64_t from, uint64_t len) {
    while (s && (s->source || s->apart_source) && !s->inherit && from < s->fork_offset)
        s = rn_state_fork_source(&e->state, s); /* a fork's bytes below its fork offset */
    if (s && from < s->cold_end)
        rn_tiers_history_read_ahead(e->cfg.tiers, s->id, from,
                                    len < s->cold_end - from ? from + len : s->cold_end);
}

void rn_engine_cold_fetch(rn_engine *e, rn_tiers_status_fn done, void *arg) {
    uint64_t id, off;
    if (!rn_tiers_history_missed(e->cfg.tiers, &id, &off)) {
        if (done)
            done(arg, -EIO);
        return;
    }
    /* read ahead: a reader of this chunk is likely to want the next */
    const rn_stream *s = rn_state_stream(&e->state, id);
    int ahead = s && off + 2 * (uint64_t)RN_CHUNK_BYTES <= s->cold_end;
    rn_tiers_history_fetch(e->cfg.tiers, id, off, done, arg);
    if (ahead)
        rn_tiers_history_fetch(e->cfg.tiers, id, off + RN_CHUNK_BYTES, NULL, NULL);
}
