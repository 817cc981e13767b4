/*
 * blake3.h — BLAKE3 hashing (default hash mode), incremental, no heap.
 *
 * Owns: the BLAKE3 hash function for Runnel (content digests of bodies that
 * may be large and arrive in pieces). Implemented from the BLAKE3
 * specification: the input is split into 1024-byte chunks of 64-byte blocks;
 * each chunk is compressed block by block (7-round compression function,
 * CHUNK_START / CHUNK_END flags) to a 32-byte chaining value; chaining values
 * are combined pairwise by PARENT compressions into a left-filled binary
 * tree whose root compression carries the ROOT flag. Only the default (unkeyed)
 * mode is provided; the output may be extended (XOF) with
 * rn_blake3_final_xof.
 *
 * Streaming: the hasher keeps the current chunk (at most one 64-byte block
 * buffered) and a stack of chaining values of completed subtrees — at most 54
 * entries for any input of up to 2^64 - 1 bytes — so memory is fixed
 * (sizeof(rn_blake3) < 2 KiB) whatever the input length and however it is
 * split across updates.
 *
 * Speed: large updates hash many chunks (and then their parents) in parallel
 * with SIMD (AVX2 8-way or SSE4.1 4-way, chosen at run time from the CPU's
 * features), with a portable scalar fallback that computes the same function.
 */
#ifndef RN_BLAKE3_H
#define RN_BLAKE3_H

#include <stddef.h>
#include <stdint.h>

#define RN_BLAKE3_OUT_LEN 32
#define RN_BLAKE3_BLOCK_LEN 64
#define RN_BLAKE3_CHUNK_LEN 1024
#define RN_BLAKE3_MAX_DEPTH 54 /* chaining-value stack entries (2^64 bytes / 1 KiB chunks) */

/* Incremental hasher; plain value, no heap, no cleanup. Copying it forks the
 * hash state. Fields are private to blake3.c. */
typedef struct {
    uint32_t cv[8];                             /* chaining value of the current chunk so far */
    uint64_t chunk_counter;                     /* index of the current chunk in the input */
    uint8_t buf[64];                            /* pending block of the current chunk */
    uint8_t buf_len;                            /* bytes in buf (0..64) */
    uint8_t blocks_compressed;                  /* blocks of the current chunk already compressed */
    uint8_t cv_stack_len;                       /* entries in cv_stack */
    uint8_t cv_stack[RN_BLAKE3_MAX_DEPTH * 32]; /* subtree CVs, little-endian */
} rn_blake3;

/* Prepares h for a new input (default hash mode). */
void rn_blake3_init(rn_blake3 *h);

/* Appends len bytes at data (data may be NULL when len is 0). Any split of the
 * input into updates gives the same result as one update with all of it.
 * Speed: whole chunks that an update holds are hashed in parallel (SIMD), so
 * pieces of several KiB or more run at full speed; bytes that complete a
 * partly filled chunk, and small pieces, go through the one-block compressor
 * (about a quarter of the AVX2 speed). */
void rn_blake3_update(rn_blake3 *h, const void *data, size_t len);

/* Writes the 32-byte digest of everything appended so far. Does not modify h:
 * more updates may follow, and a later final covers them too. */
void rn_blake3_final(const rn_blake3 *h, uint8_t out[32]);

/* Extended output: writes out_len bytes of the output stream (any length; the
 * first 32 bytes equal rn_blake3_final's digest). Does not modify h. */
void rn_blake3_final_xof(const rn_blake3 *h, uint8_t *out, size_t out_len);

/* One-shot: the 32-byte digest of len bytes at data. */
void rn_blake3_hash(const void *data, size_t len, uint8_t out[32]);

/* Writes digest as 64 lowercase hex digits plus a terminating NUL. */
void rn_blake3_hex(const uint8_t digest[32], char out[65]);

/* Code paths. All compute the same function; AUTO (the default) picks the
 * fastest the CPU supports. For tests and benchmarks. */
typedef enum {
    RN_BLAKE3_AUTO = 0,
    RN_BLAKE3_PORTABLE, /* scalar C */
    RN_BLAKE3_SSE41,    /* SSE4.1: 1-block and 4-way compression */
    RN_BLAKE3_AVX2,     /* AVX2 8-way chunk/parent compression, SSE4.1 for the rest */
} rn_blake3_impl;

/* Forces a code path process-wide (AUTO restores the automatic choice).
 * Returns 0, or -1 (and changes nothing) if this CPU or build lacks it. Not to
 * be called while other threads are hashing (they would see either path, and
 * both are correct, but the intent is test-only). */
int rn_blake3_set_impl(rn_blake3_impl impl);

/* The code path in use now: "portable", "sse41" or "avx2". */
const char *rn_blake3_impl_name(void);

#endif
