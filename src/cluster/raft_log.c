/*
 * raft_log.c — the Raft groups behind the command-log seam. See
 * raft_log.h.
 */
#include "cluster/raft_log.h"
#include "engine/command.h"
#include "util/buf.h"
#include "util/log.h"
#include "util/map.h"
#include "util/metrics.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#define ENTRY_MAGIC 0x31424e52u    /* "RNB1" read as little-endian bytes */
#define BATCH_MAX_BYTES (4u << 20) /* a proposal's commands, unless one is larger */
#define BATCH_MAX_COMMANDS 4096u

/* What the log keeps in an entry's log area. */
typedef struct {
    rn_cmdlog_entry *next; /* in its group's queue */
} entry_slot;

static_assert(sizeof(entry_slot) <= RN_CMDLOG_PRIVATE_BYTES, "the entry's log area is too small");

static entry_slot *slot(rn_cmdlog_entry *entry) {
    return (entry_slot *)entry->log.bytes;
}

typedef struct {
    rn_cmdlog_entry *head, *tail; /* submitted, not yet proposed */
    rn_map dirty;                 /* ids of streams written since the group's last snapshot */
    uint64_t *durable;            /* taken by the snapshot in progress: to sync */
    size_t n_durable;
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
    void *leader_changed_arg;
};

/* A proposal in flight: the entries of its commands, in order. */
typedef struct {
    rn_raft_log *log;
    uint64_t proposed_ns; /* uv_hrtime() when proposed */
    unsigned n;
    rn_cmdlog_entry *entries[];
} batch;

/* What applying an entry left: one rn_applied per command. */
typedef struct {
    unsigned n;
    rn_applied applied[];
} apply_result;

unsigned rn_raft_log_group(const rn_raft_log *l, const char *key, size_t len) {
    return rn_placement_group(key, len, l->groups);
}

/* ---- proposing ---- */

static rn_result refusal_of(consensus_status st) {
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
    assert(st != CONSENSUS_OK || (r && r->n == b->n));
    rn_metric_commit((uv_hrtime() - b->proposed_ns) / 1000);
    for (unsigned i = 0; i < b->n; i++) {
        rn_cmdlog_entry *entry = b->entries[i]; /* done() may free it */
        if (st == CONSENSUS_OK && r) {
            entry->applied = 1;
            entry->result = r->applied[i];
            entry->done(entry);
        } else {
            refuse(entry, refusal_of(st));
        }
    }
    free(r);
    free(b);
}

/* Proposes the group's waiting commands, in entries of at most
 * BATCH_MAX_BYTES (a larger command goes alone) and BATCH_MAX_COMMANDS. */
static void propose_group(rn_raft_log *l, unsigned group) {
    group_state *gs = &l->g[group];
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
        if (l->node)
            consensus_propose(l->node, group, body.data, body.len, proposed, b);
        else
            proposed(b, CONSENSUS_NOT_PROPOSED, 0, NULL); /* from the check phase */
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

static const rn_cmdlog_ops raft_ops = {.submit = submit, .issue_id = issue_id, .accepts = accepts};

/* ---- the state machine ---- */

static void mark_dirty(group_state *gs, uint64_t id) {
    if (rn_map_get(&gs->dirty, &id, sizeof id))
        return;
    uint64_t *key = rn_xmalloc(sizeof *key);
    *key = id;
    rn_map_put(&gs->dirty, key, sizeof *key, key);
}

static void *fsm_apply(void *ctx, unsigned group, uint64_t index, const void *data, size_t len) {
    rn_raft_log *l = ctx;
    rn_reader r;
    rn_reader_init(&r, data, len);
    uint32_t magic = rn_read_u32(&r), n = rn_read_u32(&r);
    if (r.failed || magic != ENTRY_MAGIC || n > len / 4) {
        rn_log(RN_LOG_ERROR, "fatal", "group %u: committed entry %llu is not a command batch",
               group, (unsigned long long)index);
        abort(); /* every replica would stop here: the log is not ours */
    }
    apply_result *res = rn_xmalloc(sizeof *res + n * sizeof res->applied[0]);
    res->n = n;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t clen = rn_read_u32(&r);
        const uint8_t *bytes = rn_read_bytes(&r, clen);
        rn_cmd cmd;
        if (!bytes || rn_cmd_decode(bytes, clen, &cmd) != 0 ||
            rn_placement_id_group(cmd.stream_id) != group) {
            rn_log(RN_LOG_ERROR, "fatal",
                   "group %u: command %u of committed entry %llu does "
                   "not decode",
                   group, i, (unsigned long long)index);
            abort();
        }
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

static int fsm_restore(void *ctx, unsigned group, uint64_t index, const void *m, size_t len) {
    rn_raft_log *l = ctx;
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
    l->leader_changed_arg = cfg->hook_arg;
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
    for (unsigned g = 0; g < l->groups; g++) {
        size_t i = 0;
        void *v;
        while (rn_map_next(&l->g[g].dirty, &i, &v))
            free(v);
        rn_map_free(&l->g[g].dirty);
        free(l->g[g].durable);
    }
    free(l->g);
    free(l);
}

void rn_raft_log_free(rn_raft_log *l) {
    if (!l)
        return;
    for (unsigned g = 0; g < l->groups; g++)
        assert(!l->g[g].head); /* refused once detached */
    uv_close((uv_handle_t *)&l->flush, flush_closed);
}
