/*
 * open.c — opening an engine and closing it.
 *
 * Recovery: the checkpoint (checkpoint.c) restores every stream as of a
 * log rotation, then rn_wal_recover() replays the later records through
 * the state machine with effects that write their data (effects.c);
 * streams the replay touched get their files cut to the recovered tail,
 * and snapshot bodies no stream references are dropped (by the tiers, which
 * keep the stream files and bodies: tiers/tiers.h). Then the log
 * opens for new records, with the WAL as the pipeline's command log and
 * the checkpoint as its batch hook. Close writes a final checkpoint when
 * the log is idle, so the next start replays nothing.
 */
#include "engine/damage_report.h"
#include "engine/engine_int.h"
#include "engine/wal_cmdlog.h"
#include "util/clock.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PRODUCER_TTL_DEFAULT_MS (7 * 24 * 3600 * 1000ull) /* ext §5.4 */
#define PRODUCER_CAP_DEFAULT 4096

static int body_referenced(void *ctx, int cold, const char *key) {
    const rn_stream *s = rn_map_get(ctx, key, strlen(key));
    return s && s->snapshot.cold == cold;
}

static int stream_in_state(void *ctx, uint64_t id) {
    return rn_state_stream(ctx, id) != NULL;
}

/* Drops snapshot bodies no stream references: written before a crash kept
 * their publish out of the log, or superseded during replay. */
static void sweep_orphan_snapshots(rn_engine *e) {
    rn_map referenced = {0}; /* key -> stream */
    size_t i = 0;
    void *v;
    while (rn_map_next(&e->state.by_path, &i, &v)) {
        rn_stream *s = v;
        if (s->snapshot.present)
            rn_map_put(&referenced, s->snapshot.key, strlen(s->snapshot.key), s);
    }
    rn_tiers_sweep_bodies(e->cfg.tiers, body_referenced, &referenced);
    rn_map_free(&referenced);
}

static int replay_record(void *arg, const uint8_t *rec, size_t len) {
    rn_engine *e = arg;
    rn_cmd c;
    if (rn_cmd_decode(rec, len, &c) != 0)
        return RN_WAL_CORRUPT;
    rn_applied applied;
    int rc = engine_apply(e, &c, 0, &applied);
    return rc == -ENOENT ? 0 : rc;
}

const char *engine_checkpointed_path(void *arg, uint64_t id, size_t *len) {
    rn_engine *e = arg;
    rn_stream *s = rn_state_stream(&e->state, id);
    if (!s)
        return NULL;
    *len = s->path_len;
    return s->path;
}

/* The message of a log recovery that failed with rc. The engine is not
 * used afterwards (a refusal replays nothing). */
static void refuse_recovery(rn_engine *e, uint64_t from, const rn_wal_recovery *rec, int rc,
                            char *err, size_t errcap) {
    int n = snprintf(err, errcap, "log recovery in %s refused to start: ", e->dir);
    size_t used = n > 0 && (size_t)n < errcap ? (size_t)n : 0;
    if (rc == RN_WAL_CORRUPT && rec->damage.kind != RN_WAL_INTACT) {
        char name[RN_DAMAGE_NAME_MAX], hint[256];
        rn_damage_name(&rec->damage, name);
        if (rec->damage.kind == RN_WAL_DAMAGED_HEAD)
            snprintf(hint, sizeof hint,
                     "restore wal/HEAD and any missing or damaged files from "
                     "a backup and start again");
        else
            snprintf(hint, sizeof hint,
                     "restore the damaged or missing files from a backup and start again, or "
                     "start once with --accept-loss=%s to keep the log up to the damage, drop "
                     "the rest and rewrite the history of every stream",
                     name);
        rn_damage_report(e->dir, from, &rec->damage, engine_checkpointed_path, e, err + used,
                         errcap - used);
        size_t len = strlen(err);
        snprintf(err + len, errcap - len, ". Nothing on disk was changed: %s", hint);
    } else
        snprintf(err + used, errcap - used, "%s",
                 rc == RN_WAL_CORRUPT ? "a log record that reads back does not decode"
                                      : strerror(-rc));
}

/* Loads the checkpoint and replays the log after it into e's state.
 * Returns 0 with *rec, or -1 with a message in err. */
static int recover(rn_engine *e, rn_recovery_stats *stats, rn_wal_recovery *rec, char *err,
                   size_t errcap) {
    uint64_t from;
    int rc = engine_checkpoint_load(e, &from, &stats->checkpoint_streams);
    if (rc == -EBADMSG) {
        snprintf(err, errcap, "checkpoint file in %s is damaged; refusing to start", e->dir);
        return -1;
    }
    if (rc < 0) {
        snprintf(err, errcap, "checkpoint file in %s cannot be read: %s; refusing to start", e->dir,
                 strerror(-rc));
        return -1;
    }
    if (from)
        rn_log(RN_LOG_DEBUG, "recovery",
               "checkpoint loaded: %llu streams; log replay from segment %llu",
               (unsigned long long)stats->checkpoint_streams, (unsigned long long)from);
    else
        rn_log(RN_LOG_DEBUG, "recovery", "no checkpoint; replaying the whole log");
    rc = rn_wal_recover(e->dir, from, replay_record, e, rec);
    if (rc == RN_WAL_CORRUPT && engine_loss_named(e, &rec->damage)) {
        rn_wal_damage damage = rec->damage;
        rc = engine_accept_loss(e, from, &damage, replay_record, rec);
    } else if (rc == 0 && e->cfg.accept_loss) {
        rn_log(RN_LOG_WARN, "recovery",
               "--accept-loss=%s ignored: the log is intact, nothing was lost", e->cfg.accept_loss);
    }
    if (rc != 0) {
        refuse_recovery(e, from, rec, rc, err, errcap);
        return -1;
    }
    if (rec->torn_bytes)
        rn_log(RN_LOG_WARN, "recovery",
               "cut %llu bytes of an unfinished batch at byte %llu of log segment %llu: a "
               "crash interrupted its write, so none of its writes had been acknowledged",
               (unsigned long long)rec->torn_bytes, (unsigned long long)rec->torn_offset,
               (unsigned long long)rec->last_segment);
    int64_t now = rn_now_ms();
    size_t i = 0;
    void *v;
    while (rn_map_next(&e->state.by_path, &i, &v)) {
        rn_stream *s = v;
        /* Cut bytes of unrecovered records. A stream with no appends of
         * its own has none: its files are only written for appends. */
        if (s->touched && s->appends)
            rn_streamfiles_truncate(e->files, s->id, s->tail, s->appends);
        s->touched = 0;
        s->last_access_ms = now;
    }
    rn_log(RN_LOG_DEBUG, "recovery",
           "log replayed: %llu records, up to segment %llu byte %llu; %llu torn bytes cut",
           (unsigned long long)rec->records, (unsigned long long)rec->last_segment,
           (unsigned long long)rec->last_valid_end, (unsigned long long)rec->torn_bytes);
    sweep_orphan_snapshots(e);
    /* the streams an accepted loss dropped (created in records after the
     * damage) left their files: no stream owns them any more; so did a
     * create a bucket's fence refused at apply when the process stopped
     * before its pipeline removed the files its data went to */
    if ((e->loss_accepted || e->state.fences.count) &&
        (rc = rn_streamfiles_sweep(e->files, stream_in_state, &e->state)) < 0)
        rn_log(RN_LOG_WARN, "recovery", "the files of streams no stream owns stay: %s",
               strerror(-rc));
    stats->streams = e->state.by_path.count;
    stats->records_replayed = rec->records;
    stats->torn_bytes = rec->torn_bytes;
    return 0;
}

rn_engine *engine_new(uv_loop_t *loop, const rn_engine_config *cfg) {
    rn_engine *e = rn_xcalloc(1, sizeof *e);
    e->loop = loop;
    e->cfg = *cfg;
    e->dir = rn_xstrdup(cfg->data_dir);
    e->cfg.data_dir = e->dir;
    if (!e->cfg.producer_ttl_ms)
        e->cfg.producer_ttl_ms = PRODUCER_TTL_DEFAULT_MS;
    if (!e->cfg.producer_cap)
        e->cfg.producer_cap = PRODUCER_CAP_DEFAULT;
    e->files = rn_tiers_streamfiles(cfg->tiers);
    rn_state_init(&e->state);
    return e;
}

rn_engine *rn_engine_open(uv_loop_t *loop, const rn_engine_config *cfg, rn_recovery_stats *stats,
                          char *err, size_t errcap) {
    memset(stats, 0, sizeof *stats);
    rn_engine *e = engine_new(loop, cfg);
    rn_wal_recovery rec;
    if (recover(e, stats, &rec, err, errcap) < 0) {
        rn_engine_close(e);
        return NULL;
    }
    rn_wal_options wo = {.segment_bytes = cfg->wal_segment_bytes, .preallocate = 1};
    int rc;
    e->wal = rn_wal_open(loop, e->dir, &rec, &wo, &rc);
    if (!e->wal) {
        snprintf(err, errcap, "cannot open the log in %s: %s", e->dir, strerror(-rc));
        rn_engine_close(e);
        return NULL;
    }
    if (e->loss_accepted && (rc = engine_checkpoint_final(e)) != 0) {
        snprintf(err, errcap,
                 "the accepted loss could not be made durable (checkpoint in %s failed: %s); "
                 "nothing was served, start again with the same --accept-loss",
                 e->dir, strerror(-rc));
        rn_wal_close(e->wal); /* no other checkpoint: the loss stays unaccepted */
        e->wal = NULL;
        rn_engine_close(e);
        return NULL;
    }
    rn_cmdlog_applier applier = {.ctx = e, .apply = engine_apply_logged};
    e->log = rn_wal_cmdlog_new(e->wal, &applier);
    rn_wal_set_batch_hook(e->wal, engine_checkpoint_maybe, e);
    rn_log(RN_LOG_DEBUG, "recovery", "%zu streams; new log segment %llu opened",
           e->state.by_path.count, (unsigned long long)rn_wal_current_segment(e->wal));
    return e;
}

void rn_engine_close(rn_engine *e) {
    if (!e)
        return;
    if (e->wal && !e->checkpoint && !rn_wal_busy(e->wal))
        engine_checkpoint_final(e); /* the next start replays nothing */
    if (e->scrub_warm)
        rn_engine_warm_cancel(e->scrub_warm);
    if (e->history_warm)
        rn_engine_warm_cancel(e->history_warm);
    rn_state_free(&e->state);
    rn_map_free_values(&e->damaged);
    free(e->touches);
    if (e->wal) /* a replicated engine's log belongs to its owner */
        rn_wal_cmdlog_free(e->log);
    rn_wal_close(e->wal);
    free(e->dir);
    free(e);
}
