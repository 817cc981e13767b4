/*
 * endpoints.h — the operational routes under /__runnel/: liveness,
 * readiness, Prometheus metrics, POST /__runnel/backup (ops/backup.h), the
 * operator's plane under /__runnel/admin/ (ops/admin_plane.h), and
 * (with --test-hooks) the test hooks of surface/admin.c. Liveness,
 * readiness and metrics are open (metrics behind the admin token with
 * --metrics-need-token); every other route is an operator's (admin_auth.h)
 * unless the cluster's routes say otherwise. With a peer listener, the
 * operator (and peer) routes are served there only.
 */
#ifndef RN_ENDPOINTS_H
#define RN_ENDPOINTS_H

#include <stdbool.h>

#include "engine/engine.h"
#include "gateway/gate.h"
#include "live/live.h"
#include "ops/admin_auth.h"
#include "ops/probe.h"
#include "surface/streams.h"
#include "transport/http.h"

typedef struct {
    int ready;      /* recovery finished (engine, live and surface are set) */
    int test_hooks; /* /__runnel/test/ routes exist */
    rn_engine *engine;
    rn_live *live;
    rn_surface *surface;
    struct rn_tiers *tiers; /* the history read cache's and flush's counters */
    rn_http_server *http;
    rn_probe *probe;             /* the data directory probe (readiness) */
    struct rn_cold_claim *claim; /* the cold store's claim at start (readiness), or NULL */
    struct rn_backups *backups;  /* POST /__runnel/backup, or NULL (no --backup-to) */
    const rn_admin_auth *admin;  /* the operator routes' credential (admin_auth.h) */
    int metrics_need_token;      /* metrics is an operator route too */
    /* A peer listener exists (--peer-listen): peer and operator routes are
     * served there only (RN_REQUEST_PEER_LISTENER), and answer 404
     * elsewhere. */
    int peer_listener;
    /* Cluster mode (NULL otherwise): more routes under /__runnel/ (returns
     * 1 when it answered, a refusal of who called included: the cluster's
     * routes say who may call them) and a readiness condition (1: ready,
     * else 0 with why), both given cluster_ctx. */
    int (*cluster_route)(void *ctx, rn_request *req, const char *path, size_t path_len,
                         const char *query, size_t query_len);
    int (*cluster_ready)(const void *ctx, char *why, size_t cap);
    void (*cluster_metrics)(void *ctx, rn_buf *out); /* appends the groups' gauges */
    void *cluster_ctx;
    rn_gate *gate; /* --tenants: its metrics join the node's (NULL: none) */
    /* The operator's plane under /__runnel/admin/ (ops/admin_plane.h; set
     * once ready, NULL before): handles path and query as given here. */
    void (*admin_route)(void *ctx, rn_request *req, const char *path, size_t path_len,
                        const char *query, size_t query_len);
    void *admin_ctx;
    /* The web console's files under /__runnel/console (ops/console.h):
     * open, served before recovery ended too (NULL: none). */
    void (*console_route)(rn_request *req, const char *path, size_t path_len);
    uint64_t max_body_bytes;      /* told on livez (Ursula-Max-Request-Bytes), for gateways */
    struct rn_gauge_walk *gauges; /* the scrapes' stream gauges (set once ready) */
} rn_endpoints;

/* 1 while /__runnel/readyz answers 200 (arg: an rn_endpoints). */
int rn_endpoints_ready(void *arg);

/* Whether req may reach a peer or operator route: it came in on the peer
 * listener, or there is none. False after answering 404 (served on the
 * peer listener only). */
bool rn_endpoints_on_listener(const rn_endpoints *ep, rn_request *req);

/* rn_ops_handler for the router; arg is an rn_endpoints. */
void rn_endpoints_handle(rn_request *req, const char *path, size_t path_len, const char *query,
                         size_t query_len, void *arg);

#endif
