/*
 * hosting.h — which data groups run on this node: those the metadata
 * table places here, and those it is still a member of.
 *
 * A node starts a group once the table's target names it: on a group that
 * has never moved (epoch 0) the target's nodes bootstrap it together, as
 * the first nodes of a new cluster do; any other start waits to be added
 * by the group's leader (reconcile.h: a spare, then a standby, then a
 * voter). At a node's start every group with Raft data here starts too,
 * before the table is known: the node may be a member; and a new node of a
 * new cluster bootstraps the groups the first placement puts on it (every
 * node computes the same), so a new cluster needs one election per group,
 * not the metadata group's first and then the groups'.
 *
 * A node drops a group (stops it, then erases its Raft directory and its
 * streams' files and state) once the table neither places it here nor
 * lists it in the group's configuration, as the group's leader reported
 * it after the change that removed this node committed, and this node's
 * copy of the table is caught up (it applied the metadata group's
 * ReadIndex since its start): a node restarted on an old copy of the table
 * must not drop a group it is a voter of.
 */
#ifndef RN_CLUSTER_HOSTING_H
#define RN_CLUSTER_HOSTING_H

#include "cluster/cluster.h"

typedef struct cluster_hosting cluster_hosting;

/* Starts the groups with Raft data here (the node's start) and, on a
 * fresh node (no Raft data at all) of a new cluster (not --join), those the
 * first placement puts here, bootstrapped (placement_driver.h); NULL with a
 * message in err when one fails to load. */
cluster_hosting *cluster_hosting_new(rn_cluster *cl, int fresh, char *err, size_t errcap);
/* Stops the timer (the node stops); free after the loop closed it. */
void cluster_hosting_stop(cluster_hosting *h);
void cluster_hosting_free(cluster_hosting *h);

#endif
