/*
 * touches.h — TTL windows decided cluster-wide: the streams read on a node
 * are passed to every peer with its status poll (GET
 * /__runnel/cluster/status?touched=ID,ID,...: 16 hex digits each), and
 * each peer renews their windows. The leader, which expires streams, so
 * renews the window of a stream read only on a follower, and every
 * replica keeps windows close to the leader's for when it leads.
 */
#ifndef RN_CLUSTER_TOUCHES_H
#define RN_CLUSTER_TOUCHES_H

#include <stddef.h>

#include "engine/engine.h"

/* Ids one poll carries at most; the rest wait for the next poll. */
#define RN_TOUCHES_PER_POLL 64
/* Room for the query rn_touches_query writes. */
#define RN_TOUCHES_QUERY_MAX (16 + RN_TOUCHES_PER_POLL * 17)

/* Takes the streams read here since the last call (at most
 * RN_TOUCHES_PER_POLL) and writes them as a query ("?touched=..."; "" when
 * none) into out (RN_TOUCHES_QUERY_MAX bytes). */
void rn_touches_query(rn_engine *e, char out[RN_TOUCHES_QUERY_MAX]);
/* Renews the windows of the streams a peer's poll named in its query;
 * ignores the query when it names none or is malformed. */
void rn_touches_apply(rn_engine *e, const char *query, size_t len);

#endif
