/*
 * seed.c — a new group's first state written offline (consensus_seed): the
 * group bootstrapped and a given state machine snapshot stored in its
 * place, through libraft's own raft_uv io (init, load, bootstrap,
 * snapshot_put), so that a start loads it as it loads any snapshot.
 */
#include "consensus/consensus_int.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/buf.h"

typedef struct {
    int done, status;
} seed_wait;

static void put_done(struct raft_io_snapshot_put *req, int status) {
    seed_wait *w = req->data;
    w->status = status;
    w->done = 1;
}

static void io_closed(struct raft_io *io) {
    seed_wait *w = io->data;
    w->done = 1;
}

static void wait_done(uv_loop_t *loop, seed_wait *w) {
    while (!w->done)
        uv_run(loop, UV_RUN_ONCE);
}

/* Bootstraps the group open in io and stores the snapshot (header and
 * manifest) at index 1, term 1: the bootstrap's entry 1 (the
 * configuration) goes, as after an InstallSnapshot. */
static int seed_group(const consensus_seed_config *cfg, struct raft_io *io, unsigned group,
                      const void *manifest, size_t len, char *err, size_t errcap) {
    raft_term term;
    raft_id vote;
    struct raft_snapshot *loaded = NULL;
    raft_index start;
    struct raft_entry *entries = NULL;
    size_t n_entries = 0;
    int rv = io->init(io, cfg->self_id, cfg->self_address);
    if (rv == 0)
        rv = io->load(io, &term, &vote, &loaded, &start, &entries, &n_entries);
    /* A new directory loads nothing; one with data is refused by bootstrap. */
    assert(rv != 0 || (!loaded && !n_entries));
    (void)term, (void)vote, (void)start, (void)entries;
    struct raft_snapshot snap = {.index = 1, .term = 1, .configuration_index = 1};
    raft_configuration_init(&snap.configuration);
    for (unsigned i = 0; i < cfg->n_peers && rv == 0; i++)
        rv = raft_configuration_add(&snap.configuration, cfg->peers[i].id, cfg->peers[i].address,
                                    RAFT_VOTER);
    if (rv == 0)
        rv = io->bootstrap(io, &snap.configuration);
    rn_buf header = {0};
    cs_snapshot_header(group, 1, manifest, len, &header);
    struct raft_buffer bufs[2] = {{header.data, header.len}, {(void *)manifest, len}};
    snap.bufs = bufs;
    snap.n_bufs = len ? 2 : 1;
    seed_wait w = {0};
    struct raft_io_snapshot_put put = {.data = &w};
    if (rv == 0 && (rv = io->snapshot_put(io, 0, &put, &snap, put_done)) == 0) {
        wait_done(cfg->loop, &w);
        rv = w.status;
    }
    raft_configuration_close(&snap.configuration);
    rn_buf_free(&header);
    if (rv != 0)
        snprintf(err, errcap, "group %u: %s (%s)", group, raft_strerror(rv), io->errmsg);
    return rv == 0 ? 0 : -1;
}

int consensus_seed(const consensus_seed_config *cfg, unsigned group, const void *manifest,
                   size_t len, char *err, size_t errcap) {
    assert(cfg && cfg->loop && cfg->data_dir && cfg->self_address && cfg->n_peers > 0);
    char dir[4096];
    int rc = cs_make_group_dir(cfg->data_dir, group, dir, sizeof dir);
    if (rc != 0) {
        snprintf(err, errcap, "group %u: %s/raft cannot be made: %s", group, cfg->data_dir,
                 strerror(-rc));
        return -1;
    }
    struct raft_uv_transport transport = {0};
    struct raft_io io = {0};
    int rv = raft_uv_tcp_init(&transport, cfg->loop);
    if (rv == 0 && (rv = raft_uv_init(&io, cfg->loop, dir, &transport)) != 0)
        raft_uv_tcp_close(&transport);
    if (rv != 0) {
        snprintf(err, errcap, "group %u: libraft's io: %s", group, raft_strerror(rv));
        return -1;
    }
    raft_uv_set_snapshot_compression(&io, false); /* as consensus_params_default */
    rc = seed_group(cfg, &io, group, manifest, len, err, errcap);
    seed_wait w = {0};
    io.data = &w;
    io.close(&io, io_closed);
    wait_done(cfg->loop, &w);
    raft_uv_close(&io);
    raft_uv_tcp_close(&transport);
    return rc;
}
