/*
 * v1.c — routes /v1/stream/{path}. See v1.h.
 */
#include "surface/v1.h"
#include "surface/reply.h"
#include "util/text.h"

#include <string.h>

#define MAX_V1_PATH 1024

/* Decodes the stream path into key. Returns its length, -1 for a path that
 * does not decode (400), or 0 for one that names no stream (404). */
static long decode_key(const char *path, size_t path_len, char key[MAX_V1_PATH]) {
    long n = path_len < MAX_V1_PATH ? rn_percent_decode(path, path_len, key) : -1;
    return n > 0 && memchr(key, 0, (size_t)n) ? 0 : n;
}

void rn_v1_route(rn_surface *sf, rn_request *req, const char *path, size_t path_len,
                 const char *query, size_t query_len) {
    char key[MAX_V1_PATH];
    long n = decode_key(path, path_len, key);
    if (n <= 0)
        rn_reply_error(req, n < 0 ? RN_E_INVALID_REQUEST : RN_E_NOT_FOUND, NULL);
    else
        rn_streams_handle(sf, req, &RN_PROFILE_V1, key, (size_t)n, query, query_len);
}

void rn_v1_answer_early(rn_surface *sf, rn_request *req, const char *path, size_t path_len) {
    char key[MAX_V1_PATH];
    long n = decode_key(path, path_len, key);
    if (n > 0)
        rn_streams_answer_early(sf, req, key, (size_t)n);
}
