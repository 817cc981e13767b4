/*
 * credentials.c — API keys, JWTs, their cache and the issuers' fetched
 * keys. See credentials.h.
 *
 * A JWT names its issuer in its payload; the payload is read (unverified)
 * only to pick the issuer whose keys and policy then verify the token
 * whole. An issuer with a JWKS URL whose keys have never been fetched
 * makes its tokens wait for the fetch in flight (at most MAX_WAITERS
 * requests at once) or, with none in flight and the last one failed,
 * answers 503 AUTHENTICATION_UNAVAILABLE: the gateway cannot tell a good
 * token from a bad one then, and must not call either invalid.
 */
#include "gateway/credentials.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/map.h"
#include "util/text.h"

#include <jansson.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>

#define CACHE_MAX 8192              /* verified JWTs remembered */
#define JWKS_REFRESH_MS (5 * 60000) /* keys of a JWKS URL are fetched again this often */
#define JWKS_RETRY_MS 30000         /* and, after a failure or an unknown kid, at most this often */
#define JWKS_TIMEOUT_MS 5000
#define JWKS_MAX_BYTES (1024 * 1024)
#define MAX_WAITERS 1024
#define API_KEY_PREFIX "rnk_"

struct rn_jwt_grant {
    uint8_t hash[32];
    int refs;
    int cached;
    const rn_tenant *tenant;
    rn_tenants *set; /* a reference: tenant lives in it */
    int64_t expires_ms;
    int has_narrow;
    rn_rights narrow;
};

typedef struct waiter {
    rn_request *req;
    void (*cb)(rn_request *req, void *arg);
    void *arg;
    struct waiter *next;
} waiter;

/* The keys of one JWKS URL. */
typedef struct {
    char *url;
    rn_jwt_keys *keys;   /* NULL until a fetch succeeded */
    rn_fetch *fetch;     /* in flight */
    void *fetch_ctx;     /* its callback's argument */
    int64_t last_try_ms; /* of the last fetch started */
    int in_use;          /* named by the current tenants set */
    waiter *waiters;
    size_t nwaiters;
} jwks_source;

struct rn_credentials {
    uv_loop_t *loop;
    rn_outbound *out;
    rn_tenants *set;
    rn_map cache;         /* hash -> rn_jwt_grant */
    jwks_source *sources; /* one per distinct JWKS URL ever named */
    size_t nsources;
    uv_timer_t refresh;
    int stopped;
    EVP_MD *sha256; /* fetched once: SHA256() fetches it again on every call */
};

static void grant_unref(rn_jwt_grant *g) {
    if (!g || --g->refs > 0)
        return;
    if (g->has_narrow)
        rn_rights_free(&g->narrow);
    rn_tenants_unref(g->set);
    free(g);
}

static void cache_clear(rn_credentials *c) {
    void *v;
    for (size_t i = 0; rn_map_next(&c->cache, &i, &v);) {
        rn_jwt_grant *g = v;
        g->cached = 0;
        grant_unref(g);
    }
    rn_map_free(&c->cache);
}

static void jwks_fetch(rn_credentials *c, jwks_source *s, int64_t now_ms);

static void on_refresh(uv_timer_t *t) {
    rn_credentials *c = t->data;
    int64_t now = rn_now_ms();
    for (size_t i = 0; i < c->nsources; i++)
        if (c->sources[i].in_use && !c->sources[i].fetch)
            jwks_fetch(c, &c->sources[i], now);
}

rn_credentials *rn_credentials_new(uv_loop_t *loop, rn_outbound *outbound) {
    rn_credentials *c = rn_xcalloc(1, sizeof *c);
    c->loop = loop;
    c->out = outbound;
    c->sha256 = EVP_MD_fetch(NULL, "SHA256", NULL);
    if (!c->sha256)
        abort(); /* OpenSSL without its default provider */
    uv_timer_init(loop, &c->refresh);
    c->refresh.data = c;
    uv_timer_start(&c->refresh, on_refresh, JWKS_REFRESH_MS, JWKS_REFRESH_MS);
    return c;
}

static jwks_source *source_of(rn_credentials *c, const char *url) {
    for (size_t i = 0; i < c->nsources; i++)
        if (strcmp(c->sources[i].url, url) == 0)
            return &c->sources[i];
    return NULL;
}

void rn_credentials_use(rn_credentials *c, rn_tenants *t) {
    rn_tenants_ref(t);
    cache_clear(c);
    rn_tenants_unref(c->set);
    c->set = t;
    for (size_t i = 0; i < c->nsources; i++)
        c->sources[i].in_use = 0;
    int64_t now = rn_now_ms();
    for (size_t i = 0; i < t->nissuers; i++) {
        const char *url = t->issuers[i].jwks_url;
        if (!url)
            continue;
        jwks_source *s = source_of(c, url);
        if (!s) {
            c->sources = rn_xrealloc(c->sources, (c->nsources + 1) * sizeof *c->sources);
            s = &c->sources[c->nsources++];
            *s = (jwks_source){.url = strdup(url), .last_try_ms = INT64_MIN / 2};
            if (!s->url)
                abort();
        }
        s->in_use = 1;
        if (!s->keys && !s->fetch)
            jwks_fetch(c, s, now);
    }
}

/* Runs the waiters of s (its fetch ended). */
static void wake_waiters(jwks_source *s) {
    waiter *w = s->waiters;
    s->waiters = NULL;
    s->nwaiters = 0;
    while (w) {
        waiter *next = w->next;
        w->cb(w->req, w->arg);
        rn_request_release(w->req);
        free(w);
        w = next;
    }
}

typedef struct {
    rn_credentials *c;
    size_t index; /* of the source: the array may move */
} fetch_ctx;

static void jwks_fetched(void *arg, const rn_fetch_result *r) {
    fetch_ctx *f = arg;
    rn_credentials *c = f->c;
    jwks_source *s = &c->sources[f->index];
    free(f);
    s->fetch = NULL;
    char why[256] = "";
    if (r->failure == RN_FETCH_ANSWERED && r->status == 200) {
        rn_jwt_keys *k = rn_jwt_keys_new();
        if (rn_jwt_keys_add_jwks(k, (const char *)r->body, r->body_len, NULL, why, sizeof why) ==
            0) {
            rn_jwt_keys_free(s->keys);
            s->keys = k;
            cache_clear(c); /* a key may have been withdrawn */
            rn_log(RN_LOG_INFO, "gateway", "JWKS %s: %zu keys", s->url, rn_jwt_keys_count(k));
        } else {
            rn_jwt_keys_free(k);
        }
    } else if (r->failure == RN_FETCH_ANSWERED) {
        snprintf(why, sizeof why, "answered %ld", r->status);
    } else {
        snprintf(why, sizeof why, "%s", r->error ? r->error : "failed");
    }
    if (why[0])
        rn_log(RN_LOG_WARN, "gateway", "JWKS %s not fetched (%s)%s", s->url, why,
               s->keys ? "; the keys fetched before stay" : "");
    wake_waiters(s);
}

static void jwks_fetch(rn_credentials *c, jwks_source *s, int64_t now_ms) {
    if (c->stopped || s->fetch)
        return;
    s->last_try_ms = now_ms;
    fetch_ctx *f = rn_xcalloc(1, sizeof *f);
    *f = (fetch_ctx){c, (size_t)(s - c->sources)};
    rn_fetch_request fr = {.method = "GET",
                           .url = s->url,
                           .body_fd = -1,
                           .sink_fd = -1,
                           .sink_cap = JWKS_MAX_BYTES,
                           .strict_size = 1,
                           .timeout_ms = JWKS_TIMEOUT_MS};
    s->fetch = rn_outbound_start(c->out, &fr, jwks_fetched, f);
    s->fetch_ctx = f;
    if (!s->fetch) {
        free(f);
        wake_waiters(s);
    }
}

void rn_credentials_stop(rn_credentials *c) {
    c->stopped = 1;
    uv_timer_stop(&c->refresh);
    uv_close((uv_handle_t *)&c->refresh, NULL);
    for (size_t i = 0; i < c->nsources; i++) {
        jwks_source *s = &c->sources[i];
        if (s->fetch) {
            rn_fetch_cancel(s->fetch);
            free(s->fetch_ctx);
            s->fetch = NULL;
        }
        wake_waiters(s);
    }
}

void rn_credentials_free(rn_credentials *c) {
    if (!c)
        return;
    cache_clear(c);
    for (size_t i = 0; i < c->nsources; i++) {
        free(c->sources[i].url);
        rn_jwt_keys_free(c->sources[i].keys);
    }
    free(c->sources);
    rn_tenants_unref(c->set);
    EVP_MD_free(c->sha256);
    free(c);
}

/* ---- the credential of a request ---- */

/* The value of the query parameter name in req's target, or NULL. */
static const char *query_param(const rn_request *req, const char *name, size_t *len) {
    const char *q = memchr(req->target, '?', req->target_len);
    if (!q)
        return NULL;
    const char *p = q + 1, *end = req->target + req->target_len;
    size_t nl = strlen(name);
    while (p < end) {
        const char *amp = memchr(p, '&', (size_t)(end - p));
        const char *e = amp ? amp : end;
        if ((size_t)(e - p) > nl && memcmp(p, name, nl) == 0 && p[nl] == '=') {
            *len = (size_t)(e - p - (long)nl - 1);
            return p + nl + 1;
        }
        p = e + 1;
    }
    return NULL;
}

long rn_credentials_strip_token(const rn_request *req, char *out, size_t cap) {
    const char *q = memchr(req->target, '?', req->target_len);
    size_t path_len = q ? (size_t)(q - req->target) : req->target_len;
    if (path_len >= cap)
        return -1;
    memcpy(out, req->target, path_len);
    size_t n = path_len;
    if (!q)
        return (long)n;
    const char *p = q + 1, *end = req->target + req->target_len;
    int first = 1;
    while (p < end) {
        const char *amp = memchr(p, '&', (size_t)(end - p));
        const char *e = amp ? amp : end;
        size_t len = (size_t)(e - p);
        if (!(len >= 13 && memcmp(p, "access_token=", 13) == 0)) {
            if (n + 1 + len >= cap)
                return -1;
            out[n++] = first ? '?' : '&';
            memcpy(out + n, p, len);
            n += len;
            first = 0;
        }
        p = e + 1;
    }
    return (long)n;
}

/* The credential of req into *tok and *len: 1 found, 0 none, -1 malformed
 * (several, a scheme other than Bearer, or both a header and a parameter). */
static int credential_of(const rn_request *req, const char **tok, size_t *len, int *from_query) {
    size_t count;
    const rn_header *h = rn_request_header(req, "authorization", &count);
    size_t qlen = 0;
    const char *q = req->method == RN_HTTP_GET || req->method == RN_HTTP_HEAD
                        ? query_param(req, "access_token", &qlen)
                        : NULL;
    *from_query = 0;
    if (!h && !q)
        return 0;
    if ((h && q) || count > 1)
        return -1;
    if (q) {
        *tok = q;
        *len = qlen;
        *from_query = 1;
    } else {
        if (h->value_len < 8 || !rn_iprefix(h->value, h->value_len, "bearer "))
            return -1;
        *tok = h->value + 7;
        *len = h->value_len - 7;
        while (*len && **tok == ' ') {
            (*tok)++;
            (*len)--;
        }
    }
    for (size_t i = 0; i < *len; i++) { /* RFC 6750 b64token */
        char ch = (*tok)[i];
        if (!((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
              strchr("-._~+/=", ch)))
            return -1;
    }
    return *len > 0 ? 1 : -1;
}

/* The issuer a JWT's payload names, read unverified (the verification that
 * follows uses that issuer's keys and policy), or NULL. */
static const rn_issuer *issuer_of(const rn_tenants *t, const char *tok, size_t len) {
    const char *dot1 = memchr(tok, '.', len);
    const char *dot2 = dot1 ? memchr(dot1 + 1, '.', len - (size_t)(dot1 + 1 - tok)) : NULL;
    if (!dot2 || len > RN_JWT_MAX_TOKEN)
        return NULL;
    size_t plen = (size_t)(dot2 - dot1 - 1);
    uint8_t payload[RN_JWT_MAX_TOKEN];
    long n = rn_b64url_decode(dot1 + 1, plen, payload);
    if (n < 0)
        return NULL;
    json_t *doc = json_loadb((const char *)payload, (size_t)n, 0, NULL);
    const char *iss = json_string_value(json_object_get(doc, "iss"));
    const rn_issuer *found = NULL;
    for (size_t i = 0; iss && i < t->nissuers && !found; i++)
        if (strcmp(t->issuers[i].issuer, iss) == 0)
            found = &t->issuers[i];
    json_decref(doc);
    return found;
}

/* Verifies tok with is's keys; *unavailable when the outcome depends on
 * keys of its JWKS URL that are not there (a fetch in flight: *wait_on). */
static rn_jwt_status verify_with(rn_credentials *c, const rn_issuer *is, const char *tok,
                                 size_t len, int64_t now_ms, rn_jwt_claims **claims,
                                 jwks_source **wait_on, int *unavailable) {
    rn_jwt_policy pol = {.issuer = is->issuer,
                         .audience = is->audience,
                         .now_s = (uint64_t)(now_ms / 1000),
                         .leeway_s = is->leeway_s};
    rn_jwt_status st = RN_JWT_UNKNOWN_KEY;
    if (rn_jwt_keys_count(is->keys))
        st = rn_jwt_verify(is->keys, &pol, tok, len, claims);
    if ((st != RN_JWT_UNKNOWN_KEY && st != RN_JWT_BAD_SIGNATURE) || !is->jwks_url)
        return st;
    jwks_source *s = source_of(c, is->jwks_url);
    if (s && s->keys)
        st = rn_jwt_verify(s->keys, &pol, tok, len, claims);
    if (s && st == RN_JWT_UNKNOWN_KEY && now_ms - s->last_try_ms >= JWKS_RETRY_MS)
        jwks_fetch(c, s, now_ms); /* a key added since: the next request may know it */
    if (s && !s->keys) {
        if (s->fetch)
            *wait_on = s;
        else
            *unavailable = 1;
    }
    return st;
}

/* Makes the grant of a verified token: its tenant and scope rights. */
static rn_jwt_grant *grant_of(rn_credentials *c, const rn_issuer *is, const rn_jwt_claims *cl,
                              const uint8_t hash[32]) {
    const char *name = rn_jwt_claims_string(cl, is->tenant_claim);
    const rn_tenant *tenant = name ? rn_tenants_by_name(c->set, name) : NULL;
    if (!tenant)
        return NULL;
    rn_jwt_grant *g = rn_xcalloc(1, sizeof *g);
    memcpy(g->hash, hash, 32);
    g->refs = 1;
    g->tenant = tenant;
    g->set = c->set;
    rn_tenants_ref(c->set);
    g->expires_ms = (int64_t)rn_jwt_claims_exp(cl) * 1000;
    const char *scope = is->scope_rights ? rn_jwt_claims_string(cl, "scope") : NULL;
    if (is->scope_rights) {
        g->has_narrow = 1; /* no scope, or none that names rights: nothing is allowed */
        for (const char *p = scope ? scope : ""; *p;) {
            size_t n = strcspn(p, " ");
            char item[512], why[128];
            if (n && n < sizeof item) {
                memcpy(item, p, n);
                item[n] = 0;
                rn_rights_parse_spec(&g->narrow, item, why, sizeof why); /* others: not rights */
            }
            p += n;
            p += *p == ' ';
        }
    }
    return g;
}

/* The SHA-256 of a credential (its cache and key-table key). */
static void sha256_of(const rn_credentials *c, const char *tok, size_t len, uint8_t out[32]) {
    if (!EVP_Digest(tok, len, out, NULL, c->sha256, NULL))
        abort(); /* only for want of memory */
}

static void identify_jwt(rn_credentials *c, const char *tok, size_t len, int64_t now_ms,
                         rn_identity *id, jwks_source **wait_on) {
    uint8_t hash[32];
    sha256_of(c, tok, len, hash);
    rn_jwt_grant *g = rn_map_get(&c->cache, hash, 32);
    if (g && g->expires_ms > now_ms) {
        g->refs++;
    } else {
        const rn_issuer *is = issuer_of(c->set, tok, len);
        if (!is) {
            id->refusal = RN_E_GW_INVALID_CREDENTIAL;
            return;
        }
        rn_jwt_claims *claims = NULL;
        int unavailable = 0;
        rn_jwt_status st = verify_with(c, is, tok, len, now_ms, &claims, wait_on, &unavailable);
        if (*wait_on)
            return;
        if (st != RN_JWT_OK) {
            id->refusal = unavailable            ? RN_E_GW_AUTHENTICATION_UNAVAILABLE
                          : st == RN_JWT_EXPIRED ? RN_E_GW_CREDENTIAL_EXPIRED
                                                 : RN_E_GW_INVALID_CREDENTIAL;
            if (!unavailable)
                rn_log(RN_LOG_DEBUG, "gateway", "a JWT of %s refused: %s", is->issuer,
                       rn_jwt_status_text(st));
            return;
        }
        g = grant_of(c, is, claims, hash);
        rn_jwt_claims_free(claims);
        if (!g) {
            id->refusal = RN_E_GW_INVALID_CREDENTIAL; /* names no tenant of the file */
            return;
        }
        if (c->cache.count >= CACHE_MAX)
            cache_clear(c);
        g->cached = 1;
        g->refs++;
        rn_map_put(&c->cache, g->hash, 32, g);
    }
    id->tenant = g->tenant;
    id->expires_ms = g->expires_ms;
    id->narrow = g->has_narrow ? &g->narrow : NULL;
    id->grant = g;
}

int rn_credentials_identify(rn_credentials *c, rn_request *req, int64_t now_ms, rn_identity *id,
                            void (*cb)(rn_request *req, void *arg), void *arg) {
    *id = (rn_identity){0};
    const char *tok;
    size_t len;
    int found = credential_of(req, &tok, &len, &id->from_query);
    if (found <= 0 || !c->set) {
        id->refusal = RN_E_GW_INVALID_CREDENTIAL;
        return 1;
    }
    size_t kp = sizeof API_KEY_PREFIX - 1;
    if (len > kp && memcmp(tok, API_KEY_PREFIX, kp) == 0) {
        uint8_t hash[32];
        sha256_of(c, tok, len, hash);
        const rn_api_key *key;
        id->tenant = rn_tenants_by_key(c->set, hash, &key);
        if (!id->tenant)
            id->refusal = RN_E_GW_INVALID_CREDENTIAL;
        else if (key->expires_ms && key->expires_ms <= now_ms)
            id->refusal = RN_E_GW_CREDENTIAL_EXPIRED;
        else
            id->expires_ms = key->expires_ms;
        if (id->refusal)
            id->tenant = NULL;
        return 1;
    }
    jwks_source *wait_on = NULL;
    identify_jwt(c, tok, len, now_ms, id, &wait_on);
    if (!wait_on)
        return 1;
    if (!cb)
        return 0; /* the caller cannot wait: it asks again where it can */
    if (wait_on->nwaiters >= MAX_WAITERS) {
        id->refusal = RN_E_GW_AUTHENTICATION_UNAVAILABLE;
        return 1;
    }
    waiter *w = rn_xcalloc(1, sizeof *w);
    *w = (waiter){req, cb, arg, wait_on->waiters};
    rn_request_hold(req);
    wait_on->waiters = w;
    wait_on->nwaiters++;
    return 0;
}

void rn_identity_release(rn_identity *id) {
    if (id->grant) {
        rn_jwt_grant *g = id->grant;
        id->grant = NULL;
        grant_unref(g);
    }
}
