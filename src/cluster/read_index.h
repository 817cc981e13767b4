/*
 * read_index.h — a group's ReadIndex, asked from any replica: the group's
 * leader confirms after the ask that it still leads (consensus_read_barrier:
 * a majority confirmed its term, and it applied everything committed
 * before) and tells its applied index N; a replica that applied N holds
 * every write the cluster acknowledged before the ask. A node that leads
 * the group asks itself; another asks the leader it knows over HTTP (GET
 * /__runnel/cluster/read-index?group=G, signed as every peer request).
 * Backups' settle (settle.c) and read-your-writes on followers
 * (follower_reads.c) use it.
 */
#ifndef RN_CLUSTER_READ_INDEX_H
#define RN_CLUSTER_READ_INDEX_H

#include <stdint.h>

#include "cluster/cluster.h"

typedef struct cluster_ask cluster_ask;

/* ok: the leader's applied index is in index; else the ask failed (no
 * leader, no answer, a refusal). */
typedef void (*cluster_ask_fn)(void *arg, int ok, uint64_t index);

/* Asks group's ReadIndex, bounded by timeout_ms. fn runs once, later
 * (never inside this call), unless the ask is cancelled first. Returns NULL
 * when no leader is known, or this node leads the group but is not ready
 * (nothing started, fn will not run). */
cluster_ask *cluster_ask_read_index(rn_cluster *cl, unsigned group, uint64_t timeout_ms,
                                    cluster_ask_fn fn, void *arg);
/* fn will not run (what was started finishes and is dropped). */
void cluster_ask_cancel(cluster_ask *a);

#endif
