/*
 * backup_image.c — the engine's side of backups and restores (engine.h):
 * the state image of one instant and what each stream's copy holds, reads
 * of those bytes that notice when they changed, and a restore's history
 * rewrite of every stream into a new data directory's checkpoint, or (a
 * cluster's) into per-group manifests after re-placing every stream.
 */
#include "engine/engine_int.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct rn_restore {
    rn_state state;
    int placed; /* rn_restore_place ran: ids and serials are a cluster's */
};

static uint64_t max_u64(uint64_t a, uint64_t b) {
    return a > b ? a : b;
}

/* 1 when [a, b) and the non-empty [c, d) share a position. */
static int overlaps(uint64_t a, uint64_t b, uint64_t c, uint64_t d) {
    return c < d && a < d && b > c;
}

/* What to copy of every applied stream of st. */
static void list_streams(const rn_state *st, rn_backup_stream **out, size_t *n) {
    *out = rn_xcalloc(st->by_id.count ? st->by_id.count : 1, sizeof **out);
    *n = 0;
    size_t i = 0;
    void *v;
    while (rn_map_next(&st->by_id, &i, &v)) {
        const rn_stream *s = v;
        if (s->pending_create)
            continue;
        rn_backup_stream *b = &(*out)[(*n)++];
        b->id = s->id;
        b->incarnation = s->incarnation;
        b->tail = s->tail;
        b->data_from = max_u64(s->fork_offset, s->retained);
        if (b->data_from > b->tail)
            b->data_from = b->tail;
        b->appends = s->appends;
        if (s->snapshot.present) {
            b->has_body = 1;
            b->body_cold = s->snapshot.cold;
            snprintf(b->body_key, sizeof b->body_key, "%s", s->snapshot.key);
            b->body_size = s->snapshot.size;
        }
    }
}

void rn_engine_backup_state(rn_engine *e, rn_buf *image, rn_backup_stream **streams, size_t *n) {
    engine_image_encode(&e->state, 0, image);
    list_streams(&e->state, streams, n);
}

int rn_engine_backup_read(rn_engine *e, const rn_backup_stream *b, int index, uint64_t from,
                          uint64_t to, rn_buf *out) {
    const rn_stream *s = rn_state_stream(&e->state, b->id);
    if (!s || s->incarnation != b->incarnation)
        return -ESTALE; /* deleted (ids are never reused), or rewritten */
    /* bytes a restored manifest named and this replica still fetches */
    if (index ? overlaps(from, to, s->gap_kfrom, s->gap_kto)
              : overlaps(from, to, s->gap_from, s->gap_to))
        return -ESTALE;
    if (index) {
        int rc = rn_engine_replica_index(e, b->id, from, to, out);
        return rc == -ENOENT || rc == -ERANGE ? -ESTALE : rc;
    }
    assert(from < to && to - from <= RN_REPLICA_FETCH_MAX);
    if (to > s->tail || from < max_u64(s->fork_offset, s->retained))
        return -ESTALE; /* retention advanced past from */
    /* Below the cold end as of now from the read cache, the rest from the
     * stream file: a chunk that moved since the instant holds the same
     * bytes in its object. */
    rn_buf_reserve(out, (size_t)(to - from));
    int rc = engine_read_range(e, s, from, (size_t)(to - from), out->data + out->len);
    if (rc == 0)
        out->len += (size_t)(to - from);
    return rc;
}

rn_restore *rn_restore_decode(const uint8_t *image, size_t len, rn_backup_stream **streams,
                              size_t *n) {
    rn_restore *r = rn_xcalloc(1, sizeof *r);
    rn_state_init(&r->state);
    uint64_t segment, count;
    if (engine_image_decode(&r->state, image, len, 0, &segment, &count) != 0) {
        rn_restore_free(r);
        return NULL;
    }
    /* A fence restored covers every stream, wherever the restore places
     * them (a cluster's groups, a single node): the bucket stays purged. */
    size_t i = 0;
    void *v;
    while (rn_map_next(&r->state.fences, &i, &v))
        ((rn_fence *)v)->all = 1;
    list_streams(&r->state, streams, n);
    return r;
}

uint64_t rn_restore_min_serial(const rn_restore *r) {
    return r->state.next_id;
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The cluster layout of placement.h: (serial << 16) | (node << 8) | group,
 * node byte 0 (no node has id 0, so no node ever issues it). */
static uint64_t placed_id(uint64_t serial, uint64_t group) {
    return (serial << 16) | group;
}

/* Makes fork s, whose source is in another group, a fork apart from it:
 * the source's pin holds it instead of its link. */
static void split_fork(rn_stream *s) {
    rn_stream *src = s->source;
    assert(src && src->refcount > 0);
    s->apart_source = src->id;
    s->source = NULL;
    src->refcount--;
    src->pins = rn_xrealloc(src->pins, (src->npins + 1) * sizeof *src->pins);
    src->pins[src->npins++] = (rn_pin){.fork_id = s->id, .time_ms = 0};
}

void rn_restore_place(rn_restore *r, rn_restore_group_fn group_of, void *arg,
                      const rn_backup_stream *streams, size_t n, uint64_t *new_ids) {
    assert(!r->placed);
    size_t count;
    rn_stream **all = rn_state_streams_by_id(&r->state, &count);
    uint64_t *old_ids = rn_xcalloc(count ? count : 1, sizeof *old_ids);
    for (size_t k = 0; k < count; k++) {
        old_ids[k] = all[k]->id;
        rn_map_remove(&r->state.by_id, &all[k]->id, sizeof all[k]->id);
    }
    for (size_t k = 0; k < count; k++) {
        rn_stream *s = all[k];
        s->id = placed_id(k + 1, group_of(arg, s->path, s->path_len));
        rn_map_put(&r->state.by_id, &s->id, sizeof s->id, s);
    }
    for (size_t k = 0; k < count; k++) /* in id order: the pins' order too */
        if (all[k]->source && (all[k]->id & 0xff) != (all[k]->source->id & 0xff))
            split_fork(all[k]);
    for (size_t i = 0; i < n; i++) {
        const uint64_t *at = bsearch(&streams[i].id, old_ids, count, sizeof *old_ids, cmp_u64);
        assert(at != NULL);
        new_ids[i] = all[at - old_ids]->id;
    }
    free(old_ids);
    free(all);
    r->placed = 1;
}

void rn_restore_body_key(rn_restore *r, uint64_t id, const char *key) {
    rn_stream *s = rn_state_stream(&r->state, id);
    assert(s && s->snapshot.present && strlen(key) < RN_TIERS_KEY_MAX);
    free(s->snapshot.key);
    s->snapshot.key = rn_xstrdup(key);
}

int rn_restore_rewrite(rn_restore *r, uint64_t serial_base, int64_t now_ms) {
    if (!r->placed && serial_base < r->state.next_id)
        return -EINVAL; /* its tokens could be ones the source issued */
    size_t n;
    rn_stream **all = rn_state_streams_by_id(&r->state, &n);
    /* A rewrite at the tail cuts nothing and drops no snapshot: it runs
     * no effect. */
    static const rn_effects none = {0};
    int rc = 0;
    for (size_t k = 0; k < n && rc == 0; k++) {
        rn_stream *s = all[k];
        s->cold_end = 0; /* the restored stream file holds every byte: none is cold */
        uint64_t serial = r->placed ? placed_id(serial_base + k, s->id & 0xff) : serial_base + k;
        /* key 0: a restore's tokens come from its serials, which the
         * backup's random id sets, so every attempt and every node of a
         * cluster restored from one backup gets the same ones (ext §2.4:
         * one rewrite per backup); the restored directory draws its own key
         * for what it creates later (ops/restore.c) */
        rn_cmd c = engine_rewrite_at_tail(s, now_ms, serial, 0);
        rn_applied applied;
        assert(!s->snapshot.present || s->snapshot.offset <= s->tail);
        rc = rn_state_apply(&r->state, &c, &none, &applied);
    }
    free(all);
    return rc;
}

int rn_restore_commit(rn_restore *r, const char *dir, uint64_t serial_base, int64_t now_ms) {
    assert(!r->placed);
    int rc = rn_restore_rewrite(r, serial_base, now_ms);
    rn_buf image = {0};
    if (rc == 0)
        rc = rn_wal_adopt_format1(dir); /* wal/HEAD naming segment 0: no segment yet */
    if (rc == 0) {
        engine_image_encode(&r->state, 1, &image);
        rc = engine_checkpoint_write(dir, &image);
    }
    rn_buf_free(&image);
    return rc;
}

void rn_restore_manifest(const rn_restore *r, rn_stream_pick pick, void *arg, unsigned group,
                         rn_buf *out) {
    engine_encode_streams(&r->state, pick, arg, out);
    engine_encode_namespaces(&r->state, out);
    if (r->state.fences.count) /* a manifest without fences reads as before them */
        engine_encode_fences(&r->state, (int)group, out);
}

void rn_restore_free(rn_restore *r) {
    if (!r)
        return;
    rn_state_free(&r->state);
    free(r);
}
