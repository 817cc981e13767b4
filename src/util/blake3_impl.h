/*
 * blake3_impl.h — what the BLAKE3 code paths share (private to
 * src/util/blake3*.c): the flags, sizes and constants of the specification,
 * word loads and stores, the interface every code path fills (impl_ops), and
 * the serial fallback of hash_many. blake3.c holds the portable path, the
 * dispatch and the tree; blake3_x86.c the SSE4.1 and AVX2 paths.
 */
#ifndef RUNNEL_UTIL_BLAKE3_IMPL_H
#define RUNNEL_UTIL_BLAKE3_IMPL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
#define RN_B3_X86 1
#include <immintrin.h>
#define TGT_SSE41 __attribute__((target("sse4.1")))
#define TGT_AVX2 __attribute__((target("avx2")))
#else
#define RN_B3_X86 0
#endif

enum { CHUNK_START = 1, CHUNK_END = 2, PARENT = 4, ROOT = 8 };

#define BLOCK_LEN 64
#define CHUNK_LEN 1024
#define BLOCKS_PER_CHUNK (CHUNK_LEN / BLOCK_LEN)
#define WIDE_CHUNKS 64 /* chunks hashed per batch before their parents (power of two) */

/* The SHA-256 initial hash value; also the key words of the default mode. */
static const uint32_t IV[8] = {0x6A09E667u, 0xBB67AE85u, 0x3C6EF372u, 0xA54FF53Au,
                               0x510E527Fu, 0x9B05688Cu, 0x1F83D9ABu, 0x5BE0CD19u};

/* SCHEDULE[r][i]: the original message word at position i in round r, i.e. the
 * permutation {2,6,3,10,7,0,4,13,1,11,12,5,9,14,15,8} applied r times. */
static const uint8_t SCHEDULE[7][16] = {
    {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15},
    {2, 6, 3, 10, 7, 0, 4, 13, 1, 11, 12, 5, 9, 14, 15, 8},
    {3, 4, 10, 12, 13, 2, 7, 14, 6, 5, 9, 0, 11, 15, 8, 1},
    {10, 7, 12, 9, 14, 3, 13, 15, 4, 0, 11, 2, 5, 8, 1, 6},
    {12, 13, 9, 11, 15, 10, 14, 8, 7, 2, 5, 3, 0, 1, 6, 4},
    {9, 14, 11, 5, 8, 12, 15, 1, 13, 3, 0, 10, 2, 6, 4, 7},
    {11, 15, 5, 0, 1, 9, 8, 6, 14, 10, 2, 12, 3, 4, 7, 13},
};

static inline uint32_t load32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline void store32(uint8_t *p, uint32_t w) {
    p[0] = (uint8_t)w;
    p[1] = (uint8_t)(w >> 8);
    p[2] = (uint8_t)(w >> 16);
    p[3] = (uint8_t)(w >> 24);
}

static inline void store_cv(uint8_t out[32], const uint32_t cv[8]) {
    for (int i = 0; i < 8; i++)
        store32(out + 4 * i, cv[i]);
}

/* ------------------------------------------------------------------------ */
/* Code-path interface                                                       */

/* Compresses one block into cv in place (cv becomes the new chaining value). */
typedef void compress_cv_fn(uint32_t cv[8], const uint8_t block[64], uint8_t block_len,
                            uint64_t counter, uint8_t flags);
/* Compresses one block and writes the full 64-byte output (cv is unchanged). */
typedef void compress_xof_fn(const uint32_t cv[8], const uint8_t block[64], uint8_t block_len,
                             uint64_t counter, uint8_t flags, uint8_t out[64]);
/* Hashes n inputs, input i at in + i * stride made of `blocks` full blocks,
 * each from chaining value key; input i uses counter + i (increment) or
 * counter, its first block gets flags | start, its last flags | end. Writes
 * input i's 32-byte chaining value at out + 32 * i. out may not overlap in. */
typedef void hash_many_fn(const uint8_t *in, size_t stride, size_t n, size_t blocks,
                          const uint32_t key[8], uint64_t counter, int increment, uint8_t flags,
                          uint8_t start, uint8_t end, uint8_t *out);

typedef struct {
    const char *name;
    compress_cv_fn *compress_cv;
    compress_xof_fn *compress_xof;
    hash_many_fn *hash_many;
} impl_ops;

/* Hashes inputs one at a time with a single-block compressor. */
static inline void hash_serial(compress_cv_fn *compress, const uint8_t *in, size_t stride, size_t n,
                               size_t blocks, const uint32_t key[8], uint64_t counter,
                               int increment, uint8_t flags, uint8_t start, uint8_t end,
                               uint8_t *out) {
    for (size_t i = 0; i < n; i++) {
        uint32_t cv[8];
        memcpy(cv, key, sizeof cv);
        const uint8_t *p = in + i * stride;
        for (size_t b = 0; b < blocks; b++) {
            uint8_t f = flags;
            if (b == 0)
                f |= start;
            if (b + 1 == blocks)
                f |= end;
            compress(cv, p + b * BLOCK_LEN, BLOCK_LEN, counter + (increment ? i : 0), f);
        }
        store_cv(out + 32 * i, cv);
    }
}

#if RN_B3_X86
/* The x86 code paths (blake3_x86.c); call them only where the CPU has
 * SSE4.1 (and AVX2 for the second). */
extern const impl_ops rn_b3_ops_sse41;
extern const impl_ops rn_b3_ops_avx2;
#endif

#endif
