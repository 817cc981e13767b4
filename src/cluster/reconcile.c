/*
 * reconcile.c — a group's leader brings its configuration and leadership
 * to the metadata table. See reconcile.h.
 */
#include "cluster/reconcile.h"
#include "cluster/balance.h"
#include "cluster/cluster_int.h"
#include "cluster/identity.h"
#include "util/clock.h"

#include <assert.h>
#include <inttypes.h>
#include <stdlib.h>

#define TICK_MS 250
#define TRANSFER_SPACING_MS 3000
#define KEEP_UP_SLACK 128 /* entries a standby's stored index may trail the commit index by */

typedef struct {
    const char *step; /* the change in flight, or NULL */
    uint64_t transfer_ms;
    uint64_t mark; /* commit index when the standby being promoted first kept up (0: not yet) */
    uint64_t mark_node;
} rec_group;

struct cluster_reconcile {
    rn_cluster *cl;
    uv_timer_t tick;
    rec_group *g; /* per group, the metadata group last */
};

typedef struct {
    cluster_reconcile *r;
    unsigned group;
    uint64_t node;
} change;

static void changed(void *arg, consensus_status st) {
    change *ch = arg;
    rec_group *rg = &ch->r->g[ch->group];
    if (st == CONSENSUS_OK)
        rn_log(RN_LOG_INFO, "cluster_reconcile", "group %u: node %" PRIu64 ": %s done", ch->group,
               ch->node, rg->step);
    else if (st != CONSENSUS_NOT_LEADER && st != CONSENSUS_BUSY)
        rn_log(RN_LOG_WARN, "cluster_reconcile", "group %u: node %" PRIu64 ": %s failed (%s)",
               ch->group, ch->node, rg->step, consensus_status_name(st));
    rg->step = NULL;
    free(ch);
}

static change *change_new(cluster_reconcile *r, unsigned g, uint64_t node, const char *step) {
    change *ch = rn_xmalloc(sizeof *ch);
    *ch = (change){r, g, node};
    r->g[g].step = step;
    return ch;
}

static const consensus_member *member(const consensus_member *m, unsigned n, uint64_t id) {
    for (unsigned k = 0; k < n; k++)
        if (m[k].id == id)
            return &m[k];
    return NULL;
}

static int drained(const rn_cluster *cl, uint64_t id) {
    const rn_meta_node *n = rn_meta_node_get(&cl->meta, (unsigned)id);
    return n && n->drained;
}

/* True once the standby `t` kept up (see reconcile.h). */
static int kept_up(cluster_reconcile *r, unsigned g, const consensus_member *t,
                   const consensus_group_info *info) {
    rec_group *rg = &r->g[g];
    if (t->match_index + KEEP_UP_SLACK < info->commit_index) {
        rg->mark = 0;
        return 0;
    }
    if (!rg->mark || rg->mark_node != t->id) {
        rg->mark = info->commit_index ? info->commit_index : 1;
        rg->mark_node = t->id;
        return 0;
    }
    const peer_status *ps = cluster_peer_status(r->cl, t->id);
    return ps && ps->g[g].role == 2 && ps->g[g].applied >= rg->mark && ps->g[g].gaps == 0;
}

/* True when peer id may be handed a leadership: it reports a healthy disk
 * (health.h) and its data directory is the one first seen (identity.h). */
static int fit(const rn_cluster *cl, uint64_t id) {
    const peer_status *ps = cluster_peer_status(cl, id);
    return ps && ps->health == 1 && !rn_identity_replaced(cl, id);
}

/* A voter other than this node to hand the leadership to: the preferred
 * one when it may lead, else one that answers and is not drained (a
 * drained one when `any`). 0: none. */
static uint64_t successor(rn_cluster *cl, const consensus_member *m, unsigned n, uint64_t preferred,
                          const uint8_t alive[256], int any) {
    uint64_t found = 0;
    for (unsigned k = 0; k < n; k++) {
        uint64_t id = m[k].id;
        if (id == cl->cfg.node_id || m[k].role != CONSENSUS_VOTER || !alive[id] || !fit(cl, id))
            continue;
        if (id == preferred && !drained(cl, id))
            return id;
        if (!found && (any || !drained(cl, id)))
            found = id;
    }
    return found;
}

static void transfer(cluster_reconcile *r, unsigned g, uint64_t to) {
    rec_group *rg = &r->g[g];
    uint64_t now = rn_mono_ms();
    if (!to || now - rg->transfer_ms < TRANSFER_SPACING_MS)
        return;
    rg->transfer_ms = now;
    consensus_transfer(r->cl->node, g, to, changed, change_new(r, g, to, "transferring"));
}

/* One step for group g toward target (n_target ids) and its preferred
 * leader (0: none). */
static void step(cluster_reconcile *r, unsigned g, const uint8_t *target, unsigned n_target,
                 uint64_t preferred) {
    rn_cluster *cl = r->cl;
    uint64_t self = cl->cfg.node_id;
    uint8_t alive[256];
    cluster_alive(cl, alive);
    consensus_member m[RN_META_MAX_NODES];
    unsigned n = consensus_members(cl->node, g, m, RN_META_MAX_NODES);
    if (n > RN_META_MAX_NODES)
        n = RN_META_MAX_NODES;
    consensus_group_info info;
    consensus_group_info_get(cl->node, g, &info);
    if (drained(cl, self)) {
        transfer(r, g, successor(cl, m, n, preferred, alive, 0));
        return;
    }
    int self_stays = 0;
    for (unsigned k = 0; k < n_target; k++) {
        uint64_t t = target[k];
        const consensus_member *found = member(m, n, t);
        const rn_peer_config *p = cluster_peer(cl, t);
        self_stays |= t == self;
        if (!found && p) {
            consensus_add(cl->node, g, t, p->raft, changed, change_new(r, g, t, "adding"));
            return;
        }
        if (found && found->role == CONSENSUS_SPARE) {
            consensus_assign(cl->node, g, t, CONSENSUS_STANDBY, changed,
                             change_new(r, g, t, "catching_up"));
            return;
        }
        if (found && found->role == CONSENSUS_STANDBY && alive[t]) {
            if (kept_up(r, g, found, &info))
                consensus_assign(cl->node, g, t, CONSENSUS_VOTER, changed,
                                 change_new(r, g, t, "promoting"));
            return; /* promoted, or it catches up: the next step waits for it */
        }
    }
    unsigned voting = 0; /* the target's nodes that vote already */
    for (unsigned k = 0; k < n_target; k++) {
        const consensus_member *t = member(m, n, target[k]);
        voting += t && t->role == CONSENSUS_VOTER;
    }
    for (unsigned k = 0; k < n; k++) {
        int wanted = 0;
        for (unsigned j = 0; j < n_target; j++)
            wanted |= target[j] == m[k].id;
        if (m[k].role == CONSENSUS_VOTER && voting < n_target)
            continue; /* a voter leaves only once every node of the target votes */
        if (!wanted && m[k].id != self) {
            consensus_remove(cl->node, g, m[k].id, changed, change_new(r, g, m[k].id, "removing"));
            return;
        }
    }
    if (!self_stays)
        transfer(r, g, successor(cl, m, n, preferred, alive, 1));
    else if (preferred && preferred != self && !drained(cl, preferred) && alive[preferred] &&
             fit(cl, preferred) && member(m, n, preferred) &&
             member(m, n, preferred)->role == CONSENSUS_VOTER)
        transfer(r, g, preferred);
}

static void on_tick(uv_timer_t *t) {
    cluster_reconcile *r = t->data;
    rn_cluster *cl = r->cl;
    if (!cl->node || !cl->meta.initialized)
        return;
    for (unsigned g = 0; g < cl->all_groups; g++) {
        if (r->g[g].step || !consensus_leader_ready(cl->node, g))
            continue;
        if (g < cl->groups) {
            const rn_meta_group *gr = &cl->meta.group[g];
            step(r, g, gr->target, gr->n_target, gr->leader);
            continue;
        }
        uint8_t nodes[RN_META_MAX_NODES];
        unsigned n = 0;
        for (unsigned i = 0; i < cl->meta.n_nodes; i++)
            if (rn_meta_node_in_meta_group(&cl->meta, &cl->meta.nodes[i]))
                nodes[n++] = cl->meta.nodes[i].id;
        step(r, g, nodes, n, 0);
    }
}

cluster_reconcile *cluster_reconcile_new(rn_cluster *cl) {
    cluster_reconcile *r = rn_xcalloc(1, sizeof *r);
    r->cl = cl;
    r->g = rn_xcalloc(cl->all_groups, sizeof *r->g);
    uv_timer_init(cl->loop, &r->tick);
    r->tick.data = r;
    uv_timer_start(&r->tick, on_tick, TICK_MS, TICK_MS);
    uv_unref((uv_handle_t *)&r->tick);
    return r;
}

const char *cluster_reconcile_step(const cluster_reconcile *r, unsigned group) {
    return r ? r->g[group].step : NULL;
}

void cluster_reconcile_stop(cluster_reconcile *r) {
    if (!r)
        return;
    uv_timer_stop(&r->tick);
    uv_close((uv_handle_t *)&r->tick, NULL);
}

void cluster_reconcile_free(cluster_reconcile *r) {
    if (!r)
        return;
    free(r->g);
    free(r);
}
