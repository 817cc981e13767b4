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

/* A fork's create whose source is in another group of the log asks that
 * group to pin the fork (see engine/pins.c): the source's path, the
 * create's content type (NULL: absent), fork offset and sub-offset, and the
 * id the fork will have. */
typedef struct {
    const char *source;
    size_t source_len;
    const char *content_type;
    size_t content_type_len;
    int has_fork_offset;
    uint64_t fork_offset;
    uint64_t fork_sub_offset;
    uint64_t fork_id;
} rn_fork_pin_ask;

/* The source group's answer: RN_OK_CREATED when the pin applied (or was
 * there), with the source's id, the fork offset found, the fork's retained
 * offset and depth, and what the fork inherits (expiry, content type: valid
 * inside the callback); else the refusal (a create's source refusals;
 * RN_ERR_CONTENT_TYPE with the source's type; RN_ERR_NO_LEADER when
 * nothing was asked; RN_ERR_UNAVAILABLE when the pin may have applied). */
typedef struct {
    rn_result result;
    uint64_t source_id;
    uint64_t fork_offset;
    uint64_t retained;
    uint32_t depth;
    int64_t ttl_s, expires_at_ms;
    const char *content_type;
    size_t content_type_len;
} rn_fork_pin_answer;

typedef void (*rn_fork_pin_done)(void *arg, const rn_fork_pin_answer *answer);
/* Whether the fork with this id is a fork of that source (created, or its
 * create under way) where its group's leader sees it: 1, 0, or -1 unknown. */
typedef void (*rn_fork_alive_done)(void *arg, int alive);

/* Whether the fork's group cut it (CUT) off its source's bytes, and had
 * the forks apart of it cut in turn: 1 (or nothing was left to cut), 0 it
 * is not a fork of that source there (gone, or never created), -1 unknown
 * (no leader, no answer, a refusal: ask again later). */
typedef void (*rn_fork_cut_done)(void *arg, int cut);

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
    /* Optional (NULL: a fork is always in its source's group). Whether the
     * streams at paths a and b are in different groups of the log; the
     * four below are then set too. */
    int (*apart)(rn_cmdlog *log, const char *a, size_t alen, const char *b, size_t blen);
    /* Asks the leader of the source's group to pin the fork (PIN), and
     * calls done(arg, answer) once, on the loop thread, never from inside.
     * ask's memory need only last this call. */
    void (*pin)(rn_cmdlog *log, const rn_fork_pin_ask *ask, rn_fork_pin_done done, void *arg);
    /* Asks the leader of source_id's group to release fork_id's pin
     * (UNPIN), later, never from inside; best effort: what is lost here
     * the sweep of orphan pins releases. */
    void (*unpin)(rn_cmdlog *log, uint64_t source_id, uint64_t fork_id);
    /* Asks the leader of fork_id's group whether fork_id is a fork of
     * source_id; done(arg, 1 | 0 | -1) once, never from inside. */
    void (*fork_alive)(rn_cmdlog *log, uint64_t source_id, uint64_t fork_id,
                       rn_fork_alive_done done, void *arg);
    /* Asks the leader of fork_id's group to cut fork_id, a fork apart from
     * source_id, off the source's bytes below offset (RN_CUT_SOURCE: the
     * source is purged; rn_engine_cut); done(arg, 1 | 0 | -1) once, never
     * from inside. */
    void (*fork_cut)(rn_cmdlog *log, uint64_t source_id, uint64_t fork_id, uint64_t offset,
                     rn_fork_cut_done done, void *arg);
    /* Optional (NULL: always). Whether this replica holds the state of
     * stream id's group (placement may put a group on some nodes only). */
    int (*hosts)(rn_cmdlog *log, uint64_t id);
    /* 1: the log takes a CREATE or APPEND whose data the submitter wrote
     * and synced in the stream file itself, the record holding only its
     * block checksums (rn_cmd.stored_ahead: engine/ahead.c). The local log
     * does; a replicated log must carry the bytes to every replica. */
    int stored_ahead;
} rn_cmdlog_ops;

/* A command log: adapters embed this first; each has its own constructor
 * and destructor. */
struct rn_cmdlog {
    const rn_cmdlog_ops *ops;
};

#endif
