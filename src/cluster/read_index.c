/*
 * read_index.c — asking a group's ReadIndex. See read_index.h.
 *
 * Also the leader's side: GET /__runnel/cluster/read-index?group=G answers
 * "read-index N\n" once this node confirmed it leads the group (N: its
 * applied index then), 503 NO_LEADER when it could not.
 *
 * A local ask is a consensus_read_barrier, which cannot be withdrawn: a
 * cancelled ask stays allocated until the barrier reports, and then drops
 * its answer. A remote ask is an outbound fetch, cancelled for real.
 */
#include "cluster/read_index.h"
#include "cluster/cluster_config.h"
#include "cluster/cluster_int.h"
#include "protocol/reply.h"
#include "util/fault.h"
#include "util/text.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ANSWER_PREFIX "read-index " /* the leader's answer: "read-index N\n" */

struct cluster_ask {
    cluster_ask_fn fn;
    void *arg;
    rn_fetch *fetch; /* a remote ask in flight */
    int cancelled;
};

static void local_confirmed(void *arg, consensus_status st, uint64_t applied) {
    cluster_ask *a = arg;
    if (!a->cancelled)
        a->fn(a->arg, st == CONSENSUS_OK, applied);
    free(a);
}

static void leader_answered(void *arg, const rn_fetch_result *r) {
    cluster_ask *a = arg;
    static const char prefix[] = ANSWER_PREFIX;
    size_t pl = sizeof prefix - 1;
    uint64_t index = 0;
    int ok = r->failure == RN_FETCH_ANSWERED && r->status == 200 && r->body_len > pl &&
             memcmp(r->body, prefix, pl) == 0;
    if (ok) {
        const char *num = (const char *)r->body + pl;
        size_t len = 0;
        while (pl + len < r->body_len && num[len] >= '0' && num[len] <= '9')
            len++;
        ok = rn_parse_strict_u64(num, len, UINT64_MAX, &index) == 0;
    }
    a->fn(a->arg, ok, index);
    free(a);
}

cluster_ask *cluster_ask_read_index(rn_cluster *cl, unsigned group, uint64_t timeout_ms,
                                    cluster_ask_fn fn, void *arg) {
    consensus_group_info info;
    consensus_group_info_get(cl->node, group, &info);
    cluster_ask *a = rn_xcalloc(1, sizeof *a);
    a->fn = fn;
    a->arg = arg;
    if (info.leader_id == cl->cfg.node_id) {
        if (!info.leader_ready) {
            free(a);
            return NULL;
        }
        consensus_read_barrier(cl->node, group, local_confirmed, a);
        return a;
    }
    const rn_peer_config *leader =
        info.leader_id ? rn_cluster_peer(&cl->cfg, info.leader_id) : NULL;
    if (!leader) {
        free(a);
        return NULL;
    }
    char url[600];
    snprintf(url, sizeof url, "%s/__runnel/cluster/read-index?group=%u",
             rn_cluster_peer_url(leader), group);
    rn_fetch_request req = {.method = "GET",
                            .url = url,
                            .body_fd = -1,
                            .sink_fd = -1,
                            .sink_cap = 256,
                            .timeout_ms = timeout_ms};
    a->fetch = rn_outbound_start(cl->http, &req, leader_answered, a);
    if (!a->fetch) {
        free(a);
        return NULL;
    }
    return a;
}

void cluster_ask_cancel(cluster_ask *a) {
    if (a->fetch) {
        rn_fetch_cancel(a->fetch);
        free(a);
        return;
    }
    a->cancelled = 1; /* a local barrier: freed when it reports */
}

/* ---- the leader's side ---- */

typedef struct {
    rn_request *req;
    rn_cluster *cl;
    unsigned group;
} read_index_answer;

static void confirmed_for_peer(void *arg, consensus_status st, uint64_t applied) {
    read_index_answer *a = arg;
    (void)applied;
    if (st == CONSENSUS_OK && a->cl->node) {
        /* the last state-changing entry: a follower need not wait for the
         * barriers after it (the commit nudge's would take a heartbeat) */
        consensus_group_info info;
        consensus_group_info_get(a->cl->node, a->group, &info);
        rn_buf h = {0}, body = {0};
        rn_reply_common(&h);
        rn_buf_append_str(&h, "Content-Type: text/plain\r\nCache-Control: no-store\r\n");
        rn_buf_appendf(&body, ANSWER_PREFIX "%llu\n", (unsigned long long)info.command_index);
        rn_http_respond(a->req, 200, &h, &body);
    } else {
        rn_reply_error(a->req, RN_E_NO_LEADER, NULL);
    }
    rn_request_release(a->req);
    free(a);
}

void cluster_read_index_for_peer(rn_cluster *cl, rn_request *req, uint64_t group) {
    if (group >= cl->all_groups) {
        rn_reply_error(req, RN_E_INVALID_REQUEST, NULL);
        return;
    }
    if (!cl->node || rn_fault_fail("read-index")) {
        rn_reply_error(req, RN_E_NO_LEADER, NULL);
        return;
    }
    read_index_answer *a = rn_xmalloc(sizeof *a);
    *a = (read_index_answer){.req = req, .cl = cl, .group = (unsigned)group};
    rn_request_hold(req);
    consensus_read_barrier(cl->node, (unsigned)group, confirmed_for_peer, a);
}
