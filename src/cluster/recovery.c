/*
 * recovery.c — a group that lost its majority, forced back from this
 * node's replica and rewritten. See recovery.h.
 */
#include "cluster/recovery.h"
#include "cluster/cluster_int.h"
#include "util/clock.h"
#include "util/files.h"
#include "util/text.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RECOVERING "cluster-recovering"
#define RECOVERED "cluster-recovered"
#define CHECK_MS 3500 /* peers' reports, polled each second, that must say nothing of the group */
#define TICK_MS 100

typedef enum { R_NONE, R_CHECKING, R_REWRITING, R_DONE } r_state;

typedef struct {
    r_state state;
    unsigned left;   /* rewrites of the round in flight not answered yet (0: no round) */
    int failed;      /* one of the round was refused for a reason a retry may fix */
    int rewritten;   /* a round ended with every stream rewritten */
    uint8_t listed;  /* in cluster-recovering */
    uint8_t already; /* in cluster-recovered */
} r_group;

struct cluster_recovery {
    rn_cluster *cl;
    uv_timer_t tick;
    uint64_t check_until; /* rn_mono_ms */
    r_group *g;           /* all_groups */
};

/* ---- the flag and the files ---- */

/* One name, group-N or meta, into its index; -1 when it is neither. */
static int name_index(const char *s, size_t n, unsigned groups) {
    if (n == 4 && memcmp(s, "meta", 4) == 0)
        return (int)groups;
    uint64_t g;
    if (n > 6 && memcmp(s, "group-", 6) == 0 && rn_parse_strict_u64(s + 6, n - 6, 255, &g) == 0 &&
        g < groups)
        return (int)g;
    return -1;
}

/* Reads a comma- or newline-separated list of names into want. */
static int read_names(const char *text, size_t len, unsigned groups, uint8_t *want) {
    for (size_t i = 0; i < len;) {
        size_t j = i;
        while (j < len && text[j] != ',' && text[j] != '\n')
            j++;
        if (j > i) {
            int g = name_index(text + i, j - i, groups);
            if (g < 0)
                return -1;
            want[g] = 1;
        }
        i = j + 1;
    }
    return 0;
}

int cluster_recovery_parse(const char *value, unsigned groups, uint8_t *want, char *err,
                           size_t errcap) {
    memset(want, 0, groups + 1);
    if (!value[0])
        return 0;
    if (read_names(value, strlen(value), groups, want) != 0) {
        snprintf(err, errcap,
                 "--accept-loss in cluster mode names the groups that lost their majority, to be "
                 "brought back from this node's replica: group-N (N below --groups %u) or meta, "
                 "separated by commas (got \"%s\")",
                 groups, value);
        return -1;
    }
    return 0;
}

static int read_list(const rn_cluster *cl, const char *name, uint8_t *out) {
    memset(out, 0, cl->all_groups);
    rn_buf b = {0};
    int rc = rn_read_file(cl->cfg.data_dir, name, &b);
    if (rc == 0 && read_names((const char *)b.data, b.len, cl->groups, out) != 0)
        rc = -EINVAL;
    rn_buf_free(&b);
    return rc == -ENOENT ? 0 : rc;
}

static int write_list(const rn_cluster *cl, const char *name, const uint8_t *set) {
    rn_buf b = {0};
    for (unsigned g = 0; g < cl->all_groups; g++) {
        if (!set[g])
            continue;
        if (g == cl->groups)
            rn_buf_append_str(&b, "meta\n");
        else
            rn_buf_appendf(&b, "group-%u\n", g);
    }
    int rc =
        rn_atomic_write_file(cl->cfg.data_dir, name, b.data ? b.data : (uint8_t *)"", b.len, 0644);
    rn_buf_free(&b);
    return rc;
}

/* Rewrites both files from the groups' states. */
static int save(cluster_recovery *r) {
    rn_cluster *cl = r->cl;
    uint8_t *recovering = rn_xcalloc(cl->all_groups, 1), *recovered = rn_xcalloc(cl->all_groups, 1);
    for (unsigned g = 0; g < cl->all_groups; g++) {
        recovering[g] = r->g[g].listed;
        recovered[g] = r->g[g].already;
    }
    int rc = write_list(cl, RECOVERING, recovering);
    if (rc == 0)
        rc = write_list(cl, RECOVERED, recovered);
    free(recovering);
    free(recovered);
    if (rc < 0)
        rn_log(RN_LOG_ERROR, "cluster_recovery", "cannot write %s/%s: %s", cl->cfg.data_dir,
               RECOVERING, strerror(-rc));
    return rc;
}

/* ---- the rewrites ---- */

typedef struct rewrite {
    rn_op op;
    cluster_recovery *r;
    unsigned group;
    char *path;
    struct rewrite *next; /* gathered before they are submitted */
} rewrite;

/* One answer of the round; the last one ends it. */
static void round_answer(cluster_recovery *r, unsigned g) {
    r_group *rg = &r->g[g];
    if (--rg->left == 0 && !rg->failed)
        rg->rewritten = 1;
}

static void rewritten(rn_op *op) {
    rewrite *w = op->arg;
    rn_result res = op->out.result;
    if (res != RN_OK_REWRITTEN && res != RN_ERR_NOT_FOUND && res != RN_ERR_GONE) {
        rn_log(RN_LOG_WARN, "cluster_recovery", "group %u: %s not rewritten yet (result %d); again",
               w->group, w->path, (int)res);
        w->r->g[w->group].failed = 1;
    }
    round_answer(w->r, w->group);
    free(w->path);
    free(w);
}

typedef struct {
    cluster_recovery *r;
    unsigned group;
    rewrite *list;
    unsigned n;
} gather;

static void gather_one(rn_stream *s, void *arg) {
    gather *c = arg;
    if (rn_placement_id_group(s->id) != c->group)
        return;
    rewrite *w = rn_xcalloc(1, sizeof *w);
    w->r = c->r;
    w->group = c->group;
    w->path = rn_xstrndup(s->path, s->path_len);
    w->op.in.kind = RN_OP_REWRITE;
    w->op.in.path = w->path;
    w->op.in.path_len = s->path_len;
    w->op.in.ttl_s = w->op.in.expires_at_ms = -1;
    w->op.in.target_offset = s->tail;
    w->op.arg = w;
    w->op.done = rewritten;
    w->next = c->list;
    c->list = w;
    c->n++;
}

/* A round: every stream of the group rewritten at its tail (gathered
 * first: a submit may answer at once and change the state walked). */
static void rewrite_group(cluster_recovery *r, unsigned g) {
    r_group *rg = &r->g[g];
    gather c = {r, g, NULL, 0};
    rn_engine_foreach(r->cl->engine, gather_one, &c);
    rn_log(RN_LOG_INFO, "cluster_recovery", "group %u: rewriting the history of its %u streams", g,
           c.n);
    rg->failed = 0;
    rg->left = c.n + 1; /* held while submitting */
    while (c.list) {
        rewrite *w = c.list;
        c.list = w->next;
        rn_engine_submit(r->cl->engine, &w->op);
    }
    round_answer(r, g);
}

/* ---- the tick ---- */

/* True when an answering peer reports the group alive: a voter of it that
 * knows a leader. */
static int alive_elsewhere(const rn_cluster *cl, unsigned g) {
    uint8_t alive[256];
    cluster_alive(cl, alive);
    for (int i = 0; i < cl->cfg.n_peers; i++) {
        const rn_peer_config *p = &cl->cfg.peers[i];
        const peer_status *ps = p->id != cl->cfg.node_id ? cluster_peer_status(cl, p->id) : NULL;
        if (ps && alive[p->id] && ps->g[g].role == 3 && ps->g[g].leader)
            return 1;
    }
    return 0;
}

static void force(cluster_recovery *r, unsigned g) {
    rn_cluster *cl = r->cl;
    r_group *rg = &r->g[g];
    if (alive_elsewhere(cl, g)) {
        rn_log(RN_LOG_ERROR, "cluster_recovery",
               "%s %u did not lose its majority (a peer reports it led): not forced; remove "
               "--accept-loss",
               g == cl->groups ? "the metadata group" : "group", g);
        rg->state = R_NONE;
        if (consensus_group_start(cl->node, g, NULL, 0, false) != 0)
            rn_log(RN_LOG_ERROR, "cluster_recovery", "group %u: cannot start: %s", g,
                   consensus_error(cl->node));
        return;
    }
    rg->listed = 1;
    if (save(r) != 0 || consensus_group_start_alone(cl->node, g) != 0) {
        rn_log(RN_LOG_ERROR, "cluster_recovery", "group %u: cannot be forced: %s", g,
               consensus_error(cl->node));
        rg->state = R_NONE;
        return;
    }
    rn_log(RN_LOG_WARN, "cluster_recovery",
           "%s %u forced to this node alone (--accept-loss): what only the lost replicas held is "
           "gone",
           g == cl->groups ? "the metadata group" : "group", g);
    rg->state = g == cl->groups ? R_DONE : R_REWRITING;
}

static void on_tick(uv_timer_t *t) {
    cluster_recovery *r = t->data;
    rn_cluster *cl = r->cl;
    if (!cl->node)
        return;
    int busy = 0;
    for (unsigned g = 0; g < cl->all_groups; g++) {
        r_group *rg = &r->g[g];
        if (rg->state == R_CHECKING && rn_mono_ms() >= r->check_until)
            force(r, g);
        if (rg->state == R_REWRITING && rg->rewritten)
            rg->state = R_DONE;
        else if (rg->state == R_REWRITING && !rg->left && consensus_leader_ready(cl->node, g))
            rewrite_group(r, g);
        if (rg->state == R_DONE && rg->listed) {
            rg->listed = 0;
            rg->already = 1;
            if (save(r) == 0)
                rn_log(RN_LOG_INFO, "cluster_recovery", "%s %u recovered",
                       g == cl->groups ? "the metadata group" : "group", g);
        }
        busy |= rg->state == R_CHECKING || rg->state == R_REWRITING || rg->left;
    }
    if (!busy)
        uv_timer_stop(&r->tick);
}

cluster_recovery *cluster_recovery_new(rn_cluster *cl, char *err, size_t errcap) {
    uint8_t *want = rn_xcalloc(cl->all_groups, 1), *listed = rn_xcalloc(cl->all_groups, 1),
            *already = rn_xcalloc(cl->all_groups, 1);
    int rc = cluster_recovery_parse(cl->cfg.accept_loss, cl->groups, want, err, errcap);
    if (rc == 0 && (read_list(cl, RECOVERING, listed) != 0 || read_list(cl, RECOVERED, already))) {
        snprintf(err, errcap, "%s/%s or %s cannot be read; refusing to start", cl->cfg.data_dir,
                 RECOVERING, RECOVERED);
        rc = -1;
    }
    cluster_recovery *r = NULL;
    if (rc == 0) {
        r = rn_xcalloc(1, sizeof *r);
        r->cl = cl;
        r->g = rn_xcalloc(cl->all_groups, sizeof *r->g);
        r->check_until = rn_mono_ms() + CHECK_MS;
        for (unsigned g = 0; g < cl->all_groups; g++) {
            r_group *rg = &r->g[g];
            rg->listed = listed[g];
            rg->already = already[g] && !listed[g];
            if (want[g] && rg->already)
                rn_log(RN_LOG_WARN, "cluster_recovery",
                       "--accept-loss names group %u, recovered before (%s): ignored", g,
                       RECOVERED);
            else if (want[g] && consensus_group_has_data(cl->cfg.data_dir, g))
                rg->state = R_CHECKING;
            else if (want[g])
                rn_log(RN_LOG_WARN, "cluster_recovery",
                       "--accept-loss names group %u, of which this node holds no replica: ignored",
                       g);
            else if (listed[g])
                rg->state = g == cl->groups ? R_DONE : R_REWRITING; /* a crash left it */
        }
        uv_timer_init(cl->loop, &r->tick);
        r->tick.data = r;
        uv_timer_start(&r->tick, on_tick, TICK_MS, TICK_MS);
        uv_unref((uv_handle_t *)&r->tick);
    }
    free(want);
    free(listed);
    free(already);
    return r;
}

int cluster_recovery_holds_start(const cluster_recovery *r, unsigned g) {
    return r && r->g[g].state == R_CHECKING;
}

int cluster_recovery_pending(const cluster_recovery *r, unsigned g) {
    return r && (r->g[g].state == R_CHECKING || r->g[g].state == R_REWRITING);
}

void cluster_recovery_stop(cluster_recovery *r) {
    if (!r)
        return;
    uv_timer_stop(&r->tick);
    uv_close((uv_handle_t *)&r->tick, NULL);
}

void cluster_recovery_free(cluster_recovery *r) {
    if (!r)
        return;
    free(r->g);
    free(r);
}
