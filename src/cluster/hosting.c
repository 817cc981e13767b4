/*
 * hosting.c — starting the groups placed here and dropping those moved
 * away. See hosting.h.
 */
#include "cluster/hosting.h"
#include "cluster/cluster_int.h"
#include "cluster/elsewhere.h"
#include "cluster/placement_driver.h"
#include "cluster/recovery.h"

#include <assert.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#define CHECK_MS 250

struct cluster_hosting {
    rn_cluster *cl;
    uv_timer_t tick;
    uint8_t *dropping; /* per data group: a stop with erase is under way */
};

typedef struct {
    cluster_hosting *h;
    unsigned group;
} drop;

static int pick_none(const rn_stream *s, void *arg) {
    (void)s;
    (void)arg;
    return 0;
}

/* The group stopped and its Raft directory is gone: its streams go too
 * (their state, files and snapshot bodies), as a restore of a manifest
 * naming none of them does. */
static void dropped(void *arg, consensus_status st) {
    drop *d = arg;
    rn_cluster *cl = d->h->cl;
    unsigned g = d->group;
    d->h->dropping[g] = 0;
    free(d);
    if (st != CONSENSUS_OK) {
        rn_log(RN_LOG_WARN, "cluster_hosting", "group %u: not dropped (%s)", g,
               consensus_status_name(st));
        return;
    }
    rn_buf none = {0};
    rn_engine_manifest(cl->engine, pick_none, NULL, g, &none);
    if (rn_engine_restore(cl->engine, rn_placement_stream_in_group, &g, g, none.data, none.len) !=
        0)
        rn_log(RN_LOG_ERROR, "cluster_hosting", "group %u: its streams could not be dropped", g);
    cluster_elsewhere_restored(cl); /* streams gone without the engine's events */
    rn_buf_free(&none);
    cl->catch_up[g].done = 0; /* placed here again later: it catches up again */
    rn_log(RN_LOG_INFO, "cluster_hosting", "group %u: dropped (moved to other nodes)", g);
}

/* Starts group g here: with its target as voters while it never moved
 * (the first nodes bootstrap it), else waiting to be added. */
static void start(cluster_hosting *h, unsigned g) {
    rn_cluster *cl = h->cl;
    const rn_meta_group *gr = &cl->meta.group[g];
    consensus_peer voters[RN_META_MAX_REPLICAS];
    unsigned n = 0;
    for (unsigned k = 0; gr->epoch == 0 && !cl->cfg.join && k < gr->n_target; k++) {
        const rn_peer_config *p = cluster_peer(cl, gr->target[k]);
        if (!p)
            return; /* an address not learned yet: the next check */
        voters[n++] = (consensus_peer){p->id, p->raft};
    }
    int defer = n && gr->leader && gr->leader != cl->cfg.node_id;
    if (consensus_group_start(cl->node, g, n ? voters : NULL, n, defer) != 0) {
        rn_log(RN_LOG_ERROR, "cluster_hosting", "group %u: cannot start: %s", g,
               consensus_error(cl->node));
        return;
    }
    rn_log(RN_LOG_INFO, "cluster_hosting", "group %u: started here (%s)", g,
           n ? "bootstrapped with its first nodes" : "waiting to be added");
    rn_fetcher_scan(cl->fetcher, g);
    cluster_catch_up_watch(cl);
}

/* Brings the running groups to the table (on a timer). */
static void check(cluster_hosting *h) {
    rn_cluster *cl = h->cl;
    if (!cl->node || !cl->meta.initialized)
        return;
    uint64_t self = cl->cfg.node_id;
    int table_current = cl->catch_up[cl->groups].done;
    for (unsigned g = 0; g < cl->groups; g++) {
        const rn_meta_group *gr = &cl->meta.group[g];
        if (h->dropping[g])
            continue;
        int running = consensus_group_running(cl->node, g);
        int placed = rn_meta_in_target(gr, (unsigned)self);
        if (!running && placed && !cluster_recovery_holds_start(cl->recovery, g)) {
            start(h, g);
        } else if (running && !placed && !rn_meta_in_members(gr, (unsigned)self) && table_current &&
                   !consensus_is_leader(cl->node, g)) {
            drop *d = rn_xmalloc(sizeof *d);
            *d = (drop){h, g};
            h->dropping[g] = 1;
            rn_log(RN_LOG_INFO, "cluster_hosting",
                   "group %u: this node left its configuration; dropping it", g);
            consensus_group_stop(cl->node, g, true, dropped, d);
        }
    }
}

static void on_tick(uv_timer_t *t) {
    check(t->data);
}

/* The groups the first placement puts here, bootstrapped on their first
 * nodes (a new node of a new cluster). Returns 0, or -1 (err set). */
static int start_first(rn_cluster *cl, char *err, size_t errcap) {
    rn_meta_group *first = rn_xcalloc(cl->groups, sizeof *first);
    cluster_first_placement(cl, first);
    int rc = 0;
    for (unsigned g = 0; g < cl->groups && rc == 0; g++) {
        consensus_peer voters[RN_META_MAX_REPLICAS];
        unsigned n = 0, here = 0;
        for (unsigned k = 0; k < first[g].n_target; k++) {
            const rn_peer_config *p = cluster_peer(cl, first[g].target[k]);
            voters[n++] = (consensus_peer){p->id, p->raft};
            here |= p->id == cl->cfg.node_id;
        }
        int defer = first[g].leader != cl->cfg.node_id; /* the preferred leader wins at once */
        if (here && consensus_group_start(cl->node, g, voters, n, defer) != 0) {
            snprintf(err, errcap, "cluster start failed: %s", consensus_error(cl->node));
            rc = -1;
        }
    }
    free(first);
    return rc;
}

cluster_hosting *cluster_hosting_new(rn_cluster *cl, int fresh, char *err, size_t errcap) {
    if (fresh && !cl->cfg.join && start_first(cl, err, errcap) != 0)
        return NULL;
    for (unsigned g = 0; g < cl->groups; g++) {
        if (!consensus_group_has_data(cl->cfg.data_dir, g) ||
            cluster_recovery_holds_start(cl->recovery, g))
            continue;
        if (consensus_group_start(cl->node, g, NULL, 0, false) != 0) {
            snprintf(err, errcap, "cluster start failed: %s", consensus_error(cl->node));
            return NULL;
        }
    }
    cluster_hosting *h = rn_xcalloc(1, sizeof *h);
    h->cl = cl;
    h->dropping = rn_xcalloc(cl->groups, 1);
    uv_timer_init(cl->loop, &h->tick);
    h->tick.data = h;
    uv_timer_start(&h->tick, on_tick, CHECK_MS, CHECK_MS);
    uv_unref((uv_handle_t *)&h->tick);
    return h;
}

void cluster_hosting_stop(cluster_hosting *h) {
    if (!h)
        return;
    uv_timer_stop(&h->tick);
    uv_close((uv_handle_t *)&h->tick, NULL);
}

void cluster_hosting_free(cluster_hosting *h) {
    if (!h)
        return;
    free(h->dropping);
    free(h);
}
