/*
 * cluster_http.c — the cluster's operational routes and what peers report
 * of themselves.
 *
 *   GET /__runnel/cluster          the report (JSON; cluster.h, docs/CLUSTER.md)
 *   GET /__runnel/cluster/applied  this node's applied index per group, as
 *                                  "applied N0 N1 ...\n", then its health
 *                                  and incarnation lines (health.h,
 *                                  identity.h; peers poll it, naming the
 *                                  streams read on them: touches.h)
 *   GET /__runnel/cluster/incarnation?id=N   the incarnation recorded for
 *                                  node N (identity.h)
 *   GET /__runnel/cluster/bytes/{id}?from=&to=   a stream's own bytes, and
 *   GET /__runnel/cluster/index/{id}?from=&to=   its append-index entries
 *                                  (u64 LE), for peers filling gaps
 *                                  (fetch.h); {id} is 16 hex digits
 *   GET /__runnel/cluster/blob?cold=0|1&key=   a snapshot body (fetch.h)
 *   GET /__runnel/cluster/read-index?group=G   the group's applied index
 *                                  once this node confirmed it leads it
 *                                  (settle.c)
 *
 * A replica's applied index is known exactly only on that replica: each
 * node asks every peer once a second, so the report shows a peer's index
 * as of its last answer (null until one came).
 */
#include "cluster/cluster_int.h"
#include "cluster/cluster_config.h"
#include "cluster/health.h"
#include "cluster/identity.h"
#include "cluster/membership.h"
#include "cluster/peer_auth.h"
#include "cluster/peer_tls.h"
#include "cluster/touches.h"
#include "protocol/params.h"
#include "protocol/reply.h"
#include "tiers/tiers.h"
#include "util/clock.h"
#include "util/text.h"

#include <ctype.h>
#include <errno.h>
#include <unistd.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define POLL_MS 1000
#define POLL_TIMEOUT_MS 900
#define MAX_MEMBERS 64

/* ---- peer status ---- */

/* True when path is exactly lit. */
static int path_is(const char *path, size_t len, const char *lit) {
    return len == strlen(lit) && memcmp(path, lit, len) == 0;
}

static void got_status(void *arg, const rn_fetch_result *r) {
    peer_status *ps = arg;
    rn_cluster *cl = ps->cl;
    ps->inflight = NULL;
    static const char prefix[] = "applied";
    if (r->failure != RN_FETCH_ANSWERED || r->status != 200 || r->body_len < sizeof prefix - 1 ||
        memcmp(r->body, prefix, sizeof prefix - 1) != 0)
        return;
    const char *q = (const char *)r->body + sizeof prefix - 1;
    const char *end = (const char *)r->body + r->body_len;
    for (unsigned g = 0; g < cl->groups; g++) {
        if (q >= end || *q != ' ')
            return;
        const char *num = ++q;
        while (q < end && *q >= '0' && *q <= '9')
            q++;
        uint64_t v;
        if (rn_parse_strict_u64(num, (size_t)(q - num), UINT64_MAX, &v) != 0)
            return;
        ps->applied[g] = v;
    }
    ps->known = 1;
    uint64_t id = cl->cfg.peers[ps - cl->peers].id;
    while (q < end && *q == '\n' && ++q < end) { /* later lines: health.h, identity.h */
        int health = rn_health_parse_status(q, (size_t)(end - q));
        if (health >= 0) {
            ps->health = health;
            ps->health_ms = uv_now(cl->loop);
        }
        rn_identity_seen(cl, id, q, (size_t)(end - q));
        const char *nl = memchr(q, '\n', (size_t)(end - q));
        q = nl ? nl : end;
    }
}

static void on_poll(uv_timer_t *t) {
    rn_cluster *cl = t->data;
    char touched[RN_TOUCHES_QUERY_MAX];
    rn_touches_query(cl->engine, touched); /* one round's, for every peer */
    for (int i = 0; i < cl->cfg.n_peers; i++) {
        peer_status *ps = &cl->peers[i];
        if (cl->cfg.peers[i].id == cl->cfg.node_id || ps->inflight)
            continue;
        if (!ps->applied) { /* a peer added since the start */
            ps->cl = cl;
            ps->applied = rn_xcalloc(cl->groups, sizeof *ps->applied);
        }
        char url[600 + RN_TOUCHES_QUERY_MAX];
        snprintf(url, sizeof url, "%s/__runnel/cluster/applied%s",
                 rn_cluster_peer_url(&cl->cfg.peers[i]), touched);
        rn_fetch_request req = {.method = "GET",
                                .url = url,
                                .body_fd = -1,
                                .sink_fd = -1,
                                .sink_cap = 65536,
                                .timeout_ms = POLL_TIMEOUT_MS};
        ps->inflight = rn_outbound_start(cl->http, &req, got_status, ps);
    }
}

/* Signs every request to a peer with the cluster key (rn_outbound_sign_fn). */
static void sign_peer_request(void *arg, const char *method, const char *url, const uint8_t *body,
                              size_t body_len, rn_buf *lines) {
    rn_cluster *cl = arg;
    rn_peer_http_sign(&cl->key, cl->cfg.node_id, (uint64_t)rn_now_ms(), method, url, body, body_len,
                      lines);
}

/* The CA peer requests trust (cluster_int.h). */
const char *cluster_peer_request_ca(const rn_config *cfg) {
    if (cfg->peer_cert[0] && cfg->peer_listen.host[0])
        return cfg->peer_ca;
    return cfg->tls_ca[0] ? cfg->tls_ca : NULL;
}

void cluster_peers_start(rn_cluster *cl) {
    bool certs = cl->peer_tls != NULL;
    rn_outbound_config oc = {.user_agent = "runnel-cluster",
                             .max_running = 16,
                             .max_queued = 64,
                             .ca_file = cluster_peer_request_ca(&cl->cfg),
                             .client_cert = certs ? cl->cfg.peer_cert : NULL,
                             .client_key = certs ? cl->cfg.peer_key : NULL,
                             .sign = cl->key.len ? sign_peer_request : NULL,
                             .sign_arg = cl};
    cl->http = rn_outbound_new(cl->loop, &oc);
    for (int i = 0; i < cl->cfg.n_peers; i++) {
        cl->peers[i].cl = cl;
        cl->peers[i].applied = rn_xcalloc(cl->groups, sizeof *cl->peers[i].applied);
    }
    uv_timer_init(cl->loop, &cl->poll);
    cl->poll.data = cl;
    uv_timer_start(&cl->poll, on_poll, 0, POLL_MS);
    uv_unref((uv_handle_t *)&cl->poll);
    cl->polling = 1;
}

void cluster_peers_stop(rn_cluster *cl) {
    if (!cl->polling)
        return;
    rn_outbound_stop(cl->http); /* cancels the fetches in flight */
    uv_close((uv_handle_t *)&cl->poll, NULL);
}

void cluster_peers_free(rn_cluster *cl) {
    if (!cl->polling)
        return;
    rn_outbound_free(cl->http);
    for (int i = 0; i < RN_MAX_PEERS; i++)
        free(cl->peers[i].applied);
    cl->polling = 0;
}

/* ---- the report ---- */

/* A replica's applied index as known here; 0 with *known 0 when unknown. */
static uint64_t replica_applied(const rn_cluster *cl, uint64_t id, unsigned g,
                                const consensus_group_info *info, int *known) {
    if (id == cl->cfg.node_id) {
        *known = 1;
        return info->applied_index;
    }
    for (int i = 0; i < cl->cfg.n_peers; i++) {
        if (cl->cfg.peers[i].id == id && cl->peers[i].known) {
            *known = 1;
            return cl->peers[i].applied[g];
        }
    }
    *known = 0;
    return 0;
}

static json_t *group_report(const rn_cluster *cl, unsigned g) {
    consensus_group_info info;
    cluster_group_info(cl, g, &info);
    json_t *replicas = json_array();
    consensus_member members[MAX_MEMBERS];
    unsigned n = consensus_members(cl->node, g, members, MAX_MEMBERS);
    for (unsigned i = 0; i < n && i < MAX_MEMBERS; i++) {
        int known;
        uint64_t applied = replica_applied(cl, members[i].id, g, &info, &known);
        uint64_t lag = known && info.commit_index > applied ? info.commit_index - applied : 0;
        static const char *const roles[] = {"spare", "standby", "voter"};
        json_array_append_new(replicas,
                              json_pack("{s:I, s:o, s:o, s:s}", "node", (json_int_t)members[i].id,
                                        "applied_index",
                                        known ? json_integer((json_int_t)applied) : json_null(),
                                        "lag", known ? json_integer((json_int_t)lag) : json_null(),
                                        "role", roles[members[i].role]));
    }
    return json_pack("{s:i, s:o, s:I, s:I, s:o}", "group", (int)g, "leader",
                     info.leader_id ? json_integer((json_int_t)info.leader_id) : json_null(),
                     "term", (json_int_t)info.term, "commit_index", (json_int_t)info.commit_index,
                     "replicas", replicas);
}

static void report(const rn_cluster *cl, rn_buf *out) {
    json_t *nodes = json_array();
    for (int i = 0; i < cl->cfg.n_peers; i++) {
        const rn_peer_config *p = &cl->cfg.peers[i];
        json_array_append_new(nodes, json_pack("{s:I, s:s, s:s, s:s}", "id", (json_int_t)p->id,
                                               "url", p->url, "peer_url", rn_cluster_peer_url(p),
                                               "raft", p->raft));
    }
    json_t *groups = json_array();
    for (unsigned g = 0; cl->node && g < cl->groups; g++)
        json_array_append_new(groups, group_report(cl, g));
    const char *auth = cl->peer_tls ? "certificates" : cl->key.len ? "key" : "none";
    json_t *doc =
        json_pack("{s:s, s:I, s:s, s:o, s:o}", "cluster_id", cl->cfg.cluster_id, "node_id",
                  (json_int_t)cl->cfg.node_id, "peer_auth", auth, "nodes", nodes, "groups", groups);
    char *text = json_dumps(doc, JSON_COMPACT);
    json_decref(doc);
    rn_buf_append_str(out, text);
    rn_buf_append_str(out, "\n");
    free(text);
}

/* ---- who may call ---- */

rn_cluster_route_kind rn_cluster_route_kind_of(const char *path, size_t path_len, const char *query,
                                               size_t query_len) {
    static const char members[] = "cluster/members",
                      peer_reads[][24] = {"cluster/applied", "cluster/read-index", "cluster/blob",
                                          "cluster/incarnation"};
    static const char bytes[] = "cluster/bytes/", index[] = "cluster/index/";
    size_t ml = sizeof members - 1, bl = sizeof bytes - 1;
    if (path_is(path, path_len, "cluster"))
        return RN_CLUSTER_ROUTE_OPEN;
    for (size_t i = 0; i < sizeof peer_reads / sizeof peer_reads[0]; i++)
        if (path_is(path, path_len, peer_reads[i]))
            return RN_CLUSTER_ROUTE_PEER;
    if (path_len > bl && (memcmp(path, bytes, bl) == 0 || memcmp(path, index, bl) == 0))
        return RN_CLUSTER_ROUTE_PEER;
    if (path_len >= ml && memcmp(path, members, ml) == 0 && (path_len == ml || path[ml] == '/'))
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
    };
    for (size_t k = 0; cl->node && k < sizeof m / sizeof m[0]; k++) {
        rn_buf_appendf(out, "# HELP %s %s\n# TYPE %s %s\n", m[k].name, m[k].help, m[k].name,
                       m[k].type);
        for (unsigned g = 0; g < cl->groups; g++) {
            consensus_group_info i;
            cluster_group_info(cl, g, &i);
            uint64_t v[] = {
                i.term,          i.leader_id,          i.leader_ready, i.commit_index,
                i.applied_index, i.leader_changes,     i.snapshots,    i.last_snapshot_bytes,
                i.restores,      i.proposals_inflight, i.nudges};
            rn_buf_appendf(out, "%s{group=\"%u\"} %llu\n", m[k].name, g, (unsigned long long)v[k]);
        }
    }
    rn_buf_appendf(out,
                   "# HELP runnel_cluster_gap_streams Streams waiting for bytes from peers.\n"
                   "# TYPE runnel_cluster_gap_streams gauge\nrunnel_cluster_gap_streams %u\n",
                   cl->fetcher ? rn_fetcher_pending(cl->fetcher) : 0);
    rn_health_metrics(cl, out);
    rn_peer_auth_metrics(out);
}

static void answer(rn_request *req, const char *type, rn_buf *body) {
    rn_buf h = {0};
    rn_reply_common(&h);
    rn_buf_appendf(&h, "Content-Type: %s\r\nCache-Control: no-store\r\n", type);
    rn_http_respond(req, 200, &h, body);
}

/* A query parameter that must be a decimal integer; -1 when absent or not. */
static int query_u64(const char *query, size_t len, const char *name, uint64_t *out) {
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
        query_u64(query, query_len, "from", &from) || query_u64(query, query_len, "to", &to)) {
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
        answer(req, "application/octet-stream", &body);
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
        n > 0 && (size_t)n < sizeof key && query_u64(query, query_len, "cold", &cold) == 0 &&
        cold <= 1;
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
        answer(req, "application/json", &body);
        return 1;
    }
    if (get && path_is(path, path_len, "cluster/applied")) {
        rn_touches_apply(cl->engine, query, query_len);
        rn_buf_append_str(&body, "applied");
        for (unsigned g = 0; cl->node && g < cl->groups; g++) {
            consensus_group_info info;
            cluster_group_info(cl, g, &info);
            rn_buf_appendf(&body, " %llu", (unsigned long long)info.applied_index);
        }
        rn_buf_append_str(&body, "\n");
        rn_health_status_line(cl, &body);
        rn_identity_status_line(cl, &body);
        answer(req, "text/plain", &body);
        return 1;
    }
    for (size_t i = 0; get && i < sizeof numeric_routes / sizeof numeric_routes[0]; i++) {
        if (!path_is(path, path_len, numeric_routes[i].path))
            continue;
        uint64_t v;
        if (query_u64(query, query_len, numeric_routes[i].param, &v) != 0)
            rn_reply_error(req, RN_E_INVALID_REQUEST, NULL);
        else
            numeric_routes[i].handle(cl, req, v);
        return 1;
    }
    if (get && path_is(path, path_len, "cluster/blob")) {
        blob_for_peer(cl, req, query, query_len);
        return 1;
    }
    if (rn_membership_handle(cl, req, path, path_len, query, query_len))
        return 1;
    static const char bytes[] = "cluster/bytes/", index[] = "cluster/index/";
    size_t bl = sizeof bytes - 1;
    if (get && path_len > bl && (memcmp(path, bytes, bl) == 0 || memcmp(path, index, bl) == 0)) {
        copy_for_peer(cl, req, path[8] == 'i', path + bl, path_len - bl, query, query_len);
        return 1;
    }
    return 0;
}
