/*
 * effects.c — what applying a command does outside the state machine, on
 * this engine: data into the stream files (tiers/streamfiles.h), holes
 * punched, files cut and removed, snapshot bodies dropped (tiers/tiers.h),
 * observers told, and mutations queued on a destroyed stream handed back
 * to the pipeline. The kill points of the apply path (util/fault.h) sit
 * around these operations. Also the entry points that apply a command:
 * for recovery (engine_apply) and for a command log (engine_apply_logged).
 */
#include "engine/engine_int.h"
#include "tiers/blocksums.h"
#include "util/fault.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

void engine_notify(rn_engine *e, rn_stream *s, rn_stream_event ev) {
    for (int i = 0; i < e->observer_count; i++)
        e->observers[i].fn(s, ev, e->observers[i].arg);
}

/* A command's data, written at apply (recovery; a log that does not
 * write it after its sync). */
static int store_at_apply(void *ctx, uint64_t id, const rn_cmd *c, uint64_t k) {
    rn_engine *e = ctx;
    rn_fault_point("apply-before-store");
    if (c->stored_ahead) /* replay: the bytes are in the file, synced before the record */
        return rn_streamfiles_restore_sums(e->files, id, c->offset, c->data_len, c->block_sums, k);
    return rn_streamfiles_append(e->files, id, c->data, c->data_len, c->offset, k);
}

/* A command's data that the log's writer wrote after the sync, or that
 * was written and synced before it was logged (engine/ahead.c). */
static int stored_by_log(void *ctx, uint64_t id, const rn_cmd *c, uint64_t k) {
    (void)ctx, (void)id, (void)c, (void)k;
    return 0;
}

/* Gives back what retention cleared. A fork's kept copy of its inherited
 * range (inherit.c) that a bucket purge cut is not fetched any more where
 * it is not here yet: its gap starts past the cut. */
static void retain_files(void *ctx, uint64_t id, uint64_t from, uint64_t len) {
    rn_engine *e = ctx;
    rn_fault_point("retain-before-punch");
    if (len)
        rn_streamfiles_punch(e->files, id, from, len);
    rn_fault_point("retain-after-punch");
    rn_stream *s = rn_state_stream(&e->state, id);
    uint64_t end = from + len;
    if (len && s && s->inherit && s->gap_from < s->gap_to && s->gap_from < end)
        s->gap_from = end < s->gap_to ? end : s->gap_to;
}

typedef struct {
    rn_engine *e;
    uint64_t id, off;
} chunk_read;

static int read_chunk(void *ctx, uint8_t *out) {
    const chunk_read *c = ctx;
    /* bytes the file gave back already read as zeros, not as the chunk: a
     * move applied again after a restart (the Raft log replayed past the
     * snapshot the state came from) finds its chunk punched before */
    ssize_t got = rn_streamfiles_read_verified(c->e->files, c->id, out, RN_CHUNK_BYTES, c->off);
    return got == (ssize_t)RN_CHUNK_BYTES ? 0 : -EIO;
}

/* Before its file gives them back, a replica keeps the moved chunks its
 * file holds in the read cache, as the node that moved them did (a
 * replica of a cluster applies moves its group's leader made): an answer
 * being sent in pieces from the file reads its later pieces there. */
static void keep_moved(rn_engine *e, uint64_t id, uint64_t from, uint64_t len) {
    const rn_stream *s = rn_state_stream(&e->state, id);
    if (!e->tiering || !s)
        return;
    for (uint64_t off = from; off + RN_CHUNK_BYTES <= from + len; off += RN_CHUNK_BYTES) {
        if (off < s->gap_to && off + RN_CHUNK_BYTES > s->gap_from)
            continue; /* bytes this replica never had */
        chunk_read c = {e, id, off};
        rn_tiers_history_keep(e->cfg.tiers, id, off, read_chunk, &c);
    }
}

/* The moved bytes leave the stream file, and a replica's gap no longer
 * wants them (engine.h: they are read from the cold store now). A fork
 * whose inherited bytes this replica keeps in its own file (inherit.c)
 * keeps them: they are read there, never from the cold store, so only
 * the blocks from its fork offset on are given back, and a gap still
 * waiting for some of them stays. */
static void tiered_files(void *ctx, uint64_t id, uint64_t from, uint64_t len) {
    rn_engine *e = ctx;
    rn_stream *s = rn_state_stream(&e->state, id);
    uint64_t end = from + len;
    keep_moved(e, id, from, len);
    if (s && s->inherit && from < s->fork_offset) {
        uint64_t own =
            (s->fork_offset + RN_BLOCKSUM_BLOCK - 1) / RN_BLOCKSUM_BLOCK * RN_BLOCKSUM_BLOCK;
        from = own < end ? own : end;
    }
    rn_fault_point("tier-before-punch");
    rn_streamfiles_punch(e->files, id, from, end - from);
    rn_fault_point("tier-after-punch");
    int copy_pending = s && s->inherit && s->gap_from < from; /* fetched, then read */
    if (s && !copy_pending && s->gap_from < end && s->gap_from < s->gap_to)
        s->gap_from = end < s->gap_to ? end : s->gap_to;
}

/* Drops index entries past keep (an append the cut splits becomes one
 * that ends there) and cuts both files. */
static uint64_t cut_files(void *ctx, const rn_stream *s, uint64_t keep) {
    rn_engine *e = ctx;
    uint64_t appends = s->appends, end = s->fork_offset;
    while (appends > 0 && rn_streamfiles_index_get(e->files, s->id, appends - 1, &end) == 0 &&
           end > keep)
        appends--;
    if (appends == 0)
        end = s->fork_offset;
    if (end < keep && rn_streamfiles_index_set(e->files, s->id, appends, keep) == 0)
        appends++;
    rn_streamfiles_truncate(e->files, s->id, keep, appends);
    return appends;
}

/* Whether this replica removes stream s's objects from a store every
 * replica shares (a network cold store): the one whose log takes s's
 * commands (a single node; in a cluster, the leader of s's group), so
 * each object is removed once. What a leader change leaves (entries a new
 * leader applies before it serves) is the orphan sweep's. Recovery: yes. */
static int removes_shared(const rn_engine *e, const rn_stream *s) {
    return !e->log || engine_log_accepts(e, s->path, s->path_len);
}

static void drop_body(void *ctx, const rn_stream *s, int cold, const char *key) {
    rn_engine *e = ctx;
    if (!rn_tiers_body_shared(e->cfg.tiers, cold) || removes_shared(e, s))
        rn_tiers_body_drop(e->cfg.tiers, cold, key);
}

static void removed(void *ctx, rn_stream *s) {
    engine_notify(ctx, s, RN_STREAM_REMOVED);
}

/* Removes a destroyed stream's files, snapshot body, history objects and
 * staged parts, and keeps the mutations queued on it for the pipeline to
 * re-run once apply is over: they then see no stream. */
static void destroyed(void *ctx, rn_stream *s) {
    rn_engine *e = ctx;
    if (s->apart_source && !s->pending_create)
        engine_apart_destroyed(e, s);
    rn_fault_point("delete-before-remove");
    rn_streamfiles_remove(e->files, s->id);
    if (s->snapshot.present)
        drop_body(e, s, s->snapshot.cold, s->snapshot.key);
    if (s->cold_end && removes_shared(e, s))
        rn_tiers_history_drop(e->cfg.tiers, s->id);
    if (removes_shared(e, s))
        rn_tiers_parts_drop(e->cfg.tiers, s->id);
    rn_fault_point("delete-after-remove");
    if (!s->queue_head)
        return;
    if (e->orphans_tail)
        priv(e->orphans_tail)->next_queued = s->queue_head;
    else
        e->orphans = s->queue_head;
    e->orphans_tail = s->queue_tail;
}

/* A purge leaves nothing of the stream to later sweeps: its staged
 * snapshot parts go now, whatever their incarnation and age. */
static void purged(void *ctx, const rn_stream *s) {
    rn_engine *e = ctx;
    rn_tiers_parts_drop(e->cfg.tiers, s->id);
}

/* The effects of apply on this engine's storage and observers (ctx and,
 * live, store are set per call). */
static const rn_effects effects = {
    .store = store_at_apply,
    .retain = retain_files,
    .tiered = tiered_files,
    .cut = cut_files,
    .drop_body = drop_body,
    .removed = removed,
    .destroyed = destroyed,
    .purged = purged,
};

int engine_apply(rn_engine *e, const rn_cmd *c, int data_stored, rn_applied *out) {
    rn_effects fx = effects;
    fx.ctx = e;
    if (data_stored)
        fx.store = stored_by_log;
    if (c->type == RN_CMD_FENCE)
        engine_purge_wanted(e); /* its streams go by the purge driver's PURGEs */
    return rn_state_apply(&e->state, c, &fx, out);
}

/* A failure here (the stream file cannot be written, or a command that
 * does not fit the state) leaves the log ahead of the state: stop, and
 * recovery redoes it from the log. */
void engine_apply_logged(void *ctx, const rn_cmd *cmd, int data_stored, rn_applied *out) {
    int rc = engine_apply(ctx, cmd, data_stored, out);
    if (rc < 0) {
        rn_log(RN_LOG_ERROR, "fatal", "a command durable in the log could not be applied: %s",
               strerror(-rc));
        abort();
    }
    if (cmd->type == RN_CMD_CREATE && (cmd->source_id & RN_CMD_SOURCE_APART) && !out->erased)
        engine_inherit_created(ctx, cmd->stream_id);
}

void engine_destroy(rn_engine *e, rn_stream *s) {
    rn_effects fx = effects;
    fx.ctx = e;
    rn_state_destroy(&e->state, s, &fx);
}

void engine_destroy_pending(rn_engine *e, rn_stream *s) {
    assert(s->pending_create);
    engine_destroy(e, s);
}
