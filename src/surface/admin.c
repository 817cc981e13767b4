/*
 * admin.c — operator routes under /__runnel/. See admin.h.
 */
#include "surface/admin.h"
#include "protocol/offset.h"
#include "protocol/params.h"
#include "protocol/reply.h"
#include "util/fault.h"
#include "util/text.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define REWRITE_PREFIX "test/rewrite/"

typedef struct {
    rn_request *req;
    char *key;
    rn_op op;
} rewrite_ctx;

static void rewrite_done(rn_op *op) {
    rewrite_ctx *c = op->arg;
    if (op->out.result == RN_OK_REWRITTEN) {
        rn_buf h = {0}, body = {0};
        rn_reply_common(&h);
        rn_reply_incarnation(&h, op->out.stream);
        rn_reply_offset(&h, "Stream-Next-Offset", op->out.stream->tail);
        rn_http_respond(c->req, 204, &h, &body);
    } else {
        rn_reply_refusal(c->req, op);
    }
    rn_request_release(c->req);
    free(c->key);
    free(c);
}

/* POST test/rewrite/{key}?keep=<offset>: a history rewrite keeping the
 * bytes below keep (default: all of them). */
static void rewrite(rn_surface *sf, rn_request *req, const char *key, size_t key_len,
                    const char *query, size_t query_len) {
    uint64_t keep = UINT64_MAX;
    char val[64];
    long n;
    rn_param_fault f;
    rn_offset_kind kind;
    if (rn_param_query(query, query_len, "keep", RN_E_INVALID_OFFSET, val, sizeof val, &n, &f)) {
        rn_reply_param_fault(req, &f);
        return;
    }
    if (n >= 0 && (rn_offset_parse(val, (size_t)n, &kind, &keep) || kind != RN_OFFSET_POSITION)) {
        rn_reply_error(req, RN_E_INVALID_OFFSET, NULL);
        return;
    }
    rewrite_ctx *c = rn_xcalloc(1, sizeof *c);
    c->req = req;
    rn_request_hold(req);
    c->key = rn_xstrndup(key, key_len);
    rn_stream *s = rn_engine_find(rn_surface_engine(sf), c->key, key_len);
    c->op.in.kind = RN_OP_REWRITE;
    c->op.in.path = c->key;
    c->op.in.path_len = key_len;
    c->op.in.ttl_s = c->op.in.expires_at_ms = -1;
    c->op.in.target_offset = keep != UINT64_MAX ? keep : s ? s->tail : 0;
    c->op.arg = c;
    c->op.done = rewrite_done;
    rn_engine_submit(rn_surface_engine(sf), &c->op);
}

/* POST test/fail-syncs?n=N: the next N log batches fail as if fdatasync
 * had returned EIO (their writes are answered 503 and never apply). */
static void fail_syncs(rn_surface *sf, rn_request *req, const char *query, size_t query_len) {
    char val[16];
    long len;
    uint64_t n;
    rn_param_fault f;
    if (rn_param_query(query, query_len, "n", RN_E_INVALID_REQUEST, val, sizeof val, &len, &f) ||
        len < 0 || rn_parse_strict_u64(val, (size_t)len, 1000000, &n)) {
        rn_reply_error(req, RN_E_INVALID_REQUEST, NULL); /* a test hook: no detail */
        return;
    }
    rn_engine_inject_sync_failures(rn_surface_engine(sf), (int)n);
    rn_buf h = {0}, body = {0};
    rn_reply_common(&h);
    rn_http_respond(req, 204, &h, &body);
}

/* The value of query parameter `name` (the first one), or NULL. */
static const char *query_param(const char *query, size_t query_len, const char *name, size_t *len) {
    size_t n = strlen(name);
    for (const char *p = query, *end = query + query_len; p < end;) {
        const char *amp = memchr(p, '&', (size_t)(end - p));
        const char *stop = amp ? amp : end;
        if ((size_t)(stop - p) > n && memcmp(p, name, n) == 0 && p[n] == '=') {
            *len = (size_t)(stop - p) - n - 1;
            return p + n + 1;
        }
        p = stop + 1;
    }
    return NULL;
}

/* POST test/fail?point=NAME&n=N[&errno=EIO|ENOSPC]: the next N passes of a
 * failure point (util/fault.h) fail with that errno (default EIO). */
static void fail_point(rn_request *req, const char *query, size_t query_len) {
    size_t point_len = 0, n_len = 0, err_len = 0;
    const char *point = query_param(query, query_len, "point", &point_len);
    const char *count = query_param(query, query_len, "n", &n_len);
    const char *err_name = query_param(query, query_len, "errno", &err_len);
    uint64_t n;
    int err = !err_name                             ? EIO
              : rn_ieq(err_name, err_len, "EIO")    ? EIO
              : rn_ieq(err_name, err_len, "ENOSPC") ? ENOSPC
                                                    : 0;
    char name[32];
    if (!point || point_len >= sizeof name || !count ||
        rn_parse_strict_u64(count, n_len, 1000000, &n) || !err) {
        rn_reply_error(req, RN_E_INVALID_REQUEST, NULL);
        return;
    }
    memcpy(name, point, point_len);
    name[point_len] = 0;
    if (rn_fault_arm(name, (int)n, err)) {
        rn_reply_error(req, RN_E_INVALID_REQUEST, NULL);
        return;
    }
    rn_buf h = {0}, body = {0};
    rn_reply_common(&h);
    rn_http_respond(req, 204, &h, &body);
}

void rn_admin_handle(rn_surface *sf, rn_request *req, int test_hooks, const char *path,
                     size_t path_len, const char *query, size_t query_len) {
    if (test_hooks && req->method == RN_HTTP_POST && path_len == 15 &&
        memcmp(path, "test/fail-syncs", 15) == 0) {
        fail_syncs(sf, req, query, query_len);
        return;
    }
    if (test_hooks && req->method == RN_HTTP_POST && path_len == 9 &&
        memcmp(path, "test/fail", 9) == 0) {
        fail_point(req, query, query_len);
        return;
    }
    size_t n = sizeof REWRITE_PREFIX - 1;
    if (test_hooks && req->method == RN_HTTP_POST && path_len > n &&
        memcmp(path, REWRITE_PREFIX, n) == 0) {
        char key[1024];
        long klen = path_len - n < sizeof key ? rn_percent_decode(path + n, path_len - n, key) : -1;
        if (klen > 0) {
            rewrite(sf, req, key, (size_t)klen, query, query_len);
            return;
        }
    }
    rn_reply_error(req, RN_E_NOT_FOUND, NULL);
}
