/*
 * bootstrap.c — GET {stream}/bootstrap (extensions.txt §3) and the immutable
 * chunk resource GET|HEAD {stream}/incarnation/{token}/chunk/{offset} (§4).
 * See bootstrap.h.
 *
 * Bootstrap answers multipart/mixed with a fresh random boundary: the latest
 * snapshot (streamed from its body, which the tiers open) or an empty application/octet-stream
 * part, then the updates from the snapshot point S: one part per message for
 * JSON streams, one part for others, at most RN_BOOTSTRAP_CAP bytes of them
 * (always at least one message), so the answer is complete (up to the tail,
 * Stream-Up-To-Date) or partial with an honest Stream-Next-Offset.
 */
#include "surface/bootstrap.h"
#include "surface/bucket.h"
#include "protocol/offset.h"
#include "protocol/reply.h"
#include "protocol/routing.h"
#include "surface/snapshots.h"
#include "util/blake3.h"
#include "util/text.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>

#define RN_BOOTSTRAP_CAP (8u << 20)
#define RN_CHUNK_BYTES (4u << 20) /* the chunk grid of §4.2 */

/* Finds the stream or answers 404/410; returns NULL when it answered. */
static rn_stream *find_or_answer(rn_surface *sf, rn_request *req, const char *key, size_t key_len) {
    rn_engine *e = rn_surface_engine(sf);
    rn_stream *s = rn_engine_find(e, key, key_len);
    if (!s)
        rn_reply_missing(req, rn_bucket_missing_error(e, key, key_len), key, key_len, NULL);
    return s;
}

static void content_type_line(rn_buf *b, const char *ct, size_t len) {
    rn_buf_append_str(b, "Content-Type: ");
    rn_buf_append(b, ct, len);
    rn_buf_append_str(b, "\r\n");
}

void rn_bootstrap(rn_surface *sf, rn_request *req, const char *key, size_t key_len, int has_query) {
    int has_token;
    uint64_t token;
    if (has_query) {
        rn_reply_error(req, RN_E_QUERY_NOT_ACCEPTED, NULL);
        return;
    }
    if (rn_request_incarnation(req, &has_token, &token)) {
        rn_reply_error(req, RN_E_INVALID_INCARNATION, NULL);
        return;
    }
    rn_stream *s = find_or_answer(sf, req, key, key_len);
    if (!s)
        return;
    rn_engine *e = rn_surface_engine(sf);
    if (has_token && token != s->incarnation) {
        rn_buf extra = {0};
        rn_reply_incarnation(&extra, s);
        rn_reply_error(req, RN_E_INCARNATION_MISMATCH, &extra);
        return;
    }
    rn_engine_touch(e, s);
    uint64_t start = s->snapshot.present ? s->snapshot.offset : s->retained;
    rn_buf updates = {0};
    long got = rn_engine_read(e, s, start, RN_BOOTSTRAP_CAP, 1, &updates);
    if ((got == -ENOENT || got == -EAGAIN) && rn_routing_active()) {
        /* a replica that has not fetched these bytes yet (the body: see
         * rn_snapshot_respond_body) */
        rn_buf_free(&updates);
        rn_routing_read_elsewhere(req, key, key_len);
        return;
    }
    if (got < 0) {
        rn_buf_free(&updates);
        rn_reply_error(req, RN_E_COLD_STORE_FAILED, NULL);
        return;
    }
    uint8_t rnd[16];
    if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd)
        memset(rnd, 0x5a, sizeof rnd); /* never happens once the pool is ready */
    char boundary[40] = "rn-";
    for (int i = 0; i < 16; i++)
        snprintf(boundary + 3 + 2 * i, 3, "%02x", rnd[i]);

    uint64_t next = start + (uint64_t)got;
    rn_buf h = {0}, prefix = {0}, suffix = {0};
    rn_reply_common(&h);
    rn_buf_appendf(&h, "Content-Type: multipart/mixed; boundary=%s\r\n", boundary);
    if (s->snapshot.present)
        rn_reply_offset(&h, "Stream-Snapshot-Offset", s->snapshot.offset);
    else
        rn_buf_append_str(&h, "Stream-Snapshot-Offset: -1\r\n");
    rn_reply_offset(&h, "Stream-Next-Offset", next);
    if (next == s->tail)
        rn_buf_append_str(&h, "Stream-Up-To-Date: true\r\n");
    rn_reply_incarnation(&h, s);
    rn_buf_append_str(&h, "Cache-Control: no-store\r\n");

    rn_buf_appendf(&prefix, "--%s\r\n", boundary);
    if (s->snapshot.present)
        content_type_line(&prefix, s->snapshot.content_type, s->snapshot.content_type_len);
    else
        rn_buf_append_str(&prefix, "Content-Type: application/octet-stream\r\n");
    rn_buf_append_str(&prefix, "\r\n");
    /* Update parts: one per message for JSON (each without its LF). */
    size_t i = 0;
    while (i < updates.len) {
        size_t j = updates.len;
        if (s->json) {
            const uint8_t *lf = memchr(updates.data + i, '\n', updates.len - i);
            j = lf ? (size_t)(lf - updates.data) : updates.len;
        }
        rn_buf_appendf(&suffix, "\r\n--%s\r\n", boundary);
        content_type_line(&suffix, s->content_type, s->content_type_len);
        rn_buf_append_str(&suffix, "\r\n");
        rn_buf_append(&suffix, updates.data + i, j - i);
        i = s->json ? j + 1 : j;
    }
    rn_buf_appendf(&suffix, "\r\n--%s--\r\n", boundary);
    rn_buf_free(&updates);
    if (!s->snapshot.present) {
        rn_buf_append(&prefix, suffix.data, suffix.len);
        rn_buf_free(&suffix);
        rn_http_respond(req, 200, &h, &prefix);
        return;
    }
    rn_snapshot_respond_body(sf, req, 200, &h, &prefix, s, 0, s->snapshot.size, &suffix, NULL);
}

/* Strong ETag of a chunk (§4.3): over the token, the range, where it ends,
 * the content type and the body. */
static void chunk_etag(const rn_stream *s, uint64_t off, uint64_t end, int end_kind, const char *ct,
                       const rn_buf *body, char out[40]) {
    rn_blake3 h;
    rn_blake3_init(&h);
    uint64_t fields[4] = {s->incarnation, off, end, (uint64_t)end_kind};
    rn_blake3_update(&h, fields, sizeof fields);
    rn_blake3_update(&h, ct, strlen(ct));
    rn_blake3_update(&h, body->data, body->len);
    uint8_t d[32];
    rn_blake3_final(&h, d);
    out[0] = '"';
    for (int i = 0; i < 16; i++)
        snprintf(out + 1 + 2 * i, 3, "%02x", d[i]);
    out[33] = '"';
    out[34] = 0;
}

void rn_chunk_read(rn_surface *sf, rn_request *req, const char *key, size_t key_len,
                   const char *token, size_t token_len, const char *offset, size_t offset_len) {
    uint64_t want, off;
    if (rn_token_parse_segment(token, token_len, &want) ||
        rn_offset_parse_segment(offset, offset_len, &off)) {
        rn_reply_error(req, RN_E_INVALID_RESOURCE, NULL);
        return;
    }
    /* A replica serves only what it can mark; the leader answers the rest
     * once it confirmed it leads (extensions §4.3; routing.h). */
    rn_stream *s = rn_engine_find(rn_surface_engine(sf), key, key_len);
    if (!s || off < s->retained || off > s->tail || want != s->incarnation) {
        if (rn_routing_authoritative(req, key, key_len))
            return;
    }
    if (!s && !find_or_answer(sf, req, key, key_len))
        return;
    if (req->method == RN_HTTP_GET)
        rn_engine_touch(rn_surface_engine(sf), s); /* a read renews the TTL window, HEAD does not */
    rn_buf extra = {0};
    rn_reply_incarnation(&extra, s);
    if (off < s->retained) {
        rn_reply_error(req, RN_E_OFFSET_RETAINED_AWAY, &extra);
        return;
    }
    if (off > s->tail) {
        rn_reply_error(req, RN_E_OFFSET_OUT_OF_RANGE, &extra);
        return;
    }
    if (want != s->incarnation) {
        rn_reply_error(req, RN_E_INCARNATION_MISMATCH, &extra);
        return;
    }
    rn_buf_free(&extra);
    uint64_t chunk_end = (off / RN_CHUNK_BYTES + 1) * RN_CHUNK_BYTES;
    uint64_t end = chunk_end < s->tail ? chunk_end : s->tail;
    rn_buf body = {0};
    if (rn_engine_read(rn_surface_engine(sf), s, off, (size_t)(end - off), 0, &body) !=
        (long)(end - off)) {
        rn_buf_free(&body);
        rn_reply_error(req, RN_E_INTERNAL, NULL);
        return;
    }
    int end_kind = end < s->tail ? 0 : s->closed ? 2 : 1;
    int marked = (end == chunk_end && end < s->tail) || end_kind == 2;
    if (!marked && rn_routing_authoritative(req, key, key_len)) {
        rn_buf_free(&body);
        return;
    }
    char ct_buf[256];
    const char *ct = "application/x-ndjson";
    if (!s->json) {
        size_t n =
            s->content_type_len < sizeof ct_buf - 1 ? s->content_type_len : sizeof ct_buf - 1;
        memcpy(ct_buf, s->content_type, n);
        ct_buf[n] = 0;
        ct = ct_buf;
    }
    char etag[40];
    chunk_etag(s, off, end, end_kind, ct, &body, etag);
    rn_buf h = {0};
    rn_reply_common(&h);
    rn_buf_appendf(&h, "Content-Type: %s\r\n", ct);
    rn_reply_incarnation(&h, s);
    rn_reply_offset(&h, "Stream-Offset", off);
    rn_reply_offset(&h, "Stream-Next-Offset", end);
    if (end_kind == 2)
        rn_buf_append_str(&h, "Stream-Closed: true\r\n");
    if (marked)
        rn_buf_append_str(&h, "Stream-Immutable: true\r\n");
    rn_buf_appendf(&h, "ETag: %s\r\nCache-Control: no-store\r\n", etag);
    if (rn_if_none_match(req, etag)) {
        rn_buf_free(&body);
        rn_http_respond(req, 304, &h, &body);
        return;
    }
    rn_http_respond(req, 200, &h, &body);
}
