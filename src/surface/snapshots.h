/*
 * snapshots.h — the snapshot and retention subresources of a stream
 * (extensions.txt §2.2, §2.5) and the immutable snapshot resource (§4.1).
 * `key` is the stream's engine key; offsets and tokens are the raw
 * (percent-encoded) path segments.
 */
#ifndef RN_SNAPSHOTS_H
#define RN_SNAPSHOTS_H

#include "surface/streams.h"

/* PUT {stream}/snapshot/{offset}: publishes the request body. */
void rn_snapshot_publish(rn_surface *sf, rn_request *req, const char *key, size_t key_len,
                         const char *offset, size_t offset_len);
/* GET|HEAD {stream}/snapshot/{offset}, or with token (not NULL) the
 * immutable resource {stream}/incarnation/{token}/snapshot/{offset}. */
void rn_snapshot_read(rn_surface *sf, rn_request *req, const char *key, size_t key_len,
                      const char *offset, size_t offset_len, const char *token, size_t token_len);
/* Answers a publish op (single request or parts commit): 204 with the
 * snapshot's id, or its refusal; deletes the body's blob unless the engine
 * adopted it. */
struct rn_blobs;
void rn_snapshot_answer_publish(rn_request *req, const rn_op *op, struct rn_blobs *blobs,
                                const char *blob_key);
/* PUT {stream}/retention/{offset}. */
void rn_retention_set(rn_surface *sf, rn_request *req, const char *key, size_t key_len,
                      const char *offset, size_t offset_len);

#endif
