/*
 * elsewhere.h — the streams of groups a node does not host, asked of
 * their leaders (the routing view's ask_elsewhere; the subscriptions'
 * deliverer's way to see streams placed on other nodes), and the leader's
 * answer, GET /__runnel/cluster/streams?groups=G,G,... (a peer route).
 */
#ifndef RN_CLUSTER_ELSEWHERE_H
#define RN_CLUSTER_ELSEWHERE_H

#include "cluster/cluster_int.h"
#include "protocol/routing.h"

/* Starts the journal of this node's stream changes that answers asks
 * since a point (changes.h), observing the engine; frees it (before the
 * engine closes). */
void cluster_elsewhere_start(rn_cluster *cl);
void cluster_elsewhere_free(rn_cluster *cl);
/* A group's streams were replaced (a snapshot installed) or dropped (the
 * group moved away) without the engine's events: no earlier point of the
 * journal is answered. */
void cluster_elsewhere_restored(rn_cluster *cl);

/* rn_cluster_view.ask_elsewhere and ask_elsewhere_cancel (routing.h). */
rn_elsewhere_ask *cluster_ask_elsewhere(void *ctx, rn_elsewhere_fn each, void (*done)(void *arg),
                                        void *arg, const rn_elsewhere_cursor *cursors,
                                        rn_group_set *far);
void cluster_ask_elsewhere_cancel(rn_elsewhere_ask *a);

/* Answers a peer's ask: the streams of each group of the query's `groups`
 * (decimal, comma separated) that this node leads and serves, as
 * rn_elsewhere_fn describes: all of them, or with `since` (a cursor of
 * this node's journal) those changed since when the journal can tell; a
 * group it does not serve is left out of the answer's "groups" (the asker
 * keeps what it knew of it). 400 INVALID_REQUEST when the query is
 * malformed. */
void cluster_elsewhere_answer(rn_cluster *cl, rn_request *req, const char *query, size_t len);

#endif
