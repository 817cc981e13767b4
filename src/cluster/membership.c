/*
 * membership.c — intents of membership, their file, the reconciler and the
 * admin routes. See membership.h.
 */
#include "cluster/membership.h"
#include "cluster/cluster_config.h"
#include "cluster/cluster_int.h"
#include "cluster/wire.h"
#include "protocol/params.h"
#include "protocol/reply.h"
#include "util/files.h"
#include "util/log.h"
#include "util/text.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MEMBERS_FILE "cluster-members"
#define RECONCILE_MS 1000
#define FORWARD_RETRY_MS 2000
#define MAX_MEMBERS 64

/* ---- the peers table and its file ---- */

/* The index of node id in the peers table, or -1. */
static int peer_index(const rn_cluster *cl, uint64_t id) {
    for (int i = 0; i < cl->cfg.n_peers; i++)
        if (cl->cfg.peers[i].id == id)
            return i;
    return -1;
}

/* Records node id (address, URL and peer URL, "" for none) with its
 * intent. Returns its index, or -1 when the table is full or the id is
 * known with another address or URL. */
static int record(rn_cluster *cl, uint64_t id, const char *raft, const char *url,
                  const char *peer_url, int removed) {
    int i = peer_index(cl, id);
    if (i >= 0) {
        const rn_peer_config *p = &cl->cfg.peers[i];
        if (strcmp(p->raft, raft) != 0 || strcmp(p->url, url) != 0 ||
            strcmp(p->peer_url, peer_url) != 0)
            return -1;
    } else {
        if (cl->cfg.n_peers == RN_MAX_PEERS)
            return -1;
        i = cl->cfg.n_peers++;
        rn_peer_config *p = &cl->cfg.peers[i];
        p->id = id;
        snprintf(p->raft, sizeof p->raft, "%s", raft);
        snprintf(p->url, sizeof p->url, "%s", url);
        snprintf(p->peer_url, sizeof p->peer_url, "%s", peer_url);
    }
    cl->intent[i] = removed ? INTENT_REMOVED : INTENT_VOTER;
    return i;
}

/* Writes every explicit intent to <data>/cluster-members. */
static int save(rn_cluster *cl) {
    rn_buf b = {0};
    for (int i = 0; i < cl->cfg.n_peers; i++)
        if (cl->intent[i] != INTENT_NONE)
            rn_buf_appendf(&b, "%s %" PRIu64 " %s %s%s%s\n",
                           cl->intent[i] == INTENT_REMOVED ? "removed" : "voter",
                           cl->cfg.peers[i].id, cl->cfg.peers[i].raft, cl->cfg.peers[i].url,
                           cl->cfg.peers[i].peer_url[0] ? " " : "", cl->cfg.peers[i].peer_url);
    int rc = rn_atomic_write_file(cl->cfg.data_dir, MEMBERS_FILE, b.data ? b.data : (uint8_t *)"",
                                  b.len, 0644);
    rn_buf_free(&b);
    return rc;
}

/* An http(s) URL of printable ASCII that fits a peer's URL fields. */
static int valid_url(const char *url) {
    size_t n = strlen(url);
    int ok = n < sizeof((rn_peer_config *)0)->url &&
             (rn_iprefix(url, n, "http://") || rn_iprefix(url, n, "https://"));
    for (size_t i = 0; ok && i < n; i++)
        ok = url[i] > ' ' && url[i] < 0x7f && url[i] != '"' && url[i] != '\\' && url[i] != ',';
    return ok;
}

/* Checks an intent's parts: id 1..255, a numeric Raft address, an
 * http(s) URL, and a peer URL ("" or another). */
static int valid(uint64_t id, const char *raft, const char *url, const char *peer_url) {
    struct sockaddr_storage sa;
    return id >= 1 && id <= 255 && strlen(raft) < sizeof((rn_peer_config *)0)->raft &&
           rn_wire_parse_address(raft, &sa) == 0 && valid_url(url) &&
           (!peer_url[0] || valid_url(peer_url));
}

int rn_membership_load(rn_cluster *cl, char *err, size_t errcap) {
    rn_buf b = {0};
    int rc = rn_read_file(cl->cfg.data_dir, MEMBERS_FILE, &b);
    if (rc == -ENOENT)
        return 0;
    if (rc < 0) {
        snprintf(err, errcap, "cannot read %s/%s: %s", cl->cfg.data_dir, MEMBERS_FILE,
                 strerror(-rc));
        return -1;
    }
    rn_buf_append_byte(&b, 0);
    char *save_ptr = NULL;
    for (char *line = strtok_r((char *)b.data, "\n", &save_ptr); line;
         line = strtok_r(NULL, "\n", &save_ptr)) {
        char kind[16], raft[64], url[512], peer_url[512] = "";
        uint64_t id;
        int n = sscanf(line, "%15s %" SCNu64 " %63s %511s %511s", kind, &id, raft, url, peer_url);
        if (n < 4 || !valid(id, raft, url, peer_url) ||
            (strcmp(kind, "voter") != 0 && strcmp(kind, "removed") != 0) ||
            record(cl, id, raft, url, peer_url, strcmp(kind, "removed") == 0) < 0) {
            snprintf(err, errcap, "%s/%s is damaged (line \"%.100s\"); refusing to start",
                     cl->cfg.data_dir, MEMBERS_FILE, line);
            rn_buf_free(&b);
            return -1;
        }
    }
    rn_buf_free(&b);
    return 0;
}

/* ---- reconciling the groups this node leads ---- */

typedef struct {
    rn_cluster *cl;
    unsigned group;
    uint64_t id;
    const char *what;
} change;

static void change_done(void *arg, consensus_status st) {
    change *ch = arg;
    ch->cl->member_busy[ch->group] = 0;
    if (st == CONSENSUS_OK)
        rn_log(RN_LOG_INFO, "cluster_members", "group %u: node %" PRIu64 " %s", ch->group, ch->id,
               ch->what);
    else if (st != CONSENSUS_NOT_LEADER && st != CONSENSUS_BUSY)
        rn_log(RN_LOG_WARN, "cluster_members", "group %u: node %" PRIu64 " not %s (%s); again soon",
               ch->group, ch->id, ch->what, consensus_status_name(st));
    free(ch);
}

/* Starts the first change the group needs, if any. */
static void reconcile_group(rn_cluster *cl, unsigned g) {
    consensus_member m[MAX_MEMBERS];
    unsigned n = consensus_members(cl->node, g, m, MAX_MEMBERS);
    for (int i = 0; i < cl->cfg.n_peers; i++) {
        const rn_peer_config *p = &cl->cfg.peers[i];
        const consensus_member *found = NULL;
        for (unsigned k = 0; k < n && k < MAX_MEMBERS; k++)
            if (m[k].id == p->id)
                found = &m[k];
        int voter = cl->intent[i] != INTENT_REMOVED;
        const char *what = voter && !found                           ? "added as a spare"
                           : voter && found->role != CONSENSUS_VOTER ? "promoted to voter"
                           : !voter && found                         ? "removed"
                                                                     : NULL;
        if (!what)
            continue;
        change *ch = rn_xmalloc(sizeof *ch);
        *ch = (change){cl, g, p->id, what};
        cl->member_busy[g] = 1;
        if (!found)
            consensus_add(cl->node, g, p->id, p->raft, change_done, ch);
        else if (voter)
            consensus_assign(cl->node, g, p->id, CONSENSUS_VOTER, change_done, ch);
        else
            consensus_remove(cl->node, g, p->id, change_done, ch);
        return;
    }
}

static void on_reconcile(uv_timer_t *t) {
    rn_cluster *cl = t->data;
    for (unsigned g = 0; cl->node && g < cl->groups; g++)
        if (!cl->member_busy[g] && consensus_leader_ready(cl->node, g))
            reconcile_group(cl, g);
}

/* ---- passing intents on to the peers ---- */

/* An intent on its way to one peer, retried until the peer took it. */
typedef struct forward {
    rn_cluster *cl;
    rn_list_node node; /* on cl->forwards */
    char url[2200];    /* a peer's URL, then the intent: two more URLs and an address */
    const char *method;
    rn_fetch *inflight;
    uv_timer_t retry;
} forward;

static void forward_send(forward *fw);

static void forward_again(uv_timer_t *t) {
    forward_send(t->data);
}

static void forward_closed(uv_handle_t *h) {
    free(h->data);
}

static void forward_unlink(forward *fw) {
    rn_list_remove(&fw->cl->forwards, &fw->node);
    uv_close((uv_handle_t *)&fw->retry, forward_closed);
}

static void forward_answered(void *arg, const rn_fetch_result *r) {
    forward *fw = arg;
    fw->inflight = NULL;
    if (r->failure == RN_FETCH_ANSWERED && r->status == 202) {
        forward_unlink(fw);
        return;
    }
    uv_timer_start(&fw->retry, forward_again, FORWARD_RETRY_MS, 0);
}

static void forward_send(forward *fw) {
    rn_fetch_request req = {
        .method = fw->method, .url = fw->url, .body_fd = -1, .sink_fd = -1, .timeout_ms = 5000};
    fw->inflight = rn_outbound_start(fw->cl->http, &req, forward_answered, fw);
    if (!fw->inflight)
        uv_timer_start(&fw->retry, forward_again, FORWARD_RETRY_MS, 0);
}

/* Passes the intent on node id to every other peer (scope=local there). */
static void forward_all(rn_cluster *cl, uint64_t id, int removed) {
    int k = peer_index(cl, id);
    for (int i = 0; i < cl->cfg.n_peers; i++) {
        const rn_peer_config *p = &cl->cfg.peers[i];
        if (p->id == cl->cfg.node_id)
            continue;
        forward *fw = rn_xcalloc(1, sizeof *fw);
        fw->cl = cl;
        fw->method = removed ? "DELETE" : "POST";
        const rn_peer_config *n = &cl->cfg.peers[k];
        if (removed)
            snprintf(fw->url, sizeof fw->url, "%s/__runnel/cluster/members/%" PRIu64 "?scope=local",
                     rn_cluster_peer_url(p), id);
        else
            snprintf(fw->url, sizeof fw->url,
                     "%s/__runnel/cluster/members?id=%" PRIu64 "&raft=%s&url=%s%s%s&scope=local",
                     rn_cluster_peer_url(p), id, n->raft, n->url,
                     n->peer_url[0] ? "&peer_url=" : "", n->peer_url);
        uv_timer_init(cl->loop, &fw->retry);
        fw->retry.data = fw;
        rn_list_push_front(&cl->forwards, &fw->node);
        forward_send(fw);
    }
}

/* ---- the admin routes ---- */

static void answer_intent(rn_request *req, const rn_cluster *cl, int i) {
    rn_buf h = {0}, body = {0};
    rn_reply_common(&h);
    rn_buf_append_str(&h, "Content-Type: application/json\r\nCache-Control: no-store\r\n");
    const rn_peer_config *p = &cl->cfg.peers[i];
    rn_buf_appendf(&body, "{\"node\":%" PRIu64 ",\"intent\":\"%s\",\"raft\":\"%s\",\"url\":\"%s\"",
                   p->id, cl->intent[i] == INTENT_REMOVED ? "removed" : "voter", p->raft, p->url);
    if (p->peer_url[0])
        rn_buf_appendf(&body, ",\"peer_url\":\"%s\"", p->peer_url);
    rn_buf_append_str(&body, "}\n");
    rn_http_respond(req, 202, &h, &body);
}

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

/* The same for an optional parameter: absent leaves out empty. */
static int optional_param(const char *q, size_t len, const char *name, char *out, size_t cap) {
    long n;
    rn_param_fault f;
    if (rn_param_query(q, len, name, RN_PARAM_LENIENT, out, cap, &n, &f) != 0)
        return -1;
    return n < 0 ? 0 : param(q, len, name, out, cap);
}

bool rn_membership_is_local(const char *query, size_t query_len) {
    char scope[8];
    return param(query, query_len, "scope", scope, sizeof scope) == 0 &&
           strcmp(scope, "local") == 0;
}

int rn_membership_handle(rn_cluster *cl, rn_request *req, const char *path, size_t path_len,
                         const char *query, size_t query_len) {
    static const char base[] = "cluster/members";
    size_t bl = sizeof base - 1;
    if (path_len < bl || memcmp(path, base, bl) != 0 || (path_len > bl && path[bl] != '/'))
        return 0;
    char id_text[8] = "", raft[64] = "", url[512] = "", peer_url[512] = "";
    int local = rn_membership_is_local(query, query_len);
    uint64_t id = 0;
    int removed = req->method == RN_HTTP_DELETE;
    if (removed) {
        if (path_len <= bl + 1 || rn_parse_strict_u64(path + bl + 1, path_len - bl - 1, 255, &id) ||
            id == 0 || peer_index(cl, id) < 0) {
            rn_reply_error(
                req, peer_index(cl, id) < 0 && id ? RN_E_NOT_FOUND : RN_E_INVALID_REQUEST, NULL);
            return 1;
        }
        int i = peer_index(cl, id);
        snprintf(raft, sizeof raft, "%s", cl->cfg.peers[i].raft);
        snprintf(url, sizeof url, "%s", cl->cfg.peers[i].url);
        snprintf(peer_url, sizeof peer_url, "%s", cl->cfg.peers[i].peer_url);
    } else if (req->method == RN_HTTP_POST && path_len == bl) {
        if (param(query, query_len, "id", id_text, sizeof id_text) ||
            rn_parse_strict_u64(id_text, strlen(id_text), 255, &id) ||
            param(query, query_len, "raft", raft, sizeof raft) ||
            param(query, query_len, "url", url, sizeof url) ||
            optional_param(query, query_len, "peer_url", peer_url, sizeof peer_url) ||
            !valid(id, raft, url, peer_url)) {
            rn_reply_error(req, RN_E_INVALID_REQUEST, NULL);
            return 1;
        }
    } else {
        rn_buf extra = {0};
        rn_buf_append_str(&extra, "Allow: POST (cluster/members), DELETE (cluster/members/N)\r\n");
        rn_reply_error(req, RN_E_METHOD_NOT_ALLOWED, &extra);
        return 1;
    }
    int i = record(cl, id, raft, url, peer_url, removed);
    if (i < 0) {
        rn_reply_error(req, RN_E_STREAM_EXISTS_CONFLICT, NULL);
        return 1;
    }
    int rc = save(cl);
    if (rc < 0) {
        rn_log(RN_LOG_ERROR, "cluster_members", "cannot write %s/%s: %s", cl->cfg.data_dir,
               MEMBERS_FILE, strerror(-rc));
        rn_reply_error(req, RN_E_INTERNAL, NULL);
        return 1;
    }
    rn_log(RN_LOG_INFO, "cluster_members", "node %" PRIu64 " (%s, %s) is %s", id, raft, url,
           removed ? "to be removed" : "to be a voter");
    if (!local)
        forward_all(cl, id, removed);
    answer_intent(req, cl, i);
    return 1;
}

void rn_membership_start(rn_cluster *cl) {
    uv_timer_init(cl->loop, &cl->reconcile);
    cl->reconcile.data = cl;
    uv_timer_start(&cl->reconcile, on_reconcile, RECONCILE_MS, RECONCILE_MS);
    uv_unref((uv_handle_t *)&cl->reconcile);
}

void rn_membership_stop(rn_cluster *cl) {
    uv_close((uv_handle_t *)&cl->reconcile, NULL);
    while (!rn_list_empty(&cl->forwards)) {
        forward *fw = rn_list_entry(cl->forwards.first, forward, node);
        if (fw->inflight)
            rn_fetch_cancel(fw->inflight);
        forward_unlink(fw);
    }
}
