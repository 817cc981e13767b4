/*
 * cluster_int.h — what cluster.c and cluster_http.c share: the node
 * structure and the peer status poller.
 */
#ifndef RN_CLUSTER_INT_H
#define RN_CLUSTER_INT_H

#include "cluster/cluster.h"
#include "cluster/consensus.h"
#include "cluster/fetch.h"
#include "cluster/peer_tls.h"
#include "cluster/placement.h"
#include "cluster/raft_log.h"
#include "net/outbound.h"
#include "util/list.h"
#include "util/log.h"
#include "util/secret.h"

/* What a peer last reported of itself (GET /__runnel/cluster/applied). */
typedef struct {
    struct rn_cluster *cl;
    int known;         /* a report arrived */
    uint64_t *applied; /* per group */
    rn_fetch *inflight;
} peer_status;

/* What membership.c wants of a node of the peers table. */
enum { INTENT_NONE, INTENT_VOTER, INTENT_REMOVED };

struct forward;

/* A group's catching up after this node's start (cluster.c caught_up). */
typedef struct {
    int done;          /* applied the leader's ReadIndex of an ask made since the start */
    int asking;        /* a follower read (follower_reads.c) is on its way */
    uint64_t retry_ms; /* after a failed ask: not before this (rn_mono_ms) */
} catch_up;

struct rn_cluster {
    uv_loop_t *loop;
    rn_config cfg;
    rn_secret key;         /* the cluster key (len 0: none): peer requests sign with it */
    rn_peer_tls *peer_tls; /* peer certificates (NULL: none): mutual TLS between nodes */
    rn_log_throttle refused_log;
    rn_engine *engine;
    struct rn_tiers *tiers; /* snapshot bodies (fetched from and served to peers) */
    unsigned groups;
    rn_id_issuer ids;
    rn_raft_log *log;
    consensus *node;                     /* NULL once stopping */
    catch_up *catch_up;                  /* per group */
    uv_timer_t catching_up;              /* asks caught_up of every group until all are */
    struct cluster_hand_over *hand_over; /* hand_over.h */
    /* membership (membership.c): an intent per node of cfg.peers (NONE: a
     * --peer node, a voter), a change in flight per group, the reconciler,
     * intents on their way to peers */
    uint8_t intent[RN_MAX_PEERS];
    uint8_t *member_busy;
    uv_timer_t reconcile;
    rn_list forwards;                              /* struct forward.node */
    rn_fetcher *fetcher;                           /* fills gaps from peers */
    rn_list settles;                               /* rn_cluster_settle's jobs (settle.c) */
    struct cluster_follower_reads *follower_reads; /* read-your-writes (follower_reads.c) */
    /* peer status polling (cluster_http.c) */
    rn_outbound *http;
    uv_timer_t poll;
    int polling;
    peer_status peers[RN_MAX_PEERS]; /* by index in cfg.peers */
    void (*stop_done)(void *arg);
    void *stop_arg;
};

/* Starts asking every peer for its applied indexes, once a second. */
void cluster_peers_start(rn_cluster *cl);
/* Stops asking (the node is stopping). */
void cluster_peers_stop(rn_cluster *cl);
/* Frees what the poller kept (after its handles closed). */
void cluster_peers_free(rn_cluster *cl);

/* Fails every rn_cluster_settle job with -ECANCELED (the node stops). */
void cluster_settles_cancel(rn_cluster *cl);
/* GET /__runnel/cluster/read-index?group=G, asked by a settling peer:
 * answers "read-index N\n" once this node confirmed it leads the group (N:
 * its applied index then), 503 NO_LEADER when it could not. */
void cluster_read_index_for_peer(rn_cluster *cl, rn_request *req, uint64_t group);

#endif
