/*
 * engine_int.h — what the engine's files share and nothing outside the
 * engine sees: the engine object, the engine's room in an op, and the
 * functions one engine file offers another.
 *
 *   state.c, apply.c    the state machine (state.h): no I/O
 *   effects.c           the state machine's effects on this engine's storage
 *                       and observers; the applier a command log calls
 *   producers.c         producer rules and answers (producers.h): pure
 *   validate.c          a request against applied state: a verdict
 *   pipeline.c          queues, submission to the command log, completion,
 *                       expiry starts, sweeps
 *   forkread.c          reads through fork chains, boundaries, fork offsets
 *   tiering.c           history moved to the cold store: due chunks, moves
 *   checkpoint.c        the checkpoint image and its job
 *   open.c              open (checkpoint + log replay) and close
 *   engine.c            the remaining public calls (lookups, observers)
 *
 * Everything runs on the engine's loop thread, except rn_engine_open
 * (which may recover on a worker before the loop uses the engine), what a
 * log runs on its own thread (rn_cmdlog_entry.write_data) and the
 * checkpoint's worker.
 */
#ifndef RN_ENGINE_INT_H
#define RN_ENGINE_INT_H

#include <assert.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "engine/cmdlog.h"
#include "engine/command.h"
#include "engine/engine.h"
#include "engine/state.h"
#include "log/wal.h"
#include "tiers/tiers.h"
#include "util/buf.h"
#include "util/log.h"

struct checkpoint_job;

struct rn_engine {
    uv_loop_t *loop;
    rn_engine_config cfg;
    char *dir;
    rn_streamfiles *files; /* the stream files of cfg.tiers */
    rn_wal *wal;
    rn_cmdlog *log; /* the WAL as the pipeline's command log */
    rn_state state;
    uint64_t log_bytes_at_checkpoint;
    struct checkpoint_job *checkpoint; /* in flight, or NULL */
    struct {
        rn_stream_observer fn;
        void *arg;
    } observers[RN_ENGINE_MAX_OBSERVERS];
    int observer_count;
    int ops_in_log;                 /* mutations submitted, not yet answered by the log */
    int pin_asks;                   /* the sweep of orphan pins: questions in flight */
    int cut_asks;                   /* a purge's cuts of pinned forks in flight */
    int64_t cut_retry_ms;           /* no cut is asked before (a round failed) */
    int ops_preparing;              /* mutations waiting for their stream's files */
    rn_log_throttle store_refusals; /* writes refused for their stream files */
    rn_op *orphans, *orphans_tail;  /* queued on destroyed streams: to re-run */
    int loss_accepted;              /* recovery accepted a loss: checkpoint before serving */
    int tiering;                    /* history moves to the cold store (tiering.c) */
    uint64_t cold_backlog;          /* bytes of chunks due to move, not moved yet */
    uint64_t tier_incarnation;      /* of the chunk being moved, when it was read */
    int share_touches;              /* rn_engine_share_touches */
    uint64_t *touches;              /* ids read here, not taken yet, oldest first */
    size_t ntouches, touches_cap;
    struct purge_driver *purge; /* rn_engine_purge_start's, or NULL (purge.c) */
    /* reads that must not wait for the disk (rn_engine_read_again with
     * may_block 0): the stream file range the last one missed (warm.c) */
    int reads_cached_only;
    struct {
        uint64_t id, off;
        size_t len;
    } read_miss;
    int checkpoint_wanted; /* the next batch hook checkpoints whatever the log's size */
    int purge_wanted;      /* fenced streams may be left */
    /* damage.c: damaged stream data and the scrub */
    rn_map damaged; /* single node: {id, block offset} reported, to count each once */
    void (*on_damage)(void *arg, uint64_t id);
    void *on_damage_arg;
    size_t scrub_slot;                   /* the scrub's place in state.by_id */
    uint64_t scrub_id, scrub_off;        /* the stream it is in and its next byte */
    struct rn_engine_warm *scrub_warm;   /* the range the scrub missed, read in on the pool */
    struct rn_engine_warm *history_warm; /* the chunk the history flush missed, the same */
};

/* The engine's room in an op (rn_op_private): everything a mutation needs
 * between its submission and its answer. */
typedef struct {
    rn_engine *engine;
    rn_op *next_queued; /* in its stream's queue */
    uint64_t stream_id;
    rn_cmd cmd;             /* the command to log; its pointers stay valid until the answer */
    rn_buf head;            /* encoded command head */
    rn_buf stored;          /* JSON message text of the body; EXPIRE_PRODUCERS: the id list */
    size_t messages;        /* messages in the command's data */
    rn_streamfiles_pin pin; /* the stream files the log's writer writes the data to */
    /* a worker's step before the command is logged: making the stream's
     * files before its first data, then writing a large append's data
     * (ahead.c; queued again from the first one's callback) */
    uv_work_t work;
    int files_status;
    rn_buf sums;                    /* its block checksums, for the log's record (ahead.c) */
    uint64_t index_entry;           /* the append's number in the stream's index */
    rn_cmdlog_entry log;            /* the command on its way through the log */
    struct engine_apart *apart;     /* a create apart from its source: its pin (apart.c) */
    struct engine_arrival *arrival; /* an append whose body is arriving (arriving.c) */
} op_private;

static_assert(sizeof(op_private) <= sizeof(rn_op_private), "rn_op_private is too small");
static_assert(_Alignof(op_private) <= _Alignof(rn_op_private), "rn_op_private is misaligned");

static inline op_private *priv(rn_op *op) {
    return (op_private *)op->engine.bytes;
}

/* ---- pipeline.c, ahead.c: logging a command ---- */

/* Answers an op whose command could not be logged (rc: no file space, the
 * stream's files could not be made or written; nothing is pinned) and lets
 * the stream's queue go on; a pending create's stream goes away. */
void engine_refuse_unlogged(rn_engine *e, rn_op *op, rn_stream *s, int rc);
/* The same without logging a store failure: answers result. */
void engine_release_unlogged(rn_engine *e, rn_op *op, rn_stream *s, rn_result result);
/* Submits op's encoded command (priv(op)->head, then `data` of len bytes
 * when len > 0) to the log; write_data, when not NULL, is the entry's.
 * The stream is busy until the log answers. */
void engine_log_entry(rn_engine *e, rn_op *op, const void *data, size_t len,
                      int (*write_data)(rn_cmdlog_entry *entry));
/* Whether op's command c is a large append to write once (ahead.c): its
 * data is at least cfg.large_append_bytes, on a log that takes it. */
int engine_ahead_wanted(const rn_engine *e, const rn_cmd *c);
/* Writes and syncs the data of op's command (its files pinned) on a
 * worker, then logs the command stored ahead; a failure is answered as
 * unlogged. s (not busy) is busy until the log answers. */
void engine_write_ahead(rn_engine *e, rn_op *op, rn_stream *s);
/* A worker's step (req: the op's work, req->data the op), once a large
 * append's data is written (rn_streamfiles_write_piece, its checksums into
 * p->sums): its checksum and index entries, then the sync; and its
 * callback, which logs the command stored ahead, or answers the failure
 * as unlogged. */
void engine_ahead_seal_work(uv_work_t *req);
void engine_ahead_sealed(uv_work_t *req, int status);

/* ---- arriving.c: appends whose body is still arriving ---- */

/* Gives op (in.arriving) its arrival state, at submission. */
void engine_arrival_begin(rn_op *op);
/* Frees op's arrival state, if any (no piece may be on a worker). */
void engine_arrival_free(rn_op *op);
/* True when op's body is arriving and ended incomplete: it is refused
 * before it is validated. */
int engine_arrival_cut(rn_op *op);
/* engine_write_ahead's step for an arriving body (its stream busy, its
 * files pinned, room for its checksums made): writes the body as it
 * arrives, then seals it (engine_ahead_sealed). */
void engine_arrival_start(rn_engine *e, rn_op *op);

/* ---- damage.c ---- */

/* A read of stream id's files found block `at` damaged (by the scrub, or
 * by a read). Single node: counted once per block, logged, -EUCLEAN. In a
 * cluster the block's own bytes join the stream's gap (recorded durably)
 * and the fetcher is told: -EAGAIN (the read is answered elsewhere or
 * asked again); -EUCLEAN when the gap cannot be recorded. */
int engine_data_damaged(rn_engine *e, uint64_t id, uint64_t at, int by_scrub);
/* rn_engine_warm_missed for a range its caller names (the scrub's, the
 * history flush's) rather than the last read's miss. */
struct rn_engine_warm *engine_warm_range(rn_engine *e, rn_warm_for who, uint64_t id, uint64_t off,
                                         size_t len, void (*done)(void *arg), void *arg);
/* The first block of s's own files that a read found damaged, among the
 * blocks holding [from, to), or UINT64_MAX (a cluster has no such list:
 * its damaged blocks are gaps). */
uint64_t engine_known_damage(rn_engine *e, const rn_stream *s, uint64_t from, uint64_t to);
/* s's gap shrank: counts its damaged blocks repaired once it is empty. */
void engine_data_repaired(rn_engine *e, rn_stream *s);

/* ---- replica.c, inherit.c: gaps, and forks' ranges kept here ---- */

/* Sets s's gap from its files and its gap record (a fork apart from a
 * source whose group is not here starts keeping its inherited range:
 * engine_inherit_wanted), and records it durably; aborts when it cannot. */
void engine_find_gap(rn_engine *e, rn_stream *s);
/* The first byte of s this replica's files hold for it: below it the
 * bytes are its fork source's (unless kept here: s->inherit), retained
 * away or in the cold store. */
uint64_t engine_own_from(const rn_stream *s);
/* s's gap as its record says it (with `held` for a kept inherited range). */
rn_streamfiles_gap engine_gap_record(const rn_stream *s);
/* Whether this replica holds the state of stream id's group (always,
 * without a log that says otherwise: rn_cmdlog_ops.hosts). */
int engine_hosts(const rn_engine *e, uint64_t id);
/* Whether s, a fork apart from its source with an inherited range, is on
 * a replica that does not host its source's group (so keeps that range). */
int engine_inherit_wanted(const rn_engine *e, const rn_stream *s);
/* The CREATE of stream id applied: a fork apart from a source whose group
 * is not here gets its inherited range as its gap (or, applied again,
 * what its record says), and the fetcher is told (rn_engine_on_damage's
 * hook). */
void engine_inherit_created(rn_engine *e, uint64_t id);
/* Gives every fork apart from a source whose group is not here (any
 * more, or learnt since its CREATE applied) its inherited range as its
 * gap; rn_engine_gaps runs it first. */
void engine_inherit_scan(rn_engine *e);

/* ---- effects.c ---- */

/* Tells every observer, in registration order. */
void engine_notify(rn_engine *e, rn_stream *s, rn_stream_event ev);
/* Applies a durable command to e's state; its data is written unless
 * data_stored. Returns rn_state_apply's result. */
int engine_apply(rn_engine *e, const rn_cmd *c, int data_stored, rn_applied *out);
/* The command log's applier (rn_cmdlog_applier.apply; ctx is the engine). */
void engine_apply_logged(void *ctx, const rn_cmd *cmd, int data_stored, rn_applied *out);
/* Destroys s outside apply with this engine's effects (rn_state_destroy:
 * observers hear it removed, its files go, mutations queued on it join
 * e->orphans). */
void engine_destroy(rn_engine *e, rn_stream *s);
/* The same for a pending create's stream that was never applied. */
void engine_destroy_pending(rn_engine *e, rn_stream *s);

/* ---- validate.c ---- */

typedef enum {
    VERDICT_ANSWER,          /* answer now: `result`, about `stream` (may be NULL) */
    VERDICT_WAIT,            /* wait behind `stream`'s mutation in the log */
    VERDICT_EXPIRE_STREAM,   /* `stream` expired: wait behind its deletion */
    VERDICT_EXPIRE_PRODUCER, /* wait behind discarding `victim`'s state in `stream` */
    VERDICT_LOG,             /* log priv(op)->cmd, a command for `stream` (NULL: a create,
                                whose stream the pipeline makes) */
    VERDICT_PIN,             /* a fork's create apart from its source: pin it first */
} verdict_kind;

typedef struct {
    verdict_kind kind;
    rn_result result;
    rn_stream *stream;
    rn_producer *victim;
} verdict;

/* Evaluates op against e's applied state at time now, in the order of the
 * protocol's checks (see the top of validate.c). Sets op->out's answer fields; for LOG, fills
 * priv(op)->cmd (and the stored JSON text). Reads stream files (offsets
 * and boundaries) and renews the stream's TTL window (rn_engine_touch), but
 * changes no other state. */
verdict engine_validate(rn_engine *e, rn_op *op, int64_t now);

/* ---- pipeline.c ---- */

/* Starts the deletion of expired stream s unless a mutation of it is in the
 * log or the log would refuse it (an internal mutation). */
void engine_start_expiry(rn_engine *e, rn_stream *s);
/* Re-runs the mutations that were queued on destroyed streams. */
void engine_rerun_orphans(rn_engine *e);
/* Whether the log takes commands of the stream at path now (a replicated
 * log: this replica leads its group); mutations are refused
 * RN_ERR_NO_LEADER, and internal ones not started, where it does not. */
int engine_log_accepts(const rn_engine *e, const char *path, size_t len);

/* Validates op and acts on the verdict: answers it, queues it, or logs
 * its command. done() may run before this returns. */
void engine_run_op(rn_engine *e, rn_op *op);
/* Answers op with result about s (may be NULL): op->done() runs. */
void engine_finish_op(rn_op *op, rn_result result, rn_stream *s);
/* An id for a new stream at path: see rn_cmdlog_ops.issue_id. 0: none. */
uint64_t engine_issue_id(rn_engine *e, const char *path, size_t len);

/* ---- apart.c ---- */

/* Whether a create with a fork source (in) names a source in another
 * group than its own (never without a log that has groups). */
int engine_apart(const rn_engine *e, const rn_op_request *in);
/* The pin answer a create apart from its source holds, or NULL before. */
const rn_fork_pin_answer *engine_apart_answer(rn_op *op);
/* VERDICT_PIN: issues the fork's id, has the source's group pin it, waits
 * (bounded) until this replica applied that pin (not at all where the
 * source's group is not hosted), and runs op again; or answers op with
 * the refusal. */
void engine_apart_pin(rn_engine *e, rn_op *op);
/* op's CREATE of s applied: when s keeps its inherited range here and
 * its copy is not done (inherit.c), op is answered later (created, once
 * copied or after the bounded wait): 1; else 0, and the caller answers. */
int engine_apart_hold(rn_op *op, const rn_stream *s);
/* The id a create apart from its source was pinned for (0: not apart). */
uint64_t engine_apart_fork_id(rn_op *op);
/* op is being answered with result: releases its pin unless the fork was
 * created (or may have been) and frees the pin's state, after done()
 * (conflicting_type may point into it). Call around op->done(). */
struct engine_apart *engine_apart_detach(rn_op *op, rn_result result);
void engine_apart_free(struct engine_apart *a);
/* Destroying s: a fork apart from its source asks that the source's pin
 * be released, from the leader of its group only. */
void engine_apart_destroyed(rn_engine *e, const rn_stream *s);
/* One slice of a walk over every stream, visible or not (the contract of
 * rn_engine_foreach_slice otherwise): what that function and the sweep's
 * slices share. */
int engine_slice(rn_engine *e, rn_engine_slice *at, size_t slots,
                 void (*fn)(rn_stream *s, void *arg), void *arg);
/* Whether a sweep pass may ask about orphan pins: one round at a time. */
int engine_pins_sweep_due(const rn_engine *e);
/* Releases s's pins whose fork is gone where its group's leader sees it (a
 * create that never applied, a release that was lost), on the leader of
 * the source's group, once they are RN_PIN_GRACE_MS old: asks that leader
 * about them, at most PIN_SWEEP_ASKS questions out at once. */
void engine_sweep_pins_of(rn_engine *e, const rn_stream *s, int64_t now);

/* ---- cutforks.c ---- */

/* A purge of s, fenced, that forks in other groups pin: on the leader of
 * s's group, asks each pinned fork's group to cut it (rn_engine_cut) and
 * releases the pin once it did (or once a pin RN_PIN_GRACE_MS old names
 * no fork of s), one round at a time; s's PURGE waits for its last pin. */
void engine_cut_pinned(rn_engine *e, const rn_stream *s, int64_t now);

/* ---- subs_state.c ---- */

/* Whether group's manifest carries the subscriptions' state. */
int engine_subs_in(const rn_state *st, unsigned group);
/* A restored manifest of group: its subscriptions' state m (len bytes),
 * or NULL when the manifest holds none. */
void engine_restore_subs(rn_state *st, unsigned group, const uint8_t *m, size_t len);

/* ---- forkread.c ---- */

/* Copies the stream's bytes [off, off+len) into out, taking positions below
 * a fork's fork_offset from its source chain and those below its cold end
 * (as of now) from the tiers' read cache. The range must lie below the
 * tail. out NULL: only checks that the cold bytes of the range are cached.
 * Returns 0 or -errno (-ENODATA: cold bytes not cached, the miss kept for
 * rn_engine_cold_fetch; tiers.h). */
int engine_read_range(rn_engine *e, const rn_stream *s, uint64_t off, size_t len, uint8_t *out);

/* Where a fork of src asked for by `in` starts: the fork offset (default:
 * the source tail) plus the sub-offset. Returns 0 with *pos, or the result
 * to refuse with (> 0). */
int engine_fork_position(rn_engine *e, const rn_op_request *in, rn_stream *src, uint64_t *pos);

/* ---- checkpoint.c ---- */

/* Loads <dir>/checkpoint if there is one into e's (empty) state, after
 * removing a checkpoint.tmp a crash left. Returns 0 with *segment (the
 * first log segment to replay: 0 without a checkpoint) and *streams, or
 * -EBADMSG for a damaged checkpoint, or -errno when it cannot be read. */
int engine_checkpoint_load(rn_engine *e, uint64_t *segment, uint64_t *streams);
/* The log's batch hook: starts a checkpoint after checkpoint_bytes of log
 * (arg is the engine). Runs between batches, when nothing is in flight. */
void engine_checkpoint_maybe(void *arg);
/* Starts a checkpoint now (on a worker, as the batch hook does) unless one
 * or a log batch is in flight, or the engine has no log of its own (a
 * replicated one). Returns 0 or -EBUSY (ask again later; the log's next
 * batch hook takes it when e->checkpoint_wanted is set). */
int engine_checkpoint_start(rn_engine *e);
/* Writes a checkpoint now, on this thread, when no checkpoint and no batch
 * is in flight (close; the open after an accepted loss). Returns 0, or
 * -errno when it failed (the log segments before it then stay). */
int engine_checkpoint_final(rn_engine *e);
/* The checkpoint image of st's applied streams and namespaces, as of log
 * segment `segment` (the first to replay), into b (empty). */
void engine_image_encode(const rn_state *st, uint64_t segment, rn_buf *b);
/* Loads an image into st (empty). Returns 0 with *segment and *streams, or
 * -EBADMSG when the image is damaged (st then holds what was read). */
int engine_image_decode(rn_state *st, const uint8_t *data, size_t size, int64_t now,
                        uint64_t *segment, uint64_t *streams);
/* Writes image as <dir>/checkpoint atomically and durably (util/files.c's
 * atomic write: checkpoint.tmp, fsync, rename, directory fsync). Returns 0
 * only when every step succeeded, else -errno: the checkpoint then counts
 * for nothing and the log segments it would replace must stay. */
int engine_checkpoint_write(const char *dir, const rn_buf *image);
/* The checkpoint's records, which manifests (replica.c) reuse: u64 count
 * then every applied stream pick selects (NULL: all); u64 count then one
 * lstr per namespace. */
void engine_encode_streams(const rn_state *st, rn_stream_pick pick, void *arg, rn_buf *b);
void engine_encode_namespaces(const rn_state *st, rn_buf *b);
/* The cold ends (history tiering) of the applied streams pick selects
 * (NULL: all) that have one: u64 count, then (id, end) pairs by id. The
 * decoder sets them; a stream it names must be in st and the end within
 * its tail, else r fails. */
void engine_encode_cold_ends(const rn_state *st, rn_stream_pick pick, void *arg, rn_buf *b);
void engine_decode_cold_ends(rn_state *st, rn_reader *r);
/* The fences (state.h), sorted: u64 count, then per fence lstr namespace
 * and i64 time, and with scope -1 (a checkpoint: every fence whole) u8
 * all and the 32-byte bitmap of groups; with a scope g >= 0 (a group's
 * manifest) only the fences that cover group g. engine_decode_fences adds
 * them to st (with scope g: each as a fence of group g). */
void engine_encode_fences(const rn_state *st, int scope, rn_buf *b);
void engine_decode_fences(rn_state *st, int scope, rn_reader *r);
/* Decodes one stream record into st (TTL window starting at now); its
 * fork source's id goes to *source_id, for engine_link_forks once every
 * stream is loaded. NULL (r->failed set) for a malformed record or a
 * stream st holds already. */
rn_stream *engine_decode_stream(rn_state *st, rn_reader *r, int64_t now, uint64_t *source_id);
void engine_decode_namespaces(rn_state *st, rn_reader *r);
/* Points each of the n loaded streams at its fork source (sources[k], 0:
 * none) in st and counts references. Returns 0, or -1 when a source is
 * missing or the chain loops. */
int engine_link_forks(rn_state *st, rn_stream **loaded, const uint64_t *sources, uint64_t n);

/* The command that rewrites s's history at its tail (ext §2.4: new
 * incarnation, the token of serial under key, inherited offset = tail,
 * producers closed by history), as a restore and an accepted loss apply
 * it to every stream. */
static inline rn_cmd engine_rewrite_at_tail(const rn_stream *s, int64_t now_ms, uint64_t serial,
                                            uint64_t key) {
    return (rn_cmd){.type = RN_CMD_REWRITE,
                    .stream_id = s->id,
                    .time_ms = now_ms,
                    .serial = serial,
                    .incarnation = rn_incarnation_for(key, serial),
                    .offset = s->tail};
}

/* ---- accept_loss.c ---- */

/* True when e->cfg.accept_loss names `damage` and it can be accepted. */
int engine_loss_named(const rn_engine *e, const rn_wal_damage *damage);
/* Recovery refused with damage, which the operator named: replays, with
 * replay, the log's readable prefix from segment `from` into e's state (the
 * checkpoint's), drops the rest, and rewrites the history of every stream
 * (ext §2.4) with serials above any the dropped records may have issued.
 * Logs what was dropped. Sets *rec for the log's open and
 * e->loss_accepted: the open must checkpoint before anything is served.
 * Returns 0 or -errno (or replay's result). */
int engine_accept_loss(rn_engine *e, uint64_t from, const rn_wal_damage *damage,
                       rn_wal_replay_fn replay, rn_wal_recovery *rec);
/* ---- tiering.c ---- */

/* True when appends are refused: history tiering is on and the backlog of
 * chunks due to move reached the hot budget (cfg.hot_bytes). */
int engine_hot_budget_spent(const rn_engine *e);
/* The refusal of an append while the budget is spent: COLD_STORE_FAILED
 * with the store's words in *cause when the cold store refuses the moves
 * (tiers.h, rn_tiers_history_failing: no wait lifts that), else
 * COLD_BACKPRESSURE. */
rn_result engine_hot_budget_refusal(rn_engine *e, const char **cause);
/* Reads ahead for a sequential reader of s that just read up to `from`:
 * starts fetching the cold chunks of s's bytes [from, from + len) that the
 * read cache lacks (as many as the cache spares: tiers.h), so that the
 * reader's next read finds them there. */
void engine_cold_read_ahead(rn_engine *e, const rn_stream *s, uint64_t from, uint64_t len);

/* ---- purge.c ---- */

/* Fenced streams may be left (a FENCE applied, a manifest or checkpoint
 * with fences loaded): the purge driver looks for them at its next tick. */
void engine_purge_wanted(rn_engine *e);

/* ---- open.c ---- */

/* Names stream id of engine arg's state (an rn_stream_namer for damage
 * reports). */
const char *engine_checkpointed_path(void *arg, uint64_t id, size_t *len);
/* An engine over cfg's tiers with an empty state, no log yet. */
rn_engine *engine_new(uv_loop_t *loop, const rn_engine_config *cfg);

#endif
