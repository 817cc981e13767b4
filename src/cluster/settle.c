/*
 * settle.c — waiting until this node's applied state holds every write the
 * cluster acknowledged before a call (rn_cluster_settle, cluster.h), and
 * the leader's side of it (GET /__runnel/cluster/read-index?group=G).
 *
 * Per group, ReadIndex from any replica: the group's leader confirms its
 * leadership after the call (consensus_read_barrier, reads.c: a majority
 * confirmed its term, and it applied everything committed before) and
 * reports its applied index N; once this node applied N of the group, its
 * state of the group holds every write acknowledged before the call. A
 * group this node leads asks itself; the others ask their leader over
 * HTTP. A group whose leader is unknown, or whose ask failed, is asked
 * again at the next tick until the deadline. Last, no stream of this node
 * may wait for bytes from peers (a gap's bytes are not in its files yet).
 *
 * A job lives until its done ran and every local barrier it started
 * reported (libraft delivers them, also when the node stops).
 */
#include "cluster/cluster_int.h"
#include "cluster/cluster_config.h"
#include "protocol/reply.h"
#include "util/clock.h"
#include "util/text.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TICK_MS 20
#define ASK_TIMEOUT_MS 2000
#define ANSWER_PREFIX "read-index "

typedef enum { G_ASK, G_ASKING, G_WAIT, G_DONE } group_phase;

typedef struct settle_job settle_job;

typedef struct {
    settle_job *job;
    unsigned group;
    group_phase phase;
    uint64_t target; /* G_WAIT: the leader's applied index to reach */
    rn_fetch *ask;   /* an ask to the leader in flight */
} settle_group;

struct settle_job {
    rn_list_node node; /* on cl->settles until done ran */
    rn_cluster *cl;
    uint64_t deadline_ms;
    void (*done)(void *arg, int status);
    void *arg;
    uv_timer_t tick;
    unsigned holds; /* the timer, local barriers in flight */
    int finished;
    settle_group *groups;
};

static void release(settle_job *j) {
    assert(j->holds > 0);
    if (--j->holds == 0) {
        free(j->groups);
        free(j);
    }
}

static void tick_closed(uv_handle_t *h) {
    release(h->data);
}

static void finish(settle_job *j, int status) {
    assert(!j->finished);
    j->finished = 1;
    rn_list_remove(&j->cl->settles, &j->node);
    for (unsigned g = 0; g < j->cl->groups; g++)
        if (j->groups[g].ask) {
            rn_fetch_cancel(j->groups[g].ask);
            j->groups[g].ask = NULL;
        }
    uv_close((uv_handle_t *)&j->tick, tick_closed);
    j->done(j->arg, status);
}

static void local_confirmed(void *arg, consensus_status st, uint64_t applied) {
    settle_group *sg = arg;
    settle_job *j = sg->job;
    if (!j->finished) {
        sg->phase = st == CONSENSUS_OK ? G_WAIT : G_ASK;
        sg->target = applied;
    }
    release(j);
}

static void leader_answered(void *arg, const rn_fetch_result *r) {
    settle_group *sg = arg;
    sg->ask = NULL;
    sg->phase = G_ASK;
    static const char prefix[] = ANSWER_PREFIX;
    size_t pl = sizeof prefix - 1;
    if (r->failure != RN_FETCH_ANSWERED || r->status != 200 || r->body_len <= pl ||
        memcmp(r->body, prefix, pl) != 0)
        return;
    const char *num = (const char *)r->body + pl;
    size_t len = 0;
    while (pl + len < r->body_len && num[len] >= '0' && num[len] <= '9')
        len++;
    if (rn_parse_strict_u64(num, len, UINT64_MAX, &sg->target) == 0)
        sg->phase = G_WAIT;
}

/* Starts the group's ask: of this node when it leads the group, ready;
 * else of the leader it knows. Nothing known: the next tick tries again. */
static void ask(settle_group *sg, const consensus_group_info *info) {
    settle_job *j = sg->job;
    rn_cluster *cl = j->cl;
    if (info->leader_id == cl->cfg.node_id) {
        if (!info->leader_ready)
            return;
        sg->phase = G_ASKING;
        j->holds++;
        consensus_read_barrier(cl->node, sg->group, local_confirmed, sg);
        return;
    }
    const rn_peer_config *leader = rn_cluster_peer(&cl->cfg, info->leader_id);
    if (!leader)
        return;
    char url[600];
    snprintf(url, sizeof url, "%s/__runnel/cluster/read-index?group=%u", leader->url, sg->group);
    uint64_t now = rn_mono_ms(), left = j->deadline_ms > now ? j->deadline_ms - now : 1;
    rn_fetch_request req = {.method = "GET",
                            .url = url,
                            .body_fd = -1,
                            .sink_fd = -1,
                            .sink_cap = 256,
                            .timeout_ms = left < ASK_TIMEOUT_MS ? left : ASK_TIMEOUT_MS};
    sg->ask = rn_outbound_start(cl->http, &req, leader_answered, sg);
    if (sg->ask)
        sg->phase = G_ASKING;
}

static void on_tick(uv_timer_t *t) {
    settle_job *j = t->data;
    rn_cluster *cl = j->cl;
    unsigned left = 0;
    for (unsigned g = 0; g < cl->groups; g++) {
        settle_group *sg = &j->groups[g];
        consensus_group_info info;
        cluster_group_info(cl, g, &info);
        if (sg->phase == G_ASK)
            ask(sg, &info);
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
    for (unsigned g = 0; g < cl->groups; g++)
        j->groups[g] = (settle_group){.job = j, .group = g, .phase = G_ASK};
    rn_list_push_back(&cl->settles, &j->node);
    uv_timer_init(cl->loop, &j->tick);
    j->tick.data = j;
    j->holds = 1;
    uv_timer_start(&j->tick, on_tick, 0, TICK_MS);
}

void cluster_settles_cancel(rn_cluster *cl) {
    while (!rn_list_empty(&cl->settles))
        finish(rn_list_entry(cl->settles.first, settle_job, node), -ECANCELED);
}

/* ---- the leader's side ---- */

typedef struct {
    rn_request *req;
} read_index_answer;

static void confirmed_for_peer(void *arg, consensus_status st, uint64_t applied) {
    read_index_answer *a = arg;
    if (st == CONSENSUS_OK) {
        rn_buf h = {0}, body = {0};
        rn_reply_common(&h);
        rn_buf_append_str(&h, "Content-Type: text/plain\r\nCache-Control: no-store\r\n");
        rn_buf_appendf(&body, ANSWER_PREFIX "%llu\n", (unsigned long long)applied);
        rn_http_respond(a->req, 200, &h, &body);
    } else {
        rn_reply_error(a->req, RN_E_NO_LEADER, NULL);
    }
    rn_request_release(a->req);
    free(a);
}

void cluster_read_index_for_peer(rn_cluster *cl, rn_request *req, uint64_t group) {
    if (group >= cl->groups) {
        rn_reply_error(req, RN_E_INVALID_REQUEST, NULL);
        return;
    }
    if (!cl->node) {
        rn_reply_error(req, RN_E_NO_LEADER, NULL);
        return;
    }
    read_index_answer *a = rn_xmalloc(sizeof *a);
    a->req = req;
    rn_request_hold(req);
    consensus_read_barrier(cl->node, (unsigned)group, confirmed_for_peer, a);
}
