/*
 * reconcile.h — a group's leader brings the group to what the metadata
 * table wants of it, one change at a time.
 *
 * For a data group the table's target; for the metadata group every node
 * not removed. Each step waits for the one before it: a node the target
 * names and the configuration lacks is added as a spare, made a standby
 * (it receives the log, or a snapshot and then its streams' bytes from its
 * peers, fetch.h), and made a voter only once it kept up with the leader
 * (its stored index within a few entries of the commit index, and a
 * status report of it, taken after that, saying it applied that far and
 * fetches no bytes any more); then a member the target does not name is
 * removed, a voter only once every node of the target votes (a target
 * node that died before it was promoted must not cost the group a
 * voter). A leader that is itself to be removed first hands its
 * leadership to a voter of the target. A standby that does not answer is
 * not waited for (a standby counts for no majority), so a dead node
 * waiting for its decommission holds up nothing else.
 *
 * Leadership: a drained node hands every leadership it holds to another
 * voter at once (and again if an election gives it one back); otherwise a
 * data group's leader hands its leadership to the group's preferred
 * leader (balance.h) when that one is a voter that answers. A leadership
 * goes only to a node that reports a healthy disk (health.h) under the
 * data directory first seen (identity.h). Transfers of
 * a group are spaced by a few seconds, so a target that cannot take over
 * is not asked in a loop.
 */
#ifndef RN_CLUSTER_RECONCILE_H
#define RN_CLUSTER_RECONCILE_H

#include "cluster/cluster.h"

typedef struct cluster_reconcile cluster_reconcile;

cluster_reconcile *cluster_reconcile_new(rn_cluster *cl);
/* The step under way for a group this node leads, for the report
 * ("adding", "catching_up", "promoting", "removing", "transferring"), or
 * NULL when none. */
const char *cluster_reconcile_step(const cluster_reconcile *r, unsigned group);
/* Stops the timer; free after the loop closed it. */
void cluster_reconcile_stop(cluster_reconcile *r);
void cluster_reconcile_free(cluster_reconcile *r);

#endif
