/*
 * follower_reads.h — read-your-writes on a follower (issue 28): a read that
 * does not ask consistency=local waits until this replica applied what the
 * group's leader had committed when the read arrived (its ReadIndex,
 * read_index.h), so a client reads its own acknowledged writes whichever
 * node it asks. Reads that arrive while an ask is out share the next one,
 * so a burst of reads costs two asks per group at most.
 */
#ifndef RN_CLUSTER_FOLLOWER_READS_H
#define RN_CLUSTER_FOLLOWER_READS_H

#include "cluster/cluster.h"
#include "protocol/routing.h"

typedef struct cluster_follower_reads cluster_follower_reads;

cluster_follower_reads *cluster_follower_reads_new(rn_cluster *cl);
/* Calls cb(arg, 1) once this replica applied the group's ReadIndex asked
 * after this call, or cb(arg, 0) when no leader could tell it: after the
 * asks of about a second failed (no leader known, or the leader refused or
 * did not answer), or when the node stops. Never calls back inside this
 * call, unless the node stopped. */
void cluster_follower_read(cluster_follower_reads *fr, unsigned group, rn_confirm_cb cb, void *arg);
/* Fails every waiting read (cb(arg, 0)) and stops (the node stops); free
 * once the loop closed its handle. */
void cluster_follower_reads_stop(cluster_follower_reads *fr);
void cluster_follower_reads_free(cluster_follower_reads *fr);

#endif
