/*
 * routing.h — cluster mode at the surfaces (extensions §5.7, §9.2, §10):
 * whether this node serves a stream's writes and linearizable reads, and
 * the answers of one that does not.
 *
 * A write goes on here only when this node leads the stream's group and
 * has applied everything earlier leaders committed. Otherwise, decided
 * from the request head before any body byte is read: 307 to the leader's
 * public URL (the request's target appended) with x-ursula-raft-leader-id,
 * x-ursula-raft-group and x-ursula-raft-term, or, when no leader (or no
 * leader's URL or term) is known, 503 NO_LEADER with Retry-After and
 * x-ursula-raft-group. Once body bytes were read a write is never
 * redirected: it answers 503 NO_LEADER.
 *
 * A read with consistency=leader (both surfaces) is served by the leader
 * only: a follower redirects it like a write; the leader confirms with a
 * majority that it still leads and waits until it applied everything
 * committed before (consensus_read_barrier; concurrent reads share rounds), then
 * re-runs the request through the router, which lets it pass. Reads
 * without a consistency parameter are served by any replica caught up
 * since its start once it applied the group's ReadIndex (the view's
 * follower_confirm; at once with --follower-reads local);
 * consistency=local ones at once from its applied state. A write or
 * leader read reaching a leader that does not serve yet (or any more:
 * it hands the leadership over) waits for the group's next state
 * (await_leader) and is routed again.
 *
 * A node that hosts no replica of the group (placement puts each group on
 * some of the nodes) serves nothing of it: writes and reads alike are
 * answered 307 to a node that hosts it with only x-ursula-raft-group (the
 * §5.7 shape of such a node: it names no leader and no term), or 503
 * NO_LEADER when it knows none; a write may be forwarded instead (to the
 * group's leader when peers told this node which it is).
 *
 * Single-node mode sets no view: every request is served here.
 */
#ifndef RN_ROUTING_H
#define RN_ROUTING_H

#include <assert.h>
#include <stddef.h>
#include <stdint.h>

#include "transport/http.h"

/* Where a stream's writes and leader reads are served. */
typedef struct {
    unsigned group;
    int serves;             /* this node leads the group, ready: serve here */
    uint64_t leader_id;     /* the leader this node knows, 0: none */
    uint64_t term;          /* its term */
    const char *leader_url; /* its public base URL; NULL: unknown (or this node) */
    int caught_up;          /* since its start this replica applied the group's leader's
                               ReadIndex (or it leads): it may serve local reads */
    int held_here;          /* this node leads the group but serves nothing of it yet or
                               any more (not ready, or handing the leadership over) */
    int hosted;             /* this node is a voter of the group; when not, it serves nothing
                               of it: a redirect names only the group (§5.7), to host_url */
    const char *host_url;   /* not hosted: a node that hosts the group (its leader when
                               known); NULL: none known */
    int write_refusal;      /* serves, yet refuses the group's writes and leader reads
                               before anything is read or proposed: RN_E_APPLY_STOPPED
                               (applying stopped here), RN_E_WAL_DISK_PRESSURE (the disk
                               is below its reserve; leader reads go on); 0: none */
    int apply_stopped;      /* this replica stopped applying the group, or its log holds
                               writes back (its disk has no room): reads that must reflect
                               every acknowledged write answer 503 APPLY_STOPPED;
                               consistency=local ones are served from what it applied */
} rn_group_route;

/* Called once with the outcome of a confirmation (before confirm returns
 * only when it fails at once): 1 when this node led the group after the
 * call and applied everything committed before it. */
typedef void (*rn_confirm_cb)(void *arg, int confirmed);

/* A leader's answer to an ask for the streams of groups this node does
 * not host (the view's ask_elsewhere): a JSON object {"groups":[G,...],
 * "streams":[[path, id (16 hex digits), tail, start, content type],...],
 * "cursor":"INCARNATION.SEQ", "full":true} naming every stream of each
 * group listed, which that leader serves; or, for an ask made with a
 * cursor of the leader's journal (cluster/changes.h) that it can answer
 * from, "full":false, "streams" naming only the streams of those groups
 * changed since the cursor, and "removed":[path,...] those removed since.
 * "cursor" is where the answer leaves the asker. */
typedef void (*rn_elsewhere_fn)(void *arg, const uint8_t *body, size_t len);

/* A set of groups: a bit per group below RN_GROUPS_MAX (zeroed: empty). */
#define RN_GROUPS_MAX 256
typedef struct {
    uint8_t bits[RN_GROUPS_MAX / 8];
} rn_group_set;

static inline void rn_group_set_add(rn_group_set *s, unsigned group) {
    assert(group < RN_GROUPS_MAX);
    s->bits[group / 8] |= (uint8_t)(1u << (group % 8));
}

static inline int rn_group_set_has(const rn_group_set *s, unsigned group) {
    return group < RN_GROUPS_MAX && (s->bits[group / 8] >> (group % 8) & 1);
}
typedef struct rn_elsewhere_ask rn_elsewhere_ask;

/* Where an asker's view of a group stands in its leader's journal: the
 * journal's incarnation and the sequence number the last answer covering
 * the group left it at (an answer's "cursor"); zeroed: nowhere. */
typedef struct {
    uint64_t incarnation, seq;
} rn_elsewhere_cursor;

/* A cursor's text, INCARNATION.SEQ (16 lowercase hex digits, a nonzero
 * incarnation; canonical decimal): 0 with *out set, or -1 when malformed.
 * RN_ELSEWHERE_CURSOR_MAX bytes hold any cursor's text and its NUL. */
int rn_elsewhere_cursor_parse(const char *text, size_t len, rn_elsewhere_cursor *out);
#define RN_ELSEWHERE_CURSOR_MAX 40
void rn_elsewhere_cursor_format(const rn_elsewhere_cursor *c, char out[RN_ELSEWHERE_CURSOR_MAX]);

/* What the cluster tells the surfaces; every call on the loop thread. */
typedef struct {
    void *ctx;
    void (*route)(void *ctx, const char *key, size_t len, rn_group_route *out);
    void (*confirm)(void *ctx, unsigned group, rn_confirm_cb cb, void *arg);
    /* A write this node does not lead may be forwarded to the group's
     * leader instead of redirected (--forward-writes): returns 1 when the
     * forwarder took req (it answers), 0 to answer as usual. NULL: never. */
    int (*forward)(void *ctx, rn_request *req, const rn_group_route *r);
    void *forward_ctx;
    /* A local read on a follower waits for this (read-your-writes): cb
     * with 1 once this replica applied what the group's leader committed
     * before the call, 0 when that could not be known (at once when no
     * leader is known). NULL: local reads are served at once. */
    void (*follower_confirm)(void *ctx, unsigned group, rn_confirm_cb cb, void *arg);
    /* A write or leader read of a group held here (route's held_here)
     * waits for this: cb once the group is served here or led elsewhere
     * (1), or after a bound (0); then it is routed again. NULL: it is
     * answered at once (503 NO_LEADER). */
    void (*await_leader)(void *ctx, unsigned group, rn_confirm_cb cb, void *arg);
    /* Asks the leader of every data group this node does not host for
     * that group's streams (one signed peer request per leader): each(arg,
     * body, len) per good answer, then done(arg) once every ask ended.
     * cursors[g] (RN_GROUPS_MAX of them): where the asker's view of group
     * g stands; a leader asked for groups whose cursors share one
     * incarnation is asked for the changes since the oldest of them.
     * *far: the groups this node does not host (those whose leader is not
     * known are among them, unasked). NULL when nothing was
     * asked (every group hosted here, or no leader known): neither runs.
     * NULL member: never asked. */
    rn_elsewhere_ask *(*ask_elsewhere)(void *ctx, rn_elsewhere_fn each, void (*done)(void *arg),
                                       void *arg, const rn_elsewhere_cursor *cursors,
                                       rn_group_set *far);
    /* Abandons an ask whose done has not run: nothing more runs. */
    void (*ask_elsewhere_cancel)(rn_elsewhere_ask *a);
} rn_cluster_view;

/* Sets the view (cluster mode), and how a confirmed read is run again:
 * redispatch(req, arg) routes it from the start (the router). */
void rn_routing_setup(const rn_cluster_view *view, void (*redispatch)(rn_request *, void *),
                      void *arg);

/* True in cluster mode. */
int rn_routing_active(void);

/* The view's ask_elsewhere (NULL: nothing asked, in single-node mode too,
 * where *far is empty) and its cancel. */
rn_elsewhere_ask *rn_routing_ask_elsewhere(rn_elsewhere_fn each, void (*done)(void *arg), void *arg,
                                           const rn_elsewhere_cursor *cursors, rn_group_set *far);
void rn_routing_ask_elsewhere_cancel(rn_elsewhere_ask *a);

/* A write to the stream at key: returns 0 when it goes on here, 1 when it
 * was answered (307, 503 NO_LEADER, or this leader's refusal: 503
 * APPLY_STOPPED or WAL_DISK_PRESSURE with Retry-After and
 * x-ursula-raft-group), forwarded to the group's leader (the view's
 * forward) or waits for this node to serve the group; from the head
 * (req->body_pending), also when it is to be routed once its body is in
 * (the wait for this node is taken then). From the head (no body read) it
 * may redirect; with body bytes read it never does. */
int rn_routing_write(rn_request *req, const char *key, size_t len);

/* A read (GET or HEAD) of the stream at key, or of one of its
 * subresources; `leader_param`: its query may ask consistency=leader.
 * A replica that stopped applying the group (apply_stopped) answers such
 * a read 503 APPLY_STOPPED with Retry-After unless it asks
 * consistency=local.
 * Returns 0 when it goes on here: a local read on a replica caught up
 * since its start, a malformed parameter the read answers itself, or a
 * confirmed leader read; 1 when it was answered (a replica still catching
 * up after its start answers a local read 503 GROUP_RESTARTING with
 * Retry-After rather than from a state older than what it served before)
 * or waits for its confirmation (it is then run again). */
int rn_routing_read(rn_request *req, const char *key, size_t len, const char *query,
                    size_t query_len, int leader_param);

/* An answer only an up-to-date replica may give (extensions §4.3: a
 * chunk that cannot be marked, a 404, 410, 412 or 416 of an immutable
 * resource): returns 0 when this node may give it (single-node mode, or a
 * read already confirmed), else 1 after redirecting it to the leader (a
 * follower; 503 NO_LEADER when none is known) or starting the leader's
 * confirmation, after which the request runs again, confirmed. */
int rn_routing_authoritative(rn_request *req, const char *key, size_t len);

/* A read of bytes this replica lacks (a gap it is filling, engine.h):
 * 307 to the leader of the key's group when another node leads it, else
 * 503 GROUP_RESTARTING with Retry-After. */
void rn_routing_read_elsewhere(rn_request *req, const char *key, size_t len);
/* The same for bytes this replica found damaged and is fetching again
 * (engine/damage.c): the 503 is STREAM_DATA_REPAIRING. */
void rn_routing_read_repairing(rn_request *req, const char *key, size_t len);

/* The view's answer for the stream at key into *out (what a subsystem
 * other than the surfaces needs: its group, term, leader, whether this
 * replica caught up): returns 1 in cluster mode, else 0 with *out zeroed
 * (this node serves everything). */
int rn_routing_route(const char *key, size_t len, rn_group_route *out);

/* Appends x-ursula-raft-group for the stream at key (cluster mode). */
void rn_routing_group_header(rn_buf *h, const char *key, size_t len);

#endif
