/*
 * handshake.h — the start of every connection to a Raft port (libraft's
 * and the control channel's): the connecting side's hello (wire.h) and,
 * with a cluster key, the exchange of proofs that both nodes hold it
 * (peer_auth.h). Without a key the connecting side only writes the hello.
 *
 * After the hello, both sides' messages have fixed sizes:
 *
 *   listening  -> connecting  40 bytes: u32 'RNCH' (challenge) | 'RNNO'
 *                             (refused), u32 reason (rn_peer_reason), Ns
 *   connecting -> listening   64 bytes: Nc, the client proof
 *   listening  -> connecting  40 bytes: u32 'RNOK' | 'RNNO', u32 reason,
 *                             the server proof (zeros when refused)
 *
 * A refusal names its reason so that the refused node can log why (it is
 * not authenticated: a refused node learns nothing it did not know).
 *
 * Ownership: a handshake takes over its TCP handle (raft_malloc'd, as the
 * mux's) until it reports. done(arg, tcp, RN_PEER_OK) hands the stream
 * back, connected, its reads stopped and nothing left to write, and not
 * one byte past the handshake read; done(arg, NULL, reason) reports after
 * the handle was closed and freed. done runs exactly once, never from
 * inside the call that started the handshake. Everything runs on the loop
 * thread.
 */
#ifndef RN_CLUSTER_HANDSHAKE_H
#define RN_CLUSTER_HANDSHAKE_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "cluster/peer_auth.h"
#include "util/secret.h"

typedef struct rn_handshake rn_handshake;

typedef void (*rn_handshake_fn)(void *arg, uv_tcp_t *tcp, rn_peer_reason reason);

/* The connecting side on a connected tcp: writes hello (hello_len bytes,
 * copied), then, with a key (key->len > 0), proves it and checks that the
 * listening node is server_id. */
rn_handshake *rn_handshake_connect(uv_tcp_t *tcp, const rn_secret *key, const uint8_t *hello,
                                   size_t hello_len, uint64_t server_id, rn_handshake_fn done,
                                   void *arg);

/* The listening side, once the whole hello (hello_len bytes, copied) was
 * read and it asked for the key's proof: challenges the peer and checks
 * its proof as node self_id. Precondition: key->len > 0. */
rn_handshake *rn_handshake_serve(uv_tcp_t *tcp, const rn_secret *key, const uint8_t *hello,
                                 size_t hello_len, uint64_t self_id, rn_handshake_fn done,
                                 void *arg);

/* The listening side refusing a hello: writes a refusal naming reason,
 * then closes the connection; done is not called (the caller gave the
 * connection up). */
void rn_handshake_refuse(uv_tcp_t *tcp, rn_peer_reason reason);

/* Gives up a handshake under way (a timeout, a close): done(arg, NULL,
 * RN_PEER_MISSING) follows once the handle is closed. */
void rn_handshake_abort(rn_handshake *h);

#endif
