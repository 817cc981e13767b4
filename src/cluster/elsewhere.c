/*
 * elsewhere.c — the streams of groups this node does not host, asked of
 * their leaders, and the answers to such asks. See elsewhere.h.
 *
 * An ask makes one GET per leader (signed like every peer request: the
 * cluster's client), naming the groups this node knows that peer leads.
 * The answer walks every stream of this node once (the engine has no index
 * by group), so its cost grows with the streams a node holds; it carries
 * every stream of the groups served, whatever the asker watches.
 */
#include "cluster/elsewhere.h"
#include "cluster/cluster_config.h"
#include "cluster/raft_log.h"
#include "cluster/recovery.h"
#include "protocol/params.h"
#include "protocol/reply.h"
#include "util/text.h"

#include <assert.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ASK_TIMEOUT_MS 2000
#define ANSWER_CAP (64u << 20) /* bytes of one leader's answer */
#define MAX_NODES 256

typedef struct {
    rn_elsewhere_ask *ask;
    rn_fetch *fetch; /* NULL once it reported */
} one_ask;

struct rn_elsewhere_ask {
    rn_elsewhere_fn each;
    void (*done)(void *arg);
    void *arg;
    size_t n, pending;
    one_ask asks[];
};

static void answered(void *arg, const rn_fetch_result *r) {
    one_ask *o = arg;
    rn_elsewhere_ask *a = o->ask;
    o->fetch = NULL;
    if (r->failure == RN_FETCH_ANSWERED && r->status == 200)
        a->each(a->arg, r->body, r->body_len);
    if (--a->pending == 0) {
        a->done(a->arg);
        free(a);
    }
}

rn_elsewhere_ask *cluster_ask_elsewhere(void *ctx, rn_elsewhere_fn each, void (*done)(void *arg),
                                        void *arg, rn_group_set *far) {
    rn_cluster *cl = ctx;
    memset(far, 0, sizeof *far);
    if (!cl->node || !cl->http)
        return NULL;
    rn_buf query[MAX_NODES] = {0}; /* "?groups=" and each group the node leads */
    size_t leaders = 0;
    for (unsigned g = 0; g < cl->groups; g++) {
        uint64_t term, id;
        if (consensus_group_running(cl->node, g) && cluster_voter_here(cl, g))
            continue;
        rn_group_set_add(far, g);
        if (!(id = cluster_leader_of(cl, g, &term)) || id >= MAX_NODES || id == cl->cfg.node_id ||
            !rn_cluster_peer(&cl->cfg, id))
            continue;
        leaders += query[id].len == 0;
        rn_buf_appendf(&query[id], "%s%u", query[id].len ? "," : "?groups=", g);
    }
    if (!leaders)
        return NULL;
    rn_elsewhere_ask *a = rn_xcalloc(1, sizeof *a + leaders * sizeof a->asks[0]);
    a->each = each;
    a->done = done;
    a->arg = arg;
    for (uint64_t id = 0; id < MAX_NODES; id++) {
        if (!query[id].len)
            continue;
        rn_buf url = {0};
        rn_buf_appendf(&url, "%s/__runnel/cluster/streams%.*s",
                       rn_cluster_peer_url(rn_cluster_peer(&cl->cfg, id)), (int)query[id].len,
                       (const char *)query[id].data);
        rn_buf_append_byte(&url, 0);
        rn_buf_free(&query[id]);
        rn_fetch_request req = {.method = "GET",
                                .url = (const char *)url.data,
                                .body_fd = -1,
                                .sink_fd = -1,
                                .sink_cap = ANSWER_CAP,
                                .timeout_ms = ASK_TIMEOUT_MS};
        one_ask *o = &a->asks[a->n];
        o->ask = a;
        if ((o->fetch = rn_outbound_start(cl->http, &req, answered, o)))
            a->n++;
        rn_buf_free(&url);
    }
    if (!a->n) {
        free(a);
        return NULL;
    }
    a->pending = a->n;
    return a;
}

void cluster_ask_elsewhere_cancel(rn_elsewhere_ask *a) {
    for (size_t i = 0; i < a->n; i++)
        if (a->asks[i].fetch)
            rn_fetch_cancel(a->asks[i].fetch);
    free(a);
}

/* ---- the leader's side ---- */

typedef struct {
    rn_cluster *cl;
    const uint8_t *serves; /* [group]: 1 when this answer covers it */
    json_t *streams;
} answer_ctx;

static void add_stream(rn_stream *s, void *arg) {
    answer_ctx *c = arg;
    if (!c->serves[rn_raft_log_group(c->cl->log, s->path, s->path_len)])
        return;
    char id[17];
    snprintf(id, sizeof id, "%016llx", (unsigned long long)s->id);
    json_array_append_new(c->streams, json_pack("[s#, s, I, I, s#]", s->path, s->path_len, id,
                                                (json_int_t)s->tail, (json_int_t)s->fork_offset,
                                                s->content_type, s->content_type_len));
}

void cluster_elsewhere_answer(rn_cluster *cl, rn_request *req, const char *query, size_t len) {
    char val[2048];
    long n;
    rn_param_fault f;
    if (rn_param_query(query, len, "groups", RN_PARAM_LENIENT, val, sizeof val - 1, &n, &f) != 0 ||
        n <= 0) {
        rn_reply_error(req, RN_E_INVALID_REQUEST, NULL);
        return;
    }
    val[n] = 0;
    uint8_t *serves = rn_xcalloc(cl->groups ? cl->groups : 1, 1);
    json_t *groups = json_array();
    for (const char *p = val; *p;) {
        size_t k = strcspn(p, ",");
        uint64_t g;
        if (rn_parse_strict_u64(p, k, UINT32_MAX, &g) != 0 || g >= cl->groups) {
            free(serves);
            json_decref(groups);
            rn_reply_error(req, RN_E_INVALID_REQUEST, NULL);
            return;
        }
        if (!serves[g] && cl->node && rn_cluster_lead_term(cl, (unsigned)g) &&
            !cluster_recovery_pending(cl->recovery, (unsigned)g)) {
            serves[g] = 1;
            json_array_append_new(groups, json_integer((json_int_t)g));
        }
        p += k + (p[k] == ',');
    }
    answer_ctx c = {cl, serves, json_array()};
    if (json_array_size(groups))
        rn_engine_foreach(cl->engine, add_stream, &c);
    json_t *doc = json_pack("{s:o, s:o}", "groups", groups, "streams", c.streams);
    char *text = json_dumps(doc, JSON_COMPACT);
    json_decref(doc);
    free(serves);
    rn_buf body = {0};
    rn_buf_append_str(&body, text);
    free(text);
    cluster_answer(req, 200, "application/json", &body);
}
