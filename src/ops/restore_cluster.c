/*
 * restore_cluster.c — a restore into one node of a new cluster. See
 * restore_cluster.h.
 *
 * Ids and serials have the cluster's layout, (serial << 16) | (node << 8) |
 * group (cluster/placement.h), with node byte 0: no node has id 0, so no
 * node ever issues them, whatever its cluster-ids. Streams take serials 1..n
 * (rn_restore_place), the rewrites serials from 2^35 plus the backup id
 * modulo 2^34: the same for every node and every attempt, different for
 * another backup, and apart from the streams' (n stays far below 2^34).
 */
#include "ops/restore_cluster.h"
#include "cluster/cluster.h"
#include "cluster/cluster_config.h"
#include "consensus/consensus.h"
#include "cluster/placement.h"
#include "util/clock.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static unsigned group_of(void *arg, const char *path, size_t len) {
    return rn_placement_group(path, len, *(const unsigned *)arg);
}

void rn_restore_cluster_place(const rn_config *cfg, rn_restore *img,
                              const rn_backup_stream *streams, size_t n, uint64_t *to_ids) {
    unsigned groups = (unsigned)cfg->groups;
    rn_restore_place(img, group_of, &groups, streams, n, to_ids);
}

int rn_restore_cluster_commit(uv_loop_t *loop, const rn_config *cfg, rn_restore *img,
                              uint64_t backup_id, char *err, size_t errcap) {
    int rc = rn_restore_rewrite(img, (1ull << 35) + (backup_id & ((1ull << 34) - 1)), rn_now_ms());
    if (rc != 0) {
        snprintf(err, errcap, "the streams' histories cannot be rewritten: %s", strerror(-rc));
        return -1;
    }
    rn_id_issuer ids;
    if (rn_cluster_mark(cfg, err, errcap) != 0 ||
        rn_id_issuer_open(&ids, cfg->data_dir, (unsigned)cfg->node_id, err, errcap) != 0)
        return -1;
    rn_id_issuer_close(&ids);
    consensus_peer peers[RN_MAX_PEERS];
    consensus_seed_config sc = {.loop = loop,
                                .data_dir = cfg->data_dir,
                                .self_id = cfg->node_id,
                                .self_address = rn_cluster_consensus_peers(cfg, peers),
                                .peers = peers,
                                .n_peers = (unsigned)cfg->n_peers};
    rn_buf manifest = {0};
    for (unsigned g = 0; g < cfg->groups && rc == 0; g++) {
        manifest.len = 0;
        rn_restore_manifest(img, rn_placement_stream_in_group, &g, g, &manifest);
        rc = consensus_seed(&sc, g, manifest.data, manifest.len, err, errcap);
    }
    rn_buf_free(&manifest);
    return rc;
}
