/*
 * forks.c — forks apart from their source across the cluster's groups:
 * the log's pin, unpin, fork_alive and fork_cut (engine/cmdlog.h) carried
 * to the leader of the group concerned, and that leader's peer routes;
 * and whether this node hosts a group (engine/inherit.c asks).
 *
 *   POST /__runnel/cluster/fork-pin?source=HEX&fork=ID[&ct=HEX][&offset=N]
 *        [&sub=N]   the source's leader pins fork ID (rn_engine_pin) and
 *        answers JSON: {"result": rn_result, and when pinned "source",
 *        "offset", "retained", "depth", "ttl", "expires", "ct"}; the
 *        conflicting content type as "ct" for RN_ERR_CONTENT_TYPE
 *   POST /__runnel/cluster/fork-unpin?source=ID&fork=ID   releases it
 *   GET  /__runnel/cluster/fork-alive?source=ID&fork=ID   "1" or "0": the
 *        fork's leader holds fork ID as a fork of that source (503 where
 *        this node does not lead the fork's group)
 *   POST /__runnel/cluster/fork-cut?source=ID&fork=ID[&offset=N]   the
 *        fork's leader cuts fork ID off that source's bytes below N (none:
 *        the source is purged; rn_engine_cut) and answers "1" once it and
 *        the forks apart of it are cut, "0" when it is not a fork of that
 *        source, 503 when it cannot tell
 *
 * Paths and content types travel as lowercase hex of their bytes. Where
 * this node leads the group asked, the engine is called directly, from a
 * zero timer (the log's calls never answer from inside). The requests are
 * signed peer requests (peers.c).
 */
#include "cluster/forks.h"
#include "cluster/cluster_config.h"
#include "cluster/cluster_int.h"
#include "protocol/params.h"
#include "protocol/reply.h"
#include "util/text.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ASK_TIMEOUT_MS 5000
#define MAX_TEXT 4096 /* a source path or content type, in bytes */

/* The URL of the leader of group g, or 0 when this node leads it (ready),
 * or -1 when no leader is known. */
static int leader_url(rn_cluster *cl, unsigned g, char *url, size_t cap, const char *route) {
    if (!cl->node)
        return -1;
    if (consensus_leader_ready(cl->node, g))
        return 0;
    consensus_group_info info;
    consensus_group_info_get(cl->node, g, &info);
    uint64_t term, leader = info.leader_id ? info.leader_id : cluster_leader_of(cl, g, &term);
    const rn_peer_config *p =
        leader && leader != cl->cfg.node_id ? rn_cluster_peer(&cl->cfg, leader) : NULL;
    if (!p)
        return -1;
    snprintf(url, cap, "%s/__runnel/cluster/%s", rn_cluster_peer_url(p), route);
    return 1;
}

static void append_hex(rn_buf *b, const char *s, size_t len) {
    static const char digits[] = "0123456789abcdef";
    for (size_t k = 0; k < len; k++) {
        char two[2] = {digits[(uint8_t)s[k] >> 4], digits[(uint8_t)s[k] & 15]};
        rn_buf_append(b, two, 2);
    }
}

/* Starts a signed request to url (no body); fn(arg, result) once. */
static int ask_peer(rn_cluster *cl, const char *method, const char *url, rn_fetch_fn fn,
                    void *arg) {
    rn_fetch_request req = {.method = method,
                            .url = url,
                            .body_fd = -1,
                            .sink_fd = -1,
                            .sink_cap = 64 * 1024,
                            .timeout_ms = ASK_TIMEOUT_MS};
    return rn_outbound_start(cl->http, &req, fn, arg) ? 0 : -1;
}

/* ---- deferred local calls ---- */

typedef struct deferred {
    uv_timer_t timer;
    rn_cluster *cl;
    void (*run)(struct deferred *d);
    rn_fork_pin_ask ask; /* its texts owned below */
    char *source, *ct;
    rn_fork_pin_done pin_done;
    rn_fork_alive_done alive_done;
    rn_fork_cut_done cut_done;
    void *arg;
    uint64_t source_id, fork_id, offset;
    rn_result refusal; /* a pin answered without asking */
} deferred;

static void deferred_closed(uv_handle_t *h) {
    deferred *d = h->data;
    free(d->source);
    free(d->ct);
    free(d);
}

static void deferred_fire(uv_timer_t *t) {
    deferred *d = t->data;
    d->run(d);
    uv_close((uv_handle_t *)&d->timer, deferred_closed);
}

static deferred *defer(rn_cluster *cl, void (*run)(deferred *d)) {
    deferred *d = rn_xcalloc(1, sizeof *d);
    d->cl = cl;
    d->run = run;
    uv_timer_init(cl->loop, &d->timer);
    d->timer.data = d;
    uv_timer_start(&d->timer, deferred_fire, 0, 0);
    return d;
}

/* ---- pin ---- */

static void pin_locally(deferred *d) {
    if (d->refusal) {
        rn_fork_pin_answer ans = {.result = d->refusal};
        d->pin_done(d->arg, &ans);
        return;
    }
    rn_engine_pin(d->cl->engine, &d->ask, d->pin_done, d->arg);
}

typedef struct {
    rn_fork_pin_done done;
    void *arg;
} pin_wait;

static void pin_answered(void *arg, const rn_fetch_result *r) {
    pin_wait *w = arg;
    rn_fork_pin_answer ans = {.result = RN_ERR_UNAVAILABLE}; /* the pin may have applied */
    json_t *doc = NULL;
    uint8_t *ct = NULL;
    if (r->failure == RN_FETCH_ANSWERED && r->status == 200)
        doc = json_loadb((const char *)r->body, r->body_len, 0, NULL);
    json_int_t result = -1, source = 0, offset = 0, retained = 0, depth = 0, ttl = -1, exp = -1;
    const char *cthex = NULL;
    if (doc &&
        json_unpack(doc, "{s:I, s?I, s?I, s?I, s?I, s?I, s?I, s?s}", "result", &result, "source",
                    &source, "offset", &offset, "retained", &retained, "depth", &depth, "ttl", &ttl,
                    "expires", &exp, "ct", &cthex) == 0 &&
        result >= 0) {
        size_t n = cthex ? strlen(cthex) : 0;
        ct = rn_xmalloc(n / 2 + 1);
        if (n % 2 == 0 && (!cthex || rn_parse_lower_hex(cthex, n, ct) == 0)) {
            ans = (rn_fork_pin_answer){.result = (rn_result)result,
                                       .source_id = (uint64_t)source,
                                       .fork_offset = (uint64_t)offset,
                                       .retained = (uint64_t)retained,
                                       .depth = (uint32_t)depth,
                                       .ttl_s = ttl,
                                       .expires_at_ms = exp,
                                       .content_type = (const char *)ct,
                                       .content_type_len = n / 2};
        }
    } else if (r->failure == RN_FETCH_ANSWERED && r->status == 503) {
        ans.result = RN_ERR_NO_LEADER; /* refused before anything was proposed */
    }
    w->done(w->arg, &ans);
    free(ct);
    json_decref(doc);
    free(w);
}

void cluster_fork_pin(void *arg, const rn_fork_pin_ask *ask, rn_fork_pin_done done, void *darg) {
    rn_cluster *cl = arg;
    char url[700];
    unsigned g = rn_raft_log_group(cl->log, ask->source, ask->source_len);
    int where = leader_url(cl, g, url, sizeof url, "fork-pin");
    if (where > 0) {
        rn_buf u = {0};
        rn_buf_appendf(&u, "%s?fork=%llu&source=", url, (unsigned long long)ask->fork_id);
        append_hex(&u, ask->source, ask->source_len);
        if (ask->content_type) {
            rn_buf_append_str(&u, "&ct=");
            append_hex(&u, ask->content_type, ask->content_type_len);
        }
        if (ask->has_fork_offset)
            rn_buf_appendf(&u, "&offset=%llu", (unsigned long long)ask->fork_offset);
        if (ask->fork_sub_offset)
            rn_buf_appendf(&u, "&sub=%llu", (unsigned long long)ask->fork_sub_offset);
        rn_buf_append(&u, "", 1);
        pin_wait *w = rn_xmalloc(sizeof *w);
        *w = (pin_wait){.done = done, .arg = darg};
        int rc = ask_peer(cl, "POST", (const char *)u.data, pin_answered, w);
        rn_buf_free(&u);
        if (rc == 0)
            return;
        free(w);
    }
    deferred *d = defer(cl, pin_locally);
    d->pin_done = done;
    d->arg = darg;
    d->refusal = where == 0 ? 0 : RN_ERR_NO_LEADER;
    d->ask = *ask;
    d->source = d->ask.source ? rn_xstrndup(ask->source, ask->source_len) : NULL;
    d->ct = ask->content_type ? rn_xstrndup(ask->content_type, ask->content_type_len) : NULL;
    d->ask.source = d->source;
    d->ask.content_type = d->ct;
}

/* ---- unpin ---- */

static void unpin_locally(deferred *d) {
    rn_engine_unpin(d->cl->engine, d->source_id, d->fork_id);
}

static void unpin_answered(void *arg, const rn_fetch_result *r) {
    (void)arg;
    if (r->failure != RN_FETCH_ANSWERED || r->status != 200)
        rn_log(RN_LOG_WARN, "forks",
               "a pin's release was not answered (%s): the sweep of "
               "orphan pins releases it",
               r->error ? r->error : "refused");
}

void cluster_fork_unpin(void *arg, uint64_t source_id, uint64_t fork_id) {
    rn_cluster *cl = arg;
    char url[700];
    int where = leader_url(cl, rn_placement_id_group(source_id), url, sizeof url, "fork-unpin");
    if (where == 0) {
        deferred *d = defer(cl, unpin_locally);
        d->source_id = source_id;
        d->fork_id = fork_id;
        return;
    }
    char full[800];
    snprintf(full, sizeof full, "%s?source=%llu&fork=%llu", url, (unsigned long long)source_id,
             (unsigned long long)fork_id);
    if (where < 0 || ask_peer(cl, "POST", full, unpin_answered, NULL) != 0)
        rn_log(RN_LOG_WARN, "forks",
               "no leader to release a pin of stream %llu: the sweep of "
               "orphan pins releases it",
               (unsigned long long)source_id);
}

/* ---- fork_alive ---- */

static void alive_locally(deferred *d) {
    int alive = d->refusal ? -1 : rn_engine_fork_of(d->cl->engine, d->source_id, d->fork_id);
    d->alive_done(d->arg, alive);
}

typedef struct {
    rn_fork_alive_done done;
    void *arg;
} alive_wait;

static void alive_answered(void *arg, const rn_fetch_result *r) {
    alive_wait *w = arg;
    int alive = -1;
    if (r->failure == RN_FETCH_ANSWERED && r->status == 200 && r->body_len >= 1)
        alive = r->body[0] == '1' ? 1 : r->body[0] == '0' ? 0 : -1;
    w->done(w->arg, alive);
    free(w);
}

void cluster_fork_alive(void *arg, uint64_t source_id, uint64_t fork_id, rn_fork_alive_done done,
                        void *darg) {
    rn_cluster *cl = arg;
    char url[700], full[800];
    int where = leader_url(cl, rn_placement_id_group(fork_id), url, sizeof url, "fork-alive");
    if (where > 0) {
        snprintf(full, sizeof full, "%s?source=%llu&fork=%llu", url, (unsigned long long)source_id,
                 (unsigned long long)fork_id);
        alive_wait *w = rn_xmalloc(sizeof *w);
        *w = (alive_wait){.done = done, .arg = darg};
        if (ask_peer(cl, "GET", full, alive_answered, w) == 0)
            return;
        free(w);
    }
    deferred *d = defer(cl, alive_locally);
    d->alive_done = done;
    d->arg = darg;
    d->source_id = source_id;
    d->fork_id = fork_id;
    d->refusal = where == 0 ? 0 : RN_ERR_NO_LEADER;
}

/* ---- fork_cut ---- */

static void cut_locally(deferred *d) {
    if (d->refusal)
        d->cut_done(d->arg, -1);
    else
        rn_engine_cut(d->cl->engine, d->source_id, d->fork_id, d->offset, d->cut_done, d->arg);
}

typedef struct {
    rn_fork_cut_done done;
    void *arg;
} cut_wait;

static void cut_answered(void *arg, const rn_fetch_result *r) {
    cut_wait *w = arg;
    int cut = -1;
    if (r->failure == RN_FETCH_ANSWERED && r->status == 200 && r->body_len >= 1)
        cut = r->body[0] == '1' ? 1 : r->body[0] == '0' ? 0 : -1;
    w->done(w->arg, cut);
    free(w);
}

void cluster_fork_cut(void *arg, uint64_t source_id, uint64_t fork_id, uint64_t offset,
                      rn_fork_cut_done done, void *darg) {
    rn_cluster *cl = arg;
    char url[700], full[900];
    int where = leader_url(cl, rn_placement_id_group(fork_id), url, sizeof url, "fork-cut");
    if (where > 0) {
        int n = snprintf(full, sizeof full, "%s?source=%llu&fork=%llu", url,
                         (unsigned long long)source_id, (unsigned long long)fork_id);
        if (offset != RN_CUT_SOURCE)
            snprintf(full + n, sizeof full - (size_t)n, "&offset=%llu", (unsigned long long)offset);
        cut_wait *w = rn_xmalloc(sizeof *w);
        *w = (cut_wait){.done = done, .arg = darg};
        if (ask_peer(cl, "POST", full, cut_answered, w) == 0)
            return;
        free(w);
    }
    deferred *d = defer(cl, cut_locally);
    d->cut_done = done;
    d->arg = darg;
    d->source_id = source_id;
    d->fork_id = fork_id;
    d->offset = offset;
    d->refusal = where == 0 ? 0 : RN_ERR_NO_LEADER;
}

int cluster_hosts(void *arg, unsigned group) {
    rn_cluster *cl = arg;
    return !cl->node || consensus_group_running(cl->node, group);
}

/* ---- the leader's side ---- */

/* A query parameter of lowercase hex: its bytes into out (cap), or -1. */
static long query_hex(const char *query, size_t len, const char *name, char *out, size_t cap) {
    char *val = rn_xmalloc(2 * cap + 1);
    long n;
    rn_param_fault f;
    int rc = rn_param_query(query, len, name, RN_PARAM_LENIENT, val, 2 * cap + 1, &n, &f);
    if (rc == 0 && n > 0 && n % 2 == 0 && rn_parse_lower_hex(val, (size_t)n, (uint8_t *)out) == 0)
        rc = (int)(n / 2);
    else
        rc = -1;
    free(val);
    return rc;
}

typedef struct {
    rn_request *req;
} peer_pin;

static void answer_text(rn_request *req, const char *type, const char *text) {
    rn_buf body = {0};
    rn_buf_append_str(&body, text);
    cluster_answer(req, 200, type, &body);
}

static void cut_for_peer(void *arg, int cut) {
    rn_request *req = arg;
    if (cut < 0)
        rn_reply_error(req, RN_E_NO_LEADER, NULL);
    else
        answer_text(req, "text/plain", cut ? "1\n" : "0\n");
    rn_request_release(req);
}

static void pinned_for_peer(void *arg, const rn_fork_pin_answer *a) {
    peer_pin *p = arg;
    json_t *doc = json_pack("{s:I}", "result", (json_int_t)a->result);
    if (a->result == RN_OK_CREATED) {
        json_object_set_new(doc, "source", json_integer((json_int_t)a->source_id));
        json_object_set_new(doc, "offset", json_integer((json_int_t)a->fork_offset));
        json_object_set_new(doc, "retained", json_integer((json_int_t)a->retained));
        json_object_set_new(doc, "depth", json_integer((json_int_t)a->depth));
        json_object_set_new(doc, "ttl", json_integer((json_int_t)a->ttl_s));
        json_object_set_new(doc, "expires", json_integer((json_int_t)a->expires_at_ms));
    }
    if (a->content_type) {
        rn_buf hex = {0};
        append_hex(&hex, a->content_type, a->content_type_len);
        json_object_set_new(doc, "ct", json_stringn((const char *)hex.data, hex.len));
        rn_buf_free(&hex);
    }
    char *text = json_dumps(doc, JSON_COMPACT);
    json_decref(doc);
    answer_text(p->req, "application/json", text);
    free(text);
    rn_request_release(p->req);
    free(p);
}

static void pin_for_peer(rn_cluster *cl, rn_request *req, const char *q, size_t qlen) {
    char *source = rn_xmalloc(MAX_TEXT), *ct = rn_xmalloc(MAX_TEXT);
    long slen = query_hex(q, qlen, "source", source, MAX_TEXT);
    long ctlen = query_hex(q, qlen, "ct", ct, MAX_TEXT);
    uint64_t fork_id, offset = 0, sub = 0;
    int has_offset = cluster_query_u64(q, qlen, "offset", &offset) == 0;
    cluster_query_u64(q, qlen, "sub", &sub);
    if (slen <= 0 || cluster_query_u64(q, qlen, "fork", &fork_id) != 0 || !fork_id) {
        rn_reply_error(req, RN_E_INVALID_REQUEST, NULL);
    } else {
        rn_fork_pin_ask ask = {.source = source,
                               .source_len = (size_t)slen,
                               .content_type = ctlen >= 0 ? ct : NULL,
                               .content_type_len = ctlen >= 0 ? (size_t)ctlen : 0,
                               .has_fork_offset = has_offset,
                               .fork_offset = offset,
                               .fork_sub_offset = sub,
                               .fork_id = fork_id};
        peer_pin *p = rn_xmalloc(sizeof *p);
        p->req = req;
        rn_request_hold(req);
        rn_engine_pin(cl->engine, &ask, pinned_for_peer, p);
    }
    free(source);
    free(ct);
}

int rn_cluster_forks_handle(rn_cluster *cl, rn_request *req, const char *path, size_t path_len,
                            const char *query, size_t query_len) {
    static const char prefix[] = "cluster/fork-";
    size_t pl = sizeof prefix - 1;
    if (path_len <= pl || memcmp(path, prefix, pl) != 0)
        return 0;
    const char *what = path + pl;
    size_t wl = path_len - pl;
    int post = req->method == RN_HTTP_POST;
    uint64_t source_id = 0, fork_id = 0;
    int ids = cluster_query_u64(query, query_len, "source", &source_id) == 0 &&
              cluster_query_u64(query, query_len, "fork", &fork_id) == 0 && fork_id;
    if (post && wl == 3 && memcmp(what, "pin", 3) == 0) {
        pin_for_peer(cl, req, query, query_len);
    } else if (post && wl == 5 && memcmp(what, "unpin", 5) == 0 && ids) {
        rn_engine_unpin(cl->engine, source_id, fork_id);
        answer_text(req, "text/plain", "ok\n");
    } else if (!post && wl == 5 && memcmp(what, "alive", 5) == 0 && ids) {
        if (!cl->node || !consensus_leader_ready(cl->node, rn_placement_id_group(fork_id)))
            rn_reply_error(req, RN_E_NO_LEADER, NULL);
        else
            answer_text(req, "text/plain",
                        rn_engine_fork_of(cl->engine, source_id, fork_id) ? "1\n" : "0\n");
    } else if (post && wl == 3 && memcmp(what, "cut", 3) == 0 && ids && source_id) {
        uint64_t offset = RN_CUT_SOURCE;
        cluster_query_u64(query, query_len, "offset", &offset);
        rn_request_hold(req);
        rn_engine_cut(cl->engine, source_id, fork_id, offset, cut_for_peer, req);
    } else {
        rn_reply_error(req, RN_E_INVALID_REQUEST, NULL);
    }
    return 1;
}

int rn_cluster_forks_route(const char *path, size_t path_len) {
    static const char prefix[] = "cluster/fork-";
    return path_len > sizeof prefix - 1 && memcmp(path, prefix, sizeof prefix - 1) == 0;
}
