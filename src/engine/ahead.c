/*
 * ahead.c — large appends written once. On a log that takes it (the local
 * log: rn_cmdlog_ops.stored_ahead), a CREATE or APPEND with at least
 * cfg.large_append_bytes of data is written to its stream file and synced
 * (fdatasync, then the directory holding the stream's files, whose names
 * a new stream's first appends would otherwise leave to the next
 * checkpoint) on a worker before it is logged, and the log's record names
 * the range with its block checksums instead of carrying the bytes
 * (command.h: RN_CMD_STORED_AHEAD). Its bytes then reach the disk once,
 * where the log would write them and a checkpoint write them again.
 *
 * Durability is unchanged: the op is answered after the record's sync,
 * which follows the data's. A crash before the record leaves bytes past
 * the stream's tail that recovery cuts (nothing was answered); a crash
 * after it finds the bytes on disk, and replay restores their checksums
 * and index entry from the record (effects.c). Every later change of those
 * bytes (a delete, a re-created stream under a new id, retention, a
 * rewrite, history moving to the cold store) is itself in the log after
 * the record, so replay redoes it after restoring them, as it does for
 * data the log carries. Checksums restored from the record are those of
 * the bytes as written: a byte the disk changed since reads as damage.
 */
#include "engine/engine_int.h"
#include "util/fault.h"
#include "util/metrics.h"

int engine_ahead_wanted(const rn_engine *e, const rn_cmd *c) {
    return e->cfg.large_append_bytes && c->data_len >= e->cfg.large_append_bytes &&
           e->log->ops->stored_ahead;
}

/* On a worker, once the data is written with its checksums in p->sums:
 * the checksum and index entries, then the sync. */
static int seal(op_private *p) {
    const rn_cmd *c = &p->cmd;
    int rc =
        rn_streamfiles_seal_ahead(&p->pin, c->offset, c->data_len, p->index_entry, p->sums.data);
    rn_fault_point("ahead-after-write");
    if (rc == 0)
        rc = rn_streamfiles_sync_ahead(p->engine->files, p->stream_id, &p->pin);
    if (rc == 0)
        rn_fault_point("ahead-after-sync");
    return rc;
}

/* On a worker: the data and its checksums, then the seal. */
static void write_ahead(uv_work_t *req) {
    op_private *p = priv(req->data);
    const rn_cmd *c = &p->cmd;
    int rc = rn_streamfiles_write_piece(&p->pin, c->data, c->data_len, c->offset, p->sums.data);
    p->files_status = rc < 0 ? rc : seal(p);
}

void engine_ahead_seal_work(uv_work_t *req) {
    op_private *p = priv(req->data);
    p->files_status = seal(p);
}

/* The entry's write_data: the bytes were stored before the record. */
static int stored_already(rn_cmdlog_entry *entry) {
    (void)entry;
    return 0;
}

void engine_ahead_sealed(uv_work_t *req, int status) {
    rn_op *op = req->data;
    op_private *p = priv(op);
    rn_engine *e = p->engine;
    e->ops_preparing--;
    rn_stream *s = rn_state_stream(&e->state, p->stream_id);
    assert(s && s->busy); /* nothing removes a busy stream */
    int rc = status < 0 ? status : p->files_status;
    if (rc < 0) {
        rn_streamfiles_unpin(&p->pin);
        engine_refuse_unlogged(e, op, s, rc);
        return;
    }
    rn_cmd *c = &p->cmd;
    c->stored_ahead = 1;
    c->block_sums = p->sums.data;
    p->head.len = 0;
    rn_cmd_encode_head(c, &p->head);
    rn_metric.appends_written_once++;
    rn_metric.bytes_written_once += c->data_len;
    if (p->arrival)
        rn_metric.appends_written_arriving++;
    engine_log_entry(e, op, p->sums.data, p->sums.len, stored_already);
}

void engine_write_ahead(rn_engine *e, rn_op *op, rn_stream *s) {
    op_private *p = priv(op);
    assert(engine_ahead_wanted(e, &p->cmd) && p->pin.data_fd >= 0);
    s->busy = 1; /* later mutations queue meanwhile */
    e->ops_preparing++;
    p->sums.len = 0;
    size_t n = rn_cmd_block_sums_len(&p->cmd);
    rn_buf_reserve(&p->sums, n);
    p->sums.len = n;
    if (p->arrival) {
        engine_arrival_start(e, op);
        return;
    }
    p->work.data = op;
    uv_queue_work(e->loop, &p->work, write_ahead, engine_ahead_sealed);
}
