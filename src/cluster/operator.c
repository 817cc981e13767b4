/*
 * operator.c — what the operator's plane (ops/admin.c) asks of a node in
 * cluster mode: the nodes, each group's leader and term, a stream key's
 * group, and requests to peers signed as every peer request is (the
 * cluster's outbound client, cluster_http.c). See cluster.h.
 */
#include "cluster/cluster_int.h"

#include <assert.h>

size_t rn_cluster_nodes(const rn_cluster *cl, rn_cluster_node *out, size_t cap) {
    size_t n = 0;
    for (int i = 0; i < cl->cfg.n_peers; i++) {
        const rn_meta_node *m = rn_meta_node_get(&cl->meta, (unsigned)cl->cfg.peers[i].id);
        if (m && m->state == RN_NODE_REMOVED)
            continue;
        if (n < cap)
            out[n] = (rn_cluster_node){.id = cl->cfg.peers[i].id, .url = cl->cfg.peers[i].url};
        n++;
    }
    return n;
}

uint64_t rn_cluster_self(const rn_cluster *cl) {
    return cl->cfg.node_id;
}

unsigned rn_cluster_groups(const rn_cluster *cl) {
    return cl->groups;
}

unsigned rn_cluster_group_of(const rn_cluster *cl, const char *key, size_t len) {
    return rn_placement_group(key, len, cl->groups);
}

uint64_t rn_cluster_group_leader(const rn_cluster *cl, unsigned g, uint64_t *term, int *leading) {
    assert(g < cl->groups);
    *term = 0;
    *leading = 0;
    if (!cl->node)
        return 0;
    if (!consensus_group_running(cl->node, g))
        return cluster_leader_of(cl, g, term); /* not hosted here: as its replicas report it */
    consensus_group_info info;
    consensus_group_info_get(cl->node, g, &info);
    *term = info.term;
    *leading = info.leader_ready && info.leader_id == cl->cfg.node_id;
    return info.leader_id;
}

rn_fetch *rn_cluster_peer_request(rn_cluster *cl, const rn_fetch_request *req, rn_fetch_fn fn,
                                  void *arg) {
    if (!cl->node || !cl->polling)
        return NULL;
    return rn_outbound_start(cl->http, req, fn, arg);
}
