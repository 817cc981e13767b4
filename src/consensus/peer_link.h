/*
 * peer_link.h — one Raft port connection under mutual TLS (peer_tls.h),
 * seen by the rest of the node as a plain stream.
 *
 * libraft's transport interface hands libraft a libuv stream that libraft
 * reads and writes itself, with no place for a record layer. So the TLS of
 * a connection runs here, between the TCP socket (ciphertext) and one end
 * of a local socketpair (plaintext); the other end is the stream the hello
 * (handshake.h), the control channel and libraft use as they would use the
 * socket. Every byte of the connection, the hello included, is inside TLS.
 * The cost: the plaintext crosses the socketpair once each way (a copy and
 * a system call per read and write) on top of the encryption.
 *
 * A link ends when either side does: a failed handshake, the peer's close,
 * a TLS or socket error end the plaintext stream (its reader sees EOF), and
 * the plaintext stream's close ends the TCP connection (with a TLS
 * close_notify). What each side has queued for the other is bounded: past
 * 1 MiB waiting on one side, the other side is not read until it drains.
 *
 * A failed handshake is logged, throttled, with OpenSSL's reason, and
 * counted in the refusals (peer_auth.h, channel raft) when this node refused
 * the peer (its certificate does not verify against the CA, it sent none,
 * it names another node than the one connected to, or the peer does not
 * speak TLS at all; the last is answered with handshake.h's plain-text
 * refusal naming RN_PEER_MODE, so that a node with a cluster key logs why).
 *
 * Everything runs on the loop thread.
 */
#ifndef RN_CONSENSUS_PEER_LINK_H
#define RN_CONSENSUS_PEER_LINK_H

#include <stdint.h>
#include <uv.h>

#include "consensus/peer_tls.h"

#define RN_PEER_LINK_ID_BYTES 8u /* the accepting side's id prefix, below */

/* Takes over tcp (connected, allocated with raft_malloc, its socket options
 * set) and returns the plaintext stream: a uv_pipe_t allocated with
 * raft_malloc, initialized and open, that the caller owns from now on (it
 * closes it and frees it with raft_free, or hands it to libraft, which
 * does). peer > 0: this node connected to node `peer`, and the server's
 * certificate must name it. peer == 0: this node accepted the connection,
 * and the stream's first RN_PEER_LINK_ID_BYTES bytes are the node id the
 * client's verified certificate names (u64 little-endian; 0 when it names
 * none), followed by the client's plaintext. Returns NULL, with tcp closed
 * and freed, when no socketpair could be made (out of descriptors). */
uv_stream_t *rn_peer_link_open(const rn_peer_tls *t, uv_tcp_t *tcp, uint64_t peer);

#endif
