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
 *   u32 group                       u32 reserved (0)
 *   u64 sender id                   u64 cluster tag
 *   address bytes (1..255, no NUL): the sender's Raft address
 *
 * and the listening side reads exactly those bytes (never one more: what
 * follows belongs to libraft) before it hands the stream to the group.
 */
#ifndef RN_CLUSTER_WIRE_H
#define RN_CLUSTER_WIRE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "util/buf.h"

#define RN_WIRE_MAGIC 0x46524e52u /* "RNRF" read as little-endian bytes */
#define RN_WIRE_VERSION 1u
#define RN_WIRE_FIXED_BYTES 32u
#define RN_WIRE_MAX_ADDRESS 255u
#define RN_WIRE_MAX_HELLO (RN_WIRE_FIXED_BYTES + RN_WIRE_MAX_ADDRESS)

typedef struct {
    uint32_t group;
    uint64_t sender_id;
    uint64_t cluster_tag;
    uint16_t address_len; /* bytes of address that follow the fixed part */
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

/* Appends the hello for (group, sender, tag, address) to out. Returns 0,
 * or -1 (nothing appended) when the address is empty or longer than
 * RN_WIRE_MAX_ADDRESS. */
int rn_wire_hello_encode(rn_buf *out, uint32_t group, uint64_t sender_id, uint64_t cluster_tag,
                         const char *address);

/* Decodes the RN_WIRE_FIXED_BYTES fixed part and checks it against this
 * node: a group below `groups` and the same cluster tag. On RN_WIRE_OK the
 * caller reads h->address_len more bytes of address. */
rn_wire_status rn_wire_hello_decode(const uint8_t *fixed, uint32_t groups, uint64_t cluster_tag,
                                    rn_wire_hello *h);

/* A short name for a status ("bad magic", ...), for logs. */
const char *rn_wire_status_name(rn_wire_status s);

/* The tag the hello carries for a cluster id: rn_hash_bytes of the id
 * (never 0); 0 for NULL or "" (then only nodes without an id talk). */
uint64_t rn_wire_cluster_tag(const char *cluster_id);

/* Parses a numeric address "a.b.c.d:port" or "[v6]:port" (port 1..65535)
 * into out. Returns 0, or -1 for anything else (host names included). */
int rn_wire_parse_address(const char *address, struct sockaddr_storage *out);

#endif
