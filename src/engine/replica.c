/*
 * replica.c — the engine in replicated mode (cluster mode): no log of its
 * own, its state set from manifests and changed by the commands a
 * replicated log applies, including other replicas' (see engine.h,
 * "replicated mode"; cluster/raft_log.c is that log).
 */
#include "engine/engine_int.h"
#include "util/clock.h"
#include "util/fault.h"

#include <stdlib.h>
#include <string.h>

rn_engine *rn_engine_open_replicated(uv_loop_t *loop, const rn_engine_config *cfg) {
    return engine_new(loop, cfg);
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

const rn_stream *rn_engine_stream(rn_engine *e, uint64_t id) {
    return rn_state_stream(&e->state, id);
}

int rn_engine_reserve_apply(rn_engine *e, const rn_cmd *cmd) {
    int rc = rn_fault_fail("apply-reserve");
    if (rc < 0 || !cmd->data_len)
        return rc;
    const rn_stream *s = rn_state_stream(&e->state, cmd->stream_id);
    uint64_t k = s && cmd->type != RN_CMD_CREATE ? s->appends : 0;
    rn_streamfiles_pin pin;
    rc = rn_streamfiles_pin_append(e->files, cmd->stream_id, cmd->offset, cmd->data_len, k, &pin);
    if (rc == 0)
        rn_streamfiles_unpin(&pin);
    return rc;
}

int rn_engine_sync_stream(const rn_engine *e, uint64_t id) {
    return rn_streamfiles_sync_stream(e->files, id);
}

void rn_engine_manifest(rn_engine *e, rn_stream_pick pick, void *arg, unsigned group, rn_buf *out) {
    engine_encode_streams(&e->state, pick, arg, out);
    engine_encode_namespaces(&e->state, out);
    /* then, each only when needed: the group's fences (a count of 0 when
     * only cold ends follow), and the cold ends of streams that moved
     * history (a manifest built before either reads as it did) */
    rn_buf cold = {0};
    engine_encode_cold_ends(&e->state, pick, arg, &cold);
    int has_cold = cold.len > 8;                     /* more than a count of 0 */
    int has_subs = engine_subs_in(&e->state, group); /* last: the subscriptions' state */
    if (e->state.fences.count || has_cold || has_subs)
        engine_encode_fences(&e->state, (int)group, out);
    if (has_cold || has_subs)
        rn_buf_append(out, cold.data, cold.len);
    rn_buf_free(&cold);
    if (has_subs)
        rn_buf_append_lstr(out, e->state.subs.data, e->state.subs.len);
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
    free(dst->pins);
    *dst = *src;
    dst->path = keep.path; /* the tables' keys point at it */
    dst->path_len = keep.path_len;
    dst->last_access_ms = keep.last_access_ms;
    dst->touched = keep.touched;
    dst->touch_shared = keep.touch_shared;
    dst->busy = keep.busy;
    dst->has_files = keep.has_files;
    dst->queue_head = keep.queue_head;
    dst->queue_tail = keep.queue_tail;
    dst->live_room = keep.live_room;
    dst->live_readers = keep.live_readers;
    dst->source = NULL;
    dst->refcount = 0;
    dst->fork_depth = 0;
    /* src keeps only what dst did not take: its path and dst's producers */
    src->producers = keep.producers;
    src->content_type = src->last_seq = src->snapshot.content_type = src->snapshot.key = NULL;
    src->pins = NULL;
    rn_state_free_stream(src);
}

/* ---- gaps: what a restored manifest names and the files lack ---- */

static uint64_t min_u64(uint64_t a, uint64_t b) {
    return a < b ? a : b;
}

static uint64_t max_u64(uint64_t a, uint64_t b) {
    return a > b ? a : b;
}

/* Sets s's gap from its files and its gap record: the hull of what the
 * record says is missing and of what the files lack below the tail (data)
 * and the append count (index), within the stream's own range (for a fork
 * whose inherited range this replica keeps, inherit.c, from its retained
 * offset: all of that range when it starts keeping it); records it
 * durably (or drops an empty record). */
void engine_find_gap(rn_engine *e, rn_stream *s) {
    rn_streamfiles_gap rec = {0};
    int has = rn_streamfiles_gap_get(e->files, s->id, &rec) == 0;
    int starts = !s->inherit && !(has && rec.held) && engine_inherit_wanted(e, s);
    s->inherit = s->inherit || (has && rec.held) || starts;
    uint64_t len = 0, entries = 0;
    if (rn_streamfiles_extent(e->files, s->id, &len, &entries) < 0)
        len = entries = 0; /* unreadable: fetch everything */
    /* bytes below the cold end are read from the cold store: never fetched */
    uint64_t own = engine_own_from(s);
    uint64_t from = has ? rec.from : UINT64_MAX, to = has ? rec.to : 0;
    if (len < s->tail) {
        from = min_u64(from, len);
        to = s->tail;
    }
    if (starts) { /* the file holds none of it: a hole below the fork's own bytes */
        from = min_u64(from, own);
        to = max_u64(to, s->fork_offset);
    }
    s->gap_from = max_u64(from, own);
    s->gap_to = min_u64(to, s->tail);
    if (s->gap_from >= s->gap_to)
        s->gap_from = s->gap_to = 0;
    uint64_t kfrom = has ? rec.kfrom : UINT64_MAX, kto = has ? rec.kto : 0;
    if (entries < s->appends) {
        kfrom = min_u64(kfrom, entries);
        kto = s->appends;
    }
    s->gap_kfrom = kfrom;
    s->gap_kto = min_u64(kto, s->appends);
    if (s->gap_kfrom >= s->gap_kto)
        s->gap_kfrom = s->gap_kto = 0;
    rn_streamfiles_gap now = engine_gap_record(s);
    if (now.from < now.to || now.kfrom < now.kto)
        rn_log(RN_LOG_INFO, "cluster_gap",
               "stream %016llx: the %s names bytes %llu..%llu and index entries "
               "%llu..%llu this node lacks; fetching them from peers",
               (unsigned long long)s->id,
               starts ? "copy of the fork's inherited range" : "restored state",
               (unsigned long long)now.from, (unsigned long long)now.to,
               (unsigned long long)now.kfrom, (unsigned long long)now.kto);
    if ((has || now.from < now.to || now.kfrom < now.kto || now.held) &&
        rn_streamfiles_gap_put(e->files, s->id, &now) < 0) {
        rn_log(RN_LOG_ERROR, "fatal", "stream %llx: its gap record cannot be written",
               (unsigned long long)s->id);
        abort(); /* later appends would hide the gap from the next start */
    }
}

int rn_engine_gap(rn_engine *e, uint64_t id, rn_streamfiles_gap *out) {
    rn_stream *s = rn_state_stream(&e->state, id);
    if (!s || s->pending_create)
        return 0;
    *out = engine_gap_record(s);
    return out->from < out->to || out->kfrom < out->kto;
}

void rn_engine_gaps(rn_engine *e, rn_stream_pick pick, void *arg, void (*fn)(uint64_t, void *),
                    void *fn_arg) {
    engine_inherit_scan(e);
    size_t i = 0;
    void *v;
    while (rn_map_next(&e->state.by_id, &i, &v)) {
        rn_stream *s = v;
        if ((s->gap_from < s->gap_to || s->gap_kfrom < s->gap_kto) && pick(s, arg))
            fn(s->id, fn_arg);
    }
}

/* Records s's smaller gap (after a fill). */
static int gap_shrunk(rn_engine *e, rn_stream *s) {
    if (s->gap_from >= s->gap_to)
        s->gap_from = s->gap_to = 0;
    if (s->gap_kfrom >= s->gap_kto)
        s->gap_kfrom = s->gap_kto = 0;
    int rc = rn_streamfiles_sync_stream(e->files, s->id); /* the bytes before the record */
    rn_streamfiles_gap now = engine_gap_record(s);
    rc = rc < 0 ? rc : rn_streamfiles_gap_put(e->files, s->id, &now);
    if (rc == 0)
        engine_data_repaired(e, s);
    return rc;
}

int rn_engine_gap_fill_data(rn_engine *e, uint64_t id, uint64_t off, const uint8_t *data,
                            size_t len) {
    rn_stream *s = rn_state_stream(&e->state, id);
    if (!s || off != s->gap_from || off >= s->gap_to || len == 0)
        return -ESTALE; /* the gap changed meanwhile */
    size_t n = (size_t)min_u64(len, s->gap_to - off);
    int rc = rn_streamfiles_write(e->files, id, data, n, off);
    if (rc < 0)
        return rc;
    s->gap_from = off + n;
    return gap_shrunk(e, s);
}

int rn_engine_gap_fill_index(rn_engine *e, uint64_t id, uint64_t k, const uint64_t *ends,
                             size_t n) {
    rn_stream *s = rn_state_stream(&e->state, id);
    if (!s || k != s->gap_kfrom || k >= s->gap_kto || n == 0)
        return -ESTALE;
    n = (size_t)min_u64(n, s->gap_kto - k);
    for (size_t j = 0; j < n; j++) {
        int rc = rn_streamfiles_index_set(e->files, id, k + j, ends[j]);
        if (rc < 0)
            return rc;
    }
    s->gap_kfrom = k + n;
    return gap_shrunk(e, s);
}

int rn_engine_replica_bytes(rn_engine *e, uint64_t id, uint64_t from, uint64_t to, rn_buf *out) {
    rn_stream *s = rn_state_stream(&e->state, id);
    if (!s || s->pending_create)
        return -ENOENT;
    if (from >= to || to > s->tail || from < s->retained || to - from > RN_REPLICA_FETCH_MAX)
        return -ERANGE;
    rn_buf_reserve(out, (size_t)(to - from));
    int rc = engine_read_range(e, s, from, (size_t)(to - from), out->data + out->len);
    if (rc == 0)
        out->len += (size_t)(to - from);
    return rc;
}

int rn_engine_replica_index(rn_engine *e, uint64_t id, uint64_t kfrom, uint64_t kto, rn_buf *out) {
    rn_stream *s = rn_state_stream(&e->state, id);
    if (!s || s->pending_create)
        return -ENOENT;
    if (kfrom >= kto || kto > s->appends || (kto - kfrom) * 8 > RN_REPLICA_FETCH_MAX)
        return -ERANGE;
    if (kfrom < s->gap_kto && kto > s->gap_kfrom)
        return -EAGAIN;
    for (uint64_t k = kfrom; k < kto; k++) {
        uint64_t end;
        int rc = rn_streamfiles_index_get(e->files, id, k, &end);
        if (rc < 0)
            return rc;
        rn_buf_append_u64(out, end);
    }
    return 0;
}

int rn_engine_restore(rn_engine *e, rn_stream_pick pick, void *arg, unsigned group,
                      const uint8_t *m, size_t len) {
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
    if (!r.failed && r.p != r.end)
        engine_decode_fences(&scratch, (int)group, &r);
    if (k == count && !r.failed && r.p != r.end) /* absent from manifests before tiering */
        engine_decode_cold_ends(&scratch, &r);
    const uint8_t *subs = NULL; /* the carrying group's only */
    size_t subs_len = 0;
    if (k == count && !r.failed && r.p != r.end)
        subs = rn_read_lstr(&r, &subs_len);
    int ok = k == count && !r.failed && r.p == r.end;
    for (uint64_t j = 0; ok && j < count; j++) /* every stream the manifest names is its own */
        ok = pick(loaded[j], arg) && (!sources[j] || (sources[j] & RN_CMD_SOURCE_APART) ||
                                      rn_state_stream(&scratch, sources[j]));
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
            if (dst->live_room && dst->incarnation != old_incarnation)
                engine_notify(e, dst, RN_STREAM_REWRITTEN);
            else if (dst->live_room && dst->tail != old_tail)
                engine_notify(e, dst, RN_STREAM_CHANGED);
        } else {
            rn_state_adopt(&e->state, src);
        }
    }
    i = 0;
    while (rn_map_next(&scratch.namespaces, &i, &v))
        rn_state_add_namespace(&e->state, v, strlen(v));
    i = 0;
    while (rn_map_next(&scratch.fences, &i, &v)) { /* a fence is never taken back */
        const rn_fence *f = v;
        rn_state_add_fence(&e->state, f->ns, f->ns_len, (uint16_t)group, f->time_ms);
    }
    if (scratch.fences.count)
        engine_purge_wanted(e);
    engine_restore_subs(&e->state, group, subs && subs_len ? subs : NULL, subs_len);
    int rc = engine_link_forks(&e->state, loaded, sources, count);
    for (uint64_t j = 0; j < count; j++) {
        if (loaded[j]->cold_end) /* the moves the manifest holds: their bytes are cold */
            rn_streamfiles_punch(e->files, loaded[j]->id, 0, loaded[j]->cold_end);
        engine_find_gap(e, loaded[j]);
    }
    free(loaded);
    free(sources);
    rn_state_free(&scratch);
    engine_rerun_orphans(e);
    return rc;
}
