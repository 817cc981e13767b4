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
 *
 * Both read stream bytes that may be in the cold store (history tiering):
 * a read that misses the read cache fetches the chunk and starts over.
 */
#include "surface/bootstrap.h"
#include "surface/missing.h"
#include "protocol/offset.h"
#include "protocol/reply.h"
#include "protocol/routing.h"
#include "surface/snapshots.h"
#include "tiers/tiers.h"
#include "util/blake3.h"
#include "util/text.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#define RN_BOOTSTRAP_CAP (8u << 20)
#define RN_COLD_WAITS 32 /* fetches of cold bytes one read may wait for */

/* A bootstrap or chunk read, kept while it waits for history bytes in the
 * cold store that the read cache lacks: copies of what it names, and a
 * hold on its request. */
typedef struct cold_read {
    rn_surface *sf;
    rn_request *req;
    char *key, *token, *offset;
    size_t key_len, token_len, offset_len;
    int has_query;
    int waits;
    int (*answer)(struct cold_read *r); /* 0: answered; 1: waits for cold bytes */
} cold_read;

static cold_read *cold_read_new(rn_surface *sf, rn_request *req, const char *key, size_t key_len,
                                int (*answer)(cold_read *r)) {
    cold_read *r = rn_xcalloc(1, sizeof *r);
    r->sf = sf;
    r->req = req;
    rn_request_hold(req);
    r->key = rn_xstrndup(key, key_len);
    r->key_len = key_len;
    r->answer = answer;
    return r;
}

static void cold_read_free(cold_read *r) {
    rn_request_release(r->req);
    free(r->key);
    free(r->token);
    free(r->offset);
    free(r);
}

static void run(cold_read *r) {
    if (!r->answer(r))
        cold_read_free(r);
}

static void cold_fetched(void *arg, int status) {
    cold_read *r = arg;
    if (status < 0) {
        rn_reply_cold_failure(r->req, status, NULL);
        cold_read_free(r);
        return;
    }
    run(r); /* from the start: the stream may have changed meanwhile */
}

/* Fetches the cold bytes the read missed, then answers it again; a read
 * that waited RN_COLD_WAITS times (a read cache too small for its
 * readers) answers 503 COLD_BACKPRESSURE. Returns what r->answer does. */
static int wait_cold(cold_read *r) {
    if (r->waits++ >= RN_COLD_WAITS) {
        rn_reply_cold_failure(r->req, -EAGAIN, NULL);
        return 0;
    }
    rn_engine_cold_fetch(rn_surface_engine(r->sf), cold_fetched, r);
    return 1;
}

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

static int bootstrap_answer(cold_read *r) {
    rn_surface *sf = r->sf;
    rn_request *req = r->req;
    const char *key = r->key;
    size_t key_len = r->key_len;
    int has_token;
    uint64_t token;
    if (r->has_query) {
        rn_reply_error(req, RN_E_QUERY_NOT_ACCEPTED, NULL);
        return 0;
    }
    if (rn_request_incarnation(req, &has_token, &token)) {
        rn_reply_error(req, RN_E_INVALID_INCARNATION, NULL);
        return 0;
    }
    rn_stream *s = find_or_answer(sf, req, key, key_len);
    if (!s)
        return 0;
    rn_engine *e = rn_surface_engine(sf);
    if (has_token && token != s->incarnation) {
        rn_buf extra = {0};
        rn_reply_incarnation(&extra, s);
        rn_reply_error(req, RN_E_INCARNATION_MISMATCH, &extra);
        return 0;
    }
    rn_engine_touch(e, s);
    uint64_t start = s->snapshot.present ? s->snapshot.offset : s->retained;
    rn_buf updates = {0};
    long got = rn_engine_read(e, s, start, RN_BOOTSTRAP_CAP, 1, &updates);
    if (got < 0)
        rn_buf_free(&updates);
    if (got == -ENODATA)
        return wait_cold(r);
    if ((got == -ENOENT || got == -EAGAIN) && rn_routing_active()) {
        /* a replica that has not fetched these bytes yet (the body: see
         * rn_snapshot_respond_body) */
        rn_routing_read_elsewhere(req, key, key_len);
        return 0;
    }
    if (got == -EUCLEAN) {
        rn_reply_error(req, RN_E_STREAM_DATA_DAMAGED, NULL);
        return 0;
    }
    if (got < 0) {
        rn_reply_cold_failure(req, -EIO, NULL);
        return 0;
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
        return 0;
    }
    rn_snapshot_respond_body(sf, req, 200, &h, &prefix, s, 0, s->snapshot.size, &suffix, NULL);
    return 0;
}

void rn_bootstrap(rn_surface *sf, rn_request *req, const char *key, size_t key_len, int has_query) {
    cold_read *r = cold_read_new(sf, req, key, key_len, bootstrap_answer);
    r->has_query = has_query;
    run(r);
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

static int chunk_answer(cold_read *r) {
    rn_surface *sf = r->sf;
    rn_request *req = r->req;
    const char *key = r->key;
    size_t key_len = r->key_len;
    uint64_t want, off;
    if (rn_token_parse_segment(r->token, r->token_len, &want) ||
        rn_offset_parse_segment(r->offset, r->offset_len, &off)) {
        rn_reply_error(req, RN_E_INVALID_RESOURCE, NULL);
        return 0;
    }
    /* A replica serves only what it can mark; the leader answers the rest
     * once it confirmed it leads (extensions §4.3; routing.h). */
    rn_stream *s = rn_engine_find(rn_surface_engine(sf), key, key_len);
    if (!s || off < s->retained || off > s->tail || want != s->incarnation) {
        if (rn_routing_authoritative(req, key, key_len))
            return 0;
    }
    if (!s && !find_or_answer(sf, req, key, key_len))
        return 0;
    if (req->method == RN_HTTP_GET)
        rn_engine_touch(rn_surface_engine(sf), s); /* a read renews the TTL window, HEAD does not */
    rn_buf extra = {0};
    rn_reply_incarnation(&extra, s);
    if (off < s->retained) {
        rn_reply_error(req, RN_E_OFFSET_RETAINED_AWAY, &extra);
        return 0;
    }
    if (off > s->tail) {
        rn_reply_error(req, RN_E_OFFSET_OUT_OF_RANGE, &extra);
        return 0;
    }
    if (want != s->incarnation) {
        rn_reply_error(req, RN_E_INCARNATION_MISMATCH, &extra);
        return 0;
    }
    rn_buf_free(&extra);
    uint64_t chunk_end = (off / RN_CHUNK_BYTES + 1) * RN_CHUNK_BYTES;
    uint64_t end = chunk_end < s->tail ? chunk_end : s->tail;
    rn_buf body = {0};
    long got = rn_engine_read(rn_surface_engine(sf), s, off, (size_t)(end - off), 0, &body);
    if (got != (long)(end - off))
        rn_buf_free(&body);
    if (got == -ENODATA) /* one ranged GET of the chunk's object, then again */
        return wait_cold(r);
    if (got == -EAGAIN && rn_routing_active()) { /* damaged here, being repaired */
        rn_routing_read_repairing(req, key, key_len);
        return 0;
    }
    if (got != (long)(end - off)) {
        rn_reply_error(req, got == -EUCLEAN ? RN_E_STREAM_DATA_DAMAGED : RN_E_INTERNAL, NULL);
        return 0;
    }
    int end_kind = end < s->tail ? 0 : s->closed ? 2 : 1;
    int marked = (end == chunk_end && end < s->tail) || end_kind == 2;
    if (!marked && rn_routing_authoritative(req, key, key_len)) {
        rn_buf_free(&body);
        return 0;
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
        return 0;
    }
    rn_http_respond(req, 200, &h, &body);
    return 0;
}

void rn_chunk_read(rn_surface *sf, rn_request *req, const char *key, size_t key_len,
                   const char *token, size_t token_len, const char *offset, size_t offset_len) {
    cold_read *r = cold_read_new(sf, req, key, key_len, chunk_answer);
    r->token = rn_xstrndup(token, token_len);
    r->token_len = token_len;
    r->offset = rn_xstrndup(offset, offset_len);
    r->offset_len = offset_len;
    run(r);
}
