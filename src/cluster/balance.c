/*
 * balance.c — the placement decisions. See balance.h.
 */
#include "cluster/balance.h"

#include <assert.h>
#include <string.h>

/* A tie-breaker that spreads groups over nodes: the same everywhere. */
static uint32_t spread(unsigned g, unsigned id) {
    uint32_t h = (uint32_t)g * 2654435761u ^ (uint32_t)id * 40503u;
    h ^= h >> 15;
    h *= 2246822519u;
    return h ^ (h >> 13);
}

static int active(const rn_meta *m, unsigned id) {
    const rn_meta_node *n = rn_meta_node_get(m, id);
    return n && n->state == RN_NODE_ACTIVE;
}

unsigned rn_balance_replicas(const rn_meta *m) {
    unsigned n = 0;
    for (unsigned i = 0; i < m->n_nodes; i++)
        n += m->nodes[i].state == RN_NODE_ACTIVE;
    unsigned r = m->replicas < n ? m->replicas : n;
    return r ? r : 1;
}

/* Of the ids (n) for which want(id) holds, the one with the fewest counts
 * (ties: spread), or 0. fewest == 0: the most instead. */
static unsigned pick(const uint8_t *ids, unsigned n, const unsigned counts[256], unsigned g,
                     int fewest, const uint8_t *exclude, unsigned n_exclude) {
    unsigned best = 0;
    for (unsigned k = 0; k < n; k++) {
        unsigned id = ids[k];
        int skip = 0;
        for (unsigned e = 0; e < n_exclude; e++)
            skip |= exclude[e] == id;
        if (skip)
            continue;
        if (!best) {
            best = id;
            continue;
        }
        int better = fewest ? counts[id] < counts[best] : counts[id] > counts[best];
        if (better || (counts[id] == counts[best] && spread(g, id) < spread(g, best)))
            best = id;
    }
    return best;
}

void rn_balance_initial(unsigned replicas, unsigned groups, const uint8_t *ids, unsigned n,
                        rn_meta_group *out) {
    assert(n >= 1 && replicas >= 1);
    unsigned r = replicas < n ? replicas : n;
    unsigned held[256] = {0}, led[256] = {0};
    for (unsigned g = 0; g < groups; g++) {
        rn_meta_group *gr = &out[g];
        memset(gr, 0, sizeof *gr);
        for (unsigned k = 0; k < r; k++) {
            unsigned id = pick(ids, n, held, g, 1, gr->target, gr->n_target);
            held[id]++;
            gr->target[gr->n_target++] = (uint8_t)id;
        }
        /* ascending, as the table keeps targets */
        for (unsigned a = 1; a < gr->n_target; a++)
            for (unsigned b = a; b > 0 && gr->target[b - 1] > gr->target[b]; b--) {
                uint8_t t = gr->target[b];
                gr->target[b] = gr->target[b - 1];
                gr->target[b - 1] = t;
            }
        gr->leader = (uint8_t)pick(gr->target, gr->n_target, led, g, 1, NULL, 0);
        led[gr->leader]++;
    }
}

/* ---- replicas ---- */

/* Replicas each node is to hold (over every group's target). */
static void count_replicas(const rn_meta *m, unsigned counts[256]) {
    memset(counts, 0, 256 * sizeof counts[0]);
    for (unsigned g = 0; g < m->groups; g++)
        for (unsigned k = 0; k < m->group[g].n_target; k++)
            counts[m->group[g].target[k]]++;
}

/* The nodes that may take a replica: active and answering. */
static unsigned takers(const rn_meta *m, const uint8_t alive[256], uint8_t *out) {
    unsigned n = 0;
    for (unsigned i = 0; i < m->n_nodes; i++)
        if (m->nodes[i].state == RN_NODE_ACTIVE && alive[m->nodes[i].id])
            out[n++] = m->nodes[i].id;
    return n;
}

/* The group's target with `out_id` (0: none) left out and `in_id` (0:
 * none) added, ascending, into ids. */
static unsigned changed(const rn_meta_group *g, unsigned out_id, unsigned in_id, uint8_t *ids) {
    unsigned n = 0;
    for (unsigned k = 0; k < g->n_target; k++) {
        if (in_id && in_id < g->target[k] && (n == 0 || ids[n - 1] < in_id))
            ids[n++] = (uint8_t)in_id;
        if (g->target[k] != out_id)
            ids[n++] = g->target[k];
    }
    if (in_id && (n == 0 || ids[n - 1] < in_id))
        ids[n++] = (uint8_t)in_id;
    return n;
}

/* The move a group needs for its own sake (a leaving node, too few or too
 * many replicas): 1 with ids/n set, else 0. */
static int repair(const rn_meta *m, unsigned g, unsigned r, const uint8_t *cand, unsigned n_cand,
                  const unsigned counts[256], uint8_t *ids, unsigned *n) {
    const rn_meta_group *gr = &m->group[g];
    unsigned gone = 0;
    for (unsigned k = 0; k < gr->n_target && !gone; k++)
        if (!active(m, gr->target[k]))
            gone = gr->target[k];
    unsigned in = 0, out = 0;
    if (gone) {
        out = gone;
        if (gr->n_target <= r)
            in = pick(cand, n_cand, counts, g, 1, gr->target, gr->n_target);
        if (!in && gr->n_target == 1)
            return 0; /* its last replica stays until another node can take it */
    } else if (gr->n_target < r) {
        in = pick(cand, n_cand, counts, g, 1, gr->target, gr->n_target);
        if (!in)
            return 0;
    } else if (gr->n_target > r) {
        uint8_t keep[1] = {gr->leader};
        out = pick(gr->target, gr->n_target, counts, g, 0, keep, gr->leader ? 1 : 0);
    } else {
        return 0;
    }
    *n = changed(gr, out, in, ids);
    return 1;
}

int rn_balance_move(const rn_meta *m, const uint8_t alive[256], unsigned *group,
                    uint8_t ids[RN_META_MAX_REPLICAS], unsigned *n) {
    if (!m->initialized)
        return 0;
    unsigned r = rn_balance_replicas(m), counts[256];
    uint8_t cand[RN_META_MAX_NODES];
    unsigned n_cand = takers(m, alive, cand);
    count_replicas(m, counts);
    for (unsigned g = 0; g < m->groups; g++) {
        const rn_meta_group *gr = &m->group[g];
        int gone = 0; /* a node that left: replaced even in a move (it may be the one added) */
        for (unsigned k = 0; k < gr->n_target; k++)
            gone |= !active(m, gr->target[k]);
        if ((gone || !rn_meta_group_moving(gr)) && repair(m, g, r, cand, n_cand, counts, ids, n)) {
            *group = g;
            return 1;
        }
    }
    if (n_cand < 2)
        return 0;
    unsigned most = pick(cand, n_cand, counts, 0, 0, NULL, 0);
    unsigned least = pick(cand, n_cand, counts, 0, 1, NULL, 0);
    if (counts[most] < counts[least] + 2)
        return 0;
    /* a group on the most loaded node and not on the least, one it does
     * not lead by preference if there is one */
    int found = -1;
    for (unsigned g = 0; g < m->groups; g++) {
        const rn_meta_group *gr = &m->group[g];
        if (rn_meta_group_moving(gr) || !rn_meta_in_target(gr, most) ||
            rn_meta_in_target(gr, least))
            continue;
        if (found < 0 || (m->group[found].leader == most && gr->leader != most))
            found = (int)g;
    }
    if (found < 0)
        return 0;
    *group = (unsigned)found;
    *n = changed(&m->group[found], most, least, ids);
    return 1;
}

/* ---- leaders ---- */

/* True when node id may lead group g as preferred: a voter of its target
 * and its reported configuration, active, not drained, answering. */
static int may_lead(const rn_meta *m, const uint8_t alive[256], unsigned g, unsigned id) {
    const rn_meta_group *gr = &m->group[g];
    const rn_meta_node *node = rn_meta_node_get(m, id);
    if (!node || node->state != RN_NODE_ACTIVE || node->drained || !alive[id] ||
        !rn_meta_in_target(gr, id))
        return 0;
    for (unsigned k = 0; k < gr->n_members; k++)
        if (gr->members[k].id == id)
            return gr->members[k].role == 2;
    return 0;
}

int rn_balance_leader(const rn_meta *m, const uint8_t alive[256], const uint8_t *leading,
                      unsigned *group, unsigned *leader) {
    if (!m->initialized)
        return 0;
    unsigned led[256] = {0};
    for (unsigned g = 0; g < m->groups; g++)
        led[m->group[g].leader]++;
    led[0] = 0;
    for (unsigned g = 0; g < m->groups; g++) {
        const rn_meta_group *gr = &m->group[g];
        if (gr->leader && may_lead(m, alive, g, gr->leader))
            continue;
        uint8_t eligible[RN_META_MAX_REPLICAS];
        unsigned n = 0;
        for (unsigned k = 0; k < gr->n_target; k++)
            if (may_lead(m, alive, g, gr->target[k]))
                eligible[n++] = gr->target[k];
        unsigned now = leading ? leading[g] : 0;
        unsigned want =
            now && may_lead(m, alive, g, now) ? now : pick(eligible, n, led, g, 1, NULL, 0);
        if (want == gr->leader)
            continue; /* none eligible, and none preferred already */
        if (!want && gr->leader && rn_meta_in_target(gr, gr->leader))
            continue; /* none eligible now (say, all drained): keep the preference */
        *group = g;
        *leader = want;
        return 1;
    }
    /* balance: the eligible nodes with the most and the fewest preferences */
    unsigned most = 0, least = 0;
    for (unsigned i = 0; i < m->n_nodes; i++) {
        const rn_meta_node *node = &m->nodes[i];
        if (node->state != RN_NODE_ACTIVE || node->drained || !alive[node->id])
            continue;
        if (!most || led[node->id] > led[most])
            most = node->id;
        if (!least || led[node->id] < led[least])
            least = node->id;
    }
    if (!most || led[most] < led[least] + 2)
        return 0;
    for (unsigned g = 0; g < m->groups; g++) {
        if (m->group[g].leader == most && may_lead(m, alive, g, least)) {
            *group = g;
            *leader = least;
            return 1;
        }
    }
    return 0;
}
