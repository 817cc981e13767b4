/*
 * authz.c — asking the external authorizer, and its cache. See authz.h.
 */
#include "gateway/authz.h"
#include "util/clock.h"
#include "util/list.h"
#include "util/log.h"
#include "util/map.h"
#include "util/text.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#define CACHE_MAX 8192
#define ANSWER_MAX_BYTES 4096

typedef struct {
    char *key;
    size_t key_len;
    rn_authz_verdict v;
    int64_t until_ms;
} cache_entry;

typedef struct ask {
    rn_authz *a;
    rn_request *req;
    rn_authz_fn fn;
    void *arg;
    char *key;
    size_t key_len;
    rn_fetch *fetch;
    rn_list_node link; /* in a->asks */
} ask;

struct rn_authz {
    uv_loop_t *loop;
    rn_outbound *out;
    char *url;
    uint64_t timeout_ms, cache_ms;
    rn_map cache; /* key -> cache_entry */
    rn_list asks; /* in flight */
    int stopped;
};

rn_authz *rn_authz_new(uv_loop_t *loop, rn_outbound *outbound) {
    rn_authz *a = rn_xcalloc(1, sizeof *a);
    a->loop = loop;
    a->out = outbound;
    return a;
}

static void cache_clear(rn_authz *a) {
    void *v;
    for (size_t i = 0; rn_map_next(&a->cache, &i, &v);)
        free(((cache_entry *)v)->key);
    rn_map_free_values(&a->cache);
}

void rn_authz_use(rn_authz *a, const rn_authorizer_config *cfg) {
    cache_clear(a);
    free(a->url);
    a->url = cfg->url ? strdup(cfg->url) : NULL;
    a->timeout_ms = cfg->timeout_ms;
    a->cache_ms = cfg->cache_ms;
}

int rn_authz_active(const rn_authz *a) {
    return a->url != NULL;
}

/* The verdict an answer of the authorizer gives. */
static rn_authz_verdict verdict_of(const rn_fetch_result *r) {
    rn_authz_verdict v = {0};
    if (r->failure != RN_FETCH_ANSWERED) {
        v.refusal = RN_E_GW_AUTHORIZATION_UNAVAILABLE;
        return v;
    }
    switch (r->status) {
    case 200:
    case 204:
        return v;
    case 402:
        v.refusal = RN_E_GW_PAYMENT_REQUIRED;
        return v;
    case 403: {
        json_t *doc = json_loadb((const char *)r->body, r->body_len, 0, NULL);
        const char *code =
            json_string_value(json_object_get(json_object_get(doc, "error"), "code"));
        v.refusal = code && strcmp(code, "ACCOUNT_REVOKED") == 0 ? RN_E_GW_ACCOUNT_REVOKED
                                                                 : RN_E_GW_FORBIDDEN;
        json_decref(doc);
        return v;
    }
    case 429: {
        size_t n;
        const char *ra = rn_fetch_header(r, "retry-after", &n);
        uint64_t s = 1;
        if (!ra || rn_parse_strict_u64(ra, n, 86400, &s) || s == 0)
            s = 1;
        v.refusal = RN_E_GW_RATE_LIMITED;
        v.retry_after_s = s;
        return v;
    }
    default:
        v.refusal = RN_E_GW_AUTHORIZATION_UNAVAILABLE;
        return v;
    }
}

static void ask_free(ask *k) {
    rn_list_remove(&k->a->asks, &k->link);
    rn_request_release(k->req);
    free(k->key);
    free(k);
}

static void answered(void *arg, const rn_fetch_result *r) {
    ask *k = arg;
    rn_authz *a = k->a;
    k->fetch = NULL;
    rn_authz_verdict v = verdict_of(r);
    if (v.refusal == RN_E_GW_AUTHORIZATION_UNAVAILABLE)
        rn_log(RN_LOG_WARN, "gateway", "the authorizer failed: %s",
               r->failure == RN_FETCH_ANSWERED ? "an unexpected status" : r->error);
    else if (a->cache_ms) { /* unavailability is not remembered */
        if (a->cache.count >= CACHE_MAX)
            cache_clear(a);
        cache_entry *e = rn_map_get(&a->cache, k->key, k->key_len);
        if (!e) {
            e = rn_xcalloc(1, sizeof *e);
            e->key = k->key;
            e->key_len = k->key_len;
            k->key = NULL;
            rn_map_put(&a->cache, e->key, e->key_len, e);
        }
        e->v = v;
        e->until_ms = rn_now_ms() + (int64_t)a->cache_ms;
    }
    k->fn(k->req, k->arg, &v);
    ask_free(k);
}

int rn_authz_check(rn_authz *a, rn_request *req, const char *tenant, const rn_target *t,
                   int64_t now_ms, rn_authz_verdict *v, rn_authz_fn fn, void *arg) {
    json_t *doc = json_object();
    json_object_set_new(doc, "tenant", json_string(tenant));
    json_object_set_new(doc, "method", json_string(req->method_name ? req->method_name : "-"));
    const char *q = memchr(req->target, '?', req->target_len);
    size_t plen = q ? (size_t)(q - req->target) : req->target_len;
    json_object_set_new(doc, "path", json_stringn_nocheck(req->target, plen));
    json_object_set_new(doc, "bucket",
                        t->bucket ? json_stringn_nocheck(t->bucket, t->bucket_len) : json_null());
    json_object_set_new(doc, "stream",
                        t->stream ? json_stringn_nocheck(t->stream, t->stream_len) : json_null());
    char *body = json_dumps(doc, JSON_COMPACT | JSON_ENSURE_ASCII);
    json_decref(doc);
    if (!body)
        abort();
    /* the body (tenant, method, path) is the question, and the cache's key */
    size_t key_len = strlen(body);
    cache_entry *e = rn_map_get(&a->cache, body, key_len);
    if (e && e->until_ms > now_ms) {
        *v = e->v;
        free(body);
        return 1;
    }
    ask *k = rn_xcalloc(1, sizeof *k);
    *k = (ask){.a = a, .req = req, .fn = fn, .arg = arg, .key = body, .key_len = key_len};
    const char *headers[] = {"Content-Type: application/json"};
    rn_fetch_request fr = {.method = "POST",
                           .url = a->url,
                           .headers = headers,
                           .nheaders = 1,
                           .data = (const uint8_t *)body,
                           .len = key_len,
                           .body_fd = -1,
                           .sink_fd = -1,
                           .sink_cap = ANSWER_MAX_BYTES,
                           .timeout_ms = a->timeout_ms};
    k->fetch = a->stopped ? NULL : rn_outbound_start(a->out, &fr, answered, k);
    if (!k->fetch) {
        free(body);
        free(k);
        v->refusal = RN_E_GW_AUTHORIZATION_UNAVAILABLE;
        v->retry_after_s = 0;
        return 1;
    }
    rn_request_hold(req);
    rn_list_push_back(&a->asks, &k->link);
    return 0;
}

void rn_authz_stop(rn_authz *a) {
    a->stopped = 1;
    while (!rn_list_empty(&a->asks)) {
        ask *k = rn_list_entry(a->asks.first, ask, link);
        rn_fetch_cancel(k->fetch);
        rn_authz_verdict v = {.refusal = RN_E_GW_AUTHORIZATION_UNAVAILABLE};
        k->fn(k->req, k->arg, &v);
        ask_free(k);
    }
}

void rn_authz_free(rn_authz *a) {
    if (!a)
        return;
    cache_clear(a);
    free(a->url);
    free(a);
}
