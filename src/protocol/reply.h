/*
 * reply.h — response pieces shared by every layer that answers requests
 * (surfaces, subscriptions, cluster, ops): the headers every answer carries
 * (browser security, CORS), offset headers, and error answers.
 */
#ifndef RN_REPLY_H
#define RN_REPLY_H

#include <stdint.h>

#include "engine/engine.h"
#include "protocol/errors.h"
#include "transport/http.h"
#include "util/buf.h"

/* Sets the deployment's id for Ursula-Cluster-Id (1-64 of [A-Za-z0-9._-]);
 * called once at start. */
void rn_reply_set_cluster_id(const char *id);
/* Appends the headers every answer of a route carries: server metadata
 * (Ursula-Protocol, Ursula-Cluster-Id; ext §10), X-Content-Type-Options,
 * Cross-Origin-Resource-Policy and CORS. */
void rn_reply_common(rn_buf *h);
/* Appends "Name: <offset token>\r\n". */
void rn_reply_offset(rn_buf *h, const char *name, uint64_t position);
/* Sends the error answer e; `extra` (may be NULL) holds more header lines and
 * is taken over. */
void rn_reply_error(rn_request *req, rn_error e, rn_buf *extra);
/* Answers a failed cold-store operation (status < 0 from the tiers):
 * -EAGAIN (slow or saturated) 503 COLD_BACKPRESSURE, anything else 502
 * COLD_STORE_FAILED with the header lines of extra (may be NULL; freed
 * either way); both with Retry-After, whatever the request (a read, a
 * publish, a commit), so a client backs off from either alike. */
void rn_reply_cold_failure(rn_request *req, int status, rn_buf *extra);
/* The same with a detail after the fixed message (NULL: none; see
 * rn_error_body): only what the request named. */
void rn_reply_error_detail(rn_request *req, rn_error e, rn_buf *extra, const char *detail,
                           size_t detail_len);
/* Sends the error answer e as an intermediary's own (the gateway's):
 * the headers of rn_reply_error_detail but the server's metadata (no
 * Ursula-Protocol, no Ursula-Cluster-Id: ext §10, §11). A concealing 404
 * is this with RN_E_BUCKET_NOT_FOUND: the node's answer for a bucket that
 * does not exist, less those two headers. extra and detail as
 * rn_reply_error_detail. */
void rn_reply_intermediary_error(rn_request *req, rn_error e, rn_buf *extra, const char *detail,
                                 size_t detail_len);
/* Appends the path of the stream whose engine key is key, as the request's
 * surface spells it: /v1/stream/{key} on the v1 surface, /{key} on the
 * bucket surface. */
void rn_reply_stream_path(rn_buf *out, const rn_request *req, const char *key, size_t key_len);
/* Sends `e`, an answer for a stream the engine did not find (404 or 410);
 * a 404 STREAM_NOT_FOUND names the stream's path (rn_reply_stream_path). A
 * bucket's 404 does not: an intermediary that conceals a resource must
 * answer exactly like it (ext §11). */
void rn_reply_missing(rn_request *req, rn_error e, const char *key, size_t key_len, rn_buf *extra);
/* True when the request's If-None-Match lists etag (a quoted strong tag) or
 * "*", compared weakly as RFC 9110 §13.1.2 requires. */
int rn_if_none_match(const rn_request *req, const char *etag);
/* Appends "Stream-Incarnation: <token>\r\n". */
void rn_reply_incarnation(rn_buf *h, const rn_stream *s);
/* Appends Stream-Snapshot-Offset and Stream-Snapshot-Digest of the stream's
 * latest snapshot, when it has one. */
void rn_reply_snapshot_id(rn_buf *h, const rn_stream *s);

/* Answers a CORS preflight; with server_metadata_too 0, as an
 * intermediary's own answer (no Ursula-Protocol, no Ursula-Cluster-Id). */
void rn_reply_preflight(rn_request *req, int server_metadata_too);

#endif
