/*
 * damage.c — what the engine does when a stream's data does not match its
 * checksums (tiers/blocksums.h): in a cluster the damaged block becomes
 * part of the stream's gap (replica.c), fetched again from a peer and
 * rewritten; on a single node, with no other copy, the read is refused.
 * Also the scrub: a walk over every stream's own bytes, a bounded number
 * at a time, checking them without a reader asking. Loop thread only.
 */
#include "engine/engine_int.h"
#include "tiers/blocksums.h"
#include "util/log.h"
#include "util/metrics.h"

#include <errno.h>
#include <stdlib.h>

static uint64_t max_u64(uint64_t a, uint64_t b) {
    return a > b ? a : b;
}

static uint64_t min_u64(uint64_t a, uint64_t b) {
    return a < b ? a : b;
}

/* 1 the first time block `at` of stream id is reported (a single node's
 * damage stays, and every read of it would count it again). */
static int first_report(rn_engine *e, uint64_t id, uint64_t at) {
    uint64_t key[2] = {id, at};
    if (rn_map_get(&e->damaged, key, sizeof key))
        return 0;
    uint64_t *k = rn_xmalloc(sizeof key);
    k[0] = id, k[1] = at;
    rn_map_put(&e->damaged, k, sizeof key, k);
    return 1;
}

int engine_data_damaged(rn_engine *e, uint64_t id, uint64_t at, int by_scrub) {
    rn_stream *s = rn_state_stream(&e->state, id);
    if (!s)
        return -EUCLEAN;
    if (e->wal) { /* a single node: no other copy */
        if (first_report(e, id, at)) {
            rn_metric.data_blocks_unrepairable++;
            if (by_scrub)
                rn_metric.data_blocks_bad_scrub++;
            else
                rn_metric.data_blocks_bad_read++;
            rn_log(RN_LOG_ERROR, "stream_data_unrepairable",
                   "stream %.*s (%016llx): bytes %llu..%llu are damaged and this node has no "
                   "other copy; reads of them answer 500 STREAM_DATA_DAMAGED (restore the "
                   "stream from a backup)",
                   (int)s->path_len, s->path, (unsigned long long)id, (unsigned long long)at,
                   (unsigned long long)(at + RN_BLOCKSUM_BLOCK));
        }
        return -EUCLEAN;
    }
    uint64_t from = max_u64(at, engine_own_from(s)), to = min_u64(at + RN_BLOCKSUM_BLOCK, s->tail);
    if (from >= to)
        return -EUCLEAN; /* bytes this replica does not serve */
    if (by_scrub)
        rn_metric.data_blocks_bad_scrub++;
    else
        rn_metric.data_blocks_bad_read++;
    if (s->gap_from < s->gap_to) {
        from = min_u64(from, s->gap_from);
        to = max_u64(to, s->gap_to);
    }
    rn_streamfiles_gap g = engine_gap_record(s);
    g.from = from;
    g.to = to;
    if (rn_streamfiles_gap_put(e->files, id, &g) < 0) {
        rn_metric.data_blocks_unrepairable++;
        return -EUCLEAN; /* refused: without the record a restart would forget the gap */
    }
    s->gap_from = from;
    s->gap_to = to;
    s->damaged_blocks++;
    rn_log(RN_LOG_WARN, "stream_data_repair",
           "stream %.*s (%016llx): bytes %llu..%llu are damaged; fetching %llu..%llu from a peer",
           (int)s->path_len, s->path, (unsigned long long)id, (unsigned long long)at,
           (unsigned long long)(at + RN_BLOCKSUM_BLOCK), (unsigned long long)from,
           (unsigned long long)to);
    if (e->on_damage)
        e->on_damage(e->on_damage_arg, id);
    return -EAGAIN;
}

uint64_t engine_known_damage(rn_engine *e, const rn_stream *s, uint64_t from, uint64_t to) {
    if (e->damaged.count == 0)
        return UINT64_MAX;
    for (uint64_t b = from / RN_BLOCKSUM_BLOCK * RN_BLOCKSUM_BLOCK; b < to;
         b += RN_BLOCKSUM_BLOCK) {
        uint64_t key[2] = {s->id, b};
        if (rn_map_get(&e->damaged, key, sizeof key))
            return b;
    }
    return UINT64_MAX;
}

void engine_data_repaired(rn_engine *e, rn_stream *s) {
    if (!s->damaged_blocks || s->gap_from < s->gap_to)
        return;
    rn_metric.data_blocks_repaired += s->damaged_blocks;
    rn_log(RN_LOG_INFO, "stream_data_repaired",
           "stream %.*s (%016llx): %u damaged blocks rewritten with a peer's bytes",
           (int)s->path_len, s->path, (unsigned long long)s->id, s->damaged_blocks);
    s->damaged_blocks = 0;
}

void rn_engine_on_damage(rn_engine *e, void (*fn)(void *arg, uint64_t id), void *arg) {
    e->on_damage = fn;
    e->on_damage_arg = arg;
}

static void scrub_warmed(void *arg) {
    rn_engine *e = arg;
    e->scrub_warm = NULL;
}

/* Checks up to `budget` bytes of s from *off on, from the page cache;
 * returns the bytes done. At a miss it starts e->scrub_warm and stops. */
static uint64_t scrub_stream(rn_engine *e, rn_stream *s, uint64_t *off, uint64_t budget) {
    static uint8_t buf[64 << 10];
    uint64_t done = 0;
    *off = max_u64(*off, engine_own_from(s));
    while (done < budget && *off < s->tail) {
        if (*off >= s->gap_from && *off < s->gap_to)
            *off = s->gap_to; /* not here yet */
        uint64_t end = min_u64(s->tail, *off + min_u64(sizeof buf, budget - done));
        if (*off < s->gap_from && end > s->gap_from)
            end = s->gap_from;
        if (*off >= end)
            break;
        uint64_t bad = 0;
        ssize_t got = rn_streamfiles_read_cached(e->files, s->id, buf, end - *off, *off, &bad);
        if (got == -EINPROGRESS) {
            e->scrub_warm =
                engine_warm_range(e, RN_WARM_FOR_SCRUB, s->id, *off, end - *off, scrub_warmed, e);
            if (e->scrub_warm)
                break; /* the next tick reads it from the page cache */
            got = rn_streamfiles_read(e->files, s->id, buf, end - *off, *off, &bad);
        }
        if (got == -EUCLEAN) {
            engine_data_damaged(e, s->id, bad, 1);
            got = (ssize_t)(bad + RN_BLOCKSUM_BLOCK - *off); /* on past the block */
        }
        if (got <= 0) {
            *off = s->tail; /* unreadable now: the next pass tries again */
            break;
        }
        *off += (uint64_t)got;
        done += (uint64_t)got;
    }
    return done;
}

uint64_t rn_engine_scrub(rn_engine *e, uint64_t budget) {
    uint64_t done = 0;
    for (int turns = 0; done < budget && turns < 64 && !e->scrub_warm; turns++) {
        void *v = NULL;
        size_t slot = e->scrub_slot;
        if (!rn_map_next(&e->state.by_id, &slot, &v)) { /* a pass is over */
            if (e->scrub_slot != 0 || e->scrub_off != 0)
                rn_metric.scrub_passes++;
            e->scrub_slot = 0;
            e->scrub_off = 0;
            if (!rn_map_next(&e->state.by_id, &slot, &v))
                break; /* no streams */
        }
        rn_stream *s = v;
        if (s->id != e->scrub_id)
            e->scrub_off = 0; /* the walk moved on (or the map changed under it) */
        e->scrub_id = s->id;
        if (!s->pending_create)
            done += scrub_stream(e, s, &e->scrub_off, budget - done);
        if (s->pending_create || (e->scrub_off >= s->tail && !e->scrub_warm)) {
            e->scrub_slot = slot; /* the next stream */
            e->scrub_off = 0;
            e->scrub_id = 0;
        }
    }
    rn_metric.scrub_bytes += done;
    return done;
}
