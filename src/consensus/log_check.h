/*
 * log_check.h — the Raft log's segments checked before libraft loads them,
 * so that damage is never taken for the torn tail of a crash (issue 32).
 *
 * libraft 0.15 loads an open segment (open-N: the one being written when
 * the node stopped) up to its first batch whose checksum fails and then
 * truncates the file there and renames it closed, whatever follows; later
 * open segments then load at the wrong indexes. One flipped byte in an
 * acknowledged batch thus cut every committed entry after it, silently,
 * and two damaged nodes out of three elected a leader and overwrote the
 * intact third. A closed segment that fails a checksum makes libraft
 * refuse to load the group, with a terse message.
 *
 * raft_uv writes one batch at a time, in order, into segments preallocated
 * with zeros, with direct I/O (a power cut keeps whole sectors). So only
 * the last batch written can be unfinished, and then some 512-byte sector
 * of it still reads as zeros. A batch that fails its checks is an
 * unfinished write, which libraft may cut, only when it is in the newest
 * open segment holding batches, no valid batch follows it, and its extent
 * holds a sector of zeros; anything else is damage. A closed segment must
 * hold valid batches from its header to its end.
 *
 * Segment layout (libraft's format 1, little-endian): u64 format, then
 * batches: u32 header CRC, u32 data CRC, u64 entry count n, n × (u64 term,
 * u8 type, 3 bytes, u32 length), then the entries' bytes (each padded to
 * 8); the CRCs are libraft's CRC-32 (polynomial 0x04c11db7, bits
 * most-significant first, initial value 0, no final xor) over the header
 * (from n) and over the data.
 */
#ifndef RN_CONSENSUS_LOG_CHECK_H
#define RN_CONSENSUS_LOG_CHECK_H

#include <stddef.h>

/* Checks every group's segments under <data_dir>/raft/ (nothing changes).
 * Returns 0 when libraft may load them; -1 with a message in err naming
 * the group, the file, the byte offset and what follows the damage, and
 * how to recover the node; -2 when a directory or file cannot be read
 * (err says which). */
int rn_raft_log_check(const char *data_dir, unsigned groups, char *err, size_t errcap);

#endif
