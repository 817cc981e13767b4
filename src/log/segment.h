/*
 * segment.h — the log's on-disk format, shared by the writer (wal.c) and
 * recovery (recover.c): file names, segment headers, batch headers, records
 * and the log head. Internal to src/log; all integers little-endian.
 *
 * wal/<20-digit n>.log, a segment: a 40-byte header {magic "RNWAL\0\0\2",
 * u64 n, u64 valid length of segment n-1, u64 salt (random, per segment),
 * u32 crc32c of the first 32 bytes, u32 0}, then batches. A batch is what
 * one group commit wrote with one pwritev and one fdatasync: a 32-byte batch
 * header {u32 "RNB2", u32 records, u64 sequence number (1, 2, ... within the
 * segment), u64 bytes of records that follow, u32 crc32c(salt || the first
 * 24 bytes), u32 0}, then its records {u32 payload length, u32
 * crc32c(length bytes || payload), payload}. A batch is written only after
 * the previous one was synced, so an intact batch after a damaged one proves
 * that the damaged one had been acknowledged; the salt keeps bytes of a
 * stream's payload (which may be anything) from passing for a batch header.
 *
 * wal/HEAD, the log head: the number of the newest segment the log created.
 * Two 24-byte slots {magic "RNWHEAD2", u64 segment number, u32 crc32c of
 * the first 16 bytes, u32 0} at offsets 0 and 512 (different sectors);
 * creating segment n rewrites slot n & 1 in place after the segment is
 * durable, so a torn write spoils only the slot being written, and the head
 * is the highest number of an intact slot (one more segment, the one a torn
 * slot was naming, then exists). A deleted newest segment is noticed
 * because the head still names it.
 */
#ifndef RN_LOG_SEGMENT_H
#define RN_LOG_SEGMENT_H

#include <stddef.h>
#include <stdint.h>

#define RN_SEG_HEADER 40
#define RN_BATCH_HEADER 32
#define RN_RECORD_FRAME 8
#define RN_HEAD_FILE "HEAD"

typedef struct {
    uint64_t number;
    uint64_t prev_end; /* valid length of the previous segment */
    uint64_t salt;
} rn_seg_header;

typedef struct {
    uint32_t records;
    uint64_t seq;
    uint64_t bytes; /* of the records that follow the batch header */
} rn_batch_header;

/* out = "<dir>/wal/<20-digit n>.log". */
void rn_seg_path(const char *dir, uint64_t n, char *out, size_t cap);
/* out = "<dir>/wal". */
void rn_wal_dir(const char *dir, char *out, size_t cap);

void rn_seg_encode_header(uint8_t h[RN_SEG_HEADER], const rn_seg_header *v);
/* Decodes a segment header from len bytes at h; 0 when intact (magic and
 * CRC), -1 otherwise. The salt field is filled even when the header is
 * damaged (reporting may still try it). */
int rn_seg_decode_header(const uint8_t *h, size_t len, rn_seg_header *out);

void rn_batch_encode_header(uint8_t h[RN_BATCH_HEADER], uint64_t salt, const rn_batch_header *v);
/* Decodes the batch header at h (RN_BATCH_HEADER readable bytes) of a
 * segment with this salt; 0 when intact, -1 otherwise. */
int rn_batch_decode_header(const uint8_t *h, uint64_t salt, rn_batch_header *out);

/* Checks the record frame at p with `avail` bytes after it: 0 and *len set
 * to its payload length when a whole record with a matching CRC is there,
 * -1 otherwise. */
int rn_record_check(const uint8_t *p, size_t avail, uint32_t *len);

/* Fills a record frame for a payload of len bytes whose CRC is crc (the
 * CRC over the 4 length bytes, then the payload). */
void rn_record_frame(uint8_t frame[RN_RECORD_FRAME], uint32_t len, uint32_t payload_crc);

/* A random salt for a new segment. */
uint64_t rn_seg_new_salt(void);

/* Reads the log head of dir: 1 with *segment set (and *torn set when one
 * of the two slots does not read back: a write of it was cut short, or it
 * was damaged), 0 when wal/HEAD does not exist, RN_HEAD_DAMAGED when no
 * slot is intact, or a negative errno. */
#define RN_HEAD_DAMAGED 2
int rn_head_read(const char *dir, uint64_t *segment, int *torn);
/* Creates wal/HEAD naming `segment` (both slots), atomically and durably.
 * Returns 0 or -errno. */
int rn_head_create(const char *dir, uint64_t segment);
/* Rewrites the slot of `segment` in the open head file and syncs it.
 * Returns 0 or -errno. */
int rn_head_write(int fd, uint64_t segment);

/* Lists the numbers of segment files >= from in dir/wal, sorted. Caller
 * frees *out. Returns 0 or -errno. */
int rn_list_segments(const char *dir, uint64_t from, uint64_t **out, size_t *count);

#endif
