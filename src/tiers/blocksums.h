/*
 * blocksums.h — the checksums of a stream data file, kept in its sidecar
 * (<id>.sum beside <id>.dat): one 8-byte entry per RN_BLOCKSUM_BLOCK bytes
 * of the data file, entry b describing block b = [b * BLOCK, (b + 1) * BLOCK).
 *
 * An entry is {u32 crc32c, u32 len}, little-endian: the CRC-32C of the
 * block's first `len` bytes (0 < len <= BLOCK). An entry of zeros (and one
 * past the sidecar's end: an older build's data, a punched range) checks
 * nothing: those bytes are unverified. A len above BLOCK is a damaged entry.
 * Entries always describe the bytes the data file holds: every write of the
 * data file is followed by rn_blocksums_update of the blocks it touched,
 * which reads back the block's other bytes from the file, so the entry of a
 * block being filled by appends (the open block) grows with it.
 *
 * Operates on descriptors only: safe on any thread that owns them. The
 * caller orders the data write before the update; a reader racing a writer
 * of the open block may see a new entry with old bytes and retries once
 * before it reports damage.
 */
#ifndef RN_TIERS_BLOCKSUMS_H
#define RN_TIERS_BLOCKSUMS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define RN_BLOCKSUM_BLOCK 4096u
#define RN_BLOCKSUM_ENTRY 8u

/* One entry, decoded. */
typedef struct {
    uint32_t crc, len;
} rn_blocksum;

void rn_blocksum_encode(uint8_t out[RN_BLOCKSUM_ENTRY], rn_blocksum s);
rn_blocksum rn_blocksum_decode(const uint8_t in[RN_BLOCKSUM_ENTRY]);

/* After the len bytes `data` were written at off of the data file,
 * rewrites the entries of every block they touch. Returns 0 or -errno. */
int rn_blocksums_update(int data_fd, int sum_fd, const void *data, size_t len, uint64_t off);
/* The number of blocks that [off, off + len) touches (len > 0). */
uint64_t rn_blocksums_blocks(uint64_t off, uint64_t len);
/* After the len bytes `data` were written at off of the data file: the
 * CRC-32C of every block they touch, each over the block's bytes up to
 * off + len exactly (the first block's bytes below off read from the
 * file), into crcs as u32 little-endian, rn_blocksums_blocks(off, len) of
 * them. A large append's log record carries these (engine/ahead.c).
 * Returns 0 or -errno. */
int rn_blocksums_compute(int data_fd, const void *data, size_t len, uint64_t off, uint8_t *crcs);
/* Writes the entries of the blocks [off, off + len) touches from crcs (as
 * rn_blocksums_compute made them): each covering its block's bytes up to
 * off + len. Returns 0 or -errno. */
int rn_blocksums_put(int sum_fd, uint64_t off, size_t len, const uint8_t *crcs);
/* Reads up to len bytes at off of the data file into out and checks every
 * block they touch against its entry (none without a sidecar: sum_fd -1). Returns the bytes read,
 * or -EUCLEAN with *bad set to the first damaged block's offset (nothing read may be used then), or
 * -errno. Counts the blocks verified in *verified when it is not NULL. flags are
 * preadv2's for the data read: with RWF_NOWAIT, -EAGAIN when a byte of it is not in the
 * page cache (the entries and the edge blocks' other bytes are read as usual). */
ssize_t rn_blocksums_read(int data_fd, int sum_fd, void *out, size_t len, uint64_t off, int flags,
                          uint64_t *bad, uint64_t *verified);
/* The data file was cut to len: drops the entries past it and recomputes
 * the block that now ends at len (the open block). Returns 0 or -errno. */
int rn_blocksums_cut(int data_fd, int sum_fd, uint64_t len);
/* The data file's blocks [from, to) (block-aligned) were given back: their
 * entries become zeros (unverified). Returns 0 or -errno. */
int rn_blocksums_forget(int sum_fd, uint64_t from, uint64_t to);

#endif
