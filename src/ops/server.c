/*
 * server.c — `runnel serve`: the process's lifecycle. See server.h.
 *
 * Start: configuration, data-directory lock, cluster id, then the listener
 * at once, so health probes answer while the store recovers: recovery
 * (checkpoint load and log replay) runs on a worker thread, and until it has
 * finished every route but /__runnel/ answers 503. The tiers (every byte on
 * disk but the log) open before it, since the engine recovers into them,
 * and the cold store's claim (coldclaim.h) runs meanwhile. When both
 * finished, the live-read observer, the subscriptions and the surfaces are
 * wired to the engine, the tiers' sweeps start and the server turns ready;
 * a cold store that refuses the claim (another deployment's prefix, wrong
 * credentials) stops the start instead, and one that cannot answer keeps
 * the server not ready until it does.
 *
 * Shutdown (SIGTERM/SIGINT): a cluster node hands its leaderships over
 * (hand_over.h); stop accepting, close idle connections, answer
 * parked live reads, quiesce subscription deliveries, wait (bounded by
 * --shutdown-grace-ms) until no request is in progress and the log is idle,
 * then close everything; closing the engine writes a final checkpoint.
 */
#include "ops/server.h"
#include "cluster/cluster.h"
#include "cluster/cluster_config.h"
#include "util/fault.h"
#include "engine/engine.h"
#include "live/live.h"
#include "ops/admin_plane.h"
#include "ops/backup.h"
#include "ops/console.h"
#include "ops/backup_format.h"
#include "ops/cold_owner.h"
#include "ops/config.h"
#include "ops/datadir.h"
#include "ops/endpoints.h"
#include "ops/store_gauges.h"
#include "ops/forward_writes.h"
#include "ops/probe.h"
#include "util/log.h"
#include "subs/subs.h"
#include "protocol/reply.h"
#include "ops/router.h"
#include "protocol/routing.h"
#include "surface/streams.h"
#include "ops/coldclaim.h"
#include "ops/coldstore.h"
#include "tiers/tiers.h"
#include "transport/http.h"
#include "transport/tls.h"
#include "util/clock.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#ifndef RUNNEL_VERSION
#define RUNNEL_VERSION "dev"
#endif

typedef struct {
    uv_loop_t *loop;
    rn_config cfg;
    char cluster_id[65]; /* this deployment's (datadir.h) */
    char public_url[1024];
    rn_tiers *tiers;
    rn_store *cold_backend; /* until the tiers took it over */
    rn_store *backup_dest;  /* --backup-to, until the backups took it over */
    rn_backups *backups;    /* POST /__runnel/backup (--backup-to) */
    rn_cold_owner owner;    /* who removes which cold objects, once wired */
    rn_engine *engine;
    rn_live *live;
    rn_cluster *cluster; /* cluster mode (--node-id) */
    rn_surface *surface;
    rn_subs *subs;
    rn_router router;
    rn_endpoints endpoints;
    rn_admin_auth admin;         /* --admin-token-file */
    rn_admin_plane *admin_plane; /* /__runnel/admin/ (once ready) */
    rn_store_walk *walker;       /* walks over every stream: gauges, listings (once ready) */
    rn_bucket_usage usage;       /* each bucket's requests and bytes since start */
    int64_t started_ms;
    rn_http_server *http;
    uv_signal_t sigterm, sigint, sighup;
    rn_tls_context *tls;           /* --tls-cert: the port speaks TLS */
    rn_tls_context *peer_tls;      /* the peer listener's: --peer-cert or --tls-cert */
    rn_gate *gate;                 /* --tenants: the gate in front of the routes */
    rn_write_forwarder *forwarder; /* --forward-writes in cluster mode */
    uv_timer_t sweep, drain;
    rn_engine_sweep sweep_at; /* the expiry sweep's pass under way */
    uv_timer_t scrub;         /* rn_engine_scrub every SCRUB_TICK_MS */
    uv_work_t recovery;
    int recovery_done;    /* the engine is open (or failed to) */
    rn_cold_claim *claim; /* the cold store's claim at start */
    int claim_status;     /* 1 while it runs, then its status */
    rn_recovery_stats stats;
    uint64_t incarnation_key; /* <data>/incarnation-key (ops/datadir.h) */
    char recovery_err[2048];
    uint64_t recovery_started;
    uint64_t drain_deadline;
    int stopping;
    int handing_over; /* cluster mode: leaderships are being handed over before the drain ends */
    int exit_code;
} server;

/* The expiry sweep: a pass over every stream each --expiry-sweep-ms, a
 * slice of the stream map per loop turn (1 ms apart). */
#define SWEEP_SLICE_SLOTS 4096u

static void on_sweep(uv_timer_t *t) {
    server *s = t->data;
    int done = rn_engine_sweep_slice(s->engine, &s->sweep_at, SWEEP_SLICE_SLOTS);
    uv_timer_start(&s->sweep, on_sweep, done ? s->cfg.expiry_sweep_ms : 1, 0);
}

#define SCRUB_TICK_MS 100

static void on_scrub(uv_timer_t *t) {
    server *s = t->data;
    if (!s->stopping && s->engine)
        rn_engine_scrub(s->engine, s->cfg.scrub_bytes_per_second * SCRUB_TICK_MS / 1000);
}

static void close_handles(server *s) {
    uv_close((uv_handle_t *)&s->scrub, NULL);
    uv_timer_stop(&s->drain);
    uv_close((uv_handle_t *)&s->drain, NULL);
    uv_close((uv_handle_t *)&s->sweep, NULL);
    uv_close((uv_handle_t *)&s->sigterm, NULL);
    uv_close((uv_handle_t *)&s->sigint, NULL);
    uv_close((uv_handle_t *)&s->sighup, NULL);
    rn_probe_stop(s->endpoints.probe);
    rn_cold_claim_stop(s->claim);
    s->claim = s->endpoints.claim = NULL;
    if (s->gate)
        rn_gate_stop(s->gate);
    if (s->subs)
        rn_subs_stop(s->subs);
    if (s->tiers)
        rn_tiers_stop(s->tiers);
    rn_backups_stop(s->backups);
    if (s->backup_dest && s->backup_dest->ops->stop)
        s->backup_dest->ops->stop(s->backup_dest);
    rn_admin_plane_stop(s->admin_plane); /* its asks to peers end */
    rn_store_walk_stop(s->walker);
    rn_http_close(s->http);
    if (s->engine)
        rn_engine_purge_stop(s->engine);
    rn_write_forwarder_stop(s->forwarder);
    s->owner.cluster = NULL;
    if (s->cluster) /* proposals in flight get their outcomes; the engine stays */
        rn_cluster_stop(s->cluster, NULL, NULL);
    s->cluster = NULL;
}

static void on_drain_tick(uv_timer_t *t) {
    server *s = t->data;
    int idle =
        rn_http_active_connections(s->http) == 0 && (!s->engine || !rn_engine_busy(s->engine));
    int recovering = !s->recovery_done && s->exit_code == 0;
    if (recovering || s->handing_over)
        return; /* the recovery job holds the engine, or other nodes take over; wait */
    if (idle || rn_mono_ms() >= s->drain_deadline) {
        if (!idle)
            rn_log(RN_LOG_WARN, "shutdown", "grace period over with requests still in progress");
        close_handles(s);
    }
}

static void handed_over(void *arg) {
    server *s = arg;
    s->handing_over = 0;
}

/* Begins the drain (signal, or a failed start). A cluster node first hands
 * the leadership of its groups to other voters (bounded by two election
 * timeouts and the grace period), so that a planned stop costs writes a
 * round trip rather than an election; writes reaching it meanwhile wait
 * for the new leader and are forwarded there. */
static void begin_shutdown(server *s) {
    if (s->stopping)
        return;
    s->stopping = 1;
    if (s->cluster && s->recovery_done) {
        uint64_t bound = 2 * s->cfg.election_timeout_ms;
        s->handing_over = 1;
        rn_cluster_hand_over(s->cluster,
                             bound < s->cfg.shutdown_grace_ms ? bound : s->cfg.shutdown_grace_ms,
                             handed_over, s);
    }
    rn_http_stop_accepting(s->http);
    if (s->live)
        rn_live_end_all(s->live);
    if (s->subs)
        rn_subs_quiesce(s->subs);
    s->drain_deadline = rn_mono_ms() + s->cfg.shutdown_grace_ms;
    uv_timer_start(&s->drain, on_drain_tick, 0, 10);
}

static void on_signal(uv_signal_t *sig, int signum) {
    server *s = sig->data;
    rn_log(RN_LOG_INFO, "shutdown", "received %s; draining",
           signum == SIGTERM ? "SIGTERM" : "SIGINT");
    begin_shutdown(s);
}

/* Reloads one TLS context (NULL: none), saying so; a failure changes
 * nothing. */
static void reload_tls(rn_tls_context *t, const char *which) {
    char err[1024];
    if (!t)
        return;
    if (rn_tls_context_reload(t, err, sizeof err) < 0)
        rn_log(RN_LOG_ERROR, "reload", "%s certificate not reloaded, the previous one stays: %s",
               which, err);
    else
        rn_log(RN_LOG_INFO, "reload", "%s certificate and key reloaded", which);
}

/* SIGHUP: the tenants file, and the TLS certificates and keys (the
 * listeners' and the Raft port's), are read again; requests in flight keep the tenants they started
 * with, new handshakes use the new certificates, open connections keep theirs. A failed reload
 * changes nothing. */
static void on_sighup(uv_signal_t *sig, int signum) {
    server *s = sig->data;
    (void)signum;
    char err[1024];
    if (s->gate && rn_gate_reload(s->gate, err, sizeof err) < 0)
        rn_log(RN_LOG_ERROR, "reload", "tenants file not reloaded, the previous one stays: %s",
               err);
    int peer_certs = s->cluster ? rn_cluster_reload_certificates(s->cluster, err, sizeof err) : 0;
    if (peer_certs < 0)
        rn_log(RN_LOG_ERROR, "reload", "peer certificate not reloaded, the previous one stays: %s",
               err);
    else if (peer_certs > 0)
        rn_log(RN_LOG_INFO, "reload", "peer certificate, key and CA reloaded for the Raft port");
    if (!s->tls && !s->peer_tls && !s->gate && !peer_certs)
        rn_log(RN_LOG_INFO, "reload",
               "SIGHUP ignored: no --tls-cert, --peer-cert or --tenants to reload");
    reload_tls(s->tls, "TLS");
    reload_tls(s->peer_tls, "the peer listener's TLS");
}

/* The listeners' TLS contexts: the public one speaks TLS with --tls-cert
 * (asking clients for a certificate of --peer-ca when the peer routes are
 * served there: peer certificates and no --peer-listen); the peer
 * listener with --peer-cert (asking for one of --peer-ca), else with
 * --tls-cert. Returns 0, or -1 with err set. */
static int open_tls(server *s, char *err, size_t errcap) {
    const rn_config *c = &s->cfg;
    bool peer_certs = c->peer_cert[0] != 0, peer_listener = c->peer_listen.host[0] != 0;
    if (c->tls_cert[0]) {
        rn_tls_files f = {.cert_path = c->tls_cert, .key_path = c->tls_key};
        if (peer_certs && !peer_listener)
            f = (rn_tls_files){.cert_path = c->tls_cert,
                               .key_path = c->tls_key,
                               .client_ca_path = c->peer_ca,
                               .client_ca_flag = "--peer-ca"};
        if (!(s->tls = rn_tls_context_new(&f, err, errcap)))
            return -1;
    }
    if (!peer_listener || (!peer_certs && !c->tls_cert[0]))
        return 0;
    rn_tls_files f = {.cert_path = c->tls_cert, .key_path = c->tls_key};
    if (peer_certs)
        f = (rn_tls_files){.cert_path = c->peer_cert,
                           .key_path = c->peer_key,
                           .cert_flag = "--peer-cert",
                           .key_flag = "--peer-key",
                           .client_ca_path = c->peer_ca,
                           .client_ca_flag = "--peer-ca"};
    s->peer_tls = rn_tls_context_new(&f, err, errcap);
    return s->peer_tls ? 0 : -1;
}

/* The URL clients reach the server at: --public-url, else http(s)://<listen>. */
/* Raises the soft limit on open descriptors (up to the hard one) so that
 * --max-connections sockets and --max-open-files stream files fit, plus a
 * reserve for the log, checkpoints, blobs and outbound requests; warns
 * when the hard limit is lower. */
static void fit_descriptor_limit(const rn_config *cfg) {
    struct rlimit lim;
    if (getrlimit(RLIMIT_NOFILE, &lim) != 0)
        return;
    rlim_t need = (rlim_t)(cfg->max_connections + cfg->max_open_files + 256);
    if (lim.rlim_cur >= need)
        return;
    lim.rlim_cur = lim.rlim_max == RLIM_INFINITY || lim.rlim_max >= need ? need : lim.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &lim) != 0 || lim.rlim_cur < need)
        rn_log(RN_LOG_WARN, "start",
               "open-descriptor limit %llu is below the %llu that --max-connections and "
               "--max-open-files need; connections beyond it will be refused",
               (unsigned long long)lim.rlim_cur, (unsigned long long)need);
}

/* libuv's worker pool (4 threads by default) also runs libraft's log
 * writes, which block a worker for a whole synchronous disk write each
 * (Debian's libraft falls back to a worker when the file system refuses
 * RWF_NOWAIT): in cluster mode every group may have one in flight, so the
 * pool gets a worker per group beyond the usual four (measured, 3 nodes x
 * 16 groups, 500 writers: 3,780 appends/s with 4 workers, 4,680 with
 * 40). UV_THREADPOOL_SIZE, when set, wins. Before any work is queued. */
static void size_pool_for_groups(const rn_config *cfg) {
    if (!cfg->node_id || getenv("UV_THREADPOOL_SIZE"))
        return;
    char n[16];
    snprintf(n, sizeof n, "%llu",
             (unsigned long long)(cfg->groups + 4 > 128 ? 128 : cfg->groups + 4));
    setenv("UV_THREADPOOL_SIZE", n, 1);
}

/* The wake hooks of live.c: a stream's readers are woken inside one write
 * batch of the transport. */
static void wake_begin(void *arg) {
    rn_http_batch_begin(arg);
}

static void wake_end(void *arg) {
    rn_http_batch_flush(arg);
}

/* Without --tenants a node has no access control: a listener other hosts
 * can reach exposes everything to them, and without --admin-token-file (or
 * a peer listener) its operator routes too. Says so once, at start. */
static void warn_if_exposed(const rn_http_server *http, const rn_gate *gate, const rn_config *cfg) {
    char where[512];
    if (gate || rn_http_listen_addresses(http, where, sizeof where) == 0)
        return;
    int operator_open = !cfg->admin_token_file[0] && !cfg->peer_listen.host[0];
    rn_log(RN_LOG_WARN, "start",
           "listening on %s, which other hosts can reach, without any access control: anyone "
           "who reaches it can read, append to, close and delete every stream and bucket, "
           "create new ones, publish snapshots, advance retention, manage subscriptions and "
           "read the metrics%s; listen on a loopback address (--listen 127.0.0.1:PORT), or give "
           "--tenants, or put runnel gateway in front",
           where,
           operator_open ? ", and, with no --admin-token-file, use every operator route "
                           "(purge a bucket, take a backup, change the cluster's members)"
                         : "");
}

static void public_url(const rn_config *cfg, char *out, size_t cap) {
    const char *scheme = cfg->tls_cert[0] ? "https" : "http";
    if (cfg->public_url[0])
        snprintf(out, cap, "%s", cfg->public_url);
    else if (strchr(cfg->listen.host, ':'))
        snprintf(out, cap, "%s://[%s]:%d", scheme, cfg->listen.host, cfg->listen.port);
    else
        snprintf(out, cap, "%s://%s:%d", scheme, cfg->listen.host, cfg->listen.port);
}

static server *the_server; /* for the transport's on_complete, which has no argument */

/* A request completed: the access log (--access-log) and the bucket's
 * usage counters. */
static void request_done(const rn_request *req) {
    server *s = the_server;
    if (s->cfg.access_log) {
        const char *q = memchr(req->target, '?', req->target_len);
        size_t path_len = q ? (size_t)(q - req->target) : req->target_len;
        rn_log_access(req->method_name ? req->method_name : "-", req->target, path_len, req->status,
                      req->bytes_out, (uv_hrtime() - req->start_ns) / 1000,
                      req->gate_ticket ? rn_gate_tenant(req) : NULL);
    }
    rn_bucket_usage_count(&s->usage, s->router.ready ? s->engine : NULL, req);
}

static void admin_route(void *ctx, rn_request *req, const char *path, size_t path_len,
                        const char *query, size_t query_len) {
    rn_admin_plane_handle(ctx, req, path, path_len, query, query_len);
}

/* ---- recovery ---- */

static void recover(uv_work_t *w) {
    server *s = w->data;
    rn_engine_config ec = {.data_dir = s->cfg.data_dir,
                           .tiers = s->tiers,
                           .wal_segment_bytes = s->cfg.wal_segment_bytes,
                           .checkpoint_bytes = s->cfg.checkpoint_bytes,
                           .large_append_bytes = s->cfg.large_append_bytes,
                           .producer_ttl_ms = s->cfg.producer_ttl_ms,
                           .producer_cap = s->cfg.producer_cap,
                           .accept_loss =
                               s->cfg.accept_loss[0] && !s->cfg.node_id ? s->cfg.accept_loss : NULL,
                           .hot_bytes = s->cfg.hot_bytes,
                           .incarnation_key = s->incarnation_key};
    s->engine = rn_engine_open(s->loop, &ec, &s->stats, s->recovery_err, sizeof s->recovery_err);
}

static void wire(server *s);

/* Wires everything once the engine is open and the cold store confirmed
 * the claim; stops the start when the store refused it. */
static void proceed(server *s) {
    if (!s->recovery_done || s->claim_status == 1 || s->exit_code)
        return;
    if (s->claim_status == 0) {
        wire(s);
        return;
    }
    char why[256];
    rn_cold_claim_why(s->claim, why, sizeof why);
    if (s->claim_status == -EEXIST)
        rn_log(RN_LOG_ERROR, "start",
               "the S3 cold store's prefix \"%s\" is not this deployment's (cluster id %s): %s. "
               "Two deployments never share a prefix: give this one its own --s3-prefix",
               s->cfg.s3_prefix, s->cluster_id, why);
    else
        rn_log(RN_LOG_ERROR, "start",
               "the S3 cold store refuses this server's requests (%s): check the credentials, "
               "the bucket and the region",
               why);
    s->exit_code = 1;
    begin_shutdown(s);
}

static void on_claimed(void *arg, int status) {
    server *s = arg;
    s->claim_status = status;
    proceed(s);
}

/* Wires everything that needs the recovered engine, or gives up. */
static void recovered(uv_work_t *w, int status) {
    server *s = w->data;
    s->recovery_done = 1;
    if (status || !s->engine) {
        rn_log(RN_LOG_ERROR, "recovery", "%s", s->recovery_err);
        s->exit_code = 1;
        begin_shutdown(s);
        return;
    }
    rn_log(RN_LOG_INFO, "recovery",
           "recovered %llu streams (checkpoint %llu, %llu log records replayed, %llu torn bytes "
           "cut) in %llu ms",
           (unsigned long long)s->stats.streams, (unsigned long long)s->stats.checkpoint_streams,
           (unsigned long long)s->stats.records_replayed, (unsigned long long)s->stats.torn_bytes,
           (unsigned long long)(rn_mono_ms() - s->recovery_started));
    proceed(s);
}

/* ---- cluster mode ---- */

/* The cluster's routes, each after the check of who may call it
 * (rn_cluster_route_kind_of). */
static int cluster_route(void *ctx, rn_request *req, const char *path, size_t path_len,
                         const char *query, size_t query_len) {
    server *s = ctx;
    if (!s->cluster)
        return 0;
    bool allowed = true;
    rn_cluster_route_kind kind = rn_cluster_route_kind_of(path, path_len, query, query_len);
    if (kind != RN_CLUSTER_ROUTE_NONE && kind != RN_CLUSTER_ROUTE_OPEN &&
        !rn_endpoints_on_listener(&s->endpoints, req))
        return 1; /* answered: served on the peer listener only */
    switch (kind) {
    case RN_CLUSTER_ROUTE_NONE:
        return 0;
    case RN_CLUSTER_ROUTE_OPEN:
        break;
    case RN_CLUSTER_ROUTE_PEER:
        allowed = rn_cluster_peer_authorize(s->cluster, req);
        break;
    case RN_CLUSTER_ROUTE_OPERATOR:
        allowed = rn_admin_authorize(&s->admin, req);
        break;
    case RN_CLUSTER_ROUTE_PEER_OR_OPERATOR: /* a peer's credential is judged as a peer's */
        allowed = rn_cluster_peer_credential(s->cluster, req)
                      ? rn_cluster_peer_authorize(s->cluster, req)
                      : rn_admin_authorize(&s->admin, req);
        break;
    }
    return !allowed || rn_cluster_handle(s->cluster, req, path, path_len, query, query_len);
}

static void cluster_metrics(void *ctx, rn_buf *out) {
    server *s = ctx;
    if (s->cluster)
        rn_cluster_metrics(s->cluster, out);
}

/* A backup's wait before its instant (rn_backup_settle_fn). */
static void cluster_settle(void *ctx, uint64_t timeout_ms, void (*done)(void *arg, int status),
                           void *arg) {
    server *s = ctx;
    if (s->cluster)
        rn_cluster_settle(s->cluster, timeout_ms, done, arg);
    else
        done(arg, -ECANCELED);
}

static int cluster_ready(const void *ctx, char *why, size_t cap) {
    const server *s = ctx;
    if (!s->cluster) {
        snprintf(why, cap, "stopping");
        return 0;
    }
    return rn_cluster_ready(s->cluster, why, cap);
}

/* Opens the replicated engine and starts the node's groups on the loop
 * thread (they restore their snapshots meanwhile), then wires the
 * surfaces; the log's committed entries apply as the groups learn them. */
static void start_cluster(server *s) {
    rn_engine_config ec = {.data_dir = s->cfg.data_dir,
                           .tiers = s->tiers,
                           .producer_ttl_ms = s->cfg.producer_ttl_ms,
                           .producer_cap = s->cfg.producer_cap,
                           .hot_bytes = s->cfg.hot_bytes,
                           .incarnation_key = s->incarnation_key};
    s->engine = rn_engine_open_replicated(s->loop, &ec);
    s->cluster = rn_cluster_start(s->loop, &s->cfg, s->engine, s->tiers, s->recovery_err,
                                  sizeof s->recovery_err);
    if (!s->cluster) {
        rn_log(RN_LOG_ERROR, "start", "%s", s->recovery_err);
        s->exit_code = 1;
        begin_shutdown(s);
        return;
    }
    rn_log(RN_LOG_INFO, "cluster", "node %llu of cluster %s started %llu groups in %llu ms",
           (unsigned long long)s->cfg.node_id, s->cfg.cluster_id, (unsigned long long)s->cfg.groups,
           (unsigned long long)(rn_mono_ms() - s->recovery_started));
    rn_cluster_view view = rn_cluster_view_of(s->cluster);
    if (s->cfg.forward_writes) {
        s->forwarder = rn_write_forwarder_new(s->loop, &s->cfg);
        view.forward = rn_write_forwarder_take;
        view.forward_ctx = s->forwarder;
    }
    rn_routing_setup(&view, rn_router_handle, &s->router);
    s->endpoints.cluster_route = cluster_route;
    s->endpoints.cluster_ready = cluster_ready;
    s->endpoints.cluster_metrics = cluster_metrics;
    s->endpoints.cluster_ctx = s;
    s->recovery_done = 1;
    proceed(s);
}

/* Wires everything that needs the engine: live reads, subscriptions, the
 * surfaces, the tiers' sweeps; then the server is ready. */
static void wire(server *s) {
    char err[512];
    rn_live_config lc = {.max_reads = s->cfg.max_live_reads,
                         .max_reads_per_stream = s->cfg.max_live_reads_per_stream,
                         .sse_queue_bytes = s->cfg.sse_queue_bytes,
                         .sse_max_duration_ms = s->cfg.sse_max_duration_ms,
                         .wake_begin = wake_begin,
                         .wake_end = wake_end,
                         .wake_arg = s->http};
    s->live = rn_live_new(s->loop, s->engine, &lc);
    rn_engine_observe(s->engine, rn_live_observer, s->live);
    rn_subs_config subc = {.data_dir = s->cfg.data_dir,
                           .public_url = s->public_url,
                           .allow_loopback = s->cfg.webhook_allow_loopback,
                           .webhook_timeout_ms = s->cfg.webhook_timeout_ms,
                           .max_subs = s->cfg.max_subscriptions,
                           .max_explicit_links = s->cfg.max_subscription_streams,
                           .replicated = s->cluster != NULL,
                           .tls_ca = s->cfg.tls_ca,
                           .user_agent = "runnel/" RUNNEL_VERSION};
    s->subs = rn_subs_open(s->loop, s->engine, &subc, err, sizeof err);
    if (!s->subs) {
        rn_log(RN_LOG_ERROR, "start", "%s", err);
        s->exit_code = 1;
        begin_shutdown(s);
        return;
    }
    rn_surface_config sc = {.long_poll_timeout_ms = s->cfg.long_poll_timeout_ms,
                            .max_read_bytes = s->cfg.max_read_bytes,
                            .max_body_bytes = s->cfg.max_body_bytes,
                            .tiers = s->tiers,
                            .bodies_arrive = !s->gate && !s->cfg.node_id};
    s->surface = rn_surface_new(s->loop, s->engine, s->live, &sc);
    if (s->backup_dest) {
        uint64_t refresh_ms = s->cfg.parts_grace_ms / 4; /* the orphan sweep's period */
        s->backups = rn_backups_new(s->loop, s->engine, s->tiers, s->backup_dest,
                                    refresh_ms ? refresh_ms : 1);
        s->backup_dest = NULL;
        s->endpoints.backups = s->backups;
        if (s->cfg.node_id)
            rn_backups_settle_with(s->backups, cluster_settle, s);
    }
    s->owner = (rn_cold_owner){
        .engine = s->engine, .tiers = s->tiers, .backups = s->backups, .cluster = s->cluster};
    rn_cold_owner_watch(&s->owner);
    rn_tiers_start(s->tiers);
    if (s->cfg.hot_bytes)
        rn_engine_tier_history(s->engine);
    rn_engine_purge_start(s->engine); /* purges under way go on */
    s->router.streams = s->surface;
    s->router.subs = s->subs;
    s->endpoints.engine = s->engine;
    s->walker = rn_store_walk_new(s->loop, s->engine, RN_STORE_WALK_AT_ONCE, RN_STORE_WALK_SLICE);
    s->endpoints.gauges = rn_gauge_walk_new(s->walker);
    s->endpoints.surface = s->surface;
    s->endpoints.tiers = s->tiers;
    s->endpoints.live = s->live;
    rn_admin_plane_config ac = {.engine = s->engine,
                                .live = s->live,
                                .subs = s->subs,
                                .tiers = s->tiers,
                                .http = s->http,
                                .auth = &s->admin,
                                .cluster = s->cluster,
                                .usage = &s->usage,
                                .walker = s->walker,
                                .gauges = s->endpoints.gauges,
                                .cluster_id = s->cluster_id,
                                .started_ms = s->started_ms,
                                .ready = rn_endpoints_ready,
                                .ready_arg = &s->endpoints};
    s->admin_plane = rn_admin_plane_new(&ac);
    s->endpoints.admin_route = admin_route;
    s->endpoints.admin_ctx = s->admin_plane;
    uv_timer_start(&s->sweep, on_sweep, s->cfg.expiry_sweep_ms, 0);
    if (s->cfg.scrub_bytes_per_second * SCRUB_TICK_MS / 1000 > 0)
        uv_timer_start(&s->scrub, on_scrub, SCRUB_TICK_MS, SCRUB_TICK_MS);
    s->router.ready = 1;
    s->endpoints.ready = 1;
    rn_log(RN_LOG_INFO, "ready", "serving on %s", s->public_url);
    if (s->stopping) /* a signal arrived during recovery */
        uv_timer_start(&s->drain, on_drain_tick, 0, 10);
}

int rn_serve(int argc, char **argv) {
    static server s; /* the process's one server; static keeps it off the stack */
    memset(&s, 0, sizeof s);
    the_server = &s;
    s.started_ms = rn_now_ms();
    char err[512];
    int rc = rn_config_load(&s.cfg, RN_CONFIG_SERVE, argc, argv, err, sizeof err);
    if (rc == 1)
        return 0;
    if (rc == 0)
        rc = rn_cluster_config_check(&s.cfg, err, sizeof err);
    if (rc < 0) {
        fprintf(stderr, "runnel: %s\n", err);
        return 2;
    }
    char desc[8192];
    if (s.cfg.print_config) {
        rn_config_describe(&s.cfg, RN_CONFIG_SERVE, "\n", desc, sizeof desc);
        printf("%s\n", desc);
        return 0;
    }
    rn_log_setup(strcmp(s.cfg.log_format, "json") == 0, rn_log_level_parse(s.cfg.log_level));
    if (s.cfg.test_hooks && rn_fault_setup() != 0)
        return 1;
    signal(SIGPIPE, SIG_IGN);
    size_pool_for_groups(&s.cfg);
    fit_descriptor_limit(&s.cfg);
    int lock_fd = rn_datadir_lock(s.cfg.data_dir);
    if (lock_fd < 0 || rn_datadir_check_format(s.cfg.data_dir) != 0)
        return 1;
    if (!s.cfg.node_id && rn_cluster_check_single(&s.cfg) != 0)
        return 1;
    if (rn_datadir_cluster_id(&s.cfg, s.cluster_id) != 0 ||
        rn_datadir_incarnation_key(s.cfg.data_dir, &s.incarnation_key) != 0)
        return 1;
    rn_reply_set_cluster_id(s.cluster_id);
    if (s.cfg.node_id && !s.cfg.public_url[0]) /* this node's --peer URL */
        snprintf(s.cfg.public_url, sizeof s.cfg.public_url, "%s",
                 rn_cluster_peer(&s.cfg, s.cfg.node_id)->url);
    public_url(&s.cfg, s.public_url, sizeof s.public_url);
    s.loop = uv_default_loop();
    srand((unsigned)(rn_now_ms() ^ getpid()));

    if (rn_admin_auth_load(&s.admin, s.cfg.admin_token_file, err, sizeof err) != 0) {
        rn_log(RN_LOG_ERROR, "start", "%s", err);
        return 1;
    }
    s.endpoints = (rn_endpoints){.test_hooks = (int)s.cfg.test_hooks,
                                 .admin = &s.admin,
                                 .metrics_need_token = s.cfg.metrics_need_token,
                                 .peer_listener = s.cfg.peer_listen.host[0] != 0};
    if (s.cfg.tenants[0]) {
        rn_gate_config gc = {.tenants_path = s.cfg.tenants,
                             .max_request_bytes = s.cfg.max_body_bytes,
                             .upload_budget_bytes = s.cfg.upload_budget_bytes,
                             .usage_log = s.cfg.usage_log,
                             .usage_log_max_bytes = s.cfg.usage_log_max_bytes,
                             .usage_log_interval_ms = s.cfg.usage_log_interval_ms};
        s.gate = rn_gate_new(s.loop, &gc, err, sizeof err);
        if (!s.gate) {
            rn_log(RN_LOG_ERROR, "start", "%s", err);
            return 1;
        }
    }
    s.endpoints.gate = s.gate;
    s.endpoints.console_route = rn_console_handle;
    s.endpoints.max_body_bytes = s.cfg.max_body_bytes;
    s.router = (rn_router){.max_body_bytes = s.cfg.max_body_bytes,
                           .ops_handler = rn_endpoints_handle,
                           .ops_arg = &s.endpoints,
                           .gate = s.gate};
    if (open_tls(&s, err, sizeof err) != 0) {
        rn_log(RN_LOG_ERROR, "start", "%s", err);
        rn_tls_context_free(s.tls);
        return 1;
    }
    rn_http_config hc = {.host = s.cfg.listen.host,
                         .port = s.cfg.listen.port,
                         .max_body_bytes = s.cfg.max_body_bytes,
                         .max_header_bytes = s.cfg.max_header_bytes,
                         .max_headers = s.cfg.max_headers,
                         .request_timeout_ms = s.cfg.request_timeout_ms,
                         .min_body_rate = s.cfg.min_body_rate,
                         .idle_timeout_ms = s.cfg.idle_timeout_ms,
                         .max_connections = (int)s.cfg.max_connections,
                         .max_connections_per_ip = (int)s.cfg.max_connections_per_ip,
                         .http2_max_streams = (uint32_t)s.cfg.http2_max_streams,
                         .http2_max_header_list_bytes = (uint32_t)s.cfg.http2_max_header_list_bytes,
                         .http2_header_table_bytes = (uint32_t)s.cfg.http2_header_table_bytes,
                         .http2_max_control_frames = (uint32_t)s.cfg.http2_max_control_frames,
                         .max_body_bytes_in_flight = s.cfg.max_body_bytes_in_flight,
                         .max_answer_bytes_in_flight = s.cfg.max_answer_bytes_in_flight,
                         .on_complete = request_done,
                         .on_headers = rn_router_answer_early,
                         .on_headers_every_body = s.cfg.node_id != 0 || s.gate,
                         .fanout_threads = (int)s.cfg.fanout_threads,
                         .tls = s.tls,
                         .peer_host = s.cfg.peer_listen.host[0] ? s.cfg.peer_listen.host : NULL,
                         .peer_port = s.cfg.peer_listen.port,
                         .peer_tls = s.peer_tls};
    s.http = rn_http_listen(s.loop, &hc, rn_router_handle, &s.router, err, sizeof err);
    if (!s.http) {
        rn_log(RN_LOG_ERROR, "start", "%s", err);
        rn_tls_context_free(s.tls);
        rn_tls_context_free(s.peer_tls);
        return 1;
    }
    s.endpoints.http = s.http;
    rn_config_describe(&s.cfg, RN_CONFIG_SERVE, " ", desc, sizeof desc);
    rn_log(RN_LOG_INFO, "start", "runnel %s starting: %s", RUNNEL_VERSION, desc);
    warn_if_exposed(s.http, s.gate, &s.cfg);

    uv_signal_init(s.loop, &s.sigterm);
    uv_signal_init(s.loop, &s.sigint);
    s.sigterm.data = s.sigint.data = &s;
    uv_signal_start(&s.sigterm, on_signal, SIGTERM);
    uv_signal_start(&s.sigint, on_signal, SIGINT);
    uv_signal_init(s.loop, &s.sighup);
    s.sighup.data = &s;
    uv_signal_start(&s.sighup, on_sighup, SIGHUP);
    s.endpoints.probe = rn_probe_start(s.loop, s.cfg.data_dir, 1000);
    uv_timer_init(s.loop, &s.sweep);
    uv_timer_init(s.loop, &s.drain);
    uv_timer_init(s.loop, &s.scrub);
    s.sweep.data = s.drain.data = s.scrub.data = &s;
    rn_tiers_config tc = {.data_dir = s.cfg.data_dir,
                          .cold_store = s.cfg.cold_store != RN_COLD_NONE,
                          .max_open_files = (int)s.cfg.max_open_files,
                          .spare_files = (unsigned)s.cfg.spare_stream_files,
                          .parts_grace_ms = s.cfg.parts_grace_ms,
                          .history_cache_bytes = s.cfg.history_cache_bytes};
    /* Without --hot-bytes the cache only serves history tiered earlier:
     * never refuse the start for it, make it hold the largest read. */
    if (!s.cfg.hot_bytes && tc.history_cache_bytes < rn_config_history_cache_floor(&s.cfg))
        tc.history_cache_bytes = rn_config_history_cache_floor(&s.cfg);
    if (rn_cold_backend_open(s.loop, &s.cfg, s.cluster_id, &s.cold_backend, err, sizeof err) == 0) {
        tc.cold_backend = s.cold_backend;
        s.tiers = rn_tiers_open(s.loop, &tc, err, sizeof err);
        if (s.tiers)
            s.cold_backend = NULL;
        else if (s.cold_backend)
            s.cold_backend->ops->stop(s.cold_backend); /* closed once the loop ran */
    }
    int failed = !s.tiers;
    if (!failed && s.cfg.backup_to[0])
        failed = rn_backup_store_open(s.loop, &s.cfg, s.cfg.backup_to, &s.backup_dest, err,
                                      sizeof err) != 0;
    if (failed) {
        rn_log(RN_LOG_ERROR, "start", "%s", err);
        s.exit_code = 1;
        begin_shutdown(&s);
    } else {
        s.claim_status = 1;
        s.claim = rn_cold_claim_start(s.loop, s.tiers, on_claimed, &s);
        s.endpoints.claim = s.claim;
        s.recovery.data = &s;
        s.recovery_started = rn_mono_ms();
        if (s.cfg.node_id)
            start_cluster(&s);
        else
            uv_queue_work(s.loop, &s.recovery, recover, recovered);
    }

    uv_run(s.loop, UV_RUN_DEFAULT);

    if (s.subs)
        rn_subs_close(s.subs);
    if (s.engine)
        rn_engine_close(s.engine);
    rn_backups_free(s.backups);
    if (s.backup_dest)
        s.backup_dest->ops->close(s.backup_dest);
    rn_tiers_close(s.tiers);
    if (s.cold_backend)
        s.cold_backend->ops->close(s.cold_backend);
    if (s.surface)
        rn_surface_free(s.surface);
    rn_live_free(s.live);
    rn_http_free(s.http);
    rn_gate_free(s.gate);
    rn_write_forwarder_free(s.forwarder);
    rn_tls_context_free(s.tls);
    rn_tls_context_free(s.peer_tls);
    rn_admin_plane_free(s.admin_plane);
    rn_gauge_walk_free(s.endpoints.gauges);
    rn_store_walk_free(s.walker);
    rn_bucket_usage_free(&s.usage);
    uv_loop_close(s.loop);
    rn_admin_auth_clear(&s.admin);
    close(lock_fd);
    rn_log(RN_LOG_INFO, "stopped", "exit code %d", s.exit_code);
    return s.exit_code;
}
