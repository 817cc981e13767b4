/*
 * meta.c — the metadata state machine: its commands, their apply, and its
 * snapshot. See meta.h.
 */
#include "cluster/meta.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#define SNAPSHOT_VERSION 1

const char *rn_meta_result_name(rn_meta_result r) {
    static const char *const names[] = {"ok",      "unchanged",    "malformed",  "uninitialized",
                                        "already", "unknown_node", "conflict",   "removed",
                                        "full",    "stale",        "not_allowed"};
    return (unsigned)r < sizeof names / sizeof names[0] ? names[r] : "?";
}

void rn_meta_init_empty(rn_meta *m) {
    memset(m, 0, sizeof *m);
}

void rn_meta_free(rn_meta *m) {
    free(m->group);
    memset(m, 0, sizeof *m);
}

static rn_meta_node *node_mut(rn_meta *m, unsigned id) {
    for (unsigned i = 0; i < m->n_nodes; i++)
        if (m->nodes[i].id == id)
            return &m->nodes[i];
    return NULL;
}

const rn_meta_node *rn_meta_node_get(const rn_meta *m, unsigned id) {
    return node_mut((rn_meta *)m, id);
}

int rn_meta_in_target(const rn_meta_group *g, unsigned id) {
    for (unsigned k = 0; k < g->n_target; k++)
        if (g->target[k] == id)
            return 1;
    return 0;
}

int rn_meta_in_members(const rn_meta_group *g, unsigned id) {
    for (unsigned k = 0; k < g->n_members; k++)
        if (g->members[k].id == id)
            return 1;
    return 0;
}

int rn_meta_group_moving(const rn_meta_group *g) {
    unsigned voters = 0;
    for (unsigned k = 0; k < g->n_members; k++) {
        if (g->members[k].role != 2 || !rn_meta_in_target(g, g->members[k].id))
            return 1;
        voters++;
    }
    return voters != g->n_target;
}

/* ---- encoding ---- */

static void put_node(rn_buf *out, const rn_meta_node *n) {
    rn_buf_append_u8(out, n->id);
    rn_buf_append_u8(out, n->state);
    rn_buf_append_u8(out, n->drained);
    rn_buf_append_lstr(out, n->raft, strlen(n->raft));
    rn_buf_append_lstr(out, n->url, strlen(n->url));
    rn_buf_append_lstr(out, n->peer_url, strlen(n->peer_url));
}

/* A string of min..cap-1 bytes without NUL into out (terminated). */
static int get_str_min(rn_reader *r, char *out, size_t cap, size_t min) {
    size_t len = 0;
    const uint8_t *s = rn_read_lstr(r, &len);
    if (!s || len < min || len >= cap || memchr(s, 0, len))
        return -1;
    memcpy(out, s, len);
    out[len] = 0;
    return 0;
}

static int get_str(rn_reader *r, char *out, size_t cap) {
    return get_str_min(r, out, cap, 1);
}

static int get_node(rn_reader *r, rn_meta_node *n) {
    memset(n, 0, sizeof *n);
    n->id = rn_read_u8(r);
    n->state = rn_read_u8(r);
    n->drained = rn_read_u8(r);
    if (r->failed || get_str(r, n->raft, sizeof n->raft) || get_str(r, n->url, sizeof n->url) ||
        get_str_min(r, n->peer_url, sizeof n->peer_url, 0))
        return -1;
    return n->id && n->state >= RN_NODE_ACTIVE && n->state <= RN_NODE_REMOVED && n->drained <= 1
               ? 0
               : -1;
}

/* ids (n of them, strictly ascending, each nonzero) */
static void put_ids(rn_buf *out, const uint8_t *ids, unsigned n) {
    rn_buf_append_u8(out, (uint8_t)n);
    rn_buf_append(out, ids, n);
}

static int get_ids(rn_reader *r, uint8_t *ids, uint8_t *n, unsigned cap) {
    unsigned count = rn_read_u8(r);
    const uint8_t *b = count <= cap ? rn_read_bytes(r, count) : NULL;
    if (!b)
        return -1;
    for (unsigned k = 0; k < count; k++)
        if (b[k] == 0 || (k && b[k] <= b[k - 1]))
            return -1;
    memcpy(ids, b, count);
    *n = (uint8_t)count;
    return 0;
}

static void put_members(rn_buf *out, const rn_meta_member *mem, unsigned n) {
    rn_buf_append_u8(out, (uint8_t)n);
    for (unsigned k = 0; k < n; k++) {
        rn_buf_append_u8(out, mem[k].id);
        rn_buf_append_u8(out, mem[k].role);
    }
}

static int get_members(rn_reader *r, rn_meta_member *mem, uint8_t *n) {
    unsigned count = rn_read_u8(r);
    if (count > RN_META_MAX_NODES)
        return -1;
    for (unsigned k = 0; k < count; k++) {
        mem[k].id = rn_read_u8(r);
        mem[k].role = rn_read_u8(r);
        if (r->failed || !mem[k].id || mem[k].role > 2 || (k && mem[k].id <= mem[k - 1].id))
            return -1;
    }
    *n = (uint8_t)count;
    return r->failed ? -1 : 0;
}

void rn_meta_cmd_init(rn_buf *out, unsigned replicas, unsigned groups, const rn_meta_node *nodes,
                      unsigned n, const rn_meta_group *group) {
    assert(replicas >= 1 && replicas <= RN_META_MAX_REPLICAS && n <= RN_META_MAX_NODES);
    rn_buf_append_u8(out, RN_META_INIT);
    rn_buf_append_u8(out, (uint8_t)replicas);
    rn_buf_append_u32(out, groups);
    rn_buf_append_u8(out, (uint8_t)n);
    for (unsigned i = 0; i < n; i++)
        put_node(out, &nodes[i]);
    for (unsigned g = 0; g < groups; g++) {
        put_ids(out, group[g].target, group[g].n_target);
        rn_buf_append_u8(out, group[g].leader);
    }
}

void rn_meta_cmd_node_add(rn_buf *out, unsigned id, const char *raft, const char *url,
                          const char *peer_url) {
    assert(id >= 1 && id <= 255);
    rn_buf_append_u8(out, RN_META_NODE_ADD);
    rn_buf_append_u8(out, (uint8_t)id);
    rn_buf_append_lstr(out, raft, strlen(raft));
    rn_buf_append_lstr(out, url, strlen(url));
    rn_buf_append_lstr(out, peer_url, strlen(peer_url));
}

void rn_meta_cmd_node_state(rn_buf *out, unsigned id, rn_node_state state) {
    rn_buf_append_u8(out, RN_META_NODE_STATE);
    rn_buf_append_u8(out, (uint8_t)id);
    rn_buf_append_u8(out, (uint8_t)state);
}

void rn_meta_cmd_node_drain(rn_buf *out, unsigned id, int drained) {
    rn_buf_append_u8(out, RN_META_NODE_DRAIN);
    rn_buf_append_u8(out, (uint8_t)id);
    rn_buf_append_u8(out, drained ? 1 : 0);
}

void rn_meta_cmd_group_target(rn_buf *out, unsigned group, uint32_t epoch, const uint8_t *ids,
                              unsigned n) {
    rn_buf_append_u8(out, RN_META_GROUP_TARGET);
    rn_buf_append_u32(out, group);
    rn_buf_append_u32(out, epoch);
    put_ids(out, ids, n);
}

void rn_meta_cmd_group_leader(rn_buf *out, unsigned group, unsigned id) {
    rn_buf_append_u8(out, RN_META_GROUP_LEADER);
    rn_buf_append_u32(out, group);
    rn_buf_append_u8(out, (uint8_t)id);
}

void rn_meta_cmd_group_members(rn_buf *out, unsigned group, uint64_t term,
                               const rn_meta_member *members, unsigned n) {
    rn_buf_append_u8(out, RN_META_GROUP_MEMBERS);
    rn_buf_append_u32(out, group);
    rn_buf_append_u64(out, term);
    put_members(out, members, n);
}

/* ---- apply ---- */

/* True when every id names a node that takes replicas. */
static int all_active(const rn_meta *m, const uint8_t *ids, unsigned n) {
    for (unsigned k = 0; k < n; k++) {
        const rn_meta_node *node = rn_meta_node_get(m, ids[k]);
        if (!node || node->state != RN_NODE_ACTIVE)
            return 0;
    }
    return 1;
}

static rn_meta_result apply_init(rn_meta *m, rn_reader *r) {
    unsigned replicas = rn_read_u8(r), groups = rn_read_u32(r), n = rn_read_u8(r);
    if (r->failed || replicas < 1 || replicas > RN_META_MAX_REPLICAS || groups < 1 ||
        groups > 256 || n < 1 || n > RN_META_MAX_NODES)
        return RN_META_MALFORMED;
    rn_meta next = {.initialized = 1, .replicas = replicas, .groups = groups, .n_nodes = n};
    for (unsigned i = 0; i < n; i++)
        if (get_node(r, &next.nodes[i]) || next.nodes[i].state != RN_NODE_ACTIVE ||
            (i && next.nodes[i].id <= next.nodes[i - 1].id))
            return RN_META_MALFORMED;
    next.group = calloc(groups, sizeof *next.group);
    if (!next.group)
        abort();
    for (unsigned g = 0; g < groups; g++) {
        rn_meta_group *gr = &next.group[g];
        if (get_ids(r, gr->target, &gr->n_target, RN_META_MAX_REPLICAS) || gr->n_target == 0 ||
            !all_active(&next, gr->target, gr->n_target)) {
            free(next.group);
            return RN_META_MALFORMED;
        }
        gr->leader = rn_read_u8(r);
        gr->n_members = gr->n_target;
        for (unsigned k = 0; k < gr->n_target; k++)
            gr->members[k] = (rn_meta_member){gr->target[k], 2};
    }
    if (r->failed) {
        free(next.group);
        return RN_META_MALFORMED;
    }
    if (m->initialized) {
        free(next.group);
        return RN_META_ALREADY;
    }
    next.changes = m->changes;
    *m = next;
    return RN_META_OK;
}

/* Inserts a node, keeping the table ascending by id. */
static rn_meta_result insert_node(rn_meta *m, const rn_meta_node *n) {
    if (m->n_nodes == RN_META_MAX_NODES)
        return RN_META_FULL;
    unsigned at = 0;
    while (at < m->n_nodes && m->nodes[at].id < n->id)
        at++;
    memmove(&m->nodes[at + 1], &m->nodes[at], (m->n_nodes - at) * sizeof m->nodes[0]);
    m->nodes[at] = *n;
    m->n_nodes++;
    return RN_META_OK;
}

static rn_meta_result apply_node_add(rn_meta *m, rn_reader *r) {
    rn_meta_node n = {.id = rn_read_u8(r), .state = RN_NODE_ACTIVE};
    if (r->failed || !n.id || get_str(r, n.raft, sizeof n.raft) ||
        get_str(r, n.url, sizeof n.url) || get_str_min(r, n.peer_url, sizeof n.peer_url, 0))
        return RN_META_MALFORMED;
    rn_meta_node *known = node_mut(m, n.id);
    if (known) {
        if (strcmp(known->raft, n.raft) != 0 || strcmp(known->url, n.url) != 0 ||
            strcmp(known->peer_url, n.peer_url) != 0)
            return RN_META_CONFLICT;
        if (known->state == RN_NODE_REMOVED)
            return RN_META_NODE_REMOVED;
        if (known->state == RN_NODE_ACTIVE)
            return RN_META_UNCHANGED;
        known->state = RN_NODE_ACTIVE; /* a decommission taken back */
        return RN_META_OK;
    }
    for (unsigned i = 0; i < m->n_nodes; i++) /* a removed node's addresses may be reused */
        if (m->nodes[i].state != RN_NODE_REMOVED &&
            (strcmp(m->nodes[i].raft, n.raft) == 0 || strcmp(m->nodes[i].url, n.url) == 0 ||
             (n.peer_url[0] && strcmp(m->nodes[i].peer_url, n.peer_url) == 0)))
            return RN_META_CONFLICT;
    return insert_node(m, &n);
}

int rn_meta_node_used(const rn_meta *m, unsigned id) {
    for (unsigned g = 0; g < m->groups; g++)
        if (rn_meta_in_target(&m->group[g], id) || rn_meta_in_members(&m->group[g], id))
            return 1;
    return 0;
}

int rn_meta_node_in_meta_group(const rn_meta *m, const rn_meta_node *n) {
    return n->state == RN_NODE_ACTIVE ||
           (n->state == RN_NODE_LEAVING && rn_meta_node_used(m, n->id));
}

static rn_meta_result apply_node_state(rn_meta *m, rn_reader *r) {
    unsigned id = rn_read_u8(r), state = rn_read_u8(r);
    if (r->failed || (state != RN_NODE_LEAVING && state != RN_NODE_REMOVED))
        return RN_META_MALFORMED;
    rn_meta_node *n = node_mut(m, id);
    if (!n)
        return RN_META_UNKNOWN_NODE;
    if (n->state == RN_NODE_REMOVED)
        return state == RN_NODE_REMOVED ? RN_META_UNCHANGED : RN_META_NODE_REMOVED;
    if (n->state == state)
        return RN_META_UNCHANGED;
    if (state == RN_NODE_REMOVED && (n->state != RN_NODE_LEAVING || rn_meta_node_used(m, id)))
        return RN_META_NOT_ALLOWED;
    n->state = (uint8_t)state;
    return RN_META_OK;
}

static rn_meta_result apply_node_drain(rn_meta *m, rn_reader *r) {
    unsigned id = rn_read_u8(r), drained = rn_read_u8(r);
    if (r->failed || drained > 1)
        return RN_META_MALFORMED;
    rn_meta_node *n = node_mut(m, id);
    if (!n)
        return RN_META_UNKNOWN_NODE;
    if (n->state == RN_NODE_REMOVED)
        return RN_META_NODE_REMOVED;
    if (n->drained == drained)
        return RN_META_UNCHANGED;
    n->drained = (uint8_t)drained;
    return RN_META_OK;
}

/* The group a command names, or NULL (reader failed or out of range). */
static rn_meta_group *group_of(rn_meta *m, rn_reader *r) {
    uint32_t g = rn_read_u32(r);
    return r->failed || g >= m->groups ? NULL : &m->group[g];
}

static rn_meta_result apply_group_target(rn_meta *m, rn_reader *r) {
    rn_meta_group *g = group_of(m, r);
    uint32_t epoch = rn_read_u32(r);
    uint8_t ids[RN_META_MAX_REPLICAS], n = 0;
    if (!g || r->failed || get_ids(r, ids, &n, RN_META_MAX_REPLICAS) || n == 0)
        return RN_META_MALFORMED;
    if (epoch != g->epoch)
        return RN_META_STALE;
    for (unsigned k = 0; k < n; k++) /* a node may stay while it leaves, none may come */
        if (!rn_meta_in_target(g, ids[k]) && !all_active(m, &ids[k], 1))
            return RN_META_NOT_ALLOWED;
    if (n == g->n_target && memcmp(ids, g->target, n) == 0)
        return RN_META_UNCHANGED;
    memcpy(g->target, ids, n);
    g->n_target = n;
    g->epoch++;
    if (g->leader && !rn_meta_in_target(g, g->leader))
        g->leader = 0;
    return RN_META_OK;
}

static rn_meta_result apply_group_leader(rn_meta *m, rn_reader *r) {
    rn_meta_group *g = group_of(m, r);
    unsigned id = rn_read_u8(r);
    if (!g || r->failed)
        return RN_META_MALFORMED;
    if (id && !rn_meta_in_target(g, id))
        return RN_META_NOT_ALLOWED;
    if (g->leader == id)
        return RN_META_UNCHANGED;
    g->leader = (uint8_t)id;
    return RN_META_OK;
}

static rn_meta_result apply_group_members(rn_meta *m, rn_reader *r) {
    rn_meta_group *g = group_of(m, r);
    uint64_t term = rn_read_u64(r);
    rn_meta_member mem[RN_META_MAX_NODES];
    uint8_t n = 0;
    if (!g || r->failed || get_members(r, mem, &n) || n == 0)
        return RN_META_MALFORMED;
    if (term < g->members_term)
        return RN_META_STALE;
    int same = n == g->n_members && memcmp(mem, g->members, n * sizeof mem[0]) == 0;
    g->members_term = term;
    if (same)
        return RN_META_UNCHANGED;
    memcpy(g->members, mem, n * sizeof mem[0]);
    g->n_members = n;
    return RN_META_OK;
}

static rn_meta_result apply_one(rn_meta *m, rn_reader *r) {
    unsigned kind = rn_read_u8(r);
    if (r->failed)
        return RN_META_MALFORMED;
    if (kind == RN_META_INIT)
        return apply_init(m, r);
    if (!m->initialized)
        return RN_META_UNINITIALIZED;
    switch (kind) {
    case RN_META_NODE_ADD:
        return apply_node_add(m, r);
    case RN_META_NODE_STATE:
        return apply_node_state(m, r);
    case RN_META_NODE_DRAIN:
        return apply_node_drain(m, r);
    case RN_META_GROUP_TARGET:
        return apply_group_target(m, r);
    case RN_META_GROUP_LEADER:
        return apply_group_leader(m, r);
    case RN_META_GROUP_MEMBERS:
        return apply_group_members(m, r);
    default:
        return RN_META_MALFORMED;
    }
}

int rn_meta_apply(rn_meta *m, const void *entry, size_t len, rn_meta_result *results,
                  unsigned cap) {
    rn_reader r;
    rn_reader_init(&r, entry, len);
    unsigned n = 0;
    while (r.p < r.end) {
        rn_meta_result res = apply_one(m, &r);
        if (res == RN_META_OK)
            m->changes++;
        for (unsigned k = n;
             k < cap && (k == n || res == RN_META_MALFORMED || res == RN_META_UNINITIALIZED); k++)
            results[k] = res; /* an entry that stops here: the rest share its result */
        n++;
        if (res == RN_META_MALFORMED || res == RN_META_UNINITIALIZED)
            return -1; /* the reader is not at the next command: stop */
    }
    return (int)n;
}

/* ---- snapshot ---- */

void rn_meta_snapshot(const rn_meta *m, rn_buf *out) {
    rn_buf_append_u8(out, SNAPSHOT_VERSION);
    rn_buf_append_u8(out, (uint8_t)m->initialized);
    rn_buf_append_u64(out, m->changes);
    if (!m->initialized)
        return;
    rn_buf_append_u8(out, (uint8_t)m->replicas);
    rn_buf_append_u32(out, m->groups);
    rn_buf_append_u8(out, (uint8_t)m->n_nodes);
    for (unsigned i = 0; i < m->n_nodes; i++)
        put_node(out, &m->nodes[i]);
    for (unsigned g = 0; g < m->groups; g++) {
        const rn_meta_group *gr = &m->group[g];
        rn_buf_append_u32(out, gr->epoch);
        put_ids(out, gr->target, gr->n_target);
        rn_buf_append_u8(out, gr->leader);
        rn_buf_append_u64(out, gr->members_term);
        put_members(out, gr->members, gr->n_members);
    }
}

int rn_meta_restore(rn_meta *m, const void *data, size_t len) {
    rn_reader r;
    rn_reader_init(&r, data, len);
    rn_meta next;
    rn_meta_init_empty(&next);
    unsigned version = rn_read_u8(&r);
    next.initialized = rn_read_u8(&r);
    next.changes = rn_read_u64(&r);
    if (r.failed || version != SNAPSHOT_VERSION || next.initialized > 1)
        return -1;
    if (next.initialized) {
        next.replicas = rn_read_u8(&r);
        next.groups = rn_read_u32(&r);
        next.n_nodes = rn_read_u8(&r);
        if (r.failed || next.replicas < 1 || next.replicas > RN_META_MAX_REPLICAS ||
            next.groups < 1 || next.groups > 256 || next.n_nodes > RN_META_MAX_NODES)
            return -1;
        for (unsigned i = 0; i < next.n_nodes; i++)
            if (get_node(&r, &next.nodes[i]) || (i && next.nodes[i].id <= next.nodes[i - 1].id))
                return -1;
        next.group = calloc(next.groups, sizeof *next.group);
        if (!next.group)
            abort();
        for (unsigned g = 0; g < next.groups; g++) {
            rn_meta_group *gr = &next.group[g];
            gr->epoch = rn_read_u32(&r);
            int bad = get_ids(&r, gr->target, &gr->n_target, RN_META_MAX_REPLICAS);
            gr->leader = rn_read_u8(&r);
            gr->members_term = rn_read_u64(&r);
            if (bad || r.failed || get_members(&r, gr->members, &gr->n_members)) {
                free(next.group);
                return -1;
            }
        }
    }
    if (r.failed || r.p != r.end) {
        free(next.group);
        return -1;
    }
    rn_meta_free(m);
    *m = next;
    return 0;
}
