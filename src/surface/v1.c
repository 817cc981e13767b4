/*
 * v1.c — routes /v1/stream/{path}. See v1.h.
 */
#include "surface/v1.h"
#include "surface/reply.h"
#include "util/text.h"

#include <string.h>

#define MAX_V1_PATH 1024

void rn_v1_route(rn_surface *sf, rn_request *req, const char *path, size_t path_len,
                 const char *query, size_t query_len) {
    char key[MAX_V1_PATH];
    long n = path_len < sizeof key ? rn_percent_decode(path, path_len, key) : -1;
    if (n < 0) {
        rn_reply_error(req, RN_E_INVALID_REQUEST, NULL);
        return;
    }
    if (n == 0 || memchr(key, 0, (size_t)n)) {
        rn_reply_error(req, RN_E_NOT_FOUND, NULL);
        return;
    }
    rn_streams_handle(sf, req, &RN_PROFILE_V1, key, (size_t)n, query, query_len);
}
