/*
 * recovery.h — bringing back a group that lost its majority from this
 * node's replica (--accept-loss=group-N[,group-M...][,meta] in cluster
 * mode), as etcd's --force-new-cluster or CockroachDB's loss-of-quorum
 * recovery do, and recording it as a history rewrite (extensions §2.4).
 *
 * At the start that names it, for each listed group this node holds Raft
 * data of: first a check, for a few seconds, that no peer reports the
 * group alive (a voter of it that knows a leader: the group did not lose
 * its majority, and forcing it here would make a second group beside it;
 * the recovery is then refused, loudly, and the group starts as usual).
 * Then the group's configuration is forced to this node alone (libraft's
 * raft_recover, before the group starts), so it elects this node at once;
 * its placement stays the table's, so the group's leader adds the other
 * nodes back (reconcile.h) as soon as they answer, or the operator
 * decommissions the lost nodes and the groups move to new ones.
 *
 * The replica may hold less than what the group acknowledged (the lost
 * nodes may have had later entries): so before the group serves anything,
 * every stream of it is rewritten at the tail it kept (a new
 * Stream-Incarnation; Stream-Previous-Incarnation the token before, with
 * the kept tail as Stream-Inherited-Offset; producers' epochs closed by
 * history), and a reader or writer holding the old token gets 412. Until
 * every rewrite applied, the group answers reads 503 GROUP_RESTARTING and
 * holds writes. The metadata group (meta) holds no streams: it is only
 * forced.
 *
 * On disk: <data>/cluster-recovering lists the groups forced and not yet
 * rewritten (written durably before the force: a crash in between rewrites
 * at the next start); <data>/cluster-recovered lists those done, and a
 * later start naming one of them again does nothing for it (a flag left in
 * a unit file must not force a group that has peers again).
 */
#ifndef RN_CLUSTER_RECOVERY_H
#define RN_CLUSTER_RECOVERY_H

#include <stddef.h>
#include <stdint.h>

#include "cluster/cluster.h"

/* Parses --accept-loss's cluster form into want (groups + 1 flags, the
 * metadata group last). Returns 0, or -1 with a message in err. */
int cluster_recovery_parse(const char *value, unsigned groups, uint8_t *want, char *err,
                           size_t errcap);

typedef struct cluster_recovery cluster_recovery;

/* The recoveries cfg's --accept-loss asks and those a crash left to
 * finish (cluster-recovering). NULL with err set when a file cannot be
 * read or written. */
cluster_recovery *cluster_recovery_new(rn_cluster *cl, char *err, size_t errcap);
/* True when group g is to start forced (its start waits for the check:
 * the hosting start skips it). */
int cluster_recovery_holds_start(const cluster_recovery *r, unsigned g);
/* True while group g must serve nothing (forced, not yet rewritten). */
int cluster_recovery_pending(const cluster_recovery *r, unsigned g);
/* Stops the timer; free after the loop closed it. */
void cluster_recovery_stop(cluster_recovery *r);
void cluster_recovery_free(cluster_recovery *r);

#endif
