/*
 * cmdlog.h — the command-log seam: where the mutation pipeline sends an
 * encoded command, and how it hears back the command's fate.
 *
 * A command log makes commands durable (a local write-ahead log: synced;
 * a replicated log: committed on a majority) and applies each one, in log
 * order, through the applier its owner gave it (the engine's state machine,
 * engine/state.h). The pipeline never applies a command itself: it submits
 * an entry and is told, once, on the loop thread, either that the command
 * applied (with what apply left: rn_applied) or that it did not, and
 * whether it may still (the refusal to answer with). So the same pipeline
 * runs over any log; the log decides when apply runs:
 *   - engine/wal_cmdlog.c: the local log. An entry is applied right
 *     after the sync of its batch, then its done() runs, on the loop.
 *   - cluster/raft_log.c (cluster mode): every replica applies committed
 *     entries from the consensus layer's apply callback, including entries
 *     no op of its own waits for; the leader's entry completes later, from
 *     the proposal callback. docs/ARCHITECTURE.md ("The command-log seam")
 *     says how it plugs in.
 *
 * Stream data. A command that carries data (CREATE, APPEND) may ask the log
 * to write it to the stream files after the log made it durable
 * (write_data): the WAL does that on its writer thread, so the loop never
 * writes live data; apply then finds the data stored. A log that cannot
 * (a consensus library's apply callback runs on the loop) leaves it to
 * apply, which writes the data through its effects.
 */
#ifndef RN_ENGINE_CMDLOG_H
#define RN_ENGINE_CMDLOG_H

#include <stddef.h>
#include <sys/uio.h>

#include "engine/command.h"
#include "engine/op.h"
#include "engine/state.h"

typedef struct rn_cmdlog rn_cmdlog;
typedef struct rn_cmdlog_entry rn_cmdlog_entry;

/* How a log applies what it made durable; given to it by its owner. */
typedef struct {
    void *ctx;
    /* Applies cmd (in log order, on the loop thread) and fills *out.
     * data_stored: the command's data is in the stream files already (its
     * entry's write_data ran), else apply writes it. Never fails: a
     * command the state refuses is a result, and a storage failure after
     * the log made the command durable stops the process (recovery redoes
     * it from the log). */
    void (*apply)(void *ctx, const rn_cmd *cmd, int data_stored, rn_applied *out);
} rn_cmdlog_applier;

/* Room for the log's own bookkeeping of an entry (the WAL's entry). */
#define RN_CMDLOG_PRIVATE_BYTES 192

struct rn_cmdlog_entry {
    /* Set by the submitter; valid until done(). */
    const rn_cmd *cmd;     /* the command, decoded */
    struct iovec piece[2]; /* its encoding (command.h): the head, then the data when any */
    int pieces;
    /* Optional: writes the command's data to the stream files and returns
     * 0 or -errno. A log that can runs it once the entry is durable,
     * before apply, on any thread; it may touch only what the entry owns. */
    int (*write_data)(rn_cmdlog_entry *entry);
    /* Called exactly once, on the loop thread, never from inside submit. */
    void (*done)(rn_cmdlog_entry *entry);
    void *arg; /* for the submitter */
    /* Set by the log before done(). */
    int applied;       /* 1: durable and applied; `result` is what apply left */
    rn_result refusal; /* not applied: RN_ERR_DISK_FULL, RN_ERR_NO_LEADER or RN_ERR_LOG_BUSY
                          when nothing was logged and nothing ever will apply,
                          RN_ERR_UNAVAILABLE when it may be in the log (recovery or another
                          replica may still apply it) */
    rn_applied result;
    union {
        max_align_t align;
        unsigned char bytes[RN_CMDLOG_PRIVATE_BYTES];
    } log; /* the log's; the submitter never touches it */
};

typedef struct {
    /* Sends the entry's command to the log (loop thread). */
    void (*submit)(rn_cmdlog *log, rn_cmdlog_entry *entry);
    /* Optional (NULL: the state's own counter, st->next_id). Issues the id
     * of a new stream at path (or the serial of a rewrite of the stream at
     * path): one no replica of the log ever issued and no stream of st
     * holds (a replicated log partitions ids among its replicas). Returns
     * 0 when it cannot (the mutation is refused RN_ERR_DISK_FULL). */
    uint64_t (*issue_id)(rn_cmdlog *log, const rn_state *st, const char *path, size_t len);
    /* Optional (NULL: always). Whether the log would take a command of the
     * stream at path now (a replicated log: this replica leads its group).
     * The engine starts no internal mutation (an expiry, a producer
     * discard) that the log would refuse. */
    int (*accepts)(rn_cmdlog *log, const char *path, size_t len);
} rn_cmdlog_ops;

/* A command log: adapters embed this first; each has its own constructor
 * and destructor. */
struct rn_cmdlog {
    const rn_cmdlog_ops *ops;
};

#endif
