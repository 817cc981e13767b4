/*
 * cluster_http.c — the cluster's operational routes.
 *
 *   GET /__runnel/cluster          the report (JSON; cluster.h, docs/CLUSTER.md):
 *                                  the nodes, every group (its placement,
 *                                  leader and replicas) and the moves in
 *                                  progress
 *   GET /__runnel/cluster/status   this node's status, as peers read it
 *                                  (peers.c); its query names the
 *                                  streams read on the asking peer
 *                                  (touches.h)
 *   GET /__runnel/cluster/incarnation?id=N   the incarnation recorded for
 *                                  node N (identity.h)
 *   GET /__runnel/cluster/bytes/{id}?from=&to=   a stream's bytes (through
 *                                  its fork source below its fork offset), and
 *   GET /__runnel/cluster/index/{id}?from=&to=   its append-index entries
 *                                  (u64 LE), for peers filling gaps
 *                                  (fetch.h); {id} is 16 hex digits
 *   GET /__runnel/cluster/blob?cold=0|1&key=   a snapshot body (fetch.h)
 *   GET /__runnel/cluster/streams?groups=G,...   the streams of those groups
 *                                  this node leads (elsewhere.h)
 *   GET /__runnel/cluster/read-index?group=G   the group's applied index
 *                                  once this node confirmed it leads it
 *                                  (settle.c)
 *   /__runnel/cluster/fork-pin, -unpin, -alive, -cut   forks apart from
 *                                  their source (forks.c)
 *   and the operators' routes of membership.h.
 *
 * A replica's applied index is known exactly only on that replica: each
 * node asks every peer once a second, so the report shows a peer's index
 * as of its last answer (null until one came). A group this node does not
 * host is reported from the table and its peers' reports (its commit
 * index: null).
 */
#include "cluster/forks.h"
#include "cluster/balance.h"
#include "cluster/cluster_int.h"
#include "cluster/cluster_config.h"
#include "cluster/elsewhere.h"
#include "cluster/health.h"
#include "cluster/identity.h"
#include "cluster/membership.h"
#include "consensus/peer_auth.h"
#include "consensus/peer_tls.h"
#include "cluster/reconcile.h"
#include "cluster/touches.h"
#include "protocol/params.h"
#include "protocol/reply.h"
#include "tiers/tiers.h"
#include "util/clock.h"
#include "util/text.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_MEMBERS 64

/* True when path is exactly lit. */
static int path_is(const char *path, size_t len, const char *lit) {
    return len == strlen(lit) && memcmp(path, lit, len) == 0;
}

/* ---- the report ---- */

/* A replica's applied index as known here; 0 with *known 0 when unknown. */
static uint64_t replica_applied(const rn_cluster *cl, uint64_t id, unsigned g,
                                const consensus_group_info *info, int *known) {
    if (id == cl->cfg.node_id && consensus_group_running(cl->node, g)) {
        *known = 1;
        return info->applied_index;
    }
    const peer_status *ps = cluster_peer_status(cl, id);
    *known = ps && ps->g[g].role;
    return *known ? ps->g[g].applied : 0;
}

static const char *const ROLES[] = {"spare", "standby", "voter"};

/* A replica's line of the report. */
static json_t *replica_report(const rn_cluster *cl, unsigned g, uint64_t id, unsigned role,
                              const consensus_group_info *info) {
    int known;
    uint64_t applied = replica_applied(cl, id, g, info, &known);
    uint64_t lag = known && info->commit_index > applied ? info->commit_index - applied : 0;
    return json_pack("{s:I, s:o, s:o, s:s}", "node", (json_int_t)id, "applied_index",
                     known ? json_integer((json_int_t)applied) : json_null(), "lag",
                     known && info->commit_index ? json_integer((json_int_t)lag) : json_null(),
                     "role", ROLES[role < 3 ? role : 2]);
}

static json_t *id_list(const uint8_t *ids, unsigned n) {
    json_t *a = json_array();
    for (unsigned k = 0; k < n; k++)
        json_array_append_new(a, json_integer(ids[k]));
    return a;
}

/* A group as this node sees it: from its own replica when it hosts one,
 * else from the table and its peers' reports. */
static json_t *group_report(const rn_cluster *cl, unsigned g) {
    consensus_group_info info;
    cluster_group_info(cl, g, &info);
    int hosted = consensus_group_running(cl->node, g);
    uint64_t term = info.term, leader = hosted ? info.leader_id : cluster_leader_of(cl, g, &term);
    json_t *replicas = json_array();
    if (hosted) {
        consensus_member members[MAX_MEMBERS];
        unsigned n = consensus_members(cl->node, g, members, MAX_MEMBERS);
        for (unsigned i = 0; i < n && i < MAX_MEMBERS; i++)
            json_array_append_new(replicas,
                                  replica_report(cl, g, members[i].id, members[i].role, &info));
    } else if (g < cl->groups && cl->meta.initialized) {
        const rn_meta_group *gr = &cl->meta.group[g];
        for (unsigned i = 0; i < gr->n_members; i++)
            json_array_append_new(
                replicas, replica_report(cl, g, gr->members[i].id, gr->members[i].role, &info));
    }
    /* caught up since this node started (cluster.c caught_up): until then
     * its local reads of the group answer 503 GROUP_RESTARTING */
    json_t *caught_up = hosted ? json_boolean(cl->catch_up[g].done) : json_null();
    json_t *o = json_pack("{s:i, s:o, s:I, s:o, s:b, s:o, s:o}", "group", (int)g, "leader",
                          leader ? json_integer((json_int_t)leader) : json_null(), "term",
                          (json_int_t)term, "commit_index",
                          hosted ? json_integer((json_int_t)info.commit_index) : json_null(),
                          "hosted", hosted, "caught_up", caught_up, "replicas", replicas);
    /* streams of the group whose bytes this replica still fetches from its
     * peers (it redirects their reads to one that has them meanwhile) */
    json_object_set_new(o, "streams_fetching",
                        hosted ? json_integer(rn_fetcher_pending_group(cl->fetcher, g))
                               : json_null());
    if (g < cl->groups && cl->meta.initialized) {
        const rn_meta_group *gr = &cl->meta.group[g];
        json_object_set_new(o, "placement", id_list(gr->target, gr->n_target));
        json_object_set_new(o, "preferred_leader",
                            gr->leader ? json_integer(gr->leader) : json_null());
        json_object_set_new(o, "moving", json_boolean(rn_meta_group_moving(gr)));
    }
    return o;
}

/* A move in progress: the group's target and reported configuration, the
 * node coming in and the one going out, and how far the new one got. */
static json_t *move_report(const rn_cluster *cl, unsigned g) {
    const rn_meta_group *gr = &cl->meta.group[g];
    uint8_t members[RN_META_MAX_NODES];
    unsigned in = 0, out = 0, in_role = 0;
    for (unsigned k = 0; k < gr->n_members; k++) {
        members[k] = gr->members[k].id;
        if (!rn_meta_in_target(gr, members[k]))
            out = members[k];
        else if (gr->members[k].role != 2)
            in = members[k], in_role = gr->members[k].role;
    }
    for (unsigned k = 0; k < gr->n_target && !in; k++)
        if (!rn_meta_in_members(gr, gr->target[k]))
            in = gr->target[k], in_role = 3;
    const char *step = in ? (in_role == 3   ? "adding"
                             : in_role == 0 ? "adding"
                                            : "catching_up")
                          : "removing";
    const char *live = cluster_reconcile_step(cl->reconcile, g); /* this node leads it */
    if (live)
        step = live; /* the change in flight ("promoting", "transferring" too) */
    json_t *o =
        json_pack("{s:i, s:o, s:o, s:s}", "group", (int)g, "to", id_list(gr->target, gr->n_target),
                  "from", id_list(members, gr->n_members), "step", step);
    json_object_set_new(o, "adding", in ? json_integer(in) : json_null());
    json_object_set_new(o, "removing", out ? json_integer(out) : json_null());
    const peer_status *ps = in ? cluster_peer_status(cl, in) : NULL;
    if (in == cl->cfg.node_id && consensus_group_running(cl->node, g)) {
        consensus_group_info info;
        consensus_group_info_get(cl->node, g, &info);
        json_object_set_new(o, "progress",
                            json_pack("{s:I, s:i}", "applied_index", (json_int_t)info.applied_index,
                                      "streams_fetching",
                                      (int)rn_fetcher_pending_group(cl->fetcher, g)));
    } else if (ps && ps->g[g].role) {
        json_object_set_new(o, "progress",
                            json_pack("{s:I, s:i}", "applied_index", (json_int_t)ps->g[g].applied,
                                      "streams_fetching", (int)ps->g[g].gaps));
    }
    return o;
}

static json_t *nodes_report(const rn_cluster *cl) {
    static const char *const states[] = {"?", "active", "leaving", "removed"};
    uint8_t alive[256];
    cluster_alive(cl, alive);
    json_t *nodes = json_array();
    for (int i = 0; i < cl->cfg.n_peers; i++) {
        const rn_peer_config *p = &cl->cfg.peers[i];
        const rn_meta_node *m = rn_meta_node_get(&cl->meta, (unsigned)p->id);
        unsigned held = 0, led = 0;
        for (unsigned g = 0; cl->meta.initialized && g < cl->groups; g++) {
            held += rn_meta_in_target(&cl->meta.group[g], (unsigned)p->id);
            led += cluster_leader_of(cl, g, NULL) == p->id;
        }
        json_t *n =
            json_pack("{s:I, s:s, s:s, s:s, s:s, s:b, s:b, s:i, s:i}", "id", (json_int_t)p->id,
                      "url", p->url, "peer_url", rn_cluster_peer_url(p), "raft", p->raft, "state",
                      m ? states[m->state] : "unknown", "drained", m && m->drained, "answering",
                      alive[p->id] != 0, "replicas", (int)held, "leading", (int)led);
        json_array_append_new(nodes, n);
    }
    return nodes;
}

/* The metadata group's voters as this node's replica of it knows them
 * (null when it runs none): a node the table lists as removed may stay a
 * voter until the group's leader has taken it out of the configuration,
 * and until then it still counts toward that group's majority. */
static json_t *meta_voters(const rn_cluster *cl) {
    if (!cl->node || !consensus_group_running(cl->node, cl->groups))
        return json_null();
    consensus_member members[MAX_MEMBERS];
    unsigned n = consensus_members(cl->node, cl->groups, members, MAX_MEMBERS);
    json_t *ids = json_array();
    for (unsigned i = 0; i < n && i < MAX_MEMBERS; i++)
        if (members[i].role == CONSENSUS_VOTER)
            json_array_append_new(ids, json_integer((json_int_t)members[i].id));
    return ids;
}

static void report(const rn_cluster *cl, rn_buf *out) {
    json_t *groups = json_array(), *moves = json_array();
    for (unsigned g = 0; cl->node && g < cl->groups; g++) {
        json_array_append_new(groups, group_report(cl, g));
        if (cl->meta.initialized && rn_meta_group_moving(&cl->meta.group[g]))
            json_array_append_new(moves, move_report(cl, g));
    }
    uint64_t meta_term = 0,
             meta_leader = cl->node ? cluster_leader_of(cl, cl->groups, &meta_term) : 0;
    json_t *meta = json_pack("{s:b, s:o, s:I, s:o}", "initialized", cl->meta.initialized, "leader",
                             meta_leader ? json_integer((json_int_t)meta_leader) : json_null(),
                             "term", (json_int_t)meta_term, "voters", meta_voters(cl));
    const char *auth = cl->peer_tls ? "certificates" : cl->key.len ? "key" : "none";
    json_t *doc =
        json_pack("{s:s, s:I, s:s, s:i, s:i, s:o, s:o, s:o, s:o}", "cluster_id", cl->cfg.cluster_id,
                  "node_id", (json_int_t)cl->cfg.node_id, "peer_auth", auth, "replicas",
                  cl->meta.initialized ? (int)rn_balance_replicas(&cl->meta) : 0, "replicas_asked",
                  cl->meta.initialized ? (int)cl->meta.replicas : 0, "metadata", meta, "nodes",
                  nodes_report(cl), "groups", groups, "moves", moves);
    char *text = json_dumps(doc, JSON_COMPACT);
    json_decref(doc);
    rn_buf_append_str(out, text);
    rn_buf_append_str(out, "\n");
    free(text);
}

/* ---- who may call ---- */

rn_cluster_route_kind rn_cluster_route_kind_of(const char *path, size_t path_len, const char *query,
                                               size_t query_len) {
    static const char peer_reads[][24] = {"cluster/status", "cluster/read-index", "cluster/blob",
                                          "cluster/incarnation", "cluster/streams"};
    static const char bytes[] = "cluster/bytes/", index[] = "cluster/index/";
    size_t bl = sizeof bytes - 1;
    if (path_is(path, path_len, "cluster"))
        return RN_CLUSTER_ROUTE_OPEN;
    for (size_t i = 0; i < sizeof peer_reads / sizeof peer_reads[0]; i++)
        if (path_is(path, path_len, peer_reads[i]))
            return RN_CLUSTER_ROUTE_PEER;
    if (path_len > bl && (memcmp(path, bytes, bl) == 0 || memcmp(path, index, bl) == 0))
        return RN_CLUSTER_ROUTE_PEER;
    if (rn_cluster_forks_route(path, path_len))
        return RN_CLUSTER_ROUTE_PEER;
    if (rn_membership_route(path, path_len))
        return rn_membership_is_local(query, query_len) ? RN_CLUSTER_ROUTE_PEER_OR_OPERATOR
                                                        : RN_CLUSTER_ROUTE_OPERATOR;
    return RN_CLUSTER_ROUTE_NONE;
}

bool rn_cluster_peer_credential(const rn_cluster *cl, const rn_request *req) {
    long verify;
    if (cl->peer_tls)
        return rn_request_client_certificate(req, &verify) != NULL;
    return rn_request_header(req, RN_PEER_HEADER_SIGNATURE, NULL) != NULL;
}

/* Checks the client certificate of req: verified against --peer-ca (by
 * the listener's TLS), naming a node other than this one. */
static rn_peer_reason certificate_verify(const rn_cluster *cl, const rn_request *req,
                                         uint64_t *peer) {
    long verify;
    X509 *cert = rn_request_client_certificate(req, &verify);
    if (cert == NULL)
        return RN_PEER_MISSING;
    if (verify != X509_V_OK)
        return RN_PEER_UNTRUSTED;
    if (rn_peer_cert_node_id(cert, peer) != 1)
        return RN_PEER_CERT_ID;
    return *peer == cl->cfg.node_id ? RN_PEER_WRONG_ID : RN_PEER_OK;
}

bool rn_cluster_peer_authorize(rn_cluster *cl, rn_request *req) {
    if (cl->key.len == 0 && cl->peer_tls == NULL)
        return true;
    uint64_t peer = 0;
    rn_peer_reason r = cl->peer_tls ? certificate_verify(cl, req, &peer)
                                    : rn_peer_http_verify(&cl->key, cl->cfg.node_id,
                                                          (uint64_t)rn_now_ms(), req, &peer);
    if (r == RN_PEER_OK)
        return true;
    rn_peer_refused(RN_PEER_CHANNEL_HTTP, r);
    const char *q = memchr(req->target, '?', req->target_len);
    int path_len = (int)(q ? (size_t)(q - req->target) : req->target_len);
    rn_log_throttled(&cl->refused_log, 10000, RN_LOG_WARN, "cluster_peer_refused",
                     "peer request %s %.*s refused (%s): %s",
                     req->method_name ? req->method_name : "-", path_len, req->target,
                     rn_peer_reason_name(r), rn_peer_reason_text(r));
    const char *why = rn_peer_reason_name(r);
    if (r == RN_PEER_MISSING)
        rn_reply_error(req, RN_E_PEER_UNAUTHENTICATED, NULL);
    else
        rn_reply_error_detail(req, RN_E_PEER_REFUSED, NULL, why, strlen(why));
    return false;
}

/* ---- metrics ---- */

void rn_cluster_metrics(rn_cluster *cl, rn_buf *out) {
    static const struct {
        const char *name, *type, *help;
    } m[] = {
        {"runnel_cluster_term", "gauge", "The group's current term as this node knows it."},
        {"runnel_cluster_leader", "gauge", "The group's leader as this node knows it (0: none)."},
        {"runnel_cluster_leading", "gauge", "1 while this node leads the group, ready."},
        {"runnel_cluster_commit_index", "gauge", "Highest entry known committed."},
        {"runnel_cluster_applied_index", "gauge", "Highest entry applied here."},
        {"runnel_cluster_leader_changes_total", "counter",
         "Changes of the group's leader or term."},
        {"runnel_cluster_snapshots_total", "counter", "Snapshots (manifests) taken here."},
        {"runnel_cluster_snapshot_bytes", "gauge", "Size of the newest snapshot taken here."},
        {"runnel_cluster_restores_total", "counter", "Snapshots restored (at start or sent)."},
        {"runnel_cluster_proposals_inflight", "gauge", "Proposals awaiting their outcome."},
        {"runnel_cluster_commit_nudges_total", "counter",
         "Barrier entries the leader appended to tell its followers a commit at once."},
        {"runnel_cluster_log_bytes", "gauge",
         "Bytes of the group's log entries held in memory (bounded by --raft-snapshot-bytes)."},
    };
    enum { N_METRICS = sizeof m / sizeof m[0] };
    /* each group's values read once (the log's bytes are a walk), then
     * printed metric by metric */
    uint64_t(*v)[N_METRICS] = cl->node ? rn_xcalloc(cl->groups, sizeof *v) : NULL;
    for (unsigned g = 0; v && g < cl->groups; g++) {
        consensus_group_info i;
        cluster_group_info(cl, g, &i);
        uint64_t row[N_METRICS] = {i.term,          i.leader_id,
                                   i.leader_ready,  i.commit_index,
                                   i.applied_index, i.leader_changes,
                                   i.snapshots,     i.last_snapshot_bytes,
                                   i.restores,      i.proposals_inflight,
                                   i.nudges,        consensus_group_log_bytes(cl->node, g)};
        memcpy(v[g], row, sizeof row);
    }
    for (size_t k = 0; v && k < N_METRICS; k++) {
        rn_buf_appendf(out, "# HELP %s %s\n# TYPE %s %s\n", m[k].name, m[k].help, m[k].name,
                       m[k].type);
        for (unsigned g = 0; g < cl->groups; g++)
            rn_buf_appendf(out, "%s{group=\"%u\"} %llu\n", m[k].name, g,
                           (unsigned long long)v[g][k]);
    }
    free(v);
    rn_buf_appendf(out,
                   "# HELP runnel_cluster_gap_streams Streams waiting for bytes from peers.\n"
                   "# TYPE runnel_cluster_gap_streams gauge\nrunnel_cluster_gap_streams %u\n",
                   cl->fetcher ? rn_fetcher_pending(cl->fetcher) : 0);
    rn_health_metrics(cl, out);
    rn_peer_auth_metrics(out);
}

void cluster_answer(rn_request *req, int status, const char *type, rn_buf *body) {
    rn_buf h = {0};
    rn_reply_common(&h);
    rn_buf_appendf(&h, "Content-Type: %s\r\nCache-Control: no-store\r\n", type);
    rn_http_respond(req, status, &h, body);
}

/* A query parameter that must be a decimal integer; -1 when absent or not. */
int cluster_query_u64(const char *query, size_t len, const char *name, uint64_t *out) {
    char val[32];
    long n;
    rn_param_fault f;
    if (rn_param_query(query, len, name, RN_PARAM_LENIENT, val, sizeof val, &n, &f) != 0 || n <= 0)
        return -1;
    return rn_parse_strict_u64(val, (size_t)n, UINT64_MAX / 2, out);
}

/* GET cluster/{bytes|index}/{id}?from=&to= (what is 16 hex digits after
 * the prefix). */
static void copy_for_peer(rn_cluster *cl, rn_request *req, int index, const char *what, size_t len,
                          const char *query, size_t query_len) {
    uint8_t raw[8];
    uint64_t from, to;
    if (len != 16 || rn_parse_lower_hex(what, len, raw) != 0 ||
        cluster_query_u64(query, query_len, "from", &from) ||
        cluster_query_u64(query, query_len, "to", &to)) {
        rn_reply_error(req, RN_E_INVALID_REQUEST, NULL);
        return;
    }
    uint64_t id = 0;
    for (int k = 0; k < 8; k++)
        id = id << 8 | raw[k];
    rn_buf body = {0};
    int rc = index ? rn_engine_replica_index(cl->engine, id, from, to, &body)
                   : rn_engine_replica_bytes(cl->engine, id, from, to, &body);
    if (rc == 0) {
        cluster_answer(req, 200, "application/octet-stream", &body);
        return;
    }
    rn_buf_free(&body);
    rn_buf extra = {0};
    if (rc == -EAGAIN)
        rn_buf_append_str(&extra, "Retry-After: 1\r\n");
    rn_reply_error(req,
                   rc == -ENOENT   ? RN_E_NOT_FOUND
                   : rc == -ERANGE ? RN_E_RANGE_NOT_SATISFIABLE
                   : rc == -EAGAIN ? RN_E_RECOVERING
                                   : RN_E_INTERNAL,
                   &extra);
}

/* A peer's read of a snapshot body, waiting for the tiers to open it. */
typedef struct {
    rn_request *req;
    uint64_t size;
} blob_answer;

static void blob_opened(void *arg, int fd, uint64_t fd_off) {
    blob_answer *a = arg;
    if (fd < 0) {
        rn_reply_error(a->req, fd == -ENOENT ? RN_E_NOT_FOUND : RN_E_INTERNAL, NULL);
    } else {
        rn_buf h = {0}, prefix = {0}, suffix = {0};
        rn_reply_common(&h);
        rn_buf_append_str(&h,
                          "Content-Type: application/octet-stream\r\nCache-Control: no-store\r\n");
        rn_http_respond_file(a->req, 200, &h, &prefix, fd, fd_off, a->size, &suffix);
    }
    rn_request_release(a->req);
    free(a);
}

/* GET cluster/blob?cold=&key=: the snapshot body a stream of this node
 * names now (a body no stream here names answers 404: the asking replica
 * tries again, here or at another peer). */
static void blob_for_peer(rn_cluster *cl, rn_request *req, const char *query, size_t query_len) {
    char key[RN_TIERS_KEY_MAX];
    long n;
    uint64_t cold;
    rn_param_fault f;
    int ok =
        rn_param_query(query, query_len, "key", RN_PARAM_LENIENT, key, sizeof key, &n, &f) == 0 &&
        n > 0 && (size_t)n < sizeof key &&
        cluster_query_u64(query, query_len, "cold", &cold) == 0 && cold <= 1;
    if (ok) {
        key[n] = 0;
        ok = rn_tiers_body_key_valid(key);
    }
    if (!ok) {
        rn_reply_error(req, RN_E_INVALID_REQUEST, NULL);
        return;
    }
    /* the key names its stream: snapshots/<stream id, 16 hex>-... */
    const rn_stream *s = rn_engine_stream(cl->engine, strtoull(key + strlen(key) - 33, NULL, 16));
    if (!s || !s->snapshot.present || s->snapshot.cold != (int)cold ||
        strcmp(s->snapshot.key, key) != 0) {
        rn_reply_error(req, RN_E_NOT_FOUND, NULL);
        return;
    }
    blob_answer *a = rn_xcalloc(1, sizeof *a);
    a->req = req;
    a->size = s->snapshot.size;
    rn_request_hold(req);
    rn_tiers_body_read(cl->tiers, (int)cold, key, 0, a->size, blob_opened, a);
}

/* The peer routes taking one decimal parameter (a 400 without it). */
static const struct {
    const char *path, *param;
    void (*handle)(rn_cluster *cl, rn_request *req, uint64_t value);
} numeric_routes[] = {
    {"cluster/read-index", "group", cluster_read_index_for_peer},
    {"cluster/incarnation", "id", rn_identity_answer},
};

int rn_cluster_handle(rn_cluster *cl, rn_request *req, const char *path, size_t path_len,
                      const char *query, size_t query_len) {
    int get = req->method == RN_HTTP_GET || req->method == RN_HTTP_HEAD;
    rn_buf body = {0};
    if (get && path_is(path, path_len, "cluster")) {
        report(cl, &body);
        cluster_answer(req, 200, "application/json", &body);
        return 1;
    }
    if (get && path_is(path, path_len, "cluster/status")) {
        rn_touches_apply(cl->engine, query, query_len);
        cluster_peers_answer_status(cl, req);
        return 1;
    }
    for (size_t i = 0; get && i < sizeof numeric_routes / sizeof numeric_routes[0]; i++) {
        if (!path_is(path, path_len, numeric_routes[i].path))
            continue;
        uint64_t v;
        if (cluster_query_u64(query, query_len, numeric_routes[i].param, &v) != 0)
            rn_reply_error(req, RN_E_INVALID_REQUEST, NULL);
        else
            numeric_routes[i].handle(cl, req, v);
        return 1;
    }
    if (get && path_is(path, path_len, "cluster/streams")) {
        cluster_elsewhere_answer(cl, req, query, query_len);
        return 1;
    }
    if (get && path_is(path, path_len, "cluster/blob")) {
        blob_for_peer(cl, req, query, query_len);
        return 1;
    }
    if (rn_membership_handle(cl, req, path, path_len, query, query_len))
        return 1;
    if (rn_cluster_forks_handle(cl, req, path, path_len, query, query_len))
        return 1;
    static const char bytes[] = "cluster/bytes/", index[] = "cluster/index/";
    size_t bl = sizeof bytes - 1;
    if (get && path_len > bl && (memcmp(path, bytes, bl) == 0 || memcmp(path, index, bl) == 0)) {
        copy_for_peer(cl, req, path[8] == 'i', path + bl, path_len - bl, query, query_len);
        return 1;
    }
    return 0;
}
