/*
 * consensus.c — the node: start and stop of every group on libraft, the
 * queries, the leader watch (leader_changed), and the completion queue.
 * See consensus.h for the contract and consensus_int.h for the structure.
 */
#include "consensus/consensus_int.h"

#include <assert.h>
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "consensus/wire.h"
#include "util/buf.h"
#include "util/files.h"
#include "util/log.h"

#define CS_MAX_GROUPS 1024u

const char *consensus_status_name(consensus_status s) {
    switch (s) {
    case CONSENSUS_OK:
        return "ok";
    case CONSENSUS_NOT_LEADER:
        return "not_leader";
    case CONSENSUS_BUSY:
        return "busy";
    case CONSENSUS_NOT_PROPOSED:
        return "not_proposed";
    case CONSENSUS_OUTCOME_UNKNOWN:
        return "outcome_unknown";
    case CONSENSUS_INVALID:
        return "invalid";
    case CONSENSUS_TIMED_OUT:
        return "timed_out";
    }
    return "?";
}

void consensus_params_default(consensus_params *p) {
    assert(p != NULL);
    *p = (consensus_params){
        .election_timeout_ms = 1000,
        .heartbeat_ms = 100,
        .snapshot_threshold = 1024,
        .snapshot_trailing = 128,
        .snapshot_bytes = 64ull << 20,
        .install_snapshot_timeout_ms = 5000,
        .segment_bytes = 1u << 20,
        .snapshot_compression = false,
        .pre_vote = true,
        .tcp_nodelay = true,
        .connect_retry_ms = 250,
        .peer_timeout_ms = 10000,
        .max_inflight_entries = 8192,
        .max_inflight_bytes = 64u << 20,
        .max_read_waiters = 65536,
        .read_confirm = true,
        .catch_up_rounds = 10,
        .catch_up_round_ms = 5000,
    };
}

consensus_status cs_refusal_status(int raft_rv) {
    switch (raft_rv) {
    case RAFT_NOTLEADER:
    case RAFT_LEADERSHIPLOST:
        return CONSENSUS_NOT_LEADER;
    case RAFT_CANTCHANGE:
        return CONSENSUS_BUSY;
    case RAFT_BADID:
    case RAFT_BADROLE:
    case RAFT_DUPLICATEID:
    case RAFT_DUPLICATEADDRESS:
    case RAFT_NOTFOUND:
        return CONSENSUS_INVALID;
    default:
        return CONSENSUS_NOT_PROPOSED;
    }
}

/* --- the completion queue ------------------------------------------------ */

/* Delivers the outcomes queued so far; outcomes their callbacks queue wait
 * for the next turn, so a caller retrying at once cannot starve the loop. */
static void deliver(consensus *c) {
    cs_completion *item = c->queue;
    c->queue = c->queue_tail = NULL;
    while (item) {
        cs_completion *next = item->next;
        item->fire(item);
        item = next;
    }
    if (c->queue == NULL)
        uv_idle_stop(&c->idle);
}

static void on_idle(uv_idle_t *h) {
    deliver(h->data);
}

void cs_enqueue(consensus *c, cs_completion *item) {
    assert(c != NULL && item != NULL && item->fire != NULL);
    item->next = NULL;
    if (c->queue_tail)
        c->queue_tail->next = item;
    else
        c->queue = item;
    c->queue_tail = item;
    if (!uv_is_closing((uv_handle_t *)&c->idle))
        uv_idle_start(&c->idle, on_idle);
    /* else the node is closing its last handles: own_handle_closed
     * delivers what is still queued */
}

static void op_fire(cs_completion *item) {
    cs_op *op = (cs_op *)item;
    consensus_done_cb cb = op->cb;
    void *arg = op->arg;
    consensus_status st = op->status;
    free(op);
    cb(arg, st);
}

cs_op *cs_op_new(consensus_done_cb cb, void *arg) {
    assert(cb != NULL);
    cs_op *op = rn_xcalloc(1, sizeof *op);
    op->done.fire = op_fire;
    op->cb = cb;
    op->arg = arg;
    return op;
}

void cs_op_refuse(consensus *c, consensus_done_cb cb, void *arg, consensus_status status) {
    cs_op *op = cs_op_new(cb, arg);
    op->status = status;
    cs_enqueue(c, &op->done);
}

/* --- queries -------------------------------------------------------------- */

static bool group_running(const cs_group *g) {
    return g->stage == CS_RAFT_READY || g->stage == CS_DRAINING;
}

void consensus_group_info_get(const consensus *c, unsigned group, consensus_group_info *out) {
    assert(c != NULL && out != NULL && group < c->cfg.groups);
    const cs_group *g = &c->groups[group];
    memset(out, 0, sizeof *out);
    out->leader_changes = g->leader_changes;
    out->snapshots = g->snapshots;
    out->last_snapshot_bytes = g->last_snapshot_bytes;
    out->restores = g->restores;
    out->read_rounds = g->read_rounds;
    out->read_barriers = g->read_barriers;
    out->nudges = g->nudges;
    out->command_index = g->applied_seen;
    out->proposals_inflight = g->inflight_entries;
    out->log_writes_held = g->held_count;
    out->log_stall_ms = cs_appends_stall_ms(g);
    if (!group_running(g))
        return;
    struct raft *r = (struct raft *)&g->raft;
    switch (raft_state(r)) {
    case RAFT_FOLLOWER:
        out->state = CONSENSUS_FOLLOWER;
        break;
    case RAFT_CANDIDATE:
        out->state = CONSENSUS_CANDIDATE;
        break;
    case RAFT_LEADER:
        out->state = CONSENSUS_LEADER;
        break;
    default:
        out->state = CONSENSUS_STOPPED;
        break;
    }
    raft_id leader = 0;
    const char *address = NULL;
    raft_leader(r, &leader, &address);
    out->leader_id = leader;
    out->term = r->current_term;
    out->transferring = out->state == CONSENSUS_LEADER && r->transfer != NULL;
    out->leader_ready = out->state == CONSENSUS_LEADER && g->ready_term == r->current_term;
    out->commit_index = r->commit_index;
    out->applied_index = raft_last_applied(r);
    out->last_index = raft_last_index(r);
    out->snapshot_index = r->log.snapshot.last_index;
    for (unsigned i = 0; i < r->configuration.n; i++)
        out->voters += r->configuration.servers[i].role == RAFT_VOTER;
    out->config_committed =
        r->configuration_uncommitted_index == 0 && r->configuration_index <= r->commit_index;
}

uint64_t consensus_group_log_bytes(const consensus *c, unsigned group) {
    assert(c != NULL && group < c->cfg.groups);
    const cs_group *g = &c->groups[group];
    if (!group_running(g))
        return 0;
    const struct raft *r = &g->raft;
    uint64_t bytes = 0;
    const struct raft_entry *e;
    for (uint64_t i = raft_last_index((struct raft *)r); (e = cs_log_entry(r, i)) != NULL; i--)
        bytes += e->buf.len;
    return bytes;
}

bool consensus_is_leader(const consensus *c, unsigned group) {
    assert(c != NULL && group < c->cfg.groups);
    const cs_group *g = &c->groups[group];
    return group_running(g) && g->raft.state == RAFT_LEADER && g->raft.transfer == NULL;
}

bool consensus_leader_ready(const consensus *c, unsigned group) {
    return consensus_is_leader(c, group) &&
           c->groups[group].ready_term == c->groups[group].raft.current_term;
}

unsigned consensus_members(const consensus *c, unsigned group, consensus_member *out,
                           unsigned cap) {
    assert(c != NULL && group < c->cfg.groups && (out != NULL || cap == 0));
    const cs_group *g = &c->groups[group];
    if (!group_running(g))
        return 0;
    const struct raft_configuration *conf = &g->raft.configuration;
    for (unsigned i = 0; i < conf->n && i < cap; i++) {
        const struct raft_server *s = &conf->servers[i];
        out[i].id = s->id;
        out[i].role = s->role == RAFT_VOTER     ? CONSENSUS_VOTER
                      : s->role == RAFT_STANDBY ? CONSENSUS_STANDBY
                                                : CONSENSUS_SPARE;
        snprintf(out[i].address, sizeof out[i].address, "%s", s->address);
        out[i].match_index =
            g->raft.state == RAFT_LEADER ? g->raft.leader_state.progress[i].match_index : 0;
    }
    return conf->n;
}

unsigned consensus_groups(const consensus *c) {
    assert(c != NULL);
    return c->cfg.groups;
}

const char *consensus_error(const consensus *c) {
    assert(c != NULL);
    return c->error;
}

/* --- the leader watch ----------------------------------------------------- */

static void close_group(cs_group *g);

/* Closes the draining groups whose leader appends are done (each once its
 * deadline passed: a stuck disk must not hold the stop). */
static void close_drained(consensus *c) {
    uint64_t now = uv_now(c->cfg.loop);
    for (unsigned i = 0; i < c->cfg.groups; i++) {
        cs_group *g = &c->groups[i];
        if (g->stage != CS_DRAINING || (!cs_appends_drained(g) && now < g->drain_deadline))
            continue;
        if (!cs_appends_drained(g))
            rn_log(RN_LOG_WARN, "cluster_stop_late",
                   "group %u: closing with %llu leader writes in flight", g->index,
                   (unsigned long long)g->leader_appends);
        close_group(g);
    }
}

/* After each loop turn's I/O: delivers queued outcomes, starts a new
 * leader's no-op, and reports changes of leader, term or readiness; while
 * stopping, closes the groups that drained. */
static void on_check(uv_check_t *h) {
    consensus *c = h->data;
    deliver(c);
    close_drained(c);
    if (c->stopping)
        return;
    for (unsigned i = 0; i < c->cfg.groups && !c->stopping; i++) {
        cs_group *g = &c->groups[i];
        if (g->stage != CS_RAFT_READY)
            continue;
        cs_appends_retry(g);
        cs_leader_duties(g);
        raft_id leader = 0;
        const char *address = NULL;
        raft_leader(&g->raft, &leader, &address);
        if (g->deferred && leader) { /* the first election is over: the usual timeout */
            g->deferred = false;
            raft_set_election_timeout(&g->raft, c->cfg.params.election_timeout_ms);
        }
        uint64_t term = g->raft.current_term;
        bool ready = g->raft.state == RAFT_LEADER && g->ready_term == term;
        if (leader == g->seen_leader && term == g->seen_term && ready == g->seen_ready)
            continue;
        if (leader != g->seen_leader || term != g->seen_term)
            g->leader_changes++;
        g->seen_leader = leader;
        g->seen_term = term;
        g->seen_ready = ready;
        if (c->cfg.fsm.leader_changed)
            c->cfg.fsm.leader_changed(c->cfg.fsm.ctx, i, leader, term, ready);
    }
}

/* --- start ---------------------------------------------------------------- */

static int fail(consensus *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(consensus *c, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->error, sizeof c->error, fmt, ap);
    va_end(ap);
    rn_log(RN_LOG_ERROR, "cluster_start_failed", "%s", c->error);
    return -1;
}

static int make_dir(const char *path) {
    if (mkdir(path, 0700) == 0 || errno == EEXIST)
        return 0;
    return -errno;
}

static int bootstrap_group(cs_group *g, const consensus_peer *voters, unsigned n) {
    struct raft_configuration conf;
    raft_configuration_init(&conf);
    int rv = 0;
    for (unsigned i = 0; i < n && rv == 0; i++)
        rv = raft_configuration_add(&conf, voters[i].id, voters[i].address, RAFT_VOTER);
    if (rv == 0) {
        rv = raft_bootstrap(&g->raft, &conf);
        if (rv == RAFT_CANTBOOTSTRAP)
            rv = 0; /* the group has data: it starts from it */
    }
    raft_configuration_close(&conf);
    return rv;
}

int cs_make_group_dir(const char *data_dir, unsigned group, char *out, size_t cap) {
    if (snprintf(out, cap, "%s/raft", data_dir) >= (int)cap)
        return -ENAMETOOLONG;
    int err = make_dir(out);
    if (err == 0 && snprintf(out, cap, "%s/raft/g%02u", data_dir, group) >= (int)cap)
        return -ENAMETOOLONG;
    return err ? err : make_dir(out);
}

/* Forces g's configuration to this node alone (before raft_start). */
static int force_alone(consensus *c, cs_group *g) {
    struct raft_configuration conf;
    raft_configuration_init(&conf);
    int rv = raft_configuration_add(&conf, c->cfg.self_id, c->self_address, RAFT_VOTER);
    if (rv == 0)
        rv = raft_recover(&g->raft, &conf);
    raft_configuration_close(&conf);
    return rv;
}

/* Starts g; voters (n of them, NULL: none) bootstrap it when it has no
 * data; alone: its configuration is forced to this node first. On failure
 * the group is left for the caller to undo (undo_start). */
static int start_group(consensus *c, cs_group *g, const consensus_peer *voters, unsigned n,
                       bool alone, bool defer) {
    const consensus_params *p = &c->cfg.params;
    char dir[4096];
    int err = cs_make_group_dir(c->data_dir, g->index, dir, sizeof dir);
    if (err != 0)
        return fail(c, "%s/raft/g%02u: %s", c->data_dir, g->index, strerror(-err));
    int rv = raft_uv_init(&g->io, c->cfg.loop, dir, rn_mux_transport(c->mux, g->index));
    if (rv != 0)
        return fail(c, "group %u: raft_uv_init: %s", g->index, raft_strerror(rv));
    g->stage = CS_IO_READY;
    raft_uv_set_segment_size(&g->io, p->segment_bytes);
    raft_uv_set_connect_retry_delay(&g->io, p->connect_retry_ms);
    if (raft_uv_set_snapshot_compression(&g->io, p->snapshot_compression) != 0)
        return fail(c, "snapshot compression asked for, and libraft has no lz4");
    cs_fsm_setup(g);
    cs_appends_wrap(g);
    cs_sends_wrap(g);
    rv = raft_init(&g->raft, &g->io, &g->fsm, c->cfg.self_id, c->self_address);
    if (rv != 0)
        return fail(c, "group %u: raft_init: %s", g->index, raft_errmsg(&g->raft));
    g->stage = CS_RAFT_READY;
    g->raft.data = g;
    g->deferred = defer;
    raft_set_election_timeout(&g->raft, p->election_timeout_ms * (defer ? 3 : 1));
    raft_set_heartbeat_timeout(&g->raft, p->heartbeat_ms);
    raft_set_snapshot_threshold(&g->raft, p->snapshot_threshold);
    raft_set_snapshot_trailing(&g->raft, p->snapshot_trailing);
    raft_set_install_snapshot_timeout(&g->raft, p->install_snapshot_timeout_ms);
    raft_set_pre_vote(&g->raft, p->pre_vote);
    raft_set_max_catch_up_rounds(&g->raft, p->catch_up_rounds);
    raft_set_max_catch_up_round_duration(&g->raft, p->catch_up_round_ms);
    if (alone && (rv = force_alone(c, g)) != 0)
        return fail(c, "group %u: forcing its configuration: %s", g->index, raft_strerror(rv));
    if (voters) {
        rv = bootstrap_group(g, voters, n);
        if (rv != 0)
            return fail(c, "group %u: bootstrap: %s", g->index, raft_strerror(rv));
    }
    rv = raft_start(&g->raft);
    if (rv != 0)
        return fail(c, "group %u: raft_start: %s", g->index, raft_errmsg(&g->raft));
    return 0;
}

static void copy_config(consensus *c, const consensus_config *cfg) {
    c->cfg = *cfg;
    c->self_address = rn_xstrdup(cfg->self_address);
    c->data_dir = rn_xstrdup(cfg->data_dir);
    c->cfg.self_address = c->self_address;
    c->cfg.data_dir = c->data_dir;
    c->cfg.cluster_id = NULL; /* only its tag is kept, in the mux */
    if (cfg->cluster_key)
        c->key = *cfg->cluster_key;
    c->cfg.cluster_key = NULL; /* kept in c->key */
    c->peers = rn_xcalloc(cfg->n_peers ? cfg->n_peers : 1, sizeof *c->peers);
    for (unsigned i = 0; i < cfg->n_peers; i++) {
        c->peers[i].id = cfg->peers[i].id;
        c->peers[i].address = rn_xstrdup(cfg->peers[i].address);
    }
    c->cfg.peers = c->peers;
}

static int check_config(consensus *c, const consensus_config *cfg) {
    struct sigaction pipe_action;
    if (sigaction(SIGPIPE, NULL, &pipe_action) != 0 || pipe_action.sa_handler == SIG_DFL)
        return fail(c, "SIGPIPE is not ignored: a peer's reset would kill the process");
    if (cfg->groups == 0 || cfg->groups > CS_MAX_GROUPS)
        return fail(c, "group count %u outside 1..%u", cfg->groups, CS_MAX_GROUPS);
    if (cfg->self_id == 0)
        return fail(c, "node id 0");
    struct sockaddr_storage sa;
    if (rn_wire_parse_address(cfg->self_address, &sa) != 0)
        return fail(c, "address %s is not numeric ip:port", cfg->self_address);
    bool self_listed = false;
    for (unsigned i = 0; i < cfg->n_peers; i++) {
        const consensus_peer *p = &cfg->peers[i];
        if (p->id == 0 || rn_wire_parse_address(p->address, &sa) != 0)
            return fail(c, "peer %u: bad id or address", i);
        for (unsigned j = 0; j < i; j++)
            if (cfg->peers[j].id == p->id || strcmp(cfg->peers[j].address, p->address) == 0)
                return fail(c, "peer %llu listed twice", (unsigned long long)p->id);
        if (p->id == cfg->self_id) {
            if (strcmp(p->address, cfg->self_address) != 0)
                return fail(c, "peer %llu has another address than this node's",
                            (unsigned long long)p->id);
            self_listed = true;
        }
    }
    if (cfg->bootstrap && !self_listed)
        return fail(c, "bootstrap needs this node among the peers");
    return 0;
}

int consensus_start(const consensus_config *cfg, consensus **out) {
    assert(cfg != NULL && out != NULL && cfg->loop != NULL && cfg->data_dir != NULL);
    assert(cfg->self_address != NULL && (cfg->peers != NULL || cfg->n_peers == 0));
    assert(cfg->fsm.apply != NULL && cfg->fsm.snapshot != NULL && cfg->fsm.restore != NULL);
    consensus *c = rn_xcalloc(1, sizeof *c);
    *out = c;
    uv_idle_init(cfg->loop, &c->idle);
    c->idle.data = c;
    uv_check_init(cfg->loop, &c->check);
    c->check.data = c;
    uv_check_start(&c->check, on_check);
    uv_unref((uv_handle_t *)&c->check);
    if (check_config(c, cfg) != 0)
        return -1;
    copy_config(c, cfg);
    c->groups = rn_xcalloc(cfg->groups, sizeof *c->groups);
    for (unsigned i = 0; i < cfg->groups; i++) {
        c->groups[i].node = c;
        c->groups[i].index = i;
    }
    rn_ctl_options co = {
        .loop = cfg->loop,
        .self_id = cfg->self_id,
        .self_address = c->self_address,
        .cluster_tag = rn_wire_cluster_tag(cfg->cluster_id),
        .tcp_nodelay = cfg->params.tcp_nodelay,
        .peer_timeout_ms = cfg->params.peer_timeout_ms,
        .connect_retry_ms = cfg->params.connect_retry_ms,
        .connect_timeout_ms = 2000,
        .key = &c->key,
        .tls = cfg->peer_tls,
        .on_ask = cs_confirm_ask,
        .on_answer = cs_confirm_answer,
        .ctx = c,
    };
    c->ctl = rn_ctl_open(&co);
    rn_mux_options mo = {
        .loop = cfg->loop,
        .listen_address = c->self_address,
        .groups = cfg->groups,
        .cluster_tag = rn_wire_cluster_tag(cfg->cluster_id),
        .tcp_nodelay = cfg->params.tcp_nodelay,
        .peer_timeout_ms = cfg->params.peer_timeout_ms,
        .handshake_timeout_ms = 5000,
        .max_handshakes = 64,
        .control_accept = rn_ctl_accept,
        .control_ctx = c->ctl,
        .key = &c->key,
        .tls = cfg->peer_tls,
        .self_id = cfg->self_id,
    };
    int rv = rn_mux_open(&mo, &c->mux);
    if (rv != 0)
        return fail(c, "listen on %s: %s", c->self_address, uv_strerror(rv));
    for (unsigned i = 0; i < cfg->groups && !cfg->lazy; i++)
        if (start_group(c, &c->groups[i], cfg->bootstrap ? c->peers : NULL, cfg->n_peers, false,
                        false) != 0)
            return -1;
    return 0;
}

/* --- one group at a time -------------------------------------------------- */

bool consensus_group_running(const consensus *c, unsigned group) {
    assert(c != NULL && group < c->cfg.groups);
    return c->groups[group].stage == CS_RAFT_READY;
}

bool consensus_group_has_data(const char *data_dir, unsigned group) {
    char path[4200];
    for (int k = 1; k <= 2; k++) {
        snprintf(path, sizeof path, "%s/raft/g%02u/metadata%d", data_dir, group, k);
        if (access(path, F_OK) == 0)
            return true;
    }
    return false;
}

/* Resets a group that is not running (its libraft structures closed) to
 * what consensus_start left it as. */
static void reset_group(cs_group *g) {
    consensus *c = g->node;
    unsigned index = g->index;
    memset(g, 0, sizeof *g);
    g->node = c;
    g->index = index;
}

/* Undoes a start that failed part way. */
static void undo_start(cs_group *g) {
    if (g->stage == CS_RAFT_READY) { /* raft_start failed: close it as a stop would */
        g->stage = CS_DRAINING;
        g->drain_deadline = 0;
        return; /* the check phase closes it (g->stop_op NULL: nobody is told) */
    }
    if (g->stage == CS_IO_READY)
        raft_uv_close(&g->io);
    g->stage = CS_NONE;
}

static int group_start(consensus *c, unsigned group, const consensus_peer *voters,
                       unsigned n_voters, bool alone, bool defer) {
    assert(c != NULL && group < c->cfg.groups && !c->stopping && !c->in_fsm);
    assert(voters != NULL || n_voters == 0);
    cs_group *g = &c->groups[group];
    if (g->stage != CS_NONE)
        return g->stage == CS_RAFT_READY && !alone ? 0 : fail(c, "group %u is running", group);
    reset_group(g);
    if (start_group(c, g, voters, n_voters, alone, defer) != 0) {
        undo_start(g);
        return -1;
    }
    return 0;
}

int consensus_group_start(consensus *c, unsigned group, const consensus_peer *voters,
                          unsigned n_voters, bool defer) {
    return group_start(c, group, voters, n_voters, false, defer);
}

int consensus_group_start_alone(consensus *c, unsigned group) {
    return group_start(c, group, NULL, 0, true, false);
}

/* Removes the group's directory and what it holds (its files only: libraft
 * makes no subdirectories). */
static void erase_group_dir(consensus *c, unsigned group) {
    char dir[4096];
    if (snprintf(dir, sizeof dir, "%s/raft/g%02u", c->data_dir, group) >= (int)sizeof dir)
        return;
    DIR *d = opendir(dir);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d)) != NULL)
            if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
                unlinkat(dirfd(d), e->d_name, 0);
        closedir(d);
    }
    if (rmdir(dir) != 0 && errno != ENOENT)
        rn_log(RN_LOG_WARN, "cluster_group_erase", "cannot remove %s: %s", dir, strerror(errno));
    snprintf(dir, sizeof dir, "%s/raft", c->data_dir);
    rn_sync_dir(dir);
}

void consensus_group_stop(consensus *c, unsigned group, bool erase, consensus_done_cb cb,
                          void *arg) {
    assert(c != NULL && group < c->cfg.groups && cb != NULL && !c->in_fsm);
    cs_group *g = &c->groups[group];
    if (c->stopping || g->stage != CS_RAFT_READY || g->stop_op) {
        cs_op_refuse(c, cb, arg,
                     c->stopping || g->stop_op ? CONSENSUS_NOT_PROPOSED : CONSENSUS_INVALID);
        return;
    }
    g->stop_op = cs_op_new(cb, arg);
    g->erase = erase;
    g->stage = CS_DRAINING;
    g->drain_deadline = uv_now(c->cfg.loop) + 10000;
    cs_reads_stop(g);
    close_drained(c);
}

/* --- stop ----------------------------------------------------------------- */

/* Frees the node once both of its own handles are closed. */
static void own_handle_closed(uv_handle_t *h) {
    consensus *c = h->data;
    if (++c->handles_closed < 2)
        return;
    while (c->queue) /* what callbacks queued since the groups closed */
        deliver(c);
    /* raft_uv is freed only now, turns after the groups closed: a handle
     * of it may still call back after its close callback (appends.c) */
    for (unsigned i = 0; c->groups && i < c->cfg.groups; i++) {
        cs_group *g = &c->groups[i];
        if (g->stage == CS_IO_READY || g->stage == CS_CLOSED)
            raft_uv_close(&g->io);
        g->stage = CS_NONE;
    }
    void (*done)(void *) = c->stop_done;
    void *arg = c->stop_arg;
    for (unsigned i = 0; i < c->cfg.n_peers && c->peers; i++)
        free((char *)c->peers[i].address);
    free(c->peers);
    free(c->groups);
    free(c->self_address);
    free(c->data_dir);
    rn_secret_wipe(&c->key);
    free(c);
    if (done)
        done(arg);
}

static void ctl_closed(void *arg) {
    consensus *c = arg;
    uv_close((uv_handle_t *)&c->idle, own_handle_closed);
    uv_close((uv_handle_t *)&c->check, own_handle_closed);
}

/* The control channel closes after the mux, which may still hand it a
 * connection until then. */
static void mux_closed(void *arg) {
    consensus *c = arg;
    if (c->ctl) {
        rn_ctl_close(c->ctl, ctl_closed, c);
        c->ctl = NULL;
    } else {
        ctl_closed(c);
    }
}

static void groups_closed(consensus *c) {
    if (c->mux) {
        rn_mux_close(c->mux, mux_closed, c);
        c->mux = NULL;
    } else {
        mux_closed(c);
    }
}

/* A group closed by consensus_group_stop (or a failed start): its io is
 * released, its directory erased when asked, its caller told. */
static void group_stopped(cs_group *g) {
    consensus *c = g->node;
    raft_uv_close(&g->io);
    g->stage = CS_NONE;
    if (g->erase)
        erase_group_dir(c, g->index);
    cs_op *op = g->stop_op;
    g->stop_op = NULL;
    if (op) {
        op->status = CONSENSUS_OK;
        cs_enqueue(c, &op->done);
    }
}

static void group_closed(struct raft *r) {
    cs_group *g = r->data;
    consensus *c = g->node;
    g->stage = CS_CLOSED;
    if (!c->stopping || g->stop_op)
        group_stopped(g); /* a stop of this group alone (the node may be stopping since) */
    if (c->stopping && c->closing_groups > 0 && --c->closing_groups == 0)
        groups_closed(c);
}

static void close_group(cs_group *g) {
    assert(g->stage == CS_DRAINING);
    g->stage = CS_CLOSING;
    raft_close(&g->raft, group_closed);
}

void consensus_stop(consensus *c, void (*done)(void *arg), void *arg) {
    assert(c != NULL && !c->stopping && !c->in_fsm);
    c->stopping = true;
    c->stop_done = done;
    c->stop_arg = arg;
    c->closing_groups = 0;
    uint64_t deadline = uv_now(c->cfg.loop) + 10000;
    for (unsigned i = 0; c->groups && i < c->cfg.groups; i++) {
        cs_group *g = &c->groups[i];
        if (g->stage == CS_DRAINING || g->stage == CS_CLOSING) {
            c->closing_groups++; /* stopping alone already: waited for too */
            continue;
        }
        if (g->stage != CS_RAFT_READY)
            continue;
        g->stage = CS_DRAINING;
        g->drain_deadline = deadline;
        cs_reads_stop(g);
        c->closing_groups++;
    }
    if (c->closing_groups == 0) {
        groups_closed(c);
        return;
    }
    close_drained(c); /* the rest close from the check phase, after their writes */
}
