/*
 * cluster.h — a node in cluster mode (runnel serve --node-id): the engine's
 * streams spread over Raft groups by key (placement.h), replicated by the
 * consensus layer through the engine's command log (raft_log.h); the
 * routing view the surfaces ask (protocol/routing.h); readiness; and the
 * /__runnel/cluster report.
 *
 * The data directory holds, beside the stream files and snapshot stores:
 * raft/g<NN>/ (each group's Raft log and snapshots, consensus.h),
 * cluster-node (the cluster id, node id and group count it was created
 * for: a start with others is refused, as is a single-node start),
 * cluster-ids (placement.h), cluster-members (written by earlier builds
 * and no longer read: the metadata group holds the nodes, meta.h),
 * cluster-recovering and cluster-recovered (recovery.h),
 * cluster-incarnation and cluster-incarnations (identity.h) and reserve
 * (health.h).
 */
#ifndef RN_CLUSTER_H
#define RN_CLUSTER_H

#include <stdbool.h>
#include <stddef.h>
#include <uv.h>

#include "engine/engine.h"
#include "net/outbound.h"
#include "ops/config.h"
#include "protocol/routing.h"
#include "util/buf.h"

typedef struct rn_cluster rn_cluster;

/* Refuses a single-node start (cfg->node_id 0) on a cluster node's data
 * directory. Returns 0, or -1 after logging why. */
int rn_cluster_check_single(const rn_config *cfg);

/* Checks the data directory's cluster-node marker against cfg, or writes it
 * (durably) in a directory that has none and no Raft or single-node log
 * data. Returns 0, or -1 with a message in err. */
int rn_cluster_mark(const rn_config *cfg, char *err, size_t errcap);

/* Starts cluster mode for cfg (rn_cluster_config_check passed; SIGPIPE
 * ignored) on a replicated engine (rn_engine_open_replicated): checks or
 * writes the data directory's cluster-node marker, reserves stream ids,
 * sets the engine's log and starts every group, which restores its newest
 * snapshot (blocking while the groups load). Returns NULL with a message
 * in err on failure. tiers: the engine's, where replicated snapshot
 * bodies are kept. */
rn_cluster *rn_cluster_start(uv_loop_t *loop, const rn_config *cfg, rn_engine *engine,
                             struct rn_tiers *tiers, char *err, size_t errcap);

/* The view the surfaces route by (valid until rn_cluster_stop). */
rn_cluster_view rn_cluster_view_of(rn_cluster *cl);

/* A planned stop (SIGTERM): hands the leadership of every group this node
 * leads to another voter (hand_over.h); done(arg) runs once, later, when
 * every transfer reported or after timeout_ms. Returns the groups asked.
 * Writes reaching this node meanwhile wait for the new leader. */
unsigned rn_cluster_hand_over(rn_cluster *cl, uint64_t timeout_ms, void (*done)(void *arg),
                              void *arg);

/* 1 when every group knows a leader, caught up since this node started
 * (it applied what the group's leader had committed when asked: the same
 * judgement that lets local reads be served) and this node applied every
 * entry it knows committed; else 0 with the reason in why. */
int rn_cluster_ready(rn_cluster *cl, char *why, size_t cap);

/* The term in which this node leads group `group` and serves it (ready,
 * not handing the leadership over), or 0 when it does not: the one node
 * that removes the group's objects from a cold store every node shares,
 * and counts its streams' staged parts (a new term: counted anew). */
uint64_t rn_cluster_lead_term(rn_cluster *cl, unsigned group);

/* Calls done(arg, 0) once this node's applied state of every group holds
 * every write acknowledged anywhere in the cluster before the call (each
 * group's leader confirmed its leadership after the call and this node
 * applied what that leader had applied), and no stream here waits for
 * bytes from peers; done(arg, -ETIMEDOUT) when that did not happen within
 * timeout_ms (a group without a leader, a leader that does not answer);
 * done(arg, -ECANCELED) when the node stops first; done(arg, -EXDEV) when
 * this node does not host every group (its state would miss the others).
 * done runs later, on the loop thread. Precondition: the node is not
 * stopping. */
void rn_cluster_settle(rn_cluster *cl, uint64_t timeout_ms, void (*done)(void *arg, int status),
                       void *arg);

/* Handles the cluster's operational routes under /__runnel/ (path after
 * that prefix): GET cluster (the JSON report) and what peers ask of each
 * other. Returns 1 when path is one of them (answered), else 0. */
int rn_cluster_handle(rn_cluster *cl, rn_request *req, const char *path, size_t path_len,
                      const char *query, size_t query_len);

/* Who may call a route under /__runnel/ (path after that prefix) that
 * rn_cluster_handle serves: anyone (the report), only authenticated peers
 * (what nodes ask of each other), only operators (a membership change), or
 * either (a membership change passed on between nodes, scope=local).
 * RN_CLUSTER_ROUTE_NONE: not a cluster route. */
typedef enum {
    RN_CLUSTER_ROUTE_NONE,
    RN_CLUSTER_ROUTE_OPEN,
    RN_CLUSTER_ROUTE_PEER,
    RN_CLUSTER_ROUTE_OPERATOR,
    RN_CLUSTER_ROUTE_PEER_OR_OPERATOR,
} rn_cluster_route_kind;
rn_cluster_route_kind rn_cluster_route_kind_of(const char *path, size_t path_len, const char *query,
                                               size_t query_len);

/* Whether req comes from a node of this cluster: with a cluster key, its
 * peer signature (peer_auth.h) verifies; with peer certificates, its
 * client certificate verified against --peer-ca and names a node other
 * than this one (peer_tls.h); without either, every request does. False
 * after answering the refusal (401 INVALID_CREDENTIAL without a
 * credential, 403 FORBIDDEN with one that fails), counted and logged. */
bool rn_cluster_peer_authorize(rn_cluster *cl, rn_request *req);

/* Whether req carries a peer credential at all: a peer signature, or with
 * peer certificates a client certificate (then it is a peer's, to be
 * judged by rn_cluster_peer_authorize, not an operator's). */
bool rn_cluster_peer_credential(const rn_cluster *cl, const rn_request *req);

/* Reads the peer certificate, key and CA again (SIGHUP): new Raft port
 * connections use them (open ones keep theirs; peer requests read the
 * files at each new connection anyway). Returns 1 when reloaded, 0 when
 * the node has no peer certificates, -1 (nothing changed) with err set. */
int rn_cluster_reload_certificates(rn_cluster *cl, char *err, size_t errcap);

/* ---- what the operator's plane asks (operator.c; ops/admin) ---- */

/* A node of the cluster: its id and base URL (borrowed from the node's
 * configuration: valid until it changes, so copy what you keep). */
typedef struct {
    uint64_t id;
    const char *url;
} rn_cluster_node;
/* The cluster's nodes, this one included and nodes the metadata table says
 * were removed excluded, into out (at most cap); returns how many there
 * are. */
size_t rn_cluster_nodes(const rn_cluster *cl, rn_cluster_node *out, size_t cap);
uint64_t rn_cluster_self(const rn_cluster *cl);
unsigned rn_cluster_groups(const rn_cluster *cl);
/* The group of a stream key. */
unsigned rn_cluster_group_of(const rn_cluster *cl, const char *key, size_t len);
/* Group g as this node knows it: its leader (0: none known), the leader's
 * term, and whether this node leads it, ready (its first entry of the term
 * applied: it holds every committed write). A group not hosted here: the
 * leader its replicas report (peers.c). */
uint64_t rn_cluster_group_leader(const rn_cluster *cl, unsigned g, uint64_t *term, int *leading);
/* Starts a request to a peer through the cluster's outbound client, which
 * signs it with the cluster key (peer_auth.h). As rn_outbound_start: NULL
 * when it cannot start (fn will not run), and NULL while stopping. */
struct rn_fetch *rn_cluster_peer_request(rn_cluster *cl, const rn_fetch_request *req,
                                         rn_fetch_fn fn, void *arg);

/* Appends the groups' gauges and counters in the Prometheus text format
 * (/__runnel/metrics), and the peers refused. */
void rn_cluster_metrics(rn_cluster *cl, rn_buf *out);

/* Stops every group (proposals in flight get their outcomes), then frees
 * the node and runs done(arg) on the loop. The engine stays open. */
void rn_cluster_stop(rn_cluster *cl, void (*done)(void *arg), void *arg);

#endif
