/*
 * wal_fixture.h - what the log's unit tests share (test_wal.c: writing,
 * test_wal_recovery.c: recovery): a temporary data directory and loop per
 * test, segment-file helpers, the on-disk layout rebuilt from its
 * description, deterministic payloads, recovery output, and writing
 * sessions.
 *
 * The layout used to forge and damage files is the one log/segment.h
 * documents: <dir>/wal/<20-digit>.log, a 40-byte header {magic, segment
 * number, previous segment's valid end, salt, crc}, then batches {32-byte
 * batch header {magic "RNB2", records, sequence number, bytes,
 * crc32c(salt || first 24 bytes)}, records {u32 len, u32 crc32c(len bytes ||
 * payload), payload}}, and <dir>/wal/HEAD with two slots naming the newest
 * segment; little-endian. The helpers that build these bytes are written
 * here from that description, not taken from the log's code.
 */
#ifndef RN_TEST_WAL_FIXTURE_H
#define RN_TEST_WAL_FIXTURE_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "log/wal.h"

#define HEADER 40
#define BATCH 32

/* ---- the fixture: a temporary directory and a loop ---- */

typedef struct {
    char dir[64];
    uv_loop_t loop;
} fx;

int setup(void **state);
int teardown(void **state);

/* ---- segment files ---- */

void seg_path(const fx *f, uint64_t n, char *out, size_t cap);
int seg_exists(const fx *f, uint64_t n);
uint64_t seg_size(const fx *f, uint64_t n);
size_t count_segments(const fx *f);
/* The whole file (caller frees). */
uint8_t *read_file(const char *path, size_t *len);
void append_bytes(const fx *f, uint64_t seg, const void *data, size_t len);
/* XORs the byte at off of segment seg with xor_mask. */
void poke_byte(const fx *f, uint64_t seg, uint64_t off, uint8_t xor_mask);
void truncate_segment(const fx *f, uint64_t seg, uint64_t len);

/* ---- the format, rebuilt from its description ---- */

/* The "previous segment's valid end" and salt fields of segment n's header. */
uint64_t header_prev_end(const fx *f, uint64_t n);
uint64_t seg_salt(const fx *f, uint64_t n);
void make_header(uint8_t h[HEADER], uint64_t seg, uint64_t prev_end, uint64_t salt);
/* One record frame {len, crc, payload} into out; returns its size. */
size_t make_frame(uint8_t *out, const uint8_t *payload, uint32_t len);
void make_batch_header(uint8_t h[BATCH], uint64_t salt, uint32_t records, uint64_t seq,
                       uint64_t bytes);

/* ---- payloads and recovery output ---- */

/* Payload i: deterministic bytes; its length varies, 0 and 300 KB among them. */
size_t payload_len(int i);
uint8_t *payload_make(int i, size_t *len);

/* Records replayed by a recovery (collect() is its replay callback). */
typedef struct {
    uint8_t **data;
    size_t *len;
    size_t n, cap;
} recs;

int collect(void *arg, const uint8_t *payload, size_t len);
void recs_free(recs *r);
/* Asserts that r holds exactly the payloads with the given ids, in order. */
void expect_payloads(const recs *r, const int *ids, size_t n);
void expect_range(const recs *r, int first, int count);
/* rn_wal_recover of f's directory from segment `from`, into r. */
int recover(fx *f, uint64_t from, recs *r, rn_wal_recovery *rec);

/* ---- writing sessions ---- */

typedef struct tracker tracker;

/* One log entry carrying payload id, and what happened to it. */
typedef struct {
    rn_wal_entry entry;
    tracker *t;
    int id;
    uint8_t *payload;
    size_t len;
    int done;                   /* callbacks received */
    int status;                 /* last status */
    int order;                  /* position among completions */
    int batch;                  /* batch hooks run before this callback */
    int after_sync_runs;        /* times the after_sync hook ran */
    int after_sync_before_done; /* the hook ran before the callback */
    int after_sync_status;      /* what the callback found in the entry */
} item;

struct tracker {
    int completed;
    int batches;
};

/* An item's done callback: records the status, the completion order and
 * the batches counted so far. */
void item_done(rn_wal_entry *e, int status);
/* A batch hook counting batches in the tracker arg. */
void count_batch(void *arg);
/* Items for payload ids first..first+n-1; entries use 1..4 pieces. */
item *items_new(tracker *t, int first, int n);
void items_free(item *v, int n);
/* Recovers (discarding records) and opens the log for writing; with t, its
 * batch hook counts batches in t. */
rn_wal *open_log(fx *f, uint64_t segment_bytes, tracker *t);
/* Runs the loop until nothing is left to do. */
void run(fx *f);
/* Submits items one batch at a time (each waits for the previous). */
void submit_each(fx *f, rn_wal *w, item *v, int n);
/* Submits all items before running the loop. */
void submit_all(fx *f, rn_wal *w, item *v, int n);
/* Submits v[0..n) so that they travel in one batch behind `lead`; with
 * `fail`, that batch (not the lead's) is made to fail. */
void submit_one_batch(fx *f, rn_wal *w, item *lead, item *v, int n, int fail);
/* One complete session writing payloads first..first+n-1; all must
 * succeed. */
void session(fx *f, uint64_t segment_bytes, int first, int n);

#endif
