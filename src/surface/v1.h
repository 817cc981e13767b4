/*
 * v1.h — the base protocol's URL space, /v1/stream/{path}: the path (which
 * may contain /) is percent-decoded into the engine key and the request runs
 * through the shared stream operations with the v1 profile.
 */
#ifndef RN_V1_H
#define RN_V1_H

#include "surface/streams.h"

/* Handles /v1/stream/{path}; `path` is what follows the prefix. */
void rn_v1_route(rn_surface *sf, rn_request *req, const char *path, size_t path_len,
                 const char *query, size_t query_len);
/* Offers a request for /v1/stream/{path} (its body not read yet) to
 * rn_streams_answer_early(). */
void rn_v1_answer_early(rn_surface *sf, rn_request *req, const char *path, size_t path_len);

#endif
