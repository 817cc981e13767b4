/*
 * bucket.c — routing and id rules of the bucket surface. See bucket.h.
 */
#include "surface/bucket.h"
#include "surface/reply.h"
#include "util/text.h"

#include <string.h>

#define MAX_KEY_BYTES 122 /* §1.1: bucket_id "/" stream_id */

int rn_bucket_id_valid(const char *id, size_t len) {
    if (len < 4 || len > 64 || (id[0] == '_' && id[1] == '_'))
        return 0; /* ids starting with __ are reserved for operational routes */
    for (size_t i = 0; i < len; i++) {
        char c = id[i];
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-'))
            return 0;
    }
    return 1;
}

int rn_stream_id_valid(const char *id, size_t len, size_t bucket_len) {
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

/* Answers PUT /{bucket_id}: 201 for a valid id, 400 otherwise; buckets are
 * implicit, so nothing changes (§1.2). Other methods have nothing here. */
static void bucket_only(rn_request *req, const char *id, size_t len) {
    if (req->method != RN_HTTP_PUT) {
        rn_buf extra = {0};
        rn_buf_append_str(&extra, "Allow: PUT, OPTIONS\r\n");
        rn_reply_error(req, RN_E_METHOD_NOT_ALLOWED, &extra);
        return;
    }
    if (!rn_bucket_id_valid(id, len)) {
        rn_reply_error(req, RN_E_INVALID_BUCKET_ID, NULL);
        return;
    }
    rn_buf h = {0}, body = {0};
    rn_reply_common(&h);
    rn_http_respond(req, 201, &h, &body);
}

void rn_bucket_route(rn_surface *sf, rn_request *req, const char *path, size_t path_len,
                     const char *query, size_t query_len) {
    const char *p = path + 1, *end = path + path_len;
    const char *slash1 = memchr(p, '/', (size_t)(end - p));
    char bucket[MAX_KEY_BYTES * 3 + 1], stream[MAX_KEY_BYTES * 3 + 1];
    size_t braw = (size_t)((slash1 ? slash1 : end) - p);
    long blen = braw < sizeof bucket ? rn_percent_decode(p, braw, bucket) : -1;
    if (blen <= 0) {
        rn_reply_error(req, blen == 0 ? RN_E_NOT_FOUND : RN_E_INVALID_BUCKET_ID, NULL);
        return;
    }
    if (!slash1 || slash1 + 1 == end) {
        bucket_only(req, bucket, (size_t)blen);
        return;
    }
    const char *s = slash1 + 1;
    const char *slash2 = memchr(s, '/', (size_t)(end - s));
    if (slash2) {
        rn_reply_error(req, RN_E_NOT_FOUND, NULL); /* no subresources yet */
        return;
    }
    if (!rn_bucket_id_valid(bucket, (size_t)blen)) {
        rn_reply_error(req, RN_E_INVALID_BUCKET_ID, NULL);
        return;
    }
    size_t sraw = (size_t)(end - s);
    long slen = sraw < sizeof stream ? rn_percent_decode(s, sraw, stream) : -1;
    if (slen < 0 || !rn_stream_id_valid(stream, (size_t)slen, (size_t)blen)) {
        rn_reply_error(req, RN_E_INVALID_STREAM_ID, NULL);
        return;
    }
    char key[MAX_KEY_BYTES + 1];
    memcpy(key, bucket, (size_t)blen);
    key[blen] = '/';
    memcpy(key + blen + 1, stream, (size_t)slen);
    rn_streams_handle(sf, req, &RN_PROFILE_BUCKET, key, (size_t)blen + 1 + (size_t)slen, query,
                      query_len);
}
