/*
 * membership.h — the operators' routes that change the cluster's nodes,
 * recorded in the metadata table (meta.h) by the metadata group's leader:
 *
 *   POST   /__runnel/cluster/members?id=N&raft=ADDR&url=URL[&peer_url=URL]
 *                                        add node N (with --peer-listen, its
 *                                        peer listener's URL too)
 *   DELETE /__runnel/cluster/members/N   decommission N: its replicas
 *                                        move away, then it is removed
 *   POST   /__runnel/cluster/drain/N     N leads nothing (its
 *                                        leaderships move away)
 *   DELETE /__runnel/cluster/drain/N     N may lead again
 *
 * Any node takes them: one that does not lead the metadata group relays
 * the request to the node that does (signed as a peer, scope=local, which
 * is relayed no further) and answers what that node answered. They answer
 * 202 once the change is committed in the table, with the node as JSON
 * ({"node":N,"intent":"voter"|"removed","state":...,"drained":...,
 * "raft":...,"url":...[,"peer_url":...]}); a repeat of a change made answers the same.
 * Refusals: 400 INVALID_REQUEST (a malformed id, address or URL), 404
 * NOT_FOUND (no such node), 409 NODE_CONFLICT (the id is known with other
 * addresses, or an address is another node's), 409 NODE_REMOVED (the id
 * was removed: ids are never used again), 409 CLUSTER_FULL, 503 NO_LEADER
 * (no leader of the metadata group known, or it could not commit). What
 * follows shows in /__runnel/cluster: the placement, the moves and their
 * progress. A node added this way runs with --join (its own --peer line
 * and the existing nodes'): its groups wait to be added.
 */
#ifndef RN_CLUSTER_MEMBERSHIP_H
#define RN_CLUSTER_MEMBERSHIP_H

#include <stdbool.h>
#include <stddef.h>

#include "transport/http.h"

struct rn_cluster;

/* True when the query says scope=local: a change relayed by a peer. */
bool rn_membership_is_local(const char *query, size_t query_len);
/* True when path (after /__runnel/) is one of the routes above. */
bool rn_membership_route(const char *path, size_t path_len);
/* Handles the routes (path after /__runnel/); 1 when it answered. */
int rn_membership_handle(struct rn_cluster *cl, rn_request *req, const char *path, size_t path_len,
                         const char *query, size_t query_len);
/* Cancels the relays in flight (the node stops). */
void rn_membership_stop(struct rn_cluster *cl);

#endif
