/*
 * blake3.c — BLAKE3 (default hash mode, extendable output), written from the
 * BLAKE3 specification.
 *
 * Owns: the compression function (three code paths: portable scalar here,
 * SSE4.1 and AVX2 in blake3_x86.c; chosen once per process from the CPU's
 * features, or forced by rn_blake3_set_impl), the chunk state, the chaining-value stack that builds
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
#include "util/blake3_impl.h"
#include "util/text.h"

#include <assert.h>
#include <stdatomic.h>
#include <string.h>

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
        return &rn_b3_ops_avx2;
    case RN_BLAKE3_SSE41:
        return &rn_b3_ops_sse41;
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
