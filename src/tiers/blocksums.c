/*
 * blocksums.c — the per-block CRC-32C sidecar of a stream data file:
 * entries written after data, checked on read, cut with the file. See
 * blocksums.h.
 */
#define _GNU_SOURCE
#include "tiers/blocksums.h"
#include "util/crc32c.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#define B RN_BLOCKSUM_BLOCK
#define CHUNK 256 /* entries handled per pread or pwrite of the sidecar */

/* A little-endian u32 at p (entries and the CRCs a log record carries). */
static void put_le32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get_le32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

void rn_blocksum_encode(uint8_t out[RN_BLOCKSUM_ENTRY], rn_blocksum s) {
    put_le32(out, s.crc);
    put_le32(out + 4, s.len);
}

rn_blocksum rn_blocksum_decode(const uint8_t in[RN_BLOCKSUM_ENTRY]) {
    return (rn_blocksum){get_le32(in), get_le32(in + 4)};
}

/* Reads up to len bytes at off; stops at the end of the file. flags:
 * preadv2's (RWF_NOWAIT: -EAGAIN as soon as a byte is not in the page
 * cache; dropped where the file system has no such reads, as tmpfs,
 * whose pages are its storage). Returns the bytes read or -errno. */
static ssize_t read_full_flags(int fd, void *out, size_t len, uint64_t off, int flags) {
    size_t got = 0;
    while (got < len) {
        struct iovec v = {(uint8_t *)out + got, len - got};
        ssize_t r = preadv2(fd, &v, 1, (off_t)(off + got), flags);
        if (r < 0 && errno == EOPNOTSUPP && flags) { /* tmpfs: nothing to wait for */
            flags = 0;
            continue;
        }
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -errno;
        if (r == 0)
            break;
        got += (size_t)r;
    }
    return (ssize_t)got;
}

static ssize_t read_full(int fd, void *out, size_t len, uint64_t off) {
    return read_full_flags(fd, out, len, off, 0);
}

static int write_full(int fd, const void *data, size_t len, uint64_t off) {
    for (size_t done = 0; done < len;) {
        ssize_t w = pwrite(fd, (const uint8_t *)data + done, len - done, (off_t)(off + done));
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return -errno;
        done += (size_t)w;
    }
    return 0;
}

/* Reads the entries of blocks [b, b + n) (n <= CHUNK); entries past the
 * sidecar's end read as zeros. Returns 0 or -errno. */
static int read_entries(int sum_fd, uint64_t b, size_t n, uint8_t *raw) {
    assert(n <= CHUNK);
    ssize_t got = read_full(sum_fd, raw, n * RN_BLOCKSUM_ENTRY, b * RN_BLOCKSUM_ENTRY);
    if (got < 0)
        return (int)got;
    memset(raw + got, 0, n * RN_BLOCKSUM_ENTRY - (size_t)got);
    return 0;
}

/* The entry of block b as the data file holds it now: the CRC of its
 * first `len` bytes, len being at least `at_least` (and what the old entry
 * covered) but no more than the file holds. Returns 0 or -errno. */
static int entry_from_file(int data_fd, uint64_t b, uint32_t at_least, rn_blocksum old,
                           rn_blocksum *out) {
    uint32_t want = old.len <= B && old.len > at_least ? old.len : at_least;
    uint8_t block[B];
    ssize_t got = read_full(data_fd, block, want, b * B);
    if (got < 0)
        return (int)got;
    *out = (rn_blocksum){got ? rn_crc32c(0, block, (size_t)got) : 0, (uint32_t)got};
    return 0;
}

int rn_blocksums_update(int data_fd, int sum_fd, const void *data, size_t len, uint64_t off) {
    if (len == 0)
        return 0;
    uint64_t end = off + len, first = off / B, last = (end - 1) / B;
    for (uint64_t b0 = first; b0 <= last; b0 += CHUNK) {
        size_t n = last - b0 + 1 < CHUNK ? (size_t)(last - b0 + 1) : CHUNK;
        uint8_t raw[CHUNK * RN_BLOCKSUM_ENTRY];
        int rc = read_entries(sum_fd, b0, n, raw);
        for (size_t i = 0; rc == 0 && i < n; i++) {
            uint64_t bs = (b0 + i) * B, be = bs + B;
            rn_blocksum s = {0, 0};
            if (off <= bs && end >= be) /* the whole block was written */
                s = (rn_blocksum){rn_crc32c(0, (const uint8_t *)data + (bs - off), B), B};
            else /* an edge: its other bytes are in the file */
                rc = entry_from_file(data_fd, b0 + i, (uint32_t)((end < be ? end : be) - bs),
                                     rn_blocksum_decode(raw + i * RN_BLOCKSUM_ENTRY), &s);
            rn_blocksum_encode(raw + i * RN_BLOCKSUM_ENTRY, s);
        }
        if (rc == 0)
            rc = write_full(sum_fd, raw, n * RN_BLOCKSUM_ENTRY, b0 * RN_BLOCKSUM_ENTRY);
        if (rc < 0)
            return rc;
    }
    return 0;
}

/* Extends crc over the file's bytes [from, to) (within one block). 0, or
 * -EUCLEAN when the file lacks some (the entry claims more than it holds). */
static int crc_file(int data_fd, uint64_t from, uint64_t to, uint32_t *crc) {
    assert(to - from <= B);
    uint8_t block[B];
    ssize_t got = read_full(data_fd, block, (size_t)(to - from), from);
    if (got < 0)
        return (int)got;
    if ((uint64_t)got != to - from)
        return -EUCLEAN;
    *crc = rn_crc32c(*crc, block, (size_t)got);
    return 0;
}

uint64_t rn_blocksums_blocks(uint64_t off, uint64_t len) {
    assert(len > 0);
    return (off + len - 1) / B - off / B + 1;
}

int rn_blocksums_compute(int data_fd, const void *data, size_t len, uint64_t off, uint8_t *crcs) {
    assert(len > 0);
    uint64_t end = off + len, first = off / B, n = rn_blocksums_blocks(off, len);
    for (uint64_t i = 0; i < n; i++) {
        uint64_t bs = (first + i) * B, from = bs > off ? bs : off, to = bs + B < end ? bs + B : end;
        uint32_t crc = 0;
        int rc = bs < off ? crc_file(data_fd, bs, off, &crc) : 0;
        if (rc < 0)
            return rc;
        crc = rn_crc32c(crc, (const uint8_t *)data + (from - off), (size_t)(to - from));
        put_le32(crcs + i * 4, crc);
    }
    return 0;
}

int rn_blocksums_put(int sum_fd, uint64_t off, size_t len, const uint8_t *crcs) {
    assert(len > 0);
    uint64_t end = off + len, first = off / B, last = (end - 1) / B;
    for (uint64_t b0 = first; b0 <= last; b0 += CHUNK) {
        size_t n = last - b0 + 1 < CHUNK ? (size_t)(last - b0 + 1) : CHUNK;
        uint8_t raw[CHUNK * RN_BLOCKSUM_ENTRY];
        for (size_t i = 0; i < n; i++) {
            uint64_t b = b0 + i, bs = b * B;
            const uint8_t *c = crcs + (b - first) * 4;
            rn_blocksum s = {get_le32(c), (uint32_t)((bs + B < end ? bs + B : end) - bs)};
            rn_blocksum_encode(raw + i * RN_BLOCKSUM_ENTRY, s);
        }
        int rc = write_full(sum_fd, raw, n * RN_BLOCKSUM_ENTRY, b0 * RN_BLOCKSUM_ENTRY);
        if (rc < 0)
            return rc;
    }
    return 0;
}

/* Checks block b, whose bytes [off, off + len) are in `in`, against s.
 * Returns 1 when it verified something, 0 when its entry checks none of
 * those bytes, -EUCLEAN on a mismatch, or -errno. */
static int check_block(int data_fd, const uint8_t *in, size_t len, uint64_t off, uint64_t b,
                       rn_blocksum s) {
    uint64_t bs = b * B, covered = bs + s.len;
    if (s.len > B)
        return -EUCLEAN; /* a damaged entry */
    if (s.len == 0 || covered <= off)
        return 0;
    uint32_t crc = 0;
    int rc = bs < off ? crc_file(data_fd, bs, off, &crc) : 0;
    uint64_t from = bs > off ? bs : off, to = covered < off + len ? covered : off + len;
    crc = rn_crc32c(crc, in + (from - off), (size_t)(to - from));
    if (rc == 0 && covered > off + len)
        rc = crc_file(data_fd, off + len, covered, &crc);
    if (rc < 0)
        return rc;
    return crc == s.crc ? 1 : -EUCLEAN;
}

/* Checks every block that [off, off + len) of `in` touches. */
static int check(int data_fd, int sum_fd, const uint8_t *in, size_t len, uint64_t off,
                 uint64_t *bad, uint64_t *verified) {
    uint64_t first = off / B, last = (off + len - 1) / B, n_ok = 0;
    int rc = 0;
    for (uint64_t b0 = first; rc >= 0 && b0 <= last; b0 += CHUNK) {
        size_t n = last - b0 + 1 < CHUNK ? (size_t)(last - b0 + 1) : CHUNK;
        uint8_t raw[CHUNK * RN_BLOCKSUM_ENTRY];
        rc = read_entries(sum_fd, b0, n, raw);
        for (size_t i = 0; rc >= 0 && i < n; i++) {
            rc = check_block(data_fd, in, len, off, b0 + i,
                             rn_blocksum_decode(raw + i * RN_BLOCKSUM_ENTRY));
            if (rc == -EUCLEAN)
                *bad = (b0 + i) * B;
            n_ok += rc > 0;
        }
    }
    if (verified)
        *verified += n_ok;
    return rc < 0 ? rc : 0;
}

ssize_t rn_blocksums_read(int data_fd, int sum_fd, void *out, size_t len, uint64_t off, int flags,
                          uint64_t *bad, uint64_t *verified) {
    ssize_t got = 0;
    for (int attempt = 0; attempt < 2; attempt++) { /* the second after a racing append */
        got = read_full_flags(data_fd, out, len, off, flags);
        if (got <= 0 || sum_fd < 0)
            return got;
        int rc = check(data_fd, sum_fd, out, (size_t)got, off, bad, verified);
        if (rc != -EUCLEAN)
            return rc < 0 ? rc : got;
    }
    return -EUCLEAN;
}

int rn_blocksums_cut(int data_fd, int sum_fd, uint64_t len) {
    uint64_t whole = len / B;
    if (ftruncate(sum_fd, (off_t)((whole + (len % B != 0)) * RN_BLOCKSUM_ENTRY)) < 0)
        return -errno;
    if (len % B == 0)
        return 0;
    rn_blocksum s;
    int rc = entry_from_file(data_fd, whole, (uint32_t)(len % B), (rn_blocksum){0, 0}, &s);
    if (rc < 0)
        return rc;
    uint8_t raw[RN_BLOCKSUM_ENTRY];
    rn_blocksum_encode(raw, s);
    return write_full(sum_fd, raw, sizeof raw, whole * RN_BLOCKSUM_ENTRY);
}

int rn_blocksums_forget(int sum_fd, uint64_t from, uint64_t to) {
    assert(from % B == 0 && to % B == 0);
    if (from >= to)
        return 0;
    if (fallocate(sum_fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                  (off_t)(from / B * RN_BLOCKSUM_ENTRY),
                  (off_t)((to - from) / B * RN_BLOCKSUM_ENTRY)) < 0)
        return errno == EOPNOTSUPP ? 0 : -errno; /* reads below the retained offset never check */
    return 0;
}
