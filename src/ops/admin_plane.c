/*
 * admin_plane.c — the operator's routes under /__runnel/admin/: access,
 * the parse of paths and queries, cursors, and the answers' final shape
 * (docs/ADMIN.md). What a node holds is admin_local.c's, the cluster's
 * asks and merges admin_cluster.c's. See admin_plane.h.
 *
 * Cursors are opaque to clients: base64url of "c1", the listing's letter
 * and the key of the last entry given, so a cursor of one listing is
 * refused by another (400 INVALID_QUERY) and a page starts past the key
 * whatever was created or removed since.
 */
#include "ops/admin_int.h"
#include "ops/store_gauges.h"
#include "cluster/cluster.h"
#include "protocol/params.h"
#include "protocol/reply.h"
#include "surface/missing.h"
#include "util/text.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#define PREFIX "admin/"

/* ---- answers ---- */

static void send_json(rn_request *req, int status, json_t *doc, rn_buf *extra) {
    char *text = json_dumps(doc, JSON_COMPACT);
    json_decref(doc);
    rn_buf h = {0}, body = {0};
    rn_reply_common(&h);
    rn_buf_append_str(&h, "Content-Type: application/json\r\nCache-Control: no-store\r\n");
    if (extra) {
        rn_buf_append(&h, extra->data, extra->len);
        rn_buf_free(extra);
    }
    rn_buf_append_str(&body, text);
    rn_buf_append_str(&body, "\n");
    free(text);
    rn_http_respond(req, status, &h, &body);
}

static char listing_letter(admin_kind k) {
    return k == ADMIN_BUCKETS ? 'b' : k == ADMIN_STREAMS ? 's' : k == ADMIN_USAGE ? 'u' : 'x';
}

static json_t *cursor_json(const admin_query *q, const char *key, size_t len) {
    rn_buf raw = {0}, out = {0};
    rn_buf_append_str(&raw, "c1");
    rn_buf_append_byte(&raw, (uint8_t)listing_letter(q->kind));
    rn_buf_append(&raw, key, len);
    rn_b64url_append(&out, raw.data, raw.len);
    json_t *j = json_stringn((const char *)out.data, out.len);
    rn_buf_free(&raw);
    rn_buf_free(&out);
    return j;
}

/* The purge's figures for the whole of what answered: the cluster's
 * groups (1 on a single node) and whether nothing is left to do. */
static void finish_purge(rn_admin_plane *a, json_t *bucket, int unreachable) {
    json_t *p = json_object_get(bucket, "purge");
    if (!json_is_object(p))
        return;
    json_int_t groups = a->cfg.cluster ? rn_cluster_groups(a->cfg.cluster) : 1;
    json_int_t fenced = json_integer_value(json_object_get(p, "groups_fenced"));
    json_int_t left = json_integer_value(json_object_get(p, "streams_left"));
    json_object_set_new(p, "groups", json_integer(groups));
    json_object_set_new(p, "done", json_boolean(!unreachable && fenced == groups && left == 0));
}

static const char *listing_name(admin_kind k) {
    return k == ADMIN_STREAMS ? "streams" : k == ADMIN_SUBSCRIPTIONS ? "subscriptions" : "buckets";
}

/* A missing bucket or stream, as the bucket surface answers it. */
static void answer_missing(rn_admin_plane *a, rn_request *req, const admin_query *q) {
    char key[2 * ADMIN_NAME_MAX + 2];
    size_t len = q->bucket_len;
    memcpy(key, q->bucket, q->bucket_len);
    if (q->kind == ADMIN_STREAM) {
        key[len++] = '/';
        memcpy(key + len, q->stream, q->stream_len);
        len += q->stream_len;
        rn_reply_error(req, rn_bucket_missing_error(a->cfg.engine, key, len), NULL);
        return;
    }
    rn_reply_error(req, RN_E_BUCKET_NOT_FOUND, NULL);
}

void admin_answer(rn_admin_plane *a, rn_request *req, const admin_query *q, json_t *local,
                  json_t *unreachable_groups, json_t *unreachable_nodes) {
    int unreachable = json_array_size(unreachable_groups) > 0;
    json_t *doc;
    int status = 200;
    if (json_object_get(local, "items")) {
        json_t *items = json_object_get(local, "items");
        doc = json_object();
        if (q->kind == ADMIN_USAGE) {
            json_object_set_new(doc, "usage_version", json_integer(1));
            json_object_set(doc, "counters", json_object_get(local, "counters"));
        }
        json_object_set(doc, listing_name(q->kind), items);
        size_t n = json_array_size(items), i;
        json_t *it;
        json_array_foreach(items, i, it) {
            if (q->kind == ADMIN_BUCKETS || q->kind == ADMIN_USAGE)
                finish_purge(a, it, unreachable);
        }
        json_t *next = json_null();
        if (json_is_true(json_object_get(local, "more")) && n) {
            char key[2 * ADMIN_NAME_MAX + 8];
            size_t len = admin_item_key(q, json_array_get(items, n - 1), key, sizeof key);
            json_decref(next);
            next = cursor_json(q, key, len);
        }
        json_object_set_new(doc, "next_cursor", next);
    } else {
        json_t *item = json_object_get(local, "item");
        if (!json_is_object(item) && unreachable) { /* nobody who answered holds it */
            json_decref(local);
            doc =
                json_pack("{s:{s:s, s:s}}", "error", "code", rn_error_code(RN_E_ADMIN_UNREACHABLE),
                          "message", rn_error_message(RN_E_ADMIN_UNREACHABLE));
            json_object_set_new(doc, "unreachable_groups", unreachable_groups);
            json_object_set_new(doc, "unreachable_nodes", unreachable_nodes);
            rn_buf extra = {0};
            rn_buf_append_str(&extra, "Retry-After: 1\r\n");
            send_json(req, rn_error_status(RN_E_ADMIN_UNREACHABLE), doc, &extra);
            return;
        }
        if (!json_is_object(item)) {
            json_decref(local);
            json_decref(unreachable_groups);
            json_decref(unreachable_nodes);
            answer_missing(a, req, q);
            return;
        }
        doc = json_deep_copy(item);
        if (q->kind == ADMIN_BUCKET || q->kind == ADMIN_PURGE) {
            finish_purge(a, doc, unreachable);
            if (q->kind == ADMIN_PURGE)
                status = json_is_true(json_object_get(json_object_get(doc, "purge"), "done")) ? 200
                                                                                              : 202;
        }
    }
    json_decref(local);
    json_object_set_new(doc, "unreachable_groups", unreachable_groups);
    json_object_set_new(doc, "unreachable_nodes", unreachable_nodes);
    rn_buf extra = {0};
    if (q->kind == ADMIN_PURGE && unreachable) { /* not recorded everywhere: repeat it */
        json_t *err = json_pack("{s:s, s:s}", "code", rn_error_code(RN_E_ADMIN_UNREACHABLE),
                                "message", rn_error_message(RN_E_ADMIN_UNREACHABLE));
        json_object_set_new(doc, "error", err);
        status = rn_error_status(RN_E_ADMIN_UNREACHABLE);
        rn_buf_append_str(&extra, "Retry-After: 1\r\n");
    }
    send_json(req, status, doc, extra.len ? &extra : NULL);
}

/* ---- a single node's answers ---- */

typedef struct {
    rn_admin_plane *a;
    rn_request *req;
    admin_query q;
} local_wait;

static rn_error refusal_of(rn_result r) {
    switch (r) {
    case RN_ERR_DISK_FULL:
        return RN_E_WAL_DISK_PRESSURE;
    case RN_ERR_NO_LEADER:
        return RN_E_NO_LEADER;
    case RN_ERR_LOG_BUSY:
        return RN_E_RAFT_BACKPRESSURE;
    default:
        return RN_E_OUTCOME_UNKNOWN; /* the fence may still apply: repeat the purge */
    }
}

/* A single node's local answer arrived for the held request (arg). */
static void local_done(void *arg, json_t *local) {
    local_wait *w = arg;
    if (local && !rn_request_gone(w->req)) /* local NULL: the server stops */
        admin_answer(w->a, w->req, &w->q, local, json_array(), json_array());
    else
        json_decref(local);
    rn_request_release(w->req);
    free(w);
}

static void fenced(void *arg, rn_result r) {
    local_wait *w = arg;
    if (r == RN_OK_FENCED && !rn_request_gone(w->req)) {
        admin_scope all = {.all = 1};
        admin_local(w->a, &w->q, &all, local_done, w);
        return;
    }
    if (!rn_request_gone(w->req)) { /* gone: the fence holds or not, a repeat tells */
        rn_buf extra = {0};
        rn_buf_append_str(&extra, "Retry-After: 1\r\n");
        rn_reply_error(w->req, refusal_of(r), &extra);
    }
    rn_request_release(w->req);
    free(w);
}

typedef struct {
    rn_admin_plane *a;
    rn_request *req;
    admin_query q;
} node_wait;

static void node_counted(void *arg, const rn_store_gauges *g) {
    node_wait *w = arg;
    if (g && !rn_request_gone(w->req)) /* else the server stops */
        admin_answer(w->a, w->req, &w->q, admin_node(w->a, g->streams), json_array(), json_array());
    rn_request_release(w->req);
    free(w);
}

void admin_answer_node(rn_admin_plane *a, rn_request *req, const admin_query *q) {
    node_wait *w = rn_xcalloc(1, sizeof *w);
    *w = (node_wait){.a = a, .req = req, .q = *q};
    rn_request_hold(req);
    rn_gauge_walk_ask(a->cfg.gauges, node_counted, w);
}

static void single_node(rn_admin_plane *a, rn_request *req, const admin_query *q) {
    if (q->kind == ADMIN_NODE) {
        admin_answer_node(a, req, q);
        return;
    }
    local_wait *w = rn_xcalloc(1, sizeof *w);
    *w = (local_wait){.a = a, .req = req, .q = *q};
    rn_request_hold(req);
    if (q->kind == ADMIN_PURGE) {
        rn_engine_fence(a->cfg.engine, q->bucket, q->bucket_len, -1, fenced, w);
        return;
    }
    admin_scope all = {.all = 1};
    admin_local(a, q, &all, local_done, w);
}

/* ---- parsing ---- */

/* A bucket's name from its path segment: 1 to ADMIN_NAME_MAX bytes of
 * UTF-8 without "/" or NUL, not starting with "__" (the operational
 * routes'). */
static int parse_bucket(const char *seg, size_t len, admin_query *q) {
    long n = len <= ADMIN_NAME_MAX * 3 && len ? rn_percent_decode(seg, len, q->bucket) : -1;
    if (n <= 0 || n > ADMIN_NAME_MAX || memchr(q->bucket, '/', (size_t)n) ||
        memchr(q->bucket, 0, (size_t)n) || (n >= 2 && q->bucket[0] == '_' && q->bucket[1] == '_') ||
        !rn_utf8_valid((const uint8_t *)q->bucket, (size_t)n))
        return -1;
    q->bucket_len = (size_t)n;
    return 0;
}

/* Splits path (after "admin/") into q's kind and names; the rn_error to
 * answer, or -1. */
static int parse_path(const char *p, size_t len, rn_http_method m, admin_query *q) {
    int get = m == RN_HTTP_GET || m == RN_HTTP_HEAD;
    static const char buckets[] = "buckets", streams[] = "/streams", purge[] = "/purge";
    struct {
        const char *name;
        admin_kind kind;
    } fixed[] = {{"node", ADMIN_NODE},
                 {"buckets", ADMIN_BUCKETS},
                 {"usage", ADMIN_USAGE},
                 {"subscriptions", ADMIN_SUBSCRIPTIONS}};
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
        if (len == strlen(fixed[i].name) && memcmp(p, fixed[i].name, len) == 0) {
            q->kind = fixed[i].kind;
            return get ? -1 : RN_E_METHOD_NOT_ALLOWED;
        }
    size_t bl = sizeof buckets - 1;
    if (len <= bl + 1 || memcmp(p, buckets, bl) != 0 || p[bl] != '/')
        return RN_E_NOT_FOUND;
    p += bl + 1;
    len -= bl + 1;
    const char *slash = memchr(p, '/', len);
    size_t seg = slash ? (size_t)(slash - p) : len;
    if (parse_bucket(p, seg, q))
        return RN_E_ADMIN_INVALID_BUCKET;
    p += seg;
    len -= seg;
    size_t sl = sizeof streams - 1, pl = sizeof purge - 1;
    if (len == 0) {
        q->kind = ADMIN_BUCKET;
    } else if (len == pl && memcmp(p, purge, pl) == 0) {
        q->kind = ADMIN_PURGE;
        return m == RN_HTTP_POST ? -1 : RN_E_METHOD_NOT_ALLOWED;
    } else if (len == sl && memcmp(p, streams, sl) == 0) {
        q->kind = ADMIN_STREAMS;
    } else if (len > sl + 1 && memcmp(p, streams, sl) == 0 && p[sl] == '/') {
        q->kind = ADMIN_STREAM;
        long n = len - sl - 1 <= ADMIN_NAME_MAX * 3
                     ? rn_percent_decode(p + sl + 1, len - sl - 1, q->stream)
                     : -1;
        if (n <= 0 || n > ADMIN_NAME_MAX || !rn_utf8_valid((const uint8_t *)q->stream, (size_t)n))
            return RN_E_INVALID_STREAM_ID;
        q->stream_len = (size_t)n;
    } else {
        return RN_E_NOT_FOUND;
    }
    return get ? -1 : RN_E_METHOD_NOT_ALLOWED;
}

/* The groups of a peer's ask: "" (none) or decimals separated by ",". */
static int parse_groups(const char *v, size_t len, uint8_t groups[32]) {
    memset(groups, 0, 32);
    for (size_t i = 0; i < len;) {
        size_t j = i;
        while (j < len && v[j] != ',')
            j++;
        uint64_t g;
        if (rn_parse_strict_u64(v + i, j - i, 255, &g))
            return -1;
        admin_group_add(groups, (unsigned)g);
        i = j + (j < len);
    }
    return 0;
}

/* The query's parameters; 0, or -1 after answering the refusal. */
static int parse_query(rn_request *req, const char *query, size_t query_len, admin_query *q) {
    char val[4 * ADMIN_NAME_MAX];
    long n;
    rn_param_fault f;
    q->limit = ADMIN_LIMIT_DEFAULT;
    if (rn_param_query(query, query_len, "limit", RN_E_ADMIN_INVALID_LIMIT, val, sizeof val, &n,
                       &f))
        goto fault;
    uint64_t limit;
    if (n >= 0 && (rn_parse_strict_u64(val, (size_t)n, ADMIN_LIMIT_MAX, &limit) || limit == 0)) {
        rn_reply_error(req, RN_E_ADMIN_INVALID_LIMIT, NULL);
        return -1;
    }
    if (n >= 0)
        q->limit = (size_t)limit;
    if (rn_param_query(query, query_len, "cursor", RN_E_ADMIN_INVALID_CURSOR, val, sizeof val, &n,
                       &f))
        goto fault;
    if (n >= 0) {
        uint8_t raw[sizeof val];
        long r = rn_b64url_decode(val, (size_t)n, raw);
        if (r < 3 || memcmp(raw, "c1", 2) != 0 || raw[2] != (uint8_t)listing_letter(q->kind) ||
            (size_t)r - 3 > sizeof q->after) {
            rn_reply_error(req, RN_E_ADMIN_INVALID_CURSOR, NULL);
            return -1;
        }
        memcpy(q->after, raw + 3, (size_t)r - 3);
        q->after_len = (size_t)r - 3;
        q->has_after = 1;
    }
    if (rn_param_query(query, query_len, "prefix", RN_E_ADMIN_INVALID_PREFIX, val, sizeof val, &n,
                       &f))
        goto fault;
    if (n >= 0) {
        if (n > ADMIN_NAME_MAX || !rn_utf8_valid((const uint8_t *)val, (size_t)n)) {
            rn_reply_error(req, RN_E_ADMIN_INVALID_PREFIX, NULL);
            return -1;
        }
        memcpy(q->prefix, val, (size_t)n);
        q->prefix_len = (size_t)n;
    }
    if (rn_param_query(query, query_len, "scope", RN_E_INVALID_REQUEST, val, sizeof val, &n, &f))
        goto fault;
    if (n >= 0) {
        long g;
        char groups[1024];
        if (n != 5 || memcmp(val, "local", 5) != 0 ||
            rn_param_query(query, query_len, "groups", RN_PARAM_LENIENT, groups, sizeof groups, &g,
                           &f) ||
            parse_groups(groups, g > 0 ? (size_t)g : 0, q->groups)) {
            rn_reply_error(req, RN_E_INVALID_REQUEST, NULL);
            return -1;
        }
        q->local = 1;
    }
    return 0;
fault:
    rn_reply_param_fault(req, &f);
    return -1;
}

/* ---- the plane ---- */

rn_admin_plane *rn_admin_plane_new(const rn_admin_plane_config *cfg) {
    assert(cfg->engine && cfg->walker && cfg->gauges); /* the listings and the overview walk */
    rn_admin_plane *a = rn_xcalloc(1, sizeof *a);
    a->cfg = *cfg;
    uint8_t rnd[8];
    if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd)
        memset(rnd, 0, sizeof rnd);
    rn_hex_encode(rnd, sizeof rnd, a->instance);
    a->instance[16] = 0;
    return a;
}

/* A peer's ask (scope=local) with its signature, else the operator's
 * credential. False after answering the refusal. */
static bool allowed(rn_admin_plane *a, rn_request *req, const char *query, size_t query_len) {
    long n;
    char scope[8];
    rn_param_fault f;
    int local = rn_param_query(query, query_len, "scope", RN_PARAM_LENIENT, scope, sizeof scope, &n,
                               &f) == 0 &&
                n >= 0;
    if (local && a->cfg.cluster && rn_cluster_peer_credential(a->cfg.cluster, req))
        return rn_cluster_peer_authorize(a->cfg.cluster, req);
    return rn_admin_authorize(a->cfg.auth, req);
}

void rn_admin_plane_handle(rn_admin_plane *a, rn_request *req, const char *path, size_t path_len,
                           const char *query, size_t query_len) {
    size_t pl = sizeof PREFIX - 1;
    if (!allowed(a, req, query, query_len))
        return;
    admin_query *q = rn_xcalloc(1, sizeof *q);
    int refusal = path_len > pl && memcmp(path, PREFIX, pl) == 0
                      ? parse_path(path + pl, path_len - pl, req->method, q)
                      : RN_E_NOT_FOUND;
    if (refusal >= 0) {
        rn_buf extra = {0};
        if (refusal == RN_E_METHOD_NOT_ALLOWED)
            rn_buf_appendf(&extra, "Allow: %s\r\n",
                           q->kind == ADMIN_PURGE ? "POST, OPTIONS" : "GET, HEAD, OPTIONS");
        rn_reply_error(req, (rn_error)refusal, &extra);
    } else if (parse_query(req, query, query_len, q) == 0) {
        if (q->local && a->cfg.cluster)
            admin_cluster_local(a, req, q);
        else if (a->cfg.cluster)
            admin_cluster_query(a, req, q);
        else
            single_node(a, req, q);
    }
    free(q);
}

void rn_admin_plane_stop(rn_admin_plane *a) {
    if (a)
        admin_cluster_stop(a);
}

void rn_admin_plane_free(rn_admin_plane *a) {
    free(a);
}
