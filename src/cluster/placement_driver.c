/*
 * placement_driver.c — the metadata group's state machine hooks, its
 * proposals, and the placement driver. See placement_driver.h.
 */
#include "cluster/placement_driver.h"
#include "cluster/balance.h"
#include "cluster/cluster_int.h"
#include "cluster/reconcile.h"

#include <assert.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TICK_MS 500
#define LEADER_CHANGES_PER_TICK 8

struct cluster_driver {
    rn_cluster *cl;
    uv_timer_t tick;
    int proposing; /* a proposal of the driver's is in flight */
};

/* ---- the state machine ---- */

typedef struct {
    unsigned n;
    rn_meta_result results[];
} meta_result;

/* Every node of the table joins the peers table (a node added later is
 * known by its addresses from then on); peers are never dropped. */
static void learn_nodes(rn_cluster *cl) {
    for (unsigned i = 0; i < cl->meta.n_nodes; i++) {
        const rn_meta_node *n = &cl->meta.nodes[i];
        if (cluster_peer(cl, n->id) || cl->cfg.n_peers == RN_MAX_PEERS)
            continue;
        rn_peer_config *p = &cl->cfg.peers[cl->cfg.n_peers++];
        memset(p, 0, sizeof *p);
        p->id = n->id;
        snprintf(p->raft, sizeof p->raft, "%s", n->raft);
        snprintf(p->url, sizeof p->url, "%s", n->url);
        snprintf(p->peer_url, sizeof p->peer_url, "%s", n->peer_url);
        rn_log(RN_LOG_INFO, "cluster_nodes", "node %u (%s, %s) joined the table", n->id, n->raft,
               n->url);
    }
}

void *cluster_meta_apply(rn_cluster *cl, const void *data, size_t len) {
    rn_meta_result results[64];
    int n = rn_meta_apply(&cl->meta, data, len, results, 64);
    unsigned count = n < 0 ? 1 : (unsigned)n;
    if (count > 64)
        count = 64;
    meta_result *r = rn_xmalloc(sizeof *r + count * sizeof r->results[0]);
    r->n = count;
    memcpy(r->results, results, count * sizeof results[0]);
    if (n < 0)
        rn_log(RN_LOG_WARN, "cluster_meta", "an entry of the metadata group was refused (%s)",
               rn_meta_result_name(results[0]));
    learn_nodes(cl);
    return r;
}

void cluster_meta_free_result(void *result) {
    free(result);
}

int cluster_meta_snapshot(rn_cluster *cl, void **out, size_t *len) {
    rn_buf b = {0};
    rn_meta_snapshot(&cl->meta, &b);
    *out = rn_buf_steal(&b, len);
    return 0;
}

int cluster_meta_restore(rn_cluster *cl, const void *data, size_t len) {
    if (rn_meta_restore(&cl->meta, data, len) != 0) {
        rn_log(RN_LOG_ERROR, "cluster_meta", "the metadata group's snapshot does not decode");
        return -1;
    }
    learn_nodes(cl);
    return 0;
}

/* ---- proposals ---- */

typedef struct {
    cluster_meta_cb cb;
    void *arg;
} proposal;

static void proposed(void *arg, consensus_status st, uint64_t index, void *result) {
    (void)index;
    proposal *p = arg;
    meta_result *r = result;
    p->cb(p->arg, st, r ? r->results : NULL, r ? r->n : 0);
    free(r);
    free(p);
}

void cluster_meta_propose(rn_cluster *cl, const rn_buf *entry, cluster_meta_cb cb, void *arg) {
    assert(entry->len > 0 && cb);
    proposal *p = rn_xmalloc(sizeof *p);
    *p = (proposal){cb, arg};
    if (!cl->node) {
        proposed(p, CONSENSUS_NOT_PROPOSED, 0, NULL);
        return;
    }
    consensus_propose(cl->node, cl->groups, entry->data, entry->len, proposed, p);
}

/* ---- the driver ---- */

static void driven(void *arg, consensus_status st, const rn_meta_result *results, unsigned n) {
    cluster_driver *d = arg;
    d->proposing = 0;
    for (unsigned k = 0; st == CONSENSUS_OK && k < n; k++)
        if (results[k] != RN_META_OK && results[k] != RN_META_UNCHANGED &&
            results[k] != RN_META_STALE)
            rn_log(RN_LOG_WARN, "cluster_placement", "a placement change was refused (%s)",
                   rn_meta_result_name(results[k]));
}

/* The --peer nodes, all active, ascending by id, into nodes; returns how
 * many. */
static unsigned first_nodes(const rn_cluster *cl, rn_meta_node *nodes) {
    unsigned n = 0;
    for (int i = 0; i < cl->cfg.n_peers && n < RN_META_MAX_NODES; i++) {
        const rn_peer_config *p = &cl->cfg.peers[i];
        rn_meta_node node = {.id = (uint8_t)p->id, .state = RN_NODE_ACTIVE};
        snprintf(node.raft, sizeof node.raft, "%s", p->raft);
        snprintf(node.url, sizeof node.url, "%s", p->url);
        snprintf(node.peer_url, sizeof node.peer_url, "%s", p->peer_url);
        unsigned at = n++;
        for (; at > 0 && nodes[at - 1].id > node.id; at--)
            nodes[at] = nodes[at - 1];
        nodes[at] = node;
    }
    return n;
}

void cluster_first_placement(const rn_cluster *cl, rn_meta_group *groups) {
    rn_meta_node nodes[RN_META_MAX_NODES];
    uint8_t ids[RN_META_MAX_NODES];
    unsigned n = first_nodes(cl, nodes);
    for (unsigned i = 0; i < n; i++)
        ids[i] = nodes[i].id;
    rn_balance_initial((unsigned)cl->cfg.replicas, cl->groups, ids, n, groups);
}

/* The table of a new cluster: the --peer nodes, all active, and the first
 * placement. */
static void make_table(rn_cluster *cl, rn_buf *out) {
    rn_meta_node nodes[RN_META_MAX_NODES];
    unsigned n = first_nodes(cl, nodes);
    rn_meta_group *groups = rn_xcalloc(cl->groups, sizeof *groups);
    cluster_first_placement(cl, groups);
    rn_meta_cmd_init(out, (unsigned)cl->cfg.replicas, cl->groups, nodes, n, groups);
    free(groups);
    rn_log(RN_LOG_INFO, "cluster_placement",
           "making the cluster's table: %u nodes, %u groups, %u replicas each", n, cl->groups,
           (unsigned)cl->cfg.replicas < n ? (unsigned)cl->cfg.replicas : n);
}

/* The configurations leaders reported (committed) that the table lacks. */
static void record_configs(rn_cluster *cl, rn_buf *out) {
    for (unsigned g = 0; g < cl->groups; g++) {
        const led_config *lc = &cl->led[g];
        const rn_meta_group *gr = &cl->meta.group[g];
        if (!lc->n || lc->term < gr->members_term)
            continue;
        if (lc->n == gr->n_members &&
            memcmp(lc->members, gr->members, lc->n * sizeof lc->members[0]) == 0)
            continue;
        rn_meta_cmd_group_members(out, g, lc->term, lc->members, lc->n);
    }
}

/* True when node id is in the metadata group's configuration as this
 * node (its leader) knows it, or a change of that configuration is in
 * flight: only once a change committed does it lack a node for good. */
static int in_meta_configuration(const rn_cluster *cl, unsigned id) {
    if (cluster_reconcile_step(cl->reconcile, cl->groups))
        return 1;
    consensus_member members[RN_META_MAX_NODES + 1];
    unsigned n = consensus_members(cl->node, cl->groups, members, RN_META_MAX_NODES + 1);
    for (unsigned k = 0; k < n; k++)
        if (members[k].id == id)
            return 1;
    return 0;
}

/* A leaving node is removed once no data group names it and it left the
 * metadata group's configuration too (reconcile.c takes it out when no
 * data group names it): "removed" in the report then means it no longer
 * counts toward any majority. */
static void remove_left_nodes(rn_cluster *cl, rn_buf *out) {
    for (unsigned i = 0; i < cl->meta.n_nodes; i++) {
        const rn_meta_node *n = &cl->meta.nodes[i];
        if (n->state != RN_NODE_LEAVING || rn_meta_node_used(&cl->meta, n->id) ||
            in_meta_configuration(cl, n->id))
            continue;
        rn_meta_cmd_node_state(out, n->id, RN_NODE_REMOVED);
        rn_log(RN_LOG_INFO, "cluster_placement",
               "node %u holds no replica and left the metadata group: removed", n->id);
    }
}

static void move_one(rn_cluster *cl, const uint8_t alive[256], rn_buf *out) {
    unsigned moving = 0;
    for (unsigned g = 0; g < cl->groups; g++)
        moving += rn_meta_group_moving(&cl->meta.group[g]);
    unsigned g, n;
    uint8_t ids[RN_META_MAX_REPLICAS];
    if (!rn_balance_move(&cl->meta, alive, &g, ids, &n))
        return;
    /* a group already moving is changed only to take a node out that left */
    if (moving >= MOVES_AT_ONCE && !rn_meta_group_moving(&cl->meta.group[g]))
        return;
    rn_meta_cmd_group_target(out, g, cl->meta.group[g].epoch, ids, n);
    char list[64] = "";
    for (unsigned k = 0, at = 0; k < n && at < sizeof list - 5; k++)
        at += (unsigned)snprintf(list + at, sizeof list - at, k ? ",%u" : "%u", ids[k]);
    rn_log(RN_LOG_INFO, "cluster_placement", "group %u: to be on nodes %s", g, list);
}

static void move_leaders(rn_cluster *cl, const uint8_t alive[256], rn_buf *out) {
    rn_meta scratch = cl->meta; /* shallow: only the groups are changed, on a copy */
    scratch.group = rn_xmalloc(cl->groups * sizeof *scratch.group);
    memcpy(scratch.group, cl->meta.group, cl->groups * sizeof *scratch.group);
    uint8_t *leading = rn_xcalloc(cl->groups, 1); /* as the groups' leaders report it */
    for (unsigned g = 0; g < cl->groups; g++) {
        uint64_t term, id = cluster_leader_of(cl, g, &term);
        leading[g] = id < 256 ? (uint8_t)id : 0;
    }
    unsigned g, leader;
    for (int k = 0;
         k < LEADER_CHANGES_PER_TICK && rn_balance_leader(&scratch, alive, leading, &g, &leader);
         k++) {
        scratch.group[g].leader = (uint8_t)leader;
        rn_meta_cmd_group_leader(out, g, leader);
    }
    free(leading);
    free(scratch.group);
}

static void on_tick(uv_timer_t *t) {
    cluster_driver *d = t->data;
    rn_cluster *cl = d->cl;
    if (d->proposing || !cl->node || !consensus_leader_ready(cl->node, cl->groups))
        return;
    rn_buf entry = {0};
    if (!cl->meta.initialized) {
        if (!cl->cfg.join)
            make_table(cl, &entry);
    } else {
        uint8_t alive[256];
        cluster_alive(cl, alive);
        record_configs(cl, &entry);
        remove_left_nodes(cl, &entry);
        move_one(cl, alive, &entry);
        move_leaders(cl, alive, &entry);
    }
    if (entry.len) {
        d->proposing = 1;
        cluster_meta_propose(cl, &entry, driven, d);
    }
    rn_buf_free(&entry);
}

cluster_driver *cluster_driver_new(rn_cluster *cl) {
    cluster_driver *d = rn_xcalloc(1, sizeof *d);
    d->cl = cl;
    uv_timer_init(cl->loop, &d->tick);
    d->tick.data = d;
    uv_timer_start(&d->tick, on_tick, TICK_MS, TICK_MS);
    uv_unref((uv_handle_t *)&d->tick);
    return d;
}

void cluster_driver_stop(cluster_driver *d) {
    if (!d)
        return;
    uv_timer_stop(&d->tick);
    uv_close((uv_handle_t *)&d->tick, NULL);
}

void cluster_driver_free(cluster_driver *d) {
    free(d);
}
