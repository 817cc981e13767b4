/*
 * engine.h — streams as a deterministic state machine over the log.
 *
 * The engine owns every stream's metadata (content type, tail, closure, TTL
 * and expiry, idempotent-producer and Stream-Seq state) and its bytes (via
 * store.c). A mutation arrives as an rn_op: the engine validates it against
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
 * Everything here runs on the loop thread that opened the engine, except
 * the stream-file writes of live appends, which the log's worker thread
 * does after the sync (see log_command() in engine.c).
 */
#ifndef RN_ENGINE_H
#define RN_ENGINE_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "engine/command.h"
#include "engine/store.h"
#include "log/wal.h"
#include "util/buf.h"
#include "util/map.h"

typedef struct rn_engine rn_engine;
typedef struct rn_op rn_op;

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

/* A stream. Fields are read-only outside the engine. */
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
    int soft_deleted;         /* deleted while forks still read it: 410 */
    uint64_t appends;         /* entries in the append index (store.h) */
    /* Retention (ext §2.2): reads below `retained` answer 410. On a JSON
     * stream it is always a message boundary, known without reading the
     * cleared byte before it: a retention offset is verified before it is
     * logged, a fork starts at its source's retained offset or its verified
     * fork offset, and a rewrite lowers it to the tail. */
    uint64_t retained;
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
    /* engine-private */
    int pending_create; /* created in the log, not yet applied: invisible */
    int busy;           /* a mutation of this stream is in the log */
    int has_files;      /* its files were made (or found) in this process */
    int touched;        /* changed by log replay (recovery truncates its file) */
    rn_op *queue_head, *queue_tail;
    /* owned by src/live/ (live.c) */
    void *live_room;       /* the list of this stream's live readers, or NULL */
    uint32_t live_readers; /* live readers registered */
} rn_stream;

typedef enum {
    RN_OP_CREATE,
    RN_OP_APPEND, /* also close-only: empty body with close */
    RN_OP_DELETE,
    RN_OP_PUBLISH, /* snapshot whose body is already durable as a blob */
    RN_OP_RETAIN,
    RN_OP_REWRITE,          /* history rewrite (operator action; test hook today) */
    RN_OP_EXPIRE_PRODUCERS, /* internal: discards idle producer state */
} rn_op_kind;

typedef enum {
    RN_OK_CREATED,   /* new stream */
    RN_OK_EXISTS,    /* create repeated with matching configuration */
    RN_OK_APPENDED,  /* data appended and/or stream closed */
    RN_OK_DUPLICATE, /* producer repeat, or close of a closed stream */
    RN_OK_DELETED,
    RN_OK_PUBLISHED, /* snapshot now the latest (or a repeat of it: see repeat) */
    RN_OK_RETAINED,  /* retention applied or already there: see stream->retained */
    RN_OK_REWRITTEN,
    RN_OK_PRODUCERS_EXPIRED,
    RN_ERR_NOT_FOUND,
    RN_ERR_CONFIG_MISMATCH,  /* create: existing stream differs */
    RN_ERR_CLOSED,           /* append to a closed stream */
    RN_ERR_CONTENT_TYPE,     /* append content type differs */
    RN_ERR_SEQ_REGRESSION,   /* Stream-Seq not above the last one */
    RN_ERR_STALE_EPOCH,      /* producer epoch older than the current one; nothing known of it */
    RN_ERR_EPOCH_CLOSED,     /* the write's epoch is closed: see closed_epoch, closed_by_history */
    RN_ERR_KEY_CONFLICT,     /* the key holds a write with another identity */
    RN_ERR_PRODUCER_EXPIRED, /* the epoch may be one the server forgot (floor) */
    RN_ERR_PRODUCER_LIMIT,   /* the stream holds as many producers as it may */
    RN_ERR_EPOCH_SEQ,        /* new epoch must start at seq 0 */
    RN_ERR_SEQ_GAP,          /* producer seq skipped ahead */
    RN_ERR_EMPTY_BODY,       /* append without data and without close */
    RN_ERR_MISSING_CONTENT_TYPE, /* append with data but no content type */
    RN_ERR_DIGEST_MISMATCH,      /* the body's BLAKE3 differs from Producer-Digest */
    RN_ERR_JSON_INVALID,
    RN_ERR_JSON_EMPTY_ARRAY,
    RN_ERR_JSON_TOO_DEEP,
    RN_ERR_GONE,                    /* the stream is soft-deleted */
    RN_ERR_INCARNATION,             /* Stream-Incarnation precondition failed */
    RN_ERR_SOURCE_NOT_FOUND,        /* fork source does not exist */
    RN_ERR_SOURCE_GONE,             /* fork source is soft-deleted */
    RN_ERR_FORK_OFFSET,             /* fork offset past the source tail or not a boundary */
    RN_ERR_SUB_OFFSET,              /* sub-offset past the append at the fork offset */
    RN_ERR_FORK_DEPTH,              /* fork chain too deep */
    RN_ERR_OFFSET_BEYOND_TAIL,      /* snapshot offset past the tail (409 naming none) */
    RN_ERR_NOT_BOUNDARY,            /* JSON offset not a message boundary, or not committed */
    RN_ERR_BOUNDARY_UNVERIFIED,     /* JSON boundary unknown: the byte before it was unreadable */
    RN_ERR_BELOW_RETAINED,          /* offset below the retained offset (410) */
    RN_ERR_SNAPSHOT_CONFLICT,       /* another snapshot is the latest (409 naming it) */
    RN_ERR_RETENTION_PAST_SNAPSHOT, /* retention newer than the latest snapshot */
    RN_ERR_DISK_FULL,               /* nothing written: no space */
    RN_ERR_UNAVAILABLE,             /* nothing acknowledged: log write or sync failed */
} rn_result;

typedef void (*rn_op_done_fn)(rn_op *op);

struct rn_op {
    /* Request, filled by the caller; pointed-to memory must outlive done(). */
    rn_op_kind kind;
    const char *path;
    size_t path_len;
    const char *content_type; /* NULL when absent */
    size_t content_type_len;
    int64_t ttl_s;         /* -1: absent */
    int64_t expires_at_ms; /* -1: absent */
    int close;
    const uint8_t *body;
    size_t body_len;
    int has_producer;
    const char *producer_id;
    size_t producer_id_len;
    uint64_t producer_epoch;
    uint64_t producer_seq;
    int has_producer_digest; /* Producer-Digest: the write's identity (ext §5.2) */
    uint8_t producer_digest[32];
    int has_seq;
    const char *seq;
    size_t seq_len;
    /* Stream-Incarnation precondition: compared when the op is evaluated,
     * after every earlier write of the stream applied. */
    int has_incarnation;
    uint64_t incarnation;
    /* CREATE of a fork: source path, fork offset (absent: the source tail)
     * and sub-offset (bytes, or JSON messages, past the fork offset within
     * the append there; 0 when absent). */
    const char *fork_source;
    size_t fork_source_len;
    int has_fork_offset;
    uint64_t fork_offset;
    uint64_t fork_sub_offset;
    /* PUBLISH / RETAIN / REWRITE: the offset; PUBLISH: the body's blob,
     * digest and size (content_type above is the snapshot's). On any result
     * but RN_OK_PUBLISHED without `repeat`, the caller deletes its blob. */
    uint64_t target_offset;
    const char *blob_key;
    size_t blob_key_len;
    int blob_cold;
    uint8_t digest[32];
    uint64_t blob_size;
    int repeat; /* outcome: the publish repeated the latest snapshot */
    rn_op_done_fn done;
    void *arg; /* for the caller */

    /* Outcome, valid inside done(). `stream` is NULL for NOT_FOUND and for
     * DELETED; otherwise it may be read (not kept) inside done(). */
    rn_result result;
    rn_stream *stream;
    uint64_t next_offset; /* tail after the operation */
    int stream_closed;    /* stream is closed after the operation */
    /* Producer answers (ext §5.3). */
    uint64_t current_epoch;      /* producer 403s: Producer-Epoch (the floor when expired) */
    uint64_t expected_seq;       /* SEQ_GAP and EPOCH_SEQ */
    uint64_t ack_epoch, ack_seq; /* producer success: epoch and its highest applied seq */
    /* Producer success: with `receipt`, the write's range and whether it
     * closed the stream; without, its receipt was evicted. */
    int receipt;
    uint64_t receipt_start, receipt_end;
    int receipt_closed;
    /* A claim's answer, and EPOCH_CLOSED: epoch closed_epoch is closed (by
     * a claim, or by a rewrite when closed_by_history) and every seq up to
     * closed_seq applied (is in the current history). */
    int closes_epoch;
    int closed_by_history;
    uint64_t closed_epoch, closed_seq;
    uint64_t retry_after_s; /* PRODUCER_LIMIT */
    /* CONTENT_TYPE: the type the request's differs from (the stream's, or a
     * fork source's). */
    const char *conflicting_type;
    size_t conflicting_type_len;

    /* engine-private */
    rn_engine *engine;
    rn_op *next_queued;
    uint64_t stream_id;
    rn_cmd cmd;           /* the command in the log, applied after its sync */
    rn_buf head;          /* encoded command head */
    rn_store_pin pin;     /* the stream files the log's worker writes the data to */
    uv_work_t files_work; /* making the stream's files before its first data */
    int files_status;
    uint64_t index_entry; /* the append's number in the stream's index */
    rn_buf stored;        /* JSON message text of the body */
    rn_wal_entry wal;
};

typedef struct {
    const char *data_dir;
    int cold_store; /* a cold store backend is configured */
    uint64_t wal_segment_bytes;
    uint64_t checkpoint_bytes; /* checkpoint after this much log */
    int max_open_files;
    /* Producer state (ext §5.4) is kept while its producer wrote within
     * producer_ttl_ms (0: 7 days); a stream holds at most producer_cap
     * producers (0: 4096), and admits another one by discarding the least
     * recently written producer once that one is idle for an hour (or
     * producer_ttl_ms, when shorter). */
    uint64_t producer_ttl_ms;
    uint64_t producer_cap;
} rn_engine_config;

/* What observers hear about applied changes (never during recovery). */
typedef enum {
    RN_STREAM_CREATED,   /* a create was applied */
    RN_STREAM_CHANGED,   /* data appended and/or the stream closed */
    RN_STREAM_REWRITTEN, /* its history was rewritten (a new incarnation) */
    RN_STREAM_REMOVED,   /* about to disappear (deleted or expired) */
} rn_stream_event;

typedef void (*rn_stream_observer)(rn_stream *s, rn_stream_event ev, void *arg);
#define RN_ENGINE_MAX_OBSERVERS 4
#define RN_MAX_FORK_DEPTH 64
#define RN_INCARNATION_MIN (1ull << 52)
#define RN_INCARNATION_MAX ((1ull << 53) - 1)

typedef struct {
    uint64_t streams;
    uint64_t records_replayed;
    uint64_t torn_bytes;
    uint64_t checkpoint_streams;
} rn_recovery_stats;

/* Recovers state from data_dir (checkpoint + log replay) and opens the log.
 * Returns NULL with a message in err on failure. */
rn_engine *rn_engine_open(uv_loop_t *loop, const rn_engine_config *cfg, rn_recovery_stats *stats,
                          char *err, size_t errcap);

/* Registers an observer of applied stream changes (live reads,
 * subscriptions). Observers run on the loop thread in registration order. */
void rn_engine_observe(rn_engine *e, rn_stream_observer fn, void *arg);

/* Calls fn for every visible stream (applied, not soft-deleted, not
 * expired). fn must not mutate the engine. */
void rn_engine_foreach(rn_engine *e, void (*fn)(rn_stream *s, void *arg), void *arg);

/* Starts a mutation; op->done is called exactly once, possibly before this
 * returns. The op must stay valid until then. */
void rn_engine_submit(rn_engine *e, rn_op *op);

/* Finds a readable stream: applied, not expired. An expired stream is
 * scheduled for deletion and reported as absent. */
rn_stream *rn_engine_find(rn_engine *e, const char *path, size_t len);

/* The blob stores: snapshot bodies below the cold threshold (cold = 0), and
 * the cold store (cold = 1; NULL when none is configured). */
struct rn_blobs *rn_engine_blobs(rn_engine *e, int cold);

/* Key prefix of snapshot bodies in the blob stores, and a fresh key for a
 * body of stream s. */
#define RN_SNAPSHOT_PREFIX "snapshots/"
#define RN_BLOB_KEY_MAX 64
void rn_engine_blob_key(rn_engine *e, const rn_stream *s, char out[RN_BLOB_KEY_MAX]);

/* True when a stream was ever created in the bucket of key (its part
 * before the first "/"): buckets are implicit (extensions §1.2). */
int rn_engine_bucket_exists(rn_engine *e, const char *key, size_t len);

/* True when a stream at path exists but is soft-deleted (answers 410). */
int rn_engine_is_gone(rn_engine *e, const char *path, size_t len);

/* Renews the stream's TTL window (reads and writes do; HEAD does not). */
void rn_engine_touch(rn_engine *e, rn_stream *s);

/* Reads stream bytes from offset, at most max bytes, appending to out. With
 * `whole_messages` on a JSON stream, the range ends on a message boundary
 * and holds at least one whole message when any exists past offset (it may
 * then exceed max). Returns bytes read or -errno. */
long rn_engine_read(rn_engine *e, rn_stream *s, uint64_t offset, size_t max, int whole_messages,
                    rn_buf *out);

/* Whether offset is a valid position for reads and for snapshot, retention
 * and fork offsets: <= tail and, for JSON streams, on a message boundary
 * (the retained offset is one without a read: see `retained`). Returns 1
 * when it is, 0 when it is not, or -errno when the byte before it could not
 * be read: the boundary is then unverified, which callers answer with a
 * retryable refusal, never as "not a boundary". */
int rn_engine_offset_valid(rn_engine *e, rn_stream *s, uint64_t offset);

/* Deletes expired streams and discards idle producer state (raising the
 * streams' epoch floors); the server calls this periodically. */
void rn_engine_sweep_expired(rn_engine *e);

/* Answers an append before its body arrives (ext §5.5), when the answer
 * depends on the headers alone: op (kind APPEND, with producer headers and
 * Stream-Incarnation; no body) is evaluated against the applied state of an
 * idle stream whose incarnation matches. Returns 1 and fills op's outcome
 * (result, stream, ...; done() is not called) when it is a producer repeat
 * (RN_OK_DUPLICATE) or a key conflict (RN_ERR_KEY_CONFLICT); returns 0 and
 * changes nothing otherwise: the write is then submitted with its body. */
int rn_engine_answer_early(rn_engine *e, rn_op *op);

/* Fault injection for tests: the next n log syncs fail. */
void rn_engine_inject_sync_failures(rn_engine *e, int n);

/* True while mutations are in the log or queued. */
int rn_engine_busy(const rn_engine *e);

/* Writes a final checkpoint (when the log is idle) and releases everything. */
void rn_engine_close(rn_engine *e);

/* True when two content types name the same media type (type/subtype
 * compared case-insensitively, parameters ignored). */
int rn_content_type_equal(const char *a, size_t alen, const char *b, size_t blen);

#endif
