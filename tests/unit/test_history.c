/*
 * test_history.c - unit tests for history tiering: the engine's side
 * (src/engine/tiering.c: due chunks, the TIER command, reads below the cold
 * end) over the tiers' flush and read cache (src/tiers/history.c), with the
 * local-directory cold store.
 *
 * How: a fresh data directory and loop per test; the engine moves history
 * (rn_engine_tier_history) with the flush's 100 ms tick, so the loop runs
 * one turn at a time until a condition holds (bounded). Restarts close and
 * reopen the engine (a checkpoint), or copy the directory while the engine
 * is idle and open the copy (a crash: the log is replayed).
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <uv.h>

#include "engine/command.h"
#include "engine/engine.h"
#include "tiers/tiers.h"
#include "tmpdir.h"
#include "util/clock.h"

#define MiB (1u << 20)
#define OCTET "application/octet-stream"

typedef struct {
    char root[64];
    char dir[128];
    uv_loop_t loop;
    rn_tiers *tiers;
    rn_engine *e;
} fx;

static void open_at(fx *f, const char *dir) {
    rn_tiers_config tc = {.data_dir = dir,
                          .cold_store = 1,
                          .max_open_files = 16,
                          .parts_grace_ms = 3600000,
                          .history_cache_bytes = 32 * MiB};
    char err[256] = "";
    f->tiers = rn_tiers_open(&f->loop, &tc, err, sizeof err);
    if (!f->tiers)
        fail_msg("rn_tiers_open: %s", err);
    rn_engine_config cfg = {.data_dir = dir,
                            .tiers = f->tiers,
                            .wal_segment_bytes = 4 * MiB,
                            .checkpoint_bytes = 1ull << 40,
                            .hot_bytes = 64 * MiB};
    rn_recovery_stats stats;
    f->e = rn_engine_open(&f->loop, &cfg, &stats, err, sizeof err);
    if (!f->e)
        fail_msg("rn_engine_open: %s", err);
    rn_tiers_start(f->tiers);
    rn_engine_tier_history(f->e);
}

static void close_all(fx *f) {
    rn_tiers_stop(f->tiers); /* closes the flush's timer */
    uv_run(&f->loop, UV_RUN_DEFAULT);
    assert_false(rn_engine_busy(f->e));
    rn_engine_close(f->e);
    rn_tiers_close(f->tiers);
    f->e = NULL;
    f->tiers = NULL;
}

static int setup(void **state) {
    fx *f = calloc(1, sizeof *f);
    assert_non_null(f);
    strcpy(f->root, "/tmp/runnel-history-XXXXXX");
    assert_non_null(mkdtemp(f->root));
    snprintf(f->dir, sizeof f->dir, "%s/data", f->root);
    assert_int_equal(mkdir(f->dir, 0755), 0);
    assert_int_equal(uv_loop_init(&f->loop), 0);
    open_at(f, f->dir);
    *state = f;
    return 0;
}

static int teardown(void **state) {
    fx *f = *state;
    if (f->e)
        close_all(f);
    assert_int_equal(uv_loop_close(&f->loop), 0);
    rm_tree(f->root);
    free(f);
    return 0;
}

/* Runs the loop a turn at a time until cond(f) holds, for at most 20 s. */
static void run_until(fx *f, int (*cond)(fx *f), const char *what) {
    uint64_t end = rn_mono_ms() + 20000;
    while (!cond(f)) {
        if (rn_mono_ms() > end)
            fail_msg("not within 20 s: %s", what);
        uv_run(&f->loop, UV_RUN_ONCE);
    }
}

/* ---- requests ---- */

typedef struct {
    rn_op op;
    int done;
    rn_result result;
} req;

static void req_done(rn_op *op) {
    req *r = op->arg;
    r->done = 1;
    r->result = op->out.result;
}

static int req_answered(fx *f, req *r) {
    while (!r->done)
        uv_run(&f->loop, UV_RUN_ONCE);
    return (int)r->result;
}

static rn_result submit(fx *f, rn_op_kind kind, const char *path, const void *body, size_t len,
                        uint64_t target) {
    req r = {0};
    r.op.in = (rn_op_request){.kind = kind,
                              .path = path,
                              .path_len = strlen(path),
                              .content_type = OCTET,
                              .content_type_len = strlen(OCTET),
                              .ttl_s = -1,
                              .expires_at_ms = -1,
                              .body = body,
                              .body_len = len,
                              .target_offset = target};
    r.op.done = req_done;
    r.op.arg = &r;
    rn_engine_submit(f->e, &r.op);
    return (rn_result)req_answered(f, &r);
}

/* The stream's byte at position i. */
static uint8_t byte_at(uint64_t i) {
    return (uint8_t)(i * 7 + i / 4093);
}

/* Appends bytes [from, to) of the pattern to "h/s", 1 MiB at a time. */
static void write_pattern(fx *f, uint64_t from, uint64_t to) {
    uint8_t *buf = malloc(MiB);
    assert_non_null(buf);
    for (uint64_t off = from; off < to; off += MiB) {
        for (uint64_t i = 0; i < MiB; i++)
            buf[i] = byte_at(off + i);
        assert_int_equal(submit(f, RN_OP_APPEND, "h/s", buf, MiB, 0), RN_OK_APPENDED);
    }
    free(buf);
}

static uint64_t want_cold_end;
static int moved(fx *f) {
    rn_stream *s = rn_engine_find(f->e, "h/s", 3);
    return s && s->cold_end == want_cold_end && rn_engine_cold_backlog(f->e) == 0;
}

typedef struct {
    int done, status;
} fetch_wait;

static void fetched(void *arg, int status) {
    fetch_wait *w = arg;
    w->done = 1;
    w->status = status;
}

/* Fetches the chunk the last read missed, running the loop until it is
 * cached. */
static void fetch_missed(fx *f) {
    fetch_wait w = {0};
    rn_engine_cold_fetch(f->e, fetched, &w);
    while (!w.done)
        uv_run(&f->loop, UV_RUN_ONCE);
    assert_int_equal(w.status, 0);
}

/* Reads [off, off + len) of "h/s", fetching missed chunks; returns how
 * many fetches it needed. */
static int read_fetching(fx *f, uint64_t off, size_t len, uint8_t *out) {
    int fetches = 0;
    for (;;) {
        rn_stream *s = rn_engine_find(f->e, "h/s", 3);
        assert_non_null(s);
        rn_buf b = {0};
        long n = rn_engine_read(f->e, s, off, len, 0, &b);
        if (n == (long)len) {
            memcpy(out, b.data, len);
            rn_buf_free(&b);
            return fetches;
        }
        rn_buf_free(&b);
        assert_int_equal(n, -ENODATA);
        assert_true(++fetches <= 8);
        fetch_missed(f);
    }
}

static void expect_pattern(fx *f, uint64_t from, uint64_t to) {
    uint8_t *buf = malloc(MiB);
    assert_non_null(buf);
    for (uint64_t off = from; off < to; off += MiB) {
        size_t n = to - off < MiB ? (size_t)(to - off) : MiB;
        read_fetching(f, off, n, buf);
        for (size_t i = 0; i < n; i++)
            if (buf[i] != byte_at(off + i))
                fail_msg("byte %llu differs", (unsigned long long)(off + i));
    }
    free(buf);
}

/* Creates "h/s", appends [0, bytes) of the pattern and runs the loop until
 * its cold end is cold_end. */
static void create_and_move(fx *f, uint64_t bytes, uint64_t cold_end, const char *what) {
    assert_int_equal(submit(f, RN_OP_CREATE, "h/s", NULL, 0, 0), RN_OK_CREATED);
    write_pattern(f, 0, bytes);
    want_cold_end = cold_end;
    run_until(f, moved, what);
}

static int object_exists(fx *f, uint64_t chunk) {
    rn_stream *s = rn_engine_find(f->e, "h/s", 3);
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s/cold/history/%016llx/%016llx", f->dir, (unsigned long long)s->id,
             (unsigned long long)chunk);
    return access(p, F_OK) == 0;
}

/* ---- tests ---- */

static void test_tier_command_round_trips(void **state) {
    (void)state;
    rn_cmd c = {.type = RN_CMD_TIER, .stream_id = 42, .time_ms = 7, .offset = 3 * RN_CHUNK_BYTES};
    rn_buf b = {0};
    rn_cmd_encode_head(&c, &b);
    rn_cmd d;
    assert_int_equal(rn_cmd_decode(b.data, b.len, &d), 0);
    assert_int_equal(d.type, RN_CMD_TIER);
    assert_int_equal(d.stream_id, 42);
    assert_int_equal(d.offset, 3 * RN_CHUNK_BYTES);
    assert_int_equal(rn_cmd_decode(b.data, b.len - 1, &d), -1); /* cut: malformed */
    rn_buf_free(&b);
}

static void test_whole_chunks_move_and_read_back_through_the_cache(void **state) {
    fx *f = *state;
    /* the third chunk is not whole yet */
    create_and_move(f, 10 * MiB, 2 * RN_CHUNK_BYTES, "two chunks moved");
    assert_true(object_exists(f, 0) && object_exists(f, 1) && !object_exists(f, 2));
    close_all(f); /* an empty read cache (the flush keeps what it wrote) */
    open_at(f, f->dir);
    /* the first read of a cold chunk misses, a fetch brings it */
    rn_stream *s = rn_engine_find(f->e, "h/s", 3);
    rn_buf b = {0};
    assert_int_equal(rn_engine_read(f->e, s, 100, 1000, 0, &b), -ENODATA);
    rn_buf_free(&b);
    uint8_t across[2000];
    assert_true(read_fetching(f, RN_CHUNK_BYTES - 1000, sizeof across, across) >= 1);
    for (size_t i = 0; i < sizeof across; i++)
        assert_int_equal(across[i], byte_at(RN_CHUNK_BYTES - 1000 + i));
    expect_pattern(f, 0, 10 * MiB);
    rn_tiers_history_stats st;
    rn_tiers_history_stats_get(f->tiers, &st);
    assert_true(st.fetches >= 2); /* since the restart */
    /* appends go on at the tail; the next chunk moves once whole */
    write_pattern(f, 10 * MiB, 13 * MiB);
    want_cold_end = 3 * RN_CHUNK_BYTES;
    run_until(f, moved, "the third chunk moved");
    expect_pattern(f, 0, 13 * MiB);
}

static void test_the_cold_end_survives_a_clean_restart_and_a_crash(void **state) {
    fx *f = *state;
    create_and_move(f, 9 * MiB, 2 * RN_CHUNK_BYTES, "two chunks moved");
    close_all(f); /* a checkpoint holds the cold end */
    open_at(f, f->dir);
    assert_int_equal(rn_engine_find(f->e, "h/s", 3)->cold_end, 2 * RN_CHUNK_BYTES);
    expect_pattern(f, 0, 9 * MiB);
    /* one more chunk moves, and the process dies: the log holds the move */
    write_pattern(f, 9 * MiB, 13 * MiB);
    want_cold_end = 3 * RN_CHUNK_BYTES;
    run_until(f, moved, "the third chunk moved");
    char copy[sizeof f->dir], cmd[512];
    snprintf(copy, sizeof copy, "%.60s/crash", f->root);
    snprintf(cmd, sizeof cmd, "cp -a %s %s", f->dir, copy);
    assert_int_equal(system(cmd), 0);
    close_all(f);
    snprintf(f->dir, sizeof f->dir, "%s", copy);
    open_at(f, f->dir);
    assert_int_equal(rn_engine_find(f->e, "h/s", 3)->cold_end, 3 * RN_CHUNK_BYTES);
    expect_pattern(f, 0, 13 * MiB);
}

static void test_a_rewrite_below_the_cold_end_is_refused(void **state) {
    fx *f = *state;
    create_and_move(f, 5 * MiB, RN_CHUNK_BYTES, "a chunk moved");
    assert_int_equal(submit(f, RN_OP_REWRITE, "h/s", NULL, 0, RN_CHUNK_BYTES - 1),
                     RN_ERR_CONFIG_MISMATCH);
    assert_int_equal(submit(f, RN_OP_REWRITE, "h/s", NULL, 0, RN_CHUNK_BYTES + 10),
                     RN_OK_REWRITTEN);
    expect_pattern(f, 0, RN_CHUNK_BYTES + 10);
}

/* An answer sent in pieces re-reads its bytes piece by piece
 * (rn_engine_read_again): a chunk that moves meanwhile must still read,
 * from the copy the flush keeps in the cache, with no fetch. */
static void test_a_read_begun_before_a_move_reads_on_after_it(void **state) {
    fx *f = *state;
    assert_int_equal(submit(f, RN_OP_CREATE, "h/s", NULL, 0, 0), RN_OK_CREATED);
    write_pattern(f, 0, 5 * MiB);
    rn_stream *s = rn_engine_find(f->e, "h/s", 3);
    uint64_t id = s->id, inc = s->incarnation;
    want_cold_end = RN_CHUNK_BYTES;
    run_until(f, moved, "a chunk moved");
    uint8_t buf[4096];
    assert_int_equal(rn_engine_read_again(f->e, id, inc, 1000, sizeof buf, 1, buf), 0);
    for (size_t i = 0; i < sizeof buf; i++)
        assert_int_equal(buf[i], byte_at(1000 + i));
    rn_tiers_history_stats st;
    rn_tiers_history_stats_get(f->tiers, &st);
    assert_int_equal(st.fetches, 0);
}

/* A backup names its bytes at one instant and copies them later
 * (rn_engine_backup_read, as ops/backup.c does): a chunk moved before the
 * instant is fetched into the read cache, one that moves after it still
 * reads; every byte is the instant's. */
static void test_a_backup_reads_history_moved_before_and_after_its_instant(void **state) {
    fx *f = *state;
    create_and_move(f, 6 * MiB, RN_CHUNK_BYTES, "the first chunk moved");
    close_all(f); /* an empty read cache */
    open_at(f, f->dir);
    rn_buf image = {0};
    rn_backup_stream *streams;
    size_t n;
    rn_engine_backup_state(f->e, &image, &streams, &n);
    assert_int_equal(n, 1);
    assert_int_equal(streams[0].tail, 6 * MiB);
    write_pattern(f, 6 * MiB, 9 * MiB); /* after the instant: the second chunk moves */
    want_cold_end = 2 * RN_CHUNK_BYTES;
    run_until(f, moved, "the second chunk moved");
    int misses = 0;
    for (uint64_t off = 0; off < streams[0].tail; off += MiB) {
        rn_buf b = {0};
        int rc;
        while ((rc = rn_engine_backup_read(f->e, &streams[0], 0, off, off + MiB, &b)) == -ENODATA) {
            assert_true(++misses <= 4);
            fetch_missed(f);
        }
        assert_int_equal(rc, 0);
        assert_int_equal(b.len, MiB);
        for (size_t i = 0; i < MiB; i++)
            if (b.data[i] != byte_at(off + i))
                fail_msg("byte %llu differs", (unsigned long long)(off + i));
        rn_buf_free(&b);
    }
    assert_true(misses >= 1); /* the first chunk came from the cold store */
    rn_buf_free(&image);
    free(streams);
}

static void test_a_deleted_stream_takes_its_objects_along(void **state) {
    fx *f = *state;
    create_and_move(f, 9 * MiB, 2 * RN_CHUNK_BYTES, "two chunks moved");
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s/cold/history/%016llx/%016llx", f->dir,
             (unsigned long long)rn_engine_find(f->e, "h/s", 3)->id, 0ull);
    assert_int_equal(access(dir, F_OK), 0);
    assert_int_equal(submit(f, RN_OP_DELETE, "h/s", NULL, 0, 0), RN_OK_DELETED);
    assert_int_not_equal(access(dir, F_OK), 0);
}

/* What rn_tiers_history_keep asks for: a chunk of one repeated byte. */
typedef struct {
    uint8_t byte;
    int reads;
} chunk_source;

static int fill_chunk(void *ctx, uint8_t *out) {
    chunk_source *c = ctx;
    c->reads++;
    memset(out, c->byte, RN_CHUNK_BYTES);
    return 0;
}

/* A replica of a cluster keeps a chunk another node moved before its file
 * gives it back (engine/effects.c): the copy reads from the cache with no
 * fetch, and a chunk already cached is not read again. */
static void test_a_kept_chunk_reads_from_the_cache(void **state) {
    fx *f = *state;
    uint8_t out[64];
    assert_int_equal(rn_tiers_history_read(f->tiers, 77, RN_CHUNK_BYTES, sizeof out, out),
                     -ENODATA);
    chunk_source c = {.byte = 0x5a};
    rn_tiers_history_keep(f->tiers, 77, RN_CHUNK_BYTES, fill_chunk, &c);
    assert_int_equal(
        rn_tiers_history_read(f->tiers, 77, 2 * RN_CHUNK_BYTES - sizeof out, sizeof out, out), 0);
    for (size_t i = 0; i < sizeof out; i++)
        assert_int_equal(out[i], 0x5a);
    c.byte = 0x11;
    rn_tiers_history_keep(f->tiers, 77, RN_CHUNK_BYTES, fill_chunk, &c);
    assert_int_equal(c.reads, 1); /* cached: not read again */
    assert_int_equal(rn_tiers_history_read(f->tiers, 77, RN_CHUNK_BYTES, 1, out), 0);
    assert_int_equal(out[0], 0x5a);
    rn_tiers_history_stats st;
    rn_tiers_history_stats_get(f->tiers, &st);
    assert_int_equal(st.fetches, 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tier_command_round_trips),
        cmocka_unit_test_setup_teardown(test_whole_chunks_move_and_read_back_through_the_cache,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_the_cold_end_survives_a_clean_restart_and_a_crash,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_rewrite_below_the_cold_end_is_refused, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_a_read_begun_before_a_move_reads_on_after_it, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(
            test_a_backup_reads_history_moved_before_and_after_its_instant, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_deleted_stream_takes_its_objects_along, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_a_kept_chunk_reads_from_the_cache, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
