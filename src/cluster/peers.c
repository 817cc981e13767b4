/*
 * peers.c — what nodes tell each other of themselves: once a second each
 * node asks every peer for its status (GET /__runnel/cluster/status, its
 * query naming the streams read here since the last round: touches.h) and
 * keeps the answer: per group (the metadata group last) its applied index,
 * the leader and term it knows, its own role and the streams it still
 * fetches bytes for, and the configuration of each group it leads. From
 * these a node knows who answers (cluster_alive), who leads a group it
 * does not host (routing, forwarding), how far a new replica got
 * (reconcile.c), and the metadata group's leader records the groups'
 * configurations in the table (placement_driver.c). A configuration is
 * reported only once committed: a node removed by a change that may still
 * be lost must not drop its replica.
 *
 * The status is JSON: {"node":N,"g":[[applied,term,leader,role,gaps],...],
 * "c":[[group,term,[[id,role],...]],...],"health":LINE,"incarnation":LINE};
 * role 0 means the group is not hosted there, 1 spare, 2 standby, 3 voter;
 * the two lines are the node's health (health.h) and its data directory's
 * incarnation (identity.h).
 */
#include "cluster/cluster_int.h"
#include "cluster/cluster_config.h"
#include "cluster/health.h"
#include "cluster/identity.h"
#include "consensus/peer_auth.h"
#include "cluster/touches.h"
#include "util/clock.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define POLL_MS 1000
#define POLL_TIMEOUT_MS 900
#define ALIVE_MS 3500 /* a peer that reported within this long answers */

const rn_peer_config *cluster_peer(const rn_cluster *cl, uint64_t id) {
    return id ? rn_cluster_peer(&cl->cfg, id) : NULL;
}

const peer_status *cluster_peer_status(const rn_cluster *cl, uint64_t id) {
    for (int i = 0; i < cl->cfg.n_peers; i++)
        if (cl->cfg.peers[i].id == id)
            return cl->peers[i].known ? &cl->peers[i] : NULL;
    return NULL;
}

void cluster_alive(const rn_cluster *cl, uint8_t alive[256]) {
    memset(alive, 0, 256);
    uint64_t now = rn_mono_ms();
    alive[cl->cfg.node_id] = 1;
    for (int i = 0; i < cl->cfg.n_peers; i++)
        if (cl->peers[i].known && now - cl->peers[i].answered_ms < ALIVE_MS)
            alive[cl->cfg.peers[i].id] = 1;
}

int cluster_voter_here(const rn_cluster *cl, unsigned g) {
    consensus_member m[RN_META_MAX_NODES];
    unsigned n = cl->node ? consensus_members(cl->node, g, m, RN_META_MAX_NODES) : 0;
    for (unsigned k = 0; k < n && k < RN_META_MAX_NODES; k++)
        if (m[k].id == cl->cfg.node_id)
            return m[k].role == CONSENSUS_VOTER;
    return 0;
}

uint64_t cluster_leader_of(const rn_cluster *cl, unsigned group, uint64_t *term) {
    uint64_t best = 0, best_term = 0;
    if (cl->node && consensus_group_running(cl->node, group)) {
        consensus_group_info info;
        consensus_group_info_get(cl->node, group, &info);
        best = info.leader_id;
        best_term = info.term;
    }
    uint64_t now = rn_mono_ms();
    for (int i = 0; i < cl->cfg.n_peers; i++) {
        const peer_status *ps = &cl->peers[i];
        if (!ps->known || now - ps->answered_ms >= ALIVE_MS || !ps->g[group].role ||
            !ps->g[group].leader)
            continue;
        if (ps->g[group].term > best_term || (!best && ps->g[group].term == best_term)) {
            best = ps->g[group].leader;
            best_term = ps->g[group].term;
        }
    }
    if (term)
        *term = best_term;
    return best;
}

/* The configuration a leader reported for group at term, kept when it is
 * the newest seen. */
static void learn_config(rn_cluster *cl, unsigned group, uint64_t term,
                         const rn_meta_member *members, unsigned n) {
    led_config *lc = &cl->led[group];
    if (term < lc->term || n > RN_META_MAX_NODES)
        return;
    lc->term = term;
    lc->n = (uint8_t)n;
    memcpy(lc->members, members, n * sizeof members[0]);
}

/* This node's configuration of a group it leads, ascending by id. */
static unsigned own_config(const rn_cluster *cl, unsigned g, rn_meta_member *out) {
    consensus_member m[RN_META_MAX_NODES];
    unsigned n = consensus_members(cl->node, g, m, RN_META_MAX_NODES);
    if (n > RN_META_MAX_NODES)
        n = RN_META_MAX_NODES;
    for (unsigned k = 0; k < n; k++) {
        out[k] = (rn_meta_member){(uint8_t)m[k].id, (uint8_t)m[k].role};
        for (unsigned j = k; j > 0 && out[j - 1].id > out[j].id; j--) {
            rn_meta_member t = out[j];
            out[j] = out[j - 1];
            out[j - 1] = t;
        }
    }
    return n;
}

/* ---- the answer ---- */

static int own_role(const rn_cluster *cl, unsigned g) {
    consensus_member m[RN_META_MAX_NODES];
    unsigned n = consensus_members(cl->node, g, m, RN_META_MAX_NODES);
    for (unsigned k = 0; k < n && k < RN_META_MAX_NODES; k++)
        if (m[k].id == cl->cfg.node_id)
            return (int)m[k].role + 1;
    return consensus_group_running(cl->node, g) ? 1 : 0; /* running, not in it yet: a spare */
}

/* A line of health.h or identity.h as a JSON string, without its newline. */
static json_t *line(void (*write)(const rn_cluster *, rn_buf *), const rn_cluster *cl) {
    rn_buf b = {0};
    write(cl, &b);
    size_t len = b.len && b.data[b.len - 1] == '\n' ? b.len - 1 : b.len;
    json_t *s = json_stringn((const char *)b.data, len);
    rn_buf_free(&b);
    return s ? s : json_string("");
}

void cluster_peers_answer_status(rn_cluster *cl, rn_request *req) {
    json_t *groups = json_array(), *configs = json_array();
    for (unsigned g = 0; cl->node && g < cl->all_groups; g++) {
        consensus_group_info info;
        cluster_group_info(cl, g, &info);
        unsigned gaps =
            g < cl->groups && cl->fetcher ? rn_fetcher_pending_group(cl->fetcher, g) : 0;
        json_array_append_new(groups, json_pack("[I,I,I,i,i]", (json_int_t)info.applied_index,
                                                (json_int_t)info.term, (json_int_t)info.leader_id,
                                                own_role(cl, g), (int)gaps));
        if (!consensus_is_leader(cl->node, g) || !info.config_committed)
            continue;
        rn_meta_member m[RN_META_MAX_NODES];
        unsigned n = own_config(cl, g, m);
        json_t *members = json_array();
        for (unsigned k = 0; k < n; k++)
            json_array_append_new(members, json_pack("[i,i]", m[k].id, m[k].role));
        json_array_append_new(configs,
                              json_pack("[i,I,o]", (int)g, (json_int_t)info.term, members));
    }
    json_t *doc = json_pack("{s:I,s:o,s:o,s:o,s:o}", "node", (json_int_t)cl->cfg.node_id, "g",
                            groups, "c", configs, "health", line(rn_health_status_line, cl),
                            "incarnation", line(rn_identity_status_line, cl));
    char *text = json_dumps(doc, JSON_COMPACT);
    json_decref(doc);
    rn_buf body = {0};
    rn_buf_append_str(&body, text);
    free(text);
    cluster_answer(req, 200, "application/json", &body);
}

/* ---- asking ---- */

static json_int_t int_at(const json_t *a, size_t i) {
    const json_t *v = json_array_get(a, i);
    return json_is_integer(v) ? json_integer_value(v) : -1;
}

static json_int_t int_at_key(const json_t *o, const char *key) {
    const json_t *v = json_object_get(o, key);
    return json_is_integer(v) ? json_integer_value(v) : -1;
}

/* Reads a status answer into ps (and the node's led configurations);
 * anything malformed, or another node's (a removed node's address taken
 * by a new one), is ignored. */
static void read_status(peer_status *ps, const char *text, size_t len) {
    rn_cluster *cl = ps->cl;
    uint64_t peer_id = cl->cfg.peers[ps - cl->peers].id;
    json_t *doc = json_loadb(text, len, 0, NULL);
    json_t *groups = json_object_get(doc, "g"), *configs = json_object_get(doc, "c");
    if (!json_is_array(groups) || json_array_size(groups) != cl->all_groups ||
        !json_is_array(configs) || int_at_key(doc, "node") != (json_int_t)peer_id) {
        json_decref(doc);
        return;
    }
    for (unsigned g = 0; g < cl->all_groups; g++) {
        const json_t *e = json_array_get(groups, g);
        json_int_t v[5];
        for (size_t k = 0; k < 5; k++)
            v[k] = int_at(e, k);
        if (v[0] < 0 || v[1] < 0 || v[2] < 0 || v[2] > 255 || v[3] < 0 || v[3] > 3 || v[4] < 0)
            continue;
        ps->g[g] = (peer_group){(uint64_t)v[0], (uint64_t)v[1], (uint8_t)v[2], (uint8_t)v[3],
                                (uint32_t)v[4]};
    }
    size_t i;
    json_t *c;
    json_array_foreach(configs, i, c) {
        json_int_t g = int_at(c, 0), term = int_at(c, 1);
        const json_t *members = json_array_get(c, 2);
        if (g < 0 || g >= (json_int_t)cl->all_groups || term < 0 || !json_is_array(members) ||
            json_array_size(members) > RN_META_MAX_NODES)
            continue;
        rn_meta_member m[RN_META_MAX_NODES];
        unsigned n = 0, ok = 1;
        size_t k;
        json_t *mem;
        json_array_foreach(members, k, mem) {
            json_int_t id = int_at(mem, 0), role = int_at(mem, 1);
            ok &= id > 0 && id < 256 && role >= 0 && role <= 2 && (!n || m[n - 1].id < id);
            if (ok)
                m[n++] = (rn_meta_member){(uint8_t)id, (uint8_t)role};
        }
        if (ok)
            learn_config(cl, (unsigned)g, (uint64_t)term, m, n);
    }
    ps->known = 1;
    ps->answered_ms = rn_mono_ms();
    const json_t *health = json_object_get(doc, "health"),
                 *inc = json_object_get(doc, "incarnation");
    int h = json_is_string(health)
                ? rn_health_parse_status(json_string_value(health), json_string_length(health))
                : -1;
    if (h >= 0) {
        ps->health = h;
        ps->health_ms = uv_now(cl->loop);
    }
    if (json_is_string(inc))
        rn_identity_seen(cl, peer_id, json_string_value(inc), json_string_length(inc));
    json_decref(doc);
}

static void got_status(void *arg, const rn_fetch_result *r) {
    peer_status *ps = arg;
    ps->inflight = NULL;
    if (r->failure == RN_FETCH_ANSWERED && r->status == 200)
        read_status(ps, (const char *)r->body, r->body_len);
}

static void on_poll(uv_timer_t *t) {
    rn_cluster *cl = t->data;
    char touched[RN_TOUCHES_QUERY_MAX];
    rn_touches_query(cl->engine, touched); /* one round's, for every peer */
    for (unsigned g = 0; cl->node && g < cl->all_groups; g++) {
        consensus_group_info info;
        consensus_group_info_get(cl->node, g, &info);
        if (!consensus_is_leader(cl->node, g) || !info.config_committed)
            continue;
        rn_meta_member m[RN_META_MAX_NODES];
        unsigned n = own_config(cl, g, m);
        learn_config(cl, g, info.term, m, n);
    }
    for (int i = 0; i < cl->cfg.n_peers; i++) {
        peer_status *ps = &cl->peers[i];
        const rn_meta_node *m = rn_meta_node_get(&cl->meta, (unsigned)cl->cfg.peers[i].id);
        if (cl->cfg.peers[i].id == cl->cfg.node_id || ps->inflight ||
            (m && m->state == RN_NODE_REMOVED)) /* gone for good: its address may be another's */
            continue;
        if (!ps->g) { /* a peer added since the start */
            ps->cl = cl;
            ps->g = rn_xcalloc(cl->all_groups, sizeof *ps->g);
        }
        char url[600 + RN_TOUCHES_QUERY_MAX];
        snprintf(url, sizeof url, "%s/__runnel/cluster/status%s",
                 rn_cluster_peer_url(&cl->cfg.peers[i]), touched);
        rn_fetch_request req = {.method = "GET",
                                .url = url,
                                .body_fd = -1,
                                .sink_fd = -1,
                                .sink_cap = 1 << 20,
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
        cl->peers[i].g = rn_xcalloc(cl->all_groups, sizeof *cl->peers[i].g);
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
        free(cl->peers[i].g);
    cl->polling = 0;
}
