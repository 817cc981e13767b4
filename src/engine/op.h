/*
 * op.h — a mutation as the engine's callers see it: what a caller asks
 * (rn_op_request), what the engine answers (rn_op_outcome), and room the
 * engine keeps for itself while the mutation is on its way through the log
 * (rn_op_private: opaque here, so callers see no log or storage type).
 *
 * A caller fills `in`, `done` and `arg`, and submits the op
 * (rn_engine_submit); the engine fills `out` and calls done() exactly once.
 * The private area is a fixed size inside the op so that a mutation costs
 * no allocation of the engine's own: engine files check that their state
 * fits (a static_assert next to its definition).
 */
#ifndef RN_ENGINE_OP_H
#define RN_ENGINE_OP_H

#include <stddef.h>
#include <stdint.h>

struct rn_stream;
struct rn_op;

typedef enum {
    RN_OP_CREATE,
    RN_OP_APPEND, /* also close-only: empty body with close */
    RN_OP_DELETE,
    RN_OP_PUBLISH, /* snapshot whose body is already durable as a blob */
    RN_OP_RETAIN,
    RN_OP_REWRITE,          /* history rewrite (operator action; test hook today) */
    RN_OP_EXPIRE_PRODUCERS, /* internal: discards idle producer state */
    RN_OP_TIER,             /* internal: history below target_offset is in the cold store */
    RN_OP_PURGE,            /* internal: a fenced stream goes for good (engine/purge.c) */
    RN_OP_PIN,              /* internal: a fork in another group reads the stream at path
                               (rn_engine_pin) */
    RN_OP_UNPIN,            /* internal: that fork no longer does (rn_engine_unpin) */
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
    RN_OK_TIERED, /* the move is recorded (or was already) */
    RN_OK_PURGED, /* the fenced stream is gone (with every byte it owned) */
    RN_OK_FENCED, /* the namespace's fence is recorded (or was already) */
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
    RN_ERR_UNAVAILABLE,             /* nothing acknowledged: log write or sync failed, or a
                                       replicated log lost the entry's outcome (it may apply) */
    RN_ERR_NO_LEADER,               /* nothing logged: this replica does not lead the stream's
                                       group (any more), or its log refused the entry */
    RN_ERR_LOG_BUSY,                /* nothing logged: the replicated log's bound on entries
                                       in flight is reached */
    RN_ERR_APPLY_STOPPED,           /* nothing logged: this replica stopped applying the
                                       group's entries (no room for their data) */
    RN_ERR_COLD_BACKPRESSURE,       /* nothing logged: history waiting for the cold store
                                       holds the hot budget (tiers/history.c) */
    RN_ERR_COLD_STORE_FAILED,       /* nothing logged: the hot budget is held because the
                                       cold store refuses the moves (see cause) */
    RN_ERR_BUCKET_ERASED,           /* the stream's namespace is fenced by a bucket purge
                                       (state.h): nothing there is created or changed again */
} rn_result;

/* What a caller asks; pointed-to memory must outlive done(). */
typedef struct {
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
    /* APPEND: the body is still arriving (rn_engine_arriving_*): body is
     * NULL, body_len its declared length; resume (required then) is called
     * when the engine takes bytes again after it asked the caller to pause. */
    int arriving;
    void (*arriving_resume)(struct rn_op *op);
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
    /* TIER, PURGE: the stream (by id: a re-created one at the path is another);
     * UNPIN: the source. */
    uint64_t stream_id;
    /* PIN, UNPIN: the id of the fork in another group. */
    uint64_t fork_id;
} rn_op_request;

/* What the engine answers, valid inside done(). `stream` is NULL for
 * NOT_FOUND and for DELETED; otherwise it may be read (not kept) inside
 * done(). */
typedef struct {
    rn_result result;
    struct rn_stream *stream;
    uint64_t next_offset; /* tail after the operation */
    int stream_closed;    /* stream is closed after the operation */
    int repeat;           /* PUBLISH: it repeated the latest snapshot */
    /* RN_OK_APPENDED: the bytes it stored (JSON: message text) and how
     * many messages they are (1 for a non-JSON append); 0 otherwise. */
    size_t appended_bytes, appended_messages;
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
    /* PIN: the fork offset the source answered (offset plus sub-offset). */
    uint64_t fork_offset;
    /* COLD_STORE_FAILED: why, in the cold store's own words (no key, bucket,
     * endpoint or credential). */
    const char *cause;
} rn_op_outcome;

/* The engine's room in an op (its queue link, the encoded command, the log
 * entry, pinned stream files, ...). Callers never touch it. */
#define RN_OP_PRIVATE_BYTES 1152
typedef union {
    max_align_t align;
    unsigned char bytes[RN_OP_PRIVATE_BYTES];
} rn_op_private;

typedef struct rn_op rn_op;
typedef void (*rn_op_done_fn)(rn_op *op);

struct rn_op {
    rn_op_request in;
    rn_op_done_fn done; /* called exactly once, with `out` filled */
    void *arg;          /* for the caller */
    rn_op_outcome out;
    rn_op_private engine;
};

#endif
