/*
 * identity.h — a node's incarnation (issue 32): a wiped or replaced data
 * directory cannot rejoin under its old node id.
 *
 * Raft's safety rests on what a voter persisted (its term, its vote, its
 * log). A node restarted on an empty directory with its old id forgot
 * them: as a full voter it could elect a leader that lacks committed
 * entries (the issue saw a cluster roll back about 228 entries). So every
 * data directory gets a random 64-bit incarnation the first time a node
 * starts on it (<data>/cluster-incarnation, 16 hex digits; a directory of
 * an earlier build gets one at its first start with this one), every node
 * reports its own to its peers (in its GET /__runnel/cluster/status)
 * and each peer records the first one it hears for an id, durably
 * (<data>/cluster-incarnations, "ID HEX" lines). A peer that later hears
 * another one logs an error naming the replace procedure, counts it, and
 * never hands a leadership to that node.
 *
 * At its start, before its groups run, a node asks every peer which
 * incarnation it knows for the node's id (GET /__runnel/cluster/
 * incarnation?id=N, signed like every peer request; 2 s per peer). When a
 * peer knows another one, the node refuses to start, naming the procedure:
 * remove the old id from the cluster and start the node with a new id, an
 * empty data directory and --join. A peer that does not answer is not
 * asked again (the first nodes of a new cluster start before their peers);
 * its own polls then find the changed incarnation and log it.
 */
#ifndef RN_CLUSTER_IDENTITY_H
#define RN_CLUSTER_IDENTITY_H

#include <stddef.h>
#include <stdint.h>

#include "transport/http.h"
#include "util/buf.h"

struct rn_cluster;

/* Loads (or makes, in memory) this node's incarnation and the recorded
 * ones, asks the peers, and only then writes a new incarnation durably.
 * Blocking: call before the loop runs. Returns 0, or -1 with the reason in
 * err (a peer knows this id under another incarnation, or a file cannot be
 * read or written). */
int rn_identity_start(struct rn_cluster *cl, char *err, size_t cap);

/* Appends "incarnation HEX\n" (this node's) for the peers' polls. */
void rn_identity_status_line(const struct rn_cluster *cl, rn_buf *out);

/* A peer's status line "incarnation HEX" (len bytes at line, which may go
 * on with later lines): recorded when it is the first for that node, else
 * compared with the record. */
void rn_identity_seen(struct rn_cluster *cl, uint64_t peer_id, const char *line, size_t len);

/* True when peer_id answered with another incarnation than its recorded
 * one (its data directory was replaced). */
int rn_identity_replaced(const struct rn_cluster *cl, uint64_t peer_id);

/* GET cluster/incarnation?id=N: "incarnation HEX\n", the one recorded for
 * N (this node's own for its id; 16 zeros when none). */
void rn_identity_answer(struct rn_cluster *cl, rn_request *req, uint64_t id);

#endif
