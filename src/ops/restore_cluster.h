/*
 * restore_cluster.h — the cluster side of `runnel restore` (restore.c):
 * with serve's cluster options (--node-id, --cluster-id, --peer, --groups)
 * a restore builds one node's data directory of a new cluster. Every
 * stream is re-placed by its key (the group the cluster derives from it,
 * a new id of that group no node issues), its history rewritten as a
 * single-node restore does, and each group's manifest stored as the
 * group's first Raft snapshot (consensus_seed). Restoring the same backup
 * for every node with the same peers and groups gives every node the same
 * state; `runnel serve` then starts from those snapshots.
 */
#ifndef RN_OPS_RESTORE_CLUSTER_H
#define RN_OPS_RESTORE_CLUSTER_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "engine/engine.h"
#include "ops/config.h"

/* Re-places the decoded backup's streams for cfg's group count (cfg in
 * cluster mode, rn_cluster_config_check passed): to_ids[i] receives the id
 * streams[i] (n of them) has in the cluster; a fork whose source lands in
 * another group is pinned there (rn_restore_place). */
void rn_restore_cluster_place(const rn_config *cfg, rn_restore *img,
                              const rn_backup_stream *streams, size_t n, uint64_t *to_ids);

/* Rewrites every stream's history (tokens from backup_id, the same for
 * every node and every attempt) and writes the node's cluster files in
 * cfg->data_dir: the cluster-node marker, cluster-ids, and every group's
 * first snapshot. The stream files and bodies must be there and durable.
 * Runs loop while the snapshots are written. Returns 0, or -1 with a
 * message in err. */
int rn_restore_cluster_commit(uv_loop_t *loop, const rn_config *cfg, rn_restore *img,
                              uint64_t backup_id, char *err, size_t errcap);

#endif
