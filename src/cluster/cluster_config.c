/*
 * cluster_config.c — the cluster settings checked together. See
 * cluster_config.h.
 */
#include "cluster/cluster_config.h"
#include "cluster/recovery.h"
#include "consensus/wire.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

const rn_peer_config *rn_cluster_peer(const rn_config *cfg, uint64_t id) {
    for (int i = 0; i < cfg->n_peers; i++)
        if (cfg->peers[i].id == id)
            return &cfg->peers[i];
    return NULL;
}

const char *rn_cluster_peer_url(const rn_peer_config *p) {
    return p->peer_url[0] ? p->peer_url : p->url;
}

/* How nodes prove who they are, and where peer requests go: checked
 * together (cluster mode). */
static int check_security(const rn_config *cfg, char *err, size_t errcap) {
    const rn_peer_config *self = rn_cluster_peer(cfg, cfg->node_id);
    if (cfg->peer_listen.host[0] && !self->peer_url[0]) {
        snprintf(err, errcap,
                 "--peer-listen: this node's --peer %llu must name its peer listener's URL "
                 "(N=RAFTADDR,URL,PEERURL): its peers' requests go there",
                 (unsigned long long)cfg->node_id);
        return -1;
    }
    if (!cfg->peer_cert[0])
        return 0;
    if (cfg->cluster_key_file[0]) {
        snprintf(err, errcap,
                 "--peer-cert and --cluster-key-file are two ways of authenticating peers: "
                 "choose one");
        return -1;
    }
    if (!cfg->tls_cert[0] && !cfg->peer_listen.host[0]) {
        snprintf(err, errcap,
                 "--peer-cert: peer requests carry the node's certificate, so they need TLS: "
                 "--tls-cert, or a --peer-listen (which speaks TLS with --peer-cert)");
        return -1;
    }
    for (int i = 0; i < cfg->n_peers; i++) {
        const char *url = rn_cluster_peer_url(&cfg->peers[i]);
        if (strncasecmp(url, "https://", 8) != 0) {
            snprintf(err, errcap,
                     "--peer %llu: with --peer-cert, peer requests go over TLS: its %s must be "
                     "https (got \"%s\")",
                     (unsigned long long)cfg->peers[i].id,
                     cfg->peers[i].peer_url[0] ? "PEERURL" : "URL", url);
            return -1;
        }
    }
    return 0;
}

const char *rn_cluster_consensus_peers(const rn_config *cfg, consensus_peer peers[RN_MAX_PEERS]) {
    const char *self = NULL;
    for (int i = 0; i < cfg->n_peers; i++) {
        peers[i] = (consensus_peer){.id = cfg->peers[i].id, .address = cfg->peers[i].raft};
        if (cfg->peers[i].id == cfg->node_id)
            self = cfg->peers[i].raft;
    }
    return self;
}

int rn_cluster_config_check(const rn_config *cfg, char *err, size_t errcap) {
    if (!cfg->node_id) {
        const char *cluster_only = cfg->n_peers               ? "--peer"
                                   : cfg->cluster_key_file[0] ? "--cluster-key-file"
                                   : cfg->peer_cert[0]        ? "--peer-cert"
                                                              : NULL;
        if (cluster_only) {
            snprintf(err, errcap, "%s needs --node-id: it is for cluster mode", cluster_only);
            return -1;
        }
        return 0;
    }
    if (!cfg->cluster_id[0]) {
        snprintf(err, errcap,
                 "--cluster-id is required in cluster mode (--node-id), the same on every node");
        return -1;
    }
    if (!rn_cluster_peer(cfg, cfg->node_id)) {
        snprintf(err, errcap,
                 "--peer must list every node of the cluster, this one (--node-id %llu) included",
                 (unsigned long long)cfg->node_id);
        return -1;
    }
    uint8_t forced[257];
    if (cluster_recovery_parse(cfg->accept_loss, (unsigned)cfg->groups, forced, err, errcap) != 0)
        return -1;
    for (int i = 0; i < cfg->n_peers; i++) {
        const rn_peer_config *p = &cfg->peers[i];
        struct sockaddr_storage sa;
        if (rn_wire_parse_address(p->raft, &sa) != 0) {
            snprintf(err, errcap,
                     "--peer %llu: RAFTADDR must be a numeric a.b.c.d:port or [v6]:port (got "
                     "\"%s\")",
                     (unsigned long long)p->id, p->raft);
            return -1;
        }
        for (int j = 0; j < i; j++) {
            const rn_peer_config *q = &cfg->peers[j];
            const char *what = q->id == p->id                  ? "id"
                               : strcmp(q->raft, p->raft) == 0 ? "Raft address"
                               : strcmp(q->url, p->url) == 0   ? "URL"
                               : strcmp(rn_cluster_peer_url(q), rn_cluster_peer_url(p)) == 0
                                   ? "PEERURL"
                                   : NULL;
            if (what) {
                snprintf(err, errcap, "--peer %llu and --peer %llu have the same %s",
                         (unsigned long long)q->id, (unsigned long long)p->id, what);
                return -1;
            }
        }
    }
    return check_security(cfg, err, errcap);
}
