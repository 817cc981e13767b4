/*
 * v1.h — the base protocol's URL space, /v1/stream/{name}: the path (which
 * may contain /) is percent-decoded into the stream's name, its engine key,
 * and the request runs through the shared stream operations with the v1
 * profile. One rule decides which names exist (docs/HTTP.md "Stream names"):
 * 1 to 1024 bytes of UTF-8 without NUL, in segments separated by single
 * slashes, none of them empty, "." or "..". Any other path answers 400
 * INVALID_STREAM_ID, so no two spellings that clients normalize alike
 * (a/b/, a//b, a/./b) name different streams.
 */
#ifndef RN_V1_H
#define RN_V1_H

#include "surface/streams.h"

/* True when the decoded name follows the rule above. */
int rn_v1_name_valid(const char *name, size_t len);

/* Handles /v1/stream/{path}; `path` is what follows the prefix. */
void rn_v1_route(rn_surface *sf, rn_request *req, const char *path, size_t path_len,
                 const char *query, size_t query_len);
/* Offers a request for /v1/stream/{path} (its body not read yet) to
 * rn_streams_answer_early(). */
void rn_v1_answer_early(rn_surface *sf, rn_request *req, const char *path, size_t path_len);

#endif
