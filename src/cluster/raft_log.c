/*
 * raft_log.c — the Raft groups behind the command-log seam. See
 * raft_log.h.
 */
#include "cluster/raft_log.h"
#include "engine/command.h"
#include "util/buf.h"
#include "util/files.h"
#include "util/log.h"
#include "util/map.h"
#include "util/metrics.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define ENTRY_MAGIC 0x31424e52u    /* "RNB1" read as little-endian bytes */
#define BATCH_MAX_BYTES (4u << 20) /* a proposal's commands, unless one is larger */
#define BATCH_MAX_COMMANDS 4096u
#define RESUME_MS 250 /* a stopped group tries its oldest kept entry again */

/* What the log keeps in an entry's log area. */
typedef struct {
    rn_cmdlog_entry *next; /* in its group's queue */
} entry_slot;

static_assert(sizeof(entry_slot) <= RN_CMDLOG_PRIVATE_BYTES, "the entry's log area is too small");

static entry_slot *slot(rn_cmdlog_entry *entry) {
    return (entry_slot *)entry->log.bytes;
}

/* A committed entry this replica could not apply yet, kept in order. */
typedef struct held_entry {
    struct held_entry *next;
    uint64_t index;
    size_t len;
    uint8_t bytes[];
} held_entry;

typedef struct {
    rn_cmdlog_entry *head, *tail; /* submitted, not yet proposed */
    rn_map dirty;                 /* ids of streams written since the group's last snapshot */
    uint64_t *durable;            /* taken by the snapshot in progress: to sync */
    size_t n_durable;
    /* applying stopped: the committed entries not applied yet (their data
     * found no room), oldest first; the first one's index (0: applying),
     * why, and since when */
    held_entry *held, *held_tail;
    size_t held_bytes;
    uint64_t stopped_at, stopped_ms;
    int stop_err;
    uint64_t stop_stream;
} group_state;

struct rn_raft_log {
    rn_cmdlog base;
    uv_loop_t *loop;
    rn_engine *engine;
    rn_cmdlog_applier applier;
    consensus *node; /* NULL until attached, and once stopping */
    unsigned groups;
    rn_id_issuer *ids;
    group_state *g;
    int queued; /* some group has commands waiting */
    uv_check_t flush;
    void (*leader_changed)(void *arg, unsigned group, uint64_t leader, uint64_t term, bool ready);
    void (*restored)(void *arg, unsigned group);
    void (*published)(void *arg, uint64_t stream_id);
    int (*admit)(void *arg, unsigned group); /* 0: refuse proposals (disk full) */
    void (*fork_pin)(void *arg, const rn_fork_pin_ask *ask, rn_fork_pin_done done, void *darg);
    void (*fork_unpin)(void *arg, uint64_t source_id, uint64_t fork_id);
    void (*fork_alive)(void *arg, uint64_t source_id, uint64_t fork_id, rn_fork_alive_done done,
                       void *darg);
    void (*fork_cut)(void *arg, uint64_t source_id, uint64_t fork_id, uint64_t offset,
                     rn_fork_cut_done done, void *darg);
    int (*hosts)(void *arg, unsigned group);
    void *leader_changed_arg; /* the hooks' arg */
    uv_timer_t resume;        /* retries stopped groups while any is stopped */
    unsigned stopped;         /* groups whose applying stopped */
    int closed;               /* of flush and resume, once freed */
    uint64_t min_free_bytes;
    char *data_dir;
};

/* A proposal in flight: the entries of its commands, in order. */
typedef struct {
    rn_raft_log *log;
    uint64_t proposed_ns; /* uv_hrtime() when proposed */
    unsigned n;
    rn_cmdlog_entry *entries[];
} batch;

/* What applying an entry left: one rn_applied per command; `held`: the
 * entry was not applied here yet (applying stopped), n is 0. */
typedef struct {
    unsigned n;
    int held;
    rn_applied applied[];
} apply_result;

int rn_raft_log_stopped(const rn_raft_log *l, unsigned group, rn_raft_log_stop *out) {
    assert(group < l->groups);
    const group_state *gs = &l->g[group];
    if (!gs->stopped_at)
        return 0;
    *out = (rn_raft_log_stop){.index = gs->stopped_at,
                              .err = gs->stop_err,
                              .stream = gs->stop_stream,
                              .since_ms = gs->stopped_ms,
                              .held_bytes = gs->held_bytes};
    return 1;
}

uint64_t rn_raft_log_applied(const rn_raft_log *l, unsigned group, uint64_t applied) {
    assert(group < l->groups);
    uint64_t at = l->g[group].stopped_at;
    return at && at - 1 < applied ? at - 1 : applied;
}

unsigned rn_raft_log_group(const rn_raft_log *l, const char *key, size_t len) {
    return rn_placement_group(key, len, l->groups);
}

/* ---- proposing ---- */

static rn_result refusal_of(consensus_status st, const apply_result *r) {
    if (st == CONSENSUS_OK && r && r->held)
        return RN_ERR_UNAVAILABLE; /* committed, applied here only once space returns */
    switch (st) {
    case CONSENSUS_BUSY:
        return RN_ERR_LOG_BUSY;
    case CONSENSUS_OUTCOME_UNKNOWN:
    case CONSENSUS_OK: /* applied, but its result is missing: cannot happen */
        return RN_ERR_UNAVAILABLE;
    default:
        return RN_ERR_NO_LEADER; /* nothing proposed */
    }
}

static void refuse(rn_cmdlog_entry *entry, rn_result why) {
    entry->applied = 0;
    entry->refusal = why;
    entry->done(entry);
}

/* The proposal's outcome: every command of an applied entry completes
 * with what its apply left; otherwise each is refused alike. */
static void proposed(void *arg, consensus_status st, uint64_t index, void *result) {
    (void)index;
    batch *b = arg;
    apply_result *r = result;
    assert(st != CONSENSUS_OK || (r && (r->held || r->n == b->n)));
    rn_metric_commit((uv_hrtime() - b->proposed_ns) / 1000);
    for (unsigned i = 0; i < b->n; i++) {
        rn_cmdlog_entry *entry = b->entries[i]; /* done() may free it */
        if (st == CONSENSUS_OK && r && !r->held) {
            entry->applied = 1;
            entry->result = r->applied[i];
            entry->done(entry);
        } else {
            refuse(entry, refusal_of(st, r));
        }
    }
    free(r);
    free(b);
}

/* The checks before a proposal: 1 with *why when nothing may be proposed
 * (this replica stopped applying the group; the owner's admission refused:
 * a disk below its reserve), else 0. */
static int refused_before(rn_raft_log *l, unsigned group, rn_result *why) {
    if (l->g[group].stopped_at)
        *why = RN_ERR_APPLY_STOPPED;
    else if (l->admit && !l->admit(l->leader_changed_arg, group))
        *why = RN_ERR_DISK_FULL;
    else
        return 0;
    return 1;
}

/* Proposes the group's waiting commands, in entries of at most
 * BATCH_MAX_BYTES (a larger command goes alone) and BATCH_MAX_COMMANDS. */
static void propose_group(rn_raft_log *l, unsigned group) {
    group_state *gs = &l->g[group];
    rn_result why;
    if (gs->head && refused_before(l, group, &why)) {
        rn_cmdlog_entry *e = gs->head; /* detached: done() may submit again */
        gs->head = gs->tail = NULL;
        while (e) {
            rn_cmdlog_entry *next = slot(e)->next;
            refuse(e, why); /* from the check phase */
            e = next;
        }
        return;
    }
    while (gs->head) {
        rn_buf body = {0};
        rn_buf_append_u32(&body, ENTRY_MAGIC);
        rn_buf_append_u32(&body, 0);
        unsigned n = 0;
        rn_cmdlog_entry *e = gs->head;
        for (; e && n < BATCH_MAX_COMMANDS; e = slot(e)->next, n++) {
            size_t len = 0;
            for (int k = 0; k < e->pieces; k++)
                len += e->piece[k].iov_len;
            if (n > 0 && body.len + 4 + len > BATCH_MAX_BYTES)
                break;
            rn_buf_append_u32(&body, (uint32_t)len);
            for (int k = 0; k < e->pieces; k++)
                rn_buf_append(&body, e->piece[k].iov_base, e->piece[k].iov_len);
        }
        for (int k = 0; k < 4; k++)
            body.data[4 + k] = (uint8_t)(n >> (8 * k));
        batch *b = rn_xmalloc(sizeof *b + n * sizeof b->entries[0]);
        b->log = l;
        b->n = n;
        b->proposed_ns = uv_hrtime();
        rn_metric.raft_proposals++;
        rn_metric.raft_commands += n;
        for (unsigned i = 0; i < n; i++) {
            b->entries[i] = gs->head;
            gs->head = slot(gs->head)->next;
        }
        if (!gs->head)
            gs->tail = NULL;
        if (l->node) {
            consensus_propose(l->node, group, body.data, body.len, proposed, b);
        } else {
            proposed(b, CONSENSUS_NOT_PROPOSED, 0, NULL); /* from the check phase */
        }
        rn_buf_free(&body);
    }
}

/* Each loop turn, after the turn's requests submitted their commands. */
static void on_flush(uv_check_t *h) {
    rn_raft_log *l = h->data;
    if (!l->queued)
        return;
    l->queued = 0;
    for (unsigned g = 0; g < l->groups; g++)
        propose_group(l, g);
}

static void submit(rn_cmdlog *base, rn_cmdlog_entry *entry) {
    rn_raft_log *l = (rn_raft_log *)base;
    assert(entry->pieces >= 1 && entry->pieces <= 2 && entry->done);
    unsigned group = rn_placement_id_group(entry->cmd->stream_id);
    assert(group < l->groups);
    group_state *gs = &l->g[group];
    slot(entry)->next = NULL;
    if (gs->tail)
        slot(gs->tail)->next = entry;
    else
        gs->head = entry;
    gs->tail = entry;
    l->queued = 1;
}

static uint64_t issue_id(rn_cmdlog *base, const rn_state *st, const char *path, size_t len) {
    rn_raft_log *l = (rn_raft_log *)base;
    unsigned group = rn_raft_log_group(l, path, len);
    uint64_t id;
    do /* a node id reused for an empty data directory could meet its old ids */
        id = rn_id_issue(l->ids, group);
    while (id && rn_state_stream(st, id));
    return id;
}

static int accepts(rn_cmdlog *base, const char *path, size_t len) {
    rn_raft_log *l = (rn_raft_log *)base;
    return l->node && consensus_leader_ready(l->node, rn_raft_log_group(l, path, len));
}

static int apart(rn_cmdlog *base, const char *a, size_t alen, const char *b, size_t blen) {
    rn_raft_log *l = (rn_raft_log *)base;
    return l->fork_pin && rn_raft_log_group(l, a, alen) != rn_raft_log_group(l, b, blen);
}

static void fork_pin(rn_cmdlog *base, const rn_fork_pin_ask *ask, rn_fork_pin_done done,
                     void *arg) {
    rn_raft_log *l = (rn_raft_log *)base;
    l->fork_pin(l->leader_changed_arg, ask, done, arg);
}

static void fork_unpin(rn_cmdlog *base, uint64_t source_id, uint64_t fork_id) {
    rn_raft_log *l = (rn_raft_log *)base;
    l->fork_unpin(l->leader_changed_arg, source_id, fork_id);
}

static void fork_alive(rn_cmdlog *base, uint64_t source_id, uint64_t fork_id,
                       rn_fork_alive_done done, void *arg) {
    rn_raft_log *l = (rn_raft_log *)base;
    l->fork_alive(l->leader_changed_arg, source_id, fork_id, done, arg);
}

static void fork_cut(rn_cmdlog *base, uint64_t source_id, uint64_t fork_id, uint64_t offset,
                     rn_fork_cut_done done, void *arg) {
    rn_raft_log *l = (rn_raft_log *)base;
    l->fork_cut(l->leader_changed_arg, source_id, fork_id, offset, done, arg);
}

static int hosts(rn_cmdlog *base, uint64_t id) {
    rn_raft_log *l = (rn_raft_log *)base;
    return !l->hosts || l->hosts(l->leader_changed_arg, rn_placement_id_group(id));
}

static const rn_cmdlog_ops raft_ops = {.submit = submit,
                                       .issue_id = issue_id,
                                       .accepts = accepts,
                                       .apart = apart,
                                       .pin = fork_pin,
                                       .unpin = fork_unpin,
                                       .fork_alive = fork_alive,
                                       .fork_cut = fork_cut,
                                       .hosts = hosts};

/* ---- the state machine ---- */

static void mark_dirty(group_state *gs, uint64_t id) {
    if (rn_map_get(&gs->dirty, &id, sizeof id))
        return;
    uint64_t *key = rn_xmalloc(sizeof *key);
    *key = id;
    rn_map_put(&gs->dirty, key, sizeof *key, key);
}

/* Reads command i of an entry (group, index) into *cmd; a command that
 * does not decode stops the process: every replica would stop there, the
 * log is not ours (nor is a record whose data is not in it: stored ahead
 * is the local log's). */
static void read_command(rn_reader *r, unsigned group, uint64_t index, uint32_t i, rn_cmd *cmd) {
    uint32_t clen = rn_read_u32(r);
    const uint8_t *bytes = rn_read_bytes(r, clen);
    if (!bytes || rn_cmd_decode(bytes, clen, cmd) != 0 || cmd->stored_ahead ||
        rn_placement_id_group(cmd->stream_id) != group) {
        rn_log(RN_LOG_ERROR, "fatal",
               "group %u: command %u of committed entry %llu does not decode", group, i,
               (unsigned long long)index);
        abort();
    }
}

/* The command count of an entry, its header read from r. */
static uint32_t read_header(rn_reader *r, unsigned group, uint64_t index, size_t len) {
    uint32_t magic = rn_read_u32(r), n = rn_read_u32(r);
    if (r->failed || magic != ENTRY_MAGIC || n > len / 4) {
        rn_log(RN_LOG_ERROR, "fatal", "group %u: committed entry %llu is not a command batch",
               group, (unsigned long long)index);
        abort();
    }
    return n;
}

/* 0 when every command of the entry can be applied now (its data has
 * room: rn_engine_reserve_apply), else -errno with the stream that has
 * none in *stream. */
static int entry_room(rn_raft_log *l, unsigned group, uint64_t index, const void *data, size_t len,
                      uint64_t *stream) {
    rn_reader r;
    rn_reader_init(&r, data, len);
    uint32_t n = read_header(&r, group, index, len);
    int floor_checked = !l->min_free_bytes;
    for (uint32_t i = 0; i < n; i++) {
        rn_cmd cmd;
        read_command(&r, group, index, i, &cmd);
        int rc = 0;
        if (cmd.data_len && !floor_checked) {
            floor_checked = 1;
            if (rn_free_bytes(l->data_dir) < l->min_free_bytes)
                rc = -ENOSPC; /* the space a restart needs */
        }
        if (rc == 0)
            rc = rn_engine_reserve_apply(l->engine, &cmd);
        if (rc < 0) {
            *stream = cmd.stream_id;
            return rc;
        }
    }
    return 0;
}

/* Applies every command of an entry. */
static apply_result *apply_entry(rn_raft_log *l, unsigned group, uint64_t index, const void *data,
                                 size_t len) {
    rn_reader r;
    rn_reader_init(&r, data, len);
    uint32_t n = read_header(&r, group, index, len);
    apply_result *res = rn_xmalloc(sizeof *res + n * sizeof res->applied[0]);
    res->n = n;
    res->held = 0;
    for (uint32_t i = 0; i < n; i++) {
        rn_cmd cmd;
        read_command(&r, group, index, i, &cmd);
        if (cmd.data_len)
            mark_dirty(&l->g[group], cmd.stream_id);
        rn_log(RN_LOG_DEBUG, "cluster_apply",
               "group %u entry %llu command %u: type %u stream %llx offset %llu len %zu seq %llu",
               group, (unsigned long long)index, i, cmd.type, (unsigned long long)cmd.stream_id,
               (unsigned long long)cmd.offset, cmd.data_len, (unsigned long long)cmd.producer_seq);
        l->applier.apply(l->applier.ctx, &cmd, 0, &res->applied[i]);
        if (cmd.type == RN_CMD_PUBLISH && l->published)
            l->published(l->leader_changed_arg, cmd.stream_id);
    }
    return res;
}

/* Keeps a committed entry for later, behind those already kept. */
static void hold_entry(group_state *gs, uint64_t index, const void *data, size_t len) {
    held_entry *h = rn_xmalloc(sizeof *h + len);
    h->next = NULL;
    h->index = index;
    h->len = len;
    memcpy(h->bytes, data, len);
    if (gs->held_tail)
        gs->held_tail->next = h;
    else
        gs->held = h;
    gs->held_tail = h;
    gs->held_bytes += len;
}

static void resume_tick(uv_timer_t *t);

/* Applying the group stops at entry index (err: why, for stream). */
static void stop_applying(rn_raft_log *l, unsigned group, uint64_t index, int err,
                          uint64_t stream) {
    group_state *gs = &l->g[group];
    gs->stopped_at = index;
    gs->stop_err = -err;
    gs->stop_stream = stream;
    gs->stopped_ms = uv_now(l->loop);
    rn_log(RN_LOG_ERROR, "cluster_apply_stopped",
           "group %u: applying stopped at committed entry %llu: stream %016llx's data cannot be "
           "stored (%s); the entries are kept (the log holds them) and applied once space "
           "returns",
           group, (unsigned long long)index, (unsigned long long)stream, strerror(-err));
    if (l->stopped++ == 0)
        uv_timer_start(&l->resume, resume_tick, RESUME_MS, RESUME_MS);
}

/* Applies the group's kept entries while their data has room. */
static void resume_group(rn_raft_log *l, unsigned group) {
    group_state *gs = &l->g[group];
    while (gs->held) {
        held_entry *h = gs->held;
        uint64_t stream = 0;
        int rc = entry_room(l, group, h->index, h->bytes, h->len, &stream);
        if (rc < 0) {
            gs->stop_err = -rc;
            gs->stop_stream = stream;
            gs->stopped_at = h->index;
            return;
        }
        gs->held = h->next;
        if (!gs->held)
            gs->held_tail = NULL;
        gs->held_bytes -= h->len;
        apply_result *res = apply_entry(l, group, h->index, h->bytes, h->len);
        for (unsigned i = 0; i < res->n; i++)
            rn_engine_applied_elsewhere(l->engine, &res->applied[i]);
        free(res);
        free(h);
    }
    rn_log(RN_LOG_WARN, "cluster_apply_resumed",
           "group %u: applying resumed after %llu ms (entries from %llu applied)", group,
           (unsigned long long)(uv_now(l->loop) - gs->stopped_ms),
           (unsigned long long)gs->stopped_at);
    gs->stopped_at = 0;
    if (--l->stopped == 0)
        uv_timer_stop(&l->resume);
}

static void resume_tick(uv_timer_t *t) {
    rn_raft_log *l = t->data;
    for (unsigned g = 0; g < l->groups; g++)
        if (l->g[g].stopped_at)
            resume_group(l, g);
}

/* A committed entry: applied, or kept for later when applying stopped
 * (now, or before: entries apply in order). The result of a kept entry
 * says so (held): its proposer answers that the outcome is unknown here
 * (it is committed and applies once space returns). */
static void *fsm_apply(void *ctx, unsigned group, uint64_t index, const void *data, size_t len) {
    rn_raft_log *l = ctx;
    group_state *gs = &l->g[group];
    uint64_t stream = 0;
    int rc = gs->stopped_at ? 0 : entry_room(l, group, index, data, len, &stream);
    if (rc < 0)
        stop_applying(l, group, index, rc, stream);
    if (!gs->stopped_at)
        return apply_entry(l, group, index, data, len);
    hold_entry(gs, index, data, len);
    apply_result *res = rn_xcalloc(1, sizeof *res);
    res->held = 1;
    return res;
}

/* An entry this node did not propose (or whose proposal gave up on it):
 * the engine's observers hear what it changed. */
static void fsm_free_result(void *ctx, unsigned group, void *result) {
    (void)group;
    rn_raft_log *l = ctx;
    apply_result *res = result;
    for (unsigned i = 0; i < res->n; i++)
        rn_engine_applied_elsewhere(l->engine, &res->applied[i]);
    free(res);
}

static int fsm_snapshot(void *ctx, unsigned group, uint64_t index, void **out, size_t *len) {
    (void)index;
    rn_raft_log *l = ctx;
    group_state *gs = &l->g[group];
    if (gs->stopped_at)
        return -1;        /* the state lags the index: no snapshot (the log keeps the entries) */
    assert(!gs->durable); /* libraft takes one snapshot of a group at a time */
    rn_buf m = {0};
    rn_engine_manifest(l->engine, rn_placement_stream_in_group, &group, group, &m);
    *out = rn_buf_steal(&m, len);
    gs->durable = rn_xmalloc((gs->dirty.count ? gs->dirty.count : 1) * sizeof *gs->durable);
    gs->n_durable = 0;
    size_t i = 0;
    void *v;
    while (rn_map_next(&gs->dirty, &i, &v)) {
        gs->durable[gs->n_durable++] = *(uint64_t *)v;
        free(v);
    }
    rn_map_free(&gs->dirty);
    memset(&gs->dirty, 0, sizeof gs->dirty);
    return 0;
}

/* On a worker: the stream files written since the previous snapshot. */
static int fsm_snapshot_durable(void *ctx, unsigned group) {
    rn_raft_log *l = ctx;
    group_state *gs = &l->g[group];
    int rc = 0;
    for (size_t i = 0; i < gs->n_durable && rc == 0; i++)
        rc = rn_engine_sync_stream(l->engine, gs->durable[i]);
    if (rc < 0)
        rn_log(RN_LOG_ERROR, "cluster_snapshot", "group %u: stream files could not be synced: %s",
               group, strerror(-rc));
    free(gs->durable);
    gs->durable = NULL;
    gs->n_durable = 0;
    return rc;
}

/* Forgets the entries kept while applying was stopped. */
static void drop_held(group_state *gs) {
    while (gs->held) {
        held_entry *h = gs->held;
        gs->held = h->next;
        free(h);
    }
    gs->held_tail = NULL;
    gs->held_bytes = 0;
}

static int fsm_restore(void *ctx, unsigned group, uint64_t index, const void *m, size_t len) {
    rn_raft_log *l = ctx;
    group_state *gs = &l->g[group];
    if (gs->stopped_at) { /* the snapshot holds every kept entry's effect */
        rn_log(RN_LOG_WARN, "cluster_apply_resumed",
               "group %u: a snapshot at %llu replaces the entries kept since %llu", group,
               (unsigned long long)index, (unsigned long long)gs->stopped_at);
        drop_held(gs);
        gs->stopped_at = 0;
        if (--l->stopped == 0)
            uv_timer_stop(&l->resume);
    }
    int rc = rn_engine_restore(l->engine, rn_placement_stream_in_group, &group, group, m, len);
    if (rc != 0)
        rn_log(RN_LOG_ERROR, "cluster_restore", "group %u: the manifest of index %llu is damaged",
               group, (unsigned long long)index);
    else if (l->restored)
        l->restored(l->leader_changed_arg, group);
    return rc;
}

static void fsm_leader_changed(void *ctx, unsigned group, uint64_t leader, uint64_t term,
                               bool ready) {
    rn_raft_log *l = ctx;
    if (l->leader_changed)
        l->leader_changed(l->leader_changed_arg, group, leader, term, ready);
}

/* ---- lifecycle ---- */

rn_raft_log *rn_raft_log_new(const rn_raft_log_config *cfg) {
    assert(cfg->groups >= 1 && cfg->groups <= 256 && cfg->engine && cfg->ids);
    assert(!cfg->min_free_bytes || cfg->data_dir);
    rn_raft_log *l = rn_xcalloc(1, sizeof *l);
    l->base.ops = &raft_ops;
    l->loop = cfg->loop;
    l->engine = cfg->engine;
    l->applier = rn_engine_applier(cfg->engine);
    l->groups = cfg->groups;
    l->ids = cfg->ids;
    l->g = rn_xcalloc(cfg->groups, sizeof *l->g);
    l->leader_changed = cfg->leader_changed;
    l->restored = cfg->restored;
    l->published = cfg->published;
    l->admit = cfg->admit;
    assert(!cfg->fork_pin == !cfg->fork_unpin && !cfg->fork_pin == !cfg->fork_alive &&
           !cfg->fork_pin == !cfg->fork_cut);
    l->fork_pin = cfg->fork_pin;
    l->fork_unpin = cfg->fork_unpin;
    l->fork_alive = cfg->fork_alive;
    l->fork_cut = cfg->fork_cut;
    l->hosts = cfg->hosts;
    l->min_free_bytes = cfg->min_free_bytes;
    l->data_dir = cfg->data_dir ? rn_xstrdup(cfg->data_dir) : NULL;
    l->leader_changed_arg = cfg->hook_arg;
    uv_timer_init(cfg->loop, &l->resume);
    l->resume.data = l;
    uv_unref((uv_handle_t *)&l->resume);
    uv_check_init(cfg->loop, &l->flush);
    l->flush.data = l;
    uv_check_start(&l->flush, on_flush);
    uv_unref((uv_handle_t *)&l->flush);
    return l;
}

rn_cmdlog *rn_raft_log_cmdlog(rn_raft_log *l) {
    return &l->base;
}

consensus_fsm rn_raft_log_fsm(rn_raft_log *l) {
    return (consensus_fsm){.ctx = l,
                           .apply = fsm_apply,
                           .free_result = fsm_free_result,
                           .snapshot = fsm_snapshot,
                           .snapshot_durable = fsm_snapshot_durable,
                           .restore = fsm_restore,
                           .leader_changed = fsm_leader_changed};
}

void rn_raft_log_attach(rn_raft_log *l, consensus *c) {
    l->node = c;
    if (!c)
        l->queued = 1; /* refuse what waits, at the next check phase */
}

static void flush_closed(uv_handle_t *h) {
    rn_raft_log *l = h->data;
    if (++l->closed < 2)
        return;
    for (unsigned g = 0; g < l->groups; g++) {
        drop_held(&l->g[g]);
        size_t i = 0;
        void *v;
        while (rn_map_next(&l->g[g].dirty, &i, &v))
            free(v);
        rn_map_free(&l->g[g].dirty);
        free(l->g[g].durable);
    }
    free(l->g);
    free(l->data_dir);
    free(l);
}

void rn_raft_log_free(rn_raft_log *l) {
    if (!l)
        return;
    for (unsigned g = 0; g < l->groups; g++)
        assert(!l->g[g].head); /* refused once detached */
    uv_close((uv_handle_t *)&l->flush, flush_closed);
    uv_close((uv_handle_t *)&l->resume, flush_closed);
}
