/*
 * members.c — leadership transfer and membership changes (add a node as
 * spare, assign a role, remove), one of each at a time per group.
 *
 * The libraft request structs live in the group, not per call: libraft
 * keeps pointers to them after their callback in two places (a transfer's
 * TimeoutNow message still being written; raft_assign's failure path
 * leaves the change registered and fails it again when leadership is
 * lost), so per-call memory could be touched after it was freed. The
 * callers' side (cs_op) is per call and is detached before it is reported,
 * so a repeated libraft callback finds nothing to report.
 */
#include "consensus/consensus_int.h"

#include <assert.h>
#include <stdlib.h>

#include "consensus/wire.h"

/* Refuses when the group cannot take an operation now; returns true then. */
static bool refused(consensus *c, cs_group *g, cs_op *busy_slot, consensus_done_cb cb, void *arg) {
    consensus_status st = CONSENSUS_OK;
    if (c->stopping || g->stage != CS_RAFT_READY)
        st = CONSENSUS_NOT_PROPOSED;
    else if (!consensus_is_leader(c, g->index))
        st = CONSENSUS_NOT_LEADER;
    else if (busy_slot != NULL)
        st = CONSENSUS_BUSY;
    if (st == CONSENSUS_OK)
        return false;
    cs_op_refuse(c, cb, arg, st);
    return true;
}

/* --- transfer ------------------------------------------------------------- */

static void transfer_done(struct raft_transfer *req) {
    cs_group *g = req->data;
    cs_op *op = g->transfer_op;
    if (op == NULL)
        return;
    g->transfer_op = NULL;
    raft_id leader = 0;
    const char *address = NULL;
    raft_leader(&g->raft, &leader, &address);
    op->status = leader != 0 && leader == g->transfer_target ? CONSENSUS_OK : CONSENSUS_TIMED_OUT;
    cs_enqueue(g->node, &op->done);
}

void consensus_transfer(consensus *c, unsigned group, uint64_t target, consensus_done_cb cb,
                        void *arg) {
    assert(c != NULL && group < c->cfg.groups && cb != NULL && !c->in_fsm);
    cs_group *g = &c->groups[group];
    if (refused(c, g, g->transfer_op, cb, arg))
        return;
    g->transfer_req.data = g;
    int rv = raft_transfer(&g->raft, &g->transfer_req, target, transfer_done);
    if (rv != 0) {
        cs_op_refuse(c, cb, arg, cs_refusal_status(rv));
        return;
    }
    g->transfer_target = g->transfer_req.id; /* libraft's choice when target is 0 */
    g->transfer_op = cs_op_new(cb, arg);
}

/* --- membership ------------------------------------------------------------ */

static void change_done(struct raft_change *req, int status) {
    cs_group *g = req->data;
    cs_op *op = g->change_op;
    if (op == NULL)
        return;
    g->change_op = NULL;
    if (status == 0)
        op->status = CONSENSUS_OK;
    else if (status == RAFT_NOCONNECTION)
        op->status = CONSENSUS_TIMED_OUT; /* promotion: the node did not catch up */
    else
        op->status = CONSENSUS_OUTCOME_UNKNOWN;
    cs_enqueue(g->node, &op->done);
}

/* Records the operation after libraft accepted it, or refuses it. */
static void change_submitted(consensus *c, cs_group *g, int rv, consensus_done_cb cb, void *arg) {
    if (rv != 0) {
        cs_op_refuse(c, cb, arg, cs_refusal_status(rv));
        return;
    }
    g->change_op = cs_op_new(cb, arg);
}

void consensus_add(consensus *c, unsigned group, uint64_t id, const char *address,
                   consensus_done_cb cb, void *arg) {
    assert(c != NULL && group < c->cfg.groups && address != NULL && cb != NULL && !c->in_fsm);
    cs_group *g = &c->groups[group];
    if (refused(c, g, g->change_op, cb, arg))
        return;
    struct sockaddr_storage sa;
    if (id == 0 || rn_wire_parse_address(address, &sa) != 0) {
        cs_op_refuse(c, cb, arg, CONSENSUS_INVALID);
        return;
    }
    g->change_req.data = g;
    change_submitted(c, g, raft_add(&g->raft, &g->change_req, id, address, change_done), cb, arg);
}

void consensus_assign(consensus *c, unsigned group, uint64_t id, consensus_role role,
                      consensus_done_cb cb, void *arg) {
    assert(c != NULL && group < c->cfg.groups && cb != NULL && !c->in_fsm);
    assert(role == CONSENSUS_SPARE || role == CONSENSUS_STANDBY || role == CONSENSUS_VOTER);
    cs_group *g = &c->groups[group];
    if (refused(c, g, g->change_op, cb, arg))
        return;
    int raft_role = role == CONSENSUS_VOTER     ? RAFT_VOTER
                    : role == CONSENSUS_STANDBY ? RAFT_STANDBY
                                                : RAFT_SPARE;
    g->change_req.data = g;
    change_submitted(c, g, raft_assign(&g->raft, &g->change_req, id, raft_role, change_done), cb,
                     arg);
}

void consensus_remove(consensus *c, unsigned group, uint64_t id, consensus_done_cb cb, void *arg) {
    assert(c != NULL && group < c->cfg.groups && cb != NULL && !c->in_fsm);
    cs_group *g = &c->groups[group];
    if (refused(c, g, g->change_op, cb, arg))
        return;
    g->change_req.data = g;
    change_submitted(c, g, raft_remove(&g->raft, &g->change_req, id, change_done), cb, arg);
}
