/*
 * membership.c — the operators' routes that change the cluster's nodes.
 * See membership.h.
 */
#include "cluster/membership.h"
#include "cluster/cluster_config.h"
#include "cluster/cluster_int.h"
#include "cluster/placement_driver.h"
#include "consensus/wire.h"
#include "protocol/params.h"
#include "protocol/reply.h"
#include "util/log.h"
#include "util/text.h"

#include <assert.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RELAY_TIMEOUT_MS 10000

typedef enum { OP_ADD, OP_LEAVE, OP_DRAIN, OP_UNDRAIN } op_kind;

/* A parsed request. */
typedef struct {
    op_kind kind;
    uint64_t id;
    char raft[RN_META_RAFT_MAX];
    char url[RN_META_URL_MAX];
    char peer_url[RN_META_URL_MAX]; /* "": none */
} op;

/* A query parameter's value (decoded) into out as a C string; 0, or -1
 * when absent, malformed or too long for cap with its terminator. */
static int param(const char *q, size_t len, const char *name, char *out, size_t cap) {
    long n;
    rn_param_fault f;
    if (rn_param_query(q, len, name, RN_PARAM_LENIENT, out, cap, &n, &f) != 0 || n <= 0 ||
        n >= (long)cap)
        return -1;
    out[n] = '\0'; /* rn_param_query does not terminate it */
    return 0;
}

bool rn_membership_is_local(const char *query, size_t query_len) {
    char scope[8];
    return param(query, query_len, "scope", scope, sizeof scope) == 0 &&
           strcmp(scope, "local") == 0;
}

/* The route's base ("cluster/members" or "cluster/drain") and the rest
 * after it ("" or "/N"). */
static const char *route_base(const char *path, size_t len, size_t *base_len) {
    static const char *const bases[] = {"cluster/members", "cluster/drain"};
    *base_len = 0;
    for (size_t k = 0; k < 2; k++) {
        size_t bl = strlen(bases[k]);
        if (len >= bl && memcmp(path, bases[k], bl) == 0 && (len == bl || path[bl] == '/')) {
            *base_len = bl;
            return bases[k];
        }
    }
    return NULL;
}

bool rn_membership_route(const char *path, size_t path_len) {
    size_t bl;
    return route_base(path, path_len, &bl) != NULL;
}

/* An http(s) URL of printable ASCII without quotes, backslashes or commas
 * (that fits: param() checked), its trailing slashes dropped. */
static int valid_url(char *url) {
    size_t n = strlen(url);
    int ok = rn_iprefix(url, n, "http://") || rn_iprefix(url, n, "https://");
    for (size_t i = 0; ok && i < n; i++)
        ok = url[i] > ' ' && url[i] < 0x7f && url[i] != '"' && url[i] != '\\' && url[i] != ',';
    while (n > 0 && url[n - 1] == '/')
        url[--n] = 0;
    return ok;
}

/* An optional query parameter: absent leaves out empty; 0, or -1 when it
 * is malformed or too long. */
static int optional_param(const char *q, size_t len, const char *name, char *out, size_t cap) {
    long n;
    rn_param_fault f;
    if (rn_param_query(q, len, name, RN_PARAM_LENIENT, out, cap, &n, &f) != 0)
        return -1;
    return n < 0 ? 0 : param(q, len, name, out, cap);
}

#define PARSED (-1) /* parse(): the request is well formed */

/* Parses the request into o; returns PARSED, or the error to answer. */
static int parse(rn_request *req, const char *path, size_t path_len, const char *query,
                 size_t query_len, op *o) {
    size_t bl;
    const char *base = route_base(path, path_len, &bl);
    assert(base); /* the router calls this only for rn_membership_route's paths */
    int members = strcmp(base, "cluster/members") == 0;
    int post = req->method == RN_HTTP_POST, del = req->method == RN_HTTP_DELETE;
    memset(o, 0, sizeof *o);
    if (members && post && path_len == bl) {
        char id_text[8];
        o->kind = OP_ADD;
        struct sockaddr_storage sa;
        if (param(query, query_len, "id", id_text, sizeof id_text) ||
            rn_parse_strict_u64(id_text, strlen(id_text), 255, &o->id) || o->id == 0 ||
            param(query, query_len, "raft", o->raft, sizeof o->raft) ||
            rn_wire_parse_address(o->raft, &sa) != 0 ||
            param(query, query_len, "url", o->url, sizeof o->url) || !valid_url(o->url) ||
            optional_param(query, query_len, "peer_url", o->peer_url, sizeof o->peer_url) ||
            (o->peer_url[0] && !valid_url(o->peer_url)))
            return RN_E_INVALID_REQUEST;
        return PARSED;
    }
    if ((post || del) && path_len > bl + 1) {
        o->kind = members ? OP_LEAVE : post ? OP_DRAIN : OP_UNDRAIN;
        if ((members && !del) ||
            rn_parse_strict_u64(path + bl + 1, path_len - bl - 1, 255, &o->id) || o->id == 0)
            return members && !del ? RN_E_METHOD_NOT_ALLOWED : RN_E_INVALID_REQUEST;
        return PARSED;
    }
    return RN_E_METHOD_NOT_ALLOWED;
}

/* ---- the answer ---- */

static void answer_node(rn_request *req, const rn_cluster *cl, uint64_t id) {
    const rn_meta_node *n = rn_meta_node_get(&cl->meta, (unsigned)id);
    static const char *const states[] = {"?", "active", "leaving", "removed"};
    rn_buf body = {0};
    rn_buf_appendf(&body,
                   "{\"node\":%" PRIu64 ",\"intent\":\"%s\",\"state\":\"%s\",\"drained\":%s,"
                   "\"raft\":\"%s\",\"url\":\"%s\"",
                   id, n->state == RN_NODE_ACTIVE ? "voter" : "removed", states[n->state],
                   n->drained ? "true" : "false", n->raft, n->url);
    if (n->peer_url[0])
        rn_buf_appendf(&body, ",\"peer_url\":\"%s\"", n->peer_url);
    rn_buf_append_str(&body, "}\n");
    cluster_answer(req, 202, "application/json", &body);
}

typedef struct {
    rn_cluster *cl;
    rn_request *req;
    uint64_t id;
} proposal;

static void committed(void *arg, consensus_status st, const rn_meta_result *results, unsigned n) {
    proposal *p = arg;
    rn_request *req = p->req;
    if (!rn_request_gone(req)) {
        rn_meta_result r = st == CONSENSUS_OK && n ? results[0] : RN_META_MALFORMED;
        if (st != CONSENSUS_OK) {
            rn_buf h = {0};
            rn_buf_append_str(&h, "Retry-After: 1\r\n");
            rn_reply_error(
                req, st == CONSENSUS_OUTCOME_UNKNOWN ? RN_E_OUTCOME_UNKNOWN : RN_E_NO_LEADER, &h);
        } else if (r == RN_META_OK || r == RN_META_UNCHANGED) {
            answer_node(req, p->cl, p->id);
        } else {
            rn_reply_error(req,
                           r == RN_META_UNKNOWN_NODE   ? RN_E_NOT_FOUND
                           : r == RN_META_CONFLICT     ? RN_E_NODE_CONFLICT
                           : r == RN_META_NODE_REMOVED ? RN_E_NODE_REMOVED
                           : r == RN_META_FULL         ? RN_E_NODES_FULL
                                                       : RN_E_INVALID_REQUEST,
                           NULL);
        }
        if (r == RN_META_OK)
            rn_log(RN_LOG_INFO, "cluster_members", "node %" PRIu64 ": change committed", p->id);
    }
    rn_request_release(req);
    free(p);
}

/* On the metadata group's leader: proposes the change. */
static void propose(rn_cluster *cl, rn_request *req, const op *o) {
    rn_buf entry = {0};
    switch (o->kind) {
    case OP_ADD:
        rn_meta_cmd_node_add(&entry, (unsigned)o->id, o->raft, o->url, o->peer_url);
        break;
    case OP_LEAVE:
        rn_meta_cmd_node_state(&entry, (unsigned)o->id, RN_NODE_LEAVING);
        break;
    case OP_DRAIN:
    case OP_UNDRAIN:
        rn_meta_cmd_node_drain(&entry, (unsigned)o->id, o->kind == OP_DRAIN);
        break;
    }
    proposal *p = rn_xmalloc(sizeof *p);
    *p = (proposal){cl, req, o->id};
    rn_request_hold(req);
    cluster_meta_propose(cl, &entry, committed, p);
    rn_buf_free(&entry);
}

/* ---- relaying to the metadata group's leader ---- */

typedef struct relay {
    rn_cluster *cl;
    rn_list_node node; /* on cl->forwards */
    rn_request *req;
    rn_fetch *inflight;
} relay;

static void relay_end(relay *r) {
    rn_list_remove(&r->cl->forwards, &r->node);
    rn_request_release(r->req);
    free(r);
}

static void relayed(void *arg, const rn_fetch_result *res) {
    relay *r = arg;
    r->inflight = NULL;
    if (!rn_request_gone(r->req)) {
        if (res->failure == RN_FETCH_ANSWERED && res->status >= 200 && res->status < 600) {
            rn_buf h = {0}, body = {0};
            rn_reply_common(&h);
            rn_buf_append_str(&h, "Content-Type: application/json\r\nCache-Control: no-store\r\n");
            size_t len;
            const char *retry = rn_fetch_header(res, "retry-after", &len);
            if (retry)
                rn_buf_appendf(&h, "Retry-After: %.*s\r\n", (int)len, retry);
            rn_buf_append(&body, res->body, res->body_len);
            rn_http_respond(r->req, (int)res->status, &h, &body);
        } else {
            rn_buf h = {0};
            rn_buf_append_str(&h, "Retry-After: 1\r\n");
            rn_reply_error(r->req, RN_E_NO_LEADER, &h);
        }
    }
    relay_end(r);
}

/* Sends the request on to the metadata group's leader (URL base). */
static void relay_to(rn_cluster *cl, rn_request *req, const char *base) {
    char url[2600];
    const char *q = memchr(req->target, '?', req->target_len);
    size_t plen = q ? (size_t)(q - req->target) : req->target_len;
    snprintf(url, sizeof url, "%s%.*s?%.*s%sscope=local", base, (int)plen, req->target,
             q ? (int)(req->target_len - plen - 1) : 0, q ? q + 1 : "",
             q && req->target_len > plen + 1 ? "&" : "");
    relay *r = rn_xcalloc(1, sizeof *r);
    r->cl = cl;
    r->req = req;
    rn_request_hold(req);
    rn_list_push_front(&cl->forwards, &r->node);
    rn_fetch_request fr = {.method = req->method == RN_HTTP_POST ? "POST" : "DELETE",
                           .url = url,
                           .body_fd = -1,
                           .sink_fd = -1,
                           .sink_cap = 65536,
                           .timeout_ms = RELAY_TIMEOUT_MS};
    r->inflight = rn_outbound_start(cl->http, &fr, relayed, r);
    if (!r->inflight) {
        rn_buf h = {0};
        rn_buf_append_str(&h, "Retry-After: 1\r\n");
        rn_reply_error(req, RN_E_NO_LEADER, &h);
        relay_end(r);
    }
}

int rn_membership_handle(rn_cluster *cl, rn_request *req, const char *path, size_t path_len,
                         const char *query, size_t query_len) {
    if (!rn_membership_route(path, path_len))
        return 0;
    op o;
    int err = parse(req, path, path_len, query, query_len, &o);
    if (err != PARSED) {
        rn_buf extra = {0};
        if (err == RN_E_METHOD_NOT_ALLOWED)
            rn_buf_append_str(&extra, "Allow: POST (cluster/members, cluster/drain/N), DELETE "
                                      "(cluster/members/N, cluster/drain/N)\r\n");
        rn_reply_error(req, (rn_error)err, &extra);
        return 1;
    }
    unsigned meta = cl->groups;
    if (cl->node && consensus_leader_ready(cl->node, meta)) {
        propose(cl, req, &o);
        return 1;
    }
    consensus_group_info info = {0};
    if (cl->node)
        consensus_group_info_get(cl->node, meta, &info);
    const rn_peer_config *leader =
        info.leader_id != cl->cfg.node_id ? cluster_peer(cl, info.leader_id) : NULL;
    if (!leader || rn_membership_is_local(query, query_len)) {
        rn_buf h = {0};
        rn_buf_append_str(&h, "Retry-After: 1\r\n");
        rn_reply_error(req, RN_E_NO_LEADER, &h);
        return 1;
    }
    relay_to(cl, req, rn_cluster_peer_url(leader));
    return 1;
}

void rn_membership_stop(rn_cluster *cl) {
    while (!rn_list_empty(&cl->forwards)) {
        relay *r = rn_list_entry(cl->forwards.first, relay, node);
        if (r->inflight)
            rn_fetch_cancel(r->inflight);
        relay_end(r);
    }
}
