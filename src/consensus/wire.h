/*
 * wire.h — the cluster transport's wire format: the handshake a connecting
 * node sends before libraft's own bytes, and the numeric peer addresses
 * ("a.b.c.d:port" or "[v6]:port") both sides use.
 *
 * A node has one listening TCP port for all of its Raft groups. Each
 * connection carries exactly one group: the connecting side first writes a
 * hello (little-endian):
 *
 *   u32 magic 'RNRF' (0x46524e52)   u16 version (1)   u16 address length
 *   u32 group                       u32 auth (0: none, 1: the cluster key,
 *                                            2: the peer certificates)
 *   u64 sender id                   u64 cluster tag
 *   address bytes (1..255, no NUL): the sender's Raft address
 *
 * and the listening side reads exactly those bytes (never one more: what
 * follows belongs to libraft) before it hands the stream to the group. With
 * auth 1 the two sides first run the handshake of handshake.h (proofs of
 * the cluster key, peer_auth.h) over the same connection; with auth 2 the
 * whole connection, hello included, runs inside mutual TLS (peer_link.h)
 * and the listening side answers the hello with a verdict (handshake.h).
 *
 * A hello naming RN_WIRE_CONTROL_GROUP opens the node's control channel
 * instead (control.h): after it, the connecting side writes confirmation
 * asks and the listening side writes answers, RN_WIRE_CONFIRM_BYTES each
 * (little-endian):
 *
 *   u32 kind (1 ask, 2 answer)      u32 group
 *   u64 term: the leader's (ask), the answering node's current term (answer)
 *   u64 round: the asker's round number, echoed in the answer
 *   u32 confirmed (answer: 1 when it follows the asker in that term; ask: 0)
 *   u32 reserved (0)
 */
#ifndef RN_CONSENSUS_WIRE_H
#define RN_CONSENSUS_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "util/buf.h"

#define RN_WIRE_MAGIC 0x46524e52u /* "RNRF" read as little-endian bytes */
#define RN_WIRE_VERSION 1u
#define RN_WIRE_FIXED_BYTES 32u
#define RN_WIRE_MAX_ADDRESS 255u
#define RN_WIRE_MAX_HELLO (RN_WIRE_FIXED_BYTES + RN_WIRE_MAX_ADDRESS)
#define RN_WIRE_CONTROL_GROUP 0xffffffffu /* the hello of a control connection */
#define RN_WIRE_CONFIRM_BYTES 32u

/* How a connection's sender proves it is a member (the hello's auth). */
typedef enum { RN_WIRE_AUTH_NONE = 0, RN_WIRE_AUTH_KEY = 1, RN_WIRE_AUTH_CERT = 2 } rn_wire_auth;

typedef struct {
    uint32_t group;
    uint64_t sender_id;
    uint64_t cluster_tag;
    uint16_t address_len; /* bytes of address that follow the fixed part */
    rn_wire_auth auth;
} rn_wire_hello;

typedef enum {
    RN_WIRE_OK = 0,
    RN_WIRE_BAD_MAGIC,
    RN_WIRE_BAD_VERSION,
    RN_WIRE_BAD_GROUP,
    RN_WIRE_BAD_ADDRESS,
    RN_WIRE_BAD_CLUSTER,
    RN_WIRE_BAD_SENDER,
} rn_wire_status;

/* Appends the hello for (group, sender, tag, address, auth) to out.
 * Returns 0, or -1 (nothing appended) when the address is empty or longer
 * than RN_WIRE_MAX_ADDRESS. */
int rn_wire_hello_encode(rn_buf *out, uint32_t group, uint64_t sender_id, uint64_t cluster_tag,
                         const char *address, rn_wire_auth auth);

/* Decodes the RN_WIRE_FIXED_BYTES fixed part and checks it against this
 * node: a group below `groups` (or RN_WIRE_CONTROL_GROUP), the same
 * cluster tag and a known auth (whether it is this node's is the caller's
 * to check). On RN_WIRE_OK the
 * caller reads h->address_len more bytes of address. */
rn_wire_status rn_wire_hello_decode(const uint8_t *fixed, uint32_t groups, uint64_t cluster_tag,
                                    rn_wire_hello *h);

typedef enum { RN_WIRE_CONFIRM_ASK = 1, RN_WIRE_CONFIRM_ANSWER = 2 } rn_wire_confirm_kind;

/* A leadership confirmation message of the control channel. */
typedef struct {
    rn_wire_confirm_kind kind;
    uint32_t group;
    uint64_t term;
    uint64_t round;
    bool confirmed; /* answers only */
} rn_wire_confirm;

/* Writes m's RN_WIRE_CONFIRM_BYTES bytes to out. */
void rn_wire_confirm_encode(const rn_wire_confirm *m, uint8_t out[RN_WIRE_CONFIRM_BYTES]);

/* Decodes RN_WIRE_CONFIRM_BYTES bytes. Returns 0, or -1 for an unknown
 * kind, a confirmed field other than 0/1 (or set in an ask) or a non-zero
 * reserved field (the peer speaks another version: close the connection). */
int rn_wire_confirm_decode(const uint8_t in[RN_WIRE_CONFIRM_BYTES], rn_wire_confirm *m);

/* A short name for a status ("bad magic", ...), for logs. */
const char *rn_wire_status_name(rn_wire_status s);

/* The tag the hello carries for a cluster id: a fixed 64-bit hash of the id
 * (never 0); 0 for NULL or "" (then only nodes without an id talk). */
uint64_t rn_wire_cluster_tag(const char *cluster_id);

/* Parses a numeric address "a.b.c.d:port" or "[v6]:port" (port 1..65535)
 * into out. Returns 0, or -1 for anything else (host names included). */
int rn_wire_parse_address(const char *address, struct sockaddr_storage *out);

#endif
