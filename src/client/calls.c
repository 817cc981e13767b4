/*
 * calls.c — the stream calls of both surfaces: create, append (with or
 * without a producer key), close, delete, HEAD, bucket create, retention
 * advance, and catch-up reads; and one request of an operator route. Each is one rnc_perform;
 * writes classify their answer (runnel_classify), reads succeed on a 2xx.
 */
#include "client/internal.h"

#include <stdio.h>
#include <string.h>

runnel_result runnel_create(runnel_client *c, const char *stream, const runnel_create_options *o,
                            runnel_answer *ans) {
    static const runnel_create_options none = {0};
    if (!o)
        o = &none;
    rnc_request req = {0};
    if (rnc_request_init(&req, c, "PUT", stream, NULL))
        return rnc_usage(ans, "the URL is too long");
    /* a fork without a type inherits its source's (PROTOCOL §4.2) */
    rnc_header(&req.headers, "Content-Type",
               o->content_type  ? o->content_type
               : o->forked_from ? NULL
                                : "application/octet-stream");
    rnc_header(&req.headers, "Stream-TTL", o->ttl);
    rnc_header(&req.headers, "Stream-Expires-At", o->expires_at);
    rnc_header(&req.headers, "Stream-Closed", o->closed ? "true" : NULL);
    rnc_header(&req.headers, "Stream-Incarnation", o->incarnation);
    rnc_header(&req.headers, "Stream-Forked-From", o->forked_from);
    rnc_header(&req.headers, "Stream-Fork-Offset", o->fork_offset);
    rnc_header(&req.headers, "Stream-Fork-Sub-Offset", o->fork_sub_offset);
    req.body = &o->body;
    return rnc_run_write(c, &req, RUNNEL_WRITE_CREATE, ans);
}

runnel_result runnel_append(runnel_client *c, const char *stream, const runnel_body *body,
                            const runnel_append_options *o, runnel_answer *ans) {
    static const runnel_append_options none = {0};
    if (!o)
        o = &none;
    rnc_request req = {0};
    if (rnc_request_init(&req, c, "POST", stream, NULL))
        return rnc_usage(ans, "the URL is too long");
    int empty = !body || body->len == 0;
    if (!(empty && o->closed))
        rnc_header(&req.headers, "Content-Type",
                   o->content_type ? o->content_type : "application/octet-stream");
    rnc_header(&req.headers, "Stream-Closed", o->closed ? "true" : NULL);
    rnc_header(&req.headers, "Stream-Incarnation", o->incarnation);
    rnc_header(&req.headers, "Stream-Seq", o->stream_seq);
    if (o->producer_id) {
        char digest[65];
        if (rnc_body_digest(body, digest)) {
            rnc_request_free(&req);
            return rnc_usage(ans, "the body source cannot be read twice (for Producer-Digest)");
        }
        rnc_header(&req.headers, "Producer-Id", o->producer_id);
        rnc_header_u64(&req.headers, "Producer-Epoch", o->producer_epoch);
        rnc_header_u64(&req.headers, "Producer-Seq", o->producer_seq);
        rnc_header(&req.headers, "Producer-Digest", digest);
    }
    req.expect_continue = o->expect_continue;
    req.body = body;
    return rnc_run_write(c, &req, o->producer_id ? RUNNEL_WRITE_PRODUCER : RUNNEL_WRITE_APPEND,
                         ans);
}

runnel_result runnel_close(runnel_client *c, const char *stream, const char *incarnation,
                           runnel_answer *ans) {
    runnel_append_options o = {.closed = 1, .incarnation = incarnation};
    return runnel_append(c, stream, NULL, &o, ans);
}

runnel_result runnel_delete(runnel_client *c, const char *stream, const char *incarnation,
                            runnel_answer *ans) {
    rnc_request req = {0};
    if (rnc_request_init(&req, c, "DELETE", stream, NULL))
        return rnc_usage(ans, "the URL is too long");
    rnc_header(&req.headers, "Stream-Incarnation", incarnation);
    return rnc_run_write(c, &req, RUNNEL_WRITE_DELETE, ans);
}

runnel_result runnel_head(runnel_client *c, const char *stream, const char *incarnation,
                          runnel_answer *ans) {
    rnc_request req = {0};
    if (rnc_request_init(&req, c, "HEAD", stream, NULL))
        return rnc_usage(ans, "the URL is too long");
    rnc_header(&req.headers, "Stream-Incarnation", incarnation);
    return rnc_run_read(c, &req, ans);
}

runnel_result runnel_bucket_create(runnel_client *c, const char *bucket, runnel_answer *ans) {
    rnc_request req = {0};
    if (rnc_request_init(&req, c, "PUT", "", NULL) || rnc_url_append_segment(req.url, bucket)) {
        rnc_request_free(&req);
        return rnc_usage(ans, "the URL is too long");
    }
    return rnc_run_write(c, &req, RUNNEL_WRITE_BUCKET_CREATE, ans);
}

runnel_result runnel_retention(runnel_client *c, const char *stream, const char *offset,
                               const char *incarnation, runnel_answer *ans) {
    rnc_request req = {0};
    if (!offset || rnc_request_init(&req, c, "PUT", stream, "/retention") ||
        rnc_url_append_segment(req.url, offset)) {
        rnc_request_free(&req);
        return rnc_usage(ans, "the URL is too long");
    }
    rnc_header(&req.headers, "Stream-Incarnation", incarnation);
    return rnc_run_write(c, &req, RUNNEL_WRITE_RETENTION, ans);
}

/* Appends "?offset=..&..." for a read. Returns 0, or -1 when too long. */
int rnc_read_query(char *url, const char *offset, long max_bytes, const char *consistency,
                   const char *live, const char *cursor, long timeout_ms) {
    char enc[3 * RUNNEL_VALUE_MAX + 1];
    if (runnel_url_encode(offset ? offset : "-1", enc, sizeof enc))
        return -1;
    size_t pos = strlen(url);
    int n = snprintf(url + pos, RNC_URL_MAX - pos, "?offset=%s", enc);
    if (n < 0 || (size_t)n >= RNC_URL_MAX - pos)
        return -1;
    pos += (size_t)n;
    if (live) {
        n = snprintf(url + pos, RNC_URL_MAX - pos, "&live=%s", live);
        if (n < 0 || (size_t)(pos += (size_t)n) >= RNC_URL_MAX)
            return -1;
    }
    if (cursor && cursor[0]) {
        if (runnel_url_encode(cursor, enc, sizeof enc))
            return -1;
        n = snprintf(url + pos, RNC_URL_MAX - pos, "&cursor=%s", enc);
        if (n < 0 || (size_t)(pos += (size_t)n) >= RNC_URL_MAX)
            return -1;
    }
    if (max_bytes > 0) {
        n = snprintf(url + pos, RNC_URL_MAX - pos, "&max_bytes=%ld", max_bytes);
        if (n < 0 || (size_t)(pos += (size_t)n) >= RNC_URL_MAX)
            return -1;
    }
    if (timeout_ms > 0) {
        n = snprintf(url + pos, RNC_URL_MAX - pos, "&timeout_ms=%ld", timeout_ms);
        if (n < 0 || (size_t)(pos += (size_t)n) >= RNC_URL_MAX)
            return -1;
    }
    if (consistency) {
        if (runnel_url_encode(consistency, enc, sizeof enc))
            return -1;
        n = snprintf(url + pos, RNC_URL_MAX - pos, "&consistency=%s", enc);
        if (n < 0 || (size_t)(pos += (size_t)n) >= RNC_URL_MAX)
            return -1;
    }
    return 0;
}

runnel_result runnel_read(runnel_client *c, const char *stream, const runnel_read_options *o,
                          runnel_answer *ans) {
    static const runnel_read_options none = {0};
    if (!o)
        o = &none;
    rnc_request req = {0};
    if (rnc_request_init(&req, c, "GET", stream, NULL) ||
        rnc_read_query(req.url, o->offset, o->max_bytes, o->consistency, NULL, NULL, 0)) {
        rnc_request_free(&req);
        return rnc_usage(ans, "the URL is too long");
    }
    rnc_header(&req.headers, "Stream-Incarnation", o->incarnation);
    req.sink = o->on_data;
    req.sink_arg = o->arg;
    return rnc_run_read(c, &req, ans);
}

runnel_result runnel_admin_call(runnel_client *c, const char *method, const char *path,
                                runnel_data_fn on_data, void *arg, runnel_answer *ans) {
    rnc_request req = {0};
    if ((strcmp(method, "GET") != 0 && strcmp(method, "POST") != 0 &&
         strcmp(method, "DELETE") != 0) ||
        path[0] != '/')
        return rnc_usage(ans, "an operator route is a GET, a POST or a DELETE of a path");
    if (rnc_request_init(&req, c, method, path, NULL))
        return rnc_usage(ans, "the URL is too long");
    req.sink = on_data;
    req.sink_arg = arg;
    return rnc_run_read(c, &req, ans);
}

runnel_result runnel_read_all(runnel_client *c, const char *stream, const runnel_read_options *o,
                              uint64_t max_total, runnel_answer *ans) {
    runnel_read_options step = o ? *o : (runnel_read_options){0};
    char offset[RUNNEL_VALUE_MAX];
    rnc_fmt(offset, sizeof offset, "%s", step.offset ? step.offset : "-1");
    uint64_t total = 0;
    for (;;) {
        step.offset = offset;
        runnel_result r = runnel_read(c, stream, &step, ans);
        if (r != RUNNEL_OK)
            return r;
        total += ans->body_bytes;
        if (!ans->next_offset[0])
            return RUNNEL_E_PROTOCOL; /* a read answer always names the next offset */
        if (ans->up_to_date || ans->closed || (max_total && total >= max_total))
            return RUNNEL_OK;
        if (strcmp(ans->next_offset, offset) == 0)
            return RUNNEL_E_PROTOCOL; /* no progress and not up to date */
        rnc_fmt(offset, sizeof offset, "%s", ans->next_offset);
    }
}
