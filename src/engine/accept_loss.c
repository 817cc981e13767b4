/*
 * accept_loss.c — an operator's acceptance of a log loss (--accept-loss).
 *
 * Recovery refuses to start when acknowledged records do not read back
 * (log/recover.c) and names the damage (damage_report.h). When the
 * operator started with --accept-loss naming exactly that damage, the
 * engine keeps the log's readable prefix (everything before the first
 * thing that does not read back), drops every record after it, and
 * rewrites the history of every stream (extensions §2.4): which streams
 * the unreadable records touched cannot be known, so every stream gets a
 * new incarnation, reports its token before the loss as
 * Stream-Previous-Incarnation with the tail it kept as
 * Stream-Inherited-Offset, and has its producers' epochs closed by
 * history. The open then checkpoints before serving (open.c), which
 * retires the damaged segments, so the next start neither refuses nor
 * rewrites again.
 *
 * The bytes a stream keeps are only those the server can prove. A dropped
 * record may have been a move of history to the cold store (a TIER
 * command), whose apply punched the moved chunks out of the stream file:
 * the kept state then believes the bytes local while the file holds a
 * hole (reading zeros), and the flush would move those zeros again, over
 * the only good copy. So: a move that still reads back after the damage
 * proves its chunks are in the cold store (their objects were durable
 * before it was logged) and is kept; then every stream's file must hold
 * data for all of its bytes the state believes local, and a stream whose
 * file does not keeps only the bytes below the first one it lacks (its
 * inherited offset stops there). A stream that forks read cannot be cut
 * under them: such a loss is refused.
 */
#include "engine/damage_report.h"
#include "engine/engine_int.h"
#include "util/clock.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Stream ids and rewrite serials are issued in order. The highest one a
 * readable record after the damage names bounds those issued before it;
 * the unreadable records at the end of the log may have issued more, far
 * fewer than this margin. */
#define LOST_SERIALS_MARGIN (1ull << 32)

int engine_loss_named(const rn_engine *e, const rn_wal_damage *damage) {
    char name[RN_DAMAGE_NAME_MAX];
    rn_damage_name(damage, name);
    return e->cfg.accept_loss && damage->kind != RN_WAL_INTACT &&
           damage->kind != RN_WAL_DAMAGED_HEAD && strcmp(e->cfg.accept_loss, name) == 0;
}

/* What the records after the damage that still read back say. */
typedef struct {
    uint64_t highest; /* stream id or rewrite serial */
    rn_map moved;     /* stream id -> moved (the cold end they prove) */
} after_damage;

typedef struct {
    uint64_t end;  /* the highest cold end a move recorded */
    int rewritten; /* a rewrite or delete came after a move: its bytes may differ */
} moved;

static int note_record(void *arg, const uint8_t *rec, size_t len) {
    after_damage *a = arg;
    rn_cmd c;
    if (rn_cmd_decode(rec, len, &c) != 0)
        return 0;
    uint64_t n = c.type == RN_CMD_REWRITE ? c.serial : c.stream_id;
    if (n > a->highest)
        a->highest = n;
    if (c.type != RN_CMD_TIER && c.type != RN_CMD_REWRITE && c.type != RN_CMD_DELETE)
        return 0;
    moved *m = rn_map_get(&a->moved, &c.stream_id, sizeof c.stream_id);
    if (!m && c.type != RN_CMD_TIER)
        return 0;
    if (!m) {
        m = rn_xcalloc(1, sizeof *m + sizeof c.stream_id);
        memcpy(m + 1, &c.stream_id, sizeof c.stream_id); /* the map's key */
        rn_map_put(&a->moved, m + 1, sizeof c.stream_id, m);
    }
    if (c.type != RN_CMD_TIER)
        m->rewritten = 1;
    else if (!m->rewritten && c.offset > m->end)
        m->end = c.offset;
    return 0;
}

/* The cold end of s once the moves proven after the damage are kept. */
static uint64_t proven_cold_end(const after_damage *a, const rn_stream *s) {
    const moved *m = rn_map_get(&a->moved, &s->id, sizeof s->id);
    return m && !m->rewritten && m->end > s->cold_end && m->end <= s->tail ? m->end : s->cold_end;
}

/* Where s keeps its bytes up to: its tail when its file holds data for
 * every byte it keeps locally (from `cold_end` on), else the end of its
 * last whole append at or below the first such byte (JSON streams keep
 * whole messages), or the first such byte itself. -errno when the file
 * cannot be asked. */
static int64_t proven_tail(rn_engine *e, const rn_stream *s, uint64_t cold_end) {
    uint64_t local = cold_end;
    if (s->fork_offset > local)
        local = s->fork_offset;
    if (s->retained > local)
        local = s->retained;
    int64_t hole = rn_streamfiles_first_hole(e->files, s->id, local, s->tail);
    if (hole < 0 || (uint64_t)hole == s->tail)
        return hole < 0 ? hole : (int64_t)s->tail;
    if (!s->json)
        return (int64_t)local;
    uint64_t lo = 0, hi = s->appends, end, keep = s->fork_offset;
    while (lo < hi) { /* the last append ending at or below `local` */
        uint64_t mid = lo + (hi - lo) / 2;
        int rc = rn_streamfiles_index_get(e->files, s->id, mid, &end);
        if (rc < 0)
            return rc;
        if (end <= local) {
            keep = end;
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return (int64_t)keep;
}

/* Refuses the loss when a stream forks read would have to be cut; else
 * counts the streams cut and names the first in *first. */
static int plan(rn_engine *e, const after_damage *a, size_t *cut, const rn_stream **first) {
    size_t i = 0;
    void *v;
    while (rn_map_next(&e->state.by_id, &i, &v)) {
        const rn_stream *s = v;
        int64_t keep = proven_tail(e, s, proven_cold_end(a, s));
        if (keep < 0)
            return (int)keep;
        if ((uint64_t)keep == s->tail)
            continue;
        if (rn_stream_held(s)) {
            rn_log(RN_LOG_ERROR, "recovery",
                   "stream %.*s lacks its bytes %llu.. in its file, and no record that reads "
                   "back proves them in the cold store; forks read them, so it cannot be cut: "
                   "this loss cannot be accepted (restore from a backup)",
                   (int)s->path_len, s->path, (unsigned long long)keep);
            return -ENOTRECOVERABLE;
        }
        if (!(*cut)++)
            *first = s;
    }
    return 0;
}

/* Keeps the moves proven after the damage and rewrites every stream at the
 * tail its proven bytes allow, with serials from `serial` on. */
static int rewrite_all(rn_engine *e, const after_damage *a, uint64_t serial, size_t *streams,
                       size_t *moves) {
    int64_t now = rn_now_ms();
    size_t i = 0;
    void *v;
    while (rn_map_next(&e->state.by_id, &i, &v)) {
        rn_stream *s = v;
        rn_applied applied;
        uint64_t cold_end = proven_cold_end(a, s);
        if (cold_end > s->cold_end) {
            rn_cmd t = {.type = RN_CMD_TIER, .stream_id = s->id, .offset = cold_end};
            int rc = engine_apply(e, &t, 0, &applied);
            if (rc < 0)
                return rc;
            (*moves)++;
        }
        int64_t keep = proven_tail(e, s, cold_end);
        if (keep < 0)
            return (int)keep;
        rn_cmd c = engine_rewrite_at_tail(s, now, serial + *streams, e->cfg.incarnation_key);
        c.offset = (uint64_t)keep;
        int rc = engine_apply(e, &c, 0, &applied);
        if (rc < 0)
            return rc;
        s->touched = 1; /* its files are cut to what it kept */
        (*streams)++;
    }
    return 0;
}

int engine_accept_loss(rn_engine *e, uint64_t from, const rn_wal_damage *damage,
                       rn_wal_replay_fn replay, rn_wal_recovery *rec) {
    char name[RN_DAMAGE_NAME_MAX], report[2048], cut_note[512] = "";
    rn_damage_name(damage, name);
    rn_damage_report(e->dir, from, damage, engine_checkpointed_path, e, report, sizeof report);
    after_damage a = {0};
    size_t cut = 0, streams = 0, moves = 0;
    const rn_stream *first = NULL;
    int rc = rn_wal_damaged_records(e->dir, from, damage, 1, note_record, &a);
    if (rc == 0)
        rc = rn_wal_replay_prefix(e->dir, from, replay, e, rec);
    if (rc == 0)
        rc = plan(e, &a, &cut, &first);
    if (rc == 0) {
        if (a.highest >= e->state.next_id)
            e->state.next_id = a.highest + 1;
        if (first)
            snprintf(cut_note, sizeof cut_note,
                     "; %zu streams kept only the bytes their files or a move that reads back "
                     "prove, and their inherited offset stops there (the first: %.*s, kept "
                     "%llu of %llu bytes)",
                     cut, (int)(first->path_len < 200 ? first->path_len : 200), first->path,
                     (unsigned long long)proven_tail(e, first, proven_cold_end(&a, first)),
                     (unsigned long long)first->tail);
        rc = rewrite_all(e, &a, e->state.next_id + LOST_SERIALS_MARGIN, &streams, &moves);
    }
    rn_map_free_values(&a.moved);
    if (rc != 0)
        return rc;
    e->loss_accepted = 1;
    rn_log(RN_LOG_WARN, "recovery",
           "accepting the loss --accept-loss=%s names: %s. Kept the %llu log records before the "
           "first one that does not read back and dropped every record after it, but for %zu "
           "moves of history to the cold store that read back after it; rewrote the history "
           "of all %zu streams (each has a new Stream-Incarnation and reports its token "
           "before the loss as Stream-Previous-Incarnation, with the tail it kept as "
           "Stream-Inherited-Offset; their producers' epochs are closed by history)%s",
           name, report, (unsigned long long)rec->records, moves, streams, cut_note);
    return 0;
}
