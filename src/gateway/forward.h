/*
 * forward.h — the gateway's forwarding core: an admitted request goes to
 * its stream's group leader (learned from the nodes' redirects, shared
 * util/routes.h) or to a node, its body and its answer stream through, and
 * the intermediary rules of ext §11.1 hold: after any byte of a request was
 * forwarded, no 4xx of the gateway's own (but 408 before anything went),
 * no 307 or 308 of its own, and no resend unless the node's answer proves
 * that nothing applied (its redirect). docs/GATEWAY.md tells the answers.
 *
 * Bodies up to hold_body_bytes come whole (the transport reads them), and
 * are kept until their answer, so that a node's redirect can be followed;
 * larger ones (and those without Content-Length) are taken as they arrive
 * and sent with Expect: 100-continue, so that a redirect comes before any
 * of them was sent.
 *
 * The nodes are watched: each is asked GET /__runnel/livez every second or
 * so; one that answered is usable (its Ursula-Max-Request-Bytes, when it
 * sends one, must not be below the gateway's request limit: a node that
 * accepts less is not used, and the log says why). Everything runs on the
 * loop thread.
 */
#ifndef RN_GATEWAY_FORWARD_H
#define RN_GATEWAY_FORWARD_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "transport/http.h"

typedef struct rn_forwarder rn_forwarder;

/* Why the forwarder answers a request itself: what its user (the gateway,
 * or a node forwarding to its group's leader) answers for each. */
typedef enum {
    RN_FWD_NO_NODE,        /* no node to send it to: nothing forwarded */
    RN_FWD_UNREACHABLE,    /* no node could be connected to: nothing forwarded */
    RN_FWD_NOT_LED,        /* a redirect it could not follow: the node applied nothing */
    RN_FWD_FAILED,         /* the node's connection broke after some of it went: may apply */
    RN_FWD_TIMEOUT,        /* no answer's head in time: may apply */
    RN_FWD_BODY_SLOW,      /* the body came too slowly, before any of it went */
    RN_FWD_BODY_TOO_LARGE, /* the body passed the limit, before any of it went */
    RN_FWD_BODY_CUT,       /* the client ended its input mid-body, before any of it went */
    RN_FWD_BODY_STALLED,   /* the body failed after some of it went: the node's request was cut */
    RN_FWD_FAILURES
} rn_forward_failure;

typedef struct {
    const char *const *upstreams; /* the nodes' base URLs, http://host:port */
    size_t nupstreams;
    uint64_t upstream_timeout_ms; /* for an answer's head (a long-poll: plus its timeout_ms) */
    uint64_t hold_body_bytes;     /* bodies up to this are read whole and kept */
    uint64_t max_request_bytes;   /* the gateway's own request limit */
    uint64_t idle_ms;             /* an idle connection to a node is kept this long */
    const char *admin_token;      /* added to operator routes (NULL: none) */
    /* A header line ("Name: value\r\n") added to every forwarded request
     * (NULL: none): a node marks what it forwards, so that its leader never
     * forwards it on. */
    const char *mark;
    /* Answers req for why, as the forwarder's user does (required). */
    void (*refuse)(rn_request *req, rn_forward_failure why);
    /* Forward the client's Authorization (a node whose leader has a gate
     * of its own); else it stays behind (the gateway consumed it). */
    int keep_credentials;
} rn_forward_config;

rn_forwarder *rn_forwarder_new(uv_loop_t *loop, const rn_forward_config *cfg);
/* Checks every node once, now: calls done(arg, usable, why) once each
 * answered or failed (usable: how many are usable; why: the first refusal,
 * or ""). */
void rn_forwarder_probe(rn_forwarder *f, void (*done)(void *arg, size_t usable, const char *why),
                        void *arg);
/* Whether a node is usable now. */
int rn_forwarder_ready(const rn_forwarder *f);
/* Cancels what is in flight (its clients' connections are cut). */
void rn_forwarder_stop(rn_forwarder *f);
void rn_forwarder_free(rn_forwarder *f);

/* Whether the body of req, whose head came, is taken as it arrives (see
 * above) rather than read whole. */
int rn_forward_streams_body(const rn_forwarder *f, const rn_request *req);
/* Forwards req, admitted by the gate, with its body read (or none). */
void rn_forward(rn_forwarder *f, rn_request *req);
/* Forwards req, admitted by the gate, taking its body as it arrives: only
 * from the transport's on_headers hook (rn_request_stream_body). */
void rn_forward_streamed(rn_forwarder *f, rn_request *req);
/* Forwards req to origin (http://host:port): with its body read (or none),
 * or, from the on_headers hook, taking it as it arrives (streamed). A node
 * forwards a write to its group's leader this way; a connection that cannot
 * be made answers RN_FWD_UNREACHABLE (no other node is tried). */
void rn_forward_to(rn_forwarder *f, rn_request *req, const char *origin, int streamed);

/* Appends the forwarder's metrics (Prometheus text). */
void rn_forwarder_metrics(const rn_forwarder *f, rn_buf *out);

#endif
