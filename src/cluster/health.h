/*
 * health.h — a cluster node's disk and log health (issue 32), and what it
 * does about it: admission, leadership hand-over, readiness.
 *
 * Every HEALTH_MS the node reads the free space of its data directory's
 * file system and looks at each group it leads. A group's leadership is
 * handed to a healthy voter (consensus_transfer; a peer is healthy when
 * its last status report, GET /__runnel/cluster/status, said so within
 * the last 3 s) when this node
 *   - has less free than --disk-reserve-bytes (the reserve): its writes
 *     are refused 503 WAL_DISK_PRESSURE before they are proposed;
 *   - stopped applying the group (raft_log.h: a committed entry's data
 *     found no room): its writes are refused 503 APPLY_STOPPED;
 *   - has a log write pending for --log-stall-ms (a full or slow disk;
 *     appends.c holds writes the disk has no room for): libraft
 *     0.15's leader commits only what it stored itself, so the group's
 *     writes wait until the leadership moves.
 * Without a healthy voter the leadership stays (a log line says why, at
 * most every 10 s per group). /__runnel/readyz answers 503 naming the
 * first of these that holds (any group, led or not), and the metrics
 * count them.
 *
 * The last quarter of the reserve (at most 16 MiB: the floor) is never
 * taken by the node's own Raft log (appends.c holds writes below it) or
 * stream data (applying stops below it), so that the node can restart
 * and report; and the floor's size is kept in a file, <data>/reserve,
 * removed at every start before anything is written (a file system
 * another process filled still has room for the start) and made again
 * once the disk has the reserve and the file's size free.
 */
#ifndef RN_CLUSTER_HEALTH_H
#define RN_CLUSTER_HEALTH_H

#include <stdbool.h>
#include <stdint.h>

#include "ops/config.h"
#include "util/buf.h"

struct rn_cluster;

/* The floor (bytes): the part of cfg's reserve the node's own writes never
 * take; 0 without a reserve. */
uint64_t rn_health_floor(const rn_config *cfg);

/* Removes <data>/reserve (at a start, before anything is written). */
void rn_health_release_reserve(const rn_config *cfg);

/* Starts and stops the node's checks (cl's node and log running). */
void rn_health_start(struct rn_cluster *cl);
void rn_health_stop(struct rn_cluster *cl);

/* The raft log's admission (rn_raft_log_config.admit): 0 while the disk
 * is below the reserve. */
int rn_health_admit(void *cl, unsigned group);

/* What a write to a group this node leads is refused with before its body
 * is read: RN_E_APPLY_STOPPED, RN_E_WAL_DISK_PRESSURE, or 0. */
int rn_health_write_refusal(const struct rn_cluster *cl, unsigned group);

/* 1 when healthy; else 0 with the reason in why. */
int rn_health_ready(const struct rn_cluster *cl, char *why, size_t cap);

/* This node's status line for its peers ("health 1\n" or "health 0
 * REASON\n"), and a peer's line parsed: 1 healthy, 0 not, -1 none. */
void rn_health_status_line(const struct rn_cluster *cl, rn_buf *out);
int rn_health_parse_status(const char *line, size_t len);

/* Appends the health gauges and counters (Prometheus text format). */
void rn_health_metrics(const struct rn_cluster *cl, rn_buf *out);

#endif
