/*
 * reads.c — linearizable reads and the leader's first entry.
 *
 * libraft 0.15 has no ReadIndex. A read barrier is a RAFT_BARRIER entry
 * instead: once it commits in this node's term, a majority stored an entry
 * of that term after the read was asked for, so no other leader was
 * elected before then; and libraft fires the barrier's callback only when
 * every entry before it is applied here. That costs a log append (a disk
 * write on a majority), so reads share rounds: the readers that arrive
 * while a round is in flight wait together for the next one. They may not
 * join the round in flight: its entry was appended before they arrived,
 * and a majority may have acknowledged it before a newer leader was
 * elected and acknowledged writes they must see.
 *
 * libraft does not append an entry when a node becomes leader, so entries
 * of earlier terms stay uncommitted (and unapplied everywhere) until the
 * first write of the new term. The watch therefore appends a barrier as
 * soon as this node leads a term (Raft's no-op); when it applies, the
 * leader is "ready": its applied state holds everything committed before.
 *
 * Rounds are started from the loop's check phase or from a caller, never
 * from inside libraft's callbacks (see consensus_int.h).
 */
#include "cluster/consensus_int.h"

#include <assert.h>
#include <stdlib.h>

#include "util/buf.h"

static void reader_fire(cs_completion *item) {
    cs_reader *r = (cs_reader *)item;
    consensus_read_cb cb = r->cb;
    void *arg = r->arg;
    consensus_status st = r->status;
    uint64_t applied = r->applied;
    free(r);
    cb(arg, st, applied);
}

/* Reports st to every reader of the list. */
static void finish_readers(cs_group *g, cs_reader *list, consensus_status st) {
    uint64_t applied = st == CONSENSUS_OK ? raft_last_applied(&g->raft) : 0;
    while (list) {
        cs_reader *next = list->next;
        list->status = st;
        list->applied = applied;
        cs_enqueue(g->node, &list->done);
        list = next;
    }
}

static void fail_waiting(cs_group *g, consensus_status st) {
    cs_reader *list = g->readers_waiting;
    g->readers_waiting = g->readers_waiting_tail = NULL;
    g->n_waiting = 0;
    finish_readers(g, list, st);
}

static void read_round_done(struct raft_barrier *req, int status) {
    cs_group *g = req->data;
    assert(g->read_round_active);
    g->read_round_active = false;
    cs_reader *list = g->readers_confirming;
    g->readers_confirming = NULL;
    if (status == 0) {
        g->ready_term = g->raft.current_term;
        finish_readers(g, list, CONSENSUS_OK);
        return; /* the waiting readers get the next round from the watch */
    }
    finish_readers(g, list, CONSENSUS_NOT_LEADER);
    fail_waiting(g, CONSENSUS_NOT_LEADER);
}

/* Starts a round for every waiting reader. Precondition: none in flight. */
static void start_round(cs_group *g) {
    assert(!g->read_round_active && g->readers_waiting != NULL);
    g->readers_confirming = g->readers_waiting;
    g->readers_waiting = g->readers_waiting_tail = NULL;
    g->n_waiting = 0;
    g->read_req.data = g;
    int rv = raft_barrier(&g->raft, &g->read_req, read_round_done);
    if (rv != 0) {
        cs_reader *list = g->readers_confirming;
        g->readers_confirming = NULL;
        finish_readers(g, list,
                       rv == RAFT_NOTLEADER ? CONSENSUS_NOT_LEADER : CONSENSUS_NOT_PROPOSED);
        return;
    }
    g->read_round_active = true;
    g->read_barriers++;
}

void consensus_read_barrier(consensus *c, unsigned group, consensus_read_cb cb, void *arg) {
    assert(c != NULL && group < c->cfg.groups && cb != NULL && !c->in_fsm);
    cs_group *g = &c->groups[group];
    cs_reader *r = rn_xcalloc(1, sizeof *r);
    r->done.fire = reader_fire;
    r->cb = cb;
    r->arg = arg;
    consensus_status refusal = CONSENSUS_OK;
    if (c->stopping || g->stage != CS_RAFT_READY)
        refusal = CONSENSUS_NOT_PROPOSED;
    else if (!consensus_is_leader(c, group))
        refusal = CONSENSUS_NOT_LEADER;
    else if (g->n_waiting >= c->cfg.params.max_read_waiters)
        refusal = CONSENSUS_BUSY;
    if (refusal != CONSENSUS_OK) {
        finish_readers(g, r, refusal);
        return;
    }
    if (g->readers_waiting_tail)
        g->readers_waiting_tail->next = r;
    else
        g->readers_waiting = r;
    g->readers_waiting_tail = r;
    g->n_waiting++;
    if (!g->read_round_active)
        start_round(g);
}

static void noop_done(struct raft_barrier *req, int status) {
    cs_group *g = req->data;
    g->noop_active = false;
    if (status == 0 && g->raft.current_term == g->noop_term)
        g->ready_term = g->noop_term;
}

void cs_leader_duties(cs_group *g) {
    assert(g->stage == CS_RAFT_READY);
    if (!consensus_is_leader(g->node, g->index)) {
        if (!g->read_round_active && g->readers_waiting)
            fail_waiting(g, CONSENSUS_NOT_LEADER);
        return;
    }
    if (!g->noop_active && g->noop_term != g->raft.current_term) {
        g->noop_req.data = g;
        if (raft_barrier(&g->raft, &g->noop_req, noop_done) == 0) {
            g->noop_active = true;
            g->noop_term = g->raft.current_term;
        }
    }
    if (!g->read_round_active && g->readers_waiting)
        start_round(g);
}

void cs_reads_stop(cs_group *g) {
    fail_waiting(g, CONSENSUS_NOT_PROPOSED);
}
