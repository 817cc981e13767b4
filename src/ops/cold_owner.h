/*
 * cold_owner.h — who removes which objects of the cold store: what the
 * tiers' orphan sweep judges an object by (the state's references, and
 * those of the backups at --backup-to), and, in cluster mode, where every
 * node shares one store, which node judges each object (the leader of the
 * group of its stream) and the confirmation it gets before removing any,
 * and whose counts of a stream's staged parts hold (the same leader's,
 * for as long as its term lasts).
 */
#ifndef RN_OPS_COLD_OWNER_H
#define RN_OPS_COLD_OWNER_H

#include "cluster/cluster.h"
#include "engine/engine.h"
#include "ops/backup.h"
#include "tiers/tiers.h"

typedef struct {
    rn_engine *engine;
    rn_tiers *tiers;
    rn_backups *backups; /* --backup-to; NULL: none */
    rn_cluster *cluster; /* cluster mode; NULL: a single node, or the node is stopping */
} rn_cold_owner;

/* Sets up the tiers' orphan sweep and drops for o's node, before
 * rn_tiers_start; o must stay until the tiers are stopped, and its
 * cluster set to NULL before that cluster stops. A single node judges
 * every object; a cluster node the objects of the groups it leads, after
 * a confirmation of its leadership per group; its counts of staged parts
 * are made anew in each term it leads. With backups on a single
 * node, every body of a shared cold store is removed by the sweep only,
 * which keeps those a backup references (a cluster's backups reference
 * none: they copy every body). */
void rn_cold_owner_watch(rn_cold_owner *o);

#endif
