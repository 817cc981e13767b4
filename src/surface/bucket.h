/*
 * bucket.h — the extension profile's URL space (extensions.txt §1, §8):
 * /{bucket_id} and /{bucket_id}/{stream_id}. Ids are percent-decoded and
 * checked against §1.1; a stream's engine key is "bucket_id/stream_id", the
 * same key /v1/stream/bucket_id/stream_id names, so both surfaces reach the
 * same streams. Paths of three or more segments are stream subresources
 * (snapshot, retention, bootstrap, incarnation/{token}/chunk|snapshot);
 * any other answers 404 (§1.6).
 */
#ifndef RN_BUCKET_H
#define RN_BUCKET_H

#include "surface/streams.h"

/* Handles a path that starts with "/" and is not another route's. */
void rn_bucket_route(rn_surface *sf, rn_request *req, const char *path, size_t path_len,
                     const char *query, size_t query_len);

/* Offers a request for a path that starts with "/" (its body not read
 * yet) to rn_streams_answer_early() when the path names a stream, and to
 * rn_parts_answer_early() when it stages a snapshot part. */
void rn_bucket_answer_early(rn_surface *sf, rn_request *req, const char *path, size_t path_len);

#endif
