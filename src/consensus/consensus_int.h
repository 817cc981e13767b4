/*
 * consensus_int.h — what the consensus layer's files share: the node and
 * group structures around libraft, and the completion queue through which
 * every outcome reaches its caller outside libraft's call stack.
 *
 * Why a queue: libraft reports failures from deep inside its own state
 * changes (a leader stepping down fails its requests while it still reads
 * as leader and its progress array is already freed); a callback that
 * proposed again from there would corrupt it. So libraft's callbacks only
 * record outcomes; cs_deliver runs the callers' callbacks from the loop's
 * idle and check phases.
 *
 * Files: consensus.c (lifecycle, queries, leader watch, the queue),
 * propose.c (proposals and the state machine adapter), reads.c (read
 * barriers and the leader's first entry), members.c (transfer, membership),
 * appends.c (the leader appends in flight, which a stop drains).
 */
#ifndef RN_CONSENSUS_CONSENSUS_INT_H
#define RN_CONSENSUS_CONSENSUS_INT_H

#include <raft.h>
#include <raft/uv.h>

#include "consensus/consensus.h"
#include "consensus/control.h"
#include "consensus/mux.h"
#include "util/buf.h"
#include "util/list.h"

/* A confirmation round asks at most this many voters; a larger
 * configuration confirms reads by barrier entries. */
#define CS_CONFIRM_MAX_VOTERS 16u

typedef struct cs_group cs_group;
typedef struct cs_completion cs_completion;
typedef struct cs_log_op cs_log_op; /* appends.c */

/* One outcome waiting to be delivered; fire runs the caller's callback and
 * releases what the item owns. */
struct cs_completion {
    cs_completion *next;
    void (*fire)(cs_completion *item);
};

/* A proposal from consensus_propose until its callback. */
typedef struct cs_proposal {
    cs_completion done;
    struct raft_apply req;    /* referenced by libraft until its callback */
    struct cs_proposal *next; /* the group's proposals in index order */
    cs_group *group;
    size_t len;
    consensus_propose_cb cb;
    void *arg;
    consensus_status status;
    uint64_t index;
    void *result;
    bool has_result; /* apply ran and left result here */
} cs_proposal;

/* A read barrier waiter. */
typedef struct cs_reader {
    cs_completion done;
    struct cs_reader *next;
    consensus_read_cb cb;
    void *arg;
    consensus_status status;
    uint64_t applied;
} cs_reader;

/* A membership change or transfer's caller. */
typedef struct cs_op {
    cs_completion done;
    consensus_done_cb cb;
    void *arg;
    consensus_status status;
} cs_op;

/* The read round in flight: none, a barrier entry, or peers asked. */
typedef enum { CS_ROUND_NONE, CS_ROUND_BARRIER, CS_ROUND_CONFIRM } cs_read_round;

/* A group's life: io initialized, raft initialized (running once started),
 * draining (stopping: waits for its leader appends, see appends.c),
 * closing (raft_close called), closed. */
typedef enum { CS_NONE, CS_IO_READY, CS_RAFT_READY, CS_DRAINING, CS_CLOSING, CS_CLOSED } cs_stage;

struct cs_group {
    consensus *node;
    unsigned index;
    cs_stage stage;
    struct raft_io io;
    struct raft_fsm fsm;
    struct raft raft;
    /* libraft's log writes, wrapped by appends.c */
    int (*real_append)(struct raft_io *, struct raft_io_append *, const struct raft_entry[],
                       unsigned, raft_io_append_cb);
    int (*real_truncate)(struct raft_io *, raft_index);
    int (*real_snapshot_put)(struct raft_io *, unsigned, struct raft_io_snapshot_put *,
                             const struct raft_snapshot *, raft_io_snapshot_put_cb);
    void (*real_close)(struct raft_io *, raft_io_close_cb);
    raft_io_close_cb io_close_cb; /* libraft's, until raft_uv first calls back */
    int (*real_send)(struct raft_io *, struct raft_io_send *, const struct raft_message *,
                     raft_io_send_cb); /* libraft's, wrapped by sends.c */
    uint64_t leader_appends;           /* appends submitted while leading, in flight */
    /* appends.c: log operations held while the disk has no room for a new
     * segment (oldest first), the one being retried, since when (loop ms;
     * 0: none held), the last retry, operations asked for so far, appends
     * in raft_uv, and every append not done yet (held or in raft_uv) in
     * the order libraft asked for them */
    cs_log_op *held;
    unsigned held_count;
    bool retry_inflight;
    uint64_t held_since, held_retry_ms, log_ops, writes_pending;
    rn_list unfinished;
    /* proposals awaiting their outcome, oldest (lowest index) first */
    cs_proposal *proposals, *proposals_tail;
    uint64_t inflight_entries;
    size_t inflight_bytes;
    /* reads (reads.c): waiting for the next round, and covered by the round in flight */
    cs_reader *readers_waiting, *readers_waiting_tail;
    unsigned n_waiting;
    cs_reader *readers_confirming;
    cs_read_round round;
    struct raft_barrier read_req; /* a barrier round's entry */
    /* a confirm round: its number, term, the commit index when it started,
     * its start (loop time), the voters needed and those that confirmed */
    uint64_t confirm_round, confirm_term, confirm_index, confirm_started;
    unsigned confirm_needed, confirm_count, confirm_unanswered;
    raft_id confirmed_by[CS_CONFIRM_MAX_VOTERS];
    /* the leader's first entry of a term (Raft's no-op) */
    bool noop_active;
    uint64_t noop_term;
    struct raft_barrier noop_req;
    uint64_t ready_term; /* term whose entry applied here while leading */
    /* the commit nudge (propose.c): a barrier that carries a new commit
     * index to the followers at once; one at a time, and wanted again when
     * a proposal completed while it was on its way */
    bool nudge_active, nudge_wanted;
    struct raft_barrier nudge_req;
    uint64_t nudges;
    /* membership change and transfer (one of each at a time); the libraft
     * request structs live here so libraft may keep pointers to them */
    struct raft_change change_req;
    cs_op *change_op;
    struct raft_transfer transfer_req;
    cs_op *transfer_op;
    uint64_t transfer_target;
    /* what leader_changed last reported */
    uint64_t seen_leader, seen_term;
    bool seen_ready;
    /* consensus_group_stop: its caller, whether the directory goes, and the
     * loop time after which the group closes with leader writes in flight */
    cs_op *stop_op;
    bool erase;
    bool deferred; /* started with a longer election timeout, until a leader is known */
    uint64_t drain_deadline;
    /* counters */
    uint64_t leader_changes, snapshots, last_snapshot_bytes, restores, read_rounds, read_barriers;
    uint64_t applied_seen;         /* last index the adapter applied or restored */
    uint64_t since_snapshot_bytes; /* entry bytes applied since the last snapshot */
};

struct consensus {
    consensus_config cfg; /* strings copied below */
    char *self_address;
    char *data_dir;
    consensus_peer *peers;
    rn_secret key; /* the cluster key (len 0: none), for the mux and the control channel */
    rn_mux *mux;
    rn_ctl *ctl;         /* the control channel: reads' confirmations */
    uint64_t last_round; /* confirm rounds' numbers, never reused while running */
    cs_group *groups;
    uv_idle_t idle;
    uv_check_t check;
    cs_completion *queue, *queue_tail;
    bool in_fsm; /* inside a state machine callback */
    bool stopping;
    unsigned closing_groups; /* raft_close callbacks still due (stopping) */
    unsigned handles_closed; /* of idle and check, once stopping */
    void (*stop_done)(void *arg);
    void *stop_arg;
    char error[512];
};

/* Queues an outcome for delivery outside libraft. */
void cs_enqueue(consensus *c, cs_completion *item);

/* A membership or transfer caller's record (status to be set). */
cs_op *cs_op_new(consensus_done_cb cb, void *arg);

/* Queues a nothing-happened outcome for an operation's caller. */
void cs_op_refuse(consensus *c, consensus_done_cb cb, void *arg, consensus_status status);

/* Maps a libraft error returned before anything was appended. */
consensus_status cs_refusal_status(int raft_rv);

/* consensus.c: makes <data_dir>/raft/g<NN>/ (and raft/) when missing and
 * puts its path in out. 0, or -errno (-ENAMETOOLONG: it does not fit). */
int cs_make_group_dir(const char *data_dir, unsigned group, char *out, size_t cap);

/* propose.c */
void cs_fsm_setup(cs_group *g);
/* Entry `index` of libraft's in-memory log (struct raft_log, public in
 * raft.h: every entry since the snapshot's trailing ones), or NULL when
 * it holds none such. */
const struct raft_entry *cs_log_entry(const struct raft *r, uint64_t index);
/* The header a snapshot of group at index carries before its manifest
 * (len bytes), into out (empty). */
void cs_snapshot_header(unsigned group, uint64_t index, const void *manifest, size_t len,
                        rn_buf *out);

/* appends.c: wraps g->io's append, truncate, snapshot_put and close
 * (after raft_uv_init, before raft_init). */
void cs_appends_wrap(cs_group *g);
/* appends.c: from the check phase: retries the oldest held write once
 * RETRY_MS passed since the last try. */
void cs_appends_retry(cs_group *g);
/* appends.c: true when the group may close (stopping): no leader write in
 * raft_uv, only held ones at most. */
bool cs_appends_drained(const cs_group *g);
/* appends.c: the age (ms) of the group's oldest log append not done yet
 * (0: none pending). */
uint64_t cs_appends_stall_ms(const cs_group *g);

/* sends.c: wraps g->io's send (after raft_uv_init, before raft_start): a
 * follower's rejection of an index compacted into its snapshot is sent as
 * a success at its snapshot index (a libraft 0.15 defect, see sends.c). */
void cs_sends_wrap(cs_group *g);

/* reads.c: from the leader watch, each loop turn: appends the leader's
 * no-op in a term this node leads and has not proposed one in, starts the
 * next read round for waiting readers, or fails them once not leading. */
void cs_leader_duties(cs_group *g);

/* reads.c: fails the readers waiting for a round and a confirm round in
 * flight (the node is stopping; a barrier round is failed by raft_close). */
void cs_reads_stop(cs_group *g);

/* reads.c: the control channel's callbacks (rn_ctl_options, ctx = the
 * node): a peer's ask answered from this node's view of the group, and an
 * answer counted for the round in flight. */
bool cs_confirm_ask(void *node, uint64_t sender, const rn_wire_confirm *ask,
                    rn_wire_confirm *answer);
void cs_confirm_answer(void *node, uint64_t peer, const rn_wire_confirm *answer);

#endif
