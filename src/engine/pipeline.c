/*
 * pipeline.c — the mutation pipeline: from rn_engine_submit() to done().
 *
 * A mutation is validated (validate.c) against the applied state and
 * either answered at once, queued behind the mutation of its stream that is
 * in the log (or behind the internal mutation it needs first: the deletion
 * of an expired stream, the discard of idle producer state), or logged:
 * its command is encoded, file space for its data reserved and the
 * stream's files pinned, and the entry submitted to the command log
 * (cmdlog.h). The log makes it durable, has the data written, applies it
 * through the engine's applier (effects.c) and answers; command_done() then
 * answers the op, tells observers and runs the stream's next queued
 * mutation. Mutations of one stream are serialized this way (each is
 * evaluated against the state the previous one left); mutations of
 * different streams share log syncs.
 *
 * The pipeline owns the stream fields pending_create, busy, has_files and
 * the queue (state.h). A create makes its stream pending before it is
 * logged (it holds the path and its id; invisible to readers) and apply
 * adopts it. Stream ids and rewrite serials are issued here, when their
 * command is logged.
 */
#include "engine/engine_int.h"
#include "engine/producers.h"
#include "util/clock.h"
#include "util/fault.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define EXPIRE_LIST_MAX_BYTES (1u << 20) /* producer ids per EXPIRE_PRODUCERS record */

/* ---- answers and queues ---- */

/* Answers op: its outcome, then done() (which may free it, so the engine's
 * buffers in it are released first). */
static void finish(rn_op *op, rn_result result, rn_stream *s) {
    op->out.result = result;
    op->out.stream = s;
    if (s) {
        op->out.next_offset = s->tail;
        op->out.stream_closed = s->closed;
    }
    rn_buf_free(&priv(op)->head);
    rn_buf_free(&priv(op)->stored);
    rn_buf_free(&priv(op)->sums);
    engine_arrival_free(op);
    struct engine_apart *apart = engine_apart_detach(op, result);
    op->done(op);
    engine_apart_free(apart);
}

void engine_finish_op(rn_op *op, rn_result result, rn_stream *s) {
    finish(op, result, s);
}

/* Queues op behind the mutation of s in the log (or the one started right
 * after this). */
static void enqueue(rn_stream *s, rn_op *op) {
    priv(op)->next_queued = NULL;
    priv(op)->stream_id = s->id;
    if (s->queue_tail)
        priv(s->queue_tail)->next_queued = op;
    else
        s->queue_head = op;
    s->queue_tail = op;
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
        engine_run_op(e, q);
    }
}

/* Re-runs the mutations that were queued on streams since destroyed: they
 * now see no stream. */
void engine_rerun_orphans(rn_engine *e) {
    while (e->orphans) {
        rn_op *q = e->orphans;
        e->orphans = priv(q)->next_queued;
        if (!e->orphans)
            e->orphans_tail = NULL;
        engine_run_op(e, q);
    }
}

/* ---- submission ---- */

static void command_done(rn_cmdlog_entry *entry);

/* The entry's write_data: writes the command's data and index entry
 * through the files pinned at submission. The WAL runs it on its writer
 * thread after the sync. */
static int write_stream_files(rn_cmdlog_entry *entry) {
    op_private *p = priv(entry->arg);
    rn_fault_point("apply-before-store");
    return rn_streamfiles_write_pinned(&p->pin, p->cmd.data, p->cmd.data_len, p->cmd.offset,
                                       p->index_entry);
}

void engine_refuse_unlogged(rn_engine *e, rn_op *op, rn_stream *s, int rc) {
    int full = rc == -ENOSPC || rc == -EDQUOT;
    rn_log_throttled(&e->store_refusals, 1000, RN_LOG_ERROR, "store",
                     "a write to stream %s was refused before it was logged: its stream file "
                     "could not be %s: %s (errno %d)",
                     s->path, full ? "given disk space" : "prepared or written", strerror(-rc),
                     -rc);
    engine_release_unlogged(e, op, s, full ? RN_ERR_DISK_FULL : RN_ERR_UNAVAILABLE);
}

void engine_release_unlogged(rn_engine *e, rn_op *op, rn_stream *s, rn_result result) {
    uint64_t id = s->id;
    int pending = s->pending_create; /* s is freed below when pending */
    s->busy = 0;
    if (pending) {
        engine_destroy_pending(e, s);
        engine_rerun_orphans(e);
    }
    finish(op, result, pending ? NULL : s);
    if (!pending)
        drain_queue(e, id);
}

void engine_log_entry(rn_engine *e, rn_op *op, const void *data, size_t len,
                      int (*write_data)(rn_cmdlog_entry *entry)) {
    op_private *p = priv(op);
    rn_cmdlog_entry *entry = &p->log;
    entry->cmd = &p->cmd;
    entry->write_data = write_data;
    entry->piece[0] = (struct iovec){p->head.data, p->head.len};
    entry->pieces = 1;
    if (len)
        entry->piece[entry->pieces++] = (struct iovec){(void *)data, len};
    entry->done = command_done;
    entry->arg = op;
    e->ops_in_log++;
    e->log->ops->submit(e->log, entry);
}

/* Reserves file space for the command's data, pins the stream's files and
 * submits the command to the log (a large append: after writing its data,
 * ahead.c). The stream is busy until command_done(). */
static void submit_command(rn_engine *e, rn_op *op, rn_stream *s) {
    op_private *p = priv(op);
    rn_cmd *c = &p->cmd;
    p->pin = (rn_streamfiles_pin){.data_fd = -1, .index_fd = -1, .sum_fd = -1};
    int refused = rn_fault_fail("log-reserve");
    if (refused) {
        engine_refuse_unlogged(e, op, s, refused);
        return;
    }
    if (!c->data_len) {
        s->busy = 1;
        engine_log_entry(e, op, NULL, 0, NULL);
        return;
    }
    int rc =
        rn_streamfiles_pin_append(e->files, s->id, c->offset, c->data_len, s->appends, &p->pin);
    if (rc < 0) {
        engine_refuse_unlogged(e, op, s, rc);
        return;
    }
    p->index_entry = s->appends;
    assert(!p->arrival || engine_ahead_wanted(e, c)); /* rn_engine_arriving_possible */
    if (engine_ahead_wanted(e, c)) {
        engine_write_ahead(e, op, s);
        return;
    }
    s->busy = 1;
    engine_log_entry(e, op, c->data, c->data_len, write_stream_files);
}

/* Creating a stream's files costs the file system inodes and directory
 * entries (about 40 us a file on a quiet machine, far more under load); on
 * the loop thread a burst of first appends stalled every request (500 new
 * streams: ~0.9 s on a busy machine). So a new stream takes a set of empty
 * files made ahead (tiers/spares.h: three renames, about 20 us each),
 * and the first data of any other stream in this process, or of a new one
 * when the reserve is empty, goes through a worker that makes sure its
 * files exist, and the command goes on from files_ready(). */
static void ensure_files_work(uv_work_t *req) {
    op_private *p = priv(req->data);
    p->files_status = rn_streamfiles_ensure(p->engine->files, p->stream_id);
}

static void files_ready(uv_work_t *req, int status) {
    rn_op *op = req->data;
    rn_engine *e = priv(op)->engine;
    e->ops_preparing--;
    rn_stream *s = rn_state_stream(&e->state, priv(op)->stream_id);
    assert(s && s->busy); /* nothing removes a busy stream */
    int rc = status < 0 ? status : priv(op)->files_status;
    if (rc < 0) {
        engine_refuse_unlogged(e, op, s, rc);
        return;
    }
    s->has_files = 1;
    submit_command(e, op, s);
}

/* Stamps and encodes op's command (priv(op)->cmd) and submits it to the
 * log, after making the stream's files on a worker when this is its first
 * data. The stream is busy until command_done(). A fork's create is never
 * delayed: it was validated against its source, which is not busy and
 * could meanwhile be deleted or rewritten by commands logged ahead of it. */
static void log_command(rn_engine *e, rn_op *op, rn_stream *s) {
    assert(!s->busy);
    op_private *p = priv(op);
    rn_cmd *c = &p->cmd;
    c->time_ms = rn_now_ms();
    p->head.len = 0;
    rn_cmd_encode_head(c, &p->head);
    p->stream_id = s->id;
    p->engine = e;
    if (c->data_len && !s->has_files && !c->source_id && s->tail == 0 &&
        rn_tiers_take_spare_files(e->cfg.tiers, s->id) == 1)
        s->has_files = 1; /* a new stream: its files were made ahead */
    if (c->data_len && !s->has_files && !c->source_id) {
        s->busy = 1; /* later mutations queue meanwhile */
        e->ops_preparing++;
        p->work.data = op;
        uv_queue_work(e->loop, &p->work, ensure_files_work, files_ready);
        return;
    }
    submit_command(e, op, s);
}

/* ---- completion ---- */

/* The log's answer for op's command: applied (by the log, through the
 * engine's applier) or not. Answers the op, tells observers, and lets the
 * stream's queue go on. */
static void command_done(rn_cmdlog_entry *entry) {
    rn_op *op = entry->arg;
    rn_engine *e = priv(op)->engine;
    assert(e->ops_in_log > 0);
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
    if (c->type == RN_CMD_DELETE || c->type == RN_CMD_PURGE) {
        if (s)
            s->busy = 0; /* soft-deleted: it stays, and its waiters now see 410 */
        finish(op, c->type == RN_CMD_DELETE ? RN_OK_DELETED : RN_OK_PURGED, NULL);
        drain_queue(e, id);
        return;
    }
    if (entry->result.erased) { /* a fence applied first: nothing was created */
        int pending = s && s->pending_create;
        if (s)
            s->busy = 0;
        finish(op, RN_ERR_BUCKET_ERASED, NULL);
        if (pending) { /* its files (the data the log's writer wrote) go, unpinned above */
            engine_destroy_pending(e, s);
            engine_rerun_orphans(e);
        }
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
        [RN_OP_TIER] = RN_OK_TIERED,       [RN_OP_PURGE] = RN_OK_PURGED,
        [RN_OP_PIN] = RN_OK_CREATED,       [RN_OP_UNPIN] = RN_OK_DELETED,
    };
    /* done() may free the op and the entry in it: keep what follows. */
    rn_applied applied = entry->result;
    if (applied.has_producer)
        rn_producer_answer_applied(&applied.producer, op->in.producer_seq, &op->out);
    if (c->type == RN_CMD_APPEND) {
        op->out.appended_bytes = c->data_len;
        op->out.appended_messages = c->data_len ? priv(op)->messages : 0;
    }
    if (c->type != RN_CMD_CREATE || !engine_apart_hold(op, s))
        finish(op, applied_result[op->in.kind], s);
    s = rn_state_stream(&e->state, id);
    if (s && applied.notify)
        engine_notify(e, s, applied.event);
    drain_queue(e, id);
}

/* ---- internal mutations ---- */

/* Frees an internal mutation: an expiry of a stream or of producer state. */
static void expire_done(rn_op *op) {
    free(op);
}

/* An id for a new stream at path, or a rewrite serial: the log's when it
 * issues them (replicated), else the state's counter. 0: none can be. */
uint64_t engine_issue_id(rn_engine *e, const char *path, size_t len) {
    if (e->log->ops->issue_id)
        return e->log->ops->issue_id(e->log, &e->state, path, len);
    return e->state.next_id++;
}

int engine_log_accepts(const rn_engine *e, const char *path, size_t len) {
    return !e->log->ops->accepts || e->log->ops->accepts(e->log, path, len);
}

void engine_start_expiry(rn_engine *e, rn_stream *s) {
    if (s->busy || !engine_log_accepts(e, s->path, s->path_len))
        return;
    rn_op *op = rn_xcalloc(1, sizeof *op);
    op->in.kind = RN_OP_DELETE;
    op->done = expire_done;
    priv(op)->cmd = (rn_cmd){.type = RN_CMD_DELETE, .stream_id = s->id};
    log_command(e, op, s);
}

/* Starts discarding the state of n producers of s (an internal mutation;
 * s must not be busy). The ids travel in the op's `stored` buffer. */
static void start_producer_expiry(rn_engine *e, rn_stream *s, rn_producer *const *victims,
                                  size_t n) {
    rn_op *op = rn_xcalloc(1, sizeof *op);
    op->in.kind = RN_OP_EXPIRE_PRODUCERS;
    op->done = expire_done;
    rn_buf *ids = &priv(op)->stored;
    for (size_t k = 0; k < n; k++)
        rn_buf_append_lstr(ids, victims[k]->id, victims[k]->id_len);
    priv(op)->cmd = (rn_cmd){.type = RN_CMD_EXPIRE_PRODUCERS,
                             .stream_id = s->id,
                             .producer_ids = ids->data,
                             .producer_ids_len = ids->len};
    log_command(e, op, s);
}

/* ---- running a mutation ---- */

/* Makes the pending stream of a create about to be logged, issuing its id
 * (a fork apart from its source: the id it was pinned for), and points the
 * command at it; NULL when no id can be issued. */
static rn_stream *make_pending(rn_engine *e, rn_op *op, rn_cmd *c) {
    uint64_t id = engine_apart_fork_id(op);
    if (!id)
        id = engine_issue_id(e, c->path, c->path_len);
    if (!id || rn_state_stream(&e->state, id))
        return NULL;
    rn_stream *s =
        rn_state_add(&e->state, id, c->path, c->path_len, c->content_type, c->content_type_len);
    s->pending_create = 1;
    if (c->source_id & RN_CMD_SOURCE_APART) /* so its group's leader knows it is coming */
        s->apart_source = c->source_id & ~RN_CMD_SOURCE_APART;
    c->stream_id = s->id;
    c->path = s->path;
    c->content_type = s->content_type;
    c->incarnation = rn_incarnation_for(e->cfg.incarnation_key, s->id);
    return s;
}

void engine_run_op(rn_engine *e, rn_op *op) {
    if (engine_arrival_cut(op)) { /* its body will not come: nothing to validate */
        finish(op, RN_ERR_UNAVAILABLE, NULL);
        return;
    }
    if (!engine_log_accepts(e, op->in.path, op->in.path_len)) {
        /* a replica that does not lead the stream's group (any more) */
        finish(op, RN_ERR_NO_LEADER, NULL);
        return;
    }
    verdict v = engine_validate(e, op, rn_now_ms());
    switch (v.kind) {
    case VERDICT_ANSWER:
        finish(op, v.result, v.stream);
        return;
    case VERDICT_WAIT:
        enqueue(v.stream, op);
        return;
    case VERDICT_EXPIRE_STREAM:
        enqueue(v.stream, op);
        engine_start_expiry(e, v.stream);
        return;
    case VERDICT_EXPIRE_PRODUCER:
        enqueue(v.stream, op);
        start_producer_expiry(e, v.stream, &v.victim, 1);
        return;
    case VERDICT_PIN:
        engine_apart_pin(e, op);
        return;
    case VERDICT_LOG: {
        rn_cmd *c = &priv(op)->cmd;
        rn_stream *s = v.stream;
        if (c->type == RN_CMD_CREATE)
            s = make_pending(e, op, c);
        else if (c->type == RN_CMD_REWRITE) {
            c->serial = engine_issue_id(e, s->path, s->path_len); /* never issued again */
            c->incarnation = rn_incarnation_for(e->cfg.incarnation_key, c->serial);
        }
        if (!s || (c->type == RN_CMD_REWRITE && !c->serial)) {
            finish(op, RN_ERR_DISK_FULL, s); /* no id could be issued */
            return;
        }
        log_command(e, op, s);
        return;
    }
    }
}

void rn_engine_submit(rn_engine *e, rn_op *op) {
    assert(op->done != NULL);
    priv(op)->engine = e;
    priv(op)->apart = NULL;
    priv(op)->arrival = NULL;
    if (op->in.arriving)
        engine_arrival_begin(op);
    op->out.stream = NULL;
    engine_run_op(e, op);
}

/* ---- sweeps ---- */

/* Discards, with one logged command, the state of s's producers that wrote
 * nothing for producer_ttl_ms (at most EXPIRE_LIST_MAX_BYTES of ids per
 * stream and pass; the rest go in the next pass). idle and cap: the
 * pass's scratch list. */
static void sweep_producers_of(rn_engine *e, rn_stream *s, int64_t now, rn_producer ***idle,
                               size_t *cap) {
    if (s->pending_create || s->busy || s->soft_deleted || !s->producers.count ||
        !engine_log_accepts(e, s->path, s->path_len))
        return;
    size_t n = 0, bytes = 0, j = 0;
    void *pv;
    while (rn_map_next(&s->producers, &j, &pv) && bytes < EXPIRE_LIST_MAX_BYTES) {
        rn_producer *p = pv;
        if (!rn_producer_idle(p, now, e->cfg.producer_ttl_ms))
            continue;
        if (n == *cap)
            *idle = rn_xrealloc(*idle, (*cap = *cap ? *cap * 2 : 16) * sizeof **idle);
        (*idle)[n++] = p;
        bytes += p->id_len + 4;
    }
    if (n)
        start_producer_expiry(e, s, *idle, n);
}

/* What one slice of a sweep pass collects and decides. */
typedef struct {
    rn_engine *e;
    int64_t now;
    int pins;
    rn_stream **victims; /* expired: their deletes start after the slice */
    size_t n, cap;
    rn_producer **idle; /* sweep_producers_of's scratch */
    size_t idle_cap;
} sweep_visit;

static void sweep_stream(rn_stream *s, void *arg) {
    sweep_visit *v = arg;
    if (!s->pending_create && !s->busy && rn_stream_expired(s, v->now)) {
        if (v->n == v->cap)
            v->victims =
                rn_xrealloc(v->victims, (v->cap = v->cap ? v->cap * 2 : 16) * sizeof *v->victims);
        v->victims[v->n++] = s;
        return;
    }
    sweep_producers_of(v->e, s, v->now, &v->idle, &v->idle_cap);
    if (v->pins)
        engine_sweep_pins_of(v->e, s, v->now);
}

int rn_engine_sweep_slice(rn_engine *e, rn_engine_sweep *sw, size_t slots) {
    if (sw->at.cursor == 0) /* a pass starts */
        sw->pins = engine_pins_sweep_due(e);
    sweep_visit v = {.e = e, .now = rn_now_ms(), .pins = sw->pins};
    int rc = engine_slice(e, &sw->at, slots, sweep_stream, &v);
    if (rc < 0) { /* the map grew: the pass starts over, in this call */
        v.pins = sw->pins = engine_pins_sweep_due(e);
        rc = engine_slice(e, &sw->at, slots, sweep_stream, &v);
    }
    for (size_t k = 0; k < v.n; k++) /* after the slice: an expiry may change the map */
        engine_start_expiry(e, v.victims[k]);
    free(v.victims);
    free(v.idle);
    if (rc == 1)
        sw->at = (rn_engine_slice){0};
    return rc;
}

void rn_engine_sweep_expired(rn_engine *e) {
    rn_engine_sweep sw = {0};
    while (!rn_engine_sweep_slice(e, &sw, SIZE_MAX))
        ;
}
