/*
 * settle.c — waiting until this node's applied state holds every write the
 * cluster acknowledged before a call (rn_cluster_settle, cluster.h), and
 * the leader's side of it (GET /__runnel/cluster/read-index?group=G).
 *
 * Per group, the group's ReadIndex (read_index.h): once this node applied
 * the index its leader confirmed after the call, its state of the group
 * holds every write acknowledged before the call. A group whose leader is
 * unknown, or whose ask failed, is asked again at the next tick until the
 * deadline. Last, no stream of this node may wait for bytes from peers (a
 * gap's bytes are not in its files yet).
 */
#include "cluster/cluster_int.h"
#include "cluster/cluster_config.h"
#include "cluster/read_index.h"
#include "util/clock.h"
#include "util/text.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TICK_MS 20
#define ASK_TIMEOUT_MS 2000

typedef enum { G_ASK, G_ASKING, G_WAIT, G_DONE } group_phase;

typedef struct settle_job settle_job;

typedef struct {
    settle_job *job;
    unsigned group;
    group_phase phase;
    uint64_t target;  /* G_WAIT: the leader's applied index to reach */
    cluster_ask *ask; /* in flight */
} settle_group;

struct settle_job {
    rn_list_node node; /* on cl->settles until done ran */
    rn_cluster *cl;
    uint64_t deadline_ms;
    void (*done)(void *arg, int status);
    void *arg;
    uv_timer_t tick;
    int finished;
    settle_group *groups;
};

static void tick_closed(uv_handle_t *h) {
    settle_job *j = h->data;
    free(j->groups);
    free(j);
}

static void finish(settle_job *j, int status) {
    assert(!j->finished);
    j->finished = 1;
    rn_list_remove(&j->cl->settles, &j->node);
    for (unsigned g = 0; g < j->cl->groups; g++)
        if (j->groups[g].ask) {
            cluster_ask_cancel(j->groups[g].ask);
            j->groups[g].ask = NULL;
        }
    uv_close((uv_handle_t *)&j->tick, tick_closed);
    j->done(j->arg, status);
}

static void answered(void *arg, int ok, uint64_t index) {
    settle_group *sg = arg;
    sg->ask = NULL;
    sg->phase = ok ? G_WAIT : G_ASK;
    sg->target = index;
}

static void on_tick(uv_timer_t *t) {
    settle_job *j = t->data;
    rn_cluster *cl = j->cl;
    if (!j->deadline_ms) {
        finish(j, -EXDEV);
        return;
    }
    unsigned left = 0;
    for (unsigned g = 0; g < cl->groups; g++) {
        settle_group *sg = &j->groups[g];
        consensus_group_info info;
        cluster_group_info(cl, g, &info);
        if (sg->phase == G_ASK) {
            uint64_t now = rn_mono_ms(), ms = j->deadline_ms > now ? j->deadline_ms - now : 1;
            sg->ask = cluster_ask_read_index(cl, g, ms < ASK_TIMEOUT_MS ? ms : ASK_TIMEOUT_MS,
                                             answered, sg);
            if (sg->ask)
                sg->phase = G_ASKING;
        }
        if (sg->phase == G_WAIT && info.applied_index >= sg->target)
            sg->phase = G_DONE;
        left += sg->phase != G_DONE;
    }
    if (!left && rn_fetcher_pending(cl->fetcher) == 0)
        finish(j, 0);
    else if (rn_mono_ms() >= j->deadline_ms)
        finish(j, -ETIMEDOUT);
}

void rn_cluster_settle(rn_cluster *cl, uint64_t timeout_ms, void (*done)(void *arg, int status),
                       void *arg) {
    assert(cl->node && done);
    settle_job *j = rn_xcalloc(1, sizeof *j);
    j->cl = cl;
    j->deadline_ms = rn_mono_ms() + timeout_ms;
    j->done = done;
    j->arg = arg;
    j->groups = rn_xcalloc(cl->groups, sizeof *j->groups);
    int whole = 1;
    for (unsigned g = 0; g < cl->groups; g++) {
        j->groups[g] = (settle_group){.job = j, .group = g, .phase = G_ASK};
        whole &= consensus_group_running(cl->node, g);
    }
    if (!whole) /* an instant of this node would miss the groups it does not host */
        j->deadline_ms = 0;
    rn_list_push_back(&cl->settles, &j->node);
    uv_timer_init(cl->loop, &j->tick);
    j->tick.data = j;
    uv_timer_start(&j->tick, on_tick, 0, TICK_MS);
}

void cluster_settles_cancel(rn_cluster *cl) {
    while (!rn_list_empty(&cl->settles))
        finish(rn_list_entry(cl->settles.first, settle_job, node), -ECANCELED);
}
