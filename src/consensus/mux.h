/*
 * mux.h — one TCP port per node for every Raft group.
 *
 * libraft wants one `struct raft_uv_transport` per Raft instance; its stock
 * TCP transport gives each its own listening port and never sets
 * TCP_NODELAY. This module implements that interface once per group over a
 * single shared listener: a connecting side writes the hello of wire.h (the
 * group, its id and address, the cluster tag) and then hands the stream to
 * libraft; the listening side reads exactly the hello and hands the stream
 * to that group's accept callback. With peer certificates the connection
 * runs inside mutual TLS (peer_link.h) from its first byte, and the streams
 * read, written and handed over are the links' plaintext ones. Every connection, both sides, gets
 * TCP_NODELAY (unless turned off for measurements), keepalive probes and
 * TCP_USER_TIMEOUT, so a peer that vanishes without a reset (a blackholed
 * route) is noticed within peer_timeout_ms instead of the kernel's ~15
 * minutes, during which libuv's write queue would keep growing.
 *
 * Everything runs on the loop thread. Streams handed to libraft are
 * allocated with raft_malloc, since libraft releases them with raft_free.
 */
#ifndef RN_CONSENSUS_MUX_H
#define RN_CONSENSUS_MUX_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "consensus/peer_tls.h"
#include "util/secret.h"

struct raft_uv_transport;

typedef struct rn_mux rn_mux;

typedef struct {
    uv_loop_t *loop;
    const char *listen_address;    /* this node's Raft address, numeric (wire.h) */
    unsigned groups;               /* groups 0..groups-1 */
    uint64_t cluster_tag;          /* rn_wire_cluster_tag of the cluster id */
    bool tcp_nodelay;              /* set TCP_NODELAY on every connection */
    unsigned peer_timeout_ms;      /* TCP_USER_TIMEOUT and keepalive bound; 0: kernel defaults */
    unsigned handshake_timeout_ms; /* an accepted connection silent this long is closed */
    unsigned max_handshakes;       /* accepted connections still in their hello; more are closed */
    /* Optional: a hello naming RN_WIRE_CONTROL_GROUP hands its stream here
     * (the control channel, control.h); the callee owns the stream from
     * then on and releases it with raft_free once closed. NULL: such hellos
     * are refused. */
    void (*control_accept)(void *ctx, uint64_t sender, uv_stream_t *stream);
    void *control_ctx;
    /* The cluster key (NULL or empty: none). With one, every connection
     * runs handshake.h's proofs before libraft or the control channel sees
     * it, both ways; a connection without them, or whose proof fails, is
     * closed, counted (peer_auth.h) and logged. Not copied: it outlives
     * the mux. */
    const rn_secret *key;
    /* Peer certificates (NULL: none; not with a key): every connection,
     * both ways, runs inside mutual TLS (peer_link.h); a hello whose sender
     * is not the node the client's certificate names is refused with a
     * verdict saying so (handshake.h), counted and logged. Not copied. */
    const rn_peer_tls *tls;
    uint64_t self_id; /* this node's id: a hello claiming it is refused (key, certificates) */
} rn_mux_options;

/* Binds and listens on o->listen_address. Returns 0 and *out, or a negative
 * libuv error code (UV_EINVAL for an address wire.h cannot parse) with
 * nothing left open. */
int rn_mux_open(const rn_mux_options *o, rn_mux **out);

/* The transport for group g, to pass to raft_uv_init. It stays valid until
 * rn_mux_close's callback. libraft calls its init, listen, connect and close;
 * incoming connections for g are refused until libraft called listen. */
struct raft_uv_transport *rn_mux_transport(rn_mux *m, unsigned group);

/* Closes the listener and every connection still in its handshake, then
 * runs done(arg) on the loop thread once every handle is closed; m is freed
 * before done runs. Precondition: every group's transport that libraft
 * initialized has been closed by libraft (raft_close completed). */
void rn_mux_close(rn_mux *m, void (*done)(void *arg), void *arg);

/* Applies the transport's socket options to a connected TCP handle:
 * TCP_NODELAY as asked, and with peer_timeout_ms > 0 keepalive probes and
 * TCP_USER_TIMEOUT bounded by it. Failures are ignored (the socket still
 * works, only slower or with the kernel's slower failure detection). */
void rn_mux_tune_socket(uv_tcp_t *tcp, bool nodelay, unsigned peer_timeout_ms);

#endif
