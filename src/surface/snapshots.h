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
/* Answers a publish op (single request or parts commit; its blob_key is
 * NUL-terminated): 204 with the snapshot's id, or its refusal; drops the
 * body unless the engine adopted it. */
struct rn_tiers;
void rn_snapshot_answer_publish(struct rn_tiers *t, rn_request *req, const rn_op *op);
/* Answers req with status and head, then a body of prefix, bytes
 * [off, off + len) of s's latest snapshot body and suffix, once the tiers
 * opened it (s may be gone by then); when it cannot be read, answers 502
 * COLD_STORE_FAILED with the header lines of `refusal` (may be NULL)
 * instead. Takes over head, prefix, suffix and refusal. */
void rn_snapshot_respond_body(rn_surface *sf, rn_request *req, int status, rn_buf *head,
                              rn_buf *prefix, const rn_stream *s, uint64_t off, uint64_t len,
                              rn_buf *suffix, rn_buf *refusal);
/* PUT {stream}/retention/{offset}. */
void rn_retention_set(rn_surface *sf, rn_request *req, const char *key, size_t key_len,
                      const char *offset, size_t offset_len);

#endif
