/*
 * api.c — the subscription HTTP API under /v1/stream/__ds/ (PROTOCOL.md
 * §6–7):
 *
 *   GET    /jwks.json                        webhook signing keys (JWK Set)
 *   PUT    /subscriptions/:id                create (201) or re-confirm (200)
 *   GET    /subscriptions/:id                read
 *   DELETE /subscriptions/:id                delete (204, also when absent)
 *   POST   /subscriptions/:id/streams        add explicit links (204)
 *   DELETE /subscriptions/:id/streams/:path  remove an explicit link (204)
 *   POST   /subscriptions/:id/callback       webhook callback (Bearer token)
 *   POST   /subscriptions/:id/claim          pull-wake claim
 *   POST   /subscriptions/:id/ack            pull-wake ack / heartbeat
 *   POST   /subscriptions/:id/release        pull-wake release (204)
 *
 * Every answer that depends on subscription state is sent only once that
 * state is on disk (rn_durable_wait), so a client never sees a change a
 * crash could take back: a mutation's answer waits for the write that
 * covers it, and a read made while a write is pending waits for it too.
 * Request bodies are JSON objects; duplicate members are refused. In
 * cluster mode "on disk" is "committed by the state's group" (replica.c),
 * and every request is served by that group's leader only; a change there
 * (PUT, POST) first waits for a fresh view of the streams it looks up in
 * groups that node does not host (elsewhere.c).
 */
#include "subs/subs_int.h"
#include "subs/url.h"
#include "protocol/reply.h"
#include "protocol/routing.h"
#include "util/clock.h"
#include "util/text.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define MAX_ID_LEN 200
#define MAX_WORKER_LEN 256

typedef struct {
    rn_durable_waiter w; /* first: the waiter is the context */
    rn_request *req;
    rn_error error; /* RN_E_COUNT: send status, head and body */
    int status;
    rn_buf head, body;
} reply;

static void on_durable(rn_durable_waiter *w, int status) {
    reply *r = (reply *)w;
    if (status == -EAGAIN) { /* a replicated change refused: nothing of it applied */
        rn_buf_free(&r->head);
        rn_buf_free(&r->body);
        rn_buf extra = {0};
        rn_buf_append_str(&extra, "Retry-After: 1\r\n");
        rn_reply_error(r->req, RN_E_NO_LEADER, &extra);
    } else if (status < 0 || r->error != RN_E_COUNT) {
        rn_buf_free(&r->head);
        rn_buf_free(&r->body);
        rn_reply_error(r->req, status < 0 ? RN_E_OUTCOME_UNKNOWN : r->error, NULL);
    } else {
        rn_http_respond(r->req, r->status, &r->head, &r->body);
    }
    rn_request_release(r->req);
    free(r);
}

/* Answers once the state the answer reflects is durable. head and body
 * (may be NULL for errors) are taken over. */
static void answer(rn_subs *S, rn_request *req, rn_error error, int status, rn_buf *head,
                   rn_buf *body) {
    reply *r = rn_xcalloc(1, sizeof *r);
    r->w.fn = on_durable;
    r->req = req;
    r->error = error;
    r->status = status;
    if (head) {
        r->head = *head;
        r->body = *body;
        *head = *body = (rn_buf){0};
    }
    rn_request_hold(req);
    rn_durable_wait(S->state, &r->w);
}

static void answer_error(rn_subs *S, rn_request *req, rn_error e) {
    answer(S, req, e, 0, NULL, NULL);
}

static void answer_json(rn_subs *S, rn_request *req, int status, json_t *j) {
    rn_buf h = {0}, b = {0};
    rn_reply_common(&h);
    rn_buf_append_str(&h, "Content-Type: application/json\r\nCache-Control: no-store\r\n");
    char *text = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    rn_buf_append_str(&b, text);
    free(text);
    answer(S, req, RN_E_COUNT, status, &h, &b);
}

static void answer_no_content(rn_subs *S, rn_request *req) {
    rn_buf h = {0}, b = {0};
    rn_reply_common(&h);
    rn_buf_append_str(&h, "Cache-Control: no-store\r\n");
    answer(S, req, RN_E_COUNT, 204, &h, &b);
}

static void method_not_allowed(rn_request *req, const char *allow) {
    rn_buf extra = {0};
    rn_buf_appendf(&extra, "Allow: %s\r\n", allow);
    rn_reply_error(req, RN_E_METHOD_NOT_ALLOWED, &extra);
}

/* The body as a JSON object, or NULL. */
static json_t *body_object(const rn_request *req) {
    json_t *j =
        json_loadb((const char *)req->body.data, req->body.len, JSON_REJECT_DUPLICATES, NULL);
    if (!json_is_object(j)) {
        json_decref(j);
        return NULL;
    }
    return j;
}

/* The Bearer token of the Authorization header; sets *len. */
static const char *bearer(const rn_request *req, size_t *len) {
    const rn_header *h = rn_request_header(req, "Authorization", NULL);
    if (!h || !rn_iprefix(h->value, h->value_len, "Bearer "))
        return NULL;
    const char *t = h->value + 7;
    size_t n = h->value_len - 7;
    while (n && *t == ' ') {
        t++;
        n--;
    }
    *len = n;
    return n ? t : NULL;
}

static int valid_id(const char *id, size_t len) {
    if (len == 0 || len > MAX_ID_LEN)
        return 0;
    for (size_t i = 0; i < len; i++) {
        char c = id[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '~' || c == ':' || c == '-'))
            return 0;
    }
    return 1;
}

/* ---- subscription resource ---- */

static rn_error check_webhook_url(rn_subs *S, const char *url) {
    switch (rn_webhook_url_check(url, strlen(url), S->allow_loopback)) {
    case RN_URL_OK:
        return RN_E_COUNT;
    case RN_URL_MALFORMED:
        return RN_E_WEBHOOK_URL_MALFORMED;
    case RN_URL_SCHEME:
        return RN_E_WEBHOOK_URL_SCHEME;
    case RN_URL_LOCAL_TARGET:
        return RN_E_WEBHOOK_URL_LOCAL;
    case RN_URL_LOOPBACK:
        return RN_E_WEBHOOK_URL_LOOPBACK;
    }
    return RN_E_WEBHOOK_URL_MALFORMED;
}

/* Refuses (429, the bound in its header) a change that would take the
 * subscriptions or their explicit streams past their bounds: nothing of it
 * applies. new_subs is 0 or 1. Returns 1 when req was answered. */
static int past_bounds(rn_subs *S, rn_request *req, size_t new_subs, size_t new_explicit) {
    assert(new_subs <= 1);
    rn_buf extra = {0};
    if (new_subs && S->subs.count + new_subs > S->max_subs) {
        rn_buf_appendf(&extra, "Runnel-Max-Subscriptions: %zu\r\n", S->max_subs);
        rn_reply_error(req, RN_E_SUB_LIMIT, &extra);
        return 1;
    }
    if (new_explicit && S->explicit_links + new_explicit > S->max_explicit_links) {
        rn_buf_appendf(&extra, "Runnel-Max-Subscription-Streams: %zu\r\n", S->max_explicit_links);
        rn_reply_error(req, RN_E_SUB_STREAMS_LIMIT, &extra);
        return 1;
    }
    return 0;
}

static void put_sub(rn_subs *S, rn_request *req, const char *id, size_t id_len) {
    json_t *body = body_object(req);
    rn_sub_config cfg;
    rn_error e = RN_E_SUB_INVALID_JSON;
    if (!body || rn_sub_config_parse(body, &cfg, &e) < 0) {
        json_decref(body);
        answer_error(S, req, e);
        return;
    }
    json_decref(body);
    if (cfg.webhook_url && (e = check_webhook_url(S, cfg.webhook_url)) != RN_E_COUNT) {
        rn_sub_config_free(&cfg);
        answer_error(S, req, e);
        return;
    }
    rn_sub *sub = rn_sub_find(S, id, id_len);
    if (sub) {
        uint8_t hash[32];
        rn_sub_config_hash(&cfg, hash);
        rn_sub_config_free(&cfg);
        if (memcmp(hash, sub->hash, sizeof hash) != 0)
            answer_error(S, req, RN_E_SUB_EXISTS_CONFLICT);
        else
            answer_json(S, req, 200, rn_view_sub(S, sub));
        return;
    }
    rn_seen ws;
    if (cfg.wake_stream && !rn_subs_stream(S, cfg.wake_stream, strlen(cfg.wake_stream), &ws)) {
        rn_sub_config_free(&cfg);
        answer_error(S, req, RN_E_SUB_WAKE_STREAM_MISSING);
        return;
    }
    if (past_bounds(S, req, 1, cfg.nstreams)) {
        rn_sub_config_free(&cfg);
        return;
    }
    sub = rn_sub_add(S, id, id_len, &cfg, rn_now_ms());
    for (size_t i = 0; i < sub->cfg.nstreams; i++)
        rn_sub_link_at_tail(S, sub, sub->cfg.streams[i], strlen(sub->cfg.streams[i]), 0);
    if (sub->cfg.pattern)
        rn_sub_backfill(S, sub);
    rn_durable_changed(S->state);
    answer_json(S, req, 201, rn_view_sub(S, sub));
}

static void handle_sub(rn_subs *S, rn_request *req, const char *id, size_t id_len) {
    rn_sub *sub;
    switch (req->method) {
    case RN_HTTP_PUT:
        put_sub(S, req, id, id_len);
        return;
    case RN_HTTP_GET:
        if (!(sub = rn_sub_find(S, id, id_len)))
            answer_error(S, req, RN_E_SUB_NOT_FOUND);
        else
            answer_json(S, req, 200, rn_view_sub(S, sub));
        return;
    case RN_HTTP_DELETE:
        if ((sub = rn_sub_find(S, id, id_len))) {
            rn_sub_remove(S, sub);
            rn_durable_changed(S->state);
        }
        answer_no_content(S, req);
        return;
    default:
        method_not_allowed(req, "GET, PUT, DELETE, OPTIONS");
    }
}

/* ---- explicit membership ---- */

static void add_streams(rn_subs *S, rn_request *req, rn_sub *sub) {
    json_t *body = body_object(req);
    char **streams = NULL;
    size_t n = 0;
    if (!body || rn_sub_streams_parse(json_object_get(body, "streams"), &streams, &n) < 0 ||
        n == 0) {
        rn_sub_streams_free(streams, n);
        json_decref(body);
        answer_error(S, req, body ? RN_E_SUB_INVALID_STREAMS : RN_E_SUB_INVALID_JSON);
        return;
    }
    json_decref(body);
    size_t added = 0;
    for (size_t i = 0; i < n; i++) {
        const rn_sub_link *l = rn_sub_link_get(sub, streams[i], strlen(streams[i]));
        added += !l || !l->is_explicit;
    }
    if (past_bounds(S, req, 0, added)) {
        rn_sub_streams_free(streams, n);
        return;
    }
    for (size_t i = 0; i < n; i++)
        rn_sub_link_at_tail(S, sub, streams[i], strlen(streams[i]), 0);
    rn_sub_streams_free(streams, n);
    rn_durable_changed(S->state);
    answer_no_content(S, req);
}

static void remove_stream(rn_subs *S, rn_request *req, rn_sub *sub, const char *raw, size_t len) {
    char *decoded = rn_xmalloc(len + 1);
    long dlen = rn_percent_decode(raw, len, decoded);
    const char *path;
    long plen = dlen < 0 || memchr(decoded, 0, (size_t)dlen)
                    ? -1
                    : rn_sub_path_normalize(decoded, (size_t)dlen, &path);
    if (plen < 0) {
        free(decoded);
        answer_error(S, req, RN_E_SUB_INVALID_STREAMS);
        return;
    }
    rn_sub_link *l = rn_sub_link_get(sub, path, (size_t)plen);
    free(decoded);
    if (l && l->is_explicit) {
        rn_sub_link_set_explicit(S, l, 0);
        if (!l->is_glob)
            rn_sub_link_remove(S, l);
        rn_durable_changed(S->state);
    }
    answer_no_content(S, req);
}

/* ---- delivery endpoints ---- */

/* Reads {wake_id, generation, acks?, done?}; returns the parsed body (the
 * caller releases it) or NULL when its shape is wrong. */
static json_t *wake_body(const rn_request *req, const char **wake_id, uint64_t *generation,
                         const json_t **acks, int *done) {
    json_t *body = body_object(req);
    const json_t *w = json_object_get(body, "wake_id"), *g = json_object_get(body, "generation");
    const json_t *a = json_object_get(body, "acks"), *d = json_object_get(body, "done");
    int ok = json_is_string(w) && json_string_length(w) < RN_WAKE_ID_MAX && json_is_integer(g) &&
             json_integer_value(g) >= 0 && (!a || json_is_null(a) || json_is_array(a)) &&
             (!d || json_is_null(d) || json_is_boolean(d));
    for (size_t i = 0; ok && json_is_array(a) && i < json_array_size(a); i++) {
        const json_t *ack = json_array_get(a, i);
        const json_t *s = json_object_get(ack, "stream");
        if (!s)
            s = json_object_get(ack, "path");
        ok = json_is_string(s) && json_is_string(json_object_get(ack, "offset"));
    }
    if (!ok) {
        json_decref(body);
        return NULL;
    }
    *wake_id = json_string_value(w);
    *generation = (uint64_t)json_integer_value(g);
    *acks = json_is_array(a) ? a : NULL;
    *done = json_is_true(d);
    return body;
}

typedef enum { ACT_CALLBACK, ACT_ACK, ACT_RELEASE } wake_action;

/* callback (webhook), ack and release (pull-wake): token, fencing, then
 * the action. */
static void wake_request(rn_subs *S, rn_request *req, rn_sub *sub, wake_action act) {
    rn_sub_type want = act == ACT_CALLBACK ? RN_SUB_WEBHOOK : RN_SUB_PULL_WAKE;
    if (sub->cfg.type != want) {
        answer_error(S, req, RN_E_SUB_WRONG_TYPE);
        return;
    }
    size_t token_len = 0;
    const char *token = bearer(req, &token_len);
    if (!token) {
        answer_error(S, req, RN_E_TOKEN_MISSING);
        return;
    }
    const char *wake_id;
    uint64_t generation;
    const json_t *acks;
    int done;
    json_t *body = wake_body(req, &wake_id, &generation, &acks, &done);
    if (!body) {
        answer_error(S, req, RN_E_SUB_INVALID_WAKE_BODY);
        return;
    }
    int next_wake = 0;
    rn_error e = rn_wake_check(S, sub, token, token_len, wake_id, generation);
    if (e == RN_E_COUNT && act == ACT_RELEASE)
        rn_wake_finish(S, sub);
    else if (e == RN_E_COUNT)
        e = rn_wake_progress(S, sub, acks, done, &next_wake);
    json_decref(body);
    if (e != RN_E_COUNT)
        answer_error(S, req, e);
    else if (act == ACT_RELEASE)
        answer_no_content(S, req);
    else
        answer_json(S, req, 200, json_pack("{s:b, s:b}", "ok", 1, "next_wake", next_wake));
}

static void claim(rn_subs *S, rn_request *req, rn_sub *sub) {
    json_t *body = body_object(req);
    const json_t *w = json_object_get(body, "worker");
    if (!json_is_string(w) || json_string_length(w) == 0 ||
        json_string_length(w) > MAX_WORKER_LEN) {
        json_decref(body);
        answer_error(S, req, body ? RN_E_SUB_INVALID_WORKER : RN_E_SUB_INVALID_JSON);
        return;
    }
    rn_error e = rn_wake_claim(S, sub, json_string_value(w));
    json_decref(body);
    if (e == RN_E_SUB_ALREADY_CLAIMED) {
        json_t *err = json_pack("{s:{s:s, s:s, s:s, s:I}}", "error", "code", rn_error_code(e),
                                "message", rn_error_message(e), "current_holder", sub->holder,
                                "generation", (json_int_t)sub->generation);
        answer_json(S, req, rn_error_status(e), err);
        return;
    }
    if (e != RN_E_COUNT) {
        answer_error(S, req, e);
        return;
    }
    rn_buf token = {0};
    rn_token_mint(rn_subs_keys_token_key(S->keys), sub->id, sub->generation, sub->wake_id,
                  rn_now_ms() / 1000 + RN_TOKEN_TTL_S, &token);
    json_t *j = json_object();
    json_object_set_new(j, "wake_id", json_string(sub->wake_id));
    json_object_set_new(j, "generation", json_integer((json_int_t)sub->generation));
    json_object_set_new(j, "token", json_stringn((const char *)token.data, token.len));
    json_object_set_new(j, "streams", rn_view_wake_streams(S, sub));
    json_object_set_new(j, "lease_ttl_ms", json_integer((json_int_t)sub->cfg.lease_ttl_ms));
    rn_buf_free(&token);
    answer_json(S, req, 200, j);
}

/* ---- routing ---- */

static int is(const char *s, size_t len, const char *lit) {
    return strlen(lit) == len && memcmp(s, lit, len) == 0;
}

static void jwks(rn_subs *S, rn_request *req) {
    if (req->method != RN_HTTP_GET && req->method != RN_HTTP_HEAD) {
        method_not_allowed(req, "GET, HEAD, OPTIONS");
        return;
    }
    rn_buf h = {0}, b = {0};
    rn_reply_common(&h);
    rn_buf_append_str(&h, "Content-Type: application/jwk-set+json\r\n"
                          "Cache-Control: public, max-age=300\r\n");
    rn_subs_keys_jwks(S->keys, &b);
    rn_http_respond(req, 200, &h, &b);
}

typedef enum {
    ROUTE_NONE,
    ROUTE_STREAMS,  /* /streams */
    ROUTE_STREAM,   /* /streams/:path */
    ROUTE_CLAIM,    /* /claim */
    ROUTE_CALLBACK, /* /callback */
    ROUTE_ACK,      /* /ack */
    ROUTE_RELEASE,  /* /release */
} route;

/* The sub-resource named by what follows a subscription id. */
static route sub_route(const char *tail, size_t len) {
    static const struct {
        const char *text;
        route r;
    } exact[] = {{"/streams", ROUTE_STREAMS},
                 {"/claim", ROUTE_CLAIM},
                 {"/callback", ROUTE_CALLBACK},
                 {"/ack", ROUTE_ACK},
                 {"/release", ROUTE_RELEASE}};
    for (size_t i = 0; i < sizeof exact / sizeof exact[0]; i++)
        if (is(tail, len, exact[i].text))
            return exact[i].r;
    return len > 9 && memcmp(tail, "/streams/", 9) == 0 ? ROUTE_STREAM : ROUTE_NONE;
}

/* "/subscriptions/" + rest: the subscription's id, decoded, and what
 * follows it. */
typedef struct {
    char id[MAX_ID_LEN * 3 + 1];
    size_t id_len;
    const char *tail; /* in rest */
    size_t tail_len;
} sub_target;

/* Splits rest into *t; 0 when the id is not a valid one. */
static int split_target(const char *rest, size_t len, sub_target *t) {
    const char *slash = memchr(rest, '/', len);
    size_t raw_id_len = slash ? (size_t)(slash - rest) : len;
    long id_len = raw_id_len < sizeof t->id ? rn_percent_decode(rest, raw_id_len, t->id) : -1;
    if (id_len < 0 || !valid_id(t->id, (size_t)id_len))
        return 0;
    t->id[id_len] = 0;
    t->id_len = (size_t)id_len;
    t->tail = rest + raw_id_len;
    t->tail_len = len - raw_id_len;
    return 1;
}

/* Routes "/subscriptions/" + rest. */
static void subscriptions(rn_subs *S, rn_request *req, const char *rest, size_t len) {
    sub_target t;
    if (!split_target(rest, len, &t)) {
        rn_reply_error(req, RN_E_SUB_INVALID_ID, NULL);
        return;
    }
    const char *id = t.id, *tail = t.tail;
    size_t id_len = t.id_len, tail_len = t.tail_len;
    if (tail_len == 0) {
        handle_sub(S, req, id, id_len);
        return;
    }
    route r = sub_route(tail, tail_len);
    if (r == ROUTE_NONE) {
        rn_reply_error(req, RN_E_NOT_FOUND, NULL);
        return;
    }
    rn_http_method want = r == ROUTE_STREAM ? RN_HTTP_DELETE : RN_HTTP_POST;
    if (req->method != want) {
        method_not_allowed(req, r == ROUTE_STREAM ? "DELETE, OPTIONS" : "POST, OPTIONS");
        return;
    }
    rn_sub *sub = rn_sub_find(S, id, id_len);
    if (!sub) {
        answer_error(S, req, RN_E_SUB_NOT_FOUND);
        return;
    }
    switch (r) {
    case ROUTE_STREAMS:
        add_streams(S, req, sub);
        break;
    case ROUTE_STREAM:
        remove_stream(S, req, sub, tail + 9, tail_len - 9);
        break;
    case ROUTE_CLAIM:
        claim(S, req, sub);
        break;
    case ROUTE_CALLBACK:
        wake_request(S, req, sub, ACT_CALLBACK);
        break;
    case ROUTE_ACK:
        wake_request(S, req, sub, ACT_ACK);
        break;
    case ROUTE_RELEASE:
        wake_request(S, req, sub, ACT_RELEASE);
        break;
    case ROUTE_NONE:
        break;
    }
}

/* Cluster mode: the requests go to the leader of the state's group, as
 * writes do (replica.c); a leader that has not taken over yet answers
 * 503 NO_LEADER. Returns 1 when req was answered or sent on. */
static int routed_elsewhere(rn_subs *S, rn_request *req) {
    if (!S->replicated || rn_routing_write(req, RN_SUBS_KEY, strlen(RN_SUBS_KEY)))
        return S->replicated;
    if (rn_subs_replica_sync(S))
        return 0;
    rn_buf extra = {0};
    rn_buf_appendf(&extra, "Retry-After: 1\r\nx-ursula-raft-group: %u\r\n", S->group);
    rn_reply_error(req, RN_E_NO_LEADER, &extra);
    return 1;
}

static void handle(rn_subs *S, rn_request *req, const char *rest, size_t len, int fresh);

/* A request waiting for a fresh view of the other groups' streams. */
typedef struct {
    rn_far_waiter w;
    rn_subs *S;
    rn_request *req;
    const char *rest; /* in req's target, held */
    size_t len;
} deferred;

static void run_deferred(void *arg, int complete) {
    deferred *d = arg;
    if (d->S->active && !d->S->quiesced && complete) {
        handle(d->S, d->req, d->rest, d->len, 1);
    } else { /* the delivery moved meanwhile, or a group's leader is not known here:
                as a request that finds no leader */
        rn_buf extra = {0};
        rn_buf_append_str(&extra, "Retry-After: 1\r\n");
        rn_reply_error(d->req, RN_E_NO_LEADER, &extra);
    }
    rn_request_release(d->req);
    free(d);
}

/* The changes of a subscription (PUT and POST: a create, explicit links,
 * callbacks, claims, acks, releases) look streams and their tails up: in
 * cluster mode, those of groups placed elsewhere must be as their leaders
 * hold them now (an ack up to a tail the view has not seen yet is good). */
static int looks_up_streams(const rn_request *req, const char *rest, size_t len) {
    static const char subs[] = "/subscriptions/";
    size_t sl = sizeof subs - 1;
    return len > sl && memcmp(rest, subs, sl) == 0 &&
           (req->method == RN_HTTP_PUT || req->method == RN_HTTP_POST);
}

/* The groups whose streams such a change looks up, into w: a create's
 * pattern backfills from every group, its explicit streams and wake stream
 * are named; a POST .../streams names its body's streams; a callback,
 * claim, ack or release judges the subscription's links by their tails.
 * A change the handler refuses before any lookup (a bad id or body, an
 * unknown subscription) needs nothing. */
static void change_needs(rn_subs *S, const rn_request *req, const char *rest, size_t len,
                         rn_far_waiter *w) {
    sub_target t;
    if (!split_target(rest, len, &t))
        return;
    json_t *body = body_object(req);
    rn_sub *sub = rn_sub_find(S, t.id, t.id_len);
    rn_sub_config cfg;
    rn_error e;
    char **streams = NULL;
    size_t n = 0;
    if (t.tail_len == 0 && body && rn_sub_config_parse(body, &cfg, &e) == 0) {
        w->all_groups = cfg.pattern != NULL;
        for (size_t i = 0; i < cfg.nstreams; i++)
            rn_elsewhere_need(S, w, cfg.streams[i], strlen(cfg.streams[i]));
        if (cfg.wake_stream)
            rn_elsewhere_need(S, w, cfg.wake_stream, strlen(cfg.wake_stream));
        rn_sub_config_free(&cfg);
    } else if (sub_route(t.tail, t.tail_len) == ROUTE_STREAMS) {
        if (body && rn_sub_streams_parse(json_object_get(body, "streams"), &streams, &n) == 0)
            for (size_t i = 0; i < n; i++)
                rn_elsewhere_need(S, w, streams[i], strlen(streams[i]));
        rn_sub_streams_free(streams, n);
    } else if (sub && t.tail_len > 0) {
        size_t i = 0;
        void *v;
        while (rn_map_next(&sub->links, &i, &v)) {
            const rn_sub_link *l = v;
            rn_elsewhere_need(S, w, l->path, l->path_len);
        }
    }
    json_decref(body);
}

static void handle(rn_subs *S, rn_request *req, const char *rest, size_t len, int fresh) {
    if (!fresh && S->replicated && looks_up_streams(req, rest, len)) {
        deferred *d = rn_xcalloc(1, sizeof *d);
        *d = (deferred){.w = {.fn = run_deferred}, .S = S, .req = req, .rest = rest, .len = len};
        d->w.arg = d;
        change_needs(S, req, rest + 15, len - 15, &d->w);
        rn_request_hold(req);
        rn_elsewhere_wait(S, &d->w);
        return;
    }
    if (is(rest, len, "/jwks.json"))
        jwks(S, req);
    else if (len > 15 && memcmp(rest, "/subscriptions/", 15) == 0)
        subscriptions(S, req, rest + 15, len - 15);
    else
        rn_reply_error(req, RN_E_NOT_FOUND, NULL);
}

void rn_subs_handle(rn_subs *S, rn_request *req, const char *rest, size_t len) {
    if (!routed_elsewhere(S, req))
        handle(S, req, rest, len, 0);
}
