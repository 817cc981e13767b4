/*
 * config_peers.h — one value of --peer into rn_config's peers (config.c
 * reads the setting; its form is checked here, what the peers must
 * satisfy together in cluster/cluster_config.c).
 */
#ifndef RN_CONFIG_PEERS_H
#define RN_CONFIG_PEERS_H

#include <stddef.h>

#include "ops/config.h"

/* Parses one peer, N=RAFTADDR,URL[,PEERURL] (the n bytes at v): N in
 * 1..255, RAFTADDR 1..63 bytes (its form is checked with the rest of the
 * cluster settings), URL and PEERURL http:// or https:// URLs of
 * printable ASCII without '"', '\\' or ',', trailing slashes dropped.
 * Appends it to cfg->peers and returns 0; returns -1, with a message
 * starting with `source` in err, for a malformed value or when cfg holds
 * RN_MAX_PEERS already. */
int rn_config_add_peer(rn_config *cfg, const char *v, size_t n, const char *source, char *err,
                       size_t errcap);

#endif
