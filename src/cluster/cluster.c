/*
 * cluster.c — a node in cluster mode: start and stop, the data directory's
 * marker, and the routing view. See cluster.h; cluster_http.c has the
 * operational routes and what peers report of themselves.
 */
#include "cluster/forks.h"
#include "cluster/cluster_int.h"
#include "cluster/cluster_config.h"
#include "cluster/elsewhere.h"
#include "cluster/follower_reads.h"
#include "cluster/hand_over.h"
#include "cluster/health.h"
#include "cluster/hosting.h"
#include "cluster/identity.h"
#include "consensus/log_check.h"
#include "cluster/membership.h"
#include "cluster/placement_driver.h"
#include "cluster/reconcile.h"
#include "cluster/recovery.h"
#include "util/clock.h"
#include "util/files.h"
#include "util/log.h"

#include <errno.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MARKER "cluster-node"

/* The marker line for cfg. */
static int marker_line(const rn_config *cfg, char *out, size_t cap) {
    return snprintf(out, cap, "cluster-id=%s node=%llu groups=%llu\n", cfg->cluster_id,
                    (unsigned long long)cfg->node_id, (unsigned long long)cfg->groups);
}

int rn_cluster_check_single(const rn_config *cfg) {
    rn_buf b = {0};
    int rc = rn_read_file(cfg->data_dir, MARKER, &b);
    if (rc == 0)
        rn_log(RN_LOG_ERROR, "start",
               "%s belongs to a cluster node (%.*s); refusing to start it as a single node: "
               "start it with its --node-id, --cluster-id, --peer and --groups",
               cfg->data_dir, (int)(b.len && b.data[b.len - 1] == '\n' ? b.len - 1 : b.len),
               (const char *)b.data);
    rn_buf_free(&b);
    return rc == 0 ? -1 : 0;
}

int rn_cluster_mark(const rn_config *cfg, char *err, size_t errcap) {
    char want[256];
    int n = marker_line(cfg, want, sizeof want);
    rn_buf b = {0};
    int rc = rn_read_file(cfg->data_dir, MARKER, &b);
    if (rc == 0) {
        int same = b.len == (size_t)n && memcmp(b.data, want, (size_t)n) == 0;
        if (!same)
            snprintf(err, errcap,
                     "%s was created for %.*s; refusing to start it as cluster-id=%s node=%llu "
                     "groups=%llu (the group count and ids cannot change)",
                     cfg->data_dir, (int)(b.len && b.data[b.len - 1] == '\n' ? b.len - 1 : b.len),
                     (const char *)b.data, cfg->cluster_id, (unsigned long long)cfg->node_id,
                     (unsigned long long)cfg->groups);
        rn_buf_free(&b);
        return same ? 0 : -1;
    }
    rn_buf_free(&b);
    char raft[4200], wal[4200];
    snprintf(raft, sizeof raft, "%s/raft", cfg->data_dir);
    snprintf(wal, sizeof wal, "%s/wal", cfg->data_dir);
    if (rc != -ENOENT || access(raft, F_OK) == 0 || access(wal, F_OK) == 0) {
        snprintf(err, errcap,
                 "%s has no readable %s marker but holds %s data; refusing to start a cluster "
                 "node on it",
                 cfg->data_dir, MARKER, access(wal, F_OK) == 0 ? "single-node" : "Raft");
        return -1;
    }
    rc = rn_atomic_write_file(cfg->data_dir, MARKER, want, (size_t)n, 0644);
    if (rc < 0) {
        snprintf(err, errcap, "cannot write %s/%s: %s", cfg->data_dir, MARKER, strerror(-rc));
        return -1;
    }
    return 0;
}

/* ---- routing view ---- */

void cluster_group_info(const rn_cluster *cl, unsigned g, consensus_group_info *out) {
    consensus_group_info_get(cl->node, g, out);
    if (g < cl->groups) /* the metadata group has no raft_log state */
        out->applied_index = rn_raft_log_applied(cl->log, g, out->applied_index);
}

#define CATCH_UP_RETRY_MS 200
#define CATCH_UP_TICK_MS 20

static void caught_up_answered(void *arg, int ok) {
    catch_up *cu = arg;
    cu->asking = 0;
    if (ok)
        cu->done = 1;
    else
        cu->retry_ms = rn_mono_ms() + CATCH_UP_RETRY_MS;
}

/* Whether the group caught up since this node started: it led the group
 * (ready), or, a voter, applied the group's ReadIndex, which it asks its
 * leader for (follower_reads.c) the first time it is asked this. The
 * leader's index, not this node's own commit index: a restarted node's
 * starts at its newest snapshot, and judging by it would serve the
 * snapshot's older state as current. Until then local reads answer 503
 * GROUP_RESTARTING and readyz says not ready. Once caught up it stays so:
 * a replica that lags later serves local reads as consistency=local
 * allows. */
static int caught_up(rn_cluster *cl, unsigned g, const consensus_group_info *info) {
    catch_up *cu = &cl->catch_up[g];
    if (!cu->done && info->leader_ready)
        cu->done = 1;
    if (cu->done || cu->asking || !info->leader_id || !cl->follower_reads ||
        !cluster_voter_here(cl, g) || rn_mono_ms() < cu->retry_ms)
        return cu->done;
    cu->asking = 1;
    cluster_follower_read(cl->follower_reads, g, caught_up_answered, cu);
    return cu->done; /* a failed ask may have answered already; a good one comes later */
}

/* Starts each group's catch-up ask as soon as it can go, rather than at
 * the first read, so that a node nobody reads yet becomes ready. */
static void catch_up_tick(uv_timer_t *t) {
    rn_cluster *cl = t->data;
    unsigned behind = 0;
    for (unsigned g = 0; g < cl->all_groups && cl->node; g++) {
        consensus_group_info info;
        cluster_group_info(cl, g, &info);
        behind += consensus_group_running(cl->node, g) && !caught_up(cl, g, &info);
    }
    if (!behind)
        uv_timer_stop(t);
}

void cluster_catch_up_watch(rn_cluster *cl) {
    uv_timer_start(&cl->catching_up, catch_up_tick, CATCH_UP_TICK_MS, CATCH_UP_TICK_MS);
}

/* The URL of a node that hosts group g, for a redirect or a forward from a
 * node that does not: the leader known for it, else its preferred leader
 * or another node of its target that answers. NULL: none known. */
static const char *host_url(const rn_cluster *cl, unsigned g, uint64_t leader) {
    const rn_peer_config *p = leader != cl->cfg.node_id ? cluster_peer(cl, leader) : NULL;
    if (p || !cl->meta.initialized)
        return p ? p->url : NULL;
    const rn_meta_group *gr = &cl->meta.group[g];
    uint8_t alive[256];
    cluster_alive(cl, alive);
    const rn_peer_config *any = NULL;
    for (unsigned k = 0; k < gr->n_target; k++) {
        uint64_t id = gr->target[k];
        const rn_peer_config *q = id != cl->cfg.node_id ? cluster_peer(cl, id) : NULL;
        if (q && alive[id] && (id == gr->leader || !any))
            any = q;
    }
    return any ? any->url : NULL;
}

static void route(void *ctx, const char *key, size_t len, rn_group_route *out) {
    rn_cluster *cl = ctx;
    unsigned g = rn_raft_log_group(cl->log, key, len);
    memset(out, 0, sizeof *out);
    out->group = g;
    if (!cl->node)
        return; /* stopping */
    out->hosted = consensus_group_running(cl->node, g) && cluster_voter_here(cl, g);
    if (!out->hosted) { /* the group's leader, as peers report it, or a node of its target */
        out->leader_id = cluster_leader_of(cl, g, &out->term);
        out->host_url = host_url(cl, g, out->leader_id);
        const rn_peer_config *p = cluster_peer(cl, out->leader_id);
        out->leader_url = p && p->id != cl->cfg.node_id ? p->url : out->host_url;
        return;
    }
    consensus_group_info info;
    cluster_group_info(cl, g, &info);
    int recovering = cluster_recovery_pending(cl->recovery, g); /* not rewritten yet */
    out->caught_up = !recovering && caught_up(cl, g, &info);
    out->serves = !recovering && info.leader_ready && !info.transferring;
    out->held_here = info.leader_id == cl->cfg.node_id && !out->serves;
    out->write_refusal = out->serves ? rn_health_write_refusal(cl, g) : 0;
    rn_raft_log_stop stop; /* applying stopped, or the log cannot take new entries */
    out->apply_stopped = rn_raft_log_stopped(cl->log, g, &stop) || info.log_writes_held > 0;
    out->leader_id = info.leader_id;
    out->term = info.term;
    const rn_peer_config *p = cluster_peer(cl, info.leader_id);
    out->leader_url = p && info.leader_id != cl->cfg.node_id ? p->url : NULL;
}

uint64_t rn_cluster_lead_term(rn_cluster *cl, unsigned group) {
    if (!cl->node || group >= cl->groups)
        return 0;
    consensus_group_info info;
    consensus_group_info_get(cl->node, group, &info);
    return info.leader_ready && !info.transferring ? info.term : 0;
}

typedef struct {
    rn_confirm_cb cb;
    void *arg;
} confirm_wait;

static void barrier_done(void *arg, consensus_status st, uint64_t applied) {
    (void)applied;
    confirm_wait *w = arg;
    w->cb(w->arg, st == CONSENSUS_OK);
    free(w);
}

static void confirm(void *ctx, unsigned group, rn_confirm_cb cb, void *arg) {
    rn_cluster *cl = ctx;
    confirm_wait *w = rn_xmalloc(sizeof *w);
    w->cb = cb;
    w->arg = arg;
    if (cl->node)
        consensus_read_barrier(cl->node, group, barrier_done, w);
    else
        barrier_done(w, CONSENSUS_NOT_PROPOSED, 0);
}

static void follower_confirm(void *ctx, unsigned group, rn_confirm_cb cb, void *arg) {
    rn_cluster *cl = ctx;
    cluster_follower_read(cl->follower_reads, group, cb, arg);
}

static void await_leader(void *ctx, unsigned group, rn_confirm_cb cb, void *arg) {
    rn_cluster *cl = ctx;
    cluster_await_leader(cl->hand_over, group, 2 * cl->cfg.election_timeout_ms, cb, arg);
}

rn_cluster_view rn_cluster_view_of(rn_cluster *cl) {
    int confirm_reads = strcmp(cl->cfg.follower_reads, "local") != 0;
    return (rn_cluster_view){.ctx = cl,
                             .route = route,
                             .confirm = confirm,
                             .follower_confirm = confirm_reads ? follower_confirm : NULL,
                             .await_leader = await_leader,
                             .ask_elsewhere = cluster_ask_elsewhere,
                             .ask_elsewhere_cancel = cluster_ask_elsewhere_cancel};
}

unsigned rn_cluster_hand_over(rn_cluster *cl, uint64_t timeout_ms, void (*done)(void *arg),
                              void *arg) {
    return cluster_hand_over_start(cl->hand_over, timeout_ms, done, arg);
}

int rn_cluster_ready(rn_cluster *cl, char *why, size_t cap) {
    if (!cl->node) {
        snprintf(why, cap, "stopping");
        return 0;
    }
    if (!rn_health_ready(cl, why, cap))
        return 0;
    if (!cl->meta.initialized) {
        snprintf(why, cap, "the cluster's table is not known here yet");
        return 0;
    }
    for (unsigned g = 0; g < cl->all_groups; g++) {
        const char *name = g == cl->groups ? "the metadata group" : "group";
        int placed =
            g == cl->groups || rn_meta_in_target(&cl->meta.group[g], (unsigned)cl->cfg.node_id);
        if (!placed)
            continue; /* not hosted here (or leaving): others serve it */
        consensus_group_info info;
        cluster_group_info(cl, g, &info);
        if (!info.leader_id) {
            snprintf(why, cap, "%s %u has no leader", name, g);
            return 0;
        }
        if (!cluster_voter_here(cl, g)) {
            snprintf(why, cap, "this node is not a voter of %s %u (yet)", name, g);
            return 0;
        }
        if (!caught_up(cl, g, &info)) {
            snprintf(why, cap,
                     "%s %u has not applied what its leader committed (applied %llu here)", name, g,
                     (unsigned long long)info.applied_index);
            return 0;
        }
        if (cluster_recovery_pending(cl->recovery, g)) {
            snprintf(why, cap, "%s %u is being recovered (--accept-loss)", name, g);
            return 0;
        }
        if (info.applied_index < info.commit_index) {
            snprintf(why, cap, "%s %u applied %llu of %llu committed entries", name, g,
                     (unsigned long long)info.applied_index, (unsigned long long)info.commit_index);
            return 0;
        }
    }
    unsigned gaps = cl->fetcher ? rn_fetcher_pending(cl->fetcher) : 0;
    if (gaps) {
        snprintf(why, cap, "%u streams wait for bytes from peers", gaps);
        return 0;
    }
    return 1;
}

/* ---- start and stop ---- */

static void node_stopped(void *arg);

/* A group restored a snapshot: fill the gaps it left (at start, before
 * the fetcher exists, the start scans every group instead). */
static void restored(void *arg, unsigned group) {
    rn_cluster *cl = arg;
    cluster_elsewhere_restored(cl);
    if (cl->fetcher)
        rn_fetcher_scan(cl->fetcher, group);
}

/* A snapshot's PUBLISH applied: its body is fetched unless it is here. */
static void published(void *arg, uint64_t stream_id) {
    rn_cluster *cl = arg;
    if (cl->fetcher)
        rn_fetcher_published(cl->fetcher, stream_id);
}

/* A read or the scrub found damaged bytes: the engine made them a gap. */
static void damaged(void *arg, uint64_t stream_id) {
    rn_cluster *cl = arg;
    if (cl->fetcher)
        rn_fetcher_gap(cl->fetcher, stream_id);
}

/* Where a gap of the group is fetched from: its leader first, then the
 * other members of its configuration in turn (of a group not hosted here,
 * which a fork's inherited range is copied from: the leader its peers
 * report, then the nodes the placement table puts it on). */
static const char *fetch_source(void *ctx, unsigned group, unsigned attempt) {
    rn_cluster *cl = ctx;
    if (!cl->node)
        return NULL;
    uint64_t ids[RN_META_MAX_NODES + 1], term;
    unsigned nm = 0;
    if (consensus_group_running(cl->node, group)) {
        consensus_group_info info;
        cluster_group_info(cl, group, &info);
        consensus_member m[RN_META_MAX_NODES];
        unsigned k = consensus_members(cl->node, group, m, RN_META_MAX_NODES);
        ids[nm++] = info.leader_id;
        for (unsigned j = 0; j < k && j < RN_META_MAX_NODES; j++)
            ids[nm++] = m[j].id;
    } else {
        ids[nm++] = cluster_leader_of(cl, group, &term);
        const rn_meta_group *gr = &cl->meta.group[group];
        for (unsigned j = 0; cl->meta.initialized && j < gr->n_target && j < RN_META_MAX_REPLICAS;
             j++)
            ids[nm++] = gr->target[j];
    }
    const rn_peer_config *order[RN_META_MAX_NODES + 1];
    unsigned n = 0;
    for (unsigned k = 0; k < nm; k++) {
        const rn_peer_config *p = cluster_peer(cl, ids[k]);
        int again = 0;
        for (unsigned j = 0; j < n; j++)
            again |= order[j] == p;
        if (p && p->id != cl->cfg.node_id && !again)
            order[n++] = p;
    }
    return n ? rn_cluster_peer_url(order[attempt % n]) : NULL;
}

/* ---- the state machine: the data groups' (raft_log.h) and the metadata
 * group's (placement_driver.h), by group ---- */

static void *split_apply(void *ctx, unsigned group, uint64_t index, const void *data, size_t len) {
    rn_cluster *cl = ctx;
    return group == cl->groups ? cluster_meta_apply(cl, data, len)
                               : cl->data_fsm.apply(cl->data_fsm.ctx, group, index, data, len);
}

static void split_free_result(void *ctx, unsigned group, void *result) {
    rn_cluster *cl = ctx;
    if (group == cl->groups)
        cluster_meta_free_result(result);
    else
        cl->data_fsm.free_result(cl->data_fsm.ctx, group, result);
}

static int split_snapshot(void *ctx, unsigned group, uint64_t index, void **out, size_t *len) {
    rn_cluster *cl = ctx;
    return group == cl->groups ? cluster_meta_snapshot(cl, out, len)
                               : cl->data_fsm.snapshot(cl->data_fsm.ctx, group, index, out, len);
}

static int split_snapshot_durable(void *ctx, unsigned group) {
    rn_cluster *cl = ctx;
    return group == cl->groups ? 0 : cl->data_fsm.snapshot_durable(cl->data_fsm.ctx, group);
}

static int split_restore(void *ctx, unsigned group, uint64_t index, const void *m, size_t len) {
    rn_cluster *cl = ctx;
    return group == cl->groups ? cluster_meta_restore(cl, m, len)
                               : cl->data_fsm.restore(cl->data_fsm.ctx, group, index, m, len);
}

static void split_leader_changed(void *ctx, unsigned group, uint64_t leader, uint64_t term,
                                 bool self_ready) {
    rn_cluster *cl = ctx;
    cl->data_fsm.leader_changed(cl->data_fsm.ctx, group, leader, term, self_ready);
}

static void leader_changed(void *arg, unsigned group, uint64_t leader, uint64_t term, bool ready) {
    rn_cluster *cl = arg;
    (void)cl;
    rn_log(RN_LOG_INFO, "cluster_leader", "group %u: leader %llu, term %llu%s", group,
           (unsigned long long)leader, (unsigned long long)term,
           ready ? " (this node, ready)" : "");
}

/* Starts the metadata group (bootstrapped with the --peer nodes unless
 * this node joins) and every data group with Raft data here. */
static int start_groups(rn_cluster *cl, const consensus_peer *peers, char *err, size_t errcap) {
    int fresh = !consensus_group_has_data(cl->cfg.data_dir, cl->groups);
    for (unsigned g = 0; g < cl->groups && fresh; g++)
        fresh = !consensus_group_has_data(cl->cfg.data_dir, g);
    cl->recovery = cluster_recovery_new(cl, err, errcap);
    if (!cl->recovery)
        return -1;
    if (!cluster_recovery_holds_start(cl->recovery, cl->groups) &&
        consensus_group_start(cl->node, cl->groups, cl->cfg.join ? NULL : peers,
                              cl->cfg.join ? 0 : (unsigned)cl->cfg.n_peers, false) != 0) {
        snprintf(err, errcap, "cluster start failed: %s", consensus_error(cl->node));
        return -1;
    }
    cl->hosting = cluster_hosting_new(cl, fresh, err, errcap);
    return cl->hosting ? 0 : -1;
}

/* Says, loudly, that nothing proves who a peer is (neither a cluster key
 * nor peer certificates). */
static void warn_unauthenticated(void) {
    rn_log(RN_LOG_WARN, "cluster_unauthenticated",
           "cluster mode WITHOUT PEER AUTHENTICATION (no --cluster-key-file, no --peer-cert): "
           "anyone who reaches this node's Raft port can speak Raft as any node (raise terms, "
           "append entries, depose leaders) and anyone who reaches its HTTP port can call the "
           "peer routes (read every stream's bytes and snapshot bodies); give every node the "
           "same --cluster-key-file, or --peer-cert/--peer-key/--peer-ca from the cluster's CA");
}

/* The node's credentials as a peer: the cluster key or the peer
 * certificates (checked against this node's id), or none. */
static int load_credentials(const rn_config *cfg, rn_secret *key, rn_peer_tls **tls, char *err,
                            size_t errcap) {
    if (cfg->cluster_key_file[0])
        return rn_secret_load(cfg->cluster_key_file, "--cluster-key-file", key, err, errcap);
    if (cfg->peer_cert[0]) {
        *tls =
            rn_peer_tls_new(cfg->peer_cert, cfg->peer_key, cfg->peer_ca, cfg->node_id, err, errcap);
        return *tls ? 0 : -1;
    }
    warn_unauthenticated();
    return 0;
}

rn_cluster *rn_cluster_start(uv_loop_t *loop, const rn_config *cfg, rn_engine *engine,
                             struct rn_tiers *tiers, char *err, size_t errcap) {
    rn_secret key = {0};
    rn_peer_tls *tls = NULL;
    if (load_credentials(cfg, &key, &tls, err, errcap) != 0 ||
        rn_cluster_mark(cfg, err, errcap) != 0) {
        rn_peer_tls_free(tls);
        return NULL;
    }
    rn_health_release_reserve(cfg); /* before anything is written: room for the start */
    if (rn_raft_log_check(cfg->data_dir, (unsigned)cfg->groups, err, errcap) != 0) {
        rn_secret_wipe(&key); /* damage is never cut as a torn tail (log_check.h) */
        rn_peer_tls_free(tls);
        return NULL;
    }
    rn_cluster *cl = rn_xcalloc(1, sizeof *cl);
    cl->key = key;
    cl->peer_tls = tls;
    rn_secret_wipe(&key);
    cl->loop = loop;
    cl->cfg = *cfg;
    cl->engine = engine;
    rn_engine_share_touches(engine); /* TTL windows cluster-wide: touches.h */
    cl->tiers = tiers;
    cl->groups = (unsigned)cfg->groups;
    cl->all_groups = cl->groups + 1;
    cl->catch_up = rn_xcalloc(cl->all_groups, sizeof *cl->catch_up);
    cl->led = rn_xcalloc(cl->all_groups, sizeof *cl->led);
    rn_meta_init_empty(&cl->meta);
    if (rn_identity_start(cl, err, errcap) != 0 ||
        rn_id_issuer_open(&cl->ids, cfg->data_dir, (unsigned)cfg->node_id, err, errcap) != 0) {
        rn_secret_wipe(&cl->key);
        rn_peer_tls_free(cl->peer_tls);
        free(cl->catch_up);
        free(cl->led);
        free(cl->incarnations);
        free(cl->replaced);
        free(cl);
        return NULL;
    }
    rn_raft_log_config lc = {.loop = loop,
                             .engine = engine,
                             .groups = cl->groups,
                             .ids = &cl->ids,
                             .leader_changed = leader_changed,
                             .restored = restored,
                             .published = published,
                             .admit = rn_health_admit,
                             .fork_pin = cluster_fork_pin,
                             .fork_unpin = cluster_fork_unpin,
                             .fork_alive = cluster_fork_alive,
                             .fork_cut = cluster_fork_cut,
                             .hosts = cluster_hosts,
                             .hook_arg = cl,
                             .min_free_bytes = rn_health_floor(cfg),
                             .data_dir = cfg->data_dir};
    cl->log = rn_raft_log_new(&lc);
    cluster_elsewhere_start(cl);
    rn_engine_set_log(engine, rn_raft_log_cmdlog(cl->log));
    cl->data_fsm = rn_raft_log_fsm(cl->log);
    consensus_peer peers[RN_MAX_PEERS];
    const char *self_raft = rn_cluster_consensus_peers(cfg, peers);
    consensus_config cc = {.loop = loop,
                           .self_id = cfg->node_id,
                           .self_address = self_raft,
                           .peers = peers,
                           .n_peers = (unsigned)cfg->n_peers,
                           .data_dir = cfg->data_dir,
                           .groups = cl->all_groups,
                           .lazy = true,
                           .cluster_id = cfg->cluster_id,
                           .cluster_key = &cl->key,
                           .peer_tls = cl->peer_tls,
                           .fsm = {.ctx = cl,
                                   .apply = split_apply,
                                   .free_result = split_free_result,
                                   .snapshot = split_snapshot,
                                   .snapshot_durable = split_snapshot_durable,
                                   .restore = split_restore,
                                   .leader_changed = split_leader_changed}};
    consensus_params_default(&cc.params);
    cc.params.election_timeout_ms = (unsigned)cfg->election_timeout_ms;
    cc.params.snapshot_threshold = (unsigned)cfg->snapshot_entries;
    cc.params.snapshot_trailing = (unsigned)cfg->snapshot_trailing;
    cc.params.snapshot_bytes = cfg->snapshot_bytes;
    cc.params.min_free_bytes = rn_health_floor(cfg);
    cc.params.heartbeat_ms =
        cc.params.election_timeout_ms / 10 ? cc.params.election_timeout_ms / 10 : 1;
    consensus *node = NULL;
    int rc = consensus_start(&cc, &node);
    cl->node = node;
    if (rc != 0 || start_groups(cl, peers, err, errcap) != 0) {
        if (rc != 0)
            snprintf(err, errcap, "cluster start failed: %s", consensus_error(node));
        cl->node = NULL;
        consensus_stop(node, node_stopped, cl); /* finishes while the loop runs */
        return NULL;
    }
    rn_raft_log_attach(cl->log, node);
    cluster_peers_start(cl);
    cl->fetcher =
        rn_fetcher_new(loop, engine, tiers, cl->http, fetch_source, cl, cfg->move_rate_bytes);
    rn_engine_on_damage(engine, damaged, cl);
    cl->follower_reads = cluster_follower_reads_new(cl);
    cl->hand_over = cluster_hand_over_new(cl);
    cl->reconcile = cluster_reconcile_new(cl);
    cl->driver = cluster_driver_new(cl);
    uv_timer_init(loop, &cl->catching_up);
    cl->catching_up.data = cl;
    cluster_catch_up_watch(cl);
    uv_unref((uv_handle_t *)&cl->catching_up);
    rn_health_start(cl);
    for (unsigned g = 0; g < cl->groups; g++)
        rn_fetcher_scan(cl->fetcher, g);
    return cl;
}

int rn_cluster_reload_certificates(rn_cluster *cl, char *err, size_t errcap) {
    if (!cl->peer_tls)
        return 0;
    return rn_peer_tls_reload(cl->peer_tls, err, errcap) == 0 ? 1 : -1;
}

static void node_stopped(void *arg) {
    rn_cluster *cl = arg;
    void (*done)(void *) = cl->stop_done;
    void *done_arg = cl->stop_arg;
    cluster_peers_free(cl);
    cluster_follower_reads_free(cl->follower_reads);
    cluster_hand_over_free(cl->hand_over);
    cluster_hosting_free(cl->hosting);
    cluster_reconcile_free(cl->reconcile);
    cluster_driver_free(cl->driver);
    cluster_recovery_free(cl->recovery);
    cluster_elsewhere_free(cl);
    rn_raft_log_free(cl->log);
    rn_meta_free(&cl->meta);
    free(cl->catch_up);
    free(cl->led);
    free(cl->incarnations);
    free(cl->replaced);
    rn_id_issuer_close(&cl->ids);
    rn_secret_wipe(&cl->key);
    rn_peer_tls_free(cl->peer_tls); /* links still closing hold their own references */
    free(cl);
    if (done)
        done(done_arg);
}

void rn_cluster_stop(rn_cluster *cl, void (*done)(void *arg), void *arg) {
    cl->stop_done = done;
    cl->stop_arg = arg;
    cluster_settles_cancel(cl);
    if (cl->follower_reads) { /* started with the timer */
        uv_timer_stop(&cl->catching_up);
        uv_close((uv_handle_t *)&cl->catching_up, NULL);
        cluster_follower_reads_stop(cl->follower_reads);
        cluster_hand_over_stop(cl->hand_over);
    }
    cluster_hosting_stop(cl->hosting);
    cluster_reconcile_stop(cl->reconcile);
    cluster_driver_stop(cl->driver);
    cluster_recovery_stop(cl->recovery);
    rn_fetcher_free(cl->fetcher);
    cl->fetcher = NULL;
    rn_membership_stop(cl);
    rn_health_stop(cl);
    cluster_peers_stop(cl);
    consensus *node = cl->node;
    cl->node = NULL;
    rn_raft_log_attach(cl->log, NULL);
    consensus_stop(node, node_stopped, cl);
}
