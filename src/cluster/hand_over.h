/*
 * hand_over.h — a stopping node hands the leadership of the groups it leads
 * to other voters (SIGTERM), and writes that reach it meanwhile wait for the
 * new leader instead of failing.
 *
 * A planned stop that simply went away would cost the groups it led an
 * election (1-2 election timeouts without writes). Handing over asks each
 * led group to transfer its leadership (consensus_transfer to the most
 * up-to-date voter: one round trip, then the target's election). While a
 * group transfers it proposes nothing; a write routed to it then is held
 * (cluster_await_leader) until this node no longer leads the group, or
 * leads it again ready (the transfer failed), or a bound passes, and is
 * routed again: forwarded to the new leader, or answered 307 there.
 */
#ifndef RN_CLUSTER_HAND_OVER_H
#define RN_CLUSTER_HAND_OVER_H

#include <stdint.h>

#include "cluster/cluster.h"
#include "protocol/routing.h"

typedef struct cluster_hand_over cluster_hand_over;

cluster_hand_over *cluster_hand_over_new(rn_cluster *cl);

/* Transfers every group this node leads; done(arg) runs once (later, on
 * the loop) when each transfer reported, or after timeout_ms. Returns the
 * number of groups asked (0: done runs all the same). Called once. */
unsigned cluster_hand_over_start(cluster_hand_over *h, uint64_t timeout_ms, void (*done)(void *arg),
                                 void *arg);

/* cb(arg, 1) once the group's route changed from "led here, not serving"
 * (the transfer ended either way), cb(arg, 0) after timeout_ms or when the
 * node stops. Never inside the call. */
void cluster_await_leader(cluster_hand_over *h, unsigned group, uint64_t timeout_ms,
                          rn_confirm_cb cb, void *arg);

/* Ends every wait (cb with 0) and drops done; free after the loop closed
 * its handles. */
void cluster_hand_over_stop(cluster_hand_over *h);
void cluster_hand_over_free(cluster_hand_over *h);

#endif
