/*
 * admin_cluster.c — the operator's plane in cluster mode: an answer that
 * covers the whole cluster, from the local answers (admin_int.h) of the
 * nodes that lead the groups, and of every node for what each node holds
 * alone (its request counters, live readers and subscriptions).
 *
 * A query finds each group's leader as this node knows it and asks every
 * node that leads some of the groups it needs, once, for those groups
 * (GET or POST of the same route with scope=local&groups=...), over the
 * cluster's signed peer requests; this node answers its own part without a
 * request. A group without a known leader, a node that does not answer in
 * ASK_TIMEOUT_MS, and a group a node no longer leads are named in the
 * answer's unreachable_groups (and unreachable_nodes). Pages merge by key
 * and the merged page is cut at `limit`: a node's page that says more holds
 * exactly `limit` distinct keys, all at or below its last, so the first
 * `limit` keys of the merge are too, and no entry of that node between
 * them is skipped. Memory is at most a page per node.
 *
 * A purge records the fence in every group's log: each leader logs a FENCE
 * for each group it leads (rn_engine_fence) before it answers its part.
 */
#include "ops/admin_int.h"
#include "cluster/cluster.h"
#include "protocol/reply.h"
#include "util/topk.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ASK_TIMEOUT_MS 5000
#define ANSWER_CAP (16u << 20)

/* ---- merging ---- */

static void merge_value(json_t *into, const char *key, const json_t *v);

static void merge_object(json_t *a, const json_t *b) {
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)b, k, v) {
        merge_value(a, k, v);
    }
}

/* a[key] += v: numbers summed, true wins, arrays joined, objects merged,
 * null replaced, strings kept. */
static void merge_value(json_t *into, const char *key, const json_t *v) {
    json_t *have = json_object_get(into, key);
    if (!have || json_is_null(have)) {
        json_object_set_new(into, key, json_deep_copy(v));
    } else if (json_is_integer(have) && json_is_integer(v)) {
        json_object_set_new(into, key,
                            json_integer(json_integer_value(have) + json_integer_value(v)));
    } else if (json_is_boolean(have) && json_is_true(v)) {
        json_object_set_new(into, key, json_true());
    } else if (json_is_array(have) && json_is_array(v)) {
        size_t i;
        json_t *e;
        json_array_foreach((json_t *)v, i, e) {
            json_array_append_new(have, json_deep_copy(e));
        }
    } else if (json_is_object(have) && json_is_object(v)) {
        merge_object(have, v);
    }
}

/* Two pages in key order into one: an entry both hold is merged. */
static json_t *merge_pages(const admin_query *q, const json_t *a, const json_t *b) {
    json_t *out = json_array();
    size_t i = 0, j = 0, na = json_array_size(a), nb = json_array_size(b);
    char ka[2 * ADMIN_NAME_MAX + 8], kb[2 * ADMIN_NAME_MAX + 8];
    while (i < na || j < nb) {
        int c;
        if (i == na)
            c = 1;
        else if (j == nb)
            c = -1;
        else {
            size_t la = admin_item_key(q, json_array_get(a, i), ka, sizeof ka);
            size_t lb = admin_item_key(q, json_array_get(b, j), kb, sizeof kb);
            c = rn_topk_cmp(ka, la, kb, lb);
        }
        if (c < 0) {
            json_array_append_new(out, json_deep_copy(json_array_get(a, i++)));
        } else if (c > 0) {
            json_array_append_new(out, json_deep_copy(json_array_get(b, j++)));
        } else {
            json_t *m = json_deep_copy(json_array_get(a, i++));
            merge_object(m, json_array_get(b, j++));
            json_array_append_new(out, m);
        }
    }
    return out;
}

void admin_merge(const admin_query *q, json_t *a, const json_t *b) {
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)b, k, v) {
        if (strcmp(k, "items") == 0 && json_is_array(json_object_get(a, "items")))
            json_object_set_new(a, "items", merge_pages(q, json_object_get(a, "items"), v));
        else if (strcmp(k, "node") != 0 && strcmp(k, "not_leading") != 0)
            merge_value(a, k, v);
    }
}

/* ---- a node's part: the local answer over the groups it leads ---- */

typedef void (*part_fn)(void *arg, json_t *local);

typedef struct {
    rn_admin_plane *a;
    admin_query q;
    admin_scope scope;
    json_t *not_leading;
    unsigned fencing; /* FENCEs not answered yet */
    part_fn done;
    void *arg;
} part_job;

static void part_answered(void *arg, json_t *local) {
    part_job *j = arg;
    if (local) {
        json_object_set_new(local, "node",
                            json_integer((json_int_t)rn_cluster_self(j->a->cfg.cluster)));
        json_object_set_new(local, "not_leading", j->not_leading);
    } else { /* the server stops */
        json_decref(j->not_leading);
    }
    j->done(j->arg, local);
    free(j);
}

static void part_finish(part_job *j) {
    admin_local(j->a, &j->q, &j->scope, part_answered, j);
}

typedef struct {
    part_job *job;
    unsigned group;
} fence_wait;

static void part_fenced(void *arg, rn_result r) {
    fence_wait *w = arg;
    part_job *j = w->job;
    if (r != RN_OK_FENCED) { /* not recorded here: the caller names the group */
        j->scope.groups[w->group >> 3] &= (uint8_t) ~(1u << (w->group & 7));
        json_array_append_new(j->not_leading, json_integer(w->group));
    }
    free(w);
    if (--j->fencing == 0)
        part_finish(j);
}

/* Computes this node's part of q for `groups` (a bitmap): the groups it
 * leads among them (a purge: each fenced first), then done(arg, local)
 * (local NULL: the server stops first). */
static void part_start(rn_admin_plane *a, const admin_query *q, const uint8_t groups[32],
                       part_fn done, void *arg) {
    part_job *j = rn_xcalloc(1, sizeof *j);
    j->a = a;
    j->q = *q;
    j->not_leading = json_array();
    j->done = done;
    j->arg = arg;
    unsigned n = rn_cluster_groups(a->cfg.cluster);
    for (unsigned g = 0; g < n; g++) {
        if (!admin_group_in(groups, g))
            continue;
        uint64_t term;
        int leading;
        rn_cluster_group_leader(a->cfg.cluster, g, &term, &leading);
        if (leading)
            admin_group_add(j->scope.groups, g);
        else
            json_array_append_new(j->not_leading, json_integer(g));
    }
    j->fencing = 1; /* held until every FENCE was started */
    for (unsigned g = 0; q->kind == ADMIN_PURGE && g < n; g++) {
        if (!admin_scope_has(&j->scope, g))
            continue;
        fence_wait *w = rn_xcalloc(1, sizeof *w);
        *w = (fence_wait){.job = j, .group = g};
        j->fencing++;
        rn_engine_fence(a->cfg.engine, q->bucket, q->bucket_len, (int)g, part_fenced, w);
    }
    if (--j->fencing == 0)
        part_finish(j);
}

/* A peer's scope=local ask answered with this node's part. */
typedef struct {
    rn_request *req;
} peer_wait;

static void peer_part_done(void *arg, json_t *local) {
    rn_request *req = arg;
    if (local && !rn_request_gone(req)) { /* local NULL: the server stops */
        char *text = json_dumps(local, JSON_COMPACT);
        rn_buf h = {0}, body = {0};
        rn_reply_common(&h);
        rn_buf_append_str(&h, "Content-Type: application/json\r\nCache-Control: no-store\r\n");
        rn_buf_append_str(&body, text);
        free(text);
        rn_http_respond(req, 200, &h, &body);
    }
    json_decref(local);
    rn_request_release(req);
}

void admin_cluster_local(rn_admin_plane *a, rn_request *req, const admin_query *q) {
    rn_request_hold(req);
    part_start(a, q, q->groups, peer_part_done, req);
}

/* ---- a query of the whole cluster ---- */

typedef struct cluster_query cluster_query;

typedef struct {
    cluster_query *cq;
    uint64_t node;
    uint8_t groups[32];
    rn_fetch *fetch;
} node_ask;

struct cluster_query {
    rn_list_node link; /* in a->asks */
    rn_admin_plane *a;
    rn_request *req;
    admin_query q;
    json_t *merged;
    json_t *unreachable_groups, *unreachable_nodes;
    int more; /* some node's page had more */
    size_t waiting;
    int stopped; /* answered at the node's stop: parts still due are dropped */
    node_ask *asks;
    size_t n_asks;
};

static void add_groups(json_t *list, const uint8_t groups[32]) {
    for (unsigned g = 0; g < 256; g++)
        if (admin_group_in(groups, g))
            json_array_append_new(list, json_integer(g));
}

/* Cuts the merged page at the limit. */
static void trim_page(cluster_query *cq) {
    json_t *items = json_object_get(cq->merged, "items");
    if (!json_is_array(items))
        return;
    int more = cq->more || json_array_size(items) > cq->q.limit;
    while (json_array_size(items) > cq->q.limit)
        json_array_remove(items, json_array_size(items) - 1);
    json_object_set_new(cq->merged, "more", json_boolean(more));
}

static void query_free(cluster_query *cq) {
    json_decref(cq->merged);
    json_decref(cq->unreachable_groups);
    json_decref(cq->unreachable_nodes);
    free(cq->asks);
    free(cq);
}

static void query_finish(cluster_query *cq) {
    rn_list_remove(&cq->a->asks, &cq->link);
    if (!rn_request_gone(cq->req)) {
        if (!cq->merged)
            cq->merged = json_object(); /* nobody answered: an empty page */
        if (cq->q.kind != ADMIN_BUCKET && cq->q.kind != ADMIN_PURGE && cq->q.kind != ADMIN_STREAM &&
            !json_object_get(cq->merged, "items"))
            json_object_set_new(cq->merged, "items", json_array());
        trim_page(cq);
        admin_answer(cq->a, cq->req, &cq->q, cq->merged, cq->unreachable_groups,
                     cq->unreachable_nodes);
        cq->merged = cq->unreachable_groups = cq->unreachable_nodes = NULL;
    }
    rn_request_release(cq->req);
    query_free(cq);
}

/* A node's part arrived (local: its answer; NULL: none came). */
static void part_arrived(cluster_query *cq, node_ask *ask, json_t *local) {
    if (cq->stopped) {
        json_decref(local);
        if (--cq->waiting == 0)
            query_free(cq);
        return;
    }
    if (!local) {
        add_groups(cq->unreachable_groups, ask->groups);
        json_array_append_new(cq->unreachable_nodes, json_integer((json_int_t)ask->node));
    } else {
        size_t i;
        json_t *g;
        json_array_foreach(json_object_get(local, "not_leading"), i, g) {
            json_array_append(cq->unreachable_groups, g);
        }
        cq->more |= json_is_true(json_object_get(local, "more"));
        json_object_del(local, "more");
        if (!cq->merged) {
            json_object_del(local, "node");
            json_object_del(local, "not_leading");
            cq->merged = json_incref(local);
        } else {
            admin_merge(&cq->q, cq->merged, local);
        }
        json_decref(local);
    }
    if (--cq->waiting == 0)
        query_finish(cq);
}

static void self_done(void *arg, json_t *local) {
    node_ask *ask = arg;
    part_arrived(ask->cq, ask, local);
}

static void fetched(void *arg, const rn_fetch_result *r) {
    node_ask *ask = arg;
    ask->fetch = NULL;
    json_t *local = NULL;
    if (r->failure == RN_FETCH_ANSWERED && r->status == 200)
        local = json_loadb((const char *)r->body, r->body_len, 0, NULL);
    if (local && !json_is_object(local)) {
        json_decref(local);
        local = NULL;
    }
    part_arrived(ask->cq, ask, local);
}

/* The peer request of an ask: the route of the operator's request with
 * scope=local and the ask's groups. */
static void ask_node(cluster_query *cq, node_ask *ask, const char *base) {
    rn_buf url = {0};
    const rn_request *req = cq->req;
    rn_buf_appendf(&url, "%s%.*s%s", base, (int)req->target_len, req->target,
                   memchr(req->target, '?', req->target_len) ? "&" : "?");
    rn_buf_append_str(&url, "scope=local&groups=");
    int first = 1;
    for (unsigned g = 0; g < 256; g++)
        if (admin_group_in(ask->groups, g)) {
            rn_buf_appendf(&url, "%s%u", first ? "" : "%2C", g);
            first = 0;
        }
    rn_buf_append_byte(&url, 0);
    rn_fetch_request fr = {.method = cq->q.kind == ADMIN_PURGE ? "POST" : "GET",
                           .url = (const char *)url.data,
                           .body_fd = -1,
                           .sink_fd = -1,
                           .sink_cap = ANSWER_CAP,
                           .strict_size = 1,
                           .timeout_ms = ASK_TIMEOUT_MS};
    ask->fetch = rn_cluster_peer_request(cq->a->cfg.cluster, &fr, fetched, ask);
    rn_buf_free(&url);
    if (!ask->fetch)
        part_arrived(cq, ask, NULL);
}

/* The groups whose leaders a query of kind k needs. */
static void groups_needed(rn_admin_plane *a, const admin_query *q, uint8_t need[32]) {
    unsigned n = rn_cluster_groups(a->cfg.cluster);
    memset(need, 0, 32);
    if (q->kind == ADMIN_SUBSCRIPTIONS)
        return;
    if (q->kind == ADMIN_STREAM) { /* the stream's own group */
        char key[2 * ADMIN_NAME_MAX + 2];
        size_t len = q->bucket_len + 1 + q->stream_len;
        memcpy(key, q->bucket, q->bucket_len);
        key[q->bucket_len] = '/';
        memcpy(key + q->bucket_len + 1, q->stream, q->stream_len);
        unsigned g = rn_cluster_group_of(a->cfg.cluster, key, len);
        admin_group_add(need, g);
        return;
    }
    for (unsigned g = 0; g < n; g++)
        admin_group_add(need, g);
}

void admin_cluster_query(rn_admin_plane *a, rn_request *req, const admin_query *q) {
    if (q->kind == ADMIN_NODE) { /* this node's overview; the cluster's is /__runnel/cluster */
        admin_answer_node(a, req, q);
        return;
    }
    cluster_query *cq = rn_xcalloc(1, sizeof *cq);
    cq->a = a;
    cq->req = req;
    cq->q = *q;
    cq->unreachable_groups = json_array();
    cq->unreachable_nodes = json_array();
    rn_request_hold(req);
    rn_list_push_back(&a->asks, &cq->link);
    uint8_t need[32];
    groups_needed(a, q, need);
    rn_cluster_node nodes[RN_MAX_PEERS];
    size_t nn = rn_cluster_nodes(a->cfg.cluster, nodes, RN_MAX_PEERS);
    if (nn > RN_MAX_PEERS)
        nn = RN_MAX_PEERS;
    cq->asks = rn_xcalloc(nn ? nn : 1, sizeof *cq->asks);
    unsigned groups = rn_cluster_groups(a->cfg.cluster);
    for (unsigned g = 0; g < groups; g++) {
        if (!admin_group_in(need, g))
            continue;
        uint64_t term;
        int leading;
        uint64_t leader = rn_cluster_group_leader(a->cfg.cluster, g, &term, &leading);
        size_t k = 0;
        while (k < nn && nodes[k].id != leader)
            k++;
        if (!leader || k == nn) {
            json_array_append_new(cq->unreachable_groups, json_integer(g));
            continue;
        }
        admin_group_add(cq->asks[k].groups, g);
    }
    /* every node holds its own counters, live readers and subscriptions */
    int every_node =
        q->kind == ADMIN_USAGE || q->kind == ADMIN_STREAM || q->kind == ADMIN_SUBSCRIPTIONS;
    static const uint8_t no_groups[32];
    for (size_t k = 0; k < nn; k++) {
        cq->asks[k].cq = cq;
        cq->asks[k].node = nodes[k].id;
        if (every_node || memcmp(cq->asks[k].groups, no_groups, 32) != 0)
            cq->waiting++;
    }
    cq->n_asks = nn;
    cq->waiting++; /* held until every ask started */
    uint64_t self = rn_cluster_self(a->cfg.cluster);
    for (size_t k = 0; k < nn; k++) {
        node_ask *ask = &cq->asks[k];
        if (!every_node && memcmp(ask->groups, no_groups, 32) == 0)
            continue;
        if (ask->node == self)
            part_start(a, q, ask->groups, self_done, ask);
        else
            ask_node(cq, ask, nodes[k].url);
    }
    if (--cq->waiting == 0)
        query_finish(cq);
}

void admin_cluster_stop(rn_admin_plane *a) {
    while (!rn_list_empty(&a->asks)) {
        cluster_query *cq = rn_list_entry(a->asks.first, cluster_query, link);
        rn_list_remove(&a->asks, &cq->link);
        cq->stopped = 1;
        if (!rn_request_gone(cq->req)) {
            rn_buf extra = {0};
            rn_buf_append_str(&extra, "Retry-After: 1\r\n");
            rn_reply_error(cq->req, RN_E_ADMIN_UNREACHABLE, &extra);
        }
        rn_request_release(cq->req);
        for (size_t k = 0; k < cq->n_asks; k++)
            if (cq->asks[k].fetch) { /* its callback will not run */
                rn_fetch_cancel(cq->asks[k].fetch);
                cq->asks[k].fetch = NULL;
                cq->waiting--;
            }
        if (cq->waiting == 0)
            query_free(cq); /* else the parts of this node still due free it */
    }
}
