/*
 * blake3.c — BLAKE3 (default hash mode, extendable output), written from the
 * BLAKE3 specification.
 *
 * Owns: the compression function (three code paths: portable scalar, SSE4.1,
 * AVX2; chosen once per process from the CPU's features, or forced by
 * rn_blake3_set_impl), the chunk state, the chaining-value stack that builds
 * the Merkle tree incrementally, and finalization / extended output.
 *
 * How it works:
 *  - compress(cv, block, block_len, counter, flags): 16-word state = cv, the
 *    first four IV words, counter (low, high), block_len, flags; 7 rounds of
 *    G over columns then diagonals, the message words permuted between rounds
 *    (SCHEDULE below is that permutation applied r times); the new chaining
 *    value is state[i] ^ state[i + 8], and the extended (XOF) output block
 *    appends state[i + 8] ^ cv[i].
 *  - A chunk (1024 bytes, index = counter) is compressed block by block,
 *    CHUNK_START on its first block and CHUNK_END on its last; the last block
 *    of the current chunk stays buffered until more input shows it is not the
 *    last, because the final block may also need ROOT.
 *  - Tree: the stack holds chaining values of complete subtrees, left to right.
 *    Before a CV whose first chunk is c is pushed, the stack is merged (top
 *    two entries replaced by their PARENT compression) until it has popcount(c)
 *    entries — the binary decomposition of chunks [0, c), all final because
 *    input follows them. Merging is lazy because the topmost parent must
 *    carry ROOT, known only at finalization: whenever an update leaves bytes
 *    in the current chunk the stack is merged for it, and finalization folds
 *    the stack from the top onto the last chunk's output (or, if the input
 *    ended exactly on a subtree pushed as a pair, onto that pair's parent).
 *  - Bulk: when an update holds more than a chunk of input at a chunk
 *    boundary, it takes the largest power-of-two run of whole chunks that is
 *    aligned to the chunk counter (so it is a subtree of the final tree) and
 *    hashes it wide: up to WIDE_CHUNKS chunks at a time in parallel
 *    (hash_many: 8 lanes with AVX2, 4 with SSE4.1), then their parents level by
 *    level in parallel, down to the subtree root's two children, which are
 *    pushed as two entries (the subtree may be the whole input, so its own
 *    root is not compressed yet). Larger subtrees recurse on their halves.
 *    Memory stays fixed: a 3 KiB scratch on the C stack, recursion depth below
 *    54.
 */
#include "util/blake3.h"
#include "util/text.h"

#include <assert.h>
#include <stdatomic.h>
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

/* ------------------------------------------------------------------------ */
/* Portable scalar path                                                      */

static inline uint32_t rotr32(uint32_t w, unsigned c) {
    return (w >> c) | (w << (32 - c));
}

static inline void g(uint32_t v[16], int a, int b, int c, int d, uint32_t x, uint32_t y) {
    v[a] = v[a] + v[b] + x;
    v[d] = rotr32(v[d] ^ v[a], 16);
    v[c] = v[c] + v[d];
    v[b] = rotr32(v[b] ^ v[c], 12);
    v[a] = v[a] + v[b] + y;
    v[d] = rotr32(v[d] ^ v[a], 8);
    v[c] = v[c] + v[d];
    v[b] = rotr32(v[b] ^ v[c], 7);
}

/* The 7 rounds; leaves the 16-word state in v. */
static void compress_state(uint32_t v[16], const uint32_t cv[8], const uint8_t block[64],
                           uint8_t block_len, uint64_t counter, uint8_t flags) {
    uint32_t m[16];
#pragma GCC unroll 16
    for (int i = 0; i < 16; i++)
        m[i] = load32(block + 4 * i);
#pragma GCC unroll 16
    for (int i = 0; i < 8; i++)
        v[i] = cv[i];
#pragma GCC unroll 16
    for (int i = 0; i < 4; i++)
        v[8 + i] = IV[i];
    v[12] = (uint32_t)counter;
    v[13] = (uint32_t)(counter >> 32);
    v[14] = block_len;
    v[15] = flags;
#pragma GCC unroll 7
    for (int r = 0; r < 7; r++) {
        const uint8_t *s = SCHEDULE[r];
        g(v, 0, 4, 8, 12, m[s[0]], m[s[1]]);
        g(v, 1, 5, 9, 13, m[s[2]], m[s[3]]);
        g(v, 2, 6, 10, 14, m[s[4]], m[s[5]]);
        g(v, 3, 7, 11, 15, m[s[6]], m[s[7]]);
        g(v, 0, 5, 10, 15, m[s[8]], m[s[9]]);
        g(v, 1, 6, 11, 12, m[s[10]], m[s[11]]);
        g(v, 2, 7, 8, 13, m[s[12]], m[s[13]]);
        g(v, 3, 4, 9, 14, m[s[14]], m[s[15]]);
    }
}

static void portable_compress_cv(uint32_t cv[8], const uint8_t block[64], uint8_t block_len,
                                 uint64_t counter, uint8_t flags) {
    uint32_t v[16];
    compress_state(v, cv, block, block_len, counter, flags);
#pragma GCC unroll 16
    for (int i = 0; i < 8; i++)
        cv[i] = v[i] ^ v[i + 8];
}

static void portable_compress_xof(const uint32_t cv[8], const uint8_t block[64], uint8_t block_len,
                                  uint64_t counter, uint8_t flags, uint8_t out[64]) {
    uint32_t v[16];
    compress_state(v, cv, block, block_len, counter, flags);
#pragma GCC unroll 16
    for (int i = 0; i < 8; i++) {
        store32(out + 4 * i, v[i] ^ v[i + 8]);
        store32(out + 32 + 4 * i, v[i + 8] ^ cv[i]);
    }
}

static void portable_hash_many(const uint8_t *in, size_t stride, size_t n, size_t blocks,
                               const uint32_t key[8], uint64_t counter, int increment,
                               uint8_t flags, uint8_t start, uint8_t end, uint8_t *out) {
    hash_serial(portable_compress_cv, in, stride, n, blocks, key, counter, increment, flags, start,
                end, out);
}

static const impl_ops OPS_PORTABLE = {"portable", portable_compress_cv, portable_compress_xof,
                                      portable_hash_many};

#if RN_B3_X86
/* ------------------------------------------------------------------------ */
/* SSE4.1: one block with the state as four rows, and 4 inputs in parallel   */

/* Lanes (v[a], v[b], v[c], v[d]) of a 4 x 32-bit vector. */
#define LANES(v, a, b, c, d) _mm_shuffle_epi32((v), _MM_SHUFFLE(d, c, b, a))

/* Lanes from y where mask has a bit, else from x (mask: immediate). */
#define blend32(x, y, mask)                                                                        \
    _mm_castps_si128(_mm_blend_ps(_mm_castsi128_ps(x), _mm_castsi128_ps(y), (mask)))

TGT_SSE41 static inline __m128i rot16_4(__m128i x) {
    return _mm_shuffle_epi8(x, _mm_setr_epi8(2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13));
}

TGT_SSE41 static inline __m128i rot8_4(__m128i x) {
    return _mm_shuffle_epi8(x, _mm_setr_epi8(1, 2, 3, 0, 5, 6, 7, 4, 9, 10, 11, 8, 13, 14, 15, 12));
}

TGT_SSE41 static inline __m128i rot12_4(__m128i x) {
    return _mm_or_si128(_mm_srli_epi32(x, 12), _mm_slli_epi32(x, 20));
}

TGT_SSE41 static inline __m128i rot7_4(__m128i x) {
    return _mm_or_si128(_mm_srli_epi32(x, 7), _mm_slli_epi32(x, 25));
}

/* G on the four columns (or, after diagonalizing, diagonals) at once. */
TGT_SSE41 static inline void g_rows(__m128i *a, __m128i *b, __m128i *c, __m128i *d, __m128i x,
                                    __m128i y) {
    *a = _mm_add_epi32(_mm_add_epi32(*a, x), *b);
    *d = rot16_4(_mm_xor_si128(*d, *a));
    *c = _mm_add_epi32(*c, *d);
    *b = rot12_4(_mm_xor_si128(*b, *c));
    *a = _mm_add_epi32(_mm_add_epi32(*a, y), *b);
    *d = rot8_4(_mm_xor_si128(*d, *a));
    *c = _mm_add_epi32(*c, *d);
    *b = rot7_4(_mm_xor_si128(*b, *c));
}

/* Rows after the 7 rounds. The message is kept as X = words at positions
 * 0,2,4,6 (first G inputs of the column step), Y = 1,3,5,7, Z = 8,10,12,14,
 * W = 9,11,13,15, and permuted in registers between rounds. */
TGT_SSE41 static inline void sse41_rounds(__m128i row[4], const uint32_t cv[8],
                                          const uint8_t block[64], uint8_t block_len,
                                          uint64_t counter, uint8_t flags) {
    __m128i a = _mm_loadu_si128((const __m128i *)(const void *)cv);
    __m128i b = _mm_loadu_si128((const __m128i *)(const void *)(cv + 4));
    __m128i c = _mm_setr_epi32((int)IV[0], (int)IV[1], (int)IV[2], (int)IV[3]);
    __m128i d = _mm_setr_epi32((int)(uint32_t)counter, (int)(uint32_t)(counter >> 32),
                               (int)block_len, (int)flags);
    __m128 m0 = _mm_loadu_ps((const float *)(const void *)block);
    __m128 m1 = _mm_loadu_ps((const float *)(const void *)(block + 16));
    __m128 m2 = _mm_loadu_ps((const float *)(const void *)(block + 32));
    __m128 m3 = _mm_loadu_ps((const float *)(const void *)(block + 48));
    __m128i x = _mm_castps_si128(_mm_shuffle_ps(m0, m1, _MM_SHUFFLE(2, 0, 2, 0)));
    __m128i y = _mm_castps_si128(_mm_shuffle_ps(m0, m1, _MM_SHUFFLE(3, 1, 3, 1)));
    __m128i z = _mm_castps_si128(_mm_shuffle_ps(m2, m3, _MM_SHUFFLE(2, 0, 2, 0)));
    __m128i w = _mm_castps_si128(_mm_shuffle_ps(m2, m3, _MM_SHUFFLE(3, 1, 3, 1)));
#pragma GCC unroll 7
    for (int r = 0; r < 7; r++) {
        g_rows(&a, &b, &c, &d, x, y);
        b = LANES(b, 1, 2, 3, 0); /* diagonals into columns */
        c = LANES(c, 2, 3, 0, 1);
        d = LANES(d, 3, 0, 1, 2);
        g_rows(&a, &b, &c, &d, z, w);
        b = LANES(b, 3, 0, 1, 2);
        c = LANES(c, 2, 3, 0, 1);
        d = LANES(d, 1, 2, 3, 0);
        if (r == 6)
            break;
        /* Next round's words by position: new[i] = old[P[i]] gives
         * X' = (X1, Y1, Y3, X2), Y' = (X3, Z1, X0, W2),
         * Z' = (Y0, Z2, W0, W3), W' = (W1, Y2, Z3, Z0). */
        __m128i nx = blend32(LANES(x, 1, 1, 2, 2), LANES(y, 1, 1, 3, 3), 0x6);
        __m128i ny = blend32(blend32(LANES(x, 3, 3, 0, 0), LANES(z, 1, 1, 1, 1), 0x2),
                             LANES(w, 2, 2, 2, 2), 0x8);
        __m128i nz = blend32(blend32(LANES(w, 0, 0, 0, 3), LANES(y, 0, 0, 0, 0), 0x1),
                             LANES(z, 2, 2, 2, 2), 0x2);
        __m128i nw = blend32(blend32(LANES(z, 3, 3, 3, 0), LANES(w, 1, 1, 1, 1), 0x1),
                             LANES(y, 2, 2, 2, 2), 0x2);
        x = nx;
        y = ny;
        z = nz;
        w = nw;
    }
    row[0] = a;
    row[1] = b;
    row[2] = c;
    row[3] = d;
}

TGT_SSE41 static void sse41_compress_cv(uint32_t cv[8], const uint8_t block[64], uint8_t block_len,
                                        uint64_t counter, uint8_t flags) {
    __m128i row[4];
    sse41_rounds(row, cv, block, block_len, counter, flags);
    _mm_storeu_si128((__m128i *)(void *)cv, _mm_xor_si128(row[0], row[2]));
    _mm_storeu_si128((__m128i *)(void *)(cv + 4), _mm_xor_si128(row[1], row[3]));
}

TGT_SSE41 static void sse41_compress_xof(const uint32_t cv[8], const uint8_t block[64],
                                         uint8_t block_len, uint64_t counter, uint8_t flags,
                                         uint8_t out[64]) {
    __m128i row[4];
    sse41_rounds(row, cv, block, block_len, counter, flags);
    __m128i c0 = _mm_loadu_si128((const __m128i *)(const void *)cv);
    __m128i c1 = _mm_loadu_si128((const __m128i *)(const void *)(cv + 4));
    _mm_storeu_si128((__m128i *)(void *)out, _mm_xor_si128(row[0], row[2]));
    _mm_storeu_si128((__m128i *)(void *)(out + 16), _mm_xor_si128(row[1], row[3]));
    _mm_storeu_si128((__m128i *)(void *)(out + 32), _mm_xor_si128(row[2], c0));
    _mm_storeu_si128((__m128i *)(void *)(out + 48), _mm_xor_si128(row[3], c1));
}

/* One G over 4 (or 8) independent states held word-wise in vectors. */
#define G_WIDE(add, xr, r16, r12, r8, r7, v, a, b, c, d, x, y)                                     \
    do {                                                                                           \
        v[a] = add(add(v[a], v[b]), x);                                                            \
        v[d] = r16(xr(v[d], v[a]));                                                                \
        v[c] = add(v[c], v[d]);                                                                    \
        v[b] = r12(xr(v[b], v[c]));                                                                \
        v[a] = add(add(v[a], v[b]), y);                                                            \
        v[d] = r8(xr(v[d], v[a]));                                                                 \
        v[c] = add(v[c], v[d]);                                                                    \
        v[b] = r7(xr(v[b], v[c]));                                                                 \
    } while (0)

#define G4(v, a, b, c, d, x, y)                                                                    \
    G_WIDE(_mm_add_epi32, _mm_xor_si128, rot16_4, rot12_4, rot8_4, rot7_4, v, a, b, c, d, x, y)

TGT_SSE41 static inline void round4(__m128i v[16], const __m128i m[16], int r) {
    const uint8_t *s = SCHEDULE[r];
    G4(v, 0, 4, 8, 12, m[s[0]], m[s[1]]);
    G4(v, 1, 5, 9, 13, m[s[2]], m[s[3]]);
    G4(v, 2, 6, 10, 14, m[s[4]], m[s[5]]);
    G4(v, 3, 7, 11, 15, m[s[6]], m[s[7]]);
    G4(v, 0, 5, 10, 15, m[s[8]], m[s[9]]);
    G4(v, 1, 6, 11, 12, m[s[10]], m[s[11]]);
    G4(v, 2, 7, 8, 13, m[s[12]], m[s[13]]);
    G4(v, 3, 4, 9, 14, m[s[14]], m[s[15]]);
}

/* In place: rows r[0..3] (lane j of r[i] = element (i, j)) become columns. */
TGT_SSE41 static inline void transpose4(__m128i r[4]) {
    __m128i t0 = _mm_unpacklo_epi32(r[0], r[1]);
    __m128i t1 = _mm_unpackhi_epi32(r[0], r[1]);
    __m128i t2 = _mm_unpacklo_epi32(r[2], r[3]);
    __m128i t3 = _mm_unpackhi_epi32(r[2], r[3]);
    r[0] = _mm_unpacklo_epi64(t0, t2);
    r[1] = _mm_unpackhi_epi64(t0, t2);
    r[2] = _mm_unpacklo_epi64(t1, t3);
    r[3] = _mm_unpackhi_epi64(t1, t3);
}

/* Four inputs in parallel: lane i of each state vector belongs to input i. */
TGT_SSE41 static void sse41_hash4(const uint8_t *in, size_t stride, size_t blocks,
                                  const uint32_t key[8], uint64_t counter, int increment,
                                  uint8_t flags, uint8_t start, uint8_t end, uint8_t *out) {
    __m128i h[8];
#pragma GCC unroll 16
    for (int i = 0; i < 8; i++)
        h[i] = _mm_set1_epi32((int)key[i]);
    uint32_t lo[4], hi[4];
#pragma GCC unroll 16
    for (int i = 0; i < 4; i++) {
        uint64_t c = counter + (increment ? (uint64_t)i : 0);
        lo[i] = (uint32_t)c;
        hi[i] = (uint32_t)(c >> 32);
    }
    const __m128i ctr_lo = _mm_loadu_si128((const __m128i *)(const void *)lo);
    const __m128i ctr_hi = _mm_loadu_si128((const __m128i *)(const void *)hi);
    for (size_t b = 0; b < blocks; b++) {
        uint8_t f = flags;
        if (b == 0)
            f |= start;
        if (b + 1 == blocks)
            f |= end;
        __m128i m[16];
#pragma GCC unroll 16
        for (int q = 0; q < 4; q++) {
#pragma GCC unroll 16
            for (int i = 0; i < 4; i++)
                m[4 * q + i] = _mm_loadu_si128(
                    (const __m128i *)(const void *)(in + i * stride + b * BLOCK_LEN + 16 * q));
            transpose4(m + 4 * q);
        }
        __m128i v[16];
#pragma GCC unroll 16
        for (int i = 0; i < 8; i++)
            v[i] = h[i];
#pragma GCC unroll 16
        for (int i = 0; i < 4; i++)
            v[8 + i] = _mm_set1_epi32((int)IV[i]);
        v[12] = ctr_lo;
        v[13] = ctr_hi;
        v[14] = _mm_set1_epi32(BLOCK_LEN);
        v[15] = _mm_set1_epi32(f);
#pragma GCC unroll 7
        for (int r = 0; r < 7; r++)
            round4(v, m, r);
#pragma GCC unroll 16
        for (int i = 0; i < 8; i++)
            h[i] = _mm_xor_si128(v[i], v[i + 8]);
    }
    transpose4(h);
    transpose4(h + 4);
#pragma GCC unroll 16
    for (int i = 0; i < 4; i++) {
        _mm_storeu_si128((__m128i *)(void *)(out + 32 * i), h[i]);
        _mm_storeu_si128((__m128i *)(void *)(out + 32 * i + 16), h[4 + i]);
    }
}

static void sse41_hash_many(const uint8_t *in, size_t stride, size_t n, size_t blocks,
                            const uint32_t key[8], uint64_t counter, int increment, uint8_t flags,
                            uint8_t start, uint8_t end, uint8_t *out) {
    while (n >= 4) {
        sse41_hash4(in, stride, blocks, key, counter, increment, flags, start, end, out);
        in += 4 * stride;
        out += 4 * 32;
        counter += increment ? 4 : 0;
        n -= 4;
    }
    hash_serial(sse41_compress_cv, in, stride, n, blocks, key, counter, increment, flags, start,
                end, out);
}

static const impl_ops OPS_SSE41 = {"sse41", sse41_compress_cv, sse41_compress_xof, sse41_hash_many};

/* ------------------------------------------------------------------------ */
/* AVX2: 8 inputs in parallel                                                */

TGT_AVX2 static inline __m256i rot16_8(__m256i x) {
    return _mm256_shuffle_epi8(x, _mm256_setr_epi8(2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12,
                                                   13, 2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15,
                                                   12, 13));
}

TGT_AVX2 static inline __m256i rot8_8(__m256i x) {
    return _mm256_shuffle_epi8(x, _mm256_setr_epi8(1, 2, 3, 0, 5, 6, 7, 4, 9, 10, 11, 8, 13, 14, 15,
                                                   12, 1, 2, 3, 0, 5, 6, 7, 4, 9, 10, 11, 8, 13, 14,
                                                   15, 12));
}

TGT_AVX2 static inline __m256i rot12_8(__m256i x) {
    return _mm256_or_si256(_mm256_srli_epi32(x, 12), _mm256_slli_epi32(x, 20));
}

TGT_AVX2 static inline __m256i rot7_8(__m256i x) {
    return _mm256_or_si256(_mm256_srli_epi32(x, 7), _mm256_slli_epi32(x, 25));
}

#define G8(v, a, b, c, d, x, y)                                                                    \
    G_WIDE(_mm256_add_epi32, _mm256_xor_si256, rot16_8, rot12_8, rot8_8, rot7_8, v, a, b, c, d, x, \
           y)

TGT_AVX2 static inline void round8(__m256i v[16], const __m256i m[16], int r) {
    const uint8_t *s = SCHEDULE[r];
    G8(v, 0, 4, 8, 12, m[s[0]], m[s[1]]);
    G8(v, 1, 5, 9, 13, m[s[2]], m[s[3]]);
    G8(v, 2, 6, 10, 14, m[s[4]], m[s[5]]);
    G8(v, 3, 7, 11, 15, m[s[6]], m[s[7]]);
    G8(v, 0, 5, 10, 15, m[s[8]], m[s[9]]);
    G8(v, 1, 6, 11, 12, m[s[10]], m[s[11]]);
    G8(v, 2, 7, 8, 13, m[s[12]], m[s[13]]);
    G8(v, 3, 4, 9, 14, m[s[14]], m[s[15]]);
}

/* In place 8 x 8 transpose of 32-bit elements: lane j of r[i] = element (i, j). */
TGT_AVX2 static inline void transpose8(__m256i r[8]) {
    __m256i t[8], u[8];
#pragma GCC unroll 16
    for (int i = 0; i < 4; i++) {
        t[2 * i] = _mm256_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm256_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
    }
    /* Per 128-bit half, t[0] = (r0[0], r1[0], r0[1], r1[1]), t[1] = (r0[2], r1[2], r0[3], r1[3]),
     * t[2], t[3] the same for r2, r3, ... */
#pragma GCC unroll 16
    for (int k = 0; k < 2; k++) {
        u[4 * k + 0] = _mm256_unpacklo_epi64(t[4 * k + 0], t[4 * k + 2]); /* column 0 | 4 */
        u[4 * k + 1] = _mm256_unpackhi_epi64(t[4 * k + 0], t[4 * k + 2]); /* column 1 | 5 */
        u[4 * k + 2] = _mm256_unpacklo_epi64(t[4 * k + 1], t[4 * k + 3]); /* column 2 | 6 */
        u[4 * k + 3] = _mm256_unpackhi_epi64(t[4 * k + 1], t[4 * k + 3]); /* column 3 | 7 */
    }
#pragma GCC unroll 16
    for (int j = 0; j < 4; j++) {
        r[j] = _mm256_permute2x128_si256(u[j], u[4 + j], 0x20);
        r[4 + j] = _mm256_permute2x128_si256(u[j], u[4 + j], 0x31);
    }
}

TGT_AVX2 static void avx2_hash8(const uint8_t *in, size_t stride, size_t blocks,
                                const uint32_t key[8], uint64_t counter, int increment,
                                uint8_t flags, uint8_t start, uint8_t end, uint8_t *out) {
    __m256i h[8];
#pragma GCC unroll 16
    for (int i = 0; i < 8; i++)
        h[i] = _mm256_set1_epi32((int)key[i]);
    uint32_t lo[8], hi[8];
#pragma GCC unroll 16
    for (int i = 0; i < 8; i++) {
        uint64_t c = counter + (increment ? (uint64_t)i : 0);
        lo[i] = (uint32_t)c;
        hi[i] = (uint32_t)(c >> 32);
    }
    const __m256i ctr_lo = _mm256_loadu_si256((const __m256i *)(const void *)lo);
    const __m256i ctr_hi = _mm256_loadu_si256((const __m256i *)(const void *)hi);
    for (size_t b = 0; b < blocks; b++) {
        uint8_t f = flags;
        if (b == 0)
            f |= start;
        if (b + 1 == blocks)
            f |= end;
        __m256i m[16];
#pragma GCC unroll 16
        for (int half = 0; half < 2; half++) {
#pragma GCC unroll 16
            for (int i = 0; i < 8; i++)
                m[8 * half + i] = _mm256_loadu_si256(
                    (const __m256i *)(const void *)(in + i * stride + b * BLOCK_LEN + 32 * half));
            transpose8(m + 8 * half);
        }
        __m256i v[16];
#pragma GCC unroll 16
        for (int i = 0; i < 8; i++)
            v[i] = h[i];
#pragma GCC unroll 16
        for (int i = 0; i < 4; i++)
            v[8 + i] = _mm256_set1_epi32((int)IV[i]);
        v[12] = ctr_lo;
        v[13] = ctr_hi;
        v[14] = _mm256_set1_epi32(BLOCK_LEN);
        v[15] = _mm256_set1_epi32(f);
#pragma GCC unroll 7
        for (int r = 0; r < 7; r++)
            round8(v, m, r);
#pragma GCC unroll 16
        for (int i = 0; i < 8; i++)
            h[i] = _mm256_xor_si256(v[i], v[i + 8]);
    }
    transpose8(h);
#pragma GCC unroll 16
    for (int i = 0; i < 8; i++)
        _mm256_storeu_si256((__m256i *)(void *)(out + 32 * i), h[i]);
}

static void avx2_hash_many(const uint8_t *in, size_t stride, size_t n, size_t blocks,
                           const uint32_t key[8], uint64_t counter, int increment, uint8_t flags,
                           uint8_t start, uint8_t end, uint8_t *out) {
    while (n >= 8) {
        avx2_hash8(in, stride, blocks, key, counter, increment, flags, start, end, out);
        in += 8 * stride;
        out += 8 * 32;
        counter += increment ? 8 : 0;
        n -= 8;
    }
    sse41_hash_many(in, stride, n, blocks, key, counter, increment, flags, start, end, out);
}

static const impl_ops OPS_AVX2 = {"avx2", sse41_compress_cv, sse41_compress_xof, avx2_hash_many};
#endif /* RN_B3_X86 */

/* ------------------------------------------------------------------------ */
/* Dispatch                                                                  */

static atomic_int forced_impl;   /* rn_blake3_impl; AUTO unless a test forced one */
static atomic_int detected_impl; /* cached automatic choice; 0 = not yet detected */

static int cpu_supports(rn_blake3_impl impl) {
    switch (impl) {
    case RN_BLAKE3_AUTO:
    case RN_BLAKE3_PORTABLE:
        return 1;
#if RN_B3_X86
    case RN_BLAKE3_SSE41:
        return __builtin_cpu_supports("sse4.1");
    case RN_BLAKE3_AVX2:
        return __builtin_cpu_supports("sse4.1") && __builtin_cpu_supports("avx2");
#endif
    default:
        return 0;
    }
}

static const impl_ops *current_ops(void) {
    int impl = atomic_load_explicit(&forced_impl, memory_order_relaxed);
    if (impl == RN_BLAKE3_AUTO) {
        impl = atomic_load_explicit(&detected_impl, memory_order_relaxed);
        if (impl == 0) {
            impl = cpu_supports(RN_BLAKE3_AVX2)    ? RN_BLAKE3_AVX2
                   : cpu_supports(RN_BLAKE3_SSE41) ? RN_BLAKE3_SSE41
                                                   : RN_BLAKE3_PORTABLE;
            atomic_store_explicit(&detected_impl, impl, memory_order_relaxed);
        }
    }
    switch (impl) {
#if RN_B3_X86
    case RN_BLAKE3_AVX2:
        return &OPS_AVX2;
    case RN_BLAKE3_SSE41:
        return &OPS_SSE41;
#endif
    default:
        return &OPS_PORTABLE;
    }
}

int rn_blake3_set_impl(rn_blake3_impl impl) {
    if (!cpu_supports(impl))
        return -1;
    atomic_store_explicit(&forced_impl, (int)impl, memory_order_relaxed);
    return 0;
}

const char *rn_blake3_impl_name(void) {
    return current_ops()->name;
}

/* ------------------------------------------------------------------------ */
/* Tree                                                                      */

/* What the next compression of a node would be; its chaining value or, for
 * the root, its output bytes. */
typedef struct {
    uint32_t cv[8];
    uint8_t block[64];
    uint64_t counter;
    uint8_t block_len;
    uint8_t flags;
} node_output;

static void output_cv(const impl_ops *ops, const node_output *o, uint8_t out[32]) {
    uint32_t cv[8];
    memcpy(cv, o->cv, sizeof cv);
    ops->compress_cv(cv, o->block, o->block_len, o->counter, o->flags);
    store_cv(out, cv);
}

/* A parent node whose block is the two children's CVs (64 bytes at lr). */
static node_output parent_output(const uint8_t lr[64]) {
    node_output o;
    memcpy(o.cv, IV, sizeof o.cv);
    memcpy(o.block, lr, 64);
    o.counter = 0;
    o.block_len = 64;
    o.flags = PARENT;
    return o;
}

static size_t chunk_len(const rn_blake3 *h) {
    return (size_t)h->blocks_compressed * BLOCK_LEN + h->buf_len;
}

static node_output chunk_output(const rn_blake3 *h) {
    node_output o;
    memcpy(o.cv, h->cv, sizeof o.cv);
    memset(o.block, 0, sizeof o.block);
    memcpy(o.block, h->buf, h->buf_len);
    o.counter = h->chunk_counter;
    o.block_len = h->buf_len;
    o.flags = CHUNK_END | (h->blocks_compressed == 0 ? CHUNK_START : 0);
    return o;
}

static void chunk_reset(rn_blake3 *h, uint64_t counter) {
    memcpy(h->cv, IV, sizeof h->cv);
    h->chunk_counter = counter;
    h->buf_len = 0;
    h->blocks_compressed = 0;
}

/* Appends len bytes to the current chunk; the caller keeps the chunk within
 * CHUNK_LEN. A full block is compressed only once more bytes follow it. */
static void chunk_update(const impl_ops *ops, rn_blake3 *h, const uint8_t *in, size_t len) {
    while (len > 0) {
        if (h->buf_len == BLOCK_LEN) {
            ops->compress_cv(h->cv, h->buf, BLOCK_LEN, h->chunk_counter,
                             h->blocks_compressed == 0 ? CHUNK_START : 0);
            h->blocks_compressed++;
            h->buf_len = 0;
        }
        if (h->buf_len == 0) {
            while (len > BLOCK_LEN) {
                ops->compress_cv(h->cv, in, BLOCK_LEN, h->chunk_counter,
                                 h->blocks_compressed == 0 ? CHUNK_START : 0);
                h->blocks_compressed++;
                in += BLOCK_LEN;
                len -= BLOCK_LEN;
            }
        }
        size_t take = BLOCK_LEN - h->buf_len;
        if (take > len)
            take = len;
        memcpy(h->buf + h->buf_len, in, take);
        h->buf_len = (uint8_t)(h->buf_len + take);
        in += take;
        len -= take;
    }
}

static unsigned popcount64(uint64_t x) {
    unsigned n = 0;
    for (; x; x &= x - 1)
        n++;
    return n;
}

/* Merges the top of the stack until it holds popcount(total) entries: the
 * complete subtrees of chunks [0, total), when more input follows them. */
static void merge_stack(const impl_ops *ops, rn_blake3 *h, uint64_t total) {
    unsigned want = popcount64(total);
    while (h->cv_stack_len > want) {
        uint8_t *lr = h->cv_stack + (size_t)(h->cv_stack_len - 2) * 32;
        node_output o = parent_output(lr);
        output_cv(ops, &o, lr);
        h->cv_stack_len--;
    }
}

/* Pushes the CV of a complete subtree whose first chunk is `first`. Stack
 * depth: entries after merging are popcount(first) (+1 for this one, +1 more
 * for the second of a pair); as input is at most 2^64 - 1 bytes, chunk
 * indices stay below 2^54 and the count never exceeds 54. */
static void push_cv(const impl_ops *ops, rn_blake3 *h, const uint8_t cv[32], uint64_t first) {
    merge_stack(ops, h, first);
    assert(h->cv_stack_len < RN_BLAKE3_MAX_DEPTH);
    memcpy(h->cv_stack + (size_t)h->cv_stack_len * 32, cv, 32);
    h->cv_stack_len++;
}

static void subtree_cv(const impl_ops *ops, const uint8_t *in, size_t n, uint64_t counter,
                       uint8_t out[32]);

/* The two children CVs of the subtree of n chunks (a power of two, 2 <= n <=
 * WIDE_CHUNKS) at in: all chunks in parallel, then each level of parents. */
static void subtree_pair_wide(const impl_ops *ops, const uint8_t *in, size_t n, uint64_t counter,
                              uint8_t pair[64]) {
    uint8_t a[WIDE_CHUNKS * 32], b[WIDE_CHUNKS / 2 * 32];
    ops->hash_many(in, CHUNK_LEN, n, BLOCKS_PER_CHUNK, IV, counter, 1, 0, CHUNK_START, CHUNK_END,
                   a);
    uint8_t *cur = a, *next = b;
    for (; n > 2; n /= 2) {
        ops->hash_many(cur, 64, n / 2, 1, IV, 0, 0, PARENT, 0, 0, next);
        uint8_t *t = cur;
        cur = next;
        next = t;
    }
    memcpy(pair, cur, 64);
}

/* The two children CVs of the subtree of n chunks (a power of two >= 2) at in,
 * whose first chunk has index counter. */
static void subtree_pair(const impl_ops *ops, const uint8_t *in, size_t n, uint64_t counter,
                         uint8_t pair[64]) {
    if (n <= WIDE_CHUNKS) {
        subtree_pair_wide(ops, in, n, counter, pair);
        return;
    }
    size_t half = n / 2;
    subtree_cv(ops, in, half, counter, pair);
    subtree_cv(ops, in + half * CHUNK_LEN, half, counter + half, pair + 32);
}

/* The (non-root) CV of the subtree of n chunks (a power of two) at in. */
static void subtree_cv(const impl_ops *ops, const uint8_t *in, size_t n, uint64_t counter,
                       uint8_t out[32]) {
    if (n == 1) {
        ops->hash_many(in, CHUNK_LEN, 1, BLOCKS_PER_CHUNK, IV, counter, 1, 0, CHUNK_START,
                       CHUNK_END, out);
        return;
    }
    uint8_t pair[64];
    subtree_pair(ops, in, n, counter, pair);
    ops->hash_many(pair, 64, 1, 1, IV, 0, 0, PARENT, 0, 0, out);
}

/* ------------------------------------------------------------------------ */
/* API                                                                       */

void rn_blake3_init(rn_blake3 *h) {
    chunk_reset(h, 0);
    memset(h->buf, 0, sizeof h->buf);
    h->cv_stack_len = 0;
}

void rn_blake3_update(rn_blake3 *h, const void *data, size_t len) {
    if (len == 0)
        return;
    const impl_ops *ops = current_ops();
    const uint8_t *in = data;

    /* Finish a partly filled chunk; push it only if input follows it. */
    if (chunk_len(h) > 0) {
        size_t take = CHUNK_LEN - chunk_len(h);
        if (take > len)
            take = len;
        chunk_update(ops, h, in, take);
        in += take;
        len -= take;
        if (len == 0)
            return;
        node_output o = chunk_output(h);
        uint8_t cv[32];
        output_cv(ops, &o, cv);
        push_cv(ops, h, cv, h->chunk_counter);
        chunk_reset(h, h->chunk_counter + 1);
    }

    /* At a chunk boundary: whole aligned subtrees, hashed wide, while more
     * than one chunk remains (the last chunk may be the root). */
    while (len > CHUNK_LEN) {
        size_t n = 1;
        while (n <= len / CHUNK_LEN / 2)
            n *= 2;
        while (h->chunk_counter & (n - 1))
            n /= 2;
        if (n == 1) {
            uint8_t cv[32];
            subtree_cv(ops, in, 1, h->chunk_counter, cv);
            push_cv(ops, h, cv, h->chunk_counter);
        } else {
            uint8_t pair[64];
            subtree_pair(ops, in, n, h->chunk_counter, pair);
            push_cv(ops, h, pair, h->chunk_counter);
            push_cv(ops, h, pair + 32, h->chunk_counter + n / 2);
        }
        h->chunk_counter += n;
        in += n * CHUNK_LEN;
        len -= n * CHUNK_LEN;
    }

    /* The rest starts a new chunk; everything before it is now final. */
    if (len > 0) {
        chunk_update(ops, h, in, len);
        merge_stack(ops, h, h->chunk_counter);
    }
}

void rn_blake3_final_xof(const rn_blake3 *h, uint8_t *out, size_t out_len) {
    const impl_ops *ops = current_ops();
    size_t i = h->cv_stack_len;
    node_output o;
    if (chunk_len(h) > 0 || i == 0) {
        o = chunk_output(h); /* the last chunk (the root if it is the only one) */
    } else {
        /* Input ended on a subtree pushed as a pair: its parent comes first. */
        assert(i >= 2);
        i -= 2;
        o = parent_output(h->cv_stack + i * 32);
    }
    while (i > 0) {
        i--;
        uint8_t lr[64];
        memcpy(lr, h->cv_stack + i * 32, 32);
        output_cv(ops, &o, lr + 32);
        o = parent_output(lr);
    }
    /* Root: output block k is the root compression with counter k. */
    uint8_t block[64];
    for (uint64_t k = 0; out_len > 0; k++) {
        ops->compress_xof(o.cv, o.block, o.block_len, k, o.flags | ROOT, block);
        size_t take = out_len < 64 ? out_len : 64;
        memcpy(out, block, take);
        out += take;
        out_len -= take;
    }
}

void rn_blake3_final(const rn_blake3 *h, uint8_t out[32]) {
    rn_blake3_final_xof(h, out, 32);
}

void rn_blake3_hash(const void *data, size_t len, uint8_t out[32]) {
    rn_blake3 h;
    rn_blake3_init(&h);
    rn_blake3_update(&h, data, len);
    rn_blake3_final(&h, out);
}

void rn_blake3_hex(const uint8_t digest[32], char out[65]) {
    rn_hex_encode(digest, 32, out);
}
