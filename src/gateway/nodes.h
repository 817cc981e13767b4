/*
 * nodes.h — the nodes a standalone gateway forwards to, and which of them
 * are usable: each is asked GET /__runnel/livez when the gateway starts and
 * then every second while it is not usable (every ten while it is); a node
 * that answered 200 is usable, unless its Ursula-Max-Request-Bytes is below
 * the gateway's request limit (the gateway must never accept a body a node
 * refuses unread: ext §11.1), which the log says. A node a request could
 * not connect to is not usable until it answers again.
 */
#ifndef RN_GATEWAY_NODES_H
#define RN_GATEWAY_NODES_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "gateway/upstream.h"
#include "util/buf.h"

typedef struct rn_nodes rn_nodes;

/* urls: http://host:port base URLs (a trailing / is dropped). */
rn_nodes *rn_nodes_new(uv_loop_t *loop, rn_upstreams *up, const char *const *urls, size_t n,
                       uint64_t request_limit);
/* Asks every node now; done(arg, usable, why) runs once all answered or
 * failed, with the first reason a node was refused (or ""). */
void rn_nodes_probe(rn_nodes *ns, void (*done)(void *arg, size_t usable, const char *why),
                    void *arg);
/* A usable node other than `avoid` (NULL: any), round robin, into origin;
 * returns 0 when there is none. */
int rn_nodes_pick(rn_nodes *ns, const char *avoid, char *origin, size_t cap);
/* Whether any node is usable. */
int rn_nodes_usable(const rn_nodes *ns);
/* A request could not connect to origin: it is not usable until it answers
 * a probe again. */
void rn_nodes_failed(rn_nodes *ns, const char *origin);
/* Appends runnel_gateway_node_usable{node=...} gauges. */
void rn_nodes_metrics(const rn_nodes *ns, rn_buf *out);
void rn_nodes_stop(rn_nodes *ns);
void rn_nodes_free(rn_nodes *ns);

#endif
