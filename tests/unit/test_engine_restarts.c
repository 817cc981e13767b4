/*
 * test_engine_restarts.c - unit tests of the engine's restarts
 * (src/engine/engine.{h,c}): a varied state restored from the checkpoint
 * after a clean close, and after crashes from the log (stream files
 * rebuilt, a torn log tail cut, checkpoint and log combined, stream files
 * cut back to the checkpoint), background checkpoints, expired streams
 * staying absent, a damaged checkpoint refused, and a checkpoint whose
 * directory could not be synced keeping the log it would have replaced.
 *
 * How: engine_fixture.h (clean restarts and simulated crashes on a copy of
 * the data directory).
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine_fixture.h"
#include "util/clock.h"
#include "util/fault.h"

/* ------------------------------------------------------------------------ */
/* Restarts                                                                  */

typedef struct {
    uint64_t bin, json, closed, closed2, ttl, exp, replaced, gone;
    int64_t exp_ms;
} population;

#define BIN_BYTES "hello worldABCxy"
#define JSON_BYTES "1\n2\n{\"k\":[true,null]}\n"

/* Builds a varied state: plain bytes with Stream-Seq and two producers, a
 * JSON stream, streams closed by a producer and at creation, TTL and
 * expiry settings, a deleted stream and a deleted-and-recreated one. */
static population populate(fx *f) {
    population p;
    p.bin = create(f, "/bin", NULL, NULL).stream_id;
    assert_int_equal(append_seq(f, "/bin", OCTET, "hello", "001").result, RN_OK_APPENDED);
    assert_int_equal(append_seq(f, "/bin", OCTET, " world", "002").result, RN_OK_APPENDED);
    for (uint64_t i = 0; i < 3; i++) {
        char body[2] = {(char)('A' + i), 0};
        assert_int_equal(append_prod(f, "/bin", OCTET, body, "p1", 0, i, 0).result, RN_OK_APPENDED);
    }
    assert_int_equal(append_prod(f, "/bin", OCTET, "x", "p2", 0, 0, 0).result, RN_OK_APPENDED);
    assert_int_equal(append_prod(f, "/bin", OCTET, "y", "p2", 3, 0, 0).result, RN_OK_APPENDED);

    p.json = create(f, "/json", JSON, "[1, 2]").stream_id;
    assert_int_equal(append_ct(f, "/json", JSON, "{\"k\": [true, null]}", 0).result,
                     RN_OK_APPENDED);

    p.closed = create(f, "/closed", "text/plain", NULL).stream_id;
    assert_int_equal(append_prod(f, "/closed", "text/plain", "bye", "c", 2, 0, 1).result,
                     RN_OK_APPENDED);
    p.closed2 = create_full(f, "/closed2", NULL, "final", -1, -1, 1).stream_id;

    p.ttl = create_full(f, "/ttl", NULL, "t", 3600, -1, 0).stream_id;
    p.exp_ms = rn_now_ms() + 3600000;
    p.exp = create_full(f, "/exp", NULL, NULL, -1, p.exp_ms, 0).stream_id;

    p.gone = create(f, "/gone", NULL, "zzz").stream_id;
    assert_int_equal(delete_stream(f, "/gone").result, RN_OK_DELETED);

    uint64_t first = create(f, "/replaced", NULL, "old").stream_id;
    assert_int_equal(delete_stream(f, "/replaced").result, RN_OK_DELETED);
    p.replaced = create(f, "/replaced", "text/plain", "new").stream_id;
    assert_true(p.replaced != first);
    return p;
}

/* Checks everything populate() left, without changing it. */
static void check_population(fx *f, const population *p) {
    rn_stream *s = find(f, "/bin");
    assert_non_null(s);
    assert_int_equal(s->id, p->bin);
    assert_string_equal(s->content_type, OCTET);
    assert_int_equal(s->closed, 0);
    expect_bytes(f, "/bin", BIN_BYTES);
    expect_last_seq(s, "002");
    assert_int_equal(s->producers.count, 2);
    expect_producer(s, "p1", 0, 2);
    expect_producer(s, "p2", 3, 0);

    s = find(f, "/json");
    assert_non_null(s);
    assert_int_equal(s->id, p->json);
    assert_int_equal(s->json, 1);
    expect_bytes(f, "/json", JSON_BYTES);
    assert_false(rn_engine_offset_valid(f->e, s, 1));
    assert_true(rn_engine_offset_valid(f->e, s, 2));

    s = find(f, "/closed");
    assert_non_null(s);
    assert_int_equal(s->id, p->closed);
    assert_int_equal(s->closed, 1);
    expect_producer(s, "c", 2, 0);
    assert_int_equal(producer(s, "c")->newest_closed, 1);
    expect_bytes(f, "/closed", "bye");

    s = find(f, "/closed2");
    assert_non_null(s);
    assert_int_equal(s->id, p->closed2);
    assert_int_equal(s->closed, 1);
    assert_int_equal(s->producers.count, 0);
    expect_bytes(f, "/closed2", "final");

    s = find(f, "/ttl");
    assert_non_null(s);
    assert_int_equal(s->id, p->ttl);
    assert_int_equal(s->ttl_s, 3600);
    assert_int_equal(s->expires_at_ms, -1);
    expect_bytes(f, "/ttl", "t");

    s = find(f, "/exp");
    assert_non_null(s);
    assert_int_equal(s->id, p->exp);
    assert_int_equal(s->ttl_s, -1);
    assert_int_equal(s->expires_at_ms, p->exp_ms);
    expect_bytes(f, "/exp", "");

    assert_null(find(f, "/gone"));

    s = find(f, "/replaced");
    assert_non_null(s);
    assert_int_equal(s->id, p->replaced);
    assert_string_equal(s->content_type, "text/plain");
    expect_bytes(f, "/replaced", "new");
}

/* Behaviour that depends on persisted state; every request here is refused
 * or a duplicate, so the state stays as check_population expects. */
static void check_population_behaviour(fx *f) {
    outcome o = append_prod(f, "/bin", OCTET, "C", "p1", 0, 2, 0);
    assert_int_equal(o.result, RN_OK_DUPLICATE);
    assert_int_equal(o.ack_seq, 2);
    o = append_prod(f, "/bin", OCTET, "E", "p1", 0, 4, 0);
    assert_int_equal(o.result, RN_ERR_SEQ_GAP);
    assert_int_equal(o.expected_seq, 3);
    o = append_prod(f, "/bin", OCTET, "z", "p2", 2, 0, 0);
    assert_int_equal(o.result, RN_ERR_STALE_EPOCH);
    assert_int_equal(o.current_epoch, 3);
    assert_int_equal(append_seq(f, "/bin", OCTET, "z", "002").result, RN_ERR_SEQ_REGRESSION);
    o = append_prod(f, "/closed", "text/plain", "bye", "c", 2, 0, 1);
    assert_int_equal(o.result, RN_OK_DUPLICATE);
    assert_int_equal(append_ct(f, "/closed", "text/plain", "more", 0).result, RN_ERR_CLOSED);
    assert_int_equal(append(f, "/closed2", "more").result, RN_ERR_CLOSED);
    assert_int_equal(close_only(f, "/closed2").result, RN_OK_DUPLICATE);
    assert_int_equal(create_full(f, "/ttl", NULL, NULL, 3600, -1, 0).result, RN_OK_EXISTS);
    assert_int_equal(append(f, "/gone", "x").result, RN_ERR_NOT_FOUND);
    assert_int_equal(append_ct(f, "/json", JSON, "[]", 0).result, RN_ERR_JSON_EMPTY_ARRAY);
}

static void check_new_ids_after(fx *f, const population *p) {
    uint64_t max = 0;
    const uint64_t all[] = {p->bin, p->json, p->closed,   p->closed2,
                            p->ttl, p->exp,  p->replaced, p->gone};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        max = all[i] > max ? all[i] : max;
    outcome o = create(f, "/brand-new", NULL, NULL);
    assert_int_equal(o.result, RN_OK_CREATED);
    assert_true(o.stream_id > max);
}

static void test_restart_after_close_restores_state_from_checkpoint(void **state) {
    fx *f = *state;
    population p = populate(f);
    check_population(f, &p);
    restart_clean(f);
    assert_int_equal(f->stats.checkpoint_streams, 7);
    assert_int_equal(f->stats.streams, 7);
    assert_int_equal(f->stats.records_replayed, 0);
    check_population(f, &p);
    check_population_behaviour(f);
    /* A second clean restart is stable too. */
    restart_clean(f);
    check_population(f, &p);
    check_new_ids_after(f, &p);
}

static void test_restart_after_crash_replays_the_log(void **state) {
    fx *f = *state;
    population p = populate(f);
    restart_crash(f, "crash", NULL);
    assert_int_equal(f->stats.checkpoint_streams, 0);
    assert_true(f->stats.records_replayed > 0);
    assert_int_equal(f->stats.torn_bytes, 0);
    assert_int_equal(f->stats.streams, 7);
    check_population(f, &p);
    check_population_behaviour(f);
    check_new_ids_after(f, &p);
}

static void test_restart_after_crash_rebuilds_stream_files_from_the_log(void **state) {
    fx *f = *state;
    population p = populate(f);
    restart_crash(f, "crash", drop_stream_files);
    check_population(f, &p);
    check_population_behaviour(f);
}

/* The newest log segment of dir and where its batches end (segments are
 * preallocated with zeros, so the file's size says nothing). The format is
 * log/segment.h's: a 40-byte header, then batches of a 32-byte header
 * {"RNB2", records, sequence, bytes, crc, 0} and the records. */
static void newest_segment_end(const char *dir, char *path, size_t cap, off_t *end) {
    char wdir[PATH_MAX];
    snprintf(wdir, sizeof wdir, "%s/wal", dir);
    DIR *d = opendir(wdir);
    assert_non_null(d);
    char best[256] = "";
    struct dirent *de;
    while ((de = readdir(d)))
        if (strlen(de->d_name) == 24 && strcmp(de->d_name + 20, ".log") == 0 &&
            strcmp(de->d_name, best) > 0)
            snprintf(best, sizeof best, "%s", de->d_name);
    closedir(d);
    assert_true(best[0]);
    int n = snprintf(path, cap, "%s/%s", wdir, best);
    assert_true(n > 0 && (size_t)n < cap);
    int fd = open(path, O_RDONLY);
    assert_true(fd >= 0);
    off_t pos = 40; /* segment header */
    uint8_t h[32];
    while (pread(fd, h, 32, pos) == 32 && memcmp(h, "RNB2", 4) == 0) {
        uint64_t bytes = 0;
        for (int i = 7; i >= 0; i--)
            bytes = bytes << 8 | h[16 + i];
        pos += 32 + (off_t)bytes;
    }
    close(fd);
    *end = pos;
}

static void test_restart_after_crash_cuts_a_torn_log_tail(void **state) {
    fx *f = *state;
    population p = populate(f);
    run(f);
    /* Bytes of an unfinished batch whose first page never reached the disk
     * (it reads as the preallocated zeros), as a crash during its write
     * can leave them. */
    char seg[PATH_MAX];
    off_t end;
    newest_segment_end(f->dir, seg, sizeof seg, &end);
    int fd = open(seg, O_WRONLY);
    assert_true(fd >= 0);
    const uint8_t garbage[21] = {9, 0, 0, 0, 1, 2, 3, 4, 'g', 'a', 'r', 'b', 'a', 'g', 'e'};
    off_t at = (end / 4096 + 1) * 4096;
    assert_int_equal(pwrite(fd, garbage, sizeof garbage, at), (ssize_t)sizeof garbage);
    close(fd);
    restart_crash(f, "crash", NULL);
    /* the garbage's last non-zero byte ends it */
    assert_int_equal(f->stats.torn_bytes, (uint64_t)(at + 15 - end));
    check_population(f, &p);
    check_population_behaviour(f);
}

static void test_restart_after_crash_combines_checkpoint_and_log(void **state) {
    fx *f = *state;
    population p = populate(f);
    restart_clean(f); /* checkpoint holds the population */
    /* Changes after the checkpoint, only in the log. */
    uint64_t late = create(f, "/late", "text/plain", "L1").stream_id;
    assert_int_equal(append_prod(f, "/late", "text/plain", "L2", "q", 1, 0, 0).result,
                     RN_OK_APPENDED);
    assert_int_equal(append_seq(f, "/late", "text/plain", "L3", "k").result, RN_OK_APPENDED);
    assert_int_equal(delete_stream(f, "/gone").result, RN_ERR_NOT_FOUND);
    restart_crash(f, "crash", NULL);
    assert_int_equal(f->stats.checkpoint_streams, 7);
    assert_int_equal(f->stats.records_replayed, 3);
    assert_int_equal(f->stats.streams, 8);
    check_population(f, &p);
    check_population_behaviour(f);
    rn_stream *s = find(f, "/late");
    assert_non_null(s);
    assert_int_equal(s->id, late);
    expect_bytes(f, "/late", "L1L2L3");
    expect_producer(s, "q", 1, 0);
    expect_last_seq(s, "k");
    check_new_ids_after(f, &p);
    assert_true(find(f, "/brand-new")->id > late);
}

static population cut_population; /* for cut_to_checkpoint */

static void cut_stream_file(const char *copy, uint64_t id, off_t len) {
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/streams/%02x/%016llx.dat", copy, (unsigned)(id & 0xff),
             (unsigned long long)id);
    assert_int_equal(truncate(path, len), 0);
}

/* Loses what was written to /bin's and /json's files after the checkpoint,
 * as unsynced pages would be lost in a power failure. */
static void cut_to_checkpoint(const char *copy) {
    cut_stream_file(copy, cut_population.bin, (off_t)strlen(BIN_BYTES));
    cut_stream_file(copy, cut_population.json, (off_t)strlen(JSON_BYTES));
}

static void test_restart_after_crash_replays_post_checkpoint_changes_to_old_streams(void **state) {
    fx *f = *state;
    cut_population = populate(f);
    restart_clean(f);
    /* Mutate checkpointed streams; then crash and lose the stream files'
     * unsynced pages: only the checkpoint and the log remain. */
    assert_int_equal(append_prod(f, "/bin", OCTET, "D", "p1", 0, 3, 0).result, RN_OK_APPENDED);
    assert_int_equal(append_ct(f, "/json", JSON, "[3]", 1).result, RN_OK_APPENDED);
    assert_int_equal(delete_stream(f, "/ttl").result, RN_OK_DELETED);
    restart_crash(f, "crash", cut_to_checkpoint);
    expect_bytes(f, "/bin", BIN_BYTES "D");
    expect_producer(find(f, "/bin"), "p1", 0, 3);
    expect_bytes(f, "/json", JSON_BYTES "3\n");
    assert_int_equal(find(f, "/json")->closed, 1);
    assert_null(find(f, "/ttl"));
}

/* Number of the oldest log segment in f->dir (UINT64_MAX: none; right after
 * a checkpoint every segment may be gone until the next write opens one). */
static uint64_t lowest_segment(fx *f) {
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/wal", f->dir);
    DIR *d = opendir(path);
    assert_non_null(d);
    uint64_t low = UINT64_MAX;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (strlen(de->d_name) != 24)
            continue;
        uint64_t n = strtoull(de->d_name, NULL, 10);
        low = n < low ? n : low;
    }
    closedir(d);
    return low;
}

static void test_background_checkpoints_and_crash_keep_all_data(void **state) {
    fx *f = *state;
    /* Reopen with a small log segment size and frequent checkpoints. */
    close_engine(f, f->e);
    f->segment_bytes = 2048;
    f->checkpoint_bytes = 4096;
    f->e = open_at(f, f->dir);
    uint64_t first_segment = lowest_segment(f);
    assert_true(first_segment != UINT64_MAX);
    enum { STREAMS = 3, ROUNDS = 120 };
    static const char *paths[STREAMS] = {"/bg0", "/bg1", "/bg2"};
    rn_buf want[STREAMS] = {{0}};
    for (int i = 0; i < STREAMS; i++)
        assert_int_equal(create(f, paths[i], NULL, NULL).result, RN_OK_CREATED);
    char chunk[STREAMS][ROUNDS][64];
    req r[STREAMS];
    for (int round = 0; round < ROUNDS; round++) {
        /* One append per stream back to back, so batches hold several. */
        for (int i = 0; i < STREAMS; i++) {
            int n = snprintf(chunk[i][round], sizeof chunk[i][round], "<%d:%d:%.*s>", i, round,
                             (round * 7 + i) % 40, "----------------------------------------");
            rn_buf_append(&want[i], chunk[i][round], (size_t)n);
            req_init(&r[i], RN_OP_APPEND, paths[i]);
            req_text(&r[i], OCTET, chunk[i][round]);
            req_producer(&r[i], "w", 0, (uint64_t)round);
            rn_engine_submit(f->e, &r[i].op);
        }
        run(f);
        for (int i = 0; i < STREAMS; i++) {
            assert_int_equal(r[i].out.result, RN_OK_APPENDED);
        }
    }
    /* Checkpoints happened in the background and dropped old segments. */
    /* (lowest_segment is UINT64_MAX when none is left.) The checkpoint
     * written at the reopen above held no streams, so the crash-restart
     * below finding all of them in one also shows a background checkpoint
     * ran. */
    assert_true(lowest_segment(f) > first_segment);

    restart_crash(f, "crash", NULL);
    assert_true(f->stats.checkpoint_streams == STREAMS);
    for (int i = 0; i < STREAMS; i++) {
        expect_bytes_from(f, paths[i], 0, want[i].data, want[i].len);
        expect_producer(find(f, paths[i]), "w", 0, ROUNDS - 1);
    }
    restart_clean(f);
    for (int i = 0; i < STREAMS; i++) {
        expect_bytes_from(f, paths[i], 0, want[i].data, want[i].len);
        rn_buf_free(&want[i]);
    }
}

static void test_restart_keeps_expired_streams_absent(void **state) {
    fx *f = *state;
    create_full(f, "/past", NULL, "x", -1, rn_now_ms() - 1, 0);
    create(f, "/live", NULL, "y");
    restart_crash(f, "crash", NULL);
    assert_null(find(f, "/past"));
    assert_non_null(find(f, "/live"));
    run(f);
    restart_clean(f);
    assert_null(find(f, "/past"));
    assert_int_equal(f->stats.streams, 1);
}

static void test_damaged_checkpoint_refuses_to_open(void **state) {
    fx *f = *state;
    create(f, "/s", NULL, "abc");
    close_engine(f, f->e);
    f->e = NULL;
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/checkpoint", f->dir);
    int fd = open(path, O_RDWR);
    assert_true(fd >= 0);
    uint8_t c;
    assert_int_equal(pread(fd, &c, 1, 20), 1);
    c ^= 0xff;
    assert_int_equal(pwrite(fd, &c, 1, 20), 1);
    close(fd);
    open_tiers(f, f->dir);
    rn_engine_config cfg = {.data_dir = f->dir,
                            .tiers = f->tiers,
                            .wal_segment_bytes = f->segment_bytes,
                            .checkpoint_bytes = f->checkpoint_bytes};
    char err[256] = "";
    rn_recovery_stats st;
    assert_null(rn_engine_open(&f->loop, &cfg, &st, err, sizeof err));
    assert_true(strlen(err) > 0);
    rn_tiers_close(f->tiers);
    f->tiers = NULL;
}

/* The checkpoint at close fails at its last step, the sync of the data
 * directory (its open refused as at the file descriptor limit): the
 * checkpoint is not durable, so the log segments it would replace stay,
 * and the next open finds every write. Before, the failed open was skipped
 * and the checkpoint reported success, and its segments were dropped. */
static void test_checkpoint_failing_its_directory_sync_keeps_the_log(void **state) {
    fx *f = *state;
    create(f, "/kept", NULL, "abc");
    assert_int_equal(append(f, "/kept", "def").result, RN_OK_APPENDED);
    uint64_t oldest = lowest_segment(f);
    assert_true(oldest != UINT64_MAX);
    assert_int_equal(rn_fault_arm("dir-sync", 1, EMFILE), 0);
    close_engine(f, f->e);
    f->e = NULL;
    assert_int_equal(rn_fault_fail("dir-sync"), 0); /* the checkpoint took the failure */
    assert_int_equal(lowest_segment(f), oldest);
    f->e = open_at(f, f->dir);
    expect_bytes(f, "/kept", "abcdef");
    restart_clean(f); /* a checkpoint that succeeds drops them */
    assert_true(lowest_segment(f) > oldest);
    expect_bytes(f, "/kept", "abcdef");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        T(test_restart_after_close_restores_state_from_checkpoint),
        T(test_restart_after_crash_replays_the_log),
        T(test_restart_after_crash_rebuilds_stream_files_from_the_log),
        T(test_restart_after_crash_cuts_a_torn_log_tail),
        T(test_restart_after_crash_combines_checkpoint_and_log),
        T(test_restart_after_crash_replays_post_checkpoint_changes_to_old_streams),
        T(test_background_checkpoints_and_crash_keep_all_data),
        T(test_restart_keeps_expired_streams_absent),
        T(test_damaged_checkpoint_refuses_to_open),
        T(test_checkpoint_failing_its_directory_sync_keeps_the_log),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
