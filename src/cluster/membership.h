/*
 * membership.h — changing which nodes replicate the groups: adding a node,
 * removing one, replacing a dead node with an empty one.
 *
 * Every node keeps the cluster's wanted membership as intents, one per node
 * id: `voter` (it replicates every group) or `removed` (it replicates
 * none), with its Raft address and public URL, in <data>/cluster-members.
 * The nodes of --peer are voters unless an intent says otherwise. Once a
 * second, a node brings every group it leads (ready) to the intents, one
 * change at a time per group: a missing voter is added as a spare, then
 * promoted (libraft first lets it catch up: from the log, or from a
 * snapshot whose bytes it fetches from its peers), a removed node is
 * removed. So a group whose leadership moves is finished by its next
 * leader, and a node restarted later still applies what it was told.
 *
 * The admin routes (any node; the node passes each intent on to every
 * peer it knows, which records and applies it the same way):
 *
 *   POST   /__runnel/cluster/members?id=N&raft=ADDR&url=URL[&peer_url=URL]
 *                                                             N is a voter
 *   DELETE /__runnel/cluster/members/N                        N is removed
 *
 * answer 202 with the intent as JSON; progress shows in /__runnel/cluster
 * (each group's replicas). A node added this way runs with --join, its own
 * --peer line and the existing nodes': its groups wait to be added rather
 * than start a cluster of their own.
 */
#ifndef RN_CLUSTER_MEMBERSHIP_H
#define RN_CLUSTER_MEMBERSHIP_H

#include <stdbool.h>
#include <stddef.h>

#include "transport/http.h"

struct rn_cluster;

/* Loads <data>/cluster-members into the node's peers (a node added later
 * is known by its URL after a restart). Returns 0, or -1 with err set. */
int rn_membership_load(struct rn_cluster *cl, char *err, size_t errcap);
/* Starts reconciling the groups this node leads with the intents. */
void rn_membership_start(struct rn_cluster *cl);
void rn_membership_stop(struct rn_cluster *cl);
/* True when the query says scope=local: an intent passed on by a peer. */
bool rn_membership_is_local(const char *query, size_t query_len);
/* Handles the admin routes (path after /__runnel/); 1 when it answered. */
int rn_membership_handle(struct rn_cluster *cl, rn_request *req, const char *path, size_t path_len,
                         const char *query, size_t query_len);

#endif
