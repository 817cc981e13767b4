/*
 * meta.h — the cluster's metadata: the nodes (their addresses, whether they
 * stay, leave or left, whether they are drained) and the placement table
 * (on which nodes each Raft group is to be, which of them should lead it,
 * and the configuration its leader last reported). It is the state machine
 * of the metadata group, a Raft group of its own replicated on every node
 * (cluster.h): every node applies the same commands in the same order and
 * so holds the same table; only the metadata group's leader decides what
 * changes (placement_driver.h), and a data group's leader acts on it
 * (reconcile.h).
 *
 * Commands are deterministic: apply checks each against the state alone
 * and either changes it or refuses it with a result code, the same on
 * every replica. An entry of the metadata group is a sequence of commands,
 * applied in order; each gets its own result.
 *
 * Encoding (little-endian, buf.h's helpers): a command is u8 kind and its
 * fields; a node id is u8 (1..255); strings are lstr. The snapshot is
 * u8 version 1 and the whole state.
 */
#ifndef RN_CLUSTER_META_H
#define RN_CLUSTER_META_H

#include <stddef.h>
#include <stdint.h>

#include "util/buf.h"

#define RN_META_MAX_NODES 32   /* as RN_MAX_PEERS */
#define RN_META_MAX_REPLICAS 7 /* --replicas */
#define RN_META_RAFT_MAX 64    /* a Raft address, with its terminator */
#define RN_META_URL_MAX 512    /* a public URL, with its terminator */

typedef enum {
    RN_NODE_ACTIVE = 1,  /* takes replicas */
    RN_NODE_LEAVING = 2, /* decommissioned: its replicas move away, then it is removed */
    RN_NODE_REMOVED = 3, /* holds nothing; its id is never used again */
} rn_node_state;

typedef struct {
    uint8_t id;
    uint8_t state;   /* rn_node_state */
    uint8_t drained; /* leads nothing (its leaderships move away); replicas stay */
    char raft[RN_META_RAFT_MAX];
    char url[RN_META_URL_MAX];
    char peer_url[RN_META_URL_MAX]; /* its peer listener's URL (--peer-listen); "": url */
} rn_meta_node;

/* A member of a group's configuration as its leader reported it. */
typedef struct {
    uint8_t id;
    uint8_t role; /* consensus_role: 0 spare, 1 standby, 2 voter */
} rn_meta_member;

typedef struct {
    uint32_t epoch; /* changes of target since the cluster was made: 0 only for a group
                       still on its first nodes (which bootstrap it) */
    uint8_t n_target;
    uint8_t target[RN_META_MAX_REPLICAS]; /* the nodes it is to be on, ascending */
    uint8_t leader;                       /* the node that should lead it (0: any) */
    uint8_t n_members;
    rn_meta_member members[RN_META_MAX_NODES]; /* its configuration, ascending by id */
    uint64_t members_term;                     /* the term of the leader that reported it */
} rn_meta_group;

typedef struct {
    int initialized;
    unsigned replicas; /* the replication factor asked for (--replicas of the first leader) */
    unsigned groups;   /* data groups */
    unsigned n_nodes;
    rn_meta_node nodes[RN_META_MAX_NODES]; /* ascending by id; removed ones stay */
    rn_meta_group *group;                  /* groups of them (NULL before initialized) */
    uint64_t changes;                      /* commands that changed the state, ever */
} rn_meta;

typedef enum {
    RN_META_INIT = 1,     /* replicas, groups, nodes, every group's target and leader */
    RN_META_NODE_ADD,     /* id, raft, url, peer url: a new active node (or a leaving one
                             staying) */
    RN_META_NODE_STATE,   /* id, state: leaving or removed */
    RN_META_NODE_DRAIN,   /* id, drained */
    RN_META_GROUP_TARGET, /* group, the epoch it replaces, the target */
    RN_META_GROUP_LEADER, /* group, the node that should lead it */
    RN_META_GROUP_MEMBERS /* group, term, the configuration its leader reported */
} rn_meta_kind;

typedef enum {
    RN_META_OK = 0,
    RN_META_UNCHANGED,     /* applied, and nothing had to change */
    RN_META_MALFORMED,     /* does not decode, or a value out of range */
    RN_META_UNINITIALIZED, /* only INIT applies before INIT */
    RN_META_ALREADY,       /* INIT after INIT */
    RN_META_UNKNOWN_NODE,  /* no such node */
    RN_META_CONFLICT,      /* the node is known with other addresses, or its address is
                              another node's */
    RN_META_NODE_REMOVED,  /* the node was removed: its id is never used again */
    RN_META_FULL,          /* RN_META_MAX_NODES nodes known */
    RN_META_STALE,         /* a target change made against another epoch, or members
                              reported for an older term */
    RN_META_NOT_ALLOWED,   /* a removal of a node some group still uses, a target
                              naming a node that does not take replicas */
} rn_meta_result;

/* "ok", "unchanged", ... for logs and answers. */
const char *rn_meta_result_name(rn_meta_result r);

void rn_meta_init_empty(rn_meta *m);
void rn_meta_free(rn_meta *m);

/* The node with this id, or NULL. */
const rn_meta_node *rn_meta_node_get(const rn_meta *m, unsigned id);
/* True when node id is in the group's target / its reported configuration
 * (any role). */
int rn_meta_in_target(const rn_meta_group *g, unsigned id);
int rn_meta_in_members(const rn_meta_group *g, unsigned id);
/* True while the group's reported configuration differs from its target:
 * a node to add, promote or remove. */
int rn_meta_group_moving(const rn_meta_group *g);
/* True when some data group's target or reported configuration names node
 * id: a leaving node is not done until this is false. */
int rn_meta_node_used(const rn_meta *m, unsigned id);
/* True when node id belongs in the metadata group's configuration: it is
 * active, or leaving with replicas still to move. */
int rn_meta_node_in_meta_group(const rn_meta *m, const rn_meta_node *n);

/* ---- commands (appended to out; several make one entry) ---- */

/* The initial table: nodes (n, ids ascending, all active), every group's
 * target (replicas of them, ascending, from placement_balance.h) and
 * leader; members are set to the targets (the groups bootstrap on them). */
void rn_meta_cmd_init(rn_buf *out, unsigned replicas, unsigned groups, const rn_meta_node *nodes,
                      unsigned n, const rn_meta_group *group);
void rn_meta_cmd_node_add(rn_buf *out, unsigned id, const char *raft, const char *url,
                          const char *peer_url);
void rn_meta_cmd_node_state(rn_buf *out, unsigned id, rn_node_state state);
void rn_meta_cmd_node_drain(rn_buf *out, unsigned id, int drained);
void rn_meta_cmd_group_target(rn_buf *out, unsigned group, uint32_t epoch, const uint8_t *ids,
                              unsigned n);
void rn_meta_cmd_group_leader(rn_buf *out, unsigned group, unsigned id);
void rn_meta_cmd_group_members(rn_buf *out, unsigned group, uint64_t term,
                               const rn_meta_member *members, unsigned n);

/* Applies an entry: every command in it, in order; results[k] (cap of
 * them) gets the k-th command's result. Returns the number of commands;
 * -1 when a command does not decode (RN_META_MALFORMED) or comes before
 * INIT (RN_META_UNINITIALIZED): those before it applied, it and the rest
 * did not (results from it on say why). Deterministic: the same state and
 * entry give the same state and results anywhere. */
int rn_meta_apply(rn_meta *m, const void *entry, size_t len, rn_meta_result *results, unsigned cap);

/* The state as a snapshot into out, and back: restore replaces m with the
 * snapshot's state; returns 0, or -1 (m unchanged) when it does not
 * decode. */
void rn_meta_snapshot(const rn_meta *m, rn_buf *out);
int rn_meta_restore(rn_meta *m, const void *data, size_t len);

#endif
