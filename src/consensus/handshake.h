/*
 * handshake.h — the start of every connection to a Raft port (libraft's
 * and the control channel's): the connecting side's hello (wire.h) and
 * what proves that both nodes are members. How depends on the hello's auth:
 *
 * - none: the connecting side only writes the hello;
 * - the cluster key: the two sides exchange proofs that both hold it
 *   (peer_auth.h);
 * - peer certificates: the connection runs inside mutual TLS (peer_link.h),
 *   which proved who the connecting node is; the listening side checks the
 *   hello against that and answers a verdict (RNOK, or RNNO and a reason),
 *   so that a refused node learns why.
 *
 * After the hello, the listening side's messages have RN_HANDSHAKE_MESSAGE_BYTES
 * bytes, the connecting side's (with a key) 64:
 *
 *   listening  -> connecting  40 bytes: u32 'RNCH' (challenge) | 'RNNO'
 *                             (refused), u32 reason (rn_peer_reason), Ns
 *   connecting -> listening   64 bytes: Nc, the client proof
 *   listening  -> connecting  40 bytes: u32 'RNOK' | 'RNNO', u32 reason,
 *                             the server proof (zeros when refused, and
 *                             with peer certificates)
 *
 * A refusal names its reason so that the refused node can log why (it is
 * not authenticated: a refused node learns nothing it did not know).
 *
 * Ownership: a handshake takes over its stream (raft_malloc'd, as the
 * mux's: a TCP handle, or peer_link.h's plaintext stream) until it reports.
 * done(arg, stream, RN_PEER_OK) hands the stream back, connected, its reads
 * stopped and nothing left to write, and not one byte past the handshake
 * read; done(arg, NULL, reason) reports after the handle was closed and
 * freed. done runs exactly once, never from inside the call that started
 * the handshake. Everything runs on the loop thread.
 */
#ifndef RN_CONSENSUS_HANDSHAKE_H
#define RN_CONSENSUS_HANDSHAKE_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "consensus/peer_auth.h"
#include "consensus/wire.h"
#include "util/secret.h"

#define RN_HANDSHAKE_MESSAGE_BYTES 40u /* the listening side's messages */

typedef struct rn_handshake rn_handshake;

typedef void (*rn_handshake_fn)(void *arg, uv_stream_t *stream, rn_peer_reason reason);

/* The connecting side on a connected stream: writes hello (hello_len bytes,
 * copied), whose auth is `auth`; then with the cluster key (key->len > 0)
 * proves it and checks that the listening node is server_id; with peer
 * certificates waits for the verdict. */
rn_handshake *rn_handshake_connect(uv_stream_t *stream, rn_wire_auth auth, const rn_secret *key,
                                   const uint8_t *hello, size_t hello_len, uint64_t server_id,
                                   rn_handshake_fn done, void *arg);

/* The listening side, once the whole hello (hello_len bytes, copied) was
 * read and it asked for the key's proof: challenges the peer and checks
 * its proof as node self_id. Precondition: key->len > 0. */
rn_handshake *rn_handshake_serve(uv_stream_t *stream, const rn_secret *key, const uint8_t *hello,
                                 size_t hello_len, uint64_t self_id, rn_handshake_fn done,
                                 void *arg);

/* The listening side refusing a hello: writes a refusal naming reason,
 * then closes the connection (the stream is freed with raft_free); done is
 * not called (the caller gave the connection up). */
void rn_handshake_refuse(uv_stream_t *stream, rn_peer_reason reason);

/* The listening side admitting a hello under peer certificates: queues
 * the verdict RNOK on stream, ahead of anything written to it later (the
 * stream goes on to its receiver at once). */
void rn_handshake_admit(uv_stream_t *stream);

/* The refusal message naming reason, as rn_handshake_refuse writes it. */
void rn_handshake_refusal(uint8_t out[RN_HANDSHAKE_MESSAGE_BYTES], rn_peer_reason reason);

/* Gives up a handshake under way (a timeout, a close): done(arg, NULL,
 * RN_PEER_MISSING) follows once the handle is closed. */
void rn_handshake_abort(rn_handshake *h);

#endif
