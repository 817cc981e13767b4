/*
 * wal_cmdlog.c — the write-ahead log behind the command-log seam. See
 * wal_cmdlog.h and engine/cmdlog.h.
 */
#include "engine/wal_cmdlog.h"
#include "util/buf.h"
#include "util/log.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    rn_cmdlog base;
    rn_wal *wal;
    rn_cmdlog_applier applier;
} wal_cmdlog;

/* What the adapter keeps in an entry's log area. */
typedef struct {
    rn_wal_entry wal;
    wal_cmdlog *log;
} wal_slot;

static_assert(sizeof(wal_slot) <= RN_CMDLOG_PRIVATE_BYTES,
              "rn_cmdlog_entry's log area is too small");

static wal_slot *slot(rn_cmdlog_entry *entry) {
    return (wal_slot *)entry->log.bytes;
}

/* The log's after_sync hook, on its writer thread. */
static int write_data(rn_wal_entry *w) {
    rn_cmdlog_entry *entry = w->arg;
    return entry->write_data(entry);
}

static void logged(rn_wal_entry *w, int status) {
    rn_cmdlog_entry *entry = w->arg;
    wal_cmdlog *log = slot(entry)->log;
    if (status != 0) {
        /* Nothing written (no room for the next segment): a refusal. Any
         * other failure may have left the batch where recovery finds it. */
        entry->applied = 0;
        entry->refusal = status == RN_WAL_NOT_WRITTEN_FULL ? RN_ERR_DISK_FULL : RN_ERR_UNAVAILABLE;
        entry->done(entry);
        return;
    }
    if (w->after_sync_status < 0) {
        /* Durable in the log but the stream file could not be written: the
         * log still holds the data and recovery rewrites it. Serving reads
         * from a short file would be wrong, so stop here. */
        rn_log(RN_LOG_ERROR, "fatal", "stream file write failed after log sync: %s",
               strerror(-w->after_sync_status));
        abort();
    }
    log->applier.apply(log->applier.ctx, entry->cmd, entry->write_data != NULL, &entry->result);
    entry->applied = 1;
    entry->done(entry);
}

static void submit(rn_cmdlog *base, rn_cmdlog_entry *entry) {
    wal_cmdlog *log = (wal_cmdlog *)base;
    assert(entry->pieces >= 1 && entry->pieces <= 2 && entry->done);
    wal_slot *sl = slot(entry);
    sl->log = log;
    for (int i = 0; i < entry->pieces; i++)
        sl->wal.piece[i] = entry->piece[i];
    sl->wal.pieces = entry->pieces;
    sl->wal.after_sync = entry->write_data ? write_data : NULL;
    sl->wal.done = logged;
    sl->wal.arg = entry;
    rn_wal_submit(log->wal, &sl->wal);
}

static const rn_cmdlog_ops wal_ops = {.submit = submit, .stored_ahead = 1};

rn_cmdlog *rn_wal_cmdlog_new(rn_wal *wal, const rn_cmdlog_applier *applier) {
    wal_cmdlog *log = rn_xcalloc(1, sizeof *log);
    log->base.ops = &wal_ops;
    log->wal = wal;
    log->applier = *applier;
    return &log->base;
}

void rn_wal_cmdlog_free(rn_cmdlog *log) {
    free(log);
}
