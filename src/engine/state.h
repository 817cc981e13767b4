/*
 * state.h — the engine's deterministic state machine: every stream's
 * metadata (streams, producers, forks, snapshots, namespaces) and apply(),
 * which changes it by one command.
 *
 * No I/O, no libuv, no clock: apply() reads time only from the command
 * (cmd->time_ms), and what a command needs done outside the state (its
 * data written to the stream files, files removed or cut, a snapshot body
 * deleted, observers told) it asks of an rn_effects the caller passes, at
 * the point of the change. So any command log drives it the same way:
 * recovery replays the local log's records through it, the live path
 * applies each command after the log's sync, and a cluster follower can
 * apply entries it never proposed. Two replicas that apply the same
 * commands from the same state reach the same state.
 *
 * Everything here runs on one thread (the engine's loop thread).
 */
#ifndef RN_ENGINE_STATE_H
#define RN_ENGINE_STATE_H

#include <stddef.h>
#include <stdint.h>

#include "engine/command.h"
#include "util/buf.h"
#include "util/map.h"

#define RN_MAX_FORK_DEPTH 64
#define RN_INCARNATION_MIN (1ull << 52)
#define RN_INCARNATION_MAX ((1ull << 53) - 1)

struct rn_op;

/* A producer write's identity (ext §5.2): its Producer-Digest, or none.
 * Two writes with one key are the same write only when their identities
 * are equal. */
typedef struct {
    uint8_t has_digest;
    uint8_t digest[32];
} rn_write_identity;

/* How a producer's current epoch stands against history rewrites
 * (ext §2.4: a rewrite closes every epoch claimed before it). */
typedef enum {
    RN_EPOCH_OPEN,      /* no rewrite since the epoch was claimed */
    RN_EPOCH_REWRITTEN, /* closed by a rewrite; history_seq survived */
    RN_EPOCH_LOST,      /* closed by a rewrite; which seqs survived is unknown */
} rn_epoch_history;

/* One idempotent producer's state in a stream (PROTOCOL §5.2.1, ext §5).
 * Everything here is changed only by apply(), so log replay rebuilds it. */
typedef struct rn_producer {
    char *id;
    size_t id_len;
    uint64_t epoch;    /* the current epoch */
    uint64_t last_seq; /* its highest applied seq */
    int64_t last_ms;   /* log time of the newest applied write (expiry, §5.4) */
    /* The newest applied write, (epoch, last_seq): identity and receipt. */
    rn_write_identity newest;
    uint64_t newest_start, newest_end; /* where its bytes start and end */
    uint8_t newest_closed;             /* it closed the stream */
    rn_write_identity claim;           /* the write (epoch, 0) that opened the epoch */
    uint8_t above_floor;               /* opened or lifted above the stream's epoch floor */
    /* The claim closed closed_epoch: every seq up to closed_seq applied. */
    uint8_t closes_epoch;
    uint64_t closed_epoch, closed_seq;
    uint8_t history;      /* rn_epoch_history of the current epoch */
    uint64_t history_seq; /* RN_EPOCH_REWRITTEN: the highest seq that survived */
} rn_producer;

/* A fork in another group that reads a stream below its fork offset: the
 * fork's id and the time of the PIN that recorded it. */
typedef struct {
    uint64_t fork_id;
    int64_t time_ms;
} rn_pin;

/* A stream. Fields are read-only outside the engine; the state machine
 * (state.c, apply.c) changes all but the ones owned elsewhere below. */
typedef struct rn_stream {
    char *path;
    size_t path_len;
    uint64_t id; /* unique for the data directory's lifetime; never reused */
    /* Stream-Incarnation (extensions §2.4): a token in [2^52, 2^53) issued
     * at create, never issued twice in one data directory. */
    uint64_t incarnation;
    char *content_type;
    size_t content_type_len;
    int json;              /* content type is application/json */
    int64_t ttl_s;         /* -1: none */
    int64_t expires_at_ms; /* -1: none */
    int64_t created_ms;
    int64_t last_access_ms; /* TTL window start (not persisted; see ARCHITECTURE) */
    uint64_t tail;          /* bytes stored; the next append's offset */
    int closed;
    char *last_seq; /* Stream-Seq of the last append carrying one, or NULL */
    size_t last_seq_len;
    rn_map producers; /* id -> rn_producer */
    /* Epoch floor (ext §5.4): the highest epoch of any producer state
     * discarded from this stream, when any was. */
    int has_floor;
    uint64_t epoch_floor;
    /* Forks: bytes below fork_offset are the source's (read through it,
     * never copied); the stream's own bytes start at fork_offset. */
    struct rn_stream *source; /* NULL unless a fork */
    uint64_t fork_offset;     /* 0 unless a fork */
    uint32_t fork_depth;      /* 0 for a stream that is not a fork */
    uint32_t refcount;        /* forks whose source this stream is */
    int soft_deleted;         /* deleted while forks (or pins) still read it: 410 */
    /* A fork whose source is in another group (cluster mode): the source's
     * id, `source` staying NULL; the source's pin for this fork's id holds
     * it there (rn_state_fork_source finds it). 0 otherwise. */
    uint64_t apart_source;
    /* Forks in other groups that read this stream (PIN commands), in the
     * order pinned: counted as forks are (rn_stream_held). */
    rn_pin *pins;
    uint32_t npins;
    uint64_t appends; /* entries in the append index (tiers/streamfiles.h) */
    /* Retention (ext §2.2): reads below `retained` answer 410. On a JSON
     * stream it is always a message boundary, known without reading the
     * cleared byte before it: a retention offset is verified before it is
     * logged, a fork starts at its source's retained offset or its verified
     * fork offset, and a rewrite lowers it to the tail. */
    uint64_t retained;
    /* History tiering (tiers/history.c): the stream's own bytes below
     * cold_end are objects of the cold store, one per chunk of the grid
     * (cold_end is a multiple of RN_CHUNK_BYTES), and no longer in its
     * data file; chunks wholly below the retained offset that no fork
     * read when they were skipped have no object. 0: all of them are in
     * the file. */
    uint64_t cold_end;
    /* The latest visible snapshot (ext §2), when present. */
    struct {
        int present;
        uint64_t offset;
        uint8_t digest[32];
        uint64_t size;
        char *content_type;
        size_t content_type_len;
        char *key; /* object key in the blob store below */
        int cold;  /* in the cold store (else the local snapshot store) */
    } snapshot;
    /* History rewrites (ext §2.4): the token before the last rewrite and the
     * offset below which bytes are unchanged since, when known. */
    int has_previous;
    uint64_t previous_incarnation;
    uint64_t inherited_offset;
    int written_since_rewrite;
    int touched;      /* changed by apply since open (recovery cuts its files) */
    int touch_shared; /* read here since the last rn_engine_take_touches (cluster) */
    /* owned by the mutation pipeline (pipeline.c); apply only reads
     * pending_create, and adopts a pending stream its CREATE names */
    int pending_create; /* created in the log, not yet applied: invisible */
    int busy;           /* a mutation of this stream is in the log */
    int has_files;      /* its files were made (or found) in this process */
    struct rn_op *queue_head, *queue_tail;
    /* owned by src/live/ (live.c) */
    void *live_room;       /* the list of this stream's live readers, or NULL */
    uint32_t live_readers; /* live readers registered */
    /* replicated mode (engine/replica.c): bytes [gap_from, gap_to) and
     * append-index entries [gap_kfrom, gap_kto) of the stream's own range
     * are not in the local files yet (a restored manifest named them; they
     * are fetched from a peer). Empty ranges: none. */
    uint64_t gap_from, gap_to, gap_kfrom, gap_kto;
    /* replicated mode (engine/inherit.c): a fork apart from its source
     * whose bytes below its fork offset this replica keeps in its own file
     * (it does not host the source's group); the gap covers what is not
     * there yet */
    int inherit;
    uint32_t damaged_blocks; /* of the gap: damaged blocks being repaired (engine/damage.c) */
} rn_stream;

/* What observers hear about applied changes (never during recovery). */
typedef enum {
    RN_STREAM_CREATED,   /* a create was applied */
    RN_STREAM_CHANGED,   /* data appended and/or the stream closed */
    RN_STREAM_REWRITTEN, /* its history was rewritten (a new incarnation) */
    RN_STREAM_REMOVED,   /* about to disappear (deleted or expired) */
} rn_stream_event;

/* A namespace's permanent fence (a bucket purge, engine/fences.c): its
 * streams are gone or going, and none is ever created there again. In a
 * replicated log each group records the fence in its own log, so the
 * fence says which groups' streams it covers (a group's apply consults
 * only its own bit: replicas that applied the groups' logs in different
 * interleavings still agree on every group). */
typedef struct {
    char *ns; /* the namespace (key in rn_state.fences) */
    size_t ns_len;
    int64_t time_ms;    /* the first FENCE's time */
    uint8_t all;        /* covers every stream (a single node's log, a restore) */
    uint8_t groups[32]; /* else the groups (ids' low byte) covered: a bitmap */
} rn_fence;

/* All streams, by path (pending creates included) and by internal id. */
typedef struct {
    rn_map by_path;    /* path -> rn_stream */
    rn_map by_id;      /* id -> rn_stream */
    uint64_t next_id;  /* above every id and rewrite serial issued */
    rn_map namespaces; /* namespace -> itself (a malloc'd copy) */
    rn_map fences;     /* namespace -> rn_fence */
    /* The subscriptions' state a replicated log carries (the last SUBS
     * command's, or a manifest's): empty when none; subs_group is the
     * group whose log carries it (engine/subs_state.c). */
    rn_buf subs;
    unsigned subs_group;
} rn_state;

/* What apply() needs done outside the state. apply() calls these
 * synchronously, where the change happens, and the caller decides how:
 * recovery writes a command's data, the live path finds it written by the
 * log already, a follower would write it at apply. ctx is passed back. */
typedef struct {
    void *ctx;
    /* The data of a CREATE or APPEND c: c->data_len > 0 bytes at offset
     * c->offset of stream id (c->data, or, stored ahead, already in the
     * stream file with c->block_sums), append k of its index. Returns 0
     * or -errno (apply then fails with it; the stream's state is as before
     * the command for an APPEND, and created without the data for a
     * CREATE). */
    int (*store)(void *ctx, uint64_t id, const rn_cmd *c, uint64_t k);
    /* Retention advanced on stream id: bytes [from, from+len) may be given
     * back (len 0: none may, because forks read them or they are not the
     * stream's own). */
    void (*retain)(void *ctx, uint64_t id, uint64_t from, uint64_t len);
    /* Stream id's bytes [from, from+len) moved to the cold store (a TIER
     * command): their disk blocks are given back. */
    void (*tiered)(void *ctx, uint64_t id, uint64_t from, uint64_t len);
    /* A rewrite keeps stream s's bytes below keep (< s->tail): its files
     * are cut there. Returns how many append-index entries remain (each
     * ends at or below keep; an append the cut splits ends at keep): the
     * index lives in the stream files, the state only counts it. */
    uint64_t (*cut)(void *ctx, const rn_stream *s, uint64_t keep);
    /* A snapshot body that stream s's snapshot no longer references (a
     * later one superseded it, or s is destroyed). */
    void (*drop_body)(void *ctx, const rn_stream *s, int cold, const char *key);
    /* Stream s disappears for readers (deleted, or soft-deleted: it stays
     * for its forks): observers hear RN_STREAM_REMOVED. */
    void (*removed)(void *ctx, rn_stream *s);
    /* Stream s is being destroyed: out of the tables, freed right after
     * this returns. Its files and snapshot body go; mutations queued on it
     * must be re-run by their owner. */
    void (*destroyed)(void *ctx, rn_stream *s);
    /* Stream s is about to be destroyed by a bucket purge (a PURGE
     * command): what a delete leaves to later sweeps goes now too (its
     * staged snapshot parts, of every incarnation). */
    void (*purged)(void *ctx, const rn_stream *s);
} rn_effects;

/* What one applied command left, for its answer and its observers; filled
 * by rn_state_apply() so that it can be read later than the apply (a
 * cluster answers a proposal after later entries may have applied). */
typedef struct {
    uint64_t stream_id;
    int notify;            /* observers hear `event` once the command is answered */
    rn_stream_event event; /* CREATED, CHANGED or REWRITTEN */
    uint64_t tail;         /* the stream after the command */
    int closed;
    /* an APPEND with a producer: the producer's state after it (id unset) */
    int has_producer;
    rn_producer producer;
    /* a CREATE that found its namespace fenced for its group (logged
     * before the fence applied): nothing was created (a stream the
     * pipeline held pending for it is the pipeline's to remove) */
    int erased;
} rn_applied;

void rn_state_init(rn_state *st);
/* Frees every stream and namespace. No effect is run. */
void rn_state_free(rn_state *st);

/* A stream by id or path, whatever its status (pending, soft-deleted,
 * expired), or NULL. */
rn_stream *rn_state_stream(const rn_state *st, uint64_t id);
/* Every stream of st in id order (malloc'd; *n of them, pending creates
 * included). The maps' order is their keyed hash's, which differs from one
 * process to the next: what must be the same bytes wherever it is made (a
 * group's manifest on every replica) walks this instead. */
rn_stream **rn_state_streams_by_id(const rn_state *st, size_t *n);
rn_stream *rn_state_at(const rn_state *st, const char *path, size_t len);

/* Adds an empty stream (no stream may have its id or path). ids at or
 * above next_id raise it. */
rn_stream *rn_state_add(rn_state *st, uint64_t id, const char *path, size_t path_len,
                        const char *ct, size_t ct_len);

/* Puts s, a stream out of every table (rn_state_add made it for another
 * state), into st's tables; no stream may have its id or path. */
void rn_state_adopt(rn_state *st, rn_stream *s);

/* Frees a stream out of every table, with everything it owns. No effect
 * is run. */
void rn_state_free_stream(rn_stream *s);

/* Removes s from the tables and frees it, telling fx (removed() unless
 * it was pending or soft-deleted already, then destroyed()); then releases
 * its fork source, destroying that too when it was soft-deleted and this
 * was its last fork, and so on up the chain. */
void rn_state_destroy(rn_state *st, rn_stream *s, const rn_effects *fx);

/* ---- forks apart from their source (pins.c) ---- */

/* True while forks read s: forks of its group, or pins of other groups'. */
int rn_stream_held(const rn_stream *s);
/* s's pin for the fork with this id, or NULL. */
const rn_pin *rn_stream_pin(const rn_stream *s, uint64_t fork_id);
/* Where s reads its bytes below its fork offset: its source in its group,
 * or, for a fork apart from its source, the source once this replica
 * applied the source's pin for s (NULL before: not readable here yet).
 * NULL for a stream that is not a fork. */
rn_stream *rn_state_fork_source(const rn_state *st, const rn_stream *s);
/* A PIN of s: records the fork (once; a repeat changes nothing). */
void rn_state_apply_pin(rn_stream *s, const rn_cmd *c);
/* An UNPIN of s: forgets the fork's pin (absent: nothing changes); a
 * soft-deleted s that no fork holds any more is destroyed, up its chain. */
void rn_state_apply_unpin(rn_state *st, rn_stream *s, const rn_cmd *c, const rn_effects *fx);

/* Adds empty state for producer id (which must be absent). */
rn_producer *rn_stream_add_producer(rn_stream *s, const char *id, size_t len);
/* Discards producer p of s. */
void rn_stream_remove_producer(rn_stream *s, rn_producer *p);

/* True when epoch is above s's epoch floor (or s has none). */
int rn_stream_above_floor(const rn_stream *s, uint64_t epoch);

/* True when s expired at time now (TTL or expiry time); soft-deleted
 * streams never do. */
int rn_stream_expired(const rn_stream *s, int64_t now);

/* Namespaces: a path's bytes before its first "/" (none without one). */
void rn_state_add_namespace(rn_state *st, const char *ns, size_t len);
int rn_state_namespace_exists(const rn_state *st, const char *ns, size_t len);

/* ---- fences (fences.c) ---- */

/* The fence of namespace ns (len bytes), or NULL. */
const rn_fence *rn_state_fence(const rn_state *st, const char *ns, size_t len);
/* The fence of the namespace of a stream path (its bytes before the first
 * "/"), or NULL: a path without one is in no namespace. */
const rn_fence *rn_state_path_fence(const rn_state *st, const char *path, size_t len);
/* True when fence f covers the stream with this id (every stream, or the
 * stream's group: its id's low byte). */
int rn_fence_covers(const rn_fence *f, uint64_t id);
/* Records (or widens) the fence of ns: scope RN_FENCE_ALL or a group, at
 * time_ms when it is new. */
void rn_state_add_fence(rn_state *st, const char *ns, size_t len, uint16_t scope, int64_t time_ms);
/* Frees every fence (rn_state_free does). */
void rn_state_free_fences(rn_state *st);

/* The incarnation token of serial n under the deployment's key: 2^52 plus
 * a permutation of n's 52 bits that the key chooses, so distinct serials
 * never share a token under one key, and another key (another data
 * directory) gives other tokens. Key 0 gives the tokens of builds before
 * the key existed. */
uint64_t rn_incarnation_for(uint64_t key, uint64_t n);

/* True when two content types name the same media type (type/subtype
 * compared case-insensitively, parameters ignored). */
int rn_content_type_equal(const char *a, size_t alen, const char *b, size_t blen);
int rn_content_type_is_json(const char *ct, size_t len);

/* Applies a command that the log made durable (or committed), in log
 * order, to st: the one way state changes. Fills *out. Returns 0, -ENOENT
 * when the command's stream does not exist (nothing changed), -EINVAL for
 * a fork whose source does not exist, or a store() error. */
int rn_state_apply(rn_state *st, const rn_cmd *c, const rn_effects *fx, rn_applied *out);

/* A SUBS command: its state replaces st->subs, carried by the group in its
 * stream id field (engine/subs_state.c). */
void rn_state_apply_subs(rn_state *st, const rn_cmd *c);

#endif
