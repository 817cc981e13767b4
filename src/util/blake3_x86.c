/*
 * blake3_x86.c — BLAKE3's SSE4.1 and AVX2 code paths (see blake3.c for the
 * algorithm and blake3_impl.h for the interface they fill): one block with
 * the state as four rows, 4 inputs in parallel with SSE4.1, 8 with AVX2.
 * Compiled on every x86 build; each function carries its target attribute,
 * and blake3.c calls them only where the CPU has the instructions.
 */
#include "util/blake3_impl.h"

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

const impl_ops rn_b3_ops_sse41 = {"sse41", sse41_compress_cv, sse41_compress_xof, sse41_hash_many};

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

const impl_ops rn_b3_ops_avx2 = {"avx2", sse41_compress_cv, sse41_compress_xof, avx2_hash_many};
#endif /* RN_B3_X86 */
