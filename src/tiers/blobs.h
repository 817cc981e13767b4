/*
 * blobs.h — immutable named objects as files in a local directory: the
 * blocking primitives under the local-directory store (localdir.c, which
 * decides what runs on a worker thread). An object is written once under a
 * temporary name, synced, renamed into place and its directory synced, so a
 * key either names a whole durable object or nothing. Keys are relative
 * paths of [A-Za-z0-9._-] and "/". Every call taking a key answers
 * -ENAMETOOLONG when the key's file path would not fit PATH_MAX.
 *
 * Every call is safe on any thread: the store's only state is its root.
 */
#ifndef RN_BLOBS_H
#define RN_BLOBS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct rn_blobs rn_blobs;

/* Opens (creating) the store rooted at dir. Returns NULL on failure. */
rn_blobs *rn_blobs_open(const char *dir);
void rn_blobs_close(rn_blobs *b);

/* Stores data under key durably. Returns 0 or -errno. */
int rn_blobs_put(rn_blobs *b, const char *key, const void *data, size_t len);
/* Stores an object written in pieces: rn_blobs_begin opens key's
 * temporary file and returns its fd (or -errno) for the caller to write;
 * rn_blobs_end syncs and closes it and renames it into place durably,
 * or, when rc < 0 (the caller's failure), removes it. Returns 0 or -errno.
 * One writer of a key at a time. */
int rn_blobs_begin(rn_blobs *b, const char *key);
int rn_blobs_end(rn_blobs *b, const char *key, int fd, int rc);
/* Stores the concatenation of the objects src[0..n) under key durably,
 * passing every byte to observe (may be NULL) on the way, e.g. to hash it.
 * Returns 0, -ENOENT when a source is missing, or another -errno. */
int rn_blobs_concat(rn_blobs *b, const char *key, const char *const *src, size_t n,
                    void (*observe)(void *arg, const uint8_t *data, size_t len), void *arg);
/* Removes objects under prefix ("dir/" style), at any depth, whose last
 * change is older than `older_than` (Unix seconds), and the directories
 * that leaves empty (the prefix's own too); returns how many objects, or the first listing's
 * -errno (the rest was still swept). Kill points (util/fault.h):
 * "sweep-before-unlink" once an object is found old, "sweep-after-unlink"
 * once it is removed. */
long rn_blobs_sweep(rn_blobs *b, const char *prefix, int64_t older_than);
/* Opens key for reading; returns an fd (caller closes) or -errno. */
int rn_blobs_open_read(rn_blobs *b, const char *key);
/* Size of key's object, or -errno (-EISDIR for a directory). */
int64_t rn_blobs_size(rn_blobs *b, const char *key);
/* Removes key (missing is fine). Returns 0 or -errno. */
int rn_blobs_delete(rn_blobs *b, const char *key);
/* Calls fn for every key under prefix ("dir/" style, may be ""). fn returns
 * non-zero to stop. Returns 0 or -errno. */
int rn_blobs_list(rn_blobs *b, const char *prefix, int (*fn)(const char *key, void *arg),
                  void *arg);
/* Calls each for every object under prefix ("dir/" style) at any depth,
 * with its size; directories are entered, not reported. Returns 0, or the
 * first listing's -errno (the rest was still walked). */
int rn_blobs_walk(rn_blobs *b, const char *prefix,
                  void (*each)(void *arg, const char *key, uint64_t size), void *arg);

#endif
