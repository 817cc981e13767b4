/*
 * v1.c — routes /v1/stream/{name}. See v1.h.
 */
#include "surface/v1.h"
#include "protocol/reply.h"
#include "protocol/routing.h"
#include "util/text.h"

#include <string.h>

#define MAX_V1_NAME 1024

int rn_v1_name_valid(const char *name, size_t len) {
    if (len == 0 || len > MAX_V1_NAME || memchr(name, 0, len) ||
        !rn_utf8_valid((const uint8_t *)name, len))
        return 0;
    for (size_t i = 0;;) {
        const char *slash = memchr(name + i, '/', len - i);
        size_t end = slash ? (size_t)(slash - name) : len, seg = end - i;
        if (seg == 0 || (seg <= 2 && memcmp(name + i, "..", seg) == 0))
            return 0; /* empty, "." or ".." */
        if (!slash)
            return 1;
        i = end + 1;
    }
}

/* Decodes the path after /v1/stream/ into name. Returns its length, or -1
 * with *e set: a path that does not percent-decode (400 INVALID_REQUEST)
 * or a name the rule refuses (400 INVALID_STREAM_ID). A raw path longer
 * than three times the limit decodes to more than the limit. */
static long decode_name(const char *path, size_t path_len, char name[3 * MAX_V1_NAME],
                        rn_error *e) {
    if (path_len > 3 * MAX_V1_NAME) {
        *e = RN_E_INVALID_V1_NAME;
        return -1;
    }
    long n = rn_percent_decode(path, path_len, name);
    if (n < 0) {
        *e = RN_E_INVALID_REQUEST;
        return -1;
    }
    if (!rn_v1_name_valid(name, (size_t)n)) {
        *e = RN_E_INVALID_V1_NAME;
        return -1;
    }
    return n;
}

void rn_v1_route(rn_surface *sf, rn_request *req, const char *path, size_t path_len,
                 const char *query, size_t query_len) {
    char name[3 * MAX_V1_NAME];
    rn_error e;
    long n = decode_name(path, path_len, name, &e);
    int write =
        req->method == RN_HTTP_PUT || req->method == RN_HTTP_POST || req->method == RN_HTTP_DELETE;
    int read = req->method == RN_HTTP_GET || req->method == RN_HTTP_HEAD;
    if (n < 0)
        rn_reply_error(req, e, NULL);
    else if (!(write && rn_routing_write(req, name, (size_t)n)) &&
             !(read && rn_routing_read(req, name, (size_t)n, query, query_len, 1)))
        rn_streams_handle(sf, req, &RN_PROFILE_V1, name, (size_t)n, query, query_len);
}

void rn_v1_answer_early(rn_surface *sf, rn_request *req, const char *path, size_t path_len) {
    char name[3 * MAX_V1_NAME];
    rn_error e;
    long n = decode_name(path, path_len, name, &e);
    if (n > 0 && !rn_routing_write(req, name, (size_t)n) && req->method == RN_HTTP_POST)
        rn_streams_answer_early(sf, req, &RN_PROFILE_V1, name, (size_t)n);
}
