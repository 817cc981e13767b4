/*
 * cluster_config.h — the cluster settings of runnel serve checked together:
 * what --node-id, --cluster-id, --peer, --groups and --election-timeout-ms
 * must satisfy beyond each value's own form (config.c), and the node's view
 * of its peers (id, Raft address, public URL for redirects, the URL its
 * peers' requests go to).
 */
#ifndef RN_CLUSTER_CONFIG_H
#define RN_CLUSTER_CONFIG_H

#include <stddef.h>

#include "consensus/consensus.h"
#include "ops/config.h"

/* Checks the cluster settings of cfg. Single node (node_id 0): no peer,
 * cluster key or peer certificate may be given. Cluster mode: --cluster-id
 * given, this node among the peers, peer ids, Raft addresses and URLs each
 * unique, every Raft address numeric (a.b.c.d:port or [v6]:port); a
 * cluster key or peer certificates, not both; with peer certificates, peer
 * requests over TLS (--tls-cert on the one listener, or --peer-listen) to
 * https URLs; with --peer-listen, this node's own PEERURL given;
 * --accept-loss naming groups (recovery.h). Returns 0, or -1 with a
 * message naming the setting in err. */
int rn_cluster_config_check(const rn_config *cfg, char *err, size_t errcap);

/* The peer with this id, or NULL. */
const rn_peer_config *rn_cluster_peer(const rn_config *cfg, uint64_t id);

/* The base URL a peer's requests from other nodes go to: its PEERURL (its
 * peer listener), else its public URL. */
const char *rn_cluster_peer_url(const rn_peer_config *p);

/* cfg's peers (checked) as the consensus layer's (id and Raft address)
 * into peers; returns this node's Raft address. */
const char *rn_cluster_consensus_peers(const rn_config *cfg, consensus_peer peers[RN_MAX_PEERS]);

#endif
