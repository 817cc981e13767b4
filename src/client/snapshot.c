/*
 * snapshot.c — snapshots and immutable resources (extensions §2, §4): the
 * snapshot digest, a whole publish, parts (stage, commit by digest,
 * discard), a publish in parts from a source (bounded by one part in
 * memory), snapshot reads and immutable chunk reads.
 */
#include "client/internal.h"
#include "util/blake3.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

_Static_assert(sizeof(runnel_snapshot_hasher) >= sizeof(rn_blake3),
               "the hasher holds a BLAKE3 state");

void runnel_snapshot_digest_init(runnel_snapshot_hasher *h, const char *content_type) {
    rn_blake3 *b = (rn_blake3 *)h->state;
    uint64_t n = strlen(content_type);
    uint8_t le[8];
    for (int i = 0; i < 8; i++)
        le[i] = (uint8_t)(n >> (8 * i));
    rn_blake3_init(b);
    rn_blake3_update(b, le, sizeof le);
    rn_blake3_update(b, content_type, n);
}

void runnel_snapshot_digest_update(runnel_snapshot_hasher *h, const void *data, size_t len) {
    rn_blake3_update((rn_blake3 *)h->state, data, len);
}

void runnel_snapshot_digest_final(const runnel_snapshot_hasher *h, char out[65]) {
    uint8_t d[32];
    rn_blake3_final((const rn_blake3 *)h->state, d);
    rn_blake3_hex(d, out);
}

/* {stream}/snapshot/{offset}[suffix] */
static int snapshot_url(rnc_request *req, const runnel_client *c, const char *method,
                        const char *stream, const char *offset, const char *suffix) {
    if (rnc_request_init(req, c, method, stream, "/snapshot") ||
        (offset && rnc_url_append_segment(req->url, offset)))
        return -1;
    size_t n = strlen(req->url), s = suffix ? strlen(suffix) : 0;
    if (n + s >= sizeof req->url)
        return -1;
    memcpy(req->url + n, suffix ? suffix : "", s + 1);
    return 0;
}

/* A publish (PUT {stream}/snapshot/{offset}) or a part (POST
 * .../{offset}/parts): the snapshot's or part's bytes with its type. */
static runnel_result upload(runnel_client *c, const char *method, const char *stream,
                            const char *offset, const char *suffix, runnel_write_kind kind,
                            const char *content_type, const runnel_body *body,
                            const char *incarnation, runnel_answer *ans) {
    rnc_request req = {0};
    if (!offset || snapshot_url(&req, c, method, stream, offset, suffix)) {
        rnc_request_free(&req);
        return rnc_usage(ans, "the URL is too long");
    }
    rnc_header(&req.headers, "Content-Type",
               content_type ? content_type : "application/octet-stream");
    rnc_header(&req.headers, "Stream-Incarnation", incarnation);
    req.body = body;
    return rnc_run_write(c, &req, kind, ans);
}

runnel_result runnel_snapshot_publish(runnel_client *c, const char *stream, const char *offset,
                                      const char *content_type, const runnel_body *body,
                                      const char *incarnation, runnel_answer *ans) {
    return upload(c, "PUT", stream, offset, NULL, RUNNEL_WRITE_PUBLISH, content_type, body,
                  incarnation, ans);
}

runnel_result runnel_snapshot_part(runnel_client *c, const char *stream, const char *offset,
                                   const char *content_type, const runnel_body *body,
                                   const char *incarnation, runnel_answer *ans) {
    return upload(c, "POST", stream, offset, "/parts", RUNNEL_WRITE_PART, content_type, body,
                  incarnation, ans);
}

runnel_result runnel_snapshot_commit(runnel_client *c, const char *stream, const char *offset,
                                     const char *content_type, const char *const *part_ids,
                                     size_t nparts, const char *digest, const char *incarnation,
                                     runnel_answer *ans) {
    rnc_request req = {0};
    if (!offset || snapshot_url(&req, c, "PUT", stream, offset, NULL)) {
        rnc_request_free(&req);
        return rnc_usage(ans, "the URL is too long");
    }
    size_t len = 0;
    for (size_t i = 0; i < nparts; i++)
        len += strlen(part_ids[i]) + 1;
    char *list = malloc(len + 1);
    if (!list)
        abort();
    size_t pos = 0;
    for (size_t i = 0; i < nparts; i++) {
        size_t n = strlen(part_ids[i]);
        memcpy(list + pos, part_ids[i], n);
        pos += n;
        list[pos++] = '\n';
    }
    rnc_header(&req.headers, "Content-Type",
               content_type ? content_type : "application/octet-stream");
    rnc_header_u64(&req.headers, "Stream-Snapshot-Parts", nparts);
    rnc_header(&req.headers, "Stream-Snapshot-Digest", digest);
    rnc_header(&req.headers, "Stream-Incarnation", incarnation);
    runnel_body body = {.data = list, .len = len};
    req.body = &body;
    runnel_result r = rnc_run_write(c, &req, RUNNEL_WRITE_PUBLISH, ans);
    free(list);
    return r;
}

runnel_result runnel_snapshot_discard(runnel_client *c, const char *stream, const char *incarnation,
                                      runnel_answer *ans) {
    rnc_request req = {0};
    if (snapshot_url(&req, c, "DELETE", stream, NULL, "/parts")) {
        rnc_request_free(&req);
        return rnc_usage(ans, "the URL is too long");
    }
    rnc_header(&req.headers, "Stream-Incarnation", incarnation);
    return rnc_run_write(c, &req, RUNNEL_WRITE_DISCARD, ans);
}

/* Reads up to cap bytes from the source (a full part unless it ends). */
static long fill(const runnel_body *b, char *buf, size_t cap) {
    size_t got = 0;
    while (got < cap) {
        long n = b->source(b->arg, buf + got, cap - got);
        if (n < 0)
            return -1;
        if (n == 0)
            break;
        got += (size_t)n;
    }
    return (long)got;
}

typedef struct {
    char **ids;
    size_t n, cap;
} part_list;

static void parts_free(part_list *p) {
    for (size_t i = 0; i < p->n; i++)
        free(p->ids[i]);
    free(p->ids);
}

/* Stages one part, repeating an unknown answer (a repeat stages another
 * part; the server sweeps the unused one). */
static runnel_result stage(runnel_client *c, const char *stream, const char *offset,
                           const char *buf, size_t len, int64_t deadline, const char *incarnation,
                           part_list *parts, runnel_answer *ans) {
    runnel_body body = {.data = buf, .len = len};
    for (int attempt = 0;; attempt++) {
        runnel_result r = runnel_snapshot_part(c, stream, offset, NULL, &body, incarnation, ans);
        if (r == RUNNEL_OK) {
            if (parts->n == parts->cap) {
                parts->cap = parts->cap ? parts->cap * 2 : 16;
                parts->ids = realloc(parts->ids, parts->cap * sizeof *parts->ids);
                if (!parts->ids)
                    abort();
            }
            parts->ids[parts->n] = strdup(ans->snapshot_part);
            if (!parts->ids[parts->n])
                abort();
            parts->n++;
            return RUNNEL_OK;
        }
        if (!rnc_repeatable(ans) || rnc_now_ms() >= deadline)
            return r;
        rnc_retry_pause(ans, attempt);
    }
}

runnel_result runnel_snapshot_publish_parts(runnel_client *c, const char *stream,
                                            const char *offset, const char *content_type,
                                            const runnel_body *body, size_t part_bytes,
                                            long retry_for_ms, const char *incarnation,
                                            runnel_answer *ans) {
    if (!content_type)
        content_type = "application/octet-stream";
    if (!part_bytes)
        part_bytes = 8u << 20;
    int64_t deadline = rnc_now_ms() + (retry_for_ms > 0 ? retry_for_ms : 60000);
    runnel_snapshot_hasher h;
    runnel_snapshot_digest_init(&h, content_type);
    part_list parts = {0};
    char *buf = malloc(part_bytes);
    if (!buf)
        abort();
    runnel_result r = RUNNEL_OK;
    uint64_t done = 0;
    for (;;) {
        long got;
        if (body->data) {
            size_t left = body->len - (size_t)done;
            got = (long)(left < part_bytes ? left : part_bytes);
            memcpy(buf, (const char *)body->data + done, (size_t)got);
        } else {
            got = fill(body, buf, part_bytes);
        }
        if (got < 0) {
            rnc_answer_reset(ans);
            rnc_fmt(ans->transport_message, sizeof ans->transport_message,
                    "reading the snapshot failed");
            r = RUNNEL_E_IO;
            break;
        }
        if (got == 0 && parts.n > 0)
            break;
        runnel_snapshot_digest_update(&h, buf, (size_t)got);
        r = stage(c, stream, offset, buf, (size_t)got, deadline, incarnation, &parts, ans);
        if (r != RUNNEL_OK)
            break;
        done += (uint64_t)got;
        if (body->progress)
            body->progress(body->arg, done, body->len);
        if ((size_t)got < part_bytes)
            break;
    }
    free(buf);
    if (r == RUNNEL_OK) {
        char digest[65];
        runnel_snapshot_digest_final(&h, digest);
        for (int attempt = 0;; attempt++) {
            r = runnel_snapshot_commit(c, stream, offset, content_type,
                                       (const char *const *)parts.ids, parts.n, digest, incarnation,
                                       ans);
            if (r == RUNNEL_OK || !rnc_repeatable(ans) || rnc_now_ms() >= deadline)
                break;
            rnc_retry_pause(ans, attempt);
        }
    }
    if (r != RUNNEL_OK && ans->outcome != RUNNEL_UNKNOWN && parts.n) {
        runnel_answer discard; /* the parts of a refused upload go; an unknown commit keeps them */
        runnel_snapshot_discard(c, stream, incarnation, &discard);
    }
    parts_free(&parts);
    return r;
}

runnel_result runnel_snapshot_read(runnel_client *c, const char *stream, const char *offset,
                                   const runnel_snapshot_read_options *o, runnel_answer *ans) {
    static const runnel_snapshot_read_options none = {0};
    if (!o)
        o = &none;
    rnc_request req = {0};
    int bad;
    if (o->immutable)
        bad = !o->incarnation || !offset ||
              rnc_request_init(&req, c, "GET", stream, "/incarnation") ||
              rnc_url_append_segment(req.url, o->incarnation) ||
              rnc_url_append_segment(req.url, "snapshot") ||
              rnc_url_append_segment(req.url, offset);
    else
        bad = !offset || snapshot_url(&req, c, "GET", stream, offset, NULL);
    if (bad) {
        rnc_request_free(&req);
        return rnc_usage(ans, "the URL is too long");
    }
    if (!o->immutable)
        rnc_header(&req.headers, "Stream-Incarnation", o->incarnation);
    rnc_header(&req.headers, "Range", o->range);
    req.sink = o->on_data;
    req.sink_arg = o->arg;
    return rnc_run_read(c, &req, ans);
}

runnel_result runnel_chunk_read(runnel_client *c, const char *stream, const char *token,
                                const char *offset, runnel_data_fn on_data, void *arg,
                                runnel_answer *ans) {
    rnc_request req = {0};
    if (!token || !offset || rnc_request_init(&req, c, "GET", stream, "/incarnation") ||
        rnc_url_append_segment(req.url, token) || rnc_url_append_segment(req.url, "chunk") ||
        rnc_url_append_segment(req.url, offset)) {
        rnc_request_free(&req);
        return rnc_usage(ans, "the URL is too long");
    }
    req.sink = on_data;
    req.sink_arg = arg;
    return rnc_run_read(c, &req, ans);
}
