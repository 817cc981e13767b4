/*
 * reads.c — linearizable reads and the leader's first entry.
 *
 * A read is answered once this node proved, after the read arrived, that it
 * still led the group, and applied everything committed before. Reads that
 * arrive while a round is in flight wait together for the next one. They
 * may not join the round in flight: its proof may predate them (a majority
 * may have answered before a newer leader was elected and acknowledged
 * writes they must see). Rounds come in two kinds.
 *
 * Confirm rounds (ReadIndex, which libraft 0.15 lacks; no disk write). The
 * leader records its commit index C and asks every other voter over the
 * control channel (control.h) whether it follows this node in term T. A
 * peer confirms only if its current term is T and the leader it knows is
 * this node (a candidate, a follower of no known leader, or one in another
 * term refuses). Once a majority of voters, this node included, confirmed
 * T, the round waits until this node applied C and answers its readers.
 * Why that is linearizable:
 *  - No leader of a newer term T' > T had been elected when the reads
 *    arrived. Electing it takes votes from a majority, each given with a
 *    current term >= T' (terms never decrease). The confirming majority
 *    and that one share a node; it confirmed with current term T, so it
 *    confirmed before it voted for T'; it confirmed after the round's asks
 *    were sent, which is after the reads arrived. Round numbers are never
 *    reused while the node runs, so an answer to an earlier round (perhaps
 *    given before the reads arrived) never counts. Membership changes one
 *    voter at a time (libraft), so majorities of successive configurations
 *    intersect too. Writes of a newer leader were therefore acknowledged
 *    after the reads arrived and need not be seen.
 *  - Every write acknowledged before the reads arrived has an index <= C.
 *    This node's own were committed before their answers, and the commit
 *    index only grows. Earlier leaders' committed entries are in this
 *    node's log (Raft's leader completeness) before its first entry of T,
 *    but this node's commit index covers them only once an entry of T
 *    committed (Raft commits earlier terms' entries only through one of
 *    the current term). So confirm rounds are used only once the leader is
 *    ready: its no-op of T (below) applied here, hence committed, C >= its
 *    index. Before that, rounds are barrier entries.
 *  - Applied >= C: the state read holds every such write.
 * Answers are best effort: a round that has not gathered its majority
 * when every asked peer answered, or after half an election timeout, hands
 * its readers to a barrier round (correct, only slower), as do groups of
 * more than CS_CONFIRM_MAX_VOTERS voters.
 *
 * Barrier rounds. A RAFT_BARRIER entry: once it commits in this node's
 * term, a majority stored an entry of T after the reads arrived, so no
 * newer leader had been elected then; and libraft fires the barrier's
 * callback only when every entry before it is applied here. It costs a log
 * append on a majority.
 *
 * The leader's no-op: libraft does not append an entry when a node becomes
 * leader, so entries of earlier terms stay uncommitted (and unapplied
 * everywhere) until the first write of the new term. The watch therefore
 * appends a barrier as soon as this node leads a term (Raft's no-op); when
 * it applies, the leader is "ready".
 *
 * Rounds are started from the loop's check phase, from a caller or from the
 * control channel's callbacks, never from inside libraft's callbacks (see
 * consensus_int.h).
 */
#include "consensus/consensus_int.h"

#include <assert.h>
#include <stdlib.h>

#include "util/buf.h"
#include "util/fault.h"

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

/* Moves the waiting readers to the round about to start. */
static void take_waiting(cs_group *g) {
    assert(g->round == CS_ROUND_NONE && g->readers_confirming == NULL);
    g->readers_confirming = g->readers_waiting;
    g->readers_waiting = g->readers_waiting_tail = NULL;
    g->n_waiting = 0;
}

/* Ends the round in flight, reporting st to its readers. */
static void end_round(cs_group *g, consensus_status st) {
    cs_reader *list = g->readers_confirming;
    g->readers_confirming = NULL;
    g->round = CS_ROUND_NONE;
    finish_readers(g, list, st);
}

/* --- barrier rounds ------------------------------------------------------- */

static void barrier_round_done(struct raft_barrier *req, int status) {
    cs_group *g = req->data;
    assert(g->round == CS_ROUND_BARRIER);
    if (status == 0) {
        g->ready_term = g->raft.current_term;
        end_round(g, CONSENSUS_OK);
        return; /* the waiting readers get the next round from the watch */
    }
    end_round(g, CONSENSUS_NOT_LEADER);
    fail_waiting(g, CONSENSUS_NOT_LEADER);
}

static void start_barrier_round(cs_group *g) {
    take_waiting(g);
    g->read_req.data = g;
    int rv = raft_barrier(&g->raft, &g->read_req, barrier_round_done);
    if (rv != 0) {
        end_round(g, rv == RAFT_NOTLEADER ? CONSENSUS_NOT_LEADER : CONSENSUS_NOT_PROPOSED);
        return;
    }
    g->round = CS_ROUND_BARRIER;
    g->read_rounds++;
    g->read_barriers++;
}

/* --- confirm rounds ------------------------------------------------------- */

static bool is_voter(const cs_group *g, raft_id id) {
    const struct raft_configuration *conf = &g->raft.configuration;
    for (unsigned i = 0; i < conf->n; i++)
        if (conf->servers[i].id == id)
            return conf->servers[i].role == RAFT_VOTER;
    return false;
}

static unsigned count_voters(const cs_group *g) {
    unsigned n = 0;
    const struct raft_configuration *conf = &g->raft.configuration;
    for (unsigned i = 0; i < conf->n; i++)
        n += conf->servers[i].role == RAFT_VOTER;
    return n;
}

static void confirm_progress(cs_group *g);

static void start_confirm_round(cs_group *g) {
    consensus *c = g->node;
    take_waiting(g);
    g->round = CS_ROUND_CONFIRM;
    g->read_rounds++;
    g->confirm_round = ++c->last_round;
    g->confirm_term = g->raft.current_term;
    g->confirm_index = g->raft.commit_index;
    g->confirm_started = uv_now(c->cfg.loop);
    g->confirm_needed = count_voters(g) / 2 + 1;
    g->confirm_count = 0;
    g->confirm_unanswered = 0;
    rn_wire_confirm ask = {.kind = RN_WIRE_CONFIRM_ASK,
                           .group = g->index,
                           .term = g->confirm_term,
                           .round = g->confirm_round};
    const struct raft_configuration *conf = &g->raft.configuration;
    for (unsigned i = 0; i < conf->n; i++) {
        const struct raft_server *s = &conf->servers[i];
        if (s->role != RAFT_VOTER)
            continue;
        if (s->id == c->cfg.self_id)
            g->confirmed_by[g->confirm_count++] = s->id;
        else if (rn_ctl_ask(c->ctl, s->id, s->address, &ask) == 0)
            g->confirm_unanswered++;
    }
    confirm_progress(g);
}

/* The readers of a confirm round that cannot gather its majority go to a
 * barrier round, with the readers waiting (all arrived before its entry). */
static void fall_back_to_barrier(cs_group *g) {
    cs_reader *list = g->readers_confirming;
    g->readers_confirming = NULL;
    g->round = CS_ROUND_NONE;
    unsigned n = 0;
    cs_reader *last = list;
    for (cs_reader *r = list; r; r = r->next, n++)
        last = r;
    if (last) {
        last->next = g->readers_waiting;
        if (g->readers_waiting_tail == NULL)
            g->readers_waiting_tail = last;
        g->readers_waiting = list;
        g->n_waiting += n;
    }
    if (g->readers_waiting)
        start_barrier_round(g);
}

/* Answers the confirm round's readers once it can, fails it once this node
 * no longer leads its term, or falls back to a barrier. */
static void confirm_progress(cs_group *g) {
    assert(g->round == CS_ROUND_CONFIRM);
    consensus *c = g->node;
    if (!consensus_is_leader(c, g->index) || g->raft.current_term != g->confirm_term) {
        end_round(g, CONSENSUS_NOT_LEADER);
        return;
    }
    if (g->confirm_count >= g->confirm_needed) {
        if (raft_last_applied(&g->raft) < g->confirm_index)
            return; /* the watch looks again after the next applies */
        end_round(g, CONSENSUS_OK);
        if (g->readers_waiting)
            start_confirm_round(g);
        return;
    }
    uint64_t timeout = c->cfg.params.election_timeout_ms / 2;
    if (g->confirm_unanswered == 0 || uv_now(c->cfg.loop) - g->confirm_started >= timeout)
        fall_back_to_barrier(g);
}

bool cs_confirm_ask(void *node, uint64_t sender, const rn_wire_confirm *ask,
                    rn_wire_confirm *answer) {
    consensus *c = node;
    *answer =
        (rn_wire_confirm){.kind = RN_WIRE_CONFIRM_ANSWER, .group = ask->group, .round = ask->round};
    if (c->stopping || ask->group >= c->cfg.groups)
        return true; /* refused: term 0, not confirmed */
    cs_group *g = &c->groups[ask->group];
    if (g->stage != CS_RAFT_READY)
        return true;
    raft_id leader = 0;
    const char *address = NULL;
    raft_leader(&g->raft, &leader, &address);
    answer->term = g->raft.current_term;
    answer->confirmed = raft_state(&g->raft) == RAFT_FOLLOWER &&
                        g->raft.current_term == ask->term && leader == sender;
    return true;
}

void cs_confirm_answer(void *node, uint64_t peer, const rn_wire_confirm *answer) {
    consensus *c = node;
    if (c->stopping || answer->group >= c->cfg.groups)
        return;
    cs_group *g = &c->groups[answer->group];
    if (g->round != CS_ROUND_CONFIRM || answer->round != g->confirm_round)
        return; /* an earlier round's: it may predate this round's readers */
    if (g->confirm_unanswered > 0)
        g->confirm_unanswered--;
    bool counted = false;
    for (unsigned i = 0; i < g->confirm_count; i++)
        counted |= g->confirmed_by[i] == peer;
    if (answer->confirmed && answer->term == g->confirm_term && !counted && is_voter(g, peer) &&
        g->confirm_count < CS_CONFIRM_MAX_VOTERS)
        g->confirmed_by[g->confirm_count++] = peer;
    confirm_progress(g);
}

/* --- rounds ---------------------------------------------------------------- */

/* Starts a round for every waiting reader. Precondition: none in flight. */
static void start_round(cs_group *g) {
    assert(g->round == CS_ROUND_NONE && g->readers_waiting != NULL);
    const consensus *c = g->node;
    if (c->cfg.params.read_confirm && consensus_leader_ready(c, g->index) &&
        count_voters(g) <= CS_CONFIRM_MAX_VOTERS)
        start_confirm_round(g);
    else
        start_barrier_round(g);
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
    if (g->round == CS_ROUND_NONE)
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
    if (g->round == CS_ROUND_CONFIRM)
        confirm_progress(g); /* fails it once not leading */
    if (!consensus_is_leader(g->node, g->index)) {
        if (g->round == CS_ROUND_NONE && g->readers_waiting)
            fail_waiting(g, CONSENSUS_NOT_LEADER);
        return;
    }
    if (!g->noop_active && g->noop_term != g->raft.current_term && !rn_fault_fail("leader-noop")) {
        g->noop_req.data = g;
        if (raft_barrier(&g->raft, &g->noop_req, noop_done) == 0) {
            g->noop_active = true;
            g->noop_term = g->raft.current_term;
        }
    }
    if (g->round == CS_ROUND_NONE && g->readers_waiting)
        start_round(g);
}

void cs_reads_stop(cs_group *g) {
    if (g->round == CS_ROUND_CONFIRM)
        end_round(g, CONSENSUS_NOT_LEADER);
    fail_waiting(g, CONSENSUS_NOT_PROPOSED);
}
