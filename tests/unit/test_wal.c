/*
 * test_wal.c - unit tests of the write-ahead log's writer (src/log/wal.{h,c}):
 * group commit, batch boundaries, after-sync hooks, rotation, dropping old
 * segments, and failed syncs (the log moves to a new segment before it
 * reports the failure, so failed records are never replayed).
 *
 * How: every test gets a fresh temporary data directory (mkdtemp) and its own
 * libuv loop (wal_fixture.h). A "session" recovers the log, opens it, submits
 * entries and runs the loop until every callback fired, then closes it, like
 * one run of the server. Payloads are generated deterministically from their
 * index, so recovery output can be compared byte for byte with what was
 * submitted.
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

#include "wal_fixture.h"

/* An after_sync hook that fails for payload id 3. */
static int item_after_sync(rn_wal_entry *e) {
    item *it = e->arg;
    it->after_sync_runs++;
    it->after_sync_before_done = it->done == 0;
    return it->id == 3 ? -EIO : 0;
}

/* ------------------------------------------------------------------------ */
/* Tests: normal operation                                                   */

static void test_recover_of_empty_directory_finds_nothing(void **state) {
    fx *f = *state;
    recs r = {0};
    rn_wal_recovery rec;
    memset(&rec, 0xff, sizeof rec);
    assert_int_equal(recover(f, 0, &r, &rec), 0);
    assert_int_equal(r.n, 0);
    assert_int_equal(rec.records, 0);
    assert_int_equal(rec.last_segment, 0);
    assert_int_equal(rec.torn_bytes, 0);
    assert_int_equal(count_segments(f), 0);
    recs_free(&r);
}

static void test_submitted_records_are_replayed_in_order_byte_exact(void **state) {
    fx *f = *state;
    tracker t = {0};
    rn_wal *w = open_log(f, 64u << 20, &t);
    assert_int_equal(rn_wal_current_segment(w), 1);
    enum { N = 60 };
    item *v = items_new(&t, 0, N);
    /* Some one at a time, the rest in a burst. */
    submit_each(f, w, v, 10);
    submit_all(f, w, v + 10, N - 10);
    /* Ten batches of one, then one of the first of the burst and one of
     * the other 49 (they gathered while it was in flight). */
    assert_int_equal(t.batches, 12);
    uint64_t bytes = 12 * BATCH;
    for (int i = 0; i < N; i++) {
        assert_int_equal(v[i].done, 1);
        assert_int_equal(v[i].status, 0);
        bytes += 8 + v[i].len;
    }
    assert_int_equal(rn_wal_bytes_written(w), bytes);
    rn_wal_close(w);
    items_free(v, N);

    recs r = {0};
    rn_wal_recovery rec;
    assert_int_equal(recover(f, 0, &r, &rec), 0);
    expect_range(&r, 0, N);
    assert_int_equal(rec.records, N);
    assert_int_equal(rec.torn_bytes, 0);
    assert_int_equal(rec.last_segment, 1);
    assert_int_equal(rec.last_valid_end, HEADER + bytes);
    assert_int_equal(seg_size(f, 1), HEADER + bytes);
    recs_free(&r);
}

static void test_after_sync_runs_once_per_durable_entry_before_its_callback(void **state) {
    fx *f = *state;
    tracker t = {0};
    rn_wal *w = open_log(f, 64u << 20, &t);
    enum { N = 8 };
    item *lead = items_new(&t, 100, 2);
    item *v = items_new(&t, 0, 2 * N);
    for (int i = 0; i < 2 * N; i++)
        v[i].entry.after_sync = item_after_sync;
    lead[0].entry.after_sync = lead[1].entry.after_sync = item_after_sync;
    submit_one_batch(f, w, &lead[0], v, N, 0);
    for (int i = 0; i < N; i++) {
        assert_int_equal(v[i].status, 0);
        assert_int_equal(v[i].after_sync_runs, 1);
        assert_true(v[i].after_sync_before_done);
        assert_int_equal(v[i].after_sync_status, v[i].id == 3 ? -EIO : 0);
    }
    /* A failed batch: nothing is durable, so the hook does not run. */
    submit_one_batch(f, w, &lead[1], v + N, N, 1);
    for (int i = N; i < 2 * N; i++) {
        assert_true(v[i].status < 0);
        assert_int_equal(v[i].after_sync_runs, 0);
        assert_int_equal(v[i].after_sync_status, 0);
    }
    assert_int_equal(lead[1].after_sync_runs, 1);
    rn_wal_close(w);
    items_free(v, 2 * N);
    items_free(lead, 2);
}

/* A callback that submits another entry (as an HTTP answer does when it
 * runs the next pipelined request), and a batch hook that makes the next
 * batch fail. */
static rn_wal *reentry_log;
static item *reentry_next;
static void item_done_then_submit(rn_wal_entry *e, int status) {
    item_done(e, status);
    if (reentry_next) {
        rn_wal_submit(reentry_log, &reentry_next->entry);
        reentry_next = NULL;
    }
}
static int hook_fails_next;
static void fail_next_batch(void *arg) {
    count_batch(arg);
    if (hook_fails_next) {
        rn_wal_inject_sync_failures(reentry_log, 1);
        hook_fails_next = 0;
    }
}

static void test_an_entry_submitted_by_a_callback_waits_for_the_batch_hook(void **state) {
    fx *f = *state;
    tracker t = {0};
    rn_wal *w = open_log(f, 64u << 20, NULL);
    rn_wal_set_batch_hook(w, fail_next_batch, &t);
    item *v = items_new(&t, 0, 2);
    v[0].entry.done = item_done_then_submit;
    reentry_log = w;
    reentry_next = &v[1];
    hook_fails_next = 1;
    rn_wal_submit(w, &v[0].entry);
    run(f);
    assert_int_equal(v[0].status, 0);
    /* The hook ran after v[0]'s callback submitted v[1]; v[1]'s batch had
     * not started, so the failure the hook injected is v[1]'s. */
    assert_int_equal(v[1].done, 1);
    assert_true(v[1].status < 0);
    rn_wal_close(w);
    items_free(v, 2);
}

static void test_concurrent_submits_share_batches_and_complete_in_order(void **state) {
    fx *f = *state;
    tracker t = {0};
    rn_wal *w = open_log(f, 64u << 20, &t);
    enum { N = 300 };
    item *v = items_new(&t, 0, N);
    for (int i = 0; i < N; i++)
        rn_wal_submit(w, &v[i].entry);
    /* Nothing completes before the loop runs. */
    for (int i = 0; i < N; i++)
        assert_int_equal(v[i].done, 0);
    assert_true(rn_wal_busy(w));
    run(f);
    assert_false(rn_wal_busy(w));
    for (int i = 0; i < N; i++) {
        assert_int_equal(v[i].done, 1);
        assert_int_equal(v[i].status, 0);
        assert_int_equal(v[i].order, i);
    }
    /* The first submit starts a batch at once; the other 299 gather while it
     * is in flight and share the second batch (and its one sync). */
    assert_int_equal(t.batches, 2);
    assert_int_equal(v[0].batch, 0);
    for (int i = 1; i < N; i++)
        assert_int_equal(v[i].batch, 1);
    rn_wal_close(w);
    items_free(v, N);

    recs r = {0};
    rn_wal_recovery rec;
    assert_int_equal(recover(f, 0, &r, &rec), 0);
    expect_range(&r, 0, N);
    recs_free(&r);
}

static void test_records_of_successive_sessions_are_replayed_in_order(void **state) {
    fx *f = *state;
    session(f, 64u << 20, 0, 7);
    session(f, 64u << 20, 7, 5);
    session(f, 64u << 20, 12, 9);
    /* Each open starts a new segment. */
    assert_int_equal(count_segments(f), 3);
    assert_int_equal(header_prev_end(f, 2), seg_size(f, 1));
    assert_int_equal(header_prev_end(f, 3), seg_size(f, 2));
    recs r = {0};
    rn_wal_recovery rec;
    assert_int_equal(recover(f, 0, &r, &rec), 0);
    expect_range(&r, 0, 21);
    assert_int_equal(rec.last_segment, 3);
    recs_free(&r);
}

static void test_segment_rotation_spreads_records_and_replays_all(void **state) {
    fx *f = *state;
    tracker t = {0};
    const uint64_t seg_bytes = 600;
    rn_wal *w = open_log(f, seg_bytes, &t);
    enum { N = 70 };
    item *v = items_new(&t, 100, N); /* ids 100.. avoid the 300 KB payload */
    submit_each(f, w, v, N);
    uint64_t last = rn_wal_current_segment(w);
    rn_wal_close(w);
    items_free(v, N);

    assert_true(last >= 5);
    assert_int_equal(count_segments(f), last);
    for (uint64_t s = 1; s < last; s++) {
        /* A segment is left once it reached segment_bytes, and the next one
         * records exactly where it ended. */
        assert_true(seg_size(f, s) >= seg_bytes);
        assert_int_equal(header_prev_end(f, s + 1), seg_size(f, s));
    }
    recs r = {0};
    rn_wal_recovery rec;
    assert_int_equal(recover(f, 0, &r, &rec), 0);
    expect_range(&r, 100, N);
    assert_int_equal(rec.last_segment, last);
    assert_int_equal(rec.torn_bytes, 0);
    recs_free(&r);
}

static void test_rotate_makes_next_batch_start_a_new_segment(void **state) {
    fx *f = *state;
    tracker t = {0};
    rn_wal *w = open_log(f, 64u << 20, &t);
    item *v = items_new(&t, 0, 6);
    submit_each(f, w, v, 3);
    assert_int_equal(rn_wal_current_segment(w), 1);
    assert_int_equal(rn_wal_rotate(w), 2);
    submit_each(f, w, v + 3, 3);
    assert_int_equal(rn_wal_current_segment(w), 2);
    rn_wal_close(w);
    items_free(v, 6);
    assert_int_equal(header_prev_end(f, 2), seg_size(f, 1));
    recs r = {0};
    rn_wal_recovery rec;
    assert_int_equal(recover(f, 2, &r, &rec), 0);
    expect_range(&r, 3, 3);
    recs_free(&r);
}

static void test_drop_before_removes_older_segments(void **state) {
    fx *f = *state;
    session(f, 64u << 20, 0, 4);              /* segment 1 */
    session(f, 64u << 20, 4, 4);              /* segment 2 */
    session(f, 64u << 20, 8, 4);              /* segment 3 */
    rn_wal *w = open_log(f, 64u << 20, NULL); /* segment 4 */
    rn_wal_drop_before(w, 3);
    assert_false(seg_exists(f, 1));
    assert_false(seg_exists(f, 2));
    assert_true(seg_exists(f, 3));
    assert_true(seg_exists(f, 4));
    rn_wal_close(w);
    recs r = {0};
    rn_wal_recovery rec;
    assert_int_equal(recover(f, 3, &r, &rec), 0);
    expect_range(&r, 8, 4);
    assert_int_equal(rec.last_segment, 4);
    recs_free(&r);
}

static void test_recover_from_segment_skips_earlier_segments(void **state) {
    fx *f = *state;
    session(f, 64u << 20, 0, 5);  /* segment 1 */
    session(f, 64u << 20, 5, 6);  /* segment 2 */
    session(f, 64u << 20, 11, 3); /* segment 3 */
    recs r = {0};
    rn_wal_recovery rec;
    assert_int_equal(recover(f, 2, &r, &rec), 0);
    expect_range(&r, 5, 9);
    assert_int_equal(rec.records, 9);
    recs_free(&r);
    assert_int_equal(recover(f, 3, &r, &rec), 0);
    expect_range(&r, 11, 3);
    recs_free(&r);
    /* Starting past every segment replays nothing, and numbering continues
     * after the starting point so a new segment is not mistaken for an old. */
    assert_int_equal(recover(f, 9, &r, &rec), 0);
    assert_int_equal(r.n, 0);
    assert_int_equal(rec.last_segment, 8);
    recs_free(&r);
    /* Earlier segments were left alone. */
    assert_int_equal(recover(f, 0, &r, &rec), 0);
    expect_range(&r, 0, 14);
    recs_free(&r);
}

static int stop_after_three(void *arg, const uint8_t *payload, size_t len) {
    int *seen = arg;
    (void)payload;
    (void)len;
    return ++*seen == 3 ? 77 : 0;
}

static void test_replay_callback_can_abort_recovery(void **state) {
    fx *f = *state;
    session(f, 64u << 20, 0, 8);
    int seen = 0;
    rn_wal_recovery rec;
    assert_int_equal(rn_wal_recover(f->dir, 0, stop_after_three, &seen, &rec), 77);
    assert_int_equal(seen, 3);
}

/* ------------------------------------------------------------------------ */
/* Tests: failed syncs                                                       */

static int segment_contains(const fx *f, uint64_t seg, const uint8_t *needle, size_t n) {
    char p[PATH_MAX];
    seg_path(f, seg, p, sizeof p);
    size_t len;
    uint8_t *data = read_file(p, &len);
    int found = memmem(data, len, needle, n) != NULL;
    free(data);
    return found;
}

static void test_failed_sync_fails_batch_and_log_continues_in_new_segment(void **state) {
    fx *f = *state;
    tracker t = {0};
    rn_wal *w = open_log(f, 64u << 20, &t);
    item *a = items_new(&t, 0, 3);   /* acknowledged */
    item *b = items_new(&t, 100, 4); /* fails */
    item *c = items_new(&t, 200, 3); /* acknowledged, after the failure */
    submit_all(f, w, a, 2);
    uint64_t seg_before = rn_wal_current_segment(w);
    uint64_t written_before = rn_wal_bytes_written(w) + BATCH + 8 + a[2].len;
    submit_one_batch(f, w, &a[2], b, 4, 1);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(b[i].done, 1);
        assert_true(b[i].status < 0);
    }
    assert_int_equal(rn_wal_bytes_written(w), written_before);
    submit_all(f, w, c, 3);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(c[i].done, 1);
        assert_int_equal(c[i].status, 0);
    }
    assert_int_equal(rn_wal_current_segment(w), seg_before + 1);
    rn_wal_close(w);

    /* The failed batch's bytes did reach segment 1 (so the next check is
     * meaningful): the new segment's header excludes them. */
    assert_true(segment_contains(f, seg_before, b[1].payload, b[1].len));
    assert_true(header_prev_end(f, seg_before + 1) < seg_size(f, seg_before));

    recs r = {0};
    rn_wal_recovery rec;
    assert_int_equal(recover(f, 0, &r, &rec), 0);
    int ids[] = {0, 1, 2, 200, 201, 202};
    expect_payloads(&r, ids, 6);
    recs_free(&r);
    items_free(a, 3);
    items_free(b, 4);
    items_free(c, 3);
}

static void test_consecutive_failed_syncs_each_leave_the_segment(void **state) {
    fx *f = *state;
    tracker t = {0};
    rn_wal *w = open_log(f, 64u << 20, &t);
    item *a = items_new(&t, 0, 2);
    item *b = items_new(&t, 100, 2);
    item *d = items_new(&t, 200, 2);
    submit_all(f, w, a, 2);
    rn_wal_inject_sync_failures(w, 2);
    /* b[0] and b[1] travel in two batches (the second gathers while the
     * first is in flight); both fail. */
    submit_all(f, w, b, 2);
    assert_int_equal(t.batches, 4);
    submit_all(f, w, d, 2);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(a[i].status, 0);
        assert_true(b[i].status < 0);
        assert_int_equal(d[i].status, 0);
    }
    /* Segment 1 held a and the failed b[0]; b[1] failed in segment 2; d
     * went to segment 3. */
    assert_int_equal(rn_wal_current_segment(w), 3);
    rn_wal_close(w);
    recs r = {0};
    rn_wal_recovery rec;
    assert_int_equal(recover(f, 0, &r, &rec), 0);
    int ids[] = {0, 1, 200, 201};
    expect_payloads(&r, ids, 4);
    recs_free(&r);
    items_free(a, 2);
    items_free(b, 2);
    items_free(d, 2);
}

static void test_failed_batch_sharing_with_queued_entries_fails_only_itself(void **state) {
    /* Entries queued behind the failing batch go into the next batch and
     * succeed. */
    fx *f = *state;
    tracker t = {0};
    rn_wal *w = open_log(f, 64u << 20, &t);
    item *v = items_new(&t, 0, 20);
    rn_wal_inject_sync_failures(w, 1);
    submit_all(f, w, v, 20);
    assert_true(v[0].status < 0); /* the first batch holds only entry 0 */
    for (int i = 1; i < 20; i++)
        assert_int_equal(v[i].status, 0);
    for (int i = 0; i < 20; i++)
        assert_int_equal(v[i].order, i);
    rn_wal_close(w);
    recs r = {0};
    rn_wal_recovery rec;
    assert_int_equal(recover(f, 0, &r, &rec), 0);
    expect_range(&r, 1, 19);
    recs_free(&r);
    items_free(v, 20);
}

static void test_failed_last_batch_is_not_replayed(void **state) {
    /* The process stops (crash, or a plain close) right after a failed
     * batch, before anything else is written: its records were answered
     * with an error, so recovery must not bring them back. */
    fx *f = *state;
    tracker t = {0};
    rn_wal *w = open_log(f, 64u << 20, &t);
    item *a = items_new(&t, 0, 3);
    item *b = items_new(&t, 100, 2);
    submit_all(f, w, a, 2);
    submit_one_batch(f, w, &a[2], b, 2, 1);
    for (int i = 0; i < 2; i++)
        assert_true(b[i].status < 0);
    rn_wal_close(w);
    recs r = {0};
    rn_wal_recovery rec;
    assert_int_equal(recover(f, 0, &r, &rec), 0);
    expect_range(&r, 0, 3);
    recs_free(&r);
    items_free(a, 3);
    items_free(b, 2);
}

#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)

int main(void) {
    const struct CMUnitTest tests[] = {
        T(test_recover_of_empty_directory_finds_nothing),
        T(test_submitted_records_are_replayed_in_order_byte_exact),
        T(test_after_sync_runs_once_per_durable_entry_before_its_callback),
        T(test_an_entry_submitted_by_a_callback_waits_for_the_batch_hook),
        T(test_concurrent_submits_share_batches_and_complete_in_order),
        T(test_records_of_successive_sessions_are_replayed_in_order),
        T(test_segment_rotation_spreads_records_and_replays_all),
        T(test_rotate_makes_next_batch_start_a_new_segment),
        T(test_drop_before_removes_older_segments),
        T(test_recover_from_segment_skips_earlier_segments),
        T(test_replay_callback_can_abort_recovery),
        T(test_failed_sync_fails_batch_and_log_continues_in_new_segment),
        T(test_consecutive_failed_syncs_each_leave_the_segment),
        T(test_failed_batch_sharing_with_queued_entries_fails_only_itself),
        T(test_failed_last_batch_is_not_replayed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
