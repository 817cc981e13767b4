/*
 * forks.h — forks apart from their source in a cluster: the command log's
 * pin, unpin, fork_alive and fork_cut (engine/cmdlog.h) carried to the
 * leader of the group concerned (locally or by a signed peer request),
 * and the peer routes that leader answers (forks.c lists them).
 */
#ifndef RN_CLUSTER_FORKS_H
#define RN_CLUSTER_FORKS_H

#include <stddef.h>
#include <stdint.h>

#include "engine/cmdlog.h"
#include "transport/http.h"

typedef struct rn_cluster rn_cluster;

/* rn_cmdlog_ops.pin, unpin, fork_alive and fork_cut, arg being the
 * cluster; each answers later, on the loop thread, never from inside. */
void cluster_fork_pin(void *arg, const rn_fork_pin_ask *ask, rn_fork_pin_done done, void *darg);
void cluster_fork_unpin(void *arg, uint64_t source_id, uint64_t fork_id);
void cluster_fork_alive(void *arg, uint64_t source_id, uint64_t fork_id, rn_fork_alive_done done,
                        void *darg);
void cluster_fork_cut(void *arg, uint64_t source_id, uint64_t fork_id, uint64_t offset,
                      rn_fork_cut_done done, void *darg);

/* rn_cmdlog_ops.hosts by group, arg being the cluster: the group runs
 * here; 1 during the start (groups replaying before all started: the
 * fetcher's scan at its end asks again), so nothing is copied for want of
 * a group still starting. */
int cluster_hosts(void *arg, unsigned group);

/* True for the peer routes of forks.c (path without "/__runnel/"). */
int rn_cluster_forks_route(const char *path, size_t path_len);
/* Answers a request to one of them; 0 when path is none of them. */
int rn_cluster_forks_handle(rn_cluster *cl, rn_request *req, const char *path, size_t path_len,
                            const char *query, size_t query_len);

#endif
