/*
 * cluster_int.h — what the files of a cluster node share: the node
 * structure, the peers' reports (peers.c) and what is known of each
 * group's leader and placement.
 */
#ifndef RN_CLUSTER_INT_H
#define RN_CLUSTER_INT_H

#include "cluster/cluster.h"
#include "consensus/consensus.h"
#include "cluster/fetch.h"
#include "cluster/meta.h"
#include "consensus/peer_tls.h"
#include "cluster/placement.h"
#include "cluster/raft_log.h"
#include "net/outbound.h"
#include "util/list.h"
#include "util/log.h"
#include "util/secret.h"

/* What a peer last reported of one group (GET /__runnel/cluster/status). */
typedef struct {
    uint64_t applied; /* its applied index */
    uint64_t term;    /* the group's term as it knows it */
    uint8_t leader;   /* the leader it knows (0: none) */
    uint8_t role;     /* its own place in the group: 0 none (not hosted), 1 spare, 2 standby,
                         3 voter */
    uint32_t gaps;    /* the group's streams it still fetches bytes for */
} peer_group;

/* What a peer last reported of itself. */
typedef struct {
    struct rn_cluster *cl;
    int known;            /* a report arrived */
    uint64_t answered_ms; /* rn_mono_ms() of its last report */
    peer_group *g;        /* per group, the metadata group last */
    int health;           /* its last health line (health.h): 1, 0, or -1 none */
    uint64_t health_ms;   /* loop time it arrived */
    rn_fetch *inflight;
} peer_status;

/* A group's configuration as the newest leader that reported it saw it
 * (its own leader's on the node, or a peer's report). */
typedef struct {
    uint64_t term;
    uint8_t n;
    rn_meta_member members[RN_META_MAX_NODES];
} led_config;

struct forward;

/* A group's catching up after this node's start (cluster.c caught_up). */
typedef struct {
    int done;          /* applied the leader's ReadIndex of an ask made since the start */
    int asking;        /* a follower read (follower_reads.c) is on its way */
    uint64_t retry_ms; /* after a failed ask: not before this (rn_mono_ms) */
} catch_up;

struct rn_cluster {
    uv_loop_t *loop;
    rn_config cfg;         /* its peers: every node ever known (the table's added) */
    rn_secret key;         /* the cluster key (len 0: none): peer requests sign with it */
    rn_peer_tls *peer_tls; /* peer certificates (NULL: none): mutual TLS between nodes */
    rn_log_throttle refused_log;
    rn_engine *engine;
    struct rn_tiers *tiers; /* snapshot bodies (fetched from and served to peers) */
    unsigned groups;        /* data groups; the metadata group's index is `groups` */
    unsigned all_groups;    /* groups + 1 */
    rn_id_issuer ids;
    rn_raft_log *log;
    consensus_fsm data_fsm;              /* the data groups' state machine (the log's) */
    consensus *node;                     /* NULL once stopping */
    catch_up *catch_up;                  /* per group, the metadata group last */
    uv_timer_t catching_up;              /* asks caught_up of every group until all are */
    struct cluster_hand_over *hand_over; /* hand_over.h */
    rn_meta meta;                        /* the metadata group's applied state (meta.h) */
    uint64_t meta_applied;               /* meta.changes when hosting last looked */
    struct cluster_driver *driver;       /* placement_driver.h */
    struct cluster_hosting *hosting;     /* hosting.h */
    struct cluster_reconcile *reconcile; /* reconcile.h */
    struct cluster_recovery *recovery;   /* recovery.h */
    led_config *led;                     /* per group, the metadata group last */
    rn_list forwards;                    /* operator requests relayed (membership.c) */
    struct rn_changes *changes;          /* stream changes, for peers' asks (elsewhere.h) */
    rn_fetcher *fetcher;                 /* fills gaps from peers */
    rn_list settles;                     /* rn_cluster_settle's jobs (settle.c) */
    struct cluster_follower_reads *follower_reads; /* read-your-writes (follower_reads.c) */
    /* peer status polling (peers.c) */
    rn_outbound *http;
    uv_timer_t poll;
    int polling;
    peer_status peers[RN_MAX_PEERS]; /* by index in cfg.peers */
    /* health.c: the free space at the last check, the reserve file, the
     * hand-overs per group (running, not before, last "no target" line)
     * and their count by reason */
    uv_timer_t health;
    int health_running;
    uint64_t disk_free;
    int reserve_made;
    uint64_t reserve_retry_ms;
    uint8_t *transfer_busy;
    uint64_t *transfer_next_ms, *transfer_log_ms;
    uint64_t transfers[4];
    /* identity.c: this directory's incarnation, those recorded by node id
     * (256), and the ids whose incarnation changed */
    uint64_t incarnation;
    uint64_t *incarnations;
    uint8_t *replaced;
    void (*stop_done)(void *arg);
    void *stop_arg;
};

/* Starts asking every peer for its status, once a second (peers.c). */
void cluster_peers_start(rn_cluster *cl);
/* Stops asking (the node is stopping). */
void cluster_peers_stop(rn_cluster *cl);
/* Frees what the poller kept (after its handles closed). */
void cluster_peers_free(rn_cluster *cl);
/* Answers req with status and body (type, not stored: no-store). */
void cluster_answer(rn_request *req, int status, const char *type, rn_buf *body);
/* A query parameter that must be a decimal integer below 2^63: 0 with *out,
 * or -1 when absent or not. */
int cluster_query_u64(const char *query, size_t len, const char *name, uint64_t *out);
/* GET /__runnel/cluster/status: this node's status, as peers read it. */
void cluster_peers_answer_status(rn_cluster *cl, rn_request *req);
/* The status peer id last reported, or NULL (unknown, or none yet). */
const peer_status *cluster_peer_status(const rn_cluster *cl, uint64_t id);
/* Which nodes answer: alive[id] for every id (this node: 1; a peer: it
 * reported within the last few seconds). */
void cluster_alive(const rn_cluster *cl, uint8_t alive[256]);

/* The group's leader as best known here (this node's own view when it
 * hosts the group, else the newest term peers reported); 0 when none. */
uint64_t cluster_leader_of(const rn_cluster *cl, unsigned group, uint64_t *term);
/* The peer with this id (the node's peers table), or NULL. */
const rn_peer_config *cluster_peer(const rn_cluster *cl, uint64_t id);
/* True when this node runs the group as a voter. */
int cluster_voter_here(const rn_cluster *cl, unsigned group);
/* Asks again, on a timer, whether each hosted group caught up since it
 * started here, until all have (cluster.c caught_up): at the start, and
 * whenever a group starts here later, so that a group placed
 * on this node after its start becomes caught up without a read of it. */
void cluster_catch_up_watch(rn_cluster *cl);

/* consensus_group_info_get with the applied index this node's state has
 * (raft_log.h: entries kept while applying stopped are not applied). */
void cluster_group_info(const rn_cluster *cl, unsigned g, consensus_group_info *out);

/* The CA peer requests trust: the peers' peer listeners speak TLS with
 * their peer certificates (when this node has both), else the public
 * listeners with --tls-cert's, which --tls-ca verifies; NULL: the
 * system's CAs. */
const char *cluster_peer_request_ca(const rn_config *cfg);

/* Fails every rn_cluster_settle job with -ECANCELED (the node stops). */
void cluster_settles_cancel(rn_cluster *cl);
/* GET /__runnel/cluster/read-index?group=G, asked by a settling peer:
 * answers "read-index N\n" once this node confirmed it leads the group (N:
 * its applied index then), 503 NO_LEADER when it could not. */
void cluster_read_index_for_peer(rn_cluster *cl, rn_request *req, uint64_t group);

#endif
