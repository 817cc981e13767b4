/*
 * health.c — a cluster node's disk and log health: the free-space check,
 * the reserve file, admission, the watchdog that hands a group's
 * leadership over, readiness and metrics. See health.h.
 */
#include "cluster/health.h"
#include "cluster/cluster_config.h"
#include "cluster/cluster_int.h"
#include "cluster/identity.h"
#include "protocol/errors.h"
#include "util/files.h"
#include "util/log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define HEALTH_MS 250
#define PEER_FRESH_MS 3000      /* a peer's health report older than this is not trusted */
#define TRANSFER_RETRY_MS 1000  /* after a hand-over that did not happen */
#define NO_TARGET_LOG_MS 10000  /* "no healthy voter" is logged at most this often per group */
#define RESERVE_RETRY_MS 10000  /* after the reserve file could not be made */
#define FLOOR_MAX (16ull << 20) /* the floor is a quarter of the reserve, at most this */
#define RESERVE_NAME "reserve"

enum { WHY_NONE, WHY_DISK, WHY_APPLY, WHY_STALL, WHY_COUNT };
static const char *const why_label[WHY_COUNT] = {"", "disk_full", "apply_stopped", "log_stalled"};

uint64_t rn_health_floor(const rn_config *cfg) {
    uint64_t quarter = cfg->disk_reserve_bytes / 4;
    return quarter < FLOOR_MAX ? quarter : FLOOR_MAX;
}

static void reserve_path(const rn_config *cfg, char *out, size_t cap) {
    snprintf(out, cap, "%s/%s", cfg->data_dir, RESERVE_NAME);
}

void rn_health_release_reserve(const rn_config *cfg) {
    char path[4200];
    reserve_path(cfg, path, sizeof path);
    if (unlink(path) == 0)
        rn_log(RN_LOG_INFO, "disk", "released %s for the start", path);
}

/* Makes the reserve file once the disk has the reserve and the file's
 * size free (it is not synced: a crash that loses it loses nothing). */
static void make_reserve(rn_cluster *cl, uint64_t now) {
    uint64_t size = rn_health_floor(&cl->cfg);
    if (!size || cl->reserve_made || now < cl->reserve_retry_ms ||
        cl->disk_free < cl->cfg.disk_reserve_bytes + size)
        return;
    char path[4200];
    reserve_path(&cl->cfg, path, sizeof path);
    int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    int rc = fd < 0 ? errno : posix_fallocate(fd, 0, (off_t)size);
    if (fd >= 0)
        close(fd);
    if (rc != 0) {
        unlink(path);
        cl->reserve_retry_ms = now + RESERVE_RETRY_MS;
        rn_log(RN_LOG_WARN, "disk", "cannot make %s: %s (tried again later)", path, strerror(rc));
        return;
    }
    cl->reserve_made = 1;
}

/* Why this node should not lead group g: WHY_NONE when it may. */
static int unfit_to_lead(const rn_cluster *cl, unsigned g, const consensus_group_info *info) {
    rn_raft_log_stop stop;
    if (rn_raft_log_stopped(cl->log, g, &stop))
        return WHY_APPLY;
    if (cl->cfg.disk_reserve_bytes && cl->disk_free < cl->cfg.disk_reserve_bytes)
        return WHY_DISK;
    if (info->log_stall_ms >= cl->cfg.log_stall_ms)
        return WHY_STALL;
    return WHY_NONE;
}

/* The healthy voter of g (not this node) that applied most, or 0. */
static uint64_t healthy_target(const rn_cluster *cl, unsigned g, uint64_t now) {
    consensus_member m[RN_MAX_PEERS];
    unsigned n = consensus_members(cl->node, g, m, RN_MAX_PEERS);
    uint64_t best = 0, best_applied = 0;
    for (unsigned k = 0; k < n && k < RN_MAX_PEERS; k++) {
        const rn_peer_config *p = rn_cluster_peer(&cl->cfg, m[k].id);
        if (m[k].role != CONSENSUS_VOTER || m[k].id == cl->cfg.node_id || !p)
            continue;
        const peer_status *ps = &cl->peers[p - cl->cfg.peers];
        if (ps->health != 1 || now - ps->health_ms > PEER_FRESH_MS || !ps->g ||
            rn_identity_replaced(cl, m[k].id))
            continue;
        if (!best || ps->g[g].applied > best_applied) {
            best = m[k].id;
            best_applied = ps->g[g].applied;
        }
    }
    return best;
}

typedef struct {
    rn_cluster *cl;
    unsigned group;
    uint64_t target;
} handing;

static void handed(void *arg, consensus_status st) {
    handing *h = arg;
    rn_cluster *cl = h->cl;
    cl->transfer_busy[h->group] = 0;
    if (st == CONSENSUS_OK) {
        rn_log(RN_LOG_WARN, "cluster_transfer", "group %u: node %llu leads it now", h->group,
               (unsigned long long)h->target);
    } else {
        cl->transfer_next_ms[h->group] = uv_now(cl->loop) + TRANSFER_RETRY_MS;
        rn_log(RN_LOG_WARN, "cluster_transfer", "group %u: node %llu did not take over (%s)",
               h->group, (unsigned long long)h->target, consensus_status_name(st));
    }
    free(h);
}

/* Hands group g (led here) to a healthy voter when this node is unfit. */
static void watch_group(rn_cluster *cl, unsigned g, uint64_t now) {
    consensus_group_info info;
    consensus_group_info_get(cl->node, g, &info);
    int why = unfit_to_lead(cl, g, &info);
    if (why == WHY_NONE || info.state != CONSENSUS_LEADER || info.transferring ||
        cl->transfer_busy[g] || now < cl->transfer_next_ms[g])
        return;
    uint64_t target = healthy_target(cl, g, now);
    if (!target) {
        if (now - cl->transfer_log_ms[g] >= NO_TARGET_LOG_MS) {
            cl->transfer_log_ms[g] = now;
            rn_log(RN_LOG_WARN, "cluster_transfer",
                   "group %u: this node should not lead it (%s), and no healthy voter is known", g,
                   why_label[why]);
        }
        return;
    }
    rn_log(RN_LOG_WARN, "cluster_transfer", "group %u: handing the leadership to node %llu (%s)", g,
           (unsigned long long)target, why_label[why]);
    cl->transfers[why]++;
    cl->transfer_busy[g] = 1;
    handing *h = rn_xmalloc(sizeof *h);
    *h = (handing){.cl = cl, .group = g, .target = target};
    consensus_transfer(cl->node, g, target, handed, h);
}

static void on_health(uv_timer_t *t) {
    rn_cluster *cl = t->data;
    if (!cl->node)
        return;
    uint64_t now = uv_now(cl->loop);
    cl->disk_free = rn_free_bytes(cl->cfg.data_dir);
    make_reserve(cl, now);
    for (unsigned g = 0; g < cl->groups; g++)
        watch_group(cl, g, now);
}

void rn_health_start(rn_cluster *cl) {
    cl->disk_free = rn_free_bytes(cl->cfg.data_dir);
    cl->transfer_busy = rn_xcalloc(cl->groups, sizeof *cl->transfer_busy);
    cl->transfer_next_ms = rn_xcalloc(cl->groups, sizeof *cl->transfer_next_ms);
    cl->transfer_log_ms = rn_xcalloc(cl->groups, sizeof *cl->transfer_log_ms);
    uv_timer_init(cl->loop, &cl->health);
    cl->health.data = cl;
    uv_timer_start(&cl->health, on_health, HEALTH_MS, HEALTH_MS);
    uv_unref((uv_handle_t *)&cl->health);
    cl->health_running = 1;
}

static void health_closed(uv_handle_t *h) {
    rn_cluster *cl = h->data;
    free(cl->transfer_busy);
    free(cl->transfer_next_ms);
    free(cl->transfer_log_ms);
}

void rn_health_stop(rn_cluster *cl) {
    if (!cl->health_running)
        return;
    cl->health_running = 0;
    uv_close((uv_handle_t *)&cl->health, health_closed);
}

int rn_health_admit(void *arg, unsigned group) {
    (void)group;
    const rn_cluster *cl = arg;
    return !cl->cfg.disk_reserve_bytes || cl->disk_free >= cl->cfg.disk_reserve_bytes;
}

int rn_health_write_refusal(const rn_cluster *cl, unsigned group) {
    rn_raft_log_stop stop;
    if (rn_raft_log_stopped(cl->log, group, &stop))
        return RN_E_APPLY_STOPPED;
    return rn_health_admit((void *)cl, group) ? 0 : RN_E_WAL_DISK_PRESSURE;
}

int rn_health_ready(const rn_cluster *cl, char *why, size_t cap) {
    if (!rn_health_admit((void *)cl, 0)) {
        snprintf(why, cap,
                 "the file system of %s has %llu bytes free, below the reserve of %llu "
                 "(--disk-reserve-bytes): writes are refused",
                 cl->cfg.data_dir, (unsigned long long)cl->disk_free,
                 (unsigned long long)cl->cfg.disk_reserve_bytes);
        return 0;
    }
    for (unsigned g = 0; cl->node && g < cl->groups; g++) {
        rn_raft_log_stop stop;
        if (rn_raft_log_stopped(cl->log, g, &stop)) {
            snprintf(why, cap,
                     "group %u stopped applying at entry %llu: stream %016llx's data cannot be "
                     "stored (%s)",
                     g, (unsigned long long)stop.index, (unsigned long long)stop.stream,
                     strerror(stop.err));
            return 0;
        }
        consensus_group_info info;
        consensus_group_info_get(cl->node, g, &info);
        if (info.log_stall_ms >= cl->cfg.log_stall_ms) {
            snprintf(why, cap,
                     "group %u: a log write has waited %llu ms (%u held for lack of space)", g,
                     (unsigned long long)info.log_stall_ms, info.log_writes_held);
            return 0;
        }
    }
    return 1;
}

void rn_health_status_line(const rn_cluster *cl, rn_buf *out) {
    char why[512];
    if (rn_health_ready(cl, why, sizeof why))
        rn_buf_append_str(out, "health 1\n");
    else
        rn_buf_appendf(out, "health 0 %s\n", why);
}

int rn_health_parse_status(const char *line, size_t len) {
    static const char prefix[] = "health ";
    size_t pl = sizeof prefix - 1;
    if (len <= pl || memcmp(line, prefix, pl) != 0 || (line[pl] != '0' && line[pl] != '1'))
        return -1;
    return line[pl] - '0';
}

void rn_health_metrics(const rn_cluster *cl, rn_buf *out) {
    rn_buf_appendf(out,
                   "# HELP runnel_disk_free_bytes Free bytes of the data directory's file "
                   "system.\n# TYPE runnel_disk_free_bytes gauge\nrunnel_disk_free_bytes %llu\n"
                   "# HELP runnel_disk_reserve_bytes Below this free, writes are refused "
                   "(--disk-reserve-bytes).\n# TYPE runnel_disk_reserve_bytes gauge\n"
                   "runnel_disk_reserve_bytes %llu\n",
                   (unsigned long long)cl->disk_free,
                   (unsigned long long)cl->cfg.disk_reserve_bytes);
    rn_buf_append_str(out, "# HELP runnel_cluster_apply_stopped 1 while the group's applying "
                           "is stopped here (no room for its data).\n"
                           "# TYPE runnel_cluster_apply_stopped gauge\n");
    for (unsigned g = 0; cl->node && g < cl->groups; g++) {
        rn_raft_log_stop stop;
        rn_buf_appendf(out, "runnel_cluster_apply_stopped{group=\"%u\"} %d\n", g,
                       rn_raft_log_stopped(cl->log, g, &stop));
    }
    rn_buf_append_str(out, "# HELP runnel_cluster_log_stall_ms How long the group's oldest "
                           "pending log write has waited (0: none pending).\n"
                           "# TYPE runnel_cluster_log_stall_ms gauge\n");
    for (unsigned g = 0; cl->node && g < cl->groups; g++) {
        consensus_group_info info;
        consensus_group_info_get(cl->node, g, &info);
        rn_buf_appendf(out, "runnel_cluster_log_stall_ms{group=\"%u\"} %llu\n", g,
                       (unsigned long long)info.log_stall_ms);
    }
    rn_buf_append_str(out, "# HELP runnel_cluster_health_transfers_total Leaderships this node "
                           "handed over, by reason.\n"
                           "# TYPE runnel_cluster_health_transfers_total counter\n");
    for (int k = WHY_DISK; k < WHY_COUNT; k++)
        rn_buf_appendf(out, "runnel_cluster_health_transfers_total{reason=\"%s\"} %llu\n",
                       why_label[k], (unsigned long long)cl->transfers[k]);
}
