/*
 * follower_reads.c — reads that wait for the group's ReadIndex. See
 * follower_reads.h.
 *
 * Per group three lists of readers: waiting for the next ask, covered by
 * the ask in flight, and applying (their target index known). An ask
 * starts when readers wait and none is in flight; its answer moves its
 * readers to applying and starts the next ask for those that arrived
 * meanwhile. A uv_check handle, running only while some reader applies,
 * finishes the readers whose target this replica applied (entries apply on
 * the loop, so after any loop turn). An ask the leader refused or did not
 * answer (a leadership hand-back, a leader whose first entry of its term
 * is not committed yet) is asked again RETRY_MS later, for the readers
 * that have waited less than RETRY_WINDOW_MS: a transient refusal costs a
 * reader a few milliseconds rather than a redirect. A read always ends in
 * its callback: with 0 when no leader is known, when its asks failed for
 * the whole window, or when the node stops, which routing answers as it
 * answers a follower's leader read (307 to the leader, or 503).
 */
#include "cluster/follower_reads.h"
#include "cluster/cluster_int.h"
#include "cluster/read_index.h"

#include "util/clock.h"

#include <assert.h>
#include <stdlib.h>

#define ASK_TIMEOUT_MS 2000
#define RETRY_MS 50
#define RETRY_WINDOW_MS 1000

typedef struct fr_reader {
    rn_confirm_cb cb;
    void *arg;
    uint64_t target;
    uint64_t give_up_ms; /* a failed ask past this time fails the read */
    struct fr_reader *next;
} fr_reader;

typedef struct {
    cluster_follower_reads *fr;
    unsigned group;
    fr_reader *waiting, *asking, *applying;
    cluster_ask *ask;
    int retry_due; /* waiting readers ask again when the retry timer fires */
} fr_group;

struct cluster_follower_reads {
    rn_cluster *cl;
    fr_group *groups;
    uv_check_t check;
    uv_timer_t retry;
    int checking, retrying, stopped;
};

static void prepend_all(fr_reader **to, fr_reader *list) {
    while (list) {
        fr_reader *next = list->next;
        list->next = *to;
        *to = list;
        list = next;
    }
}

static void finish_list(fr_reader *list, int ok) {
    while (list) {
        fr_reader *next = list->next;
        list->cb(list->arg, ok);
        free(list);
        list = next;
    }
}

static void on_check(uv_check_t *h);

static void check_on(cluster_follower_reads *fr) {
    if (!fr->checking) {
        uv_check_start(&fr->check, on_check);
        fr->checking = 1;
    }
}

static void start_ask(fr_group *g);

static void on_retry(uv_timer_t *t) {
    cluster_follower_reads *fr = t->data;
    fr->retrying = 0;
    for (unsigned gi = 0; gi < fr->cl->all_groups; gi++) {
        fr_group *g = &fr->groups[gi];
        if (!g->retry_due)
            continue;
        g->retry_due = 0;
        if (g->waiting && !g->ask)
            start_ask(g);
    }
}

/* The readers of a failed ask: those still inside their window wait for
 * the retry timer, the others fail. */
static void ask_failed(fr_group *g, fr_reader *list) {
    uint64_t now = rn_mono_ms();
    fr_reader *expired = NULL;
    while (list) {
        fr_reader *next = list->next;
        fr_reader **to = now < list->give_up_ms ? &g->waiting : &expired;
        list->next = *to;
        *to = list;
        list = next;
    }
    if (g->waiting) {
        g->retry_due = 1;
        cluster_follower_reads *fr = g->fr;
        if (!fr->retrying) {
            uv_timer_start(&fr->retry, on_retry, RETRY_MS, 0);
            fr->retrying = 1;
        }
    }
    finish_list(expired, 0);
}

static void answered(void *arg, int ok, uint64_t index) {
    fr_group *g = arg;
    g->ask = NULL;
    fr_reader *done = g->asking;
    g->asking = NULL;
    if (!ok) {
        ask_failed(g, done);
        return;
    }
    for (fr_reader *r = done; r; r = r->next)
        r->target = index;
    prepend_all(&g->applying, done);
    check_on(g->fr);
    if (g->waiting)
        start_ask(g);
}

static void start_ask(fr_group *g) {
    assert(!g->ask && !g->asking && !g->retry_due);
    g->asking = g->waiting;
    g->waiting = NULL;
    g->ask = cluster_ask_read_index(g->fr->cl, g->group, ASK_TIMEOUT_MS, answered, g);
    if (!g->ask) { /* no leader known (or this node leads it, not ready yet) */
        fr_reader *failed = g->asking;
        g->asking = NULL;
        ask_failed(g, failed);
    }
}

static void on_check(uv_check_t *h) {
    cluster_follower_reads *fr = h->data;
    int left = 0;
    for (unsigned gi = 0; gi < fr->cl->all_groups; gi++) {
        fr_group *g = &fr->groups[gi];
        if (!g->applying)
            continue;
        consensus_group_info info;
        cluster_group_info(fr->cl, gi, &info);
        fr_reader **p = &g->applying, *ready = NULL;
        while (*p) {
            fr_reader *r = *p;
            if (info.applied_index >= r->target) {
                *p = r->next;
                r->next = ready;
                ready = r;
            } else {
                p = &r->next;
            }
        }
        finish_list(ready, 1);
        left += g->applying != NULL;
    }
    if (!left) {
        uv_check_stop(&fr->check);
        fr->checking = 0;
    }
}

cluster_follower_reads *cluster_follower_reads_new(rn_cluster *cl) {
    cluster_follower_reads *fr = rn_xcalloc(1, sizeof *fr);
    fr->cl = cl;
    fr->groups = rn_xcalloc(cl->all_groups, sizeof *fr->groups);
    for (unsigned g = 0; g < cl->all_groups; g++)
        fr->groups[g] = (fr_group){.fr = fr, .group = g};
    uv_check_init(cl->loop, &fr->check);
    fr->check.data = fr;
    uv_timer_init(cl->loop, &fr->retry);
    fr->retry.data = fr;
    return fr;
}

void cluster_follower_read(cluster_follower_reads *fr, unsigned group, rn_confirm_cb cb,
                           void *arg) {
    assert(group < fr->cl->all_groups);
    if (fr->stopped) {
        cb(arg, 0);
        return;
    }
    fr_group *g = &fr->groups[group];
    fr_reader *r = rn_xcalloc(1, sizeof *r);
    *r = (fr_reader){
        .cb = cb, .arg = arg, .give_up_ms = rn_mono_ms() + RETRY_WINDOW_MS, .next = g->waiting};
    g->waiting = r;
    if (!g->ask && !g->asking && !g->retry_due)
        start_ask(g);
}

void cluster_follower_reads_stop(cluster_follower_reads *fr) {
    fr->stopped = 1;
    for (unsigned gi = 0; gi < fr->cl->all_groups; gi++) {
        fr_group *g = &fr->groups[gi];
        if (g->ask)
            cluster_ask_cancel(g->ask);
        g->ask = NULL;
        g->retry_due = 0;
        fr_reader *lists[3] = {g->waiting, g->asking, g->applying};
        g->waiting = g->asking = g->applying = NULL;
        for (int k = 0; k < 3; k++)
            finish_list(lists[k], 0);
    }
    uv_check_stop(&fr->check);
    uv_close((uv_handle_t *)&fr->check, NULL);
    uv_close((uv_handle_t *)&fr->retry, NULL);
}

void cluster_follower_reads_free(cluster_follower_reads *fr) {
    if (!fr)
        return;
    free(fr->groups);
    free(fr);
}
