/*
 * reply.c — common response headers and error answers. See reply.h.
 */
#include "protocol/reply.h"
#include "protocol/offset.h"
#include "util/metrics.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

static const char COMMON[] =
    "X-Content-Type-Options: nosniff\r\n"
    "Cross-Origin-Resource-Policy: cross-origin\r\n"
    "Access-Control-Allow-Origin: *\r\n"
    "Access-Control-Expose-Headers: Stream-Next-Offset, Stream-Cursor, Stream-Up-To-Date, "
    "Stream-Closed, Stream-TTL, Stream-Expires-At, Stream-SSE-Data-Encoding, Producer-Epoch, "
    "Producer-Seq, Producer-Expected-Seq, Producer-Received-Seq, Producer-Outcome, "
    "Producer-Closed-Epoch, Producer-Closed-Seq, Stream-Offset, ETag, Content-Type, Location, "
    "Stream-Incarnation, Stream-Retained-Offset, Stream-Last-Seq, Stream-Data-Content-Type, "
    "Stream-Snapshot-Offset, Stream-Snapshot-Digest, Stream-Snapshot-Part, "
    "Stream-Previous-Incarnation, Stream-Inherited-Offset, Stream-Immutable, Ursula-Protocol, "
    "Ursula-Cluster-Id, Ursula-Max-Request-Bytes, Ursula-Max-Snapshot-Bytes, "
    "Ursula-Max-Staged-Parts, Ursula-Max-Staged-Bytes, Runnel-Max-Subscriptions, "
    "Runnel-Max-Subscription-Streams, x-ursula-raft-leader-id, "
    "x-ursula-raft-group, x-ursula-raft-term, Content-Range, Accept-Ranges, Retry-After\r\n";

static char server_metadata[128] = "Ursula-Protocol: 2\r\n";
static size_t server_metadata_len = 20;

void rn_reply_set_cluster_id(const char *id) {
    assert(strlen(id) >= 1 && strlen(id) <= 64 &&
           strspn(id, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") ==
               strlen(id));
    int n = snprintf(server_metadata, sizeof server_metadata,
                     "Ursula-Protocol: 2\r\nUrsula-Cluster-Id: %s\r\n", id);
    server_metadata_len = n > 0 && (size_t)n < sizeof server_metadata ? (size_t)n : 0;
}

void rn_reply_common(rn_buf *h) {
    rn_buf_append(h, server_metadata, server_metadata_len);
    rn_buf_append(h, COMMON, sizeof COMMON - 1);
}

void rn_reply_offset(rn_buf *h, const char *name, uint64_t position) {
    char tok[RN_OFFSET_LEN + 1];
    rn_offset_format(position, tok);
    rn_buf_appendf(h, "%s: %s\r\n", name, tok);
}

int rn_if_none_match(const rn_request *req, const char *etag) {
    const rn_header *h = rn_request_header(req, "if-none-match", NULL);
    if (!h)
        return 0;
    size_t n = strlen(etag);
    const char *p = h->value, *end = h->value + h->value_len;
    while (p < end) {
        while (p < end && (*p == ' ' || *p == ','))
            p++;
        const char *q = p;
        while (q < end && *q != ',')
            q++;
        const char *e = q;
        while (e > p && e[-1] == ' ')
            e--;
        if (e - p >= 2 && p[0] == 'W' && p[1] == '/')
            p += 2; /* weak comparison: W/"x" matches "x" */
        if (((size_t)(e - p) == n && memcmp(p, etag, n) == 0) || (e - p == 1 && *p == '*'))
            return 1;
        p = q;
    }
    return 0;
}

void rn_reply_incarnation(rn_buf *h, const rn_stream *s) {
    rn_buf_appendf(h, "Stream-Incarnation: %llu\r\n", (unsigned long long)s->incarnation);
}

void rn_reply_snapshot_id(rn_buf *h, const rn_stream *s) {
    if (!s->snapshot.present)
        return;
    rn_reply_offset(h, "Stream-Snapshot-Offset", s->snapshot.offset);
    rn_buf_append_str(h, "Stream-Snapshot-Digest: ");
    for (int i = 0; i < 32; i++)
        rn_buf_appendf(h, "%02x", s->snapshot.digest[i]);
    rn_buf_append_str(h, "\r\n");
}

void rn_reply_error(rn_request *req, rn_error e, rn_buf *extra) {
    rn_reply_error_detail(req, e, extra, NULL, 0);
}

void rn_reply_cold_failure(rn_request *req, int status, rn_buf *extra) {
    assert(status < 0);
    rn_buf h = {0};
    if (status != -EAGAIN && extra)
        rn_buf_append(&h, extra->data, extra->len);
    if (extra)
        rn_buf_free(extra);
    rn_buf_append_str(&h, "Retry-After: 1\r\n");
    rn_reply_error(req, status == -EAGAIN ? RN_E_COLD_BACKPRESSURE : RN_E_COLD_STORE_FAILED, &h);
}

void rn_reply_stream_path(rn_buf *out, const rn_request *req, const char *key, size_t key_len) {
    rn_buf_append_str(out, req->route == RN_ROUTE_V1 ? "/v1/stream/" : "/");
    rn_buf_append(out, key, key_len);
}

void rn_reply_missing(rn_request *req, rn_error e, const char *key, size_t key_len, rn_buf *extra) {
    if (e != RN_E_STREAM_NOT_FOUND) {
        rn_reply_error(req, e, extra);
        return;
    }
    rn_buf path = {0};
    rn_reply_stream_path(&path, req, key, key_len);
    rn_reply_error_detail(req, e, extra, (const char *)path.data, path.len);
    rn_buf_free(&path);
}

/* An error answer, with the server's metadata or without it (an
 * intermediary's own answer, ext §10). */
static void error_answer(rn_request *req, rn_error e, rn_buf *extra, const char *detail,
                         size_t detail_len, int server_metadata_too) {
    rn_buf h = {0}, body = {0};
    if (server_metadata_too)
        rn_reply_common(&h);
    else
        rn_buf_append(&h, COMMON, sizeof COMMON - 1);
    rn_buf_append_str(&h, "Content-Type: application/json\r\nCache-Control: no-store\r\n");
    if (extra) {
        rn_buf_append(&h, extra->data, extra->len);
        rn_buf_free(extra);
    }
    rn_error_body(e, detail, detail_len, &body);
    rn_http_respond(req, rn_error_status(e), &h, &body);
}

void rn_reply_error_detail(rn_request *req, rn_error e, rn_buf *extra, const char *detail,
                           size_t detail_len) {
    error_answer(req, e, extra, detail, detail_len, 1);
}

void rn_reply_intermediary_error(rn_request *req, rn_error e, rn_buf *extra, const char *detail,
                                 size_t detail_len) {
    error_answer(req, e, extra, detail, detail_len, 0);
}

void rn_reply_preflight(rn_request *req, int server_metadata_too) {
    rn_buf h = {0}, body = {0};
    if (server_metadata_too)
        rn_reply_common(&h);
    else
        rn_buf_append(&h, COMMON, sizeof COMMON - 1);
    rn_buf_append_str(&h,
                      "Access-Control-Allow-Methods: GET, POST, PUT, DELETE, HEAD, OPTIONS\r\n"
                      "Access-Control-Allow-Headers: content-type, authorization, if-none-match, "
                      "stream-seq, stream-ttl, stream-expires-at, stream-closed, producer-id, "
                      "producer-epoch, producer-seq, producer-digest, stream-forked-from, "
                      "stream-fork-offset, "
                      "stream-fork-sub-offset, stream-incarnation, stream-snapshot-parts, "
                      "stream-snapshot-digest\r\n"
                      "Access-Control-Max-Age: 86400\r\n");
    rn_http_respond(req, 204, &h, &body);
}
