/*
 * engine.c — the mutation pipeline and its validation, recovery and
 * checkpoints, and the public calls that read state. See engine.h for the
 * model and engine_int.h for the engine's other files.
 *
 * Mutation path: rn_engine_submit() -> run_*() validates against applied
 * state -> either finish() at once, or log_command() (encode, reserve file
 * space and pin the stream's files, submit to the command log) -> the log
 * makes it durable, writes the data into the stream files
 * (write_stream_files), applies it through the engine's applier
 * (effects.c) -> command_done() -> finish() -> drain the stream's queue.
 *
 * Recovery: load_checkpoint() restores every stream as of a snapshot, then
 * rn_wal_recover() replays later records through the same apply; streams
 * the replay touched get their files cut to the recovered tail.
 *
 * Checkpoints: after checkpoint_bytes of log, the batch hook (run between log
 * batches, when nothing is in flight) serializes all stream metadata and
 * rotates the log; a worker thread then syncs the file system (making every
 * stream file durable), writes the checkpoint atomically, and the segments
 * before the rotation are dropped.
 */
#include "engine/damage_report.h"
#include "engine/engine_int.h"
#include "engine/producers.h"
#include "log/wal_cmdlog.h"
#include "util/blake3.h"
#include "util/clock.h"
#include "util/crc32c.h"
#include "util/fault.h"
#include "util/json_text.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char CHECKPOINT_MAGIC[8] = {'R', 'N', 'C', 'K', 'P', 'T', '0', '2'};

#define PRODUCER_TTL_DEFAULT_MS (7 * 24 * 3600 * 1000ull) /* ext §5.4 */
#define PRODUCER_CAP_DEFAULT 4096
#define EXPIRE_LIST_MAX_BYTES (1u << 20) /* producer ids per EXPIRE_PRODUCERS record */

typedef struct checkpoint_job {
    uv_work_t req;
    rn_engine *engine;
    rn_buf image;     /* serialized checkpoint */
    uint64_t segment; /* first log segment not covered */
    int status;
} checkpoint_job;

static void run_op(rn_engine *e, rn_op *op);

void rn_engine_observe(rn_engine *e, rn_stream_observer fn, void *arg) {
    if (e->observer_count == RN_ENGINE_MAX_OBSERVERS)
        abort(); /* a wiring error, not a runtime condition */
    e->observers[e->observer_count].fn = fn;
    e->observers[e->observer_count].arg = arg;
    e->observer_count++;
}

static const char DEFAULT_TYPE[] = "application/octet-stream";

struct rn_blobs *rn_engine_blobs(rn_engine *e, int cold) {
    return cold ? e->cold : e->snapshots;
}

int rn_engine_namespace_exists(rn_engine *e, const char *ns, size_t len) {
    return rn_state_namespace_exists(&e->state, ns, len);
}

/* Re-runs the mutations that were queued on destroyed streams. */
void engine_rerun_orphans(rn_engine *e) {
    while (e->orphans) {
        rn_op *q = e->orphans;
        e->orphans = priv(q)->next_queued;
        if (!e->orphans)
            e->orphans_tail = NULL;
        run_op(e, q);
    }
}

/* ---- the mutation pipeline ---- */

/* An id for a new stream at path, or a rewrite serial: the log's when it
 * issues them (replicated), else the state's counter. */
static uint64_t issue_id(rn_engine *e, const char *path, size_t len) {
    if (e->log->ops->issue_id)
        return e->log->ops->issue_id(e->log, &e->state, path, len);
    return e->state.next_id++;
}

/* Whether the log takes a command of s now (internal mutations are only
 * started where they can be logged). */
static int log_accepts(const rn_engine *e, const rn_stream *s) {
    return !e->log->ops->accepts || e->log->ops->accepts(e->log, s->path, s->path_len);
}

/* Sets the op's outcome: result, stream and the stream's state. */
static void set_outcome(rn_op *op, rn_result result, rn_stream *s) {
    op->out.result = result;
    op->out.stream = s;
    if (s) {
        op->out.next_offset = s->tail;
        op->out.stream_closed = s->closed;
    }
}

/* Answers op: its outcome, then done() (which may free it, so the engine's
 * buffers in it are released first). */
static void finish(rn_op *op, rn_result result, rn_stream *s) {
    set_outcome(op, result, s);
    rn_buf_free(&priv(op)->head);
    rn_buf_free(&priv(op)->stored);
    op->done(op);
}

static void command_done(rn_cmdlog_entry *entry);

/* The entry's write_data: writes the command's data and index entry
 * through the files pinned at submission. The WAL runs it on its writer
 * thread after the sync. */
static int write_stream_files(rn_cmdlog_entry *entry) {
    rn_op *op = entry->arg;
    rn_fault_point("apply-before-store");
    return rn_streamfiles_write_pinned(&priv(op)->pin, priv(op)->cmd.data, priv(op)->cmd.data_len,
                                       priv(op)->cmd.offset, priv(op)->index_entry);
}

static void drain_queue(rn_engine *e, uint64_t id);

/* Answers an op whose command could not be logged (no file space, or the
 * stream's files could not be made) and lets the stream's queue go on; a
 * pending create's stream goes away (re-running its queue). */
static void refuse_unlogged(rn_engine *e, rn_op *op, rn_stream *s, int rc) {
    uint64_t id = s->id;
    int pending = s->pending_create; /* s is freed below when pending */
    int full = rc == -ENOSPC || rc == -EDQUOT;
    rn_log_throttled(&e->store_refusals, 1000, RN_LOG_ERROR, "store",
                     "a write to stream %s was refused before it was logged: its stream file "
                     "could not be %s: %s (errno %d)",
                     s->path, full ? "given disk space" : "prepared", strerror(-rc), -rc);
    s->busy = 0;
    if (pending) {
        engine_destroy_pending(e, s);
        engine_rerun_orphans(e);
    }
    finish(op, full ? RN_ERR_DISK_FULL : RN_ERR_UNAVAILABLE, pending ? NULL : s);
    if (!pending)
        drain_queue(e, id);
}

/* Reserves file space for priv(op)->cmd's data, pins the stream's files and
 * submits the command to the log. The stream is busy until on_logged()
 * runs. */
static void submit_command(rn_engine *e, rn_op *op, rn_stream *s) {
    op_private *p = priv(op);
    rn_cmd *c = &p->cmd;
    rn_cmdlog_entry *entry = &p->log;
    entry->write_data = NULL;
    p->pin = (rn_streamfiles_pin){.data_fd = -1, .index_fd = -1};
    int refused = rn_fault_fail("log-reserve");
    if (refused) {
        refuse_unlogged(e, op, s, refused);
        return;
    }
    if (c->data_len) {
        int rc =
            rn_streamfiles_pin_append(e->files, s->id, c->offset, c->data_len, s->appends, &p->pin);
        if (rc < 0) {
            refuse_unlogged(e, op, s, rc);
            return;
        }
        p->index_entry = s->appends;
        entry->write_data = write_stream_files;
    }
    s->busy = 1;
    entry->cmd = c;
    entry->piece[0] = (struct iovec){p->head.data, p->head.len};
    entry->pieces = 1;
    if (c->data_len)
        entry->piece[entry->pieces++] = (struct iovec){(void *)c->data, c->data_len};
    entry->done = command_done;
    entry->arg = op;
    e->ops_in_log++;
    e->log->ops->submit(e->log, entry);
}

/* Creating a stream's two files costs the file system about a millisecond
 * (inodes, directory entries); on the loop thread a burst of first appends
 * stalled every request (500 new streams: ~0.9 s). So the first data of a
 * stream in this process goes through a worker that makes sure its files
 * exist, and the command goes on from files_ready(). */
static void ensure_files_work(uv_work_t *req) {
    rn_op *op = req->data;
    priv(op)->files_status = rn_streamfiles_ensure(priv(op)->engine->files, priv(op)->stream_id);
}

static void files_ready(uv_work_t *req, int status) {
    rn_op *op = req->data;
    rn_engine *e = priv(op)->engine;
    e->ops_preparing--;
    rn_stream *s = rn_state_stream(&e->state, priv(op)->stream_id);
    int rc = status < 0 ? status : priv(op)->files_status;
    if (rc < 0) {
        refuse_unlogged(e, op, s, rc);
        return;
    }
    s->has_files = 1;
    submit_command(e, op, s);
}

/* Encodes the command and submits it to the log (after making the
 * stream's files on a worker when this is its first data). The stream is
 * busy until on_logged() runs. A fork's create is never delayed: it was
 * validated against its source, which is not busy and could meanwhile be
 * deleted or rewritten by commands logged ahead of it. */
static void log_command(rn_engine *e, rn_op *op, rn_stream *s, const rn_cmd *cmd) {
    priv(op)->cmd = *cmd;
    rn_cmd *c = &priv(op)->cmd;
    c->time_ms = rn_now_ms();
    priv(op)->head.len = 0;
    rn_cmd_encode_head(c, &priv(op)->head);
    priv(op)->stream_id = s->id;
    priv(op)->engine = e;
    if (c->data_len && !s->has_files && !c->source_id) {
        s->busy = 1; /* later mutations queue meanwhile */
        e->ops_preparing++;
        priv(op)->files_work.data = op;
        uv_queue_work(e->loop, &priv(op)->files_work, ensure_files_work, files_ready);
        return;
    }
    submit_command(e, op, s);
}

/* Re-runs waiting mutations of stream `id` until one is in the log again.
 * The stream is looked up each time: a queued delete may remove it, and
 * then its destruction hands the rest to engine_rerun_orphans(). */
static void drain_queue(rn_engine *e, uint64_t id) {
    rn_stream *s;
    while ((s = rn_state_stream(&e->state, id)) && s->queue_head && !s->busy) {
        rn_op *q = s->queue_head;
        s->queue_head = priv(q)->next_queued;
        if (!s->queue_head)
            s->queue_tail = NULL;
        run_op(e, q);
    }
}

/* The log's answer for op's command: applied (by the log, through
 * apply_logged) or not. Answers the op, tells observers, and lets the
 * stream's queue go on. */
static void command_done(rn_cmdlog_entry *entry) {
    rn_op *op = entry->arg;
    rn_engine *e = priv(op)->engine;
    e->ops_in_log--;
    rn_streamfiles_unpin(&priv(op)->pin);
    uint64_t id = priv(op)->stream_id;
    rn_stream *s = rn_state_stream(&e->state, id);
    const rn_cmd *c = &priv(op)->cmd;
    if (!entry->applied) {
        int pending = s && s->pending_create;
        if (s)
            s->busy = 0;
        finish(op, entry->refusal, pending ? NULL : s);
        if (pending) {
            engine_destroy_pending(e, s);
            engine_rerun_orphans(e);
        } else {
            drain_queue(e, id);
        }
        return;
    }
    /* Applied before this answer: done() may submit the next request (the
     * HTTP layer parses a pipelined one while answering), which must see
     * the state after this command (a deleted stream deleted). */
    engine_rerun_orphans(e);
    if (c->type == RN_CMD_DELETE) {
        if (s)
            s->busy = 0; /* soft-deleted: it stays, and its waiters now see 410 */
        finish(op, RN_OK_DELETED, NULL);
        drain_queue(e, id);
        return;
    }
    if (!s) {
        /* A later command removed the stream before this answer (a log
         * that answers later than it applies): the outcome cannot be shown
         * any more, so it is reported unknown. */
        finish(op, RN_ERR_UNAVAILABLE, NULL);
        return;
    }
    s->busy = 0;
    static const rn_result applied_result[] = {
        [RN_OP_CREATE] = RN_OK_CREATED,    [RN_OP_APPEND] = RN_OK_APPENDED,
        [RN_OP_PUBLISH] = RN_OK_PUBLISHED, [RN_OP_RETAIN] = RN_OK_RETAINED,
        [RN_OP_REWRITE] = RN_OK_REWRITTEN, [RN_OP_EXPIRE_PRODUCERS] = RN_OK_PRODUCERS_EXPIRED,
    };
    /* done() may free the op and the entry in it: keep what follows. */
    rn_applied applied = entry->result;
    if (applied.has_producer)
        rn_producer_answer_applied(&applied.producer, op->in.producer_seq, &op->out);
    if (c->type == RN_CMD_APPEND) {
        op->out.appended_bytes = c->data_len;
        op->out.appended_messages = c->data_len ? priv(op)->messages : 0;
    }
    finish(op, applied_result[op->in.kind], s);
    s = rn_state_stream(&e->state, id);
    if (s && applied.notify)
        engine_notify(e, s, applied.event);
    drain_queue(e, id);
}

static void enqueue(rn_stream *s, rn_op *op) {
    priv(op)->next_queued = NULL;
    priv(op)->stream_id = s->id;
    if (s->queue_tail)
        priv(s->queue_tail)->next_queued = op;
    else
        s->queue_head = op;
    s->queue_tail = op;
}

/* Frees an internal mutation: an expiry of a stream or of producer state. */
static void expire_done(rn_op *op) {
    free(op);
}

/* Starts the deletion of an expired stream (an internal mutation). */
static void start_expiry(rn_engine *e, rn_stream *s) {
    if (s->busy || !log_accepts(e, s))
        return;
    rn_op *op = rn_xcalloc(1, sizeof *op);
    op->in.kind = RN_OP_DELETE;
    op->done = expire_done;
    rn_cmd c = {.type = RN_CMD_DELETE, .stream_id = s->id};
    log_command(e, op, s, &c);
}

/* Starts discarding the state of n producers of s (an internal mutation;
 * s must not be busy). The ids travel in the op's `stored` buffer. */
static void start_producer_expiry(rn_engine *e, rn_stream *s, rn_producer *const *victims,
                                  size_t n) {
    rn_op *op = rn_xcalloc(1, sizeof *op);
    op->in.kind = RN_OP_EXPIRE_PRODUCERS;
    op->done = expire_done;
    for (size_t k = 0; k < n; k++)
        rn_buf_append_lstr(&priv(op)->stored, victims[k]->id, victims[k]->id_len);
    rn_cmd c = {.type = RN_CMD_EXPIRE_PRODUCERS,
                .stream_id = s->id,
                .producer_ids = priv(op)->stored.data,
                .producer_ids_len = priv(op)->stored.len};
    log_command(e, op, s, &c);
}

/* Converts a body to stored form for the stream's content type. Returns 0
 * and sets *data and *len, or a result code to refuse with. */
static int prepare_body(rn_op *op, int json, int allow_empty_array, const uint8_t **data,
                        size_t *len) {
    if (!json || op->in.body_len == 0) {
        *data = op->in.body;
        *len = op->in.body_len;
        priv(op)->messages = op->in.body_len ? 1 : 0;
        return 0;
    }
    priv(op)->stored.len = 0;
    rn_buf_reserve(&priv(op)->stored, op->in.body_len + 1);
    size_t out_len = 0, count = 0;
    rn_json_status st = rn_json_to_messages(op->in.body, op->in.body_len, priv(op)->stored.data,
                                            &out_len, &count, NULL);
    if (st == RN_JSON_EMPTY_ARRAY && allow_empty_array) {
        *data = NULL;
        *len = 0;
        return 0;
    }
    if (st == RN_JSON_EMPTY_ARRAY)
        return RN_ERR_JSON_EMPTY_ARRAY;
    if (st == RN_JSON_TOO_DEEP)
        return RN_ERR_JSON_TOO_DEEP;
    if (st != RN_JSON_OK)
        return RN_ERR_JSON_INVALID;
    priv(op)->stored.len = out_len;
    priv(op)->messages = count;
    *data = priv(op)->stored.data;
    *len = out_len;
    return 0;
}

static void run_create(rn_engine *e, rn_op *op, rn_stream *s) {
    if (s && s->soft_deleted) {
        finish(op, RN_ERR_CONFIG_MISMATCH, NULL);
        return;
    }
    const char *ct = op->in.content_type ? op->in.content_type : DEFAULT_TYPE;
    size_t ct_len = op->in.content_type ? op->in.content_type_len : sizeof DEFAULT_TYPE - 1;
    int64_t ttl_s = op->in.ttl_s, expires_at_ms = op->in.expires_at_ms;
    rn_stream *src = NULL;
    uint64_t fork_at = 0;
    if (op->in.fork_source) {
        src = rn_state_at(&e->state, op->in.fork_source, op->in.fork_source_len);
        if (src && src->busy) {
            enqueue(src, op); /* evaluate against the source's next state */
            return;
        }
        if (!src || src->pending_create || rn_stream_expired(src, rn_now_ms())) {
            finish(op, RN_ERR_SOURCE_NOT_FOUND, NULL);
            return;
        }
        if (src->soft_deleted) {
            finish(op, RN_ERR_SOURCE_GONE, NULL);
            return;
        }
        if (src->fork_depth + 1 > RN_MAX_FORK_DEPTH) {
            finish(op, RN_ERR_FORK_DEPTH, NULL);
            return;
        }
        if (op->in.content_type &&
            !rn_content_type_equal(src->content_type, src->content_type_len, ct, ct_len)) {
            op->out.conflicting_type = src->content_type;
            op->out.conflicting_type_len = src->content_type_len;
            finish(op, RN_ERR_CONTENT_TYPE, NULL);
            return;
        }
        int refuse = engine_fork_position(e, &op->in, src, &fork_at);
        if (refuse) {
            finish(op, (rn_result)refuse, NULL);
            return;
        }
        if (!op->in.content_type) {
            ct = src->content_type;
            ct_len = src->content_type_len;
        }
        if (ttl_s < 0 && expires_at_ms < 0) { /* inherit the source's expiry */
            ttl_s = src->ttl_s;
            expires_at_ms = src->expires_at_ms;
        }
    }
    if (s) {
        int same = rn_content_type_equal(s->content_type, s->content_type_len, ct, ct_len) &&
                   s->ttl_s == ttl_s && s->expires_at_ms == expires_at_ms &&
                   s->closed == (op->in.close != 0) && s->source == src &&
                   s->fork_offset == fork_at;
        finish(op, same ? RN_OK_EXISTS : RN_ERR_CONFIG_MISMATCH, s);
        return;
    }
    const uint8_t *data;
    size_t len;
    int refuse = prepare_body(op, rn_content_type_is_json(ct, ct_len), 1, &data, &len);
    if (refuse) {
        finish(op, (rn_result)refuse, NULL);
        return;
    }
    uint64_t id = issue_id(e, op->in.path, op->in.path_len);
    if (!id) {
        finish(op, RN_ERR_DISK_FULL, NULL);
        return;
    }
    s = rn_state_add(&e->state, id, op->in.path, op->in.path_len, ct, ct_len);
    s->pending_create = 1;
    rn_cmd c = {.type = RN_CMD_CREATE,
                .stream_id = s->id,
                .path = s->path,
                .path_len = s->path_len,
                .incarnation = rn_incarnation_for(s->id),
                .content_type = s->content_type,
                .content_type_len = s->content_type_len,
                .ttl_s = ttl_s,
                .expires_at_ms = expires_at_ms,
                .source_id = src ? src->id : 0,
                .offset = fork_at,
                .close = (uint8_t)(op->in.close != 0),
                .data = data,
                .data_len = len};
    log_command(e, op, s, &c);
}

/* Admits a producer the stream holds no state for (rn_producer_admit):
 * returns 1 after queueing op behind the discard of the producer it
 * displaces, 2 after refusing with PRODUCER_LIMIT, or 0 to go on. */
static int admit_producer(rn_engine *e, rn_op *op, rn_stream *s, int64_t now) {
    rn_admission a =
        rn_producer_admit(s, &op->in, e->cfg.producer_cap, e->cfg.producer_ttl_ms, now);
    if (a.verdict == RN_ADMIT_DISPLACE) {
        enqueue(s, op);
        start_producer_expiry(e, s, &a.victim, 1);
        return 1;
    }
    if (a.verdict == RN_ADMIT_REFUSE) {
        op->out.retry_after_s = a.retry_after_s;
        finish(op, RN_ERR_PRODUCER_LIMIT, s);
        return 2;
    }
    return 0;
}

/* An append or close, in the order of ext §5.3 after the stream checks of
 * run_op(): idle producer state is discarded first (a logged step the op
 * waits for), then the producer rules, closure, content (type, emptiness,
 * Stream-Seq, JSON text, Producer-Digest last), and admission of a new
 * producer; a write that passes is logged. */
static void run_append(rn_engine *e, rn_op *op, rn_stream *s) {
    int64_t now = rn_now_ms();
    if (op->in.has_producer) {
        rn_producer *p = rn_map_get(&s->producers, op->in.producer_id, op->in.producer_id_len);
        if (p && rn_producer_idle(p, now, e->cfg.producer_ttl_ms)) {
            enqueue(s, op);
            start_producer_expiry(e, s, &p, 1);
            return;
        }
        int answer = rn_producer_rules(s, &op->in, &op->out);
        if (answer != RN_PRODUCER_APPLIES) {
            finish(op, (rn_result)answer, s);
            return;
        }
    }
    if (s->closed) {
        /* Close-only without producer headers is idempotent (PROTOCOL §5.2). */
        int repeat = !op->in.has_producer && !op->in.body_len && op->in.close;
        finish(op, repeat ? RN_OK_DUPLICATE : RN_ERR_CLOSED, s);
        return;
    }
    if (!op->in.body_len && !op->in.close) {
        finish(op, RN_ERR_EMPTY_BODY, s);
        return;
    }
    if (op->in.body_len && !op->in.content_type) {
        finish(op, RN_ERR_MISSING_CONTENT_TYPE, s);
        return;
    }
    if (op->in.body_len && !rn_content_type_equal(s->content_type, s->content_type_len,
                                                  op->in.content_type, op->in.content_type_len)) {
        op->out.conflicting_type = s->content_type;
        op->out.conflicting_type_len = s->content_type_len;
        finish(op, RN_ERR_CONTENT_TYPE, s);
        return;
    }
    if (op->in.has_seq && s->last_seq) {
        size_t n = op->in.seq_len < s->last_seq_len ? op->in.seq_len : s->last_seq_len;
        int cmp = memcmp(op->in.seq, s->last_seq, n);
        if (cmp < 0 || (cmp == 0 && op->in.seq_len <= s->last_seq_len)) {
            finish(op, RN_ERR_SEQ_REGRESSION, s);
            return;
        }
    }
    const uint8_t *data;
    size_t len;
    int refuse = prepare_body(op, s->json, 0, &data, &len);
    if (refuse) {
        finish(op, (rn_result)refuse, s);
        return;
    }
    if (op->in.has_producer_digest) {
        uint8_t digest[32];
        rn_blake3_hash(op->in.body, op->in.body_len, digest);
        if (memcmp(digest, op->in.producer_digest, 32) != 0) {
            finish(op, RN_ERR_DIGEST_MISMATCH, s);
            return;
        }
    }
    if (op->in.has_producer && admit_producer(e, op, s, now))
        return;
    rn_cmd c = {.type = RN_CMD_APPEND,
                .stream_id = s->id,
                .offset = s->tail,
                .close = (uint8_t)(op->in.close != 0),
                .data = data,
                .data_len = len,
                .has_producer = (uint8_t)op->in.has_producer,
                .producer_id = op->in.producer_id,
                .producer_id_len = op->in.producer_id_len,
                .producer_epoch = op->in.producer_epoch,
                .producer_seq = op->in.producer_seq,
                .has_digest = (uint8_t)(op->in.has_producer && op->in.has_producer_digest),
                .producer_digest = op->in.producer_digest,
                .has_seq = (uint8_t)op->in.has_seq,
                .seq = op->in.seq,
                .seq_len = op->in.seq_len};
    log_command(e, op, s, &c);
}

/* Snapshot publish (ext §2.2), in the section's order: retention (410),
 * tail (409 naming nothing), JSON boundary (400), latest snapshot (a repeat
 * succeeds, anything else answers 409 naming the latest). */
static void run_publish(rn_engine *e, rn_op *op, rn_stream *s) {
    uint64_t off = op->in.target_offset;
    if (off < s->retained) {
        finish(op, RN_ERR_BELOW_RETAINED, s);
        return;
    }
    if (off > s->tail) {
        finish(op, RN_ERR_OFFSET_BEYOND_TAIL, s);
        return;
    }
    int valid = rn_engine_offset_valid(e, s, off);
    if (valid <= 0) {
        finish(op, valid < 0 ? RN_ERR_BOUNDARY_UNVERIFIED : RN_ERR_NOT_BOUNDARY, s);
        return;
    }
    if (s->snapshot.present && off <= s->snapshot.offset) {
        int repeat =
            off == s->snapshot.offset && memcmp(op->in.digest, s->snapshot.digest, 32) == 0;
        op->out.repeat = repeat;
        finish(op, repeat ? RN_OK_PUBLISHED : RN_ERR_SNAPSHOT_CONFLICT, s);
        return;
    }
    rn_cmd c = {.type = RN_CMD_PUBLISH,
                .stream_id = s->id,
                .offset = off,
                .content_type = op->in.content_type,
                .content_type_len = op->in.content_type_len,
                .digest = op->in.digest,
                .snapshot_size = op->in.blob_size,
                .cold = (uint8_t)op->in.blob_cold,
                .object_key = op->in.blob_key,
                .object_key_len = op->in.blob_key_len};
    log_command(e, op, s, &c);
}

/* Retention (ext §2.2): aligned, not past the latest snapshot, forward
 * only (a boundary at or below the current one changes nothing). */
static void run_retain(rn_engine *e, rn_op *op, rn_stream *s) {
    uint64_t off = op->in.target_offset;
    if (off <= s->retained) {
        finish(op, RN_OK_RETAINED, s);
        return;
    }
    int valid = off <= s->tail ? rn_engine_offset_valid(e, s, off) : 0;
    if (valid <= 0) {
        finish(op, valid < 0 ? RN_ERR_BOUNDARY_UNVERIFIED : RN_ERR_NOT_BOUNDARY, s);
        return;
    }
    if (!s->snapshot.present || off > s->snapshot.offset) {
        finish(op, RN_ERR_RETENTION_PAST_SNAPSHOT, s);
        return;
    }
    rn_cmd c = {.type = RN_CMD_RETAIN, .stream_id = s->id, .offset = off};
    log_command(e, op, s, &c);
}

/* History rewrite to target_offset (an operator action). Refused for a
 * stream that forks read through, whose bytes must not change under them. */
static void run_rewrite(rn_engine *e, rn_op *op, rn_stream *s) {
    if (op->in.target_offset > s->tail || s->refcount > 0) {
        finish(op, RN_ERR_CONFIG_MISMATCH, s);
        return;
    }
    uint64_t serial = issue_id(e, s->path, s->path_len);
    if (!serial) {
        finish(op, RN_ERR_DISK_FULL, s);
        return;
    }
    rn_cmd c = {.type = RN_CMD_REWRITE,
                .stream_id = s->id,
                .serial = serial,
                .offset = op->in.target_offset};
    log_command(e, op, s, &c);
}

static void run_op(rn_engine *e, rn_op *op) {
    rn_stream *s = rn_state_at(&e->state, op->in.path, op->in.path_len);
    if (e->log->ops->accepts && !e->log->ops->accepts(e->log, op->in.path, op->in.path_len)) {
        /* a replica that does not lead the stream's group (any more) */
        finish(op, RN_ERR_NO_LEADER, NULL);
        return;
    }
    if (s && s->busy) {
        enqueue(s, op);
        return;
    }
    if (s && s->soft_deleted && op->in.kind != RN_OP_CREATE) {
        finish(op, RN_ERR_GONE, NULL);
        return;
    }
    if (op->in.has_incarnation && !(s && rn_stream_expired(s, rn_now_ms()))) {
        /* RFC 9110 order: a missing stream stays 404, except that a create
         * with the precondition creates nothing and answers 412. */
        rn_stream *live = s && !s->soft_deleted ? s : NULL;
        if ((live && live->incarnation != op->in.incarnation) ||
            (!live && op->in.kind == RN_OP_CREATE)) {
            finish(op, RN_ERR_INCARNATION, live);
            return;
        }
    }
    if (s && rn_stream_expired(s, rn_now_ms())) {
        enqueue(s, op);
        start_expiry(e, s);
        return;
    }
    if (op->in.kind == RN_OP_CREATE) {
        run_create(e, op, s);
        return;
    }
    if (!s) {
        finish(op, RN_ERR_NOT_FOUND, NULL);
        return;
    }
    rn_engine_touch(e, s);
    switch (op->in.kind) {
    case RN_OP_DELETE: {
        rn_cmd c = {.type = RN_CMD_DELETE, .stream_id = s->id};
        log_command(e, op, s, &c);
        return;
    }
    case RN_OP_PUBLISH:
        run_publish(e, op, s);
        return;
    case RN_OP_RETAIN:
        run_retain(e, op, s);
        return;
    case RN_OP_REWRITE:
        run_rewrite(e, op, s);
        return;
    default:
        run_append(e, op, s);
    }
}

void rn_engine_submit(rn_engine *e, rn_op *op) {
    priv(op)->engine = e;
    op->out.stream = NULL;
    run_op(e, op);
}

int rn_engine_answer_early(rn_engine *e, rn_op *op) {
    if (op->in.kind != RN_OP_APPEND || !op->in.has_producer || !op->in.has_incarnation)
        return 0;
    int64_t now = rn_now_ms();
    rn_stream *s = rn_state_at(&e->state, op->in.path, op->in.path_len);
    if (!s || s->busy || s->pending_create || s->soft_deleted || rn_stream_expired(s, now) ||
        s->incarnation != op->in.incarnation || !log_accepts(e, s))
        return 0;
    const rn_producer *p = rn_map_get(&s->producers, op->in.producer_id, op->in.producer_id_len);
    if (p && rn_producer_idle(p, now, e->cfg.producer_ttl_ms))
        return 0; /* its discard is a logged step that comes first */
    rn_op probe = {.in = op->in};
    int answer = rn_producer_rules(s, &probe.in, &probe.out);
    if (answer != RN_OK_DUPLICATE && answer != RN_ERR_KEY_CONFLICT)
        return 0;
    op->out = probe.out;
    rn_engine_touch(e, s);
    set_outcome(op, (rn_result)answer, s);
    return 1;
}

/* ---- reads ---- */

rn_stream *rn_engine_find(rn_engine *e, const char *path, size_t len) {
    rn_stream *s = rn_state_at(&e->state, path, len);
    if (!s || s->pending_create || s->soft_deleted)
        return NULL;
    if (rn_stream_expired(s, rn_now_ms())) {
        start_expiry(e, s);
        return NULL;
    }
    return s;
}

void rn_engine_foreach(rn_engine *e, void (*fn)(rn_stream *s, void *arg), void *arg) {
    int64_t now = rn_now_ms();
    size_t i = 0;
    void *v;
    while (rn_map_next(&e->state.by_path, &i, &v)) {
        rn_stream *s = v;
        if (!s->pending_create && !s->soft_deleted && !rn_stream_expired(s, now))
            fn(s, arg);
    }
}

int rn_engine_is_gone(rn_engine *e, const char *path, size_t len) {
    rn_stream *s = rn_state_at(&e->state, path, len);
    return s && s->soft_deleted;
}

void rn_engine_touch(rn_engine *e, rn_stream *s) {
    (void)e;
    s->last_access_ms = rn_now_ms();
}

/* Discards, with one logged command per stream, the state of producers
 * that wrote nothing for producer_ttl_ms (at most EXPIRE_LIST_MAX_BYTES of
 * ids per stream and sweep; the rest go in the next sweep). */
static void sweep_producers(rn_engine *e, int64_t now) {
    rn_producer **idle = NULL;
    size_t cap = 0, i = 0;
    void *v;
    while (rn_map_next(&e->state.by_path, &i, &v)) {
        rn_stream *s = v;
        if (s->pending_create || s->busy || s->soft_deleted || !s->producers.count ||
            !log_accepts(e, s))
            continue;
        size_t n = 0, bytes = 0, j = 0;
        void *pv;
        while (rn_map_next(&s->producers, &j, &pv) && bytes < EXPIRE_LIST_MAX_BYTES) {
            rn_producer *p = pv;
            if (!rn_producer_idle(p, now, e->cfg.producer_ttl_ms))
                continue;
            if (n == cap)
                idle = rn_xrealloc(idle, (cap = cap ? cap * 2 : 16) * sizeof *idle);
            idle[n++] = p;
            bytes += p->id_len + 4;
        }
        if (n)
            start_producer_expiry(e, s, idle, n);
    }
    free(idle);
}

void rn_engine_sweep_expired(rn_engine *e) {
    int64_t now = rn_now_ms();
    rn_stream **victims = NULL;
    size_t n = 0, cap = 0, i = 0;
    void *v;
    while (rn_map_next(&e->state.by_path, &i, &v)) {
        rn_stream *s = v;
        if (!s->pending_create && !s->busy && rn_stream_expired(s, now)) {
            if (n == cap)
                victims = rn_xrealloc(victims, (cap = cap ? cap * 2 : 16) * sizeof *victims);
            victims[n++] = s;
        }
    }
    for (size_t k = 0; k < n; k++)
        start_expiry(e, victims[k]);
    free(victims);
    sweep_producers(e, now);
}

/* ---- checkpoints ---- */

static void encode_identity(const rn_write_identity *id, rn_buf *b) {
    rn_buf_append_u8(b, id->has_digest);
    if (id->has_digest)
        rn_buf_append(b, id->digest, 32);
}

static void decode_identity(rn_reader *r, rn_write_identity *id) {
    id->has_digest = rn_read_u8(r);
    const uint8_t *d = id->has_digest ? rn_read_bytes(r, 32) : NULL;
    if (d)
        memcpy(id->digest, d, 32);
}

/* A producer's state: lstr id, u64 epoch, last_seq, last_ms, the newest
 * write (identity, u64 start, u64 end, u8 closed), the claim's identity,
 * u8 above_floor, u8 closes_epoch, u64 closed_epoch, closed_seq, u8
 * history, u64 history_seq. An identity is u8 has_digest [32 bytes]. */
static void encode_producer(const rn_producer *p, rn_buf *b) {
    rn_buf_append_lstr(b, p->id, p->id_len);
    rn_buf_append_u64(b, p->epoch);
    rn_buf_append_u64(b, p->last_seq);
    rn_buf_append_u64(b, (uint64_t)p->last_ms);
    encode_identity(&p->newest, b);
    rn_buf_append_u64(b, p->newest_start);
    rn_buf_append_u64(b, p->newest_end);
    rn_buf_append_u8(b, p->newest_closed);
    encode_identity(&p->claim, b);
    rn_buf_append_u8(b, p->above_floor);
    rn_buf_append_u8(b, p->closes_epoch);
    rn_buf_append_u64(b, p->closed_epoch);
    rn_buf_append_u64(b, p->closed_seq);
    rn_buf_append_u8(b, p->history);
    rn_buf_append_u64(b, p->history_seq);
}

/* Decodes one producer into s; returns 0, or -1 for a malformed record. */
static int decode_producer(rn_reader *r, rn_stream *s) {
    size_t n;
    const char *id = (const char *)rn_read_lstr(r, &n);
    if (!id || rn_map_get(&s->producers, id, n))
        return -1;
    rn_producer *p = rn_stream_add_producer(s, id, n);
    p->epoch = rn_read_u64(r);
    p->last_seq = rn_read_u64(r);
    p->last_ms = (int64_t)rn_read_u64(r);
    decode_identity(r, &p->newest);
    p->newest_start = rn_read_u64(r);
    p->newest_end = rn_read_u64(r);
    p->newest_closed = rn_read_u8(r);
    decode_identity(r, &p->claim);
    p->above_floor = rn_read_u8(r);
    p->closes_epoch = rn_read_u8(r);
    p->closed_epoch = rn_read_u64(r);
    p->closed_seq = rn_read_u64(r);
    p->history = rn_read_u8(r);
    p->history_seq = rn_read_u64(r);
    return r->failed || p->history > RN_EPOCH_LOST ? -1 : 0;
}

static void encode_stream(const rn_stream *s, rn_buf *b) {
    rn_buf_append_lstr(b, s->path, s->path_len);
    rn_buf_append_u64(b, s->id);
    rn_buf_append_u64(b, s->incarnation);
    rn_buf_append_lstr(b, s->content_type, s->content_type_len);
    rn_buf_append_u64(b, (uint64_t)s->ttl_s);
    rn_buf_append_u64(b, (uint64_t)s->expires_at_ms);
    rn_buf_append_u64(b, (uint64_t)s->created_ms);
    rn_buf_append_u64(b, s->tail);
    rn_buf_append_u64(b, s->appends);
    rn_buf_append_u64(b, s->source ? s->source->id : 0);
    rn_buf_append_u64(b, s->fork_offset);
    rn_buf_append_u8(b, (uint8_t)s->soft_deleted);
    rn_buf_append_u64(b, s->retained);
    rn_buf_append_u8(b, (uint8_t)s->snapshot.present);
    if (s->snapshot.present) {
        rn_buf_append_u64(b, s->snapshot.offset);
        rn_buf_append(b, s->snapshot.digest, 32);
        rn_buf_append_u64(b, s->snapshot.size);
        rn_buf_append_lstr(b, s->snapshot.content_type, s->snapshot.content_type_len);
        rn_buf_append_lstr(b, s->snapshot.key, strlen(s->snapshot.key));
        rn_buf_append_u8(b, (uint8_t)s->snapshot.cold);
    }
    rn_buf_append_u8(b, (uint8_t)s->has_previous);
    rn_buf_append_u64(b, s->previous_incarnation);
    rn_buf_append_u64(b, s->inherited_offset);
    rn_buf_append_u8(b, (uint8_t)s->written_since_rewrite);
    rn_buf_append_u8(b, (uint8_t)s->closed);
    rn_buf_append_u8(b, s->last_seq != NULL);
    if (s->last_seq)
        rn_buf_append_lstr(b, s->last_seq, s->last_seq_len);
    rn_buf_append_u8(b, (uint8_t)s->has_floor);
    rn_buf_append_u64(b, s->epoch_floor);
    rn_buf_append_u32(b, (uint32_t)s->producers.count);
    size_t i = 0;
    void *v;
    while (rn_map_next(&s->producers, &i, &v))
        encode_producer(v, b);
}

/* Decodes one stream, or returns NULL for a malformed record; its fork
 * source id goes to *source_id for linking once every stream is loaded. */
rn_stream *engine_decode_stream(rn_state *st, rn_reader *r, int64_t now, uint64_t *source_id) {
    size_t path_len, ct_len;
    const char *path = (const char *)rn_read_lstr(r, &path_len);
    uint64_t id = rn_read_u64(r);
    uint64_t incarnation = rn_read_u64(r);
    const char *ct = (const char *)rn_read_lstr(r, &ct_len);
    if (r->failed)
        return NULL;
    if (rn_state_stream(st, id) || rn_state_at(st, path, path_len)) {
        r->failed = 1; /* listed twice: damaged */
        return NULL;
    }
    rn_stream *s = rn_state_add(st, id, path, path_len, ct, ct_len);
    s->incarnation = incarnation;
    s->ttl_s = (int64_t)rn_read_u64(r);
    s->expires_at_ms = (int64_t)rn_read_u64(r);
    s->created_ms = (int64_t)rn_read_u64(r);
    s->last_access_ms = now;
    s->tail = rn_read_u64(r);
    s->appends = rn_read_u64(r);
    *source_id = rn_read_u64(r);
    s->fork_offset = rn_read_u64(r);
    s->soft_deleted = rn_read_u8(r);
    s->retained = rn_read_u64(r);
    if (rn_read_u8(r)) {
        s->snapshot.present = 1;
        s->snapshot.offset = rn_read_u64(r);
        const uint8_t *d = rn_read_bytes(r, 32);
        if (d)
            memcpy(s->snapshot.digest, d, 32);
        s->snapshot.size = rn_read_u64(r);
        size_t n;
        const char *t = (const char *)rn_read_lstr(r, &n);
        s->snapshot.content_type = rn_xstrndup(t ? t : "", n);
        s->snapshot.content_type_len = n;
        t = (const char *)rn_read_lstr(r, &n);
        s->snapshot.key = rn_xstrndup(t ? t : "", n);
        s->snapshot.cold = rn_read_u8(r);
    }
    s->has_previous = rn_read_u8(r);
    s->previous_incarnation = rn_read_u64(r);
    s->inherited_offset = rn_read_u64(r);
    s->written_since_rewrite = rn_read_u8(r);
    s->closed = rn_read_u8(r);
    if (rn_read_u8(r)) {
        size_t n;
        const char *q = (const char *)rn_read_lstr(r, &n);
        s->last_seq = rn_xstrndup(q ? q : "", n);
        s->last_seq_len = n;
    }
    s->has_floor = rn_read_u8(r);
    s->epoch_floor = rn_read_u64(r);
    uint32_t np = rn_read_u32(r);
    for (uint32_t k = 0; k < np && !r->failed; k++)
        if (decode_producer(r, s))
            r->failed = 1;
    return r->failed ? NULL : s;
}

/* Points every loaded fork at its source and counts references. Returns 0,
 * or -1 when a source is missing. */
int engine_link_forks(rn_state *st, rn_stream **loaded, const uint64_t *sources, uint64_t n) {
    for (uint64_t k = 0; k < n; k++) {
        if (!sources[k])
            continue;
        rn_stream *src = rn_state_stream(st, sources[k]);
        if (!src)
            return -1;
        loaded[k]->source = src;
        src->refcount++;
    }
    for (uint64_t k = 0; k < n; k++) {
        uint32_t depth = 0;
        for (rn_stream *p = loaded[k]->source; p && depth <= RN_MAX_FORK_DEPTH; p = p->source)
            depth++;
        if (depth > RN_MAX_FORK_DEPTH)
            return -1; /* a cycle: the checkpoint is damaged */
        loaded[k]->fork_depth = depth;
    }
    return 0;
}

/* Streams: u64 count, then each applied stream pick selects (NULL: all). */
void engine_encode_streams(const rn_state *st, rn_stream_pick pick, void *arg, rn_buf *b) {
    size_t count_at = b->len;
    rn_buf_append_u64(b, 0);
    uint64_t count = 0;
    size_t i = 0;
    void *v;
    while (rn_map_next(&st->by_id, &i, &v)) {
        rn_stream *s = v;
        if (s->pending_create || (pick && !pick(s, arg)))
            continue;
        encode_stream(s, b);
        count++;
    }
    for (int k = 0; k < 8; k++)
        b->data[count_at + k] = (uint8_t)(count >> (8 * k));
}

/* Namespaces: u64 count, then one lstr each. */
void engine_encode_namespaces(const rn_state *st, rn_buf *b) {
    rn_buf_append_u64(b, st->namespaces.count);
    size_t i = 0;
    void *v;
    while (rn_map_next(&st->namespaces, &i, &v))
        rn_buf_append_lstr(b, v, strlen(v));
}

void engine_decode_namespaces(rn_state *st, rn_reader *r) {
    uint64_t n = rn_read_u64(r);
    for (uint64_t j = 0; j < n && !r->failed; j++) {
        size_t len;
        const char *id = (const char *)rn_read_lstr(r, &len);
        if (id && len)
            rn_state_add_namespace(st, id, len);
    }
}

static ssize_t read_all(int fd, uint8_t *out, size_t len) {
    size_t got = 0;
    while (got < len) {
        ssize_t r = read(fd, out + got, len - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return r < 0 ? -errno : (ssize_t)got;
        got += (size_t)r;
    }
    return (ssize_t)got;
}

static void checkpoint_path(const rn_engine *e, char *out, size_t cap, const char *suffix) {
    snprintf(out, cap, "%s/checkpoint%s", e->dir, suffix);
}

/* Loads the checkpoint if there is one; returns the first log segment to
 * replay (0 when there is no checkpoint) or -1 on a damaged checkpoint.
 * Removes the image a crash left half-written (checkpoint.tmp). */
static int64_t load_checkpoint(rn_engine *e, uint64_t *streams) {
    char path[PATH_MAX];
    checkpoint_path(e, path, sizeof path, ".tmp");
    unlink(path);
    checkpoint_path(e, path, sizeof path, "");
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? 0 : -1;
    struct stat st;
    fstat(fd, &st);
    size_t size = (size_t)st.st_size;
    uint8_t *data = rn_xmalloc(size);
    ssize_t got = read_all(fd, data, size);
    close(fd);
    int64_t result = -1;
    if (got == (ssize_t)size && size >= 36 && memcmp(data, CHECKPOINT_MAGIC, 8) == 0) {
        rn_reader tail;
        rn_reader_init(&tail, data + size - 4, 4);
        if (rn_read_u32(&tail) == rn_crc32c(0, data, size - 4)) {
            rn_reader r;
            rn_reader_init(&r, data + 8, size - 12);
            uint64_t segment = rn_read_u64(&r);
            e->state.next_id = rn_read_u64(&r);
            uint64_t count = rn_read_u64(&r);
            int64_t now = rn_now_ms();
            uint64_t k = 0;
            uint64_t *sources = rn_xcalloc(count ? count : 1, sizeof *sources);
            rn_stream **loaded = rn_xcalloc(count ? count : 1, sizeof *loaded);
            for (; k < count; k++) {
                loaded[k] = engine_decode_stream(&e->state, &r, now, &sources[k]);
                if (!loaded[k])
                    break;
            }
            engine_decode_namespaces(&e->state, &r);
            if (k == count && !r.failed &&
                engine_link_forks(&e->state, loaded, sources, count) == 0) {
                result = (int64_t)segment;
                *streams = count;
            }
            free(sources);
            free(loaded);
        }
    }
    free(data);
    return result;
}

static void checkpoint_work(uv_work_t *req) {
    checkpoint_job *job = req->data;
    rn_engine *e = job->engine;
    job->status = rn_streamfiles_sync(e->files);
    if (job->status)
        return;
    rn_fault_point("checkpoint-after-syncfs");
    char tmp[PATH_MAX], final[PATH_MAX];
    checkpoint_path(e, tmp, sizeof tmp, ".tmp");
    checkpoint_path(e, final, sizeof final, "");
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        job->status = -errno;
        return;
    }
    size_t off = 0;
    while (off < job->image.len) {
        ssize_t w = write(fd, job->image.data + off, job->image.len - off);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            job->status = -errno;
            break;
        }
        off += (size_t)w;
    }
    if (!job->status && fdatasync(fd) < 0)
        job->status = -errno;
    close(fd);
    rn_fault_point("checkpoint-before-rename");
    if (!job->status && rename(tmp, final) < 0)
        job->status = -errno;
    if (job->status) {
        unlink(tmp); /* a partial image must not hold the space a full disk needs */
        return;
    }
    int dfd = open(e->dir, O_RDONLY | O_DIRECTORY);
    if (dfd >= 0) {
        if (fsync(dfd) < 0)
            job->status = -errno;
        close(dfd);
    }
}

static void checkpoint_done(uv_work_t *req, int status) {
    checkpoint_job *job = req->data;
    rn_engine *e = job->engine;
    if (status == 0 && job->status == 0) {
        rn_fault_point("checkpoint-before-drop");
        rn_wal_drop_before(e->wal, job->segment);
    } else
        rn_log(RN_LOG_ERROR, "checkpoint", "checkpoint failed: %s",
               strerror(-(status ? status : job->status)));
    rn_buf_free(&job->image);
    free(job);
    e->checkpoint = NULL;
}

/* Serializes all applied streams. Must run when no log batch is in flight. */
static checkpoint_job *snapshot(rn_engine *e) {
    checkpoint_job *job = rn_xcalloc(1, sizeof *job);
    job->engine = e;
    job->req.data = job;
    job->segment = rn_wal_rotate(e->wal);
    rn_buf *b = &job->image;
    rn_buf_append(b, CHECKPOINT_MAGIC, 8);
    rn_buf_append_u64(b, job->segment);
    rn_buf_append_u64(b, e->state.next_id);
    engine_encode_streams(&e->state, NULL, NULL, b);
    engine_encode_namespaces(&e->state, b);
    rn_buf_append_u32(b, rn_crc32c(0, b->data, b->len));
    e->log_bytes_at_checkpoint = rn_wal_bytes_written(e->wal);
    return job;
}

static void maybe_checkpoint(void *arg) {
    rn_engine *e = arg;
    if (e->checkpoint ||
        rn_wal_bytes_written(e->wal) - e->log_bytes_at_checkpoint < e->cfg.checkpoint_bytes)
        return;
    e->checkpoint = snapshot(e);
    uv_queue_work(e->loop, &e->checkpoint->req, checkpoint_work, checkpoint_done);
}

/* ---- open / close ---- */

typedef struct {
    rn_engine *e;
    rn_blobs *store;
    int cold;
    rn_map referenced; /* key -> stream */
} orphan_sweep;

static int sweep_key(const char *key, void *arg) {
    orphan_sweep *o = arg;
    if (!rn_map_get(&o->referenced, key, strlen(key)))
        rn_blobs_delete(o->store, key);
    return 0;
}

/* Deletes snapshot bodies no stream references: written before a crash kept
 * their publish out of the log, or superseded during replay. */
static void sweep_orphan_snapshots(rn_engine *e) {
    for (int cold = 0; cold <= 1; cold++) {
        orphan_sweep o = {.e = e, .store = cold ? e->cold : e->snapshots, .cold = cold};
        if (!o.store)
            continue;
        size_t i = 0;
        void *v;
        while (rn_map_next(&e->state.by_path, &i, &v)) {
            rn_stream *s = v;
            if (s->snapshot.present && s->snapshot.cold == cold)
                rn_map_put(&o.referenced, s->snapshot.key, strlen(s->snapshot.key), s);
        }
        rn_blobs_list(o.store, RN_SNAPSHOT_PREFIX, sweep_key, &o);
        rn_map_free(&o.referenced);
    }
}

void rn_engine_blob_key(rn_engine *e, const rn_stream *s, char out[RN_BLOB_KEY_MAX]) {
    snprintf(out, RN_BLOB_KEY_MAX, "%s%016llx-%016llx", RN_SNAPSHOT_PREFIX,
             (unsigned long long)s->id,
             (unsigned long long)(((uint64_t)rn_now_ms() << 16) ^ e->blob_serial++));
}

static int replay_record(void *arg, const uint8_t *rec, size_t len) {
    rn_engine *e = arg;
    rn_cmd c;
    if (rn_cmd_decode(rec, len, &c) != 0)
        return RN_WAL_CORRUPT;
    rn_applied applied;
    int rc = engine_apply(e, &c, 0, &applied);
    return rc == -ENOENT ? 0 : rc;
}

/* Names a stream the checkpoint restored (for the damage report). */
static const char *checkpointed_path(void *arg, uint64_t id, size_t *len) {
    rn_engine *e = arg;
    rn_stream *s = rn_state_stream(&e->state, id);
    if (!s)
        return NULL;
    *len = s->path_len;
    return s->path;
}

/* The message of a log recovery that failed with rc. The engine is not
 * used afterwards (a refusal replays nothing). */
static void refuse_recovery(rn_engine *e, uint64_t from, const rn_wal_recovery *rec, int rc,
                            char *err, size_t errcap) {
    int n = snprintf(err, errcap, "log recovery in %s refused to start: ", e->dir);
    size_t used = n > 0 && (size_t)n < errcap ? (size_t)n : 0;
    if (rc == RN_WAL_CORRUPT && rec->damage.kind != RN_WAL_INTACT)
        rn_damage_report(e->dir, from, &rec->damage, checkpointed_path, e, err + used,
                         errcap - used);
    else
        snprintf(err + used, errcap - used, "%s",
                 rc == RN_WAL_CORRUPT ? "a log record that reads back does not decode"
                                      : strerror(-rc));
}

/* An engine with its stores and an empty state, no log yet; NULL with a
 * message in err when the stores cannot be opened. */
rn_engine *engine_new(uv_loop_t *loop, const rn_engine_config *cfg, char *err, size_t errcap) {
    rn_engine *e = rn_xcalloc(1, sizeof *e);
    e->loop = loop;
    e->cfg = *cfg;
    e->dir = rn_xstrdup(cfg->data_dir);
    rn_state_init(&e->state);
    e->files = rn_streamfiles_open(cfg->data_dir, cfg->max_open_files);
    char blob_dir[PATH_MAX];
    snprintf(blob_dir, sizeof blob_dir, "%s/snapshots", cfg->data_dir);
    e->snapshots = rn_blobs_open(blob_dir);
    if (cfg->cold_store) {
        snprintf(blob_dir, sizeof blob_dir, "%s/cold", cfg->data_dir);
        e->cold = rn_blobs_open(blob_dir);
    }
    if (!e->snapshots || (cfg->cold_store && !e->cold)) {
        snprintf(err, errcap, "cannot create the snapshot stores in %s", cfg->data_dir);
        rn_engine_close(e);
        return NULL;
    }
    if (!e->cfg.producer_ttl_ms)
        e->cfg.producer_ttl_ms = PRODUCER_TTL_DEFAULT_MS;
    if (!e->cfg.producer_cap)
        e->cfg.producer_cap = PRODUCER_CAP_DEFAULT;
    return e;
}

rn_engine *rn_engine_open(uv_loop_t *loop, const rn_engine_config *cfg, rn_recovery_stats *stats,
                          char *err, size_t errcap) {
    memset(stats, 0, sizeof *stats);
    rn_engine *e = engine_new(loop, cfg, err, errcap);
    if (!e)
        return NULL;
    int64_t from = load_checkpoint(e, &stats->checkpoint_streams);
    if (from < 0) {
        snprintf(err, errcap, "checkpoint file in %s is damaged; refusing to start", cfg->data_dir);
        rn_engine_close(e);
        return NULL;
    }
    rn_wal_recovery rec;
    int rc = rn_wal_recover(cfg->data_dir, (uint64_t)from, replay_record, e, &rec);
    if (rc != 0) {
        refuse_recovery(e, (uint64_t)from, &rec, rc, err, errcap);
        rn_engine_close(e);
        return NULL;
    }
    if (rec.torn_bytes)
        rn_log(RN_LOG_WARN, "recovery",
               "cut %llu bytes of an unfinished batch at byte %llu of log segment %llu: a "
               "crash interrupted its write, so none of its writes had been acknowledged",
               (unsigned long long)rec.torn_bytes, (unsigned long long)rec.torn_offset,
               (unsigned long long)rec.last_segment);
    size_t i = 0;
    void *v;
    while (rn_map_next(&e->state.by_path, &i, &v)) {
        rn_stream *s = v;
        /* Cut bytes of unrecovered records. A stream with no appends of
         * its own has none: its files are only written for appends. */
        if (s->touched && s->appends)
            rn_streamfiles_truncate(e->files, s->id, s->tail, s->appends);
        s->touched = 0;
        s->last_access_ms = rn_now_ms();
    }
    sweep_orphan_snapshots(e);
    stats->streams = e->state.by_path.count;
    stats->records_replayed = rec.records;
    stats->torn_bytes = rec.torn_bytes;
    rn_wal_options wo = {.segment_bytes = cfg->wal_segment_bytes, .preallocate = 1};
    e->wal = rn_wal_open(loop, cfg->data_dir, &rec, &wo, &rc);
    if (!e->wal) {
        snprintf(err, errcap, "cannot open the log in %s: %s", cfg->data_dir, strerror(-rc));
        rn_engine_close(e);
        return NULL;
    }
    rn_cmdlog_applier applier = {.ctx = e, .apply = engine_apply_logged};
    e->log = rn_wal_cmdlog_new(e->wal, &applier);
    rn_wal_set_batch_hook(e->wal, maybe_checkpoint, e);
    return e;
}

void rn_engine_inject_sync_failures(rn_engine *e, int n) {
    if (e->wal)
        rn_wal_inject_sync_failures(e->wal, n);
}

int rn_engine_busy(const rn_engine *e) {
    return e->ops_in_log > 0 || e->ops_preparing > 0 || e->checkpoint != NULL;
}

void rn_engine_close(rn_engine *e) {
    if (!e)
        return;
    if (e->wal && !e->checkpoint && !rn_wal_busy(e->wal)) {
        /* A final checkpoint makes the next start replay nothing. */
        checkpoint_job *job = snapshot(e);
        checkpoint_work(&job->req);
        if (job->status == 0)
            rn_wal_drop_before(e->wal, job->segment);
        rn_buf_free(&job->image);
        free(job);
    }
    rn_state_free(&e->state);
    if (e->wal) /* a replicated engine's log belongs to its owner */
        rn_wal_cmdlog_free(e->log);
    rn_wal_close(e->wal);
    rn_streamfiles_close(e->files);
    rn_blobs_close(e->snapshots);
    rn_blobs_close(e->cold);
    free(e->dir);
    free(e);
}
