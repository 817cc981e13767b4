/*
 * routes.h — where a cluster's streams are led, learned from its routing
 * answers (extensions §5.7): which Raft group a stream's path belongs to,
 * and which origin ("http://host:port") leads each group at which term.
 * The client library's cluster-aware mode and the gateway share it.
 *
 * The rules: a 307 or 308 that carries x-ursula-raft-group,
 * x-ursula-raft-leader-id and x-ursula-raft-term and a Location teaches
 * "this path's group is led by the Location's origin at this term", unless
 * the table holds a newer term for the group (an older hint is ignored); a
 * 307 naming only the group (a node that hosts no replica) teaches
 * nothing; a 503 NO_LEADER naming the group forgets the group's leader; a
 * request sent to a group's learned leader that got no answer forgets that
 * leader. Paths are bounded (the least recently used of a sample is
 * replaced); groups are few (at most RN_ROUTES_GROUPS are remembered).
 *
 * Not thread-safe: one owner, or a lock around every call.
 */
#ifndef RN_UTIL_ROUTES_H
#define RN_UTIL_ROUTES_H

#include <stddef.h>
#include <stdint.h>

#define RN_ROUTES_GROUPS 1024
#define RN_ROUTES_ORIGIN_MAX 256
#define RN_ROUTES_PATH_MAX 2048

/* A request carrying this header is answered 307 by a follower rather
 * than forwarded to the leader (ops/forward_writes.h): a router that
 * learns leaders from redirects (the gateway, the client's cluster-aware
 * mode) and a node's own forwarded write send it. */
#define RN_NO_FORWARD_HEADER "Runnel-No-Forward"

typedef struct rn_routes rn_routes;

/* What an answer said that routing learns from. */
typedef struct {
    int status;             /* 0: the request got no answer */
    const char *error_code; /* its §11 code, or "" */
    const char *group;      /* x-ursula-raft-group, or "" */
    const char *leader_id;  /* x-ursula-raft-leader-id, or "" */
    int64_t term;           /* x-ursula-raft-term, or -1 */
    const char *location;   /* Location of a redirect (absolute), or "" */
} rn_route_answer;

/* A table remembering at most max_paths paths (>= 1). */
rn_routes *rn_routes_new(size_t max_paths);
void rn_routes_free(rn_routes *r);

/* Copies the origin that leads path's group into origin (cap bytes) and
 * returns 1, or returns 0 when none is known. */
int rn_routes_lookup(rn_routes *r, const char *path, size_t path_len, char *origin, size_t cap);

/* Learns from answer a, to a request for path sent to origin (see the top
 * of this file). */
void rn_routes_learn(rn_routes *r, const char *origin, const char *path, size_t path_len,
                     const rn_route_answer *a);

/* Splits an absolute http(s) URL into its origin ("scheme://authority")
 * and its path without query or fragment ("/" when empty). Returns 0, or
 * -1 when url is not absolute http(s) or a part does not fit. */
int rn_url_split(const char *url, char *origin, size_t origin_cap, char *path, size_t path_cap);

#endif
