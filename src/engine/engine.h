/*
 * engine.h — streams as a deterministic state machine over the log.
 *
 * The engine owns every stream's metadata (content type, tail, closure, TTL
 * and expiry, idempotent-producer and Stream-Seq state) and decides its
 * bytes, which the tiers keep (tiers/tiers.h: the stream files, snapshot
 * bodies). A mutation arrives as an rn_op: the engine validates it against
 * the current state, and either answers at once (a refusal or an idempotent
 * repeat) or encodes it as a command, submits it to the log, and applies it
 * and answers only after the log sync that covers it. State visible to reads
 * is therefore always durable state.
 *
 * Mutations of one stream are serialized: while one is in the log, later
 * ones for the same stream wait in the stream's queue and are evaluated
 * after it applied (so producer and Stream-Seq checks always see the state
 * the previous write left). Mutations of different streams share log syncs.
 *
 * Everything here runs on the engine's loop thread (rn_engine_open may run
 * on a worker before the loop uses the engine), except the stream-file
 * writes of live appends, which the log's writer thread does after the
 * sync (see submit_command() in pipeline.c).
 */
#ifndef RN_ENGINE_H
#define RN_ENGINE_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "engine/cmdlog.h"
#include "engine/op.h"
#include "engine/state.h"
#include "tiers/streamfiles.h"
#include "tiers/tiers.h"
#include "util/buf.h"
#include "util/map.h"

typedef struct rn_engine rn_engine;

typedef struct {
    const char *data_dir;
    struct rn_tiers *tiers; /* the stream files and snapshot bodies (tiers/tiers.h) */
    uint64_t wal_segment_bytes;
    uint64_t checkpoint_bytes; /* checkpoint after this much log */
    /* A CREATE or APPEND with this much data or more is written once
     * (engine/ahead.c) where the log allows it; 0: never. */
    uint64_t large_append_bytes;
    /* Producer state (ext §5.4) is kept while its producer wrote within
     * producer_ttl_ms (0: 7 days); a stream holds at most producer_cap
     * producers (0: 4096), and admits another one by discarding the least
     * recently written producer once that one is idle for an hour (or
     * producer_ttl_ms, when shorter). */
    uint64_t producer_ttl_ms;
    uint64_t producer_cap;
    /* The loss an operator accepts (--accept-loss: a damage's name, see
     * engine/accept_loss.h), or NULL. */
    const char *accept_loss;
    /* History tiering (rn_engine_tier_history): appends are refused 503
     * COLD_BACKPRESSURE while the chunks due to move to the cold store
     * and not moved yet hold this many bytes or more. */
    uint64_t hot_bytes;
    /* The deployment's key (ext §2.4): mixed into every Stream-Incarnation
     * token this engine issues (rn_incarnation_for), so a data directory
     * made afresh hands out other tokens than the one it replaces. The
     * caller keeps it in the data directory (ops/datadir.c); 0 gives the
     * tokens of builds before the key, for directories they wrote. */
    uint64_t incarnation_key;
} rn_engine_config;

typedef void (*rn_stream_observer)(rn_stream *s, rn_stream_event ev, void *arg);
#define RN_ENGINE_MAX_OBSERVERS 4

typedef struct {
    uint64_t streams;
    uint64_t records_replayed;
    uint64_t torn_bytes;
    uint64_t checkpoint_streams;
} rn_recovery_stats;

/* Recovers state from data_dir (checkpoint + log replay) and opens the log.
 * cfg->tiers are open, not started (they outlive the engine). Returns NULL
 * with a message in err on failure. */
rn_engine *rn_engine_open(uv_loop_t *loop, const rn_engine_config *cfg, rn_recovery_stats *stats,
                          char *err, size_t errcap);

/* Registers an observer of applied stream changes (live reads,
 * subscriptions). Observers run on the loop thread in registration order. */
void rn_engine_observe(rn_engine *e, rn_stream_observer fn, void *arg);
/* Removes the observer registered with fn and arg (it must be). */
void rn_engine_unobserve(rn_engine *e, rn_stream_observer fn, void *arg);

/* Calls fn for every visible stream (applied, not soft-deleted, not
 * expired, not fenced by a bucket purge). fn must not mutate the engine. */
void rn_engine_foreach(rn_engine *e, void (*fn)(rn_stream *s, void *arg), void *arg);

/* The stream map's slot count: what a whole walk over it visits. */
size_t rn_engine_stream_slots(const rn_engine *e);

/* Where a walk in slices stands (zeroed: at its start). */
typedef struct {
    size_t cursor; /* the next slot of the stream map */
    size_t shape;  /* the map's capacity when the walk went through it */
} rn_engine_slice;

/* One slice of a walk over the visible streams, for walks spread over loop
 * turns: calls fn for those in the next `slots` (> 0) slots of the stream
 * map and advances *at. Returns 1 once the walk is complete, 0 while more
 * remains, and -1, visiting nothing, when the map was rebuilt (it grew)
 * since the walk's last slice: *at is reset and the caller starts over,
 * dropping what it summed. Streams created or removed between two slices
 * may be visited or not, and a removal can shift a neighbour of its slot
 * over the cursor (missed, or visited twice at the map's wrap): a walk's
 * sums are exact when nothing is created or removed during it, and off by
 * about the streams that were otherwise. Loop thread. */
int rn_engine_foreach_slice(rn_engine *e, rn_engine_slice *at, size_t slots,
                            void (*fn)(rn_stream *s, void *arg), void *arg);

/* 1 when the state references snapshot body (cold, key), or key is not of
 * a body's form (the tiers' orphan sweep asks; ctx-style for
 * rn_tiers_watch_bodies). Loop thread, once the engine is open. */
int rn_engine_body_referenced(rn_engine *e, int cold, const char *key);
/* 1 while the state has stream id (live, soft deleted or being created):
 * its history objects are still referenced (tiers.h: the orphan sweep). */
int rn_engine_stream_kept(rn_engine *e, uint64_t id);

/* Starts a mutation; op->done is called exactly once, possibly before this
 * returns. The op must stay valid until then. */
void rn_engine_submit(rn_engine *e, rn_op *op);

/* ---- appends whose body is still arriving (engine/arriving.c) ----
 * A large append may be submitted before its body is read (in.arriving):
 * the engine validates it and reserves its stream as for any append, then
 * writes the body to the stream's file a piece at a time while the caller
 * feeds it, and logs the append once the last byte is durable, so that
 * receiving the body and writing it overlap. Its data is written once
 * (cfg.large_append_bytes), so it is an append of a log that takes that;
 * with a content type that is not JSON (its stored form needs the whole
 * body; a JSON stream then refuses it as any other type, RN_ERR_CONTENT_TYPE)
 * and without Producer-Digest (the whole body's hash). done() may come while the body is
 * still arriving (a refusal from the request's head: the caller then stops
 * feeding), and comes after an incomplete end (RN_ERR_UNAVAILABLE, nothing
 * logged). Loop thread. */

/* Whether an append with a body of body_len bytes may be submitted before
 * its body arrives. */
int rn_engine_arriving_possible(const rn_engine *e, uint64_t body_len);
/* The next len > 0 bytes of an arriving body, before done(). Returns 0 for
 * more, or 1 when the caller should pause until in.arriving_resume (bytes
 * already on their way are still taken). */
int rn_engine_arriving_data(rn_engine *e, rn_op *op, const uint8_t *bytes, size_t len);
/* The arriving body is over, before done(): complete (every one of its
 * body_len bytes fed) or not (cut, too slow, too large). */
void rn_engine_arriving_end(rn_engine *e, rn_op *op, int complete);

/* Finds a readable stream: applied, not expired, not fenced by a bucket
 * purge. An expired stream is scheduled for deletion and reported as
 * absent. */
rn_stream *rn_engine_find(rn_engine *e, const char *path, size_t len);

/* True when a stream was ever created in namespace ns (len > 0 bytes), in
 * this data directory: a stream path's namespace is its bytes before its
 * first "/" (none without one). The engine records namespaces without
 * giving them a meaning; the bucket surface's buckets are namespaces
 * (extensions §1.2: a bucket exists from its first stream on). */
int rn_engine_namespace_exists(rn_engine *e, const char *ns, size_t len);

/* True when the namespace of a stream path (its bytes before the first
 * "/") is fenced by a bucket purge (answers 404 BUCKET_ERASED), or ns
 * itself with is_namespace. */
int rn_engine_path_erased(rn_engine *e, const char *path, size_t len, int is_namespace);

/* True when a stream at path exists but is soft-deleted (answers 410; a
 * fenced one is not: it answers as its bucket, BUCKET_ERASED). */
int rn_engine_is_gone(rn_engine *e, const char *path, size_t len);

/* Renews the stream's TTL window (reads and writes do; HEAD does not). */
void rn_engine_touch(rn_engine *e, rn_stream *s);
/* Cluster mode: from now on rn_engine_touch also records a stream with a
 * TTL, once until it is taken, for rn_engine_take_touches, so that the replicas can
 * renew the windows of streams read elsewhere (the leader decides expiry:
 * a stream read only on a follower stays). */
void rn_engine_share_touches(rn_engine *e);
/* Moves up to cap ids of the streams touched here since they were last
 * taken into ids, oldest first; returns how many. A stream deleted since
 * may be among them. */
size_t rn_engine_take_touches(rn_engine *e, uint64_t *ids, size_t cap);
/* Renews the TTL window of stream id (another replica read it), without
 * recording it again; an id no stream has is ignored. */
void rn_engine_touch_id(rn_engine *e, uint64_t id);

/* Reads stream bytes from offset, at most max bytes, appending to out. With
 * `whole_messages` on a JSON stream, the range ends on a message boundary
 * and holds at least one whole message when any exists past offset (it may
 * then exceed max). On a replica filling a gap (replica.c) the range stops
 * short of the gap; -EAGAIN when it starts inside it (or no whole message
 * comes before it). On a single node the range likewise stops short of a
 * block a read found damaged (engine/damage.c); -EUCLEAN when it starts in
 * one (or no whole message comes before it), or when a block it reads is
 * found damaged now. Returns bytes read or -errno. */
long rn_engine_read(rn_engine *e, rn_stream *s, uint64_t offset, size_t max, int whole_messages,
                    rn_buf *out);

/* How many bytes rn_engine_read would read, found without reading them
 * (a JSON stream's range is cut where rn_engine_read cuts it: its last
 * bytes are scanned for a message end). Returns the length or -errno. */
long rn_engine_read_length(rn_engine *e, rn_stream *s, uint64_t offset, size_t max,
                           int whole_messages);

/* Reads the bytes [offset, offset + len) of the stream with internal id
 * `id` into out, for an answer sent a piece at a time that began when the
 * stream had that id and incarnation and the range lay at or above its
 * retained offset and below its tail; only when they are still the bytes
 * the answer began with. Between two pieces the stream may have been
 * deleted (its id is gone, or it is soft-deleted), re-created (another
 * id), rewritten (another incarnation: its files were cut, and later
 * appends write over the old bytes), or had its retention advanced past
 * offset (the bytes below it are punched out: reads give zeros). All of
 * these are applied on this (the loop) thread, like this call; bytes below
 * the tail change in no other way (appends, which the log's writer thread
 * writes, land at the tail or past it). Returns 0, -ESTALE when the bytes
 * may have changed (the answer must end), or -errno. With may_block 0 the
 * stream files are read from the page cache only: -EINPROGRESS when a
 * byte is not there (rn_engine_warm then brings the missed range in). */
int rn_engine_read_again(rn_engine *e, uint64_t id, uint64_t incarnation, uint64_t offset,
                         size_t len, int may_block, uint8_t *out);

/* Who missed the page cache: a reader (rn_engine_read_again with
 * may_block 0), the scrub, or the history flush (tiering.c). */
typedef enum { RN_WARM_FOR_READ, RN_WARM_FOR_SCRUB, RN_WARM_FOR_HISTORY } rn_warm_for;
/* Brings the stream file range the last page-cache-only read of `who`
 * missed (-EINPROGRESS; e->read_miss) into the page cache on a worker
 * thread, then calls done(arg) on the loop thread, unless cancelled
 * first. Counted in rn_metric.reads_warmed, scrub_warmed or
 * history_warmed. Returns the warm in flight, or NULL when none could be
 * started (read blocking instead). The engine may be closed meanwhile:
 * the warm touches nothing of it. */
typedef struct rn_engine_warm rn_engine_warm;
rn_engine_warm *rn_engine_warm_missed(rn_engine *e, rn_warm_for who, void (*done)(void *arg),
                                      void *arg);
/* done will not be called; the warm frees itself once its worker is done. */
void rn_engine_warm_cancel(rn_engine_warm *w);

/* Whether offset is a valid position for reads and for snapshot, retention
 * and fork offsets: <= tail and, for JSON streams, on a message boundary
 * (the retained offset is one without a read: see `retained`). Returns 1
 * when it is, 0 when it is not, or -errno when the byte before it could not
 * be read: the boundary is then unverified, which callers answer with a
 * retryable refusal, never as "not a boundary". */
int rn_engine_offset_valid(rn_engine *e, rn_stream *s, uint64_t offset);

/* Where a sweep stands (zeroed: a pass starts). */
typedef struct {
    rn_engine_slice at;
    int pins; /* this pass asks about orphan pins (no earlier round is out) */
} rn_engine_sweep;

/* One slice of a sweep pass over every stream, for passes spread over loop
 * turns (a pass over a million streams in one turn held every request):
 * for the streams in the next `slots` (> 0) slots of the stream map,
 * deletes the expired ones, discards idle producer state (raising the
 * streams' epoch floors) and asks about orphan pins (apart.c). Returns 1
 * when the pass is complete (*sw then starts the next pass), else 0. A
 * pass that finds the map rebuilt (it grew) starts over; a stream created
 * or removed between slices may be passed over until the next pass. */
int rn_engine_sweep_slice(rn_engine *e, rn_engine_sweep *sw, size_t slots);
/* A whole sweep pass at once (tests). */
void rn_engine_sweep_expired(rn_engine *e);

/* Forks apart from their source (cluster mode; engine/apart.c). A pin
 * whose fork its group's leader does not know is released once it is this
 * old: a fork's create is logged within a few seconds of its pin. */
#define RN_PIN_GRACE_MS 10000
/* On the leader of the source's group: runs a fork create's checks of its
 * source (ask) and logs the fork's PIN; done(arg, answer) once, on the
 * loop thread. */
void rn_engine_pin(rn_engine *e, const rn_fork_pin_ask *ask, rn_fork_pin_done done, void *arg);
/* On the leader of the source's group: logs the release of fork_id's pin
 * of source_id (nothing when there is none). */
void rn_engine_unpin(rn_engine *e, uint64_t source_id, uint64_t fork_id);
/* Whether fork_id is a fork of source_id here (created or being created). */
int rn_engine_fork_of(const rn_engine *e, uint64_t source_id, uint64_t fork_id);
/* On the leader of fork_id's group (a bucket purge, engine/cutforks.c):
 * when fork_id still reads source_id (a fork apart from it), logs its CUT
 * at offset (RN_CUT_SOURCE: the source is purged), then asks the same of
 * the forks apart of it and of its forks here, each at where its chain
 * reaches the cut; done(arg, 1 | 0 | -1) once all answered (may be from
 * inside: 0 not its fork, -1 not the leader or a fork not answered). */
void rn_engine_cut(rn_engine *e, uint64_t source_id, uint64_t fork_id, uint64_t offset,
                   rn_fork_cut_done done, void *arg);

/* Answers an append before its body arrives (ext §5.5), when the answer
 * depends on the headers alone: op (kind APPEND, with producer headers and
 * Stream-Incarnation; no body) is evaluated against the applied state of an
 * idle stream whose incarnation matches. Returns 1 and fills op's outcome
 * (result, stream, ...; done() is not called) when it is a producer repeat
 * (RN_OK_DUPLICATE) or a key conflict (RN_ERR_KEY_CONFLICT); returns 0 and
 * changes nothing otherwise: the write is then submitted with its body. */
int rn_engine_answer_early(rn_engine *e, rn_op *op);

/* Answers a snapshot publish before its body is stored (op: kind PUBLISH
 * with the offset, content type, digest and size, no body key), when the
 * stream's latest snapshot decides it: a repeat of it (RN_OK_PUBLISHED
 * with `repeat`) or a conflict with it (RN_ERR_SNAPSHOT_CONFLICT), the
 * stream idle and everything the protocol checks first passed. Returns 1
 * and fills op's outcome (done() is not called): the body need not be
 * uploaded; 0 otherwise, changing nothing: store the body, then submit. */
int rn_engine_publish_early(rn_engine *e, rn_op *op);

/* ---- history in the cold store (tiering.c, tiers/history.c) ----
 * A stream's bytes below its cold_end (state.h) are read from the tiers'
 * cache of cold objects: a read whose chunk is not cached fails -ENODATA
 * (rn_engine_read, rn_engine_read_length, rn_engine_read_again,
 * rn_engine_offset_valid), and the caller fetches it with
 * rn_engine_cold_fetch and runs again. */

/* Starts moving every stream's whole chunks below its tail to the cold
 * store (the tiers need one), with cfg.hot_bytes as the hot budget. Once,
 * after the engine opened and the tiers started; single node only. */
void rn_engine_tier_history(rn_engine *e);
/* Bytes of chunks due to move and not moved yet, as of the last tick. */
uint64_t rn_engine_cold_backlog(const rn_engine *e);
/* 0 when stream s's bytes [off, off + len) can be read now, and then the
 * cold chunks of the next len bytes start coming into the read cache (a
 * catch-up reader's next read); -ENODATA when some are cold and not in the
 * read cache (the miss is remembered for rn_engine_cold_fetch). A range
 * below the tail. */
int rn_engine_read_ready(rn_engine *e, rn_stream *s, uint64_t off, size_t len);
/* Fetches the chunk the last -ENODATA read missed into the read cache
 * (and reads the next one of its stream ahead); done (may be NULL) hears
 * 0 once it is there, or -errno: -EAGAIN when the store is saturated,
 * another when it failed (tiers.h). */
void rn_engine_cold_fetch(rn_engine *e, void (*done)(void *arg, int status), void *arg);

/* ---- bucket purges (purge.c; the fences themselves: state.h, fences.c) ----
 * A purge fences a namespace for good with a FENCE command through the
 * log: from then on no stream is created there (RN_ERR_BUCKET_ERASED,
 * decided at apply), nothing there changes (validation refuses it alike),
 * and its streams are invisible (rn_engine_find, rn_engine_foreach). They
 * go one PURGE command each, logged by whoever leads them, with every byte
 * they own; forks elsewhere lose the bytes they read through them
 * (fences.c). */

/* Records the fence of namespace ns (len > 0 bytes, no "/"): on a single
 * node (group < 0) covering every stream; in a replicated log covering
 * group `group`'s streams, through that group's log (which only its leader
 * takes). done(arg, RN_OK_FENCED) once it applied (at once when the fence
 * covers that scope already), else a refusal: RN_ERR_NO_LEADER,
 * RN_ERR_LOG_BUSY or RN_ERR_DISK_FULL (nothing logged) or
 * RN_ERR_UNAVAILABLE (it may still apply). done runs on the loop thread,
 * possibly before this returns. */
void rn_engine_fence(rn_engine *e, const char *ns, size_t len, int group,
                     void (*done)(void *arg, rn_result r), void *arg);
/* The fence of namespace ns, or NULL. */
const rn_fence *rn_engine_fence_of(rn_engine *e, const char *ns, size_t len);
/* Starts the purge driver (once, on the loop, after the engine opened):
 * every 100 ms while fenced streams are left, the ones this engine's log
 * takes now (all of them on a single node; a group's on its leader) get
 * their PURGE commands, at most 1024 in flight; once none is left, a
 * single node writes a checkpoint, which drops the log segments that held
 * their bytes. */
void rn_engine_purge_start(rn_engine *e);
/* Stops the driver (its timer closes: run the loop afterwards). */
void rn_engine_purge_stop(rn_engine *e);
/* Calls fn for every stream a fence covers that is still there (not
 * purged yet; pending creates excluded). fn must not mutate the engine. */
void rn_engine_foreach_fenced(rn_engine *e, void (*fn)(rn_stream *s, void *arg), void *arg);
/* Calls fn for every namespace (a bucket: state.h), in no order. */
void rn_engine_foreach_namespace(rn_engine *e, void (*fn)(const char *ns, size_t len, void *arg),
                                 void *arg);

/* Fault injection for tests: the next n log syncs fail. */
void rn_engine_inject_sync_failures(rn_engine *e, int n);

/* True while mutations are in the log or queued. */
int rn_engine_busy(const rn_engine *e);

/* Writes a final checkpoint (when the log is idle) and releases everything. */
void rn_engine_close(rn_engine *e);

/* Selects streams for manifests (a replicated log's group). */
typedef int (*rn_stream_pick)(const rn_stream *s, void *arg);

/* ---- backups and restores (backup_image.c) ----
 * A backup is the state image of one instant (the checkpoint's) and a copy
 * of the bytes it names; a restore is that image, with every stream's
 * history rewritten (ext §2.4), as a new data directory's checkpoint. */

/* What a backup copies of one stream: its own bytes that retention did
 * not give back, [data_from, tail); its append index, entries [0,
 * appends); and its latest snapshot's body, when it has one. */
typedef struct {
    uint64_t id, incarnation;
    uint64_t data_from, tail, appends;
    int has_body, body_cold;
    char body_key[RN_TIERS_KEY_MAX];
    uint64_t body_size;
} rn_backup_stream;

/* The state as of now (loop thread): the checkpoint image of every
 * applied stream and namespace into image (empty), and what to copy of
 * each of those streams into *streams (malloc'd; *n entries). */
void rn_engine_backup_state(rn_engine *e, rn_buf *image, rn_backup_stream **streams, size_t *n);
/* Appends to out the stream's bytes [from, to) (index = 0) or its index
 * entries [from, to) as u64 LE (index = 1), at most RN_REPLICA_FETCH_MAX
 * bytes, while they are still the ones rn_engine_backup_state named.
 * Bytes moved to the cold store (history tiering), before or since the
 * instant, come from the tiers' read cache. Returns 0, -ESTALE when they
 * may have changed since (the stream was deleted, rewritten, or its
 * retention advanced past from), -ENODATA when cold bytes of the range are
 * not cached (fetch them with rn_engine_cold_fetch and read again), or
 * -errno. */
int rn_engine_backup_read(rn_engine *e, const rn_backup_stream *b, int index, uint64_t from,
                          uint64_t to, rn_buf *out);

/* A restore under way: a backup's image, decoded. */
typedef struct rn_restore rn_restore;
/* Decodes an image (rn_engine_backup_state's); *streams as there. NULL
 * when it does not decode. */
rn_restore *rn_restore_decode(const uint8_t *image, size_t len, rn_backup_stream **streams,
                              size_t *n);
/* The serials r's tokens must start at or above (ids and serials the
 * source had issued when the backup was taken). */
uint64_t rn_restore_min_serial(const rn_restore *r);
/* Rewrites the history of every stream of r (ext §2.4: a new incarnation
 * from serial serial_base + i for the i-th stream in id order, the token
 * before as Stream-Previous-Incarnation with the tail as
 * Stream-Inherited-Offset, producers closed by history), then makes it
 * data directory dir's checkpoint, with a log head naming no segment yet.
 * The stream files and snapshot bodies must be in dir and durable. Equal
 * arguments give equal results. r must not be placed. Returns 0, -EINVAL
 * when serial_base is below rn_restore_min_serial, or -errno. */
int rn_restore_commit(rn_restore *r, const char *dir, uint64_t serial_base, int64_t now_ms);

/* A restore into a cluster. The group of a stream path (1..256 groups). */
typedef unsigned (*rn_restore_group_fn)(void *arg, const char *path, size_t len);
/* Gives every stream of r a new id in the cluster id layout
 * (cluster/placement.h) with node byte 0, which no node issues: the k-th
 * stream in id order (k from 0) becomes ((k + 1) << 16) | its path's group.
 * new_ids[i] receives the new id of streams[i] (n of them, as
 * rn_restore_decode listed them). A fork whose source lands in another
 * group becomes a fork apart from it, held by a pin of the source (time 0:
 * its fork exists, so the orphan sweep keeps it). Equal arguments give
 * equal results. */
void rn_restore_place(rn_restore *r, rn_restore_group_fn group_of, void *arg,
                      const rn_backup_stream *streams, size_t n, uint64_t *new_ids);
/* Renames the snapshot body of stream id of r (which has a snapshot) to
 * key (shorter than RN_TIERS_KEY_MAX): its copy is written under that
 * name. */
void rn_restore_body_key(rn_restore *r, uint64_t id, const char *key);
/* Rewrites every stream's history as rn_restore_commit does, in memory;
 * once r is placed, the i-th stream's serial is ((serial_base + i) << 16) |
 * its group (node byte 0) and serial_base is not checked. 0 or -errno. */
int rn_restore_rewrite(rn_restore *r, uint64_t serial_base, int64_t now_ms);
/* Appends the manifest (as rn_engine_manifest's) of the streams of r that
 * pick selects (group `group`'s), of every namespace and of the fences
 * (every fence of a restore covers every group). */
void rn_restore_manifest(const rn_restore *r, rn_stream_pick pick, void *arg, unsigned group,
                         rn_buf *out);
void rn_restore_free(rn_restore *r);

/* ---- replicated mode (cluster mode: cluster/raft_log.c) ----
 *
 * A replicated engine has no log of its own: no recovery, no checkpoints.
 * Its state comes from the replicated log, which restores manifests
 * (rn_engine_restore) and applies committed commands through the engine's
 * applier, on every replica, including commands no op of this engine
 * waits for. Mutations go to the log set with rn_engine_set_log. */

/* An engine over cfg's tiers with an empty state and no log. */
rn_engine *rn_engine_open_replicated(uv_loop_t *loop, const rn_engine_config *cfg);
/* The applier a log gives the commands it made durable (cmdlog.h). */
rn_cmdlog_applier rn_engine_applier(rn_engine *e);
/* Sets the log mutations are submitted to (once, before any submit); the
 * log stays its owner's. */
void rn_engine_set_log(rn_engine *e, rn_cmdlog *log);
/* A command applied through the applier that no op of this engine waited
 * for (another replica's): tells observers what it left (a) and re-runs
 * mutations a deletion orphaned. */
void rn_engine_applied_elsewhere(rn_engine *e, const rn_applied *a);

/* Whether a committed command can be applied now: makes its stream's
 * files and reserves disk blocks for its data and index entry, so that
 * applying it cannot fail for lack of space (nothing else changes; a
 * command without data needs nothing). Returns 0, or -errno (-ENOSPC: the
 * disk is full): the log then holds the command back, unapplied. */
int rn_engine_reserve_apply(rn_engine *e, const rn_cmd *cmd);

/* Makes the bytes written to stream id's files durable (a manifest names
 * them without holding them). Safe on any thread. Returns 0 or -errno. */
int rn_engine_sync_stream(const rn_engine *e, uint64_t id);

/* The stream with this id whatever its status (pending, soft-deleted,
 * expired), or NULL (replicated mode: what a peer fetch concerns). */
const rn_stream *rn_engine_stream(rn_engine *e, uint64_t id);

/* Appends a manifest of the applied streams pick selects (group `group`'s
 * streams: metadata, producers, offsets; never stream bytes, which stay in
 * the stream files), of every namespace, and of the fences that cover the
 * group (a section present only when there are any, so a manifest of a
 * state without fences reads as one of a build before them), then of the
 * subscriptions' state when this group carries it (subs_state.c). */
void rn_engine_manifest(rn_engine *e, rn_stream_pick pick, void *arg, unsigned group, rn_buf *out);
/* Replaces the streams pick selects (group `group`'s) by those of a
 * manifest: streams it does not hold are deleted (readers end, files go),
 * the others take its state in place (their readers stay, and hear of a
 * changed tail or history), new ones are added; namespaces are added, the
 * manifest's fences come to cover the group (none is ever removed), and
 * its subscriptions' state replaces the group's (none: the group carries
 * none).
 * Every stream of the manifest, and every fork source it names, must be
 * one pick selects. Returns 0, or -1 for a manifest that does not decode
 * (nothing changed). */
int rn_engine_restore(rn_engine *e, rn_stream_pick pick, void *arg, unsigned group,
                      const uint8_t *m, size_t len);

/* ---- replicated subscriptions (subs_state.c) ----
 * In replicated mode the subscriptions module keeps its whole state in
 * one group's log (a SUBS command per change, each replacing the one
 * before) and in that group's manifests, instead of a file. */

/* Proposes state (len > 0 bytes, copied) as the subscriptions' state
 * through group `group`'s log. done(arg, 0) once it applied here;
 * -EAGAIN when nothing was logged (this replica does not lead the group,
 * its log is busy, or it stopped applying); -EIO when the outcome is
 * unknown (it may still apply). Replicated mode only; done runs on the
 * loop thread, possibly before this returns. */
void rn_engine_subs_put(rn_engine *e, unsigned group, const uint8_t *state, size_t len,
                        void (*done)(void *arg, int status), void *arg);
/* The subscriptions' state this replica applied last (a SUBS command's or
 * a manifest's); *len 0 when none. Valid until the next apply. */
const uint8_t *rn_engine_subs_state(const rn_engine *e, size_t *len);
/* Whether this engine's log takes the commands of the stream at key now
 * (always on a single node; a replicated log: this replica leads the
 * key's group and applied everything earlier leaders committed). */
int rn_engine_leads(const rn_engine *e, const char *key, size_t len);

/* Gaps: a restored manifest may name bytes this replica's files lack (it
 * was behind, and the leader sent its snapshot). rn_engine_restore finds
 * them, per stream: data and append-index ranges, recorded beside the
 * stream files until filled (tiers/streamfiles.h); reads of a gap's bytes
 * fail -EAGAIN (a catch-up answer stops short of it), and the replica
 * fetches them from a peer (cluster/fetch.c) and fills them in order. */
#define RN_REPLICA_FETCH_MAX (8u << 20) /* bytes one fill or one copy moves */
/* Stream id's gap into *out: 1 when it has one, else 0. */
int rn_engine_gap(rn_engine *e, uint64_t id, rn_streamfiles_gap *out);
/* Calls fn(id, fn_arg) for every stream pick selects that has a gap;
 * first, a fork apart from a source whose group this replica does not
 * host gets its inherited range as its gap (engine/inherit.c). */
void rn_engine_gaps(rn_engine *e, rn_stream_pick pick, void *arg, void (*fn)(uint64_t, void *),
                    void *fn_arg);
/* Fills the start of the gap: len bytes fetched for [off, off + len),
 * off its first byte (or index entries k.. of the index gap); the bytes are
 * synced before the record shrinks. 0, -ESTALE when the gap no longer
 * starts there (deleted, refilled, cut), or -errno. */
int rn_engine_gap_fill_data(rn_engine *e, uint64_t id, uint64_t off, const uint8_t *data,
                            size_t len);
int rn_engine_gap_fill_index(rn_engine *e, uint64_t id, uint64_t k, const uint64_t *ends, size_t n);
/* A peer's copy (what gaps are filled from): stream id's bytes [from, to)
 * as a read gives them (below a fork offset its source's, below the cold
 * end the cold store's: -ENODATA when not cached), or its index entries
 * [kfrom, kto) as u64 LE, appended to out (at most RN_REPLICA_FETCH_MAX
 * bytes). 0, -ENOENT (no such stream), -ERANGE (below its retained offset
 * or past its tail), -EAGAIN (in this replica's gap, its source not here,
 * or damaged here: then it becomes part of the gap), or -errno. */
int rn_engine_replica_bytes(rn_engine *e, uint64_t id, uint64_t from, uint64_t to, rn_buf *out);

/* ---- damaged stream data (engine/damage.c) ----
 *
 * Every read of a stream file checks the blocks it touches against their
 * checksums (tiers/blocksums.h). A damaged block is never served: reads
 * of it fail -EUCLEAN on a single node (answered 500 STREAM_DATA_DAMAGED),
 * and -EAGAIN in a cluster, where the block joins the stream's gap and is
 * fetched again from a peer (whose own read checks it before it answers). */
/* Calls fn(arg, id) when stream id got a gap for damaged bytes, or for a
 * fork's inherited range it keeps (inherit.c) (cluster mode: the fetcher
 * fills it). Loop thread. */
void rn_engine_on_damage(rn_engine *e, void (*fn)(void *arg, uint64_t id), void *arg);
/* The scrub: checks up to `budget` more bytes of the streams' own data,
 * walking every stream in turn and starting over when done
 * (rn_metric.scrub_passes); damage is handled as a read's would be.
 * It reads the page cache only: at the first byte not there it stops, has
 * a worker read the range in (rn_engine_warm) and checks nothing more
 * until that is done, so it never waits for the disk on the loop thread.
 * Returns the bytes checked. Loop thread. */
uint64_t rn_engine_scrub(rn_engine *e, uint64_t budget);
int rn_engine_replica_index(rn_engine *e, uint64_t id, uint64_t kfrom, uint64_t kto, rn_buf *out);

#endif
