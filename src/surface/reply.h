/*
 * reply.h — response pieces shared by the surfaces: the headers every answer
 * carries (browser security, CORS), offset headers, and error answers.
 */
#ifndef RN_REPLY_H
#define RN_REPLY_H

#include <stdint.h>

#include "engine/engine.h"
#include "surface/errors.h"
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
/* True when the request's If-None-Match lists etag (a quoted strong tag) or
 * "*", compared weakly as RFC 9110 §13.1.2 requires. */
int rn_if_none_match(const rn_request *req, const char *etag);
/* Appends "Stream-Incarnation: <token>\r\n". */
void rn_reply_incarnation(rn_buf *h, const rn_stream *s);
/* Appends Stream-Snapshot-Offset and Stream-Snapshot-Digest of the stream's
 * latest snapshot, when it has one. */
void rn_reply_snapshot_id(rn_buf *h, const rn_stream *s);

/* Answers a CORS preflight. */
void rn_reply_preflight(rn_request *req);

#endif
