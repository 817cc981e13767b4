/*
 * peer_auth.h — how the nodes of a cluster prove to each other that they
 * are members, with the cluster key (--cluster-key-file, a secret every
 * node holds): the proofs of the Raft port's handshake (handshake.h), the
 * signature of a peer HTTP request and its check, and the counts of what
 * was refused, by channel and reason (for /__runnel/metrics).
 *
 * Raft port: after the hello (wire.h, auth = RN_WIRE_AUTH_KEY) the
 * listening side sends a fresh 32-byte nonce Ns, the connecting side
 * answers its own nonce Nc and
 *   client proof = HMAC-SHA256(key, "runnel raft client 1" | hello | Ns | Nc)
 * and the listening side answers
 *   server proof = HMAC-SHA256(key, "runnel raft server 1" | hello | Ns | Nc
 *                              | u64 LE listening node's id)
 * so each side proves it holds the key, the hello (the sender's id, group,
 * address and cluster) cannot be altered, and neither proof can be replayed
 * on another connection (the other side's nonce is fresh).
 *
 * Peer HTTP requests carry three headers:
 *   Runnel-Peer-Id: the sending node's id
 *   Runnel-Peer-Time: the sender's clock, milliseconds since the epoch
 *   Runnel-Peer-Signature: hex HMAC-SHA256(key, "runnel http 1\n" METHOD
 *       "\n" TARGET "\n" TIME "\n" ID "\n" hex SHA-256 of the body)
 * where TARGET is the request-target as sent (path and query). A request
 * is accepted within RN_PEER_HTTP_WINDOW_MS of the receiver's clock, so a
 * captured request can be replayed for that long at most (every peer route
 * is a read or an idempotent intent).
 *
 * Everything runs on the loop thread (the counters are plain integers).
 */
#ifndef RN_CONSENSUS_PEER_AUTH_H
#define RN_CONSENSUS_PEER_AUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "transport/http.h"
#include "util/buf.h"
#include "util/secret.h"

#define RN_PEER_NONCE_BYTES 32u
#define RN_PEER_MAC_BYTES 32u
#define RN_PEER_HTTP_WINDOW_MS 30000u

#define RN_PEER_HEADER_ID "Runnel-Peer-Id"
#define RN_PEER_HEADER_TIME "Runnel-Peer-Time"
#define RN_PEER_HEADER_SIGNATURE "Runnel-Peer-Signature"

/* Why a peer was refused; each is counted per channel. */
typedef enum {
    RN_PEER_OK = 0,
    RN_PEER_MISSING,   /* no credential at all (HTTP headers, or a hello without proof) */
    RN_PEER_MALFORMED, /* headers or handshake bytes not of the form above */
    RN_PEER_MODE,      /* the peer authenticates another way than this node */
    RN_PEER_STALE,     /* HTTP: the time is outside the window */
    RN_PEER_BAD_PROOF, /* the MAC does not verify: another cluster key */
    RN_PEER_WRONG_ID,  /* the claimed id is this node's own, or not a node */
    RN_PEER_UNTRUSTED, /* the certificate does not verify against the cluster's CA */
    RN_PEER_CERT_ID,   /* the certificate names another node than claimed, or none */
    RN_PEER_REASON_COUNT
} rn_peer_reason;

typedef enum { RN_PEER_CHANNEL_RAFT, RN_PEER_CHANNEL_HTTP, RN_PEER_CHANNEL_COUNT } rn_peer_channel;

/* A short name of the reason ("bad_proof", ...), for logs and metrics. */
const char *rn_peer_reason_name(rn_peer_reason r);
/* A sentence saying what the reason means for an operator. */
const char *rn_peer_reason_text(rn_peer_reason r);

/* Counts one refusal. */
void rn_peer_refused(rn_peer_channel channel, rn_peer_reason reason);
/* Appends the refusal counters in the Prometheus text format. */
void rn_peer_auth_metrics(rn_buf *out);

/* The Raft handshake's proofs (above). from_server selects the label (and
 * with it whether server_id is part of the proof). Precondition: key->len > 0. */
void rn_peer_raft_proof(const rn_secret *key, bool from_server, const uint8_t *hello,
                        size_t hello_len, const uint8_t ns[RN_PEER_NONCE_BYTES],
                        const uint8_t nc[RN_PEER_NONCE_BYTES], uint64_t server_id,
                        uint8_t out[RN_PEER_MAC_BYTES]);

/* Appends the three header lines ("Name: value\r\n" each) that sign a
 * request from node self_id at now_ms. url is absolute
 * (scheme://authority/target); the target is what follows the authority.
 * Precondition: key->len > 0, self_id > 0. */
void rn_peer_http_sign(const rn_secret *key, uint64_t self_id, uint64_t now_ms, const char *method,
                       const char *url, const uint8_t *body, size_t body_len, rn_buf *lines);

/* Checks req's signature headers at now_ms against the key: RN_PEER_OK with
 * *peer set to the signing node, or why not (nothing counted: the caller
 * counts once it decided). self_id's own signature is refused
 * (RN_PEER_WRONG_ID). Precondition: key->len > 0. */
rn_peer_reason rn_peer_http_verify(const rn_secret *key, uint64_t self_id, uint64_t now_ms,
                                   const rn_request *req, uint64_t *peer);

#endif
