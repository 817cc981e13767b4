/*
 * placement_driver.h — the metadata group: its state machine's hooks, its
 * proposals, and the placement driver its leader runs.
 *
 * The metadata group is a Raft group like the data groups (the consensus
 * layer's group index `groups`, directory raft/g<groups>), replicated on
 * every node that is not removed, whose state machine is meta.h's table.
 *
 * Its leader, twice a second (one proposal in flight at a time):
 *   - makes the table when there is none: the --peer nodes, --replicas,
 *     and a first placement (balance.h); the data groups then bootstrap
 *     on their first nodes (hosting.h);
 *   - records each group's configuration as its leader reported it
 *     (peers.c), once committed: the table then says where a group is, not
 *     only where it should be;
 *   - removes a leaving node that no group uses any more;
 *   - changes one group's target when balance.h says so, while fewer than
 *     MOVES_AT_ONCE groups move (a move's bytes are paced too: fetch.h);
 *   - moves preferred leaders as balance.h says.
 * Operators' changes (membership.c) are proposed the same way.
 */
#ifndef RN_CLUSTER_PLACEMENT_DRIVER_H
#define RN_CLUSTER_PLACEMENT_DRIVER_H

#include "cluster/cluster.h"
#include "consensus/consensus.h"
#include "cluster/meta.h"

typedef struct cluster_driver cluster_driver;

/* The metadata group's state machine (consensus_fsm's hooks for its
 * group), over the node's table (cl->meta). */
void *cluster_meta_apply(rn_cluster *cl, const void *data, size_t len);
void cluster_meta_free_result(void *result);
int cluster_meta_snapshot(rn_cluster *cl, void **out, size_t *len);
int cluster_meta_restore(rn_cluster *cl, const void *data, size_t len);

/* The outcome of a proposal to the metadata group: status as consensus.h;
 * with OK, the result of each of its n commands. */
typedef void (*cluster_meta_cb)(void *arg, consensus_status status, const rn_meta_result *results,
                                unsigned n);
/* Proposes the commands in entry (meta.h's rn_meta_cmd_*) as one entry of
 * the metadata group (this node must lead it; NOT_LEADER otherwise). */
void cluster_meta_propose(rn_cluster *cl, const rn_buf *entry, cluster_meta_cb cb, void *arg);

/* The first placement of a new cluster (balance.h's, over the --peer
 * nodes and --replicas): groups entries. The same on every node started
 * with the same --peer and --replicas, so each bootstraps its groups at
 * its first start without waiting for the table, which the metadata
 * leader then makes with the same placement. */
void cluster_first_placement(const rn_cluster *cl, rn_meta_group *groups);

cluster_driver *cluster_driver_new(rn_cluster *cl);
/* Groups moving at most at once. */
#define MOVES_AT_ONCE 2
/* Stops the timer; free after the loop closed it. */
void cluster_driver_stop(cluster_driver *d);
void cluster_driver_free(cluster_driver *d);

#endif
