/*
 * test_consensus.c — the consensus layer (src/cluster/) in one process: a
 * single-voter node on a libuv loop in a temporary directory. Outcomes are
 * never delivered inside the call, a stop with proposals in flight
 * finishes their writes (libraft 0.15 corrupts its log when it cancels two
 * or more of a leader's queued appends) and delivers every outcome (also
 * of calls made from those callbacks) before its done callback, entries of
 * every length survive a restart (libraft 0.15 corrupts segments holding
 * entries whose length is not a multiple of 8 unless they are framed), and
 * a restart restores the snapshot and re-applies the entries after it, and
 * a disk with no room for the next log segment holds the leader's writes
 * (libraft 0.15 frees memory twice when several fail) until space returns,
 * every one then committed and durable (root: the directory on a small
 * tmpfs; otherwise skipped, saying why). The multi-node behaviour is
 * tests/cluster/consensus.test.mjs.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "consensus/consensus.h"
#include "util/buf.h"

#define MAX_ENTRIES 256

/* The state machine: every applied entry's bytes, in order. */
typedef struct {
    char *entry[MAX_ENTRIES];
    size_t len[MAX_ENTRIES];
    unsigned n;
    unsigned restores;
    uint64_t restored_index;
    unsigned restored_n; /* entries the last manifest held */
} test_fsm;

static void fsm_clear(test_fsm *f) {
    for (unsigned i = 0; i < f->n; i++)
        free(f->entry[i]);
    f->n = 0;
}

static void *fsm_apply(void *ctx, unsigned group, uint64_t index, const void *data, size_t len) {
    (void)group;
    (void)index;
    test_fsm *f = ctx;
    assert_true(f->n < MAX_ENTRIES);
    f->entry[f->n] = rn_xmalloc(len);
    memcpy(f->entry[f->n], data, len);
    f->len[f->n] = len;
    unsigned *position = rn_xmalloc(sizeof *position);
    *position = ++f->n;
    return position;
}

static void fsm_free_result(void *ctx, unsigned group, void *result) {
    (void)ctx;
    (void)group;
    free(result);
}

static int fsm_snapshot(void *ctx, unsigned group, uint64_t index, void **out, size_t *len) {
    (void)group;
    (void)index;
    test_fsm *f = ctx;
    rn_buf b = {0};
    rn_buf_append_u32(&b, f->n);
    for (unsigned i = 0; i < f->n; i++)
        rn_buf_append_lstr(&b, f->entry[i], f->len[i]);
    *out = rn_buf_steal(&b, len);
    return 0;
}

static int fsm_restore(void *ctx, unsigned group, uint64_t index, const void *m, size_t len) {
    (void)group;
    test_fsm *f = ctx;
    rn_reader r;
    rn_reader_init(&r, m, len);
    fsm_clear(f);
    uint32_t n = rn_read_u32(&r);
    for (uint32_t i = 0; i < n && !r.failed; i++) {
        size_t l;
        const uint8_t *p = rn_read_lstr(&r, &l);
        f->entry[f->n] = rn_xmalloc(l ? l : 1);
        memcpy(f->entry[f->n], p, l);
        f->len[f->n++] = l;
    }
    f->restores++;
    f->restored_index = index;
    f->restored_n = f->n;
    return r.failed ? -1 : 0;
}

/* --- a node on a loop -------------------------------------------------------- */

typedef struct {
    uv_loop_t loop;
    char dir[64];
    char address[32];
    test_fsm fsm;
    consensus *c;
    bool stopped;
} fixture;

static void stopped(void *arg) {
    ((fixture *)arg)->stopped = true;
}

static void on_tick(uv_timer_t *t) {
    (void)t;
}

/* Runs the loop for one turn of at most 10 ms. */
static void run_briefly(fixture *fx) {
    uv_timer_t tick;
    uv_timer_init(&fx->loop, &tick);
    uv_timer_start(&tick, on_tick, 10, 0);
    uv_run(&fx->loop, UV_RUN_ONCE);
    uv_close((uv_handle_t *)&tick, NULL);
    uv_run(&fx->loop, UV_RUN_NOWAIT);
}

/* Runs the loop until pred(fx, arg) or 10 s; returns pred's last value. */
static bool run_until(fixture *fx, bool (*pred)(fixture *, const void *), const void *arg) {
    uint64_t end = uv_now(&fx->loop) + 10000;
    while (!pred(fx, arg) && uv_now(&fx->loop) < end)
        run_briefly(fx);
    return pred(fx, arg);
}

static bool flag_set(fixture *fx, const void *flag) {
    (void)fx;
    return *(const bool *)flag;
}

static bool leader_ready(fixture *fx, const void *unused) {
    (void)unused;
    consensus_group_info i;
    consensus_group_info_get(fx->c, 0, &i);
    return i.leader_ready;
}

static bool snapshot_stored(fixture *fx, const void *unused) {
    (void)unused;
    consensus_group_info i;
    consensus_group_info_get(fx->c, 0, &i);
    return i.snapshot_index > 0;
}

/* A loopback port nothing listens on now. */
static int free_port(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    close(fd);
    return ntohs(a.sin_port);
}

/* Starts node 1: the only voter, or (alone) one of three voters whose two
 * others never run, so no leader is ever elected. */
static void start_node_with(fixture *fx, unsigned threshold, bool alone) {
    char other[2][32];
    snprintf(other[0], sizeof other[0], "127.0.0.1:%d", free_port());
    snprintf(other[1], sizeof other[1], "127.0.0.1:%d", free_port());
    consensus_peer peers[3] = {{.id = 1, .address = fx->address},
                               {.id = 2, .address = other[0]},
                               {.id = 3, .address = other[1]}};
    consensus_config cfg = {
        .loop = &fx->loop,
        .self_id = 1,
        .self_address = fx->address,
        .peers = peers,
        .n_peers = alone ? 3 : 1,
        .data_dir = fx->dir,
        .groups = 1,
        .bootstrap = true,
        .fsm = {.ctx = &fx->fsm,
                .apply = fsm_apply,
                .free_result = fsm_free_result,
                .snapshot = fsm_snapshot,
                .restore = fsm_restore},
    };
    consensus_params_default(&cfg.params);
    cfg.params.election_timeout_ms = 100;
    cfg.params.heartbeat_ms = 20;
    cfg.params.snapshot_threshold = threshold;
    cfg.params.snapshot_trailing = 2;
    fx->stopped = false;
    assert_int_equal(consensus_start(&cfg, &fx->c), 0);
}

static void start_node(fixture *fx, unsigned threshold) {
    start_node_with(fx, threshold, false);
}

static void stop_node(fixture *fx) {
    consensus_stop(fx->c, stopped, fx);
    assert_true(run_until(fx, flag_set, &fx->stopped));
    fx->c = NULL;
}

static void wait_ready(fixture *fx) {
    assert_true(run_until(fx, leader_ready, NULL));
}

static int setup(void **state) {
    fixture *fx = rn_xcalloc(1, sizeof *fx);
    uv_loop_init(&fx->loop);
    snprintf(fx->dir, sizeof fx->dir, "/tmp/rn-consensus-XXXXXX");
    assert_non_null(mkdtemp(fx->dir));
    snprintf(fx->address, sizeof fx->address, "127.0.0.1:%d", free_port());
    *state = fx;
    return 0;
}

static int teardown(void **state) {
    fixture *fx = *state;
    char cmd[128];
    umount2(fx->dir, MNT_DETACH);                    /* a tmpfs a failed test left mounted */
    snprintf(cmd, sizeof cmd, "rm -rf %s", fx->dir); /* first: a failed test leaves nothing */
    int removed = system(cmd);
    fsm_clear(&fx->fsm);
    uv_run(&fx->loop, UV_RUN_NOWAIT);
    int closed = uv_loop_close(&fx->loop);
    free(fx);
    assert_int_equal(removed, 0);
    assert_int_equal(closed, 0);
    return 0;
}

/* --- proposals -------------------------------------------------------------- */

typedef struct {
    fixture *fx;
    bool in_call; /* set around consensus_propose */
    bool done;
    bool called_inside;
    consensus_status status;
    uint64_t index;
    unsigned position;
    bool retry_once; /* propose again from the callback */
    bool retried;
    consensus_status first_status;
} proposal;

static void proposed(void *arg, consensus_status st, uint64_t index, void *result) {
    proposal *p = arg;
    assert_false(p->done);
    p->called_inside = p->in_call;
    p->done = true;
    p->status = st;
    p->index = index;
    if (result) {
        p->position = *(unsigned *)result;
        free(result);
    }
    if (!p->retried)
        p->first_status = st;
    if (p->retry_once) {
        p->retry_once = false;
        p->retried = true;
        p->done = false;
        p->in_call = true;
        consensus_propose(p->fx->c, 0, "again", 5, proposed, p);
        p->in_call = false;
    }
}

static void propose(fixture *fx, proposal *p, const void *data, size_t len) {
    p->fx = fx;
    p->in_call = true;
    consensus_propose(fx->c, 0, data, len, proposed, p);
    p->in_call = false;
}

static void test_outcomes_arrive_after_the_call(void **state) {
    fixture *fx = *state;
    start_node_with(fx, 1024, true); /* no leader: nothing is proposed */
    proposal refused = {0};
    propose(fx, &refused, "x", 1);
    assert_false(refused.done);
    assert_true(run_until(fx, flag_set, &refused.done));
    assert_false(refused.called_inside);
    assert_int_equal(refused.status, CONSENSUS_NOT_LEADER);
    assert_int_equal(refused.index, 0);
    assert_int_equal(fx->fsm.n, 0);
    stop_node(fx);

    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s/raft", fx->dir); /* a pristine single voter */
    assert_int_equal(system(cmd), 0);
    start_node(fx, 1024);
    wait_ready(fx);
    proposal p = {0};
    propose(fx, &p, "hello", 5);
    assert_false(p.done);
    assert_true(run_until(fx, flag_set, &p.done));
    assert_false(p.called_inside);
    assert_int_equal(p.status, CONSENSUS_OK);
    assert_true(p.index > 0);
    assert_int_equal(p.position, 1);
    assert_int_equal(fx->fsm.n, 1);
    assert_memory_equal(fx->fsm.entry[0], "hello", 5);
    stop_node(fx);
}

static void test_stop_delivers_every_outcome(void **state) {
    fixture *fx = *state;
    start_node(fx, 1024);
    wait_ready(fx);
    proposal p[4] = {{0}};
    for (int i = 0; i < 4; i++) {
        p[i].retry_once = true; /* a caller retrying from the stop's outcome */
        propose(fx, &p[i], "pending", 7);
    }
    consensus_stop(fx->c, stopped, fx);
    assert_true(run_until(fx, flag_set, &fx->stopped));
    for (int i = 0; i < 4; i++) {
        assert_true(p[i].done);
        /* a stop lets the leader's writes finish (appends.c): a single
         * voter then commits and applies them */
        assert_int_equal(p[i].first_status, CONSENSUS_OK);
        assert_int_equal(p[i].status, CONSENSUS_NOT_PROPOSED); /* the retry's */
    }
}

/* Entries of every length from 1 to 40 bytes, then a restart: every one
 * re-applied with its exact bytes. */
static void test_entries_of_every_length_survive_a_restart(void **state) {
    fixture *fx = *state;
    start_node(fx, 1024);
    wait_ready(fx);
    char data[40];
    for (size_t i = 0; i < sizeof data; i++)
        data[i] = (char)('a' + i % 26);
    proposal p[40] = {{0}};
    for (size_t len = 1; len <= 40; len++)
        propose(fx, &p[len - 1], data, len);
    assert_true(run_until(fx, flag_set, &p[39].done));
    for (int i = 0; i < 40; i++)
        assert_int_equal(p[i].status, CONSENSUS_OK);
    stop_node(fx);
    fsm_clear(&fx->fsm);
    start_node(fx, 1024);
    wait_ready(fx); /* the no-op commits the old entries: all re-applied */
    assert_int_equal(fx->fsm.n, 40);
    for (unsigned i = 0; i < 40; i++) {
        assert_int_equal(fx->fsm.len[i], i + 1);
        assert_memory_equal(fx->fsm.entry[i], data, i + 1);
    }
    stop_node(fx);
}

static void test_restart_restores_the_snapshot_then_replays(void **state) {
    fixture *fx = *state;
    start_node(fx, 8);
    wait_ready(fx);
    proposal p[20] = {{0}};
    char value[16];
    for (int i = 0; i < 20; i++) {
        snprintf(value, sizeof value, "v%d", i);
        propose(fx, &p[i], value, strlen(value));
    }
    assert_true(run_until(fx, flag_set, &p[19].done));
    assert_true(run_until(fx, snapshot_stored, NULL)); /* stored in the background */
    consensus_group_info info;
    consensus_group_info_get(fx->c, 0, &info);
    assert_true(info.snapshots >= 1 && info.snapshot_index > 0);
    stop_node(fx);
    fsm_clear(&fx->fsm);
    fx->fsm.restores = 0;
    start_node(fx, 8);
    assert_int_equal(fx->fsm.restores, 1); /* restored while starting */
    assert_true(fx->fsm.restored_index > 0);
    assert_true(fx->fsm.restored_n > 0 && fx->fsm.restored_n < 20);
    wait_ready(fx);
    assert_int_equal(fx->fsm.n, 20);
    for (int i = 0; i < 20; i++) {
        snprintf(value, sizeof value, "v%d", i);
        assert_int_equal(fx->fsm.len[i], strlen(value));
        assert_memory_equal(fx->fsm.entry[i], value, strlen(value));
    }
    stop_node(fx);
}

/* Fills the file system of dir (a file "filler" of every free byte). */
static void fill_disk(const char *dir) {
    char path[128];
    snprintf(path, sizeof path, "%s/filler", dir);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(fd >= 0);
    static char chunk[65536];
    memset(chunk, 'f', sizeof chunk);
    for (size_t want = sizeof chunk; want >= 512;) {
        ssize_t n = write(fd, chunk, want);
        if (n < 0 && errno == ENOSPC)
            want /= 2;
        else
            assert_true(n > 0);
    }
    close(fd);
}

static bool writes_held(fixture *fx, const void *unused) {
    (void)unused;
    consensus_group_info i;
    consensus_group_info_get(fx->c, 0, &i);
    return i.log_writes_held > 0;
}

static bool all_done(fixture *fx, const void *arg) {
    (void)fx;
    const proposal *p = arg;
    for (int i = 0; i < 64; i++)
        if (!p[i].done)
            return false;
    return true;
}

static void test_a_full_disk_holds_log_writes_until_space_returns(void **state) {
    fixture *fx = *state;
    if (mount("tmpfs", fx->dir, "tmpfs", 0, "size=8m") != 0) {
        print_message("[  SKIPPED ] full disk: cannot mount a tmpfs (%s): needs root\n",
                      strerror(errno));
        skip();
    }
    start_node(fx, 1024);
    wait_ready(fx);
    fill_disk(fx->dir);
    /* 64 entries of 64 KiB, all in flight: 4 MiB, past the current
     * segment and the spares libraft prepared before the disk filled */
    static char big[65536];
    proposal p[64] = {{0}};
    for (int i = 0; i < 64; i++) {
        memset(big, 'a' + i % 26, sizeof big);
        propose(fx, &p[i], big, sizeof big);
    }
    assert_true(run_until(fx, writes_held, NULL));
    for (int k = 0; k < 50; k++)
        run_briefly(fx); /* retried, still no room: nothing fails */
    consensus_group_info info;
    consensus_group_info_get(fx->c, 0, &info);
    assert_true(info.log_writes_held > 0);
    assert_true(info.log_stall_ms > 0);
    assert_false(p[63].done);
    char path[128];
    snprintf(path, sizeof path, "%s/filler", fx->dir);
    assert_int_equal(unlink(path), 0);
    assert_true(run_until(fx, all_done, p));
    for (int i = 0; i < 64; i++)
        assert_int_equal(p[i].status, CONSENSUS_OK);
    assert_int_equal(fx->fsm.n, 64);
    consensus_group_info_get(fx->c, 0, &info);
    assert_int_equal(info.log_writes_held, 0);
    stop_node(fx);
    fsm_clear(&fx->fsm);
    start_node(fx, 1024);
    wait_ready(fx); /* every entry was written: all re-applied */
    assert_int_equal(fx->fsm.n, 64);
    for (unsigned i = 0; i < 64; i++) {
        assert_int_equal(fx->fsm.len[i], sizeof big);
        assert_int_equal(fx->fsm.entry[i][0], 'a' + i % 26);
    }
    stop_node(fx);
    assert_int_equal(umount(fx->dir), 0);
}

int main(void) {
    signal(SIGPIPE, SIG_IGN); /* consensus_start's precondition */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_outcomes_arrive_after_the_call, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stop_delivers_every_outcome, setup, teardown),
        cmocka_unit_test_setup_teardown(test_entries_of_every_length_survive_a_restart, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_restart_restores_the_snapshot_then_replays, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_a_full_disk_holds_log_writes_until_space_returns,
                                        setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
