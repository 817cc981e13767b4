/*
 * balance.h — where the groups should be and who should lead them: the
 * placement decisions, as pure functions of the metadata table (meta.h)
 * and of which nodes answer. The metadata group's leader asks them
 * (placement_driver.h) and records what they say; they are deterministic,
 * so any node would decide the same from the same table.
 *
 * Replicas. A group is to be on R nodes, R the replication factor the
 * table records capped by the active nodes (a cluster of two holds two
 * replicas). A node takes replicas while it is active; a leaving node's
 * replicas go first, then a group short of R gets one, one over R loses
 * one, and last, while the most and the least loaded active nodes that
 * answer hold two or more replicas apart, one replica moves from the one
 * to the other. A change names one node in and at most one out, and is
 * made only for a group that is not moving already (its reported
 * configuration is its target), so each group changes one step at a time;
 * only a node that left is taken out of a moving group's target (a move
 * to a node that was then decommissioned would otherwise never end).
 * New replicas go to the least loaded node that answers (ties broken by a
 * hash of group and node, so groups spread).
 *
 * Leaders. Each group has a preferred leader: a voter of its target that
 * is active, not drained and answers. The group's leader hands its
 * leadership to it (reconcile.h). Preferences move only when one is not
 * eligible any more or the counts of the eligible nodes are two or more
 * apart, so leaderships do not churn.
 */
#ifndef RN_CLUSTER_BALANCE_H
#define RN_CLUSTER_BALANCE_H

#include <stdint.h>

#include "cluster/meta.h"

/* alive[id] (id 0..255): the node answered recently (this node: always). */

/* The replication factor in force: the table's, capped by the active
 * nodes (at least 1). */
unsigned rn_balance_replicas(const rn_meta *m);

/* The first placement of groups over nodes ids (n of them, ascending):
 * min(replicas, n) nodes per group, every node holding as many as the
 * others or one less, and a preferred leader per group spread the same
 * way. out: groups entries (target and leader set). */
void rn_balance_initial(unsigned replicas, unsigned groups, const uint8_t *ids, unsigned n,
                        rn_meta_group *out);

/* The next change of a group's target, if one is due: returns 1 with the
 * group and its new target (ascending, *n ids), else 0. */
int rn_balance_move(const rn_meta *m, const uint8_t alive[256], unsigned *group,
                    uint8_t ids[RN_META_MAX_REPLICAS], unsigned *n);

/* The next change of a group's preferred leader, if one is due: returns 1
 * with the group and the node (0: none can lead it as preferred), else 0.
 * leading (m->groups entries, or NULL): the node leading each group now,
 * 0 when unknown. A group whose preferred node can no longer lead it
 * prefers the node that leads it now when that one may (its leadership
 * then moves no more after the election that replaced a dead node). */
int rn_balance_leader(const rn_meta *m, const uint8_t alive[256], const uint8_t *leading,
                      unsigned *group, unsigned *leader);

#endif
