/*
 * control.h — the control channel between nodes, beside libraft's own
 * connections: the leadership confirmations of reads.c (wire.h's confirm
 * messages, fixed size) over one TCP connection per peer, opened on the
 * peer's Raft port with a hello naming RN_WIRE_CONTROL_GROUP (the mux
 * hands such connections here), inside mutual TLS with peer certificates
 * (peer_link.h). A node asks over the connections it opens
 * and answers over the ones it accepts.
 *
 * Delivery is best effort: an ask may be dropped (no connection yet, the
 * connection failed, too much queued) and an answer may never come. Callers
 * bound their wait themselves. Everything runs on the loop thread.
 */
#ifndef RN_CONSENSUS_CONTROL_H
#define RN_CONSENSUS_CONTROL_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "consensus/peer_tls.h"
#include "consensus/wire.h"
#include "util/secret.h"

typedef struct rn_ctl rn_ctl;

typedef struct {
    uv_loop_t *loop;
    uint64_t self_id;
    const char *self_address; /* this node's Raft address, sent in the hello */
    uint64_t cluster_tag;
    bool tcp_nodelay;
    unsigned peer_timeout_ms;    /* as the mux's (rn_mux_tune_socket) */
    unsigned connect_retry_ms;   /* a failed connection is not retried before this */
    unsigned connect_timeout_ms; /* a connection not authenticated by then is dropped */
    /* The cluster key (NULL or empty: none): outgoing connections prove it
     * (handshake.h); incoming ones were proven by the mux. Not copied. */
    const rn_secret *key;
    /* Peer certificates (NULL: none): outgoing connections run inside
     * mutual TLS, incoming ones were checked by the mux. Not copied. */
    const rn_peer_tls *tls;
    /* An ask from sender (its hello's id): fill *answer, or return false to
     * send nothing. */
    bool (*on_ask)(void *ctx, uint64_t sender, const rn_wire_confirm *ask, rn_wire_confirm *answer);
    /* An answer from peer to an ask sent to it. */
    void (*on_answer)(void *ctx, uint64_t peer, const rn_wire_confirm *answer);
    void *ctx;
} rn_ctl_options;

/* Creates the channel (no connection yet). Options are copied. */
rn_ctl *rn_ctl_open(const rn_ctl_options *o);

/* Sends ask to peer (id, numeric Raft address), connecting first if need
 * be. Returns 0 when it was sent or queued, -1 when it was dropped at
 * once: the peer's connection failed less than connect_retry_ms ago, or
 * too much is queued to it. A connection to an id whose address changed
 * is replaced. */
int rn_ctl_ask(rn_ctl *ctl, uint64_t peer, const char *address, const rn_wire_confirm *ask);

/* The mux's control_accept: serves asks arriving on stream (raft_malloc'd,
 * connected, its hello read) from sender. */
void rn_ctl_accept(void *ctl, uint64_t sender, uv_stream_t *stream);

/* Closes every connection; done(arg) runs on the loop thread once every
 * handle is closed, after ctl is freed. No call may follow. */
void rn_ctl_close(rn_ctl *ctl, void (*done)(void *arg), void *arg);

#endif
