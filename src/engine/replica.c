/*
 * replica.c — the engine in replicated mode (cluster mode): no log of its
 * own, its state set from manifests and changed by the commands a
 * replicated log applies, including other replicas' (see engine.h,
 * "replicated mode"; cluster/raft_log.c is that log).
 */
#include "engine/engine_int.h"
#include "util/clock.h"

#include <stdlib.h>
#include <string.h>

rn_engine *rn_engine_open_replicated(uv_loop_t *loop, const rn_engine_config *cfg, char *err,
                                     size_t errcap) {
    return engine_new(loop, cfg, err, errcap);
}

rn_cmdlog_applier rn_engine_applier(rn_engine *e) {
    return (rn_cmdlog_applier){.ctx = e, .apply = engine_apply_logged};
}

void rn_engine_set_log(rn_engine *e, rn_cmdlog *log) {
    assert(!e->wal && !e->log && log);
    e->log = log;
}

void rn_engine_applied_elsewhere(rn_engine *e, const rn_applied *a) {
    engine_rerun_orphans(e);
    rn_stream *s = rn_state_stream(&e->state, a->stream_id);
    if (s && a->notify && !s->pending_create)
        engine_notify(e, s, a->event);
}

int rn_engine_sync_stream(const rn_engine *e, uint64_t id) {
    return rn_streamfiles_sync_stream(e->files, id);
}

void rn_engine_manifest(rn_engine *e, rn_stream_pick pick, void *arg, rn_buf *out) {
    engine_encode_streams(&e->state, pick, arg, out);
    engine_encode_namespaces(&e->state, out);
}

/* Moves what a manifest says of a stream from src (decoded, out of every
 * table) into dst, the same stream (id and path) here; dst keeps its
 * runtime fields (queue, waiters, files, TTL window) and loses its fork
 * links (relinked by the caller). Frees src. */
static void take_stream_state(rn_stream *dst, rn_stream *src) {
    rn_stream keep = *dst;
    free(dst->content_type);
    free(dst->last_seq);
    free(dst->snapshot.content_type);
    free(dst->snapshot.key);
    *dst = *src;
    dst->path = keep.path; /* the tables' keys point at it */
    dst->path_len = keep.path_len;
    dst->last_access_ms = keep.last_access_ms;
    dst->touched = keep.touched;
    dst->busy = keep.busy;
    dst->has_files = keep.has_files;
    dst->queue_head = keep.queue_head;
    dst->queue_tail = keep.queue_tail;
    dst->waiters = keep.waiters;
    dst->live_readers = keep.live_readers;
    dst->source = NULL;
    dst->refcount = 0;
    dst->fork_depth = 0;
    /* src keeps only what dst did not take: its path and dst's producers */
    src->producers = keep.producers;
    src->content_type = src->last_seq = src->snapshot.content_type = src->snapshot.key = NULL;
    rn_state_free_stream(src);
}

int rn_engine_restore(rn_engine *e, rn_stream_pick pick, void *arg, const uint8_t *m, size_t len) {
    rn_state scratch;
    rn_state_init(&scratch);
    rn_reader r;
    rn_reader_init(&r, m, len);
    uint64_t count = rn_read_u64(&r);
    if (r.failed || count > len) {
        rn_state_free(&scratch);
        return -1;
    }
    rn_stream **loaded = rn_xcalloc(count ? count : 1, sizeof *loaded);
    uint64_t *sources = rn_xcalloc(count ? count : 1, sizeof *sources);
    uint64_t k = 0;
    int64_t now = rn_now_ms();
    for (; k < count && !r.failed; k++)
        if (!(loaded[k] = engine_decode_stream(&scratch, &r, now, &sources[k])))
            break;
    engine_decode_namespaces(&scratch, &r);
    int ok = k == count && !r.failed && r.p == r.end;
    for (uint64_t j = 0; ok && j < count; j++) /* every stream the manifest names is its own */
        ok = pick(loaded[j], arg) && (!sources[j] || rn_state_stream(&scratch, sources[j]));
    if (!ok) {
        free(loaded);
        free(sources);
        rn_state_free(&scratch);
        return -1;
    }
    /* Unlink the group's forks (they are relinked below), then drop the
     * streams the manifest does not hold: their readers end, their files go. */
    rn_stream **mine = NULL;
    size_t n = 0, cap = 0, i = 0;
    void *v;
    while (rn_map_next(&e->state.by_id, &i, &v)) {
        rn_stream *s = v;
        if (!pick(s, arg))
            continue;
        s->source = NULL;
        s->refcount = 0;
        if (n == cap)
            mine = rn_xrealloc(mine, (cap = cap ? cap * 2 : 16) * sizeof *mine);
        mine[n++] = s;
    }
    for (size_t j = 0; j < n; j++) {
        rn_stream *s = mine[j];
        rn_stream *keep = rn_state_stream(&scratch, s->id);
        if (!keep || s->pending_create || rn_state_at(&scratch, s->path, s->path_len) != keep)
            engine_destroy(e, s);
    }
    free(mine);
    /* Take the manifest's streams over: in place where the stream is here
     * already (its readers stay), else as new ones. */
    for (uint64_t j = 0; j < count; j++) {
        rn_stream *src = loaded[j];
        rn_map_remove(&scratch.by_path, src->path, src->path_len);
        rn_map_remove(&scratch.by_id, &src->id, sizeof src->id);
        rn_stream *dst = rn_state_stream(&e->state, src->id);
        uint64_t old_tail = dst ? dst->tail : 0, old_incarnation = dst ? dst->incarnation : 0;
        if (dst) {
            take_stream_state(dst, src);
            loaded[j] = dst;
            if (dst->waiters && dst->incarnation != old_incarnation)
                engine_notify(e, dst, RN_STREAM_REWRITTEN);
            else if (dst->waiters && dst->tail != old_tail)
                engine_notify(e, dst, RN_STREAM_CHANGED);
        } else {
            rn_state_adopt(&e->state, src);
        }
    }
    i = 0;
    while (rn_map_next(&scratch.namespaces, &i, &v))
        rn_state_add_namespace(&e->state, v, strlen(v));
    int rc = engine_link_forks(&e->state, loaded, sources, count);
    free(loaded);
    free(sources);
    rn_state_free(&scratch);
    engine_rerun_orphans(e);
    return rc;
}
