/*
 * wal_cmdlog.h — the engine's side of the log seam: the local write-ahead
 * log (log/wal.h) as the engine's command log (engine/cmdlog.h): a command
 * is applied right after the sync of its batch, on the loop thread, and
 * its stream data is written by the log's writer thread between the sync
 * and the apply. It lives in engine/ so that log/ calls nothing above it.
 */
#ifndef RN_ENGINE_WAL_CMDLOG_H
#define RN_ENGINE_WAL_CMDLOG_H

#include "engine/cmdlog.h"
#include "log/wal.h"

/* An adapter that submits to wal and applies through applier. */
rn_cmdlog *rn_wal_cmdlog_new(rn_wal *wal, const rn_cmdlog_applier *applier);

/* Frees the adapter (the log stays open); no entry may be pending. */
void rn_wal_cmdlog_free(rn_cmdlog *log);

#endif
