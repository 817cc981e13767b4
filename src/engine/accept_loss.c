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
 */
#include "engine/damage_report.h"
#include "engine/engine_int.h"
#include "util/clock.h"

#include <stdio.h>
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

/* Raises *arg to the highest stream id or rewrite serial a record names. */
static int note_serial(void *arg, const uint8_t *rec, size_t len) {
    uint64_t *highest = arg;
    rn_cmd c;
    if (rn_cmd_decode(rec, len, &c) != 0)
        return 0;
    uint64_t n = c.type == RN_CMD_REWRITE ? c.serial : c.stream_id;
    if (n > *highest)
        *highest = n;
    return 0;
}

int engine_accept_loss(rn_engine *e, uint64_t from, const rn_wal_damage *damage,
                       rn_wal_replay_fn replay, rn_wal_recovery *rec) {
    char name[RN_DAMAGE_NAME_MAX], report[2048];
    rn_damage_name(damage, name);
    rn_damage_report(e->dir, from, damage, engine_checkpointed_path, e, report, sizeof report);
    uint64_t highest = 0;
    int rc = rn_wal_damaged_records(e->dir, from, damage, 1, note_serial, &highest);
    if (rc == 0)
        rc = rn_wal_replay_prefix(e->dir, from, replay, e, rec);
    if (rc != 0)
        return rc;
    if (highest >= e->state.next_id)
        e->state.next_id = highest + 1;
    uint64_t serial = e->state.next_id + LOST_SERIALS_MARGIN;
    int64_t now = rn_now_ms();
    size_t i = 0, streams = 0;
    void *v;
    while (rn_map_next(&e->state.by_id, &i, &v)) {
        rn_stream *s = v;
        rn_cmd c = engine_rewrite_at_tail(s, now, serial + streams, e->cfg.incarnation_key);
        rn_applied applied;
        rc = engine_apply(e, &c, 0, &applied);
        if (rc < 0)
            return rc;
        s->touched = 1; /* its files are cut to what it kept */
        streams++;
    }
    e->loss_accepted = 1;
    rn_log(RN_LOG_WARN, "recovery",
           "accepting the loss --accept-loss=%s names: %s. Kept the %llu log records before the "
           "first one that does not read back and dropped every record after it; rewrote the "
           "history of all %zu streams (each has a new Stream-Incarnation and reports its token "
           "before the loss as Stream-Previous-Incarnation, with the tail it kept as "
           "Stream-Inherited-Offset; their producers' epochs are closed by history)",
           name, report, (unsigned long long)rec->records, streams);
    return 0;
}
