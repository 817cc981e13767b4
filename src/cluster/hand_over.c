/*
 * hand_over.c — handing leaderships over before a stop, and writes waiting
 * for the new leader. See hand_over.h.
 *
 * One timer, running while a hand-over is pending or a write waits, checks
 * each waiting write's group and the hand-over's end every TICK_MS; the
 * transfers' callbacks only count, so that nothing runs inside the
 * consensus layer's callbacks.
 */
#include "cluster/hand_over.h"
#include "cluster/cluster_int.h"
#include "util/clock.h"
#include "util/list.h"

#include <assert.h>
#include <inttypes.h>
#include <stdlib.h>

#define TICK_MS 5

typedef struct waiter {
    rn_confirm_cb cb;
    void *arg;
    unsigned group;
    uint64_t deadline_ms;
    int moved;         /* the outcome, once known */
    rn_list_node link; /* on cluster_hand_over.waiters, then on a list of ready ones */
} waiter;

struct cluster_hand_over {
    rn_cluster *cl;
    uv_timer_t tick;
    int ticking, stopped;
    rn_list waiters; /* waiter.link */
    /* the hand-over: transfers not reported yet, its deadline, its end */
    unsigned pending;
    uint64_t deadline_ms;
    void (*done)(void *arg);
    void *done_arg;
};

typedef struct {
    cluster_hand_over *h;
    unsigned group;
} transfer;

/* True while this node leads the group but serves nothing of it (it
 * transfers the leadership, or is not ready). */
static int held_here(rn_cluster *cl, unsigned group) {
    if (!cl->node)
        return 0;
    consensus_group_info info;
    consensus_group_info_get(cl->node, group, &info);
    return info.leader_id == cl->cfg.node_id && (info.transferring || !info.leader_ready);
}

static void finish_done(cluster_hand_over *h) {
    void (*done)(void *) = h->done;
    h->done = NULL;
    if (done)
        done(h->done_arg);
}

static void on_tick(uv_timer_t *t) {
    cluster_hand_over *h = t->data;
    uint64_t now = rn_mono_ms();
    rn_list ready = {0};
    for (rn_list_node *n = h->waiters.first, *next; n; n = next) {
        next = n->next;
        waiter *w = rn_list_entry(n, waiter, link);
        w->moved = !held_here(h->cl, w->group);
        if (w->moved || now >= w->deadline_ms) {
            rn_list_remove(&h->waiters, n);
            rn_list_push_back(&ready, n);
        }
    }
    while (!rn_list_empty(&ready)) { /* a callback may add waiters: they wait for the next tick */
        waiter *w = rn_list_entry(ready.first, waiter, link);
        rn_list_remove(&ready, &w->link);
        w->cb(w->arg, w->moved);
        free(w);
    }
    if (h->done && (!h->pending || now >= h->deadline_ms))
        finish_done(h);
    if (rn_list_empty(&h->waiters) && !h->done) {
        uv_timer_stop(&h->tick);
        h->ticking = 0;
    }
}

static void tick_on(cluster_hand_over *h) {
    if (!h->ticking) {
        uv_timer_start(&h->tick, on_tick, TICK_MS, TICK_MS);
        h->ticking = 1;
    }
}

cluster_hand_over *cluster_hand_over_new(rn_cluster *cl) {
    cluster_hand_over *h = rn_xcalloc(1, sizeof *h);
    h->cl = cl;
    uv_timer_init(cl->loop, &h->tick);
    h->tick.data = h;
    return h;
}

static void transferred(void *arg, consensus_status st) {
    transfer *t = arg;
    cluster_hand_over *h = t->h;
    if (st == CONSENSUS_OK)
        rn_log(RN_LOG_INFO, "cluster_hand_over", "group %u: leadership handed over", t->group);
    else
        rn_log(RN_LOG_WARN, "cluster_hand_over", "group %u: leadership not handed over (%s)",
               t->group, consensus_status_name(st));
    assert(h->pending > 0);
    h->pending--;
    free(t);
}

unsigned cluster_hand_over_start(cluster_hand_over *h, uint64_t timeout_ms, void (*done)(void *arg),
                                 void *arg) {
    assert(!h->done && done);
    rn_cluster *cl = h->cl;
    h->done = done;
    h->done_arg = arg;
    h->deadline_ms = rn_mono_ms() + timeout_ms;
    unsigned asked = 0;
    for (unsigned g = 0; cl->node && !h->stopped && g < cl->all_groups; g++) {
        if (!consensus_is_leader(cl->node, g))
            continue;
        transfer *t = rn_xmalloc(sizeof *t);
        *t = (transfer){h, g};
        h->pending++;
        asked++;
        consensus_transfer(cl->node, g, 0, transferred, t);
    }
    rn_log(RN_LOG_INFO, "cluster_hand_over", "handing over the leadership of %u groups", asked);
    tick_on(h);
    return asked;
}

void cluster_await_leader(cluster_hand_over *h, unsigned group, uint64_t timeout_ms,
                          rn_confirm_cb cb, void *arg) {
    assert(group < h->cl->all_groups && cb);
    waiter *w = rn_xmalloc(sizeof *w);
    *w = (waiter){.cb = cb, .arg = arg, .group = group, .deadline_ms = rn_mono_ms() + timeout_ms};
    rn_list_push_back(&h->waiters, &w->link);
    tick_on(h);
}

void cluster_hand_over_stop(cluster_hand_over *h) {
    h->stopped = 1;
    h->done = NULL;
    while (!rn_list_empty(&h->waiters)) {
        waiter *w = rn_list_entry(h->waiters.first, waiter, link);
        rn_list_remove(&h->waiters, &w->link);
        w->cb(w->arg, 0);
        free(w);
    }
    uv_timer_stop(&h->tick);
    uv_close((uv_handle_t *)&h->tick, NULL);
}

void cluster_hand_over_free(cluster_hand_over *h) {
    free(h);
}
