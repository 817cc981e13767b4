/*
 * admin_int.h — what the files of the operator's plane share (private to
 * them): admin_plane.c (routes, access, queries, cursors, final answers),
 * admin_local.c (what this node holds, as a "local answer") and
 * admin_cluster.c (asking every node for its local answer and merging).
 *
 * A local answer is a JSON object of one shape whoever makes it: this
 * node for itself, or a peer asked with scope=local. Listings put their
 * page in "items" (key order, at most the query's limit) with "more" when
 * the node has entries past the page; one object (a bucket, a stream, a
 * node) goes in "item" (null: not here). A peer adds "node" and
 * "not_leading" (groups it was asked for and does not lead).
 */
#ifndef RN_OPS_ADMIN_INT_H
#define RN_OPS_ADMIN_INT_H

#include <jansson.h>
#include <stdint.h>

#include "ops/admin_plane.h"
#include "util/list.h"

struct rn_admin_plane {
    rn_admin_plane_config cfg;
    char instance[17]; /* drawn at start: counters restarted when it changes */
    rn_list asks;      /* cluster queries in flight (admin_cluster.c) */
};

typedef enum {
    ADMIN_BUCKETS,       /* GET admin/buckets */
    ADMIN_BUCKET,        /* GET admin/buckets/{b} */
    ADMIN_STREAMS,       /* GET admin/buckets/{b}/streams */
    ADMIN_STREAM,        /* GET admin/buckets/{b}/streams/{s} */
    ADMIN_USAGE,         /* GET admin/usage */
    ADMIN_SUBSCRIPTIONS, /* GET admin/subscriptions */
    ADMIN_NODE,          /* GET admin/node */
    ADMIN_PURGE,         /* POST admin/buckets/{b}/purge */
} admin_kind;

#define ADMIN_NAME_MAX 1024
#define ADMIN_LIMIT_DEFAULT 100
#define ADMIN_LIMIT_MAX 1000

/* A parsed request of the plane. Names are decoded bytes (no NUL). */
typedef struct {
    admin_kind kind;
    char bucket[ADMIN_NAME_MAX + 1];
    size_t bucket_len;
    char stream[ADMIN_NAME_MAX + 1]; /* ADMIN_STREAM: the name within the bucket */
    size_t stream_len;
    char prefix[ADMIN_NAME_MAX + 1]; /* ADMIN_STREAMS: names start with it */
    size_t prefix_len;
    char after[2 * ADMIN_NAME_MAX + 8]; /* the cursor's key: the page starts past it */
    size_t after_len;
    int has_after;
    size_t limit;
    int local;          /* scope=local: a peer's ask, answered as a local answer */
    uint8_t groups[32]; /* scope=local: the groups asked for (a bitmap) */
} admin_query;

/* Which streams a local answer covers: all (a single node), or those of
 * the groups in the bitmap (cluster mode: the groups this node leads among
 * those asked for). */
typedef struct {
    int all;
    uint8_t groups[32];
} admin_scope;

/* A set of groups as a bitmap of 256 bits. */
static inline int admin_group_in(const uint8_t set[32], unsigned g) {
    return (set[g >> 3] >> (g & 7)) & 1;
}
static inline void admin_group_add(uint8_t set[32], unsigned g) {
    set[g >> 3] |= (uint8_t)(1u << (g & 7));
}

static inline int admin_scope_has(const admin_scope *sc, unsigned g) {
    return sc->all || admin_group_in(sc->groups, g);
}

/* ---- admin_local.c ---- */

/* Receives a local answer, which it takes; NULL when the walk behind it
 * was stopped (the server stops: nothing to answer). */
typedef void (*admin_local_cb)(void *arg, json_t *local);
/* The local answer to q over the streams of sc (ADMIN_PURGE: the bucket's
 * summary, after the fences were recorded), to cb: inside this call for
 * one stream, the subscriptions and a small store, else once a walk over
 * loop turns ended (ops/store_walk.h). q and sc are copied. Not for
 * ADMIN_NODE: that is admin_answer_node's. */
void admin_local(rn_admin_plane *a, const admin_query *q, const admin_scope *sc, admin_local_cb cb,
                 void *arg);
/* This node's overview, with its visible streams counted by the caller. */
json_t *admin_node(rn_admin_plane *a, uint64_t streams);
/* The listing key of an item of q's kind ("bucket", "path", or a
 * subscription's node and id), into key (at most cap bytes); its length. */
size_t admin_item_key(const admin_query *q, const json_t *item, char *key, size_t cap);

/* ---- admin_plane.c ---- */

/* Shapes merged local answers (one, on a single node) into the route's
 * answer and sends it: the page and its next_cursor, unreachable groups
 * and nodes (arrays of numbers), the purge's completion. Takes `local`. */
void admin_answer(rn_admin_plane *a, rn_request *req, const admin_query *q, json_t *local,
                  json_t *unreachable_groups, json_t *unreachable_nodes);
/* Answers ADMIN_NODE once the streams are counted (the scrape's walk,
 * ops/store_gauges.h: spread over loop turns on a large store, where one
 * walk in a turn held every request; the console asks every 2 s). */
void admin_answer_node(rn_admin_plane *a, rn_request *req, const admin_query *q);

/* ---- admin_cluster.c ---- */

/* Answers q for the whole cluster: asks the leader of every group (and
 * every node, for what is each node's own), merges, admin_answer()s. */
void admin_cluster_query(rn_admin_plane *a, rn_request *req, const admin_query *q);
/* Answers a peer's scope=local ask: the local answer over the groups of
 * q->groups this node leads (ADMIN_PURGE: after recording the fence in
 * each), with "node" and "not_leading". */
void admin_cluster_local(rn_admin_plane *a, rn_request *req, const admin_query *q);
/* Merges local answer b into a (b stays the caller's): listings by key,
 * numbers summed, arrays joined, true wins, null loses. */
void admin_merge(const admin_query *q, json_t *a, const json_t *b);
/* Cancels every ask in flight (their requests answer 503). */
void admin_cluster_stop(rn_admin_plane *a);

#endif
