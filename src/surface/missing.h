/*
 * missing.h — the answer for a stream the engine does not hold: which 404
 * (or 410) a request naming it gets. Its own file so that the bucket
 * surface's routing (bucket.c), which calls the stream, parts, snapshot
 * and bootstrap handlers, is not called back by them.
 */
#ifndef RN_SURFACE_MISSING_H
#define RN_SURFACE_MISSING_H

#include "engine/engine.h"
#include "protocol/errors.h"

#include <stddef.h>

/* The answer for a stream at key (bucket_id "/" stream_id, len bytes)
 * that rn_engine_find did not find: 404 BUCKET_ERASED in a purged
 * bucket, 410 STREAM_GONE for a soft-deleted one, else 404
 * BUCKET_NOT_FOUND when no stream exists in its bucket, else 404
 * STREAM_NOT_FOUND. */
rn_error rn_bucket_missing_error(rn_engine *e, const char *key, size_t len);

#endif
