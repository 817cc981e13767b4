/*
 * admin_plane.h — the operator's plane: the JSON routes under /__runnel/admin/
 * (docs/ADMIN.md is their contract: buckets, a bucket's streams, one
 * stream's state, usage, subscriptions, a node's overview, the bucket
 * purge) and the counters the usage report needs.
 *
 * Every route needs the operator's credential (admin_auth.h), a peer's
 * signature being one for the asks between nodes. On a single node every
 * answer comes from this node's engine. In cluster mode (a cluster given)
 * an answer covers the whole cluster: this node asks every group's leader
 * for its groups' part (and every node for what is each node's own: its
 * request counters, live readers and subscriptions) over the signed peer
 * requests, merges the pages, and names the groups and nodes it could not
 * reach. Listings are pages of at most `limit` entries in key order with
 * an opaque cursor, so no listing is ever held whole.
 *
 * Loop thread only.
 */
#ifndef RN_OPS_ADMIN_PLANE_H
#define RN_OPS_ADMIN_PLANE_H

#include <stdint.h>

#include "engine/engine.h"
#include "live/live.h"
#include "ops/admin_auth.h"
#include "ops/bucket_usage.h"
#include "subs/subs.h"
#include "transport/http.h"

struct rn_cluster;

typedef struct {
    rn_engine *engine;
    rn_live *live;
    rn_subs *subs;
    struct rn_tiers *tiers;       /* staged parts' counts */
    rn_http_server *http;         /* open connections, for the overview */
    const rn_admin_auth *auth;    /* who may call */
    struct rn_cluster *cluster;   /* cluster mode, else NULL */
    const rn_bucket_usage *usage; /* the request counters */
    const char *cluster_id;       /* this deployment's (datadir.h) */
    int64_t started_ms;           /* when the process started */
    int (*ready)(void *arg);      /* /__runnel/readyz would answer 200 */
    void *ready_arg;
    struct rn_store_walk *walker; /* the listings' walks over the streams (store_walk.h) */
    struct rn_gauge_walk *gauges; /* counts the overview's streams (store_gauges.h) */
} rn_admin_plane_config;

typedef struct rn_admin_plane rn_admin_plane;

/* The plane over a ready engine (cfg's pointers outlive it). */
rn_admin_plane *rn_admin_plane_new(const rn_admin_plane_config *cfg);
/* Answers a request whose path under /__runnel/ starts with "admin" (path
 * and query as the router split them, without the prefix). */
void rn_admin_plane_handle(rn_admin_plane *a, rn_request *req, const char *path, size_t path_len,
                           const char *query, size_t query_len);
/* Cancels the asks to peers in flight (their requests answer 503) before
 * the server stops; then rn_admin_plane_free. */
void rn_admin_plane_stop(rn_admin_plane *a);
void rn_admin_plane_free(rn_admin_plane *a);

#endif
