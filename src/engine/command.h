/*
 * command.h — the engine's commands and their log encoding.
 *
 * Every mutation of stream state is a command. A command is encoded into a
 * log record before it is applied; recovery decodes the same records and
 * applies them again, so encode/decode here and apply in apply.c together
 * define the state machine that a replicated log can later carry unchanged.
 *
 * Record layout (little-endian): u8 type, u64 stream id, i64 time (ms),
 * then per type:
 *   CREATE: lstr path, u64 incarnation, lstr content type, i64 ttl seconds (-1 none),
 *           i64 expires-at ms (-1 none), u8 closed, u64 source stream id
 *           (0: not a fork; bit 63 set: the source is in another group,
 *           reached through a pin: RN_CMD_SOURCE_APART), u64 offset (fork
 *           offset: where the stream's own data starts), [with bit 63: u64
 *           the fork's retained offset, u64 its fork depth], u64 data
 *           length
 *   APPEND: u64 offset, u8 close, u8 has_producer [lstr id, u64 epoch,
 *           u64 seq, u8 has_digest [32-byte Producer-Digest]], u8 has_seq
 *           [lstr seq], u64 data length
 *   EXPIRE_PRODUCERS: u64 list length, then the list: one lstr per
 *           producer id whose state is discarded (ext §5.4)
 *   DELETE: nothing
 *   PUBLISH: u64 snapshot offset, lstr content type, 32-byte digest,
 *            u64 size, u8 cold, lstr object key
 *   RETAIN: u64 retained offset
 *   REWRITE: u64 serial of the new incarnation (see pipeline.c), u64 kept
 *            offset, u64 the new incarnation token (absent from records of
 *            builds before the deployment's key: their token is
 *            rn_incarnation_for(0, serial))
 *   TIER: u64 cold end (the stream's bytes below it are objects of the
 *         cold store, one per chunk of the grid: see tiers/history.c)
 *   FENCE: lstr namespace, u16 scope: the permanent fence of a bucket
 *         purge (state.h). Scope RN_FENCE_ALL covers every stream (a
 *         single node's log); scope g < 256 covers the streams whose ids
 *         end in byte g (a replicated log's group g: cluster/placement.h's
 *         id layout), and the stream id field is then g, which routes the
 *         command to that group's log
 *   PURGE: nothing (the stream, fenced, goes with every byte it owns)
 *   PIN: u64 fork id, u64 fork offset: a fork in another group (the fork
 *        id's) reads this stream below the offset; the stream counts it
 *        as it counts its forks (soft deletion, retention)
 *   UNPIN: u64 fork id: that fork no longer reads this stream
 *   CUT: u64 source id, u64 offset: this stream, a fork apart from that
 *        source, no longer reads the source's bytes below the offset (a
 *        bucket purge removed the stream they came from); RN_CUT_SOURCE:
 *        the source itself was purged, and the fork forgets it
 *   SUBS: lstr the subscriptions' whole state (subs/state.c's document),
 *         replacing the one before; the stream id field is the group
 *         whose log carries the subscriptions (a replicated log only)
 * and the data bytes last, so the engine can hand a request body to the log
 * as a separate piece without copying it.
 *
 * A CREATE or APPEND whose data was written to the stream file and synced
 * before it was logged (a large append written once, engine/ahead.c) has
 * RN_CMD_STORED_AHEAD set in its type byte, and in place of the data
 * bytes the CRC-32C of every 4 KiB block that [offset, offset + data
 * length) touches, u32 each (tiers/blocksums.h: each block's bytes up to
 * the append's end), from which replay restores the stream file's
 * checksums.
 */
#ifndef RN_COMMAND_H
#define RN_COMMAND_H

#include <stddef.h>
#include <stdint.h>

#include "util/buf.h"

enum {
    RN_CMD_CREATE = 1,
    RN_CMD_APPEND = 2,
    RN_CMD_DELETE = 3,
    RN_CMD_PUBLISH = 4,
    RN_CMD_RETAIN = 5,
    RN_CMD_REWRITE = 6,
    RN_CMD_EXPIRE_PRODUCERS = 7,
    RN_CMD_TIER = 8,
    RN_CMD_FENCE = 9,
    RN_CMD_PURGE = 10,
    RN_CMD_SUBS = 11,
    RN_CMD_PIN = 12,
    RN_CMD_UNPIN = 13,
    RN_CMD_CUT = 14,
};

/* In a record's type byte: the data is in the stream file, the record
 * holds its block checksums (see above). */
#define RN_CMD_STORED_AHEAD 0x80u
/* The largest data a record written ahead may name (a request body's
 * bound is lower). */
#define RN_CMD_MAX_STORED_AHEAD (1ull << 40)

/* In a CREATE's source id: the source is in another group (its fork id's
 * pin there holds it). Stream ids never reach this bit. */
#define RN_CMD_SOURCE_APART (1ull << 63)

/* A CUT's offset: the fork's apart source itself is purged. */
#define RN_CUT_SOURCE UINT64_MAX

#define RN_FENCE_ALL 0xffffu /* a FENCE's scope: every stream of the namespace */

typedef struct {
    uint8_t type;
    uint64_t stream_id;
    int64_t time_ms;
    /* CREATE (FENCE: the namespace; SUBS: the subscriptions' state) */
    const char *path;
    size_t path_len;
    uint64_t incarnation; /* Stream-Incarnation token of the new stream (CREATE)
                             or of the new history (REWRITE) */
    const char *content_type;
    size_t content_type_len;
    int64_t ttl_s;         /* -1: none */
    int64_t expires_at_ms; /* -1: none */
    uint64_t source_id;    /* fork source, 0 for none (CREATE: see RN_CMD_SOURCE_APART;
                              CUT: the fork's apart source) */
    /* CREATE of a fork apart from its source: its retained offset and depth
     * (the pin's answer); PIN, UNPIN: the fork's id */
    uint64_t fork_retained;
    uint64_t fork_depth;
    uint64_t fork_id;
    /* REWRITE: the serial the new incarnation token derives from */
    uint64_t serial;
    /* CREATE and APPEND */
    uint8_t close;
    uint64_t offset;     /* where data starts: the tail before an append, the
                            fork offset of a create (0 unless a fork) */
    const uint8_t *data; /* NULL in a decoded record stored ahead */
    size_t data_len;
    /* CREATE and APPEND whose data was written to the stream file before
     * the record (RN_CMD_STORED_AHEAD): the record's block checksums,
     * rn_cmd_block_sums_len() bytes */
    uint8_t stored_ahead;
    const uint8_t *block_sums;
    /* APPEND: idempotent producer tuple and Stream-Seq */
    uint8_t has_producer;
    const char *producer_id;
    size_t producer_id_len;
    uint64_t producer_epoch;
    uint64_t producer_seq;
    uint8_t has_digest;             /* the write's identity (ext §5.2) ... */
    const uint8_t *producer_digest; /* ... its Producer-Digest, 32 bytes */
    uint8_t has_seq;
    const char *seq;
    size_t seq_len;
    /* PUBLISH (offset = snapshot offset, content_type = the snapshot's) */
    const uint8_t *digest; /* 32 bytes */
    uint64_t snapshot_size;
    uint8_t cold; /* the body is in the cold store, not the local snapshot store */
    const char *object_key;
    size_t object_key_len;
    /* FENCE: RN_FENCE_ALL, or the group (id byte) whose streams it covers */
    uint16_t fence_scope;
    /* EXPIRE_PRODUCERS: the encoded list of producer ids (lstr each) */
    const uint8_t *producer_ids;
    size_t producer_ids_len;
} rn_cmd;

/* Encodes everything but the data bytes into out (appending). The record is
 * out's bytes followed by cmd->data (stored ahead: by cmd->block_sums). */
void rn_cmd_encode_head(const rn_cmd *cmd, rn_buf *out);

/* The bytes of a stored-ahead record's block checksums (data_len > 0). */
size_t rn_cmd_block_sums_len(const rn_cmd *cmd);

/* Decodes a whole record; pointers in cmd point into rec. Returns 0, or -1
 * for a malformed record. */
int rn_cmd_decode(const uint8_t *rec, size_t len, rn_cmd *cmd);

#endif
