/*
 * tiers.h — every byte on disk that is not the log, behind one service:
 * the stream files (the hot tier the log's writer fills), snapshot bodies,
 * and snapshot parts staged for a commit; where each is kept, under which
 * name, which work runs on a worker thread, and the sweeps that remove what
 * nothing uses any more. The engine and the surfaces reach storage only
 * through these calls; which store holds what (store.h: the local
 * directory today, an S3 bucket or a peer tomorrow) is decided here.
 *
 * Calls are asynchronous: each reports once through its callback, on the
 * loop thread, possibly before the call returns. Keys and ids handed to a
 * callback live only during it. Everything runs on the loop thread that
 * opened the tiers, except what is marked "recovery".
 *
 * A snapshot body is named by the pair (cold, key) the tiers chose when they
 * wrote it: the engine logs and keeps that pair, and callers hand it back
 * without interpreting it.
 */
#ifndef RN_TIERS_H
#define RN_TIERS_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "tiers/streamfiles.h"

typedef struct rn_tiers rn_tiers;

struct rn_store;

typedef void (*rn_tiers_status_fn)(void *arg, int status);

typedef struct {
    const char *data_dir;
    int cold_store;          /* keep large snapshot bodies and staged parts in a cold store */
    int max_open_files;      /* stream file descriptors kept open */
    unsigned spare_files;    /* empty stream file sets kept ready (spares.h); 0: none */
    uint64_t parts_grace_ms; /* staged parts no commit used are removed after this */
    /* With cold_store: bytes of history objects the read cache keeps
     * (history.c; at least RN_HISTORY_CACHE_MIN). */
    uint64_t history_cache_bytes;
    /* With cold_store: the cold store's backend (store.h), taken over by
     * the tiers (also when the open fails); NULL: the local directory
     * <data>/cold. */
    struct rn_store *cold_backend;
} rn_tiers_config;

/* Opens the stores under cfg->data_dir. NULL with the reason in err; a
 * cold_backend with a stop operation then stays the caller's. */
rn_tiers *rn_tiers_open(uv_loop_t *loop, const rn_tiers_config *cfg, char *err, size_t errcap);
/* Starts the sweeps of staged parts (once the engine recovered): the
 * tiers' only libuv handle, which an unstarted tiers does not hold. */
void rn_tiers_start(rn_tiers *t);
/* Stops the sweeps and closes their handle (when started) and the stores'
 * handles (a network store's operations in flight end failed); run the
 * loop afterwards until they closed. The stream files stay usable (the
 * engine's final checkpoint syncs them). */
void rn_tiers_stop(rn_tiers *t);
/* Frees everything; the engine is closed and no call is in flight. */
void rn_tiers_close(rn_tiers *t);

/* Confirms that the cold store is this deployment's and takes the
 * server's requests (store.h, `claim`; with `fresh`, a store nobody owns
 * is claimed only while empty): done(arg, 0) at once without a network
 * cold store, else the claim's status. */
void rn_tiers_cold_claim(rn_tiers *t, int fresh, rn_tiers_status_fn done, void *arg);
/* The cold store's own words for its last failure (store.h, `why`) into
 * out; returns their length, 0 when it has none. */
size_t rn_tiers_cold_why(rn_tiers *t, char *out, size_t cap);

/* Gives new stream id its files from the reserve of spare sets, on the
 * loop thread (spares.h, rn_spares_take): 1 when made, 0 when none is
 * ready, or -errno. */
int rn_tiers_take_spare_files(rn_tiers *t, uint64_t id);
/* The stream files, for the engine alone (see streamfiles.h for their
 * threads: the log's writer writes through pins, recovery replays). Also
 * at recovery. */
rn_streamfiles *rn_tiers_streamfiles(rn_tiers *t);

/* True when staged parts can be kept (a cold store is configured). */
int rn_tiers_keeps_parts(const rn_tiers *t);

/* ---- snapshot bodies ---- */

#define RN_TIERS_KEY_MAX 64 /* bytes of a body's key, with its NUL */

/* status 0: the body is durable as (cold, key); else -errno (-ENOSPC: the
 * disk is full) and nothing was kept. */
typedef void (*rn_tiers_body_fn)(void *arg, int status, int cold, const char *key);
/* fd >= 0: a descriptor the caller owns and closes, holding the requested
 * range from fd_off; fd < 0: -errno, the body cannot be read. */
typedef void (*rn_tiers_read_fn)(void *arg, int fd, uint64_t fd_off);

/* Writes len bytes of a snapshot body of stream stream_id durably (large
 * ones in the cold store, when there is one). data is borrowed until done. */
void rn_tiers_body_write(rn_tiers *t, uint64_t stream_id, const void *data, size_t len,
                         rn_tiers_body_fn done, void *arg);
/* Opens bytes [off, off + len) of body (cold, key) for reading. */
void rn_tiers_body_read(rn_tiers *t, int cold, const char *key, uint64_t off, uint64_t len,
                        rn_tiers_read_fn done, void *arg);
/* Removes a body nothing references any more (the engine did not adopt it,
 * or a later snapshot or a delete superseded it). Reports nothing: a body
 * that stays is an orphan for rn_tiers_sweep_bodies. Also at recovery. */
void rn_tiers_body_drop(rn_tiers *t, int cold, const char *key);
/* Sets how the tiers learn which bodies the state references, once the
 * engine is open: with a network cold store (store.h), whose bodies
 * recovery cannot list, the sweep of staged parts also removes the cold
 * bodies referenced() denied at two listings parts_grace_ms apart (a body
 * whose publish is still on its way is referenced by then). In cluster
 * mode only with rn_tiers_sweep_owned: a store shared by nodes holds
 * bodies of groups other nodes lead. */
void rn_tiers_watch_bodies(rn_tiers *t, int (*referenced)(void *ctx, int cold, const char *key),
                           void *ctx);
/* From now on (before rn_tiers_start, with rn_tiers_watch_bodies) the
 * bodies of a network cold store are removed only by the orphan sweep,
 * whose referenced() then decides alone: rn_tiers_body_drop leaves them
 * to it. For bodies something outside the state may still name (a backup
 * at the node's destination: ops/backup_refs.h). */
void rn_tiers_drop_by_sweep_only(rn_tiers *t);
/* Recovery: removes every body for which referenced() answers 0 (written
 * before a crash kept its publish out of the log, or superseded during
 * replay). Made once by the engine's open, on its thread, before
 * rn_tiers_start and while nothing else uses the tiers; returns when done. */
void rn_tiers_sweep_bodies(rn_tiers *t, int (*referenced)(void *ctx, int cold, const char *key),
                           void *ctx);

/* ---- snapshot bodies on replicas (cluster/fetch.c, cluster_http.c) ----
 * A replica keeps the bodies its streams' snapshots name under the (cold,
 * key) the node that wrote them chose: it fetches those it lacks from a
 * peer and serves its own to peers. A body in a store that is not this
 * node's own directory (a shared backend) is never copied. These answer at
 * once; intake_end may block on a sync (call it on a worker thread). */

/* 1 when key has the form of a body key (rn_tiers_body_write's). */
int rn_tiers_body_key_valid(const char *key);
/* The name of body key (valid) once it belongs to stream id `stream`: its
 * stream part replaced (a key names its stream: peers find the stream by
 * it). A restore that gives streams new ids renames the bodies it copies. */
void rn_tiers_body_key_rebase(const char *key, uint64_t stream, char out[RN_TIERS_KEY_MAX]);
/* 1 when body (cold, key) needs no fetch: kept here, or in a shared store. */
int rn_tiers_body_present(rn_tiers *t, int cold, const char *key);
/* 1 when the bodies of store `cold` live outside this node's directory (a
 * network cold store every node and backup reaches), so copies of them
 * are references. */
int rn_tiers_body_shared(const rn_tiers *t, int cold);
/* A descriptor to write the fetched body (cold, key) into, or -errno. */
int rn_tiers_body_intake_begin(rn_tiers *t, int cold, const char *key);
/* status 0: syncs the written body and names it (cold, key) durably;
 * otherwise discards it. Returns 0 or -errno. Any thread. */
int rn_tiers_body_intake_end(rn_tiers *t, int cold, const char *key, int fd, int status);

/* ---- staged parts (ext §2.2) ----
 * Parts belong to one incarnation of one stream, named by (stream, inc),
 * and live in the cold store until a commit used them, a discard removed
 * them, or the sweep found them older than parts_grace_ms. They are
 * counted per stream, every incarnation's parts together, so that a
 * rewrite does not reset the bounds. Requires rn_tiers_keeps_parts(). */

typedef void (*rn_tiers_count_fn)(void *arg, uint64_t count, uint64_t bytes);
/* status 0 with the part's id (1-64 visible ASCII characters), or -errno. */
typedef void (*rn_tiers_part_fn)(void *arg, int status, const char *part_id);
/* Bytes of the assembled body in order; runs on a worker thread. */
typedef void (*rn_tiers_observe_fn)(void *arg, const uint8_t *data, size_t len);
/* status 0: the body (cold, key) of size bytes is durable; -ENOENT: a
 * listed part does not exist; -EFBIG: the parts hold more than max_bytes;
 * another -errno: the copy failed. */
typedef void (*rn_tiers_assembled_fn)(void *arg, int status, int cold, const char *key,
                                      uint64_t size);

/* The staged parts of stream (of every incarnation), uploads in progress
 * included, when they are known now: returns 0 with *count and *bytes, or
 * -EAGAIN while the store is still listing them (the first use of a stream
 * starts that listing, and so does a use under another epoch: see
 * rn_tiers_parts_epoch; the local directory answers at once). */
int rn_tiers_parts_staged(rn_tiers *t, uint64_t stream, uint64_t *count, uint64_t *bytes);
/* The same, once known. */
void rn_tiers_parts_count(rn_tiers *t, uint64_t stream, rn_tiers_count_fn done, void *arg);
/* Cluster mode, where the nodes share the cold store and the leader of a
 * stream's group counts its parts: epoch(ctx, stream) names this node's
 * current leadership of that group (its term while it leads, 0 while it
 * does not). A stream's counts made under another epoch are listed again
 * at their next use (unless a commit or discard holds them), so a node
 * that leads again counts what other leaders staged and used meanwhile.
 * Before rn_tiers_start. */
void rn_tiers_parts_epoch(rn_tiers *t, uint64_t (*epoch)(void *ctx, uint64_t stream), void *ctx);
/* Stages len bytes as a new part of (stream, inc), counted at once. data
 * is borrowed until done. */
void rn_tiers_part_stage(rn_tiers *t, uint64_t stream, uint64_t inc, const void *data, size_t len,
                         rn_tiers_part_fn done, void *arg);

/* One commit or discard of a stream's parts runs at a time: claims them
 * for one. Returns 0, or -EBUSY while another holds them. */
int rn_tiers_parts_claim(rn_tiers *t, uint64_t stream);
/* Ends a claim that changed nothing: the parts stay for a repeat. */
void rn_tiers_parts_unclaim(rn_tiers *t, uint64_t stream);
/* Removes every staged part of claimed stream, every incarnation's (ext
 * §2.2 lets a discard take the unused parts of earlier incarnations: they
 * count against the same bounds), and ends the claim; on failure some may
 * remain. */
void rn_tiers_parts_discard(rn_tiers *t, uint64_t stream, rn_tiers_status_fn done, void *arg);
/* Copies the claimed parts ids[0..n) (ids without "/") in that order into a
 * new snapshot body of the stream, passing every byte to observe. The parts
 * stay; the claim goes on. ids are borrowed until done. A node copies at
 * most RN_TIERS_MAX_COMMIT_COPIES commits at once (ext §2.2's note): past
 * it done hears -EBUSY at once, before anything is copied. */
#define RN_TIERS_MAX_COMMIT_COPIES 2
void rn_tiers_parts_assemble(rn_tiers *t, uint64_t stream, uint64_t inc, const char *const *ids,
                             size_t n, uint64_t max_bytes, rn_tiers_observe_fn observe,
                             void *observe_arg, rn_tiers_assembled_fn done, void *arg);
/* The staged parts of stream (of every incarnation) as counted in memory,
 * without listing anything: 0 with *count and *bytes, or -ENOENT when they
 * are not known now (never used since start, forgotten by a sweep, or
 * being listed). The operator's usage report reads it. */
int rn_tiers_parts_known(const rn_tiers *t, uint64_t stream, uint64_t *count, uint64_t *bytes);
/* Removes every staged part of stream, of any incarnation, whatever its
 * age (a bucket purge, or the stream destroyed: ids are never reused, so a
 * stream deleted and created again starts with none rather than with
 * parts only the sweep would remove), and forgets their counts; fire and
 * forget: what a failure leaves goes with the sweep. Parts staged while it
 * runs may stay. Nothing during recovery with a network store. */
void rn_tiers_parts_drop(rn_tiers *t, uint64_t stream);
/* Removes the claimed parts ids[0..n) a commit used up, then ends the
 * claim. ids are copied. */
void rn_tiers_parts_release(rn_tiers *t, uint64_t stream, uint64_t inc, const char *const *ids,
                            size_t n);

/* ---- stream history in the cold store (history.c) ----
 * With a cold store, a stream's history can move from its data file to
 * the cold store a chunk of the grid at a time (extensions §4.2), one
 * object per chunk, "history/<stream id>/<chunk index>" (16 hex digits
 * each): the tiers write the object, then the engine records the move (a
 * logged command) and gives the file's blocks back. Reads below a stream's
 * cold end come from a bounded cache of those objects, each fetched with
 * one ranged GET; a read whose chunk is not cached fails -ENODATA and
 * names it (rn_tiers_history_missed) for rn_tiers_history_fetch. */

#define RN_CHUNK_BYTES (4u << 20)                    /* the chunk grid of §4.2 */
#define RN_HISTORY_CACHE_MIN (8ull * RN_CHUNK_BYTES) /* the smallest read cache */

/* Where the flush finds what to move (the engine: engine/tiering.c). */
typedef struct {
    void *ctx;
    /* Finds a chunk due to move: 1 with the stream and the chunk's offset,
     * 0 when none is. Called every tick (it also refreshes what the engine
     * counts of the backlog). */
    int (*next)(void *ctx, uint64_t *id, uint64_t *off);
    /* Reads stream id's bytes [off, off + len) from its data file into out:
     * 0, -EINPROGRESS when they are being read from the disk (ask again at
     * a later tick; the loop thread never waits for the disk), or -errno. */
    int (*read)(void *ctx, uint64_t id, uint64_t off, size_t len, uint8_t *out);
    /* The chunk ending at end is durable in the cold store: records the
     * move; done(arg, 0) once recorded or no longer wanted, done(arg,
     * -errno) to try again later. */
    void (*record)(void *ctx, uint64_t id, uint64_t end, rn_tiers_status_fn done, void *arg);
} rn_tiers_history_source;

/* Starts moving history (after rn_tiers_start; needs a cold store): one
 * chunk at a time, a tick every 100 ms, failed puts and records retried
 * with backoff. src is copied. */
void rn_tiers_history_flush(rn_tiers *t, const rn_tiers_history_source *src);

/* Copies stream id's history bytes [off, off + len) from the read cache
 * into out (NULL: only checks that they are cached). Returns 0; -ENODATA
 * when a chunk of the range is not cached (it is remembered for
 * rn_tiers_history_missed; without a cold store every read fails so, and
 * its fetch -EIO); -EIO when the cached copy cannot be read. */
int rn_tiers_history_read(rn_tiers *t, uint64_t id, uint64_t off, size_t len, uint8_t *out);
/* Why the flush's moves fail, while they do: the status of the last put
 * of a chunk when it failed (-EPERM: the store refuses it as asked, see
 * store.h; -EAGAIN, -EIO: slow or failing), with the cold store's own
 * words in *why (valid until the next flush tick); 0 once a put
 * succeeded, or none failed. */
int rn_tiers_history_failing(const rn_tiers *t, const char **why);
/* The chunk the last -ENODATA of rn_tiers_history_read named: 1 with its
 * stream and offset, 0 when none did. */
int rn_tiers_history_missed(const rn_tiers *t, uint64_t *id, uint64_t *off);
/* Fetches the chunk of stream id at off into the read cache; done (may be
 * NULL) hears 0 once it is cached, -EAGAIN when too many fetches run, or
 * the store's -errno (-ENOENT: no such object). */
void rn_tiers_history_fetch(rn_tiers *t, uint64_t id, uint64_t off, rn_tiers_status_fn done,
                            void *arg);
/* Starts fetching the chunks of stream id's cold bytes [from, to) that are
 * neither cached nor coming, the first ones first, at most a quarter of
 * the read cache's chunks (the rest stays for the answers being sent) and
 * within the fetches allowed to run; reports nothing (a reader that still
 * misses one fetches it). No-op without a cold store. */
void rn_tiers_history_read_ahead(rn_tiers *t, uint64_t id, uint64_t from, uint64_t to);

/* Keeps a copy of stream id's chunk at off (a multiple of RN_CHUNK_BYTES)
 * in the read cache, in memory, unless it is cached or coming: read(ctx,
 * out) fills out with its RN_CHUNK_BYTES bytes and returns 0 (< 0: no
 * copy is kept). The flush keeps each chunk it moves so; a replica whose
 * stream file gives back a chunk another node moved (cluster mode) calls
 * it first, so that an answer begun on the file's copy reads its later
 * pieces from the cache. No-op without a cold store. */
void rn_tiers_history_keep(rn_tiers *t, uint64_t id, uint64_t off,
                           int (*read)(void *ctx, uint8_t *out), void *ctx);
/* Removes every history object of stream id, which is gone for good (a
 * destroyed stream: no fork reads it). Reports nothing: an object that
 * stays is an orphan for the sweep rn_tiers_watch_history sets up. Also
 * at recovery, where a network store is left alone. */
void rn_tiers_history_drop(rn_tiers *t, uint64_t id);
/* Sets how the tiers learn which streams the state still has, once the
 * engine is open: the sweep of staged parts then also walks the history
 * objects and drops the streams kept() denied at two walks parts_grace_ms
 * apart (a drop that failed, or that a crash kept from running, left
 * them). Ids are never reused, so a denied stream never comes back. In
 * cluster mode only with rn_tiers_sweep_owned. */
void rn_tiers_watch_history(rn_tiers *t, int (*kept)(void *ctx, uint64_t id), void *ctx);
/* Cluster mode, where every node shares the cold store: from now on
 * (before rn_tiers_start) the orphan sweep judges only objects of the
 * streams owns() says are this node's (their group's leader's: one node
 * per group), and before it removes any it asks confirm() about their
 * streams (n of them, repeats possible; borrowed for the call): done(arg,
 * 0) once this node still owns them and its state holds every change
 * committed before the call, else done(arg, -errno), and nothing is
 * removed this time (the objects stay suspects). Each doomed object is
 * judged again against the confirmed state before it goes. */
void rn_tiers_sweep_owned(rn_tiers *t, int (*owns)(void *ctx, uint64_t stream),
                          void (*confirm)(void *ctx, const uint64_t *streams, size_t n,
                                          rn_tiers_status_fn done, void *arg),
                          void *ctx);

typedef struct {
    uint64_t cached_bytes;          /* history objects in the read cache */
    uint64_t hits, misses, fetches; /* cache lookups and GETs */
    uint64_t fetch_failures;
    uint64_t flushed_bytes, flush_failures; /* objects written; failed puts or records */
} rn_tiers_history_stats;
void rn_tiers_history_stats_get(const rn_tiers *t, rn_tiers_history_stats *out);

#endif
