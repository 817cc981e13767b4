/*
 * consensus.h — the cluster's consensus layer: a fixed number of Raft
 * groups per node, each a replicated log whose committed entries every
 * replica applies in index order with the same deterministic state machine.
 *
 * This interface hides the engine (libraft 0.15 today) so it could be
 * swapped: nothing here names a libraft type. One node (`consensus`) runs
 * every group on one uv loop; all calls and all callbacks happen on that
 * loop's thread. One TCP port serves every group (mux.h).
 *
 * Outcomes. Every asynchronous call reports exactly one consensus_status,
 * through its callback, never from inside the call itself. The statuses keep
 * apart the two answers extensions §5.7 and §11.1 tell apart:
 *   - nothing was proposed, so nothing applied, now or later
 *     (NOT_LEADER, BUSY, NOT_PROPOSED, INVALID): a write answers 307 or
 *     503 NO_LEADER (BUSY: 503 RAFT_UNCOMMITTED_BACKPRESSURE);
 *   - it was proposed and its apply was not observed here (OUTCOME_UNKNOWN:
 *     leadership lost, or the node stopped, after the entry entered the
 *     log): it may have applied or may still apply; a write answers 503
 *     OUTCOME_UNKNOWN.
 * A read barrier proposes nothing the state machine sees, so it never
 * reports OUTCOME_UNKNOWN.
 *
 * State machine callbacks (apply, snapshot, restore) run from inside the
 * engine: they must not call any consensus_* function except the queries.
 * Completion callbacks run outside it and may call anything.
 *
 * On disk: <data_dir>/raft/g<NN>/ per group (libraft's segments, metadata
 * and snapshot files). On restart a group restores its newest snapshot
 * (restore) and then re-applies every committed entry after it (apply):
 * the state machine starts from the snapshot, never from state it kept
 * elsewhere, or it must make re-applied entries harmless.
 */
#ifndef RN_CONSENSUS_CONSENSUS_H
#define RN_CONSENSUS_CONSENSUS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "consensus/peer_tls.h"
#include "util/secret.h"

typedef struct consensus consensus;

typedef enum {
    CONSENSUS_OK = 0,          /* applied / confirmed / done */
    CONSENSUS_NOT_LEADER,      /* nothing proposed: this node does not lead the group, or is
                                  handing its leadership over */
    CONSENSUS_BUSY,            /* nothing proposed: a bound is reached (proposals or bytes in
                                  flight, read waiters, a membership change or transfer already
                                  running) */
    CONSENSUS_NOT_PROPOSED,    /* nothing proposed: the log refused the entry before appending
                                  it (memory, disk), or the node is stopping */
    CONSENSUS_OUTCOME_UNKNOWN, /* proposed, and the apply (or the change's commit) was not
                                  observed: it may or may not take effect */
    CONSENSUS_INVALID,         /* nothing changed: unknown node id, bad role or address */
    CONSENSUS_TIMED_OUT,       /* nothing changed: a transfer's target did not take over, or a
                                  promoted node did not catch up, in time */
} consensus_status;

/* "ok", "not_leader", ... for logs and the test protocol. */
const char *consensus_status_name(consensus_status s);

/* Engine parameters; consensus_params_default fills the defaults shown. */
typedef struct {
    unsigned election_timeout_ms; /* 1000: a follower without a leader's word for 1-2x this
                                     starts an election; a leader without a majority's word
                                     for this long steps down */
    unsigned heartbeat_ms;        /* 100 */
    unsigned snapshot_threshold;  /* 1024 applied entries between snapshots */
    unsigned snapshot_trailing;   /* 128 entries kept in the log behind a snapshot */
    /* 64 MiB: a group also snapshots once the entries applied since its
     * last snapshot hold this many bytes, and keeps behind a snapshot only
     * the entries that fit in a quarter of it (at most snapshot_trailing):
     * libraft holds every entry since the snapshot in memory, so without
     * it a group held up to threshold + trailing entries of any size (1,152
     * appends of 32 MiB). 0: entries are counted only. */
    uint64_t snapshot_bytes;
    unsigned install_snapshot_timeout_ms; /* 5000: a leader resends a snapshot that got no
                                             answer after this (libraft's default is 30 s, and a
                                             follower busy taking its own snapshot drops one) */
    size_t segment_bytes;                 /* 1 MiB: size of each preallocated log segment */
    bool snapshot_compression;            /* false: snapshots (manifests) stored uncompressed */
    bool pre_vote;                        /* true: a node cut off cannot depose a working leader */
    bool tcp_nodelay;                     /* true; false only to measure Nagle's cost */
    unsigned connect_retry_ms;            /* 250: delay between connection attempts to a peer */
    unsigned peer_timeout_ms;             /* 10000: TCP_USER_TIMEOUT and keepalive bound (mux.h) */
    unsigned max_inflight_entries;        /* 8192 proposals per group awaiting their outcome */
    size_t max_inflight_bytes;            /* 64 MiB of proposal bytes per group awaiting it */
    unsigned max_read_waiters;            /* 65536 reads per group waiting for a round */
    bool read_confirm;                    /* true: a ready leader confirms reads by asking its
                                             peers (ReadIndex, reads.c); false: every round is a
                                             barrier entry (a disk write on a majority) */
    uint64_t min_free_bytes;              /* 0: none; else log writes wait (held, retried) while
                                             the data directory's file system has less free, so
                                             that the log never takes the space a restart needs */
    unsigned catch_up_rounds;             /* 10: promotion gives up after this many rounds ... */
    unsigned catch_up_round_ms;           /* 5000: ... each at most this long */
} consensus_params;

void consensus_params_default(consensus_params *p);

typedef struct {
    uint64_t id;         /* > 0, unique in the cluster, never reused */
    const char *address; /* Raft address, numeric "a.b.c.d:port" or "[v6]:port" */
} consensus_peer;

/* The replicated state machine. Callbacks receive ctx. */
typedef struct {
    void *ctx;
    /* Applies the committed entry `index` of `group` (bytes as proposed).
     * Called on every replica, in index order, exactly once per index in
     * the life of the process (after a restart: again from the snapshot
     * on). Must be deterministic and must not fail: a refusal is a result.
     * Returns an opaque result: on the node whose proposal this is, it is
     * handed to the proposal's callback; anywhere else it is passed to
     * free_result. NULL is a valid result. */
    void *(*apply)(void *ctx, unsigned group, uint64_t index, const void *data, size_t len);
    /* Releases a result nobody collects (may be NULL if apply always
     * returns NULL). */
    void (*free_result)(void *ctx, unsigned group, void *result);
    /* Describes the group's applied state up to `index` (every entry up to
     * it applied, none after) as a manifest: bytes naming state, never
     * stream data. Sets *out to a malloc'd buffer (freed by consensus with
     * free) and *len. Returns 0, or negative to skip this snapshot (it is
     * retried after more entries). Runs on the loop thread: keep it short. */
    int (*snapshot)(void *ctx, unsigned group, uint64_t index, void **out, size_t *len);
    /* Optional: runs on a worker thread after snapshot() succeeded and
     * before the snapshot is stored (so before the log entries it replaces
     * are dropped): makes durable what the manifest names without holding
     * (stream files). It may use what its snapshot() kept for the group
     * (one snapshot of a group runs at a time). Returns 0, or negative to
     * fail the snapshot; it is retried after more entries. */
    int (*snapshot_durable)(void *ctx, unsigned group);
    /* Replaces the group's whole state with the manifest's, as of `index`.
     * Returns 0, or negative when the manifest is unusable (the engine then
     * refuses the snapshot). */
    int (*restore)(void *ctx, unsigned group, uint64_t index, const void *manifest, size_t len);
    /* Optional: the group's known leader, its term or this node's
     * readiness as leader changed (see consensus_group_info). Runs outside
     * the engine, after the change. */
    void (*leader_changed)(void *ctx, unsigned group, uint64_t leader_id, uint64_t term,
                           bool self_ready);
} consensus_fsm;

typedef struct {
    uv_loop_t *loop;
    uint64_t self_id;
    const char *self_address;    /* listened on, and this node's address in configurations */
    const consensus_peer *peers; /* bootstrap configuration: every voter, self included */
    unsigned n_peers;
    const char *data_dir;   /* must exist; <data_dir>/raft/g<NN>/ are created */
    unsigned groups;        /* 1..1024, the same on every node */
    bool bootstrap;         /* a group with no data starts with `peers` as voters; false:
                               it waits to be added by a leader (a replacement node) */
    bool lazy;              /* start no group: the caller starts each it hosts
                               (consensus_group_start) */
    const char *cluster_id; /* connections from another cluster id are refused; may be NULL */
    /* The cluster key (NULL or empty: none; copied): every Raft port
     * connection, both ways, proves it before libraft sees a byte (mux.h). */
    const rn_secret *cluster_key;
    /* Peer certificates (NULL: none; not with a key; not copied: it
     * outlives the node): every Raft port connection, both ways, runs
     * inside mutual TLS and proves which node it comes from (mux.h). */
    const rn_peer_tls *peer_tls;
    consensus_params params;
    consensus_fsm fsm;
} consensus_config;

/* Starts every group: loads each group's data (restoring its snapshot and
 * re-applying nothing yet: entries apply once known committed), bootstraps
 * the pristine ones when cfg->bootstrap, listens on self_address. Blocking
 * while it loads. Always sets *out (the node must be released with
 * consensus_stop, also after a failure). Returns 0, or -1 with the reason
 * in consensus_error. Precondition: the process ignores SIGPIPE (libuv
 * writes to sockets with write(2), and a peer's reset would otherwise kill
 * the process); start refuses otherwise. */
int consensus_start(const consensus_config *cfg, consensus **out);

/* --- groups started and stopped one at a time ------------------------------ */

/* Called once: OK, a nothing-changed status, or OUTCOME_UNKNOWN (a
 * membership change was proposed and leadership was lost before it
 * committed). */
typedef void (*consensus_done_cb)(void *arg, consensus_status status);

/* Starts one group on a running node (cfg->lazy, or one stopped since):
 * loads its data as consensus_start does; a group with no data bootstraps
 * with voters (n_voters of them, this node among them) or, voters NULL,
 * waits to be added by a leader. defer: this node's first election
 * timeout is three times the usual (restored once a leader is known), so
 * that another voter, not deferred, wins the group's first election (the
 * leader the caller prefers: no transfer right after a start). 0 at once
 * when it runs already; -1 with the reason in consensus_error (the group
 * is not running then, or is still closing from consensus_group_stop). */
int consensus_group_start(consensus *c, unsigned group, const consensus_peer *voters,
                          unsigned n_voters, bool defer);

/* Starts a group that lost its majority with its configuration forced
 * to this node alone (libraft's raft_recover: a configuration entry
 * appended to the group's log on disk), so this node elects itself at
 * once. Only on a node whose group is not running, and only when no other
 * member of the group runs and none will run again with its data: two
 * groups would otherwise go on side by side. -1 as consensus_group_start
 * (also for a group without data here). */
int consensus_group_start_alone(consensus *c, unsigned group);

/* Stops one group as consensus_stop stops all (proposals and reads
 * outstanding get their outcomes first), then, with erase, removes its
 * directory and everything in it: the group's Raft log, its vote and its
 * snapshots (only for a replica its group no longer counts: one removed
 * from the configuration). cb: OK once closed, after every outcome of
 * the group; INVALID when the group was not running, NOT_PROPOSED when
 * the node is stopping or the group is stopping already. The group may be
 * started again from the callback on. */
void consensus_group_stop(consensus *c, unsigned group, bool erase, consensus_done_cb cb,
                          void *arg);

/* True when the group runs here (started, not stopping). */
bool consensus_group_running(const consensus *c, unsigned group);

/* True when <data_dir>/raft/g<NN>/ holds a group's Raft data (it was
 * bootstrapped, voted or received an entry here). */
bool consensus_group_has_data(const char *data_dir, unsigned group);

/* A new group's first state, written offline (no node running on
 * data_dir): seeding every node of a new cluster with the same peers and
 * snapshot gives each the same group. */
typedef struct {
    uv_loop_t *loop; /* run until each call is done */
    const char *data_dir;
    uint64_t self_id;
    const char *self_address;    /* this node's Raft address, as consensus_config's */
    const consensus_peer *peers; /* the voters, self included */
    unsigned n_peers;
} consensus_seed_config;

/* Bootstraps group in <data_dir>/raft/g<NN>/, which must hold no Raft data,
 * with cfg's peers as voters, and stores manifest (len bytes, what
 * consensus_fsm.snapshot would give) as its snapshot at index 1 in place of
 * the bootstrap's entry: consensus_start then restores it (consensus_fsm.
 * restore) like any snapshot, and leaders send it to nodes added later.
 * Returns 0, or -1 with the reason in err. */
int consensus_seed(const consensus_seed_config *cfg, unsigned group, const void *manifest,
                   size_t len, char *err, size_t errcap);

/* A human-readable reason for the last failure of consensus_start. */
const char *consensus_error(const consensus *c);

/* Stops every group. New calls are refused NOT_PROPOSED and waiting reads
 * fail at once; a group first finishes the log writes it started as
 * leader (10 s at most: libraft 0.15 corrupts its log when it cancels
 * more than one, see appends.c), so proposals may still complete OK; then
 * pending proposals report OUTCOME_UNKNOWN, reads NOT_LEADER, changes
 * OUTCOME_UNKNOWN and transfers TIMED_OUT; every handle and file is
 * closed and done(arg) runs on the loop thread. Every outcome is delivered
 * before done; calls made until done are refused NOT_PROPOSED (a caller
 * must not retry those forever). c is freed before done runs. Call once. */
void consensus_stop(consensus *c, void (*done)(void *arg), void *arg);

/* --- writes --------------------------------------------------------------- */

/* Called once with the proposal's outcome: CONSENSUS_OK with the entry's
 * index and apply's result (now the callee's), OUTCOME_UNKNOWN with the
 * index it was given (0 never), or a nothing-proposed status with index 0.
 * result is NULL unless status is CONSENSUS_OK. */
typedef void (*consensus_propose_cb)(void *arg, consensus_status status, uint64_t index,
                                     void *result);

/* Proposes one entry (len > 0 bytes, copied) to the group's log. Only the
 * leader proposes; the callback reports OK once a majority stored it and
 * this node applied it. Never calls cb before returning. */
void consensus_propose(consensus *c, unsigned group, const void *data, size_t len,
                       consensus_propose_cb cb, void *arg);

/* --- linearizable reads --------------------------------------------------- */

/* Called once: CONSENSUS_OK with this node's applied index when this node
 * proved, after the read was asked for, that it still led the group (a
 * majority of voters confirmed its term: by answering over the control
 * channel that they follow it, or by storing a barrier entry of its term)
 * and it applied everything committed before: state read now reflects
 * every write acknowledged before the read, by any leader. Otherwise
 * NOT_LEADER, BUSY, or NOT_PROPOSED (the log refused the barrier, or the
 * node is stopping); never OUTCOME_UNKNOWN. */
typedef void (*consensus_read_cb)(void *arg, consensus_status status, uint64_t applied_index);

/* Asks for a read confirmation. Reads asked while one round is in flight
 * share the next one, so a burst of reads costs at most two rounds. */
void consensus_read_barrier(consensus *c, unsigned group, consensus_read_cb cb, void *arg);

/* --- leadership and membership --------------------------------------------- */

typedef enum {
    CONSENSUS_SPARE = 0,   /* in the configuration; gets no entries, no vote */
    CONSENSUS_STANDBY = 1, /* gets entries, no vote */
    CONSENSUS_VOTER = 2,   /* gets entries and votes */
} consensus_role;

/* Hands the group's leadership to target (0: the most up-to-date voter).
 * OK once the target (any other node, for 0) leads; TIMED_OUT if it did
 * not take over within an election timeout. New proposals are refused
 * NOT_LEADER while the transfer runs. */
void consensus_transfer(consensus *c, unsigned group, uint64_t target, consensus_done_cb cb,
                        void *arg);

/* Adds node id at address to the group's configuration as a spare. The
 * node must be running (consensus_start with bootstrap false) to take part
 * once promoted. */
void consensus_add(consensus *c, unsigned group, uint64_t id, const char *address,
                   consensus_done_cb cb, void *arg);

/* Gives a member a new role. Promotion to voter first lets the node catch
 * up (catch_up_rounds x catch_up_round_ms at most: TIMED_OUT). */
void consensus_assign(consensus *c, unsigned group, uint64_t id, consensus_role role,
                      consensus_done_cb cb, void *arg);

/* Removes a member (a dead node, or this node: a removed leader steps
 * down once the change commits). */
void consensus_remove(consensus *c, unsigned group, uint64_t id, consensus_done_cb cb, void *arg);

/* --- queries (any time, also from state machine callbacks) ---------------- */

typedef enum {
    CONSENSUS_STOPPED = 0,
    CONSENSUS_FOLLOWER,
    CONSENSUS_CANDIDATE,
    CONSENSUS_LEADER,
} consensus_state;

typedef struct {
    consensus_state state;
    bool leader_ready;  /* leader, and an entry of its term applied here: everything
                           committed by earlier leaders is applied */
    bool transferring;  /* leader handing leadership over */
    uint64_t leader_id; /* the leader this node knows for `term`; 0: none known */
    uint64_t term;
    uint64_t commit_index;   /* highest index known committed */
    uint64_t applied_index;  /* highest index applied here (entries of every type) */
    uint64_t command_index;  /* highest index of a proposal's entry applied here (or of the
                                snapshot restored): what a ReadIndex must reach, since the
                                barriers after it change no state */
    uint64_t last_index;     /* highest index in the local log */
    uint64_t snapshot_index; /* index of the newest snapshot taken or installed */
    unsigned voters;         /* voters in the configuration this node uses */
    bool config_committed;   /* that configuration is committed (no change in flight): every
                                later leader uses it or a newer one */
    /* counters since start */
    uint64_t leader_changes; /* times leader_id or term changed */
    uint64_t snapshots;      /* snapshots taken here */
    uint64_t last_snapshot_bytes;
    uint64_t restores;      /* snapshots restored (at start or sent by a leader) */
    uint64_t read_rounds;   /* confirmation rounds started for reads, ... */
    uint64_t read_barriers; /* ... of which barrier entries (the rest asked the peers) */
    uint64_t nudges;        /* barriers appended to tell the followers a commit at once */
    uint64_t proposals_inflight;
    /* this node's log writes: held while the disk has no room for a new
     * segment (retried until it has), and the age in ms of the oldest one
     * not done yet (0: none pending; a full, slow or stalled disk) */
    unsigned log_writes_held;
    uint64_t log_stall_ms;
} consensus_group_info;

void consensus_group_info_get(const consensus *c, unsigned group, consensus_group_info *out);

/* Bytes of the entries libraft holds in memory for the group (those since
 * the snapshot's trailing ones; bounded by snapshot_bytes), 0 when it does
 * not run. A walk over every such entry: for the metrics, not for a
 * request's path. */
uint64_t consensus_group_log_bytes(const consensus *c, unsigned group);

/* True when this node leads the group (and is not handing it over). */
bool consensus_is_leader(const consensus *c, unsigned group);

/* True when this node leads the group, is not handing it over, and its
 * first entry of the term applied here (leader_ready): its applied state
 * holds everything earlier leaders committed. */
bool consensus_leader_ready(const consensus *c, unsigned group);

typedef struct {
    uint64_t id;
    consensus_role role;
    char address[256];
    uint64_t match_index; /* on the leader: the highest index known stored there; else 0 */
} consensus_member;

/* Copies up to cap members of the group's configuration into out; returns
 * how many there are. */
unsigned consensus_members(const consensus *c, unsigned group, consensus_member *out, unsigned cap);

unsigned consensus_groups(const consensus *c);

#endif
