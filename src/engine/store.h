/*
 * store.h — stream data files: one file per stream holding its bytes at their
 * stream offsets, and a bounded cache of open descriptors.
 *
 * The log is the source of truth; these files are the read-optimized copy
 * that the engine writes after a command is durable in the log, and that
 * checkpoints make durable with syncfs() before the log segments they replace
 * are dropped. Files live at <data>/streams/<xx>/<id>.dat, where <id> is the
 * stream's 16-hex-digit internal id and <xx> its low byte, spreading files over 256
 * directories.
 */
#ifndef RN_STORE_H
#define RN_STORE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct rn_store rn_store;

/* Opens the store under data_dir, keeping at most max_open descriptors. */
rn_store *rn_store_open(const char *data_dir, int max_open);
void rn_store_close(rn_store *st);

/* Writes len bytes at off of stream id's file. Returns 0 or -errno. */
int rn_store_write(rn_store *st, uint64_t id, const void *data, size_t len, uint64_t off);
/* Reserves disk blocks for [off, off+len) without changing the file size, so
 * that the write after the log sync cannot fail for lack of space. Returns 0
 * or -errno (-ENOSPC when the disk is full). */
int rn_store_reserve(rn_store *st, uint64_t id, uint64_t off, size_t len);
/* Reads up to len bytes at off. Returns bytes read or -errno. */
ssize_t rn_store_read(rn_store *st, uint64_t id, void *out, size_t len, uint64_t off);
/* Sets the file's length (recovery cuts bytes past the recovered tail). */
int rn_store_truncate(rn_store *st, uint64_t id, uint64_t len);
/* Deletes the stream's file. */
void rn_store_remove(rn_store *st, uint64_t id);
/* Makes every written byte durable (syncfs of the data directory). */
int rn_store_sync(rn_store *st);

#endif
