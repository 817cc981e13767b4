/*
 * elsewhere.c — the streams of groups this node does not host, asked of
 * their leaders, and the answers to such asks. See elsewhere.h.
 *
 * An ask makes one GET per leader (signed like every peer request: the
 * cluster's client), naming the groups this node knows that peer leads
 * and, when the asker's view of each of them stands at a point of that
 * leader's journal (changes.h: every ask after the first to the same
 * leader process), that point (`since`). Such an ask is answered with the
 * streams changed and removed since, found by walking back from the
 * journal's end: its cost is that of the changes, not of the streams
 * held. An ask without one, or with one the journal cannot answer (a
 * restart, a snapshot installed or a group dropped here, too many
 * removals since), is answered in full: every stream of the groups
 * served, found by walking every stream of this node once (the engine has
 * no index by group).
 */
#include "cluster/elsewhere.h"
#include "cluster/changes.h"
#include "cluster/cluster_config.h"
#include "cluster/raft_log.h"
#include "cluster/recovery.h"
#include "protocol/params.h"
#include "protocol/reply.h"
#include "util/metrics.h"
#include "util/text.h"

#include <assert.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ASK_TIMEOUT_MS 2000
#define ANSWER_CAP (64u << 20) /* bytes of one leader's answer */
#define MAX_NODES 256
#define MAX_REMOVED_KEPT 65536 /* removals the journal answers from */

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
                                        void *arg, const rn_elsewhere_cursor *cursors,
                                        rn_group_set *far) {
    rn_cluster *cl = ctx;
    memset(far, 0, sizeof *far);
    if (!cl->node || !cl->http)
        return NULL;
    rn_buf query[MAX_NODES] = {0};              /* "?groups=" and each group the node leads */
    rn_elsewhere_cursor since[MAX_NODES] = {0}; /* incarnation 0: none shared */
    uint8_t mixed[MAX_NODES] = {0};             /* its groups' cursors differ */
    size_t leaders = 0;
    for (unsigned g = 0; g < cl->groups; g++) {
        uint64_t term, id;
        if (consensus_group_running(cl->node, g) && cluster_voter_here(cl, g))
            continue;
        rn_group_set_add(far, g);
        if (!(id = cluster_leader_of(cl, g, &term)) || id >= MAX_NODES || id == cl->cfg.node_id ||
            !rn_cluster_peer(&cl->cfg, id))
            continue;
        const rn_elsewhere_cursor *c = &cursors[g];
        if (query[id].len == 0)
            since[id] = *c;
        else if (c->incarnation != since[id].incarnation)
            mixed[id] = 1;
        else if (c->seq < since[id].seq)
            since[id].seq = c->seq;
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
        if (since[id].incarnation && !mixed[id]) {
            char text[RN_ELSEWHERE_CURSOR_MAX];
            rn_elsewhere_cursor_format(&since[id], text);
            rn_buf_appendf(&query[id], "&since=%s", text);
        }
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
    json_t *changed; /* an answer since a point: the paths changed since, of the groups served */
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

static void add_change(const char *path, size_t len, int removed, void *arg) {
    (void)removed; /* what the engine holds now decides */
    answer_ctx *c = arg;
    if (c->serves[rn_raft_log_group(c->cl->log, path, len)])
        json_array_append_new(c->changed, json_stringn(path, len));
}

/* The streams of the groups served changed since `since`, into c->streams
 * (those the engine holds now) and removed (the others). Returns 0 when
 * the journal cannot answer from that point. */
static int answer_changes(answer_ctx *c, const rn_elsewhere_cursor *since, json_t *removed) {
    rn_changes *journal = c->cl->changes;
    c->changed = json_array();
    int ok = since->incarnation == rn_changes_incarnation(journal) &&
             rn_changes_since(journal, since->seq, add_change, c);
    size_t k;
    json_t *p;
    json_array_foreach(c->changed, k, p) {
        rn_stream *s = rn_engine_find(c->cl->engine, json_string_value(p), json_string_length(p));
        if (s)
            add_stream(s, c);
        else
            json_array_append(removed, p);
    }
    json_decref(c->changed);
    return ok;
}

/* The `since` parameter, INCARNATION.SEQ (16 hex digits, decimal): 1 when
 * present and good, 0 when absent, -1 when malformed. */
static int since_param(const char *query, size_t len, rn_elsewhere_cursor *out) {
    char val[64];
    long n;
    rn_param_fault f;
    if (rn_param_query(query, len, "since", RN_PARAM_LENIENT, val, sizeof val - 1, &n, &f) != 0)
        return -1;
    if (n < 0)
        return 0;
    return rn_elsewhere_cursor_parse(val, (size_t)n, out) == 0 ? 1 : -1;
}

void cluster_elsewhere_answer(rn_cluster *cl, rn_request *req, const char *query, size_t len) {
    char val[2048];
    long n;
    rn_param_fault f;
    rn_elsewhere_cursor since = {0};
    int has_since = since_param(query, len, &since);
    if (rn_param_query(query, len, "groups", RN_PARAM_LENIENT, val, sizeof val - 1, &n, &f) != 0 ||
        n <= 0 || has_since < 0) {
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
    answer_ctx c = {cl, serves, json_array(), NULL};
    json_t *removed = json_array();
    int full = !has_since || !answer_changes(&c, &since, removed);
    if (full && json_array_size(groups)) /* answer_changes named nothing */
        rn_engine_foreach(cl->engine, add_stream, &c);
    ++*(full ? &rn_metric.stream_asks_full : &rn_metric.stream_asks_changes);
    rn_changes_keep(cl->changes); /* the cursor handed out must be answerable */
    char cursor[RN_ELSEWHERE_CURSOR_MAX];
    rn_elsewhere_cursor_format(
        &(rn_elsewhere_cursor){rn_changes_incarnation(cl->changes), rn_changes_seq(cl->changes)},
        cursor);
    json_t *doc = json_pack("{s:o, s:o, s:s, s:b}", "groups", groups, "streams", c.streams,
                            "cursor", cursor, "full", full);
    if (!full)
        json_object_set(doc, "removed", removed);
    json_decref(removed);
    char *text = json_dumps(doc, JSON_COMPACT);
    json_decref(doc);
    free(serves);
    rn_buf body = {0};
    rn_buf_append_str(&body, text);
    free(text);
    cluster_answer(req, 200, "application/json", &body);
}

/* The journal's observer: every applied change of a stream. */
static void note_change(rn_stream *s, rn_stream_event ev, void *arg) {
    rn_changes_note(arg, s->path, s->path_len, ev == RN_STREAM_REMOVED);
}

void cluster_elsewhere_start(rn_cluster *cl) {
    assert(!cl->changes);
    cl->changes = rn_changes_new(MAX_REMOVED_KEPT);
    rn_engine_observe(cl->engine, note_change, cl->changes);
}

void cluster_elsewhere_restored(rn_cluster *cl) {
    if (cl->changes)
        rn_changes_forget_all(cl->changes);
}

void cluster_elsewhere_free(rn_cluster *cl) {
    if (!cl->changes)
        return;
    rn_engine_unobserve(cl->engine, note_change, cl->changes);
    rn_changes_free(cl->changes);
    cl->changes = NULL;
}
