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
 * A full disk does not stop the process. A replica (leader or follower)
 * that cannot apply a committed entry (its data finds no room in the
 * stream files: rn_engine_reserve_apply, checked for every command before
 * any applies; or the disk is below min_free_bytes) stops applying the
 * group: that entry and every later one
 * are kept in memory, in order (libraft counts them applied; its log
 * still holds them, as no snapshot is taken meanwhile, so a restart
 * re-applies them), retried every 250 ms, and applied once their data has
 * room; a snapshot sent by the leader replaces them. Meanwhile the group's
 * applied index reported is the last one really applied, the group's
 * proposals here are refused RN_ERR_APPLY_STOPPED (nothing proposed), and
 * a proposal whose entry was kept is answered RN_ERR_UNAVAILABLE (it is
 * committed and applies later). Before every proposal the owner's admit
 * hook may refuse it RN_ERR_DISK_FULL.
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

#include "consensus/consensus.h"
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
    /* Optional, given hook_arg, at the loop turn's proposal of a group's
     * commands: 0 refuses them all RN_ERR_DISK_FULL, nothing proposed (a
     * disk below its reserve). */
    int (*admit)(void *arg, unsigned group);
    /* Optional, given hook_arg: rn_cmdlog_ops.pin, unpin, fork_alive and
     * fork_cut (forks apart from their source: cluster/forks.h). Without
     * them a fork must be in its source's group (apart answers 0). */
    void (*fork_pin)(void *arg, const rn_fork_pin_ask *ask, rn_fork_pin_done done, void *darg);
    void (*fork_unpin)(void *arg, uint64_t source_id, uint64_t fork_id);
    void (*fork_alive)(void *arg, uint64_t source_id, uint64_t fork_id, rn_fork_alive_done done,
                       void *darg);
    void (*fork_cut)(void *arg, uint64_t source_id, uint64_t fork_id, uint64_t offset,
                     rn_fork_cut_done done, void *darg);
    /* Optional, given hook_arg (NULL: every group): rn_cmdlog_ops.hosts,
     * whether this node holds group's state. */
    int (*hosts)(void *arg, unsigned group);
    void *hook_arg;
    /* 0: none; else applying stops before an entry with data while the
     * file system of data_dir has less free (the space a restart needs) */
    uint64_t min_free_bytes;
    const char *data_dir;
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
/* Applying stopped (a replica whose disk has no room for a committed
 * entry's data): the first entry not applied, why (errno) and for which
 * stream, since when (loop ms), and the bytes of the entries kept. */
typedef struct {
    uint64_t index;
    int err;
    uint64_t stream;
    uint64_t since_ms;
    size_t held_bytes;
} rn_raft_log_stop;
/* 1 with *out filled when the group's applying stopped here, else 0. */
int rn_raft_log_stopped(const rn_raft_log *l, unsigned group, rn_raft_log_stop *out);
/* The group's applied index here, given the consensus layer's (which
 * counts entries kept unapplied as applied). */
uint64_t rn_raft_log_applied(const rn_raft_log *l, unsigned group, uint64_t applied);
/* The group of a stream key. */
unsigned rn_raft_log_group(const rn_raft_log *l, const char *key, size_t len);
/* Frees the log (after the consensus node stopped; runs the loop to close
 * its handle). */
void rn_raft_log_free(rn_raft_log *l);

#endif
