/*
 * appends.c — libraft's log writes (raft_io append, truncate, snapshot_put
 * and close) wrapped, for three libraft 0.15 defects and for the stall
 * watchdog:
 *
 * - A full disk. raft_uv writes entries into preallocated open segments;
 *   when the next segment cannot be created (fallocate: ENOSPC) it fails
 *   every append waiting for it at once (RAFT_NOSPACE). On a leader each
 *   failure truncates libraft's in-memory log from that append's first
 *   index (replication.c appendLeaderCb), so the second one truncates past
 *   the end of the log and, with assertions compiled out, frees memory
 *   twice: the process dies in removeSuffix (seen: "double free or
 *   corruption", or a segfault with no log line; upstream fixed it in
 *   0.17.1, 8b9c95c). On a follower a failed append leaves its entries in
 *   the in-memory log unwritten (upstream 857e17e, 0.18): the leader's
 *   resends find them there and nothing is ever written again, so the
 *   follower never stores another entry of the group until it restarts.
 *   So a write that failed for want of a new segment is never reported to
 *   libraft: it is held, with every log operation libraft asks for after
 *   it (in order: appends, truncations and snapshot stores), and retried
 *   one at a time every RETRY_MS until space returns. libraft sees a slow
 *   disk, which it handles: a leader commits through its followers, a
 *   follower lags.
 * - Closing a leader with two or more writes queued (raft_close cancels
 *   them, each truncating as above; found by test_consensus: a stop with
 *   proposals in flight crashed inside raft_close). consensus_stop closes a
 *   group only once its leader writes are done or all held (cs_group's
 *   leader_appends), and writes still held at the close are reported done
 *   to the closing instance, which then only releases them (it is
 *   RAFT_UNAVAILABLE: nothing is acknowledged to anyone). A leader write
 *   that fails otherwise (a disk error) while another is in flight stops
 *   the process before libraft corrupts itself.
 * - The watchdog (health.c) needs to know that log writes stall: the age
 *   of the oldest append libraft asked for that is not done (held or in
 *   raft_uv) is kept here. The test-only failure point log-stall holds
 *   writes as a full disk does, for the chaos harness's stalled disk.
 *
 * An append is a leader's when the group leads at the time libraft submits
 * it (libraft submits leader appends only while leading).
 */
#include "consensus/consensus_int.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/buf.h"
#include "util/fault.h"
#include "util/files.h"
#include "util/list.h"
#include "util/log.h"

#define RETRY_MS 250

typedef enum { OP_APPEND, OP_TRUNCATE, OP_SNAPSHOT_PUT } op_kind;

/* One log operation libraft asked for, from the call until its outcome. */
struct cs_log_op {
    struct cs_log_op *next;  /* in the group's held list */
    rn_list_node unfinished; /* an append: in the group's, until its outcome */
    op_kind kind;
    cs_group *group;
    uint64_t seq;   /* the order libraft asked in */
    uint64_t at_ms; /* when (loop time) */
    /* an append */
    struct raft_io_append inner;  /* what the real append sees */
    struct raft_io_append *outer; /* libraft's request */
    raft_io_append_cb outer_cb;
    const struct raft_entry *entries;
    unsigned n;
    bool leader;
    /* a truncation */
    raft_index index;
    /* a snapshot store */
    unsigned trailing;
    struct raft_io_snapshot_put *put;
    const struct raft_snapshot *snapshot;
    raft_io_snapshot_put_cb put_cb;
};

static uint64_t now_ms(const cs_group *g) {
    return uv_now(g->node->cfg.loop);
}

/* Puts op into the held list in libraft's order. */
static void hold(cs_group *g, cs_log_op *op) {
    cs_log_op **at = &g->held;
    while (*at && (*at)->seq < op->seq)
        at = &(*at)->next;
    op->next = *at;
    *at = op;
    g->held_count++;
}

static cs_log_op *unhold(cs_group *g) {
    cs_log_op *op = g->held;
    g->held = op->next;
    op->next = NULL;
    g->held_count--;
    return op;
}

/* True when a write failed only because the next segment could not be
 * created for lack of space (raft_uv's prepare), which is retried. */
static bool retryable(const cs_group *g, int status) {
    return status == RAFT_NOSPACE && g->stage == CS_RAFT_READY &&
           strstr(g->io.errmsg, "create segment") != NULL;
}

static void append_done(struct raft_io_append *inner, int status);

static int submit_append(cs_group *g, cs_log_op *op) {
    g->writes_pending++;
    int rv = g->real_append(&g->io, &op->inner, op->entries, op->n, append_done);
    if (rv != 0)
        g->writes_pending--;
    return rv;
}

/* True when the file system has less free than the node keeps for a
 * restart (consensus_params.min_free_bytes). */
static bool below_floor(const cs_group *g) {
    uint64_t floor = g->node->cfg.params.min_free_bytes;
    return floor && rn_free_bytes(g->node->data_dir) < floor;
}

/* Why a log write must wait before it is submitted: the free space below
 * the floor, or a stalled disk (the test-only failure point log-stall);
 * NULL when it may go. */
static const char *must_wait(const cs_group *g) {
    if (below_floor(g))
        return "the disk's free space is below the part kept for a restart";
    if (rn_fault_fail("log-stall"))
        return "log writes stall (failure point log-stall)";
    return NULL;
}

/* Starts holding (logged once per episode). */
static void start_holding(cs_group *g, const char *why) {
    if (g->held_since)
        return;
    g->held_since = now_ms(g);
    g->held_retry_ms = g->held_since;
    rn_log(RN_LOG_ERROR, "cluster_log", "group %u: %s; log writes wait and are retried every %d ms",
           g->index, why, RETRY_MS);
}

/* Runs held operations in order, from the oldest, until one is in flight
 * (an append: its outcome continues) or none is left. */
static void run_held(cs_group *g) {
    while (g->held && !g->retry_inflight) {
        cs_log_op *op = g->held;
        if (op->kind == OP_APPEND) {
            if (must_wait(g) || submit_append(g, op) != 0)
                return; /* tried again later */
            unhold(g);
            g->retry_inflight = true;
            return;
        }
        unhold(g);
        if (op->kind == OP_TRUNCATE) {
            int rv = g->real_truncate(&g->io, op->index);
            if (rv != 0)
                rn_log(RN_LOG_ERROR, "cluster_log", "group %u: a held truncation failed: %s",
                       g->index, raft_strerror(rv));
        } else {
            int rv = g->real_snapshot_put(&g->io, op->trailing, op->put, op->snapshot, op->put_cb);
            if (rv != 0)
                op->put_cb(op->put, rv);
        }
        free(op);
    }
    if (!g->held && !g->retry_inflight && g->held_since) {
        rn_log(RN_LOG_WARN, "cluster_log", "group %u: log writes resumed after %llu ms waiting",
               g->index, (unsigned long long)(now_ms(g) - g->held_since));
        g->held_since = 0;
    }
}

static void append_done(struct raft_io_append *inner, int status) {
    cs_log_op *op = inner->data;
    cs_group *g = op->group;
    assert(g->writes_pending > 0);
    g->writes_pending--;
    g->retry_inflight = false;
    if (retryable(g, status)) {
        char why[RAFT_ERRMSG_BUF_SIZE + 64];
        snprintf(why, sizeof why, "the disk has no room for the next log segment (%s)",
                 g->io.errmsg);
        start_holding(g, why);
        hold(g, op);
        return;
    }
    rn_list_remove(&g->unfinished, &op->unfinished);
    if (op->leader) {
        assert(g->leader_appends > 0);
        g->leader_appends--;
        if (status != 0 && g->leader_appends > 0) {
            rn_log(RN_LOG_ERROR, "cluster_append_failed",
                   "group %u: a leader write failed (%s: %s) with %llu more in flight; libraft "
                   "0.15 would corrupt its log: stopping",
                   g->index, raft_strerror(status), g->io.errmsg,
                   (unsigned long long)g->leader_appends);
            abort();
        }
    }
    struct raft_io_append *outer = op->outer;
    raft_io_append_cb cb = op->outer_cb;
    free(op);
    if (g->held_since && g->stage == CS_RAFT_READY)
        run_held(g); /* the next held operation, before libraft asks for more */
    cb(outer, status);
}

static cs_log_op *new_op(cs_group *g, op_kind kind) {
    cs_log_op *op = rn_xcalloc(1, sizeof *op);
    op->kind = kind;
    op->group = g;
    op->seq = ++g->log_ops;
    op->at_ms = now_ms(g);
    return op;
}

/* Whether libraft's next operation must wait behind held ones. */
static bool blocked(const cs_group *g) {
    return g->held != NULL || g->retry_inflight;
}

static int append(struct raft_io *io, struct raft_io_append *req, const struct raft_entry entries[],
                  unsigned n, raft_io_append_cb cb) {
    struct raft *r = io->data;
    cs_group *g = r->data;
    assert(g != NULL && g->real_append != NULL);
    cs_log_op *op = new_op(g, OP_APPEND);
    op->inner.data = op;
    op->outer = req;
    op->outer_cb = cb;
    op->entries = entries;
    op->n = n;
    op->leader = r->state == RAFT_LEADER;
    req->cb = cb;
    if (op->leader)
        g->leader_appends++;
    rn_list_push_back(&g->unfinished, &op->unfinished);
    const char *wait = blocked(g) ? NULL : must_wait(g);
    if (wait)
        start_holding(g, wait);
    if (blocked(g) || g->held_since) {
        hold(g, op);
        return 0;
    }
    int rv = submit_append(g, op);
    if (rv != 0) {
        if (op->leader)
            g->leader_appends--;
        rn_list_remove(&g->unfinished, &op->unfinished);
        free(op);
    }
    return rv;
}

static int truncate_log(struct raft_io *io, raft_index index) {
    struct raft *r = io->data;
    cs_group *g = r->data;
    if (!blocked(g))
        return g->real_truncate(io, index);
    cs_log_op *op = new_op(g, OP_TRUNCATE);
    op->index = index;
    hold(g, op);
    return 0;
}

static int snapshot_put(struct raft_io *io, unsigned trailing, struct raft_io_snapshot_put *req,
                        const struct raft_snapshot *snapshot, raft_io_snapshot_put_cb cb) {
    struct raft *r = io->data;
    cs_group *g = r->data;
    if (!blocked(g))
        return g->real_snapshot_put(io, trailing, req, snapshot, cb);
    cs_log_op *op = new_op(g, OP_SNAPSHOT_PUT);
    op->trailing = trailing;
    op->put = req;
    op->snapshot = snapshot;
    op->put_cb = cb;
    hold(g, op);
    return 0;
}

/* raft_uv 0.15 may call its close callback twice: a segment finalized
 * while closing leaves the queue of open segments before its writer's
 * handles are closed, so the callback fires once the other handles are
 * closed and again from the writer's (seen in test_consensus after a full
 * disk; libraft then frees its log twice). Only the first call is passed
 * on; consensus.c frees raft_uv only turns later (own_handle_closed). */
static void io_closed(struct raft_io *io) {
    struct raft *r = io->data;
    cs_group *g = r->data;
    raft_io_close_cb cb = g->io_close_cb;
    g->io_close_cb = NULL;
    if (cb)
        cb(io);
}

/* raft_close made the instance unavailable before closing its io: what is
 * still held is released (reported done, which an unavailable instance
 * only releases; a snapshot store canceled), then raft_uv closes. */
static void close_io(struct raft_io *io, raft_io_close_cb cb) {
    struct raft *r = io->data;
    cs_group *g = r->data;
    assert(r->state == RAFT_UNAVAILABLE);
    while (g->held) {
        cs_log_op *op = unhold(g);
        if (op->kind == OP_APPEND) {
            if (op->leader)
                g->leader_appends--;
            rn_list_remove(&g->unfinished, &op->unfinished);
            op->outer_cb(op->outer, 0);
        } else if (op->kind == OP_SNAPSHOT_PUT) {
            op->put_cb(op->put, RAFT_CANCELED);
        }
        free(op);
    }
    g->io_close_cb = cb;
    g->real_close(io, io_closed);
}

void cs_appends_retry(cs_group *g) {
    if (!g->held || g->retry_inflight || g->stage != CS_RAFT_READY)
        return;
    uint64_t now = now_ms(g);
    if (now - g->held_retry_ms < RETRY_MS)
        return;
    g->held_retry_ms = now;
    run_held(g);
}

bool cs_appends_drained(const cs_group *g) {
    return g->leader_appends == 0 || (g->held && !g->retry_inflight && g->writes_pending == 0);
}

uint64_t cs_appends_stall_ms(const cs_group *g) {
    if (rn_list_empty(&g->unfinished))
        return 0;
    const cs_log_op *oldest = rn_list_entry(g->unfinished.first, cs_log_op, unfinished);
    uint64_t now = now_ms(g);
    return now > oldest->at_ms ? now - oldest->at_ms : 0;
}

void cs_appends_wrap(cs_group *g) {
    assert(g->io.append != NULL && g->io.append != append);
    g->real_append = g->io.append;
    g->io.append = append;
    g->real_truncate = g->io.truncate;
    g->io.truncate = truncate_log;
    g->real_snapshot_put = g->io.snapshot_put;
    g->io.snapshot_put = snapshot_put;
    g->real_close = g->io.close;
    g->io.close = close_io;
}
