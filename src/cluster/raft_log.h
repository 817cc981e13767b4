/*
 * raft_log.h — the engine's command log in cluster mode: the Raft groups of
 * the consensus layer behind the command-log seam (engine/cmdlog.h).
 *
 * Submitted commands are batched per group: the commands submitted during
 * one loop turn go into one Raft entry per group (proposed from the loop's
 * check phase), so many appends share one replicated write. Every replica
 * applies committed entries through the engine's applier, command by
 * command, writing their data to the stream files at apply. On the node
 * whose proposal it was, each command's entry completes from the
 * proposal's callback with what apply left; elsewhere the engine's
 * observers hear of it at once (rn_engine_applied_elsewhere).
 *
 * A command's group is the group of its stream's id (placement.h). The log
 * takes commands only for groups this node leads and whose earlier entries
 * it applied (consensus_leader_ready): the engine asks before every
 * mutation (accepts), and a proposal that finds leadership gone is refused
 * RN_ERR_NO_LEADER (nothing proposed) or answered RN_ERR_UNAVAILABLE (the
 * entry was proposed and its apply not observed: it may apply).
 *
 * Entry layout (little-endian): u32 magic 'RNB1', u32 command count, then
 * per command u32 length and the encoded command (command.h).
 *
 * Snapshots are the engine's manifest of the group's streams; the stream
 * files they name are made durable (fdatasync of every stream written
 * since the group's previous snapshot) on a worker before libraft stores
 * the snapshot and drops the log entries it replaces.
 */
#ifndef RN_CLUSTER_RAFT_LOG_H
#define RN_CLUSTER_RAFT_LOG_H

#include <stdint.h>
#include <uv.h>

#include "cluster/consensus.h"
#include "cluster/placement.h"
#include "engine/engine.h"

typedef struct rn_raft_log rn_raft_log;

typedef struct {
    uv_loop_t *loop;
    rn_engine *engine;
    unsigned groups;   /* 1..256 */
    rn_id_issuer *ids; /* issues the ids of new streams (the caller's) */
    /* Optional, given hook_arg: a group's leader, term or this node's
     * readiness changed (consensus_fsm.leader_changed, passed on); a group
     * restored a snapshot (the engine may have found gaps). Both run inside
     * the consensus layer: no consensus call but queries. */
    void (*leader_changed)(void *arg, unsigned group, uint64_t leader, uint64_t term, bool ready);
    void (*restored)(void *arg, unsigned group);
    /* Optional, given hook_arg, from inside apply: stream id's PUBLISH
     * applied here (its body may have to be fetched). */
    void (*published)(void *arg, uint64_t stream_id);
    void *hook_arg;
} rn_raft_log_config;

/* A log for cfg->engine; give its cmdlog to the engine
 * (rn_engine_set_log) and its state machine to consensus_start, then
 * attach the started node. */
rn_raft_log *rn_raft_log_new(const rn_raft_log_config *cfg);
rn_cmdlog *rn_raft_log_cmdlog(rn_raft_log *l);
consensus_fsm rn_raft_log_fsm(rn_raft_log *l);
/* Proposals go to c from now on (NULL: the node is stopping; commands
 * still waiting for their turn are refused RN_ERR_NO_LEADER). */
void rn_raft_log_attach(rn_raft_log *l, consensus *c);
/* The group of a stream key. */
unsigned rn_raft_log_group(const rn_raft_log *l, const char *key, size_t len);
/* Frees the log (after the consensus node stopped; runs the loop to close
 * its handle). */
void rn_raft_log_free(rn_raft_log *l);

#endif
