/*
 * gate.c — the decision in front of the handlers. See gate.h.
 *
 * The order of the checks, each answering as docs/GATEWAY.md says:
 *   preflight (OPTIONS: an origin any tenant lists) → open routes →
 *   credential (401, or 503 while an issuer's keys cannot be had) →
 *   tenant status (402, 403) → rights (403 for an operator route or a
 *   write of a reader, else the concealing 404) → request limit (413) →
 *   quotas (429, 503) → the embedding program's hook → the external
 *   authorizer (402, 403, 429, 503) → admitted.
 * A credential is checked before anything about the target is said, so an
 * unidentified client learns nothing; rights come before quotas, so a
 * concealed bucket never answers 429.
 *
 * Every request the gate sees gets a ticket at once (rn_request.gate_ticket,
 * freed with the request), so that the gate's own answers already carry
 * the CORS rewrite; it is marked admitted when the request may go on.
 */
#include "gateway/gate.h"
#include "gateway/authz.h"
#include "gateway/credentials.h"
#include "gateway/quota.h"
#include "gateway/tenants.h"
#include "gateway/usage.h"
#include "protocol/reply.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/text.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#define ORIGIN_MAX 256
#define BODY_FLOOR_GRACE_MS 1000 /* a tenant's body floor starts counting after this */

struct rn_gate {
    uv_loop_t *loop;
    rn_gate_config cfg;
    char *tenants_path, *usage_path;
    rn_tenants *set;
    rn_outbound *out; /* JWKS URLs and the authorizer */
    rn_credentials *creds;
    rn_authz *authz;
    rn_quotas *quotas;
    rn_usage_log *usage;
    rn_gate_refusal_fn hook;
    void *hook_arg;
};

typedef struct {
    rn_gate *g;
    rn_tenants *set; /* a reference: tenant lives in it */
    rn_identity id;
    const rn_tenant *tenant;
    rn_target target;
    rn_quota_hold hold;
    int admitted, waiting, answered;
    uint64_t limit;    /* the request's body limit */
    uint64_t bytes_in; /* of a streamed body */
    char origin[ORIGIN_MAX];
    int cors;          /* answers carry Access-Control-Allow-Origin: origin */
    char *target_text; /* the target without access_token (NULL: unchanged) */
    size_t target_len;
    void (*cb)(rn_request *req, void *arg);
    void *cb_arg;
} ticket;

static ticket *ticket_of(const rn_request *req) {
    return req->gate_ticket;
}

/* ---- the head rewrite: CORS and the request limit ---- */

/* Rewrites head in place: the Access-Control-Allow-Origin line becomes the
 * ticket's origin (with Vary: Origin), or goes; Ursula-Max-Request-Bytes
 * drops to the request's limit when it is higher. */
static void rewrite_head(rn_request *req, int status, rn_buf *head) {
    (void)status;
    const ticket *t = ticket_of(req);
    rn_buf out = {0};
    const char *p = (const char *)head->data, *end = p + head->len;
    while (p < end) {
        const char *eol = memchr(p, '\n', (size_t)(end - p));
        const char *next = eol ? eol + 1 : end;
        size_t len = (size_t)(next - p);
        if (rn_iprefix(p, len, "access-control-allow-origin:")) {
            if (t->cors)
                rn_buf_appendf(&out, "Access-Control-Allow-Origin: %s\r\nVary: Origin\r\n",
                               t->origin);
        } else if (rn_iprefix(p, len, "ursula-max-request-bytes:")) {
            const char *v = p + 25;
            size_t vlen = len - 25;
            while (vlen && (*v == ' '))
                v++, vlen--;
            while (vlen && (v[vlen - 1] == '\n' || v[vlen - 1] == '\r' || v[vlen - 1] == ' '))
                vlen--;
            uint64_t n;
            if (!rn_parse_strict_u64(v, vlen, UINT64_MAX, &n) && t->limit && n > t->limit)
                rn_buf_appendf(&out, "Ursula-Max-Request-Bytes: %llu\r\n",
                               (unsigned long long)t->limit);
            else
                rn_buf_append(&out, p, len);
        } else {
            rn_buf_append(&out, p, len);
        }
        p = next;
    }
    rn_buf_free(head);
    *head = out;
}

/* ---- tickets ---- */

static void ticket_done(rn_request *req) {
    ticket *t = ticket_of(req);
    req->gate_ticket = NULL;
    rn_gate *g = t->g;
    if (t->hold.use) {
        uint64_t in = t->bytes_in > req->body.len ? t->bytes_in : req->body.len;
        rn_quota_release(g->quotas, &t->hold, &t->tenant->limits, t->target.bucket,
                         t->target.bucket_len, in, req->bytes_out, (uint64_t)rn_now_ms());
    }
    rn_identity_release(&t->id);
    rn_tenants_unref(t->set);
    free(t->target_text);
    free(t);
}

/* The ticket of req, made on first sight: the origin whose answers may be
 * read is, until a tenant is known, one that any tenant lists. */
static ticket *ticket_for(rn_gate *g, rn_request *req) {
    ticket *t = ticket_of(req);
    if (t)
        return t;
    t = rn_xcalloc(1, sizeof *t);
    t->g = g;
    t->set = g->set;
    rn_tenants_ref(t->set);
    t->limit = g->cfg.max_request_bytes;
    const rn_header *o = rn_request_header(req, "origin", NULL);
    if (o && o->value_len < ORIGIN_MAX) {
        memcpy(t->origin, o->value, o->value_len);
        t->origin[o->value_len] = 0;
        t->cors = rn_tenants_any_cors(t->set, o->value, o->value_len);
    }
    req->gate_ticket = t;
    req->gate_done = ticket_done;
    req->rewrite_head = rewrite_head;
    return t;
}

/* ---- answers ---- */

static void refuse(rn_request *req, rn_error e, uint64_t retry_after_s, const char *detail,
                   size_t detail_len) {
    ticket *t = ticket_of(req);
    t->answered = 1;
    rn_quota_count_refusal(rn_quota_use(t->g->quotas, t->tenant ? t->tenant->name : "-"), e,
                           t->target.bucket, t->target.bucket_len);
    rn_buf extra = {0};
    if (retry_after_s || rn_error_status(e) == 503)
        rn_buf_appendf(&extra, "Retry-After: %llu\r\n",
                       (unsigned long long)(retry_after_s ? retry_after_s : 1));
    if (e == RN_E_GW_REQUEST_TOO_LARGE)
        rn_buf_appendf(&extra, "Ursula-Max-Request-Bytes: %llu\r\n", (unsigned long long)t->limit);
    rn_reply_intermediary_error(req, e, &extra, detail, detail_len);
}

void rn_gate_refuse(rn_request *req, rn_error e, uint64_t retry_after_s) {
    assert(ticket_of(req));
    refuse(req, e, retry_after_s, NULL, 0);
}

/* The concealing answer: what a node answers for what does not exist (a
 * bucket; on the v1 surface, the stream, named as the node names it). */
static void conceal(rn_request *req, const rn_target *tg) {
    if (tg->kind != RN_TARGET_V1) {
        refuse(req, RN_E_BUCKET_NOT_FOUND, 0, NULL, 0);
        return;
    }
    char path[sizeof tg->buf + 16];
    int n = snprintf(path, sizeof path, "/v1/stream/%.*s", (int)tg->stream_len, tg->stream);
    refuse(req, RN_E_STREAM_NOT_FOUND, 0, path, n > 0 && (size_t)n < sizeof path ? (size_t)n : 0);
}

/* ---- the checks ---- */

static int is_write(const rn_request *req) {
    return req->method == RN_HTTP_PUT || req->method == RN_HTTP_POST ||
           req->method == RN_HTTP_DELETE || req->method == RN_HTTP_OTHER;
}

/* Whether req's query holds the parameter pair ("name=value") exactly. */
static int query_has(const rn_request *req, const char *pair) {
    const char *q = memchr(req->target, '?', req->target_len);
    const char *end = req->target + req->target_len;
    size_t n = strlen(pair);
    for (const char *p = q ? q + 1 : end; p < end;) {
        const char *amp = memchr(p, '&', (size_t)(end - p));
        const char *e = amp ? amp : end;
        if ((size_t)(e - p) == n && memcmp(p, pair, n) == 0)
            return 1;
        p = e + 1;
    }
    return 0;
}

/* What req asks of the quotas. */
static rn_quota_ask ask_of(const rn_request *req, uint64_t limit) {
    rn_quota_ask a = {0};
    a.live_read = req->method == RN_HTTP_GET &&
                  (query_has(req, "live=long-poll") || query_has(req, "live=sse"));
    const rn_header *cl = rn_request_header(req, "content-length", NULL);
    uint64_t declared = 0;
    if (cl && !rn_parse_strict_u64(cl->value, cl->value_len, UINT64_MAX, &declared))
        a.upload = declared > 0;
    else if (rn_request_header(req, "transfer-encoding", NULL))
        a.upload = 1, declared = limit;
    a.upload_bytes = a.upload ? declared : 0;
    return a;
}

/* The rights the identity grants on tg. */
static unsigned rights_on(const ticket *t, const rn_target *tg) {
    unsigned r = rn_rights_on(&t->tenant->rights, tg);
    if (t->id.narrow)
        r &= rn_rights_on(t->id.narrow, tg);
    return r;
}

static int admin(const ticket *t) {
    return rn_rights_admin(&t->tenant->rights) && (!t->id.narrow || rn_rights_admin(t->id.narrow));
}

/* Refuses req for its status, rights or limit; returns 1 when it did. */
static int refused_by_rights(rn_request *req, ticket *t) {
    const rn_tenant *tn = t->tenant;
    if (tn->status != RN_TENANT_ACTIVE) {
        refuse(req,
               tn->status == RN_TENANT_UNPAID ? RN_E_GW_PAYMENT_REQUIRED : RN_E_GW_ACCOUNT_REVOKED,
               0, NULL, 0);
        return 1;
    }
    const rn_target *tg = &t->target;
    if (tg->kind == RN_TARGET_OPS) {
        if (!admin(t)) {
            refuse(req, RN_E_GW_ADMIN_REQUIRED, 0, NULL, 0);
            return 1;
        }
        req->route_flags |= RN_REQUEST_ADMIN_GRANTED;
    } else if (tg->kind != RN_TARGET_NONE) {
        unsigned need = is_write(req) ? RN_RIGHT_WRITE : RN_RIGHT_READ;
        if (tg->kind == RN_TARGET_SUBS)
            need = RN_RIGHT_READ | RN_RIGHT_WRITE;
        unsigned has = rights_on(t, tg);
        if ((has & need) != need) {
            if (has & RN_RIGHT_READ || tg->kind == RN_TARGET_SUBS)
                refuse(req, RN_E_GW_FORBIDDEN, 0, NULL, 0);
            else
                conceal(req, tg);
            return 1;
        }
    }
    if (tn->limits.max_request_bytes && tn->limits.max_request_bytes < t->limit)
        t->limit = tn->limits.max_request_bytes;
    const rn_header *cl = rn_request_header(req, "content-length", NULL);
    uint64_t declared;
    if ((cl && !rn_parse_strict_u64(cl->value, cl->value_len, UINT64_MAX, &declared) &&
         declared > t->limit) ||
        req->body.len > t->limit) {
        refuse(req, RN_E_GW_REQUEST_TOO_LARGE, 0, NULL, 0);
        return 1;
    }
    return 0;
}

static void admit(rn_request *req, ticket *t) {
    t->admitted = 1;
    if (t->tenant) {
        t->cors = t->origin[0] && rn_tenant_cors(t->tenant, t->origin, strlen(t->origin));
        req->min_body_rate = t->tenant->limits.min_body_bytes_per_second;
        req->body_grace_ms = req->min_body_rate ? BODY_FLOOR_GRACE_MS : 0;
        req->credential_expires_ms = t->id.expires_ms;
    } else {
        t->cors = 0; /* an open route: no credential, nothing a page should read across origins */
    }
    if (t->id.from_query) {
        char buf[8192];
        long n = rn_credentials_strip_token(req, buf, sizeof buf);
        if (n >= 0) {
            t->target_text = rn_xmalloc((size_t)n + 1);
            memcpy(t->target_text, buf, (size_t)n);
            t->target_text[n] = 0;
            t->target_len = (size_t)n;
            req->target = t->target_text; /* the handlers never see the credential */
            req->target_len = t->target_len;
        }
    }
}

static rn_gate_verdict decide(rn_gate *g, rn_request *req, ticket *t, int may_wait);

/* A wait (an issuer's keys, the authorizer) ended: decide again, and tell
 * the caller unless that waits once more. */
static void resume(rn_request *req, void *arg) {
    (void)arg;
    ticket *t = ticket_of(req);
    if (!t || !t->waiting)
        return;
    t->waiting = 0;
    if (rn_request_gone(req))
        return;
    if (decide(t->g, req, t, 1) != RN_GATE_WAIT)
        t->cb(req, t->cb_arg);
}

static void authorized(rn_request *req, void *arg, const rn_authz_verdict *v) {
    ticket *t = ticket_of(req);
    if (!t || !t->waiting)
        return;
    t->waiting = 0;
    if (rn_request_gone(req))
        return;
    if (v->refusal)
        refuse(req, v->refusal, v->retry_after_s, NULL, 0);
    else
        admit(req, t);
    (void)arg;
    t->cb(req, t->cb_arg);
}

static rn_gate_verdict decide(rn_gate *g, rn_request *req, ticket *t, int may_wait) {
    int64_t now = rn_now_ms();
    if (!t->tenant) {
        if (!rn_credentials_identify(g->creds, req, now, &t->id, may_wait ? resume : NULL, NULL)) {
            if (!may_wait)
                return RN_GATE_LATER;
            t->waiting = 1;
            return RN_GATE_WAIT;
        }
        if (t->id.refusal) {
            refuse(req, t->id.refusal, 0, NULL, 0);
            return RN_GATE_DONE;
        }
        t->tenant = t->id.tenant;
        if (refused_by_rights(req, t))
            return RN_GATE_DONE;
        uint64_t retry;
        rn_quota_ask ask = ask_of(req, t->limit);
        rn_error e = rn_quota_admit(g->quotas, rn_quota_use(g->quotas, t->tenant->name),
                                    &t->tenant->limits, &ask, (uint64_t)now, &t->hold, &retry);
        if (e) {
            refuse(req, e, retry, NULL, 0);
            return RN_GATE_DONE;
        }
        if (g->hook) {
            rn_gate_info info = {.tenant = t->tenant->name, .req = req, .target = &t->target};
            rn_gate_refusal r = g->hook(g->hook_arg, &info);
            if (r.refusal) {
                assert(r.refusal == RN_E_GW_PAYMENT_REQUIRED ||
                       r.refusal == RN_E_GW_ACCOUNT_REVOKED || r.refusal == RN_E_GW_FORBIDDEN ||
                       r.refusal == RN_E_GW_RATE_LIMITED);
                refuse(req, r.refusal, r.retry_after_s, NULL, 0);
                return RN_GATE_DONE;
            }
        }
    }
    if (rn_authz_active(g->authz)) {
        if (!may_wait)
            return RN_GATE_LATER;
        rn_authz_verdict v;
        if (!rn_authz_check(g->authz, req, t->tenant->name, &t->target, now, &v, authorized,
                            NULL)) {
            t->waiting = 1;
            return RN_GATE_WAIT;
        }
        if (v.refusal) {
            refuse(req, v.refusal, v.retry_after_s, NULL, 0);
            return RN_GATE_DONE;
        }
    }
    admit(req, t);
    return RN_GATE_PASS;
}

/* A preflight: allowed for an origin that any tenant lists (browsers send
 * it without credentials). */
static void preflight(rn_request *req, ticket *t) {
    t->answered = 1;
    rn_reply_preflight(req, 0); /* the gate's own answer: no server identity (ext §10) */
}

rn_gate_verdict rn_gate_check(rn_gate *g, rn_request *req, int may_wait,
                              void (*cb)(rn_request *req, void *arg), void *arg) {
    ticket *t = ticket_for(g, req);
    if (t->admitted)
        return RN_GATE_PASS;
    assert(!t->waiting && !t->answered);
    t->cb = cb;
    t->cb_arg = arg;
    if (req->method == RN_HTTP_OPTIONS) {
        preflight(req, t);
        return RN_GATE_DONE;
    }
    rn_target_of(req, &t->target);
    if (t->target.kind == RN_TARGET_OPEN || t->target.kind == RN_TARGET_SUBS_TOKEN) {
        admit(req, t);
        return RN_GATE_PASS;
    }
    return decide(g, req, t, may_wait);
}

int rn_gate_admitted(const rn_request *req) {
    const ticket *t = ticket_of(req);
    return t && t->admitted;
}

int rn_gate_passes_authorization(const rn_request *req) {
    const ticket *t = ticket_of(req);
    return t && t->admitted && t->target.kind == RN_TARGET_SUBS_TOKEN;
}

const char *rn_gate_tenant(const rn_request *req) {
    const ticket *t = ticket_of(req);
    return t && t->tenant ? t->tenant->name : "-";
}

int64_t rn_gate_expires_ms(const rn_request *req) {
    const ticket *t = ticket_of(req);
    return t ? t->id.expires_ms : 0;
}

void rn_gate_count_bytes_in(rn_request *req, uint64_t n) {
    ticket *t = ticket_of(req);
    if (t)
        t->bytes_in += n;
}

/* ---- the gate ---- */

static void flush_usage(void *arg, rn_buf *out) {
    rn_gate *g = arg;
    rn_quota_usage_lines(g->quotas, rn_now_ms(), out);
}

/* Loads the tenants file; refuses one whose tenant's request limit is
 * above the gate's own (a node's at most): the gate would take bodies a
 * node refuses unread. */
static rn_tenants *load(rn_gate *g, char *err, size_t cap) {
    int missing;
    rn_tenants *t = rn_tenants_load(g->tenants_path, &missing, err, cap);
    for (size_t i = 0; t && i < t->ntenants; i++) {
        uint64_t limit = t->tenants[i].limits.max_request_bytes;
        if (limit > g->cfg.max_request_bytes) {
            snprintf(err, cap,
                     "%s: tenant \"%s\": max_request_bytes %llu is above the request limit of "
                     "the nodes behind the gate, %llu",
                     g->tenants_path, t->tenants[i].name, (unsigned long long)limit,
                     (unsigned long long)g->cfg.max_request_bytes);
            rn_tenants_unref(t);
            return NULL;
        }
    }
    if (t && missing)
        rn_log(RN_LOG_WARN, "gateway", "tenants file %s does not exist: nobody is let in",
               g->tenants_path);
    else if (t)
        rn_log(RN_LOG_INFO, "gateway", "tenants file %s: %zu tenants, %zu keys, %zu issuers",
               g->tenants_path, t->ntenants, t->nkeys, t->nissuers);
    return t;
}

static void use(rn_gate *g, rn_tenants *t) {
    rn_tenants_unref(g->set);
    g->set = t;
    rn_credentials_use(g->creds, t);
    rn_authz_use(g->authz, &t->authorizer);
}

rn_gate *rn_gate_new(uv_loop_t *loop, const rn_gate_config *cfg, char *err, size_t cap) {
    rn_gate *g = rn_xcalloc(1, sizeof *g);
    g->loop = loop;
    g->cfg = *cfg;
    g->tenants_path = strdup(cfg->tenants_path);
    if (!g->tenants_path)
        abort();
    rn_tenants *t = load(g, err, cap);
    if (!t) {
        free(g->tenants_path);
        free(g);
        return NULL;
    }
    rn_outbound_config oc = {.user_agent = "runnel-gateway", .max_running = 64, .max_queued = 4096};
    g->out = rn_outbound_new(loop, &oc);
    g->creds = rn_credentials_new(loop, g->out);
    g->authz = rn_authz_new(loop, g->out);
    g->quotas = rn_quotas_new(cfg->upload_budget_bytes);
    use(g, t);
    if (cfg->usage_log && cfg->usage_log[0])
        g->usage = rn_usage_log_start(loop, cfg->usage_log, cfg->usage_log_max_bytes,
                                      cfg->usage_log_interval_ms, flush_usage, g);
    return g;
}

int rn_gate_reload(rn_gate *g, char *err, size_t cap) {
    rn_tenants *t = load(g, err, cap);
    if (!t)
        return -1;
    use(g, t);
    return 0;
}

void rn_gate_set_refusal_hook(rn_gate *g, rn_gate_refusal_fn fn, void *arg) {
    g->hook = fn;
    g->hook_arg = arg;
}

void rn_gate_stop(rn_gate *g) {
    rn_usage_log_stop(g->usage);
    rn_credentials_stop(g->creds);
    rn_authz_stop(g->authz);
    rn_outbound_stop(g->out);
}

void rn_gate_free(rn_gate *g) {
    if (!g)
        return;
    rn_usage_log_free(g->usage);
    rn_credentials_free(g->creds);
    rn_authz_free(g->authz);
    rn_outbound_free(g->out);
    rn_quotas_free(g->quotas);
    rn_tenants_unref(g->set);
    free(g->tenants_path);
    free(g);
}

void rn_gate_metrics(const rn_gate *g, rn_buf *out) {
    rn_quota_metrics(g->quotas, out);
}
