/*
 * bucket.c — routing and id rules of the bucket surface. See bucket.h.
 */
#include "surface/bucket.h"
#include "surface/bootstrap.h"
#include "surface/parts.h"
#include "protocol/reply.h"
#include "protocol/routing.h"
#include "surface/snapshots.h"
#include "util/metrics.h"
#include "util/text.h"

#include <string.h>

#define MAX_KEY_BYTES 122 /* §1.1: bucket_id "/" stream_id */

/* §1.1: a bucket id. */
static int bucket_id_valid(const char *id, size_t len) {
    if (len < 4 || len > 64 || (id[0] == '_' && id[1] == '_'))
        return 0; /* ids starting with __ are reserved for operational routes */
    for (size_t i = 0; i < len; i++) {
        char c = id[i];
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-'))
            return 0;
    }
    return 1;
}

/* §1.1: a stream id in a bucket whose id is bucket_len bytes long. */
static int stream_id_valid(const char *id, size_t len, size_t bucket_len) {
    if (len == 0 || bucket_len + 1 + len > MAX_KEY_BYTES || id[0] == '$')
        return 0;
    if (len == 7 && memcmp(id, "streams", 7) == 0)
        return 0;
    for (size_t i = 0; i < len; i++) {
        if (id[i] == '/' || id[i] == 0 || (id[i] == '.' && i + 1 < len && id[i + 1] == '.'))
            return 0;
    }
    return rn_utf8_valid((const uint8_t *)id, len);
}

/* Answers PUT /{bucket_id}: 201 for a valid id, 400 otherwise, 404
 * BUCKET_ERASED for a purged one; buckets are implicit, so nothing changes
 * (§1.2). Other methods have nothing here. */
static void bucket_only(rn_surface *sf, rn_request *req, const char *id, size_t len) {
    if (req->method != RN_HTTP_PUT) {
        rn_buf extra = {0};
        rn_buf_append_str(&extra, "Allow: PUT, OPTIONS\r\n");
        rn_reply_error(req, RN_E_METHOD_NOT_ALLOWED, &extra);
        return;
    }
    if (!bucket_id_valid(id, len)) {
        rn_reply_error(req, RN_E_INVALID_BUCKET_ID, NULL);
        return;
    }
    if (rn_engine_path_erased(rn_surface_engine(sf), id, len, 1)) {
        rn_reply_error(req, RN_E_BUCKET_ERASED, NULL); /* creates in it answer 404 (§1.2) */
        return;
    }
    rn_buf h = {0}, body = {0};
    rn_reply_common(&h);
    rn_http_respond(req, 201, &h, &body);
}

/* A path segment: [p, p+len). */
typedef struct {
    const char *p;
    size_t len;
} segment;

static int seg_is(segment s, const char *lit) {
    return s.len == strlen(lit) && memcmp(s.p, lit, s.len) == 0;
}

static void method_not_allowed(rn_request *req, const char *allow) {
    rn_buf extra = {0};
    rn_buf_appendf(&extra, "Allow: %s\r\n", allow);
    rn_reply_error(req, RN_E_METHOD_NOT_ALLOWED, &extra);
}

/* Dispatches {stream}/<sub...> (ext §2–§4); 404 for anything else (§1.6). */
static void subresource(rn_surface *sf, rn_request *req, const char *key, size_t key_len,
                        const segment *seg, int n, int has_query) {
    int get = req->method == RN_HTTP_GET || req->method == RN_HTTP_HEAD;
    if (n == 1 && seg_is(seg[0], "snapshot")) {
        /* The removed latest-snapshot path (ext §11): HEAD the stream for
         * Stream-Snapshot-Offset, then read {stream}/snapshot/{offset}. */
        rn_buf extra = {0};
        rn_buf_append_str(&extra, "Allow: OPTIONS\r\n");
        rn_reply_error(req, RN_E_LATEST_SNAPSHOT_PATH, &extra);
    } else if (n == 1 && seg_is(seg[0], "bootstrap")) {
        if (req->method == RN_HTTP_GET)
            rn_bootstrap(sf, req, key, key_len, has_query);
        else
            method_not_allowed(req, "GET, OPTIONS");
    } else if (n == 2 && seg_is(seg[0], "snapshot") && seg_is(seg[1], "parts") &&
               req->method == RN_HTTP_DELETE) {
        rn_parts_discard(sf, req, key, key_len);
    } else if (n == 3 && seg_is(seg[0], "snapshot") && seg_is(seg[2], "parts")) {
        if (req->method == RN_HTTP_POST)
            rn_parts_stage(sf, req, key, key_len, seg[1].p, seg[1].len);
        else
            method_not_allowed(req, "POST, OPTIONS");
    } else if (n == 2 && seg_is(seg[0], "snapshot")) {
        if (req->method == RN_HTTP_PUT && rn_request_header(req, "stream-snapshot-parts", NULL))
            rn_parts_commit(sf, req, key, key_len, seg[1].p, seg[1].len);
        else if (req->method == RN_HTTP_PUT)
            rn_snapshot_publish(sf, req, key, key_len, seg[1].p, seg[1].len);
        else if (get)
            rn_snapshot_read(sf, req, key, key_len, seg[1].p, seg[1].len, NULL, 0);
        else
            method_not_allowed(req, "GET, HEAD, PUT, OPTIONS");
    } else if (n == 2 && seg_is(seg[0], "retention")) {
        if (req->method == RN_HTTP_PUT)
            rn_retention_set(sf, req, key, key_len, seg[1].p, seg[1].len);
        else
            method_not_allowed(req, "PUT, OPTIONS");
    } else if (n == 4 && seg_is(seg[0], "incarnation") &&
               (seg_is(seg[2], "chunk") || seg_is(seg[2], "snapshot"))) {
        if (!get)
            method_not_allowed(req, "GET, HEAD, OPTIONS");
        else if (has_query)
            rn_reply_error(req, RN_E_QUERY_NOT_ACCEPTED, NULL);
        else if (seg_is(seg[2], "chunk"))
            rn_chunk_read(sf, req, key, key_len, seg[1].p, seg[1].len, seg[3].p, seg[3].len);
        else
            rn_snapshot_read(sf, req, key, key_len, seg[3].p, seg[3].len, seg[1].p, seg[1].len);
    } else {
        rn_reply_error(req, RN_E_NOT_FOUND, NULL);
    }
}

/* A parsed /{bucket_id}[/{stream_id}[/sub...]] path. */
typedef struct {
    char bucket[MAX_KEY_BYTES * 3 + 1];
    size_t bucket_len;
    char key[MAX_KEY_BYTES + 1]; /* "bucket_id/stream_id" */
    size_t key_len;
    segment sub[5]; /* subresource segments (none for the stream itself) */
    int nsub;
} bucket_path;

#define BUCKET_ONLY (-2) /* parse_path(): /{bucket_id} alone */

/* Parses a path that starts with "/". Returns -1 for a stream path (key
 * and sub set), BUCKET_ONLY (bucket set, not yet validated), or the error
 * to answer. */
static int parse_path(const char *path, size_t path_len, bucket_path *bp) {
    const char *p = path + 1, *end = path + path_len;
    const char *slash1 = memchr(p, '/', (size_t)(end - p));
    char stream[MAX_KEY_BYTES * 3 + 1];
    size_t braw = (size_t)((slash1 ? slash1 : end) - p);
    long blen = braw < sizeof bp->bucket ? rn_percent_decode(p, braw, bp->bucket) : -1;
    if (blen <= 0)
        return blen == 0 ? RN_E_NOT_FOUND : RN_E_INVALID_BUCKET_ID;
    bp->bucket_len = (size_t)blen;
    if (!slash1 || slash1 + 1 == end)
        return BUCKET_ONLY;
    const char *s = slash1 + 1;
    const char *slash2 = memchr(s, '/', (size_t)(end - s));
    const char *stream_end = slash2 ? slash2 : end;
    bp->nsub = 0;
    for (const char *q = slash2; q && q < end && bp->nsub <= 4;) {
        const char *start = q + 1;
        const char *next = memchr(start, '/', (size_t)(end - start));
        bp->sub[bp->nsub++] = (segment){start, (size_t)((next ? next : end) - start)};
        q = next;
    }
    if (slash2 && (bp->nsub == 0 || bp->nsub > 4))
        return RN_E_NOT_FOUND;
    if (!bucket_id_valid(bp->bucket, (size_t)blen))
        return RN_E_INVALID_BUCKET_ID;
    size_t sraw = (size_t)(stream_end - s);
    long slen = sraw < sizeof stream ? rn_percent_decode(s, sraw, stream) : -1;
    if (slen < 0 || !stream_id_valid(stream, (size_t)slen, (size_t)blen))
        return RN_E_INVALID_STREAM_ID;
    memcpy(bp->key, bp->bucket, (size_t)blen);
    bp->key[blen] = '/';
    memcpy(bp->key + blen + 1, stream, (size_t)slen);
    bp->key_len = (size_t)blen + 1 + (size_t)slen;
    return -1;
}

/* Cluster mode (routing.h): writes go to the leader of the stream's
 * group; the stream, its bootstrap and its snapshots are read with
 * consistency=leader there; every other read (the immutable resources
 * too) is served by any replica caught up since its start. Returns 1 when
 * the request was answered (or waits). */
static int cluster_gate(rn_request *req, const bucket_path *bp, const char *query,
                        size_t query_len) {
    if (req->method == RN_HTTP_PUT || req->method == RN_HTTP_POST || req->method == RN_HTTP_DELETE)
        return rn_routing_write(req, bp->key, bp->key_len);
    int leader_readable = bp->nsub == 0 || (bp->nsub == 1 && seg_is(bp->sub[0], "bootstrap")) ||
                          (bp->nsub == 2 && seg_is(bp->sub[0], "snapshot"));
    int read = req->method == RN_HTTP_GET || req->method == RN_HTTP_HEAD;
    return read && rn_routing_read(req, bp->key, bp->key_len, query, query_len, leader_readable);
}

void rn_bucket_route(rn_surface *sf, rn_request *req, const char *path, size_t path_len,
                     const char *query, size_t query_len) {
    bucket_path bp;
    int r = parse_path(path, path_len, &bp);
    if (r == BUCKET_ONLY) {
        bucket_only(sf, req, bp.bucket, bp.bucket_len);
        return;
    }
    if (r >= 0) {
        rn_reply_error(req, (rn_error)r, NULL);
        return;
    }
    if (bp.nsub)
        req->route = RN_ROUTE_SUBRESOURCE;
    if (cluster_gate(req, &bp, query, query_len))
        return; /* answered (req may be gone), or waiting for a confirmation */
    if (bp.nsub) {
        /* These resources refuse any query component, even an empty one. */
        int has_query = memchr(req->target, '?', req->target_len) != NULL;
        subresource(sf, req, bp.key, bp.key_len, bp.sub, bp.nsub, has_query);
    } else {
        rn_streams_handle(sf, req, &RN_PROFILE_BUCKET, bp.key, bp.key_len, query, query_len);
    }
}

void rn_bucket_answer_early(rn_surface *sf, rn_request *req, const char *path, size_t path_len) {
    bucket_path bp;
    if (parse_path(path, path_len, &bp) != -1 || rn_routing_write(req, bp.key, bp.key_len) ||
        req->method != RN_HTTP_POST)
        return;
    if (bp.nsub == 0)
        rn_streams_answer_early(sf, req, &RN_PROFILE_BUCKET, bp.key, bp.key_len);
    else if (bp.nsub == 3 && seg_is(bp.sub[0], "snapshot") && seg_is(bp.sub[2], "parts")) {
        req->route = RN_ROUTE_SUBRESOURCE;
        rn_parts_answer_early(sf, req, bp.key, bp.key_len, bp.sub[1].p, bp.sub[1].len);
    }
}
