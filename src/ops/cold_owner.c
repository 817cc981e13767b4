/*
 * cold_owner.c — who removes which objects of the cold store. See
 * cold_owner.h.
 *
 * A cluster node owns the objects of the streams of the groups it leads
 * (ready, not handing over): one node per group, whichever node a client
 * or a restart made leader. Before its sweep removes anything, each group
 * concerned is confirmed the way a linearizable read is (the view's
 * confirm: a majority still follows this node, and it applied everything
 * committed before), because a leader cut off from its group may not know
 * yet that another leads it and creates streams this one never saw.
 */
#include "ops/cold_owner.h"
#include "cluster/placement.h"
#include "protocol/routing.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* The state references the body, or (a shared cold store's) a backup at
 * --backup-to may. */
static int body_referenced(void *arg, int cold, const char *key) {
    rn_cold_owner *o = arg;
    return rn_engine_body_referenced(o->engine, cold, key) ||
           (o->backups && rn_tiers_body_shared(o->tiers, cold) && rn_backups_hold(o->backups, key));
}

static int stream_kept(void *arg, uint64_t id) {
    rn_cold_owner *o = arg;
    return rn_engine_stream_kept(o->engine, id);
}

/* The term in which this node leads stream's group, 0: it does not. */
static uint64_t lead_term(void *arg, uint64_t stream) {
    rn_cold_owner *o = arg;
    return o->cluster ? rn_cluster_lead_term(o->cluster, rn_placement_id_group(stream)) : 0;
}

static int owns(void *arg, uint64_t stream) {
    return lead_term(arg, stream) != 0;
}

/* One confirmation of the groups of a sweep's doomed objects. */
typedef struct {
    unsigned waiting; /* groups not answered yet */
    int failed;       /* some group was not confirmed */
    rn_tiers_status_fn done;
    void *arg;
} confirmation;

static void group_confirmed(void *arg, int confirmed) {
    confirmation *c = arg;
    if (!confirmed)
        c->failed = 1;
    if (--c->waiting)
        return;
    c->done(c->arg, c->failed ? -EAGAIN : 0);
    free(c);
}

static void confirm(void *arg, const uint64_t *streams, size_t n, rn_tiers_status_fn done,
                    void *done_arg) {
    rn_cold_owner *o = arg;
    if (!o->cluster) {
        done(done_arg, -ECANCELED);
        return;
    }
    unsigned char asked[256] = {0};
    confirmation *c = rn_xcalloc(1, sizeof *c);
    c->done = done;
    c->arg = done_arg;
    c->waiting = 1; /* held until every group was asked */
    rn_cluster_view view = rn_cluster_view_of(o->cluster);
    for (size_t i = 0; i < n; i++) {
        unsigned g = rn_placement_id_group(streams[i]);
        if (asked[g])
            continue;
        asked[g] = 1;
        c->waiting++;
        view.confirm(view.ctx, g, group_confirmed, c);
    }
    group_confirmed(c, 1);
}

void rn_cold_owner_watch(rn_cold_owner *o) {
    rn_tiers_watch_bodies(o->tiers, body_referenced, o);
    rn_tiers_watch_history(o->tiers, stream_kept, o);
    if (o->cluster) { /* a cluster's backups copy every body (backup.h) */
        rn_tiers_sweep_owned(o->tiers, owns, confirm, o);
        rn_tiers_parts_epoch(o->tiers, lead_term, o);
    } else if (o->backups) /* a backup may name a body the state let go: the sweep decides */
        rn_tiers_drop_by_sweep_only(o->tiers);
}
