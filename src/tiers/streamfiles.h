/*
 * streamfiles.h — the stream files tier: one data file per stream holding its
 * bytes at their stream offsets, and a bounded cache of open descriptors.
 * Storage only: the engine decides what goes where (it moved here from
 * src/engine/ so that every byte on disk but the log lives under tiers/).
 *
 * Each stream also has a checksum sidecar (<id>.sum, tiers/blocksums.h):
 * a CRC-32C per 4 KiB block of its data file, written with every write of
 * the data file and checked by every read of it.
 *
 * Each stream also has an index file of u64 little-endian entries, entry k
 * being the end offset of the stream's k-th append, so that the append
 * holding a position can be found by binary search (fork sub-offsets).
 *
 * The log is the source of truth; these files are the read-optimized copy
 * that is written after a command is durable in the log (by the log's
 * worker thread, through a pin; by the loop thread at replay), and that
 * checkpoints make durable with syncfs() before the log segments they replace
 * are dropped. Files live at <data>/streams/<xx>/<id>.dat, where <id> is the
 * stream's 16-hex-digit internal id and <xx> its low byte, spreading files over 256
 * directories.
 */
#ifndef RN_TIERS_STREAMFILES_H
#define RN_TIERS_STREAMFILES_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct rn_streamfiles rn_streamfiles;

/* Opens the stream files under data_dir, keeping at most max_open descriptors. */
rn_streamfiles *rn_streamfiles_open(const char *data_dir, int max_open);
void rn_streamfiles_close(rn_streamfiles *st);

/* A stream's files: data, index and checksums, in that order wherever a
 * set of them is handled; their names end in these suffixes. */
#define RN_STREAM_FILES 3
extern const char *const rn_stream_file_suffix[RN_STREAM_FILES];

/* Stream files this process opened (every rn_streamfiles, every thread),
 * for the metrics: an append to a stream whose files are in the cache
 * opens none. */
uint64_t rn_streamfiles_opened(void);
/* Creates the stream's data, index and checksum files unless they exist. Touches no
 * cache state: safe on any thread. Returns 0 or -errno. */
int rn_streamfiles_ensure(const rn_streamfiles *st, uint64_t id);
/* Makes the stream's data, index and checksum files by renaming the empty
 * files names[0..2] (relative to from_dirfd, on the same file system) into
 * their places, never over a file that exists (such a spare is removed
 * instead). A metadata operation, cheap enough for the loop thread (no
 * inode is allocated). Returns 0 or -errno (some files may then be made:
 * rn_streamfiles_ensure makes the rest). */
int rn_streamfiles_take(rn_streamfiles *st, uint64_t id, int from_dirfd,
                        const char *const names[RN_STREAM_FILES]);
/* Writes an append of stream id (replay): len bytes at off of its data
 * file, then index entry k = off + len. Returns 0 or -errno. */
int rn_streamfiles_append(rn_streamfiles *st, uint64_t id, const void *data, size_t len,
                          uint64_t off, uint64_t k);
/* Sets index entry k (the end offset of append k). Returns 0 or -errno. */
int rn_streamfiles_index_set(rn_streamfiles *st, uint64_t id, uint64_t k, uint64_t end);

/* An append whose files stay open until rn_streamfiles_unpin(): the descriptors
 * of the stream's data and index files, for a worker thread to write. */
typedef struct {
    int data_fd, index_fd, sum_fd;
    struct open_file *data, *index, *sum; /* private to streamfiles.c */
} rn_streamfiles_pin;
/* Reserves disk blocks for data [off, off+len), for index entry k and for
 * the checksum entries of the blocks the data touches, without changing
 * file sizes, so that writing them later cannot fail for lack of space,
 * and pins the files open (the descriptor cache may then
 * hold more than its bound for a while). Returns 0 or -errno (-ENOSPC when
 * the disk is full; nothing is pinned then). Loop thread only. */
int rn_streamfiles_pin_append(rn_streamfiles *st, uint64_t id, uint64_t off, size_t len, uint64_t k,
                              rn_streamfiles_pin *pin);
/* Writes data at off and index entry k = off + len through a pin. Touches
 * no cache state: safe on any thread while the pin is held. Returns 0 or
 * -errno. */
int rn_streamfiles_write_pinned(const rn_streamfiles_pin *pin, const void *data, size_t len,
                                uint64_t off, uint64_t k);
/* A large append written once (engine/ahead.c, engine/arriving.c), in
 * pieces: writes the piece's len > 0 bytes at off of the data file (its
 * writeback started at once) and the CRC-32Cs of the blocks it touches into
 * crcs (rn_blocksums_compute: the first block's bytes below off are read
 * from the file, so a piece that does not start on a block boundary must
 * follow the bytes below it). Then, once every piece is written,
 * rn_streamfiles_seal_ahead writes the checksum entries of the whole range
 * [off, off + len) from its crcs and index entry k = off + len. The caller
 * then syncs the data file (rn_streamfiles_sync_ahead) before the log
 * records the append; the entries and the index need no sync: replay
 * restores them from the record (rn_streamfiles_restore_sums). Safe on any
 * thread while the pin is held. Return 0 or -errno. */
int rn_streamfiles_write_piece(const rn_streamfiles_pin *pin, const void *data, size_t len,
                               uint64_t off, uint8_t *crcs);
int rn_streamfiles_seal_ahead(const rn_streamfiles_pin *pin, uint64_t off, size_t len, uint64_t k,
                              const uint8_t *crcs);
/* Makes a large append written through pin durable before its log record:
 * syncs the data file's bytes (fdatasync), then the directory holding
 * stream id's files, so that their names are durable too (a new stream's
 * files are made or renamed into place unsynced, which a checkpoint's
 * syncfs covered while every byte was also in the log). Safe on any
 * thread while the pin is held. Returns 0 or -errno. */
int rn_streamfiles_sync_ahead(const rn_streamfiles *st, uint64_t id, const rn_streamfiles_pin *pin);
/* Replay of a large append written once: sets the checksum entries of
 * [off, off + len) from crcs (as rn_streamfiles_write_ahead made them) and
 * index entry k = off + len; the data file already holds the bytes.
 * Returns 0 or -errno. */
int rn_streamfiles_restore_sums(rn_streamfiles *st, uint64_t id, uint64_t off, size_t len,
                                const uint8_t *crcs, uint64_t k);
/* Releases a pin (no-op on a zeroed one). Loop thread only. */
void rn_streamfiles_unpin(rn_streamfiles_pin *pin);
/* Reads index entry k into *end. Returns 0 or -errno (-EIO when absent). */
int rn_streamfiles_index_get(rn_streamfiles *st, uint64_t id, uint64_t k, uint64_t *end);
/* Reads up to len bytes at off, checking every block they touch against
 * its checksum. Returns bytes read, -EUCLEAN when a block does not match
 * (logged with the stream, the byte range and the file; *bad, when not
 * NULL, gets the block's offset; nothing read may be served), or -errno.
 * Counts rn_metric.data_blocks_verified. Loop thread only. */
ssize_t rn_streamfiles_read(rn_streamfiles *st, uint64_t id, void *out, size_t len, uint64_t off,
                            uint64_t *bad);
/* Like rn_streamfiles_read, without waiting for the disk: -EINPROGRESS
 * (nothing read may be used) when a byte of the range is not in the page
 * cache (preadv2's RWF_NOWAIT); rn_streamfiles_warm on a worker brings it
 * in. Loop thread only. */
ssize_t rn_streamfiles_read_cached(rn_streamfiles *st, uint64_t id, void *out, size_t len,
                                   uint64_t off, uint64_t *bad);
/* The paths of stream id's data file and checksum sidecar. */
void rn_streamfiles_paths(const rn_streamfiles *st, uint64_t id, char data[PATH_MAX],
                          char sum[PATH_MAX]);
/* Reads the blocks of the data file at data_path that [off, off + len)
 * touches, and their checksum entries in sum_path, so that the page cache
 * holds them: blocking, for a worker thread (touches nothing shared; a
 * missing file reads as nothing). Returns 0 or -errno. */
int rn_streamfiles_warm(const char *data_path, const char *sum_path, uint64_t off, size_t len);
/* Like rn_streamfiles_read, for len bytes at off whose every block a
 * checksum vouches for: -ENODATA when one is unverified (its range given
 * back, so reading as zeros, or written by an older build) or the file
 * holds fewer bytes. For a copy that must be the stream's bytes or
 * nothing (the read cache). Loop thread only. */
ssize_t rn_streamfiles_read_verified(rn_streamfiles *st, uint64_t id, void *out, size_t len,
                                     uint64_t off);
/* Sets the data file's length to len and the index to `appends` entries
 * (recovery cuts what lies past the recovered state), and the checksums to
 * the data's blocks (the block ending at len recomputed from the file);
 * a file that does not exist stays absent. Returns 0 or -errno. */
int rn_streamfiles_truncate(rn_streamfiles *st, uint64_t id, uint64_t len, uint64_t appends);
/* Gives the disk blocks of data [off, off+len) back (retention), whole
 * checksum blocks only (a partial one at either end keeps its bytes);
 * reads of the punched blocks return zeros, unverified, afterwards.
 * Returns 0 or -errno. */
int rn_streamfiles_punch(rn_streamfiles *st, uint64_t id, uint64_t off, uint64_t len);
/* Deletes the stream's files (its gap record too). */
void rn_streamfiles_remove(rn_streamfiles *st, uint64_t id);
/* Recovery: the first offset in [from, to) that stream id's data file
 * holds no data for (a hole punched in it, or past its end), or `to` when
 * it holds every byte of the range; -errno when the file cannot be asked.
 * A stream without a data file holds nothing. */
int64_t rn_streamfiles_first_hole(rn_streamfiles *st, uint64_t id, uint64_t from, uint64_t to);
/* Recovery: deletes the files of every stream kept() denies (no stream of
 * the state owns them). Returns 0, or the first -errno of a directory that
 * cannot be read (the others were still swept). */
int rn_streamfiles_sweep(rn_streamfiles *st, int (*kept)(void *ctx, uint64_t id), void *ctx);

/* The data file's length and the index file's entries (0 for a file that
 * does not exist). Returns 0 or -errno. */
int rn_streamfiles_extent(rn_streamfiles *st, uint64_t id, uint64_t *data_len, uint64_t *entries);
/* Writes len bytes at off of the data file and their checksums (bytes
 * fetched for a gap or to repair a damaged block; the index is left
 * alone). Returns 0 or -errno. */
int rn_streamfiles_write(rn_streamfiles *st, uint64_t id, const void *data, size_t len,
                         uint64_t off);

/* What a replica's files lack (cluster mode): data [from, to) and index
 * entries [kfrom, kto), kept in a record beside the files (<id>.gap) until
 * filled, so that a restart still knows bytes later appends wrote past.
 * `held` (0: none) says the data file keeps, below that offset, bytes a
 * stream would otherwise read elsewhere (a fork's inherited range, on a
 * replica without its source: engine/inherit.c); a record holding only
 * that stays. A record written without it reads as 0. */
typedef struct {
    uint64_t from, to, kfrom, kto, held;
} rn_streamfiles_gap;
/* Reads the record: 0, or -ENOENT when there is none, or -errno. */
int rn_streamfiles_gap_get(rn_streamfiles *st, uint64_t id, rn_streamfiles_gap *g);
/* Writes the record durably (an empty gap, nothing held, removes it).
 * Returns 0 or -errno. */
int rn_streamfiles_gap_put(rn_streamfiles *st, uint64_t id, const rn_streamfiles_gap *g);
/* Makes the written bytes of stream id's files durable (fdatasync); a
 * file that does not exist (any more) is skipped. Touches no cache state:
 * safe on any thread. Returns 0 or -errno. */
int rn_streamfiles_sync_stream(const rn_streamfiles *st, uint64_t id);
/* Makes every written byte durable (syncfs of the data directory). */
int rn_streamfiles_sync(rn_streamfiles *st);

#endif
