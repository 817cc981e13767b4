/*
 * store.h — an object store: the seam where storage backends plug into the
 * tiers. The tiers service (tiers.c, parts.c) keeps snapshot bodies and
 * staged parts as immutable named objects and reaches a store only through
 * these operations. The local directory (localdir.c) is one backend; an S3
 * backend (over s3/s3.h) and a backend that fetches objects from a peer
 * implement the same operations, and nothing above the tiers changes.
 *
 * Keys are relative names: segments of [A-Za-z0-9._-] separated by "/". An
 * object is durable once the operation that wrote it reported success, and
 * never changes afterwards; it can only be removed.
 *
 * Every operation reports exactly once through its callback, on the thread
 * that called it, possibly before the operation returns: a backend finishes
 * at once what costs a system call or two and hands the rest to a worker
 * thread or the network. Keys, data and arrays passed in are borrowed until
 * the callback ran. Operations are made on the loop thread, with one
 * exception: during recovery (before rn_tiers_start) the engine's open, on
 * its own thread, lists and removes snapshot bodies one at a time (see
 * rn_tiers_sweep_bodies); a backend finishes those at once.
 */
#ifndef RN_TIERS_STORE_H
#define RN_TIERS_STORE_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

typedef struct rn_store rn_store;

/* status: 0 or -errno (-ENOSPC: the store is full; -ENOENT: no such key). */
typedef void (*rn_store_done_fn)(void *arg, int status);
/* size: the object's size in bytes, or -errno. */
typedef void (*rn_store_size_fn)(void *arg, int64_t size);
/* fd: a descriptor the caller owns and closes, whose bytes from fd_off are
 * the requested range of the object; or -errno (fd_off then 0). */
typedef void (*rn_store_open_fn)(void *arg, int fd, uint64_t fd_off);
/* One object found by a listing. */
typedef void (*rn_store_entry_fn)(void *arg, const char *key, uint64_t size);
/* Bytes on their way into a new object, in order; may run on any thread. */
typedef void (*rn_store_observe_fn)(void *arg, const uint8_t *data, size_t len);

typedef struct {
    /* Writes len bytes of data under key. */
    void (*put)(rn_store *st, const char *key, const void *data, size_t len, rn_store_done_fn done,
                void *arg);
    /* Writes the concatenation of the objects src[0..n) under key, passing
     * every byte to observe (may be NULL), and reports its size: -ENOENT
     * when a source is missing, -EFBIG (before anything is copied) when the
     * sources hold more than max_bytes. */
    void (*concat)(rn_store *st, const char *key, const char *const *src, size_t n,
                   uint64_t max_bytes, rn_store_observe_fn observe, void *observe_arg,
                   rn_store_size_fn done, void *arg);
    /* Opens bytes [off, off + len) of key for reading. */
    void (*open)(rn_store *st, const char *key, uint64_t off, uint64_t len, rn_store_open_fn done,
                 void *arg);
    /* Calls each() for every object whose key is prefix ("dir/" style)
     * followed by a name without "/", then done(). */
    void (*list)(rn_store *st, const char *prefix, rn_store_entry_fn each, rn_store_done_fn done,
                 void *arg);
    /* Calls each() for every object under prefix ("dir/" style) at any
     * depth, then done(). */
    void (*walk)(rn_store *st, const char *prefix, rn_store_entry_fn each, rn_store_done_fn done,
                 void *arg);
    /* Removes the objects keys[0..n) (a missing one is fine). Tries every
     * key; the status is the first failure. */
    void (*remove)(rn_store *st, const char *const *keys, size_t n, rn_store_done_fn done,
                   void *arg);
    /* Removes the objects under prefix, at any depth, last written before
     * older_than (Unix seconds). */
    void (*sweep)(rn_store *st, const char *prefix, int64_t older_than, rn_store_done_fn done,
                  void *arg);
    /* Confirms that this deployment may write and remove objects in the
     * store and that the store takes the server's requests: done(arg, 0);
     * -EEXIST when another deployment owns the store; -EPERM when the store
     * refuses the requests (credentials, permissions, bucket); -EAGAIN or
     * -EIO when it cannot tell now (try again). A store nobody owns is
     * claimed for this deployment; with `fresh`, only while it holds no
     * object (a restore never takes over keys another deployment wrote).
     * NULL: nothing to confirm (a local directory belongs to its data
     * directory, whose lock the server holds). */
    void (*claim)(rn_store *st, int fresh, rn_store_done_fn done, void *arg);
    /* Writes the store's own words for its last failure into out (an error
     * code and status, or the deployment that owns it; never a key, bucket,
     * endpoint or credential) and returns their length; 0 when nothing
     * failed. NULL: the store says nothing beyond -errno. */
    size_t (*why)(rn_store *st, char *out, size_t cap);
    /* Cancels nothing in flight but closes the store's loop handles; run
     * the loop afterwards, then close. NULL: the store holds none. */
    void (*stop)(rn_store *st);
    /* Frees the store; no operation may be in flight. */
    void (*close)(rn_store *st);
} rn_store_ops;

/* Backends embed this as their first member. */
struct rn_store {
    const rn_store_ops *ops;
    /* 1: a store across the network, whose every operation answers on a
     * later loop turn and none may be made off the loop thread (no
     * recovery-thread listing or removal: see rn_tiers_sweep_bodies). */
    int network;
};

/* The local-directory backend rooted at dir (created when missing), whose
 * slow operations run on loop's worker pool. NULL when dir cannot be made.
 * Call on the loop thread. */
rn_store *rn_localdir_open(uv_loop_t *loop, const char *dir);
/* The files under a local-directory store (for the tiers' replica intake,
 * tiers.h); NULL for a store of another backend. */
struct rn_blobs *rn_localdir_files(rn_store *st);

#endif
