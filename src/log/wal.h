/*
 * wal.h — the write-ahead log: CRC-framed records in numbered segment files,
 * written with group commit.
 *
 * Records are opaque byte strings to this module (the engine encodes its
 * commands). Callers submit entries from the loop thread; while one batch is
 * being written and fdatasync'ed on a worker thread, new entries gather into
 * the next batch, so many concurrent appends share one sync. An entry's
 * callback runs on the loop thread, in submission order, only after the sync
 * that covers it returned: status 0 means durable, a negative errno means the
 * record must be treated as never written.
 *
 * On disk (log/segment.h has the layout): numbered segment files, each
 * starting with a header that records the valid length of the previous
 * segment, holding batches (one per group commit: a batch header with its
 * length and sequence number, then CRC-framed records), and wal/HEAD naming
 * the newest segment created. Before writing a batch the log reserves its
 * disk blocks, so a full disk refuses the batch before any of it is written
 * (RN_WAL_NOT_WRITTEN_FULL). After a failed write or sync the log never
 * appends to that segment again: before reporting the failure it opens a
 * new segment whose header records where the previous one's acknowledged
 * records end, so bytes of a failed batch that reached the disk anyway are
 * ignored by recovery. Every failed batch is logged at error level.
 *
 * Recovery replays exactly the acknowledged batches. The one place a crash
 * leaves unfinished bytes is the last batch of the newest segment (never
 * acknowledged: the next batch is written only after it was synced); it is
 * cut. Anything else that does not read back — a damaged batch followed by
 * an intact later one, a segment shorter than its successor records, a
 * damaged header of a segment the head names, a segment the head names
 * that is missing — lost acknowledged records: recovery refuses, names the
 * loss and changes nothing on disk.
 */
#ifndef RN_WAL_H
#define RN_WAL_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>
#include <uv.h>

#define RN_WAL_MAX_PIECES 4
#define RN_WAL_MAX_RECORD (64u << 20)
#define RN_WAL_NOT_WRITTEN_FULL (-ENOSPC)

typedef struct rn_wal rn_wal;
typedef struct rn_wal_entry rn_wal_entry;

/* Called on the loop thread once the entry's batch is durable (status 0) or
 * failed (negative errno). RN_WAL_NOT_WRITTEN_FULL says that nothing of the
 * batch was written (the disk was too full to open the next segment), so
 * no recovery can ever replay it; any other failure may have left bytes
 * behind. The entry may be freed inside the callback. */
typedef void (*rn_wal_done_fn)(rn_wal_entry *entry, int status);

struct rn_wal_entry {
    rn_wal_entry *next;                    /* owned by the log while queued */
    uint8_t frame[8];                      /* filled by the log */
    struct iovec piece[RN_WAL_MAX_PIECES]; /* payload pieces, set by the caller */
    int pieces;
    rn_wal_done_fn done;
    void *arg; /* for the caller */
    /* Optional: runs on the worker thread once the batch holding the entry
     * is durable, before any callback of the batch; it may only touch what
     * the entry owns (the engine writes the stream files here). Its result
     * is left in after_sync_status for done() (0 when it did not run). */
    int (*after_sync)(rn_wal_entry *entry);
    int after_sync_status;
};

typedef struct {
    uint64_t segment_bytes; /* rotate to a new segment past this size */
    /* Write segments into zero-filled, synced files prepared in the
     * background, so syncs journal no block allocations (see wal.c). */
    int preallocate;
} rn_wal_options;

/* What recovery found lost (kind RN_WAL_INTACT: nothing). */
typedef enum {
    RN_WAL_INTACT = 0,
    RN_WAL_MISSING_SEGMENTS, /* segments [segment, last_segment] do not exist */
    RN_WAL_DAMAGED_HEADER,   /* segment's header does not read back */
    RN_WAL_DAMAGED_RECORDS,  /* acknowledged bytes [offset, end) of segment do not */
    RN_WAL_DAMAGED_HEAD,     /* wal/HEAD is missing, damaged or behind the segments */
} rn_wal_damage_kind;

typedef struct {
    rn_wal_damage_kind kind;
    uint64_t segment, last_segment;
    uint64_t offset, end;
    char what[400]; /* one sentence naming the files, bytes and why they count */
} rn_wal_damage;

/* Result of recovery: where the log continues. */
typedef struct {
    uint64_t last_segment;   /* highest segment number replayed (0: none) */
    uint64_t last_valid_end; /* valid length of that segment */
    uint64_t records;        /* records replayed */
    uint64_t torn_bytes;     /* non-zero bytes of an unfinished last batch, cut */
    uint64_t torn_offset;    /* where that batch started in segment last_segment */
    uint64_t zero_bytes;     /* trailing zero bytes cut (unused preallocation) */
    rn_wal_damage damage;    /* when recovery returned RN_WAL_CORRUPT */
} rn_wal_recovery;

/* Called for each valid record during recovery, in log order. Returns 0,
 * or a negative value that aborts recovery with that value. */
typedef int (*rn_wal_replay_fn)(void *arg, const uint8_t *payload, size_t len);

/* Replays every acknowledged record of segments numbered >= from_segment
 * in dir/wal (from_segment: the first segment a checkpoint does not cover,
 * 0 without one), then cuts the newest segment's unfinished last batch and
 * unused preallocation and removes a newest segment whose creation never
 * finished. Returns 0, a negative errno for I/O errors, or RN_WAL_CORRUPT
 * when acknowledged records are lost (out->damage says which): then no
 * record was replayed and nothing on disk was changed. */
#define RN_WAL_CORRUPT (-100000)
int rn_wal_recover(const char *dir, uint64_t from_segment, rn_wal_replay_fn fn, void *arg,
                   rn_wal_recovery *out);

/* After rn_wal_recover() refused with `damage`: calls fn, in log order,
 * for every record that still reads back on one side of the damage: after
 * it (in the damaged batch before its first bad record, in intact later
 * batches and segments) or, with after = 0, before it (from from_segment
 * on). So the caller can name what the loss touches. Changes nothing.
 * Returns 0, -errno, or fn's negative result. */
int rn_wal_damaged_records(const char *dir, uint64_t from_segment, const rn_wal_damage *damage,
                           int after, rn_wal_replay_fn fn, void *arg);

/* After rn_wal_recover() refused, for an operator who accepts the loss:
 * calls fn, in log order, for every record of the log's unbroken prefix
 * from from_segment on (segments numbered without a gap, each with an
 * intact header, batches intact and in sequence up to the end its
 * successor records), stopping at the first thing that does not read
 * back, which is at or before the damage recovery named. Then fills *out
 * so that rn_wal_open() continues after every segment that exists (the
 * damaged ones stay until a checkpoint drops them). Changes nothing on
 * disk. Returns 0, -errno, or fn's non-zero result. When a segment's
 * successor has a damaged header, the end of its acknowledged records is
 * not recorded anywhere and its batches are kept up to the first that
 * does not read back. */
int rn_wal_replay_prefix(const char *dir, uint64_t from_segment, rn_wal_replay_fn fn, void *arg,
                         rn_wal_recovery *out);

/* Prepares a data directory written by data format 1 for this format: when
 * dir/wal holds no segment (a clean stop leaves none) it gets a log head
 * naming segment 0. Returns 0, -ENOTEMPTY when segments of the old format
 * exist, or -errno. */
int rn_wal_adopt_format1(const char *dir);

/* Opens the log for writing in a new segment following the recovered ones.
 * Returns NULL and sets *err (negative errno) on failure. */
rn_wal *rn_wal_open(uv_loop_t *loop, const char *dir, const rn_wal_recovery *recovered,
                    const rn_wal_options *opts, int *err);

/* Queues an entry; its callback runs after the covering sync. */
void rn_wal_submit(rn_wal *wal, rn_wal_entry *entry);

/* Number of the segment that new records go to (checkpoints start replay at
 * the segment current when their snapshot was taken). */
uint64_t rn_wal_current_segment(const rn_wal *wal);

/* Called on the loop thread after each batch's callbacks ran and before the
 * next batch starts: at that moment every submitted record is either applied
 * or still queued, none is in flight. */
typedef void (*rn_wal_batch_hook)(void *arg);
void rn_wal_set_batch_hook(rn_wal *wal, rn_wal_batch_hook hook, void *arg);

/* Makes the next batch start a new segment and returns its number: every
 * record submitted after this call lands in that segment or a later one.
 * Only valid while no batch is in flight (inside the batch hook, or when
 * rn_wal_busy() is false). Used by checkpoints. */
uint64_t rn_wal_rotate(rn_wal *wal);

/* Unlinks segments numbered below `segment`. */
void rn_wal_drop_before(rn_wal *wal, uint64_t segment);

/* True while a batch is being written or entries are queued. */
int rn_wal_busy(const rn_wal *wal);

/* Total bytes appended since open (for checkpoint scheduling). */
uint64_t rn_wal_bytes_written(const rn_wal *wal);

/* Fault injection for tests: the next n batches fail as if fdatasync had
 * returned EIO after their write (nothing of them is acknowledged). */
void rn_wal_inject_sync_failures(rn_wal *wal, int n);

/* Closes files. No batch may be in flight; a spare segment still being
 * prepared is waited for (running the loop). */
void rn_wal_close(rn_wal *wal);

#endif
