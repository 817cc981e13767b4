/*
 * runnel/client.h — librunnel, the C client of Runnel (a Durable Streams
 * server): every stream call on both surfaces (/v1/stream/{name} and
 * /{bucket}/{stream}), the classification of write answers (extensions
 * §11.1), an exactly-once producer (§5), tailing by SSE or long-poll,
 * snapshots, immutable chunks and bootstrap.
 *
 * Threads. There is no global state but libcurl's: the first runnel_client_new
 * calls curl_global_init(CURL_GLOBAL_DEFAULT) once (pthread_once), and the
 * library never calls curl_global_cleanup. A program that wants libcurl
 * torn down calls curl_global_cleanup itself after freeing every handle; a
 * program that initialises libcurl itself first is left as it is (libcurl
 * counts the calls). An runnel_client may be shared by threads: every call on
 * it is safe concurrently (it keeps a locked pool of connections). An
 * runnel_producer and a tail run belong to one thread at a time.
 *
 * Memory. Every buffer the library keeps is bounded by an option (a body it
 * uploads is the caller's; an answer's headers and error body are capped;
 * SSE events and multipart headers are bounded; a producer holds at most
 * its window of bodies). Allocation failure aborts the process.
 *
 * URLs. A stream argument is either a full URL ("http://host:port/path")
 * or a path ("/v1/stream/chat/room-1", "/orders/eu-1") joined to the
 * client's base URL; runnel_stream_url builds one from a name.
 */
#ifndef RUNNEL_CLIENT_H
#define RUNNEL_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define RUNNEL_API __attribute__((visibility("default")))
#else
#define RUNNEL_API
#endif

#define RUNNEL_CLIENT_VERSION "0.1.0"

/* ---------------------------------------------------------------------
 * Answers
 * ------------------------------------------------------------------- */

#define RUNNEL_VALUE_MAX 256 /* longest header value kept (offsets are shorter) */
/* The protocol's request limit (extensions §10): the largest body a client
 * sends before it has read an Ursula-Max-Request-Bytes. */
#define RUNNEL_REQUEST_LIMIT 33554432

/* The outcome of a write (extensions §11.1). */
typedef enum {
    RUNNEL_APPLIED = 0, /* a 2xx with the write's typed answer: the write holds */
    RUNNEL_REPEAT,      /* a producer 204 receipt (or receipt-evicted): an earlier try applied */
    RUNNEL_REFUSED,     /* this request applied nothing and never will */
    RUNNEL_REDIRECTED,  /* a 307 or 308: nothing applied here; the target is in location */
    RUNNEL_UNKNOWN,     /* may or may not have applied: repeat it with its key */
} runnel_outcome;

/* What a write is, for runnel_classify: each kind has its own typed answer. */
typedef enum {
    RUNNEL_WRITE_APPEND,        /* an append or close without producer headers */
    RUNNEL_WRITE_PRODUCER,      /* an append or close with producer headers (a claim too) */
    RUNNEL_WRITE_CREATE,        /* PUT of a stream */
    RUNNEL_WRITE_PUBLISH,       /* a snapshot publish or a parts commit */
    RUNNEL_WRITE_PART,          /* POST {stream}/snapshot/{offset}/parts */
    RUNNEL_WRITE_DISCARD,       /* DELETE {stream}/snapshot/parts */
    RUNNEL_WRITE_RETENTION,     /* PUT {stream}/retention/{offset} */
    RUNNEL_WRITE_DELETE,        /* DELETE of a stream */
    RUNNEL_WRITE_BUCKET_CREATE, /* PUT /{bucket} */
} runnel_write_kind;

/* One answer, as far as the library reads it. A typed header that is too
 * long for its field, repeated or not in its form is dropped (its field
 * stays empty or -1) and `malformed` names it: a write whose typed answer
 * was dropped classifies as unknown. Absent numbers are -1, absent strings
 * empty. */
typedef struct {
    int status;          /* HTTP status; 0: no (complete) answer */
    int transport_error; /* with status 0: the libcurl error (CURLcode) */
    char transport_message[160];
    runnel_outcome outcome;  /* set by write calls: runnel_classify of this answer */
    char error_code[64];     /* code of the {"error":{...}} body, "" when none */
    char error_message[256]; /* its message (informative only, never parsed) */
    int producer_answer;     /* a 403 with Producer-Epoch and a Producer-Outcome (and,
                                for epoch-closed, Producer-Closed-Epoch/-Seq): a
                                producer refusal (§5.3). A producer code in a 403
                                without them is not believed (§11.1): error_code is
                                then emptied */
    char content_type[128];
    char offset[RUNNEL_VALUE_MAX];      /* Stream-Offset */
    char next_offset[RUNNEL_VALUE_MAX]; /* Stream-Next-Offset */
    char incarnation[32];               /* Stream-Incarnation */
    char previous_incarnation[32];      /* Stream-Previous-Incarnation */
    char inherited_offset[RUNNEL_VALUE_MAX];
    char cursor[RUNNEL_VALUE_MAX]; /* Stream-Cursor */
    int closed;                    /* Stream-Closed: true */
    int up_to_date;                /* Stream-Up-To-Date: true */
    int immutable;                 /* Stream-Immutable: true */
    int sse_base64;                /* Stream-SSE-Data-Encoding: base64 */
    char data_content_type[128];   /* Stream-Data-Content-Type */
    char ttl[32];                  /* Stream-TTL */
    char expires_at[64];           /* Stream-Expires-At */
    char retained_offset[RUNNEL_VALUE_MAX];
    char snapshot_offset[RUNNEL_VALUE_MAX];
    char snapshot_digest[80];
    char snapshot_part[80];
    char last_seq[RUNNEL_VALUE_MAX]; /* Stream-Last-Seq */
    char producer_outcome[64];       /* Producer-Outcome, as sent */
    int64_t producer_epoch, producer_seq;
    int64_t closed_epoch, closed_seq;   /* Producer-Closed-Epoch / -Seq */
    int64_t expected_seq, received_seq; /* Producer-Expected-Seq / -Received-Seq */
    int64_t retry_after_s;              /* Retry-After in seconds */
    int64_t max_request_bytes, max_snapshot_bytes;
    int64_t content_length;
    int protocol;        /* Ursula-Protocol; 0 when absent */
    char cluster_id[72]; /* Ursula-Cluster-Id */
    char location[1024]; /* Location (absolute) */
    char raft_leader_id[64], raft_group[64];
    int64_t raft_term; /* x-ursula-raft-term */
    char content_range[96];
    char etag[160];
    char malformed[48];  /* the first header dropped: too long, repeated or
                            not in its form */
    uint64_t body_bytes; /* body bytes handed to the caller */
    char url[1024];      /* the URL that answered (after redirects) */
} runnel_answer;

/* Classifies the answer to a write of `kind` by extensions §11.1: a 307 or
 * 308 is redirected; a 2xx is applied (or a repeat for a producer's 204)
 * only with the kind's typed answer, else unknown; a 4xx other than 408 is
 * refused; a 408 or 5xx is refused only with a code that proves it, else
 * unknown; no answer, 1xx and other 3xx are unknown. Pure; any thread. */
RUNNEL_API runnel_outcome runnel_classify(runnel_write_kind kind, const runnel_answer *a);

/* "applied", "repeat", "refused", "redirected" or "unknown". */
RUNNEL_API const char *runnel_outcome_name(runnel_outcome o);

/* 1 when the code proves, for a 408 or 5xx of that status, that nothing of
 * the write applied (§11.1's table). */
RUNNEL_API int runnel_code_proves_refusal(int status, const char *code);

/* ---------------------------------------------------------------------
 * Results of calls
 * ------------------------------------------------------------------- */

typedef enum {
    RUNNEL_OK = 0,
    RUNNEL_E_USAGE,       /* a bad argument (nothing was sent) */
    RUNNEL_E_TRANSPORT,   /* no answer: the connection failed (see answer) */
    RUNNEL_E_STATUS,      /* the server answered, not with success (see answer) */
    RUNNEL_E_PROTOCOL,    /* the answer breaks the protocol (missing typed answer, framing) */
    RUNNEL_E_IO,          /* a local file or state file failed */
    RUNNEL_E_STATE,       /* a producer state file does not match, or is in use */
    RUNNEL_E_INCARNATION, /* the stream is another incarnation than the one held */
    RUNNEL_E_STOPPED,     /* a callback asked to stop */
    RUNNEL_E_UNKNOWN,     /* a write's outcome stayed unknown past the retry time */
    RUNNEL_E_REFUSED,     /* a write was refused */
} runnel_result;

/* A short English description of a result. */
RUNNEL_API const char *runnel_result_name(runnel_result r);

/* ---------------------------------------------------------------------
 * The client
 * ------------------------------------------------------------------- */

typedef struct runnel_client runnel_client;

typedef struct {
    const char *base_url;    /* e.g. "http://127.0.0.1:4437"; required */
    long connect_timeout_ms; /* 0: 10000 */
    long request_timeout_ms; /* whole request, non-live calls; 0: 60000 */
    int max_redirects;       /* 307/308 hops followed; 0: 5; -1: none */
    int cluster_aware;       /* learn stream leaders from redirects (§5.7) */
    size_t max_error_body;   /* error body bytes kept; 0: 16384 */
    const char *user_agent;  /* NULL: "librunnel/VERSION" */
    /* A credential of a gateway's tenant (an API key or a JWT), sent as
     * `Authorization: Bearer TOKEN` on every request; NULL: none. Copied. */
    const char *token;
    /* PEM file of the CA certificates that https servers' certificates must
     * chain to, instead of the system's (a private CA, as curl --cacert);
     * NULL: the system's. Copied: the string need not outlive the call. */
    const char *ca_file;
} runnel_client_options;

/* A client for one server (or cluster). Returns NULL for a missing or
 * non-http(s) base URL. */
RUNNEL_API runnel_client *runnel_client_new(const runnel_client_options *o);
RUNNEL_API void runnel_client_free(runnel_client *c);

/* The largest request body the client sends (extensions §10): the last
 * Ursula-Max-Request-Bytes any answer carried (at most 32 MiB), or
 * RUNNEL_REQUEST_LIMIT before one did. A call whose body is larger sends
 * nothing and returns RUNNEL_E_USAGE (the answer's transport_message says
 * why); runnel_producer_send refuses such a write the same way. */
RUNNEL_API int64_t runnel_client_max_request_bytes(runnel_client *c);

/* Writes the URL of stream `name` into out (capacity cap): the v1 surface
 * ("{base}/v1/stream/{name}", each segment percent-encoded) or, with
 * bucket_surface, "{base}/{bucket}/{stream}" where name is "bucket/stream".
 * Returns 0, or -1 when the name does not fit the surface or out. */
RUNNEL_API int runnel_stream_url(const runnel_client *c, const char *name, int bucket_surface,
                                 char *out, size_t cap);

/* Percent-encodes s (an offset, a name segment) into out; -1 if too long. */
RUNNEL_API int runnel_url_encode(const char *s, char *out, size_t cap);

/* A callback that receives body bytes; a nonzero return stops the call
 * (RUNNEL_E_STOPPED). */
typedef int (*runnel_data_fn)(void *arg, const void *data, size_t len);

/* A callback that supplies an upload body: fills buf with up to cap bytes
 * and returns their count, 0 at the end, or -1 for a read error. */
typedef long (*runnel_source_fn)(void *arg, void *buf, size_t cap);

/* An upload body: bytes in memory, or a source of known size. Sources are
 * read once; a call that must resend (a redirect, a retry) needs `rewind`. */
typedef struct {
    const void *data;
    size_t len;
    runnel_source_fn source;  /* used when data is NULL and len is the size */
    int (*rewind)(void *arg); /* back to the start; 0 on success */
    void *arg;
    void (*progress)(void *arg, uint64_t done, uint64_t total); /* optional */
} runnel_body;

/* ---- Stream calls. Each fills *ans (always). A write sets ans->outcome
 * and returns RUNNEL_OK (applied or repeat), RUNNEL_E_REFUSED,
 * RUNNEL_E_UNKNOWN (an answer that proves nothing), RUNNEL_E_TRANSPORT (no
 * answer: unknown too) or RUNNEL_E_STATUS (a redirect that was not
 * followed). A read returns RUNNEL_OK on a 2xx, RUNNEL_E_STATUS on another
 * status, RUNNEL_E_TRANSPORT without an answer. Any call returns
 * RUNNEL_E_USAGE, sending nothing, for a header value with CR or LF or a
 * URL too long. Optional strings are NULL when absent. */

typedef struct {
    const char *content_type; /* NULL: application/octet-stream */
    const char *ttl;          /* Stream-TTL (seconds) */
    const char *expires_at;   /* Stream-Expires-At (RFC 3339) */
    int closed;               /* create closed */
    const char *incarnation;  /* Stream-Incarnation precondition */
    const char *forked_from;  /* Stream-Forked-From (a path) */
    const char *fork_offset;  /* Stream-Fork-Offset */
    const char *fork_sub_offset;
    runnel_body body; /* initial content */
} runnel_create_options;

RUNNEL_API runnel_result runnel_create(runnel_client *c, const char *stream,
                                       const runnel_create_options *o, runnel_answer *ans);

typedef struct {
    const char *content_type; /* NULL: application/octet-stream (ignored for close-only) */
    int closed;               /* Stream-Closed: true (with an empty body: close only) */
    const char *incarnation;  /* Stream-Incarnation precondition */
    const char *stream_seq;   /* Stream-Seq */
    /* Producer key (extensions §5.1): with producer_id the write is a
     * RUNNEL_WRITE_PRODUCER and carries Producer-Digest (BLAKE3 of the body). */
    const char *producer_id;
    uint64_t producer_epoch, producer_seq;
    int expect_continue; /* Expect: 100-continue (a repeat's early answer) */
} runnel_append_options;

RUNNEL_API runnel_result runnel_append(runnel_client *c, const char *stream,
                                       const runnel_body *body, const runnel_append_options *o,
                                       runnel_answer *ans);
/* Close-only (POST with Stream-Closed: true and no body). */
RUNNEL_API runnel_result runnel_close(runnel_client *c, const char *stream, const char *incarnation,
                                      runnel_answer *ans);
RUNNEL_API runnel_result runnel_delete(runnel_client *c, const char *stream,
                                       const char *incarnation, runnel_answer *ans);
RUNNEL_API runnel_result runnel_head(runnel_client *c, const char *stream, const char *incarnation,
                                     runnel_answer *ans);
/* PUT /{bucket}. */
RUNNEL_API runnel_result runnel_bucket_create(runnel_client *c, const char *bucket,
                                              runnel_answer *ans);
/* PUT {stream}/retention/{offset}. */
RUNNEL_API runnel_result runnel_retention(runnel_client *c, const char *stream, const char *offset,
                                          const char *incarnation, runnel_answer *ans);

typedef struct {
    const char *offset;      /* NULL: "-1" */
    long max_bytes;          /* 0: the server's cap (bucket surface parameter) */
    const char *incarnation; /* precondition */
    const char *consistency; /* "local" or "leader" (bucket surface) */
    runnel_data_fn on_data;  /* the body, in pieces; NULL: discarded */
    void *arg;
} runnel_read_options;

/* One catch-up read (GET ?offset=): the body goes to on_data; the answer
 * holds next_offset, up_to_date and closed. */
RUNNEL_API runnel_result runnel_read(runnel_client *c, const char *stream,
                                     const runnel_read_options *o, runnel_answer *ans);

/* Reads from o->offset to the tail (repeating until Stream-Up-To-Date),
 * at most max_total bytes (0: no bound). ans is the last answer. */
RUNNEL_API runnel_result runnel_read_all(runnel_client *c, const char *stream,
                                         const runnel_read_options *o, uint64_t max_total,
                                         runnel_answer *ans);

/* ---- Snapshots (extensions §2) and immutable resources (§4) ---- */

/* The snapshot digest: lowercase hex BLAKE3 of the content type's length
 * (u64 little-endian), the content type and the body. */
typedef struct {
    uint64_t state[256]; /* opaque */
} runnel_snapshot_hasher;
RUNNEL_API void runnel_snapshot_digest_init(runnel_snapshot_hasher *h, const char *content_type);
RUNNEL_API void runnel_snapshot_digest_update(runnel_snapshot_hasher *h, const void *data,
                                              size_t len);
RUNNEL_API void runnel_snapshot_digest_final(const runnel_snapshot_hasher *h, char out[65]);

/* PUT {stream}/snapshot/{offset} with the whole body. */
RUNNEL_API runnel_result runnel_snapshot_publish(runnel_client *c, const char *stream,
                                                 const char *offset, const char *content_type,
                                                 const runnel_body *body, const char *incarnation,
                                                 runnel_answer *ans);

/* Stages one part (POST {stream}/snapshot/{offset}/parts): the part id is
 * in ans->snapshot_part. */
RUNNEL_API runnel_result runnel_snapshot_part(runnel_client *c, const char *stream,
                                              const char *offset, const char *content_type,
                                              const runnel_body *body, const char *incarnation,
                                              runnel_answer *ans);
/* Commits parts (ids in order) with the whole snapshot's digest. */
RUNNEL_API runnel_result runnel_snapshot_commit(runnel_client *c, const char *stream,
                                                const char *offset, const char *content_type,
                                                const char *const *part_ids, size_t nparts,
                                                const char *digest, const char *incarnation,
                                                runnel_answer *ans);
/* DELETE {stream}/snapshot/parts. */
RUNNEL_API runnel_result runnel_snapshot_discard(runnel_client *c, const char *stream,
                                                 const char *incarnation, runnel_answer *ans);

/* Publishes a snapshot of `size` bytes read from body->source in parts of
 * part_bytes (0: 8 MiB), then commits them by digest. An unknown commit is
 * repeated until it is known (at most retry_for_ms; 0: 60 s); a refused
 * part or commit ends it (the staged parts are discarded). */
RUNNEL_API runnel_result runnel_snapshot_publish_parts(runnel_client *c, const char *stream,
                                                       const char *offset, const char *content_type,
                                                       const runnel_body *body, size_t part_bytes,
                                                       long retry_for_ms, const char *incarnation,
                                                       runnel_answer *ans);

typedef struct {
    const char *range;       /* a Range value, e.g. "bytes=0-55" */
    const char *incarnation; /* precondition; with `immutable`, the token in the path */
    int immutable;           /* GET {stream}/incarnation/{token}/snapshot/{offset} */
    runnel_data_fn on_data;
    void *arg;
} runnel_snapshot_read_options;

RUNNEL_API runnel_result runnel_snapshot_read(runnel_client *c, const char *stream,
                                              const char *offset,
                                              const runnel_snapshot_read_options *o,
                                              runnel_answer *ans);

/* GET {stream}/incarnation/{token}/chunk/{offset}. */
RUNNEL_API runnel_result runnel_chunk_read(runnel_client *c, const char *stream, const char *token,
                                           const char *offset, runnel_data_fn on_data, void *arg,
                                           runnel_answer *ans);

/* ---- Bootstrap (extensions §3): GET {stream}/bootstrap. Each part goes
 * to the callbacks in order (index 0 is the snapshot part); part bodies
 * arrive in pieces, so a part of any size takes bounded memory. A nonzero
 * return from a callback stops the call. */
typedef struct {
    int (*on_part_begin)(void *arg, unsigned index, const char *content_type);
    int (*on_part_data)(void *arg, unsigned index, const void *data, size_t len);
    int (*on_part_end)(void *arg, unsigned index);
    void *arg;
} runnel_bootstrap_handler;

RUNNEL_API runnel_result runnel_bootstrap(runnel_client *c, const char *stream,
                                          const char *incarnation,
                                          const runnel_bootstrap_handler *h, runnel_answer *ans);

/* ---------------------------------------------------------------------
 * Tailing (PROTOCOL §5.7, §5.8; extensions §9)
 * ------------------------------------------------------------------- */

typedef enum { RUNNEL_TAIL_SSE = 0, RUNNEL_TAIL_LONG_POLL } runnel_tail_mode;

/* What a tail reports besides data. */
typedef enum {
    RUNNEL_TAIL_UP_TO_DATE = 1, /* caught up with the tail at next_offset */
    RUNNEL_TAIL_CLOSED,         /* the stream is closed and fully read: the end */
    RUNNEL_TAIL_RECONNECTING,   /* the connection ended; reconnecting from next_offset */
    RUNNEL_TAIL_INCARNATION,    /* the stream is another incarnation: the tail stops */
    RUNNEL_TAIL_GONE,           /* the stream was deleted (404/410): the tail stops */
    /* The offset is below the stream's retained offset (a 410 while the
     * stream still exists): the history before it is folded into the
     * stream's snapshot (extensions §3). The tail stops; runnel_bootstrap
     * gives the snapshot and every later message, and a tail goes on from
     * its next offset. ans->retained_offset holds the stream's retained
     * offset. */
    RUNNEL_TAIL_RETAINED,
} runnel_tail_event;

typedef struct {
    const char *offset; /* where to start: an offset, "-1" (NULL) or "now" */
    runnel_tail_mode mode;
    const char *incarnation; /* the incarnation the caller's offset belongs to;
                                NULL: the one the first answer names */
    int follow;              /* 1: wait for more at the tail; 0: stop when up to date */
    long timeout_ms;         /* long-poll timeout_ms (bucket surface); 0: server's */
    size_t max_event_bytes;  /* largest SSE event kept; 0: 16 MiB */
    long reconnect_for_ms;   /* give up after this long without an answer; 0: 60 s;
                                -1: never */
    /* Data in stream order, with the offset after it. For a binary stream
     * over SSE the bytes are decoded. Nonzero return stops (RUNNEL_E_STOPPED). */
    int (*on_data)(void *arg, const void *data, size_t len, const char *next_offset);
    /* Other events; may be NULL. The answer is the one that caused the
     * event (for RUNNEL_TAIL_INCARNATION it holds the new token, when sent). */
    int (*on_event)(void *arg, runnel_tail_event ev, const char *next_offset,
                    const runnel_answer *ans);
    void *arg;
} runnel_tail_options;

/* Tails a stream until it is closed (RUNNEL_OK), stopped by a callback
 * (RUNNEL_E_STOPPED), not following and up to date (RUNNEL_OK), replaced by another
 * incarnation (RUNNEL_E_INCARNATION), gone or retained past the tail's offset
 * (RUNNEL_E_STATUS, after RUNNEL_TAIL_GONE or RUNNEL_TAIL_RETAINED), or unreachable for
 * reconnect_for_ms (RUNNEL_E_TRANSPORT). Reconnects from the last offset after
 * a connection ends or the server restarts; follows 307/308 (§9.2). The
 * last offset reached is written to last_offset (RUNNEL_VALUE_MAX bytes) when
 * not NULL. */
RUNNEL_API runnel_result runnel_tail(runnel_client *c, const char *stream,
                                     const runnel_tail_options *o, char *last_offset,
                                     runnel_answer *ans);

/* ---------------------------------------------------------------------
 * Producers (extensions §5): exactly-once appends
 * ------------------------------------------------------------------- */

typedef struct runnel_producer runnel_producer;

/* A write's receipt, delivered in seq order once the write holds. */
typedef struct {
    uint64_t epoch, seq;
    uint64_t tag;            /* the caller's tag of the write */
    const char *offset;      /* Stream-Offset ("" for receipt-evicted) */
    const char *next_offset; /* Stream-Next-Offset ("" for receipt-evicted) */
    int repeat;              /* an earlier try had applied it */
    int closed;              /* the write closed the stream */
} runnel_receipt;

typedef struct {
    const char *id;           /* Producer-Id; required */
    const char *content_type; /* NULL: application/octet-stream */
    uint64_t epoch;           /* the first epoch to claim when there is no state */
    const char *state_path;   /* durable state file; NULL: in memory only */
    unsigned window;          /* writes in flight (1..64); 0: 4 */
    int use_incarnation;      /* send Stream-Incarnation (learned by HEAD) */
    long retry_for_ms;        /* repeat an unknown write this long; 0: 60 s; -1: forever */
    void (*on_receipt)(void *arg, const runnel_receipt *r);
    void *arg;
} runnel_producer_options;

/* Opens a producer on a stream. With a state file, takes its lock (one
 * process per file: RUNNEL_E_STATE when another holds it) and resumes what it
 * recorded (RUNNEL_E_STATE when the server names another deployment, by
 * Ursula-Cluster-Id, than the one the state was recorded with: its stream is
 * another history, extensions §10): the epoch, the next seq and the writes not known to hold,
 * which the caller must send again, in order and with the same bodies and
 * tags (see runnel_producer_replay_next). The state is written (temporary
 * file, fsync, rename, fsync of the directory) before a seq is first sent,
 * so a restart never sends a seq with another body. */
RUNNEL_API runnel_result runnel_producer_open(runnel_client *c, const char *stream,
                                              const runnel_producer_options *o,
                                              runnel_producer **out, char *err, size_t errcap);

/* After a restart: 1 and the tag of the next write the state file holds
 * unacknowledged (the caller sends the same bytes with that tag next), or
 * 0 when none remains. *from_tag is the tag the write starts after (the
 * previous write's tag, or the acknowledged tag for the first). */
RUNNEL_API int runnel_producer_replay_next(const runnel_producer *p, uint64_t *from_tag,
                                           uint64_t *tag);

/* The tag through which every write is known to hold (0 at first). */
RUNNEL_API uint64_t runnel_producer_acked_tag(const runnel_producer *p);

/* Two numbers the caller keeps with the producer's state, written with it
 * durably by set_note (0 and 0 at first; kept in memory without a state
 * file). The runnel command keeps where its current input started and
 * whether that input was written to its end. */
RUNNEL_API void runnel_producer_note(const runnel_producer *p, uint64_t note[2]);
RUNNEL_API runnel_result runnel_producer_set_note(runnel_producer *p, const uint64_t note[2]);

/* Sends one write (the key covers it whole), tagged with the caller's
 * position after it (tags must not decrease). Blocks while the window is
 * full. A replayed write must match the recorded length and digest
 * (RUNNEL_E_STATE otherwise); a write longer than
 * runnel_client_max_request_bytes is refused with RUNNEL_E_USAGE, nothing
 * queued. An answer from another deployment (another Ursula-Cluster-Id than
 * the producer's) fails the producer with RUNNEL_E_STATE. Returns an
 * earlier failure, if any. */
RUNNEL_API runnel_result runnel_producer_send(runnel_producer *p, const void *body, size_t len,
                                              uint64_t tag);

/* Sends a close-only write (Stream-Closed: true) as the next seq. */
RUNNEL_API runnel_result runnel_producer_close_stream(runnel_producer *p, uint64_t tag);

/* Waits until every write sent holds (RUNNEL_OK), or the producer failed. */
RUNNEL_API runnel_result runnel_producer_flush(runnel_producer *p);

/* Gives the failure, after a call returned one: the write's seq, its
 * outcome and the answer that decided it. NULL when none. */
RUNNEL_API const runnel_answer *runnel_producer_failure(const runnel_producer *p, uint64_t *seq,
                                                        runnel_outcome *outcome, char *why,
                                                        size_t whycap);

/* Counters: writes sent (first tries), repeats sent, writes that held. */
typedef struct {
    uint64_t writes, retries, acked, repeats, gaps, epoch, next_seq;
} runnel_producer_stats;
RUNNEL_API void runnel_producer_get_stats(const runnel_producer *p, runnel_producer_stats *s);

/* Frees the producer (without flushing) and releases its state file. */
RUNNEL_API void runnel_producer_free(runnel_producer *p);

/* ---------------------------------------------------------------------
 * The operator's routes (/__runnel/admin/: the server's docs/ADMIN.md;
 * /__runnel/cluster/: docs/CLUSTER.md)
 * ------------------------------------------------------------------- */

/* One request of an operator route: method "GET", "POST" or "DELETE" and
 * path, the route and its query under the server
 * ("/__runnel/admin/buckets?limit=10", "/__runnel/cluster/drain/3", names
 * percent-encoded), sent with the client's token as the bearer
 * credential (the node's admin token, or a gateway admin tenant's key).
 * A 2xx answer's body (JSON) goes to on_data (NULL: discarded); an error
 * answer's code and message are in ans. RUNNEL_OK for a 2xx answer,
 * RUNNEL_E_STATUS for another, RUNNEL_E_TRANSPORT when none came. */
RUNNEL_API runnel_result runnel_admin_call(runnel_client *c, const char *method, const char *path,
                                           runnel_data_fn on_data, void *arg, runnel_answer *ans);

#ifdef __cplusplus
}
#endif

#endif /* RUNNEL_CLIENT_H */
