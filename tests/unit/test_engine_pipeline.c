/*
 * test_engine_pipeline.c - unit tests of mutations in flight in the engine
 * (src/engine/engine.{h,c}): back-to-back mutations of one and of several
 * streams apply and complete in order, and a failed log sync or a stream
 * file that cannot be reserved answers unavailable, changes nothing (also
 * after a crash) and leaves the mutations queued behind it consistent.
 *
 * How: engine_fixture.h (a fresh data directory and engine per test; log
 * sync failures injected with rn_engine_inject_sync_failures).
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <unistd.h>

#include "engine_fixture.h"

/* ------------------------------------------------------------------------ */
/* Back-to-back mutations                                                    */

static void test_back_to_back_mutations_apply_in_order(void **state) {
    fx *f = *state;
    enum { N = 14 };
    req r[N];
    static const char *chunks[] = {"a", "bb", "ccc", "dddd", "eeeee"};
    req_init(&r[0], RN_OP_CREATE, "/b2b");
    req_text(&r[0], OCTET, "0");
    for (int i = 0; i < 5; i++) {
        req_init(&r[1 + i], RN_OP_APPEND, "/b2b");
        req_text(&r[1 + i], OCTET, chunks[i]);
    }
    /* Producer seqs 0..4: each is checked against the state the previous
     * one left, so all succeed only if they are evaluated in order. */
    static const char digits[][2] = {"0", "1", "2", "3", "4"};
    for (int i = 0; i < 5; i++) {
        req_init(&r[6 + i], RN_OP_APPEND, "/b2b");
        req_text(&r[6 + i], OCTET, digits[i]);
        req_producer(&r[6 + i], "w", 0, (uint64_t)i);
    }
    req_init(&r[11], RN_OP_APPEND, "/b2b"); /* repeat of seq 2 */
    req_text(&r[11], OCTET, "2");
    req_producer(&r[11], "w", 0, 2);
    req_init(&r[12], RN_OP_APPEND, "/b2b"); /* close */
    r[12].op.in.close = 1;
    req_init(&r[13], RN_OP_APPEND, "/b2b"); /* after close */
    req_text(&r[13], OCTET, "late");
    for (int i = 0; i < N; i++)
        rn_engine_submit(f->e, &r[i].op);
    run(f);
    uint64_t tail = 1;
    assert_int_equal(r[0].out.result, RN_OK_CREATED);
    assert_int_equal(r[0].out.next_offset, 1);
    for (int i = 1; i <= 10; i++) {
        assert_int_equal(r[i].out.done, 1);
        assert_int_equal(r[i].out.result, RN_OK_APPENDED);
        tail += r[i].op.in.body_len;
        assert_int_equal(r[i].out.next_offset, tail);
    }
    assert_int_equal(r[11].out.result, RN_OK_DUPLICATE);
    assert_int_equal(r[11].out.ack_seq, 4);
    assert_int_equal(r[12].out.result, RN_OK_APPENDED);
    assert_int_equal(r[12].out.closed, 1);
    assert_int_equal(r[13].out.result, RN_ERR_CLOSED);
    for (int i = 0; i < N; i++) {
        assert_int_equal(r[i].out.order, i);
    }
    expect_bytes(f, "/b2b", "0abbcccddddeeeee01234");
}

static void test_back_to_back_mutations_of_two_streams_interleave_correctly(void **state) {
    fx *f = *state;
    enum { N = 40 };
    req r[N];
    static const char *paths[] = {"/s0", "/s1"};
    static const char letters[][2] = {"a", "b", "c", "d", "e", "f", "g", "h", "i", "j",
                                      "k", "l", "m", "n", "o", "p", "q", "r", "s", "t"};
    req_init(&r[0], RN_OP_CREATE, paths[0]);
    req_init(&r[1], RN_OP_CREATE, paths[1]);
    for (int i = 2; i < N; i++) {
        req_init(&r[i], RN_OP_APPEND, paths[i % 2]);
        req_text(&r[i], OCTET, letters[i / 2]);
    }
    for (int i = 0; i < N; i++)
        rn_engine_submit(f->e, &r[i].op);
    run(f);
    for (int i = 0; i < N; i++) {
        assert_int_equal(r[i].out.done, 1);
        assert_int_equal(r[i].out.result, i < 2 ? RN_OK_CREATED : RN_OK_APPENDED);
        assert_int_equal(r[i].out.next_offset, (uint64_t)(i / 2));
    }
    /* Per stream, completions follow submission order. */
    for (int i = 2; i < N; i++)
        assert_true(r[i].out.order > r[i - 2].out.order);
    expect_bytes(f, "/s0", "bcdefghijklmnopqrst");
    expect_bytes(f, "/s1", "bcdefghijklmnopqrst");
}

static void test_back_to_back_delete_and_recreate(void **state) {
    fx *f = *state;
    uint64_t old_id = create(f, "/r", NULL, "old").stream_id;
    req r[6];
    req_init(&r[0], RN_OP_APPEND, "/r");
    req_text(&r[0], OCTET, "+");
    req_init(&r[1], RN_OP_DELETE, "/r");
    req_init(&r[2], RN_OP_APPEND, "/r");
    req_text(&r[2], OCTET, "lost");
    req_init(&r[3], RN_OP_CREATE, "/r");
    req_text(&r[3], "text/plain", "new");
    req_init(&r[4], RN_OP_CREATE, "/r"); /* repeat: exists */
    req_text(&r[4], "text/plain", NULL);
    req_init(&r[5], RN_OP_APPEND, "/r");
    req_text(&r[5], "text/plain", "!");
    for (int i = 0; i < 6; i++)
        rn_engine_submit(f->e, &r[i].op);
    run(f);
    assert_int_equal(r[0].out.result, RN_OK_APPENDED);
    assert_int_equal(r[1].out.result, RN_OK_DELETED);
    assert_int_equal(r[2].out.result, RN_ERR_NOT_FOUND);
    assert_int_equal(r[3].out.result, RN_OK_CREATED);
    assert_true(r[3].out.stream_id != old_id);
    assert_int_equal(r[4].out.result, RN_OK_EXISTS);
    assert_int_equal(r[5].out.result, RN_OK_APPENDED);
    assert_int_equal(r[5].out.next_offset, 4);
    for (int i = 0; i < 6; i++) {
        assert_int_equal(r[i].out.done, 1);
    }
    expect_bytes(f, "/r", "new!");
}

/* ------------------------------------------------------------------------ */
/* Failed log syncs                                                          */

static void test_failed_sync_answers_unavailable_and_changes_nothing(void **state) {
    fx *f = *state;
    create(f, "/u", NULL, "abc");
    append_prod(f, "/u", OCTET, "1", "w", 0, 0, 0);
    append_seq(f, "/u", OCTET, "2", "s1");
    rn_engine_inject_sync_failures(f->e, 1);
    req r;
    req_init(&r, RN_OP_APPEND, "/u");
    req_text(&r, OCTET, "LOST");
    req_producer(&r, "w", 0, 1);
    req_seq(&r, "s2");
    r.op.in.close = 1;
    outcome o = run_req(f, &r);
    assert_int_equal(o.result, RN_ERR_UNAVAILABLE);
    rn_stream *s = find(f, "/u");
    assert_int_equal(s->tail, 5);
    assert_int_equal(s->closed, 0);
    expect_producer(s, "w", 0, 0);
    expect_last_seq(s, "s1");
    expect_bytes(f, "/u", "abc12");
    /* The same request again succeeds: seq 1 is not a duplicate, s2 is not
     * a regression. */
    req_init(&r, RN_OP_APPEND, "/u");
    req_text(&r, OCTET, "ok");
    req_producer(&r, "w", 0, 1);
    req_seq(&r, "s2");
    o = run_req(f, &r);
    assert_int_equal(o.result, RN_OK_APPENDED);
    assert_int_equal(o.next_offset, 7);
    expect_bytes(f, "/u", "abc12ok");
}

static void test_failed_create_leaves_no_stream(void **state) {
    fx *f = *state;
    rn_engine_inject_sync_failures(f->e, 1);
    outcome o = create(f, "/n", "text/plain", "lost");
    assert_int_equal(o.result, RN_ERR_UNAVAILABLE);
    assert_int_equal(o.stream_id, 0);
    assert_null(find(f, "/n"));
    assert_int_equal(append_ct(f, "/n", "text/plain", "x", 0).result, RN_ERR_NOT_FOUND);
    o = create(f, "/n", OCTET, "kept");
    assert_int_equal(o.result, RN_OK_CREATED);
    restart_crash(f, "crash", drop_stream_files);
    rn_stream *s = find(f, "/n");
    assert_non_null(s);
    assert_string_equal(s->content_type, OCTET);
    expect_bytes(f, "/n", "kept");
}

static void test_failed_append_is_absent_after_crash_when_log_moved_on(void **state) {
    fx *f = *state;
    create(f, "/u", NULL, "abc");
    rn_engine_inject_sync_failures(f->e, 1);
    assert_int_equal(append(f, "/u", "LOST").result, RN_ERR_UNAVAILABLE);
    assert_int_equal(append(f, "/u", "def").result, RN_OK_APPENDED);
    restart_crash(f, "crash", drop_stream_files);
    expect_bytes(f, "/u", "abcdef");
}

static void test_failed_append_is_absent_after_crash_right_after_it(void **state) {
    /* Nothing is written after the failure before the process dies. */
    fx *f = *state;
    create(f, "/u", NULL, "abc");
    rn_engine_inject_sync_failures(f->e, 1);
    assert_int_equal(append(f, "/u", "LOST").result, RN_ERR_UNAVAILABLE);
    restart_crash(f, "crash", drop_stream_files);
    expect_bytes(f, "/u", "abc");
    assert_int_equal(append(f, "/u", "def").result, RN_OK_APPENDED);
    expect_bytes(f, "/u", "abcdef");
}

static void test_failed_sync_fails_back_to_back_queue_consistently(void **state) {
    /* Mutations queued behind a failed one are evaluated against the state
     * it left (unchanged), so their offsets and producer checks are right. */
    fx *f = *state;
    create(f, "/u", NULL, NULL);
    rn_engine_inject_sync_failures(f->e, 1);
    req r[3];
    for (int i = 0; i < 3; i++) {
        req_init(&r[i], RN_OP_APPEND, "/u");
        req_text(&r[i], OCTET, i == 0 ? "A" : i == 1 ? "B" : "C");
        req_producer(&r[i], "w", 0, i == 0 ? 0 : (uint64_t)(i - 1));
        rn_engine_submit(f->e, &r[i].op);
    }
    run(f);
    assert_int_equal(r[0].out.result, RN_ERR_UNAVAILABLE);
    assert_int_equal(r[1].out.result, RN_OK_APPENDED); /* seq 0 again */
    assert_int_equal(r[1].out.next_offset, 1);
    assert_int_equal(r[2].out.result, RN_OK_APPENDED); /* seq 1 */
    assert_int_equal(r[2].out.next_offset, 2);
    expect_bytes(f, "/u", "BC");
    restart_crash(f, "crash", drop_stream_files);
    expect_bytes(f, "/u", "BC");
    expect_producer(find(f, "/u"), "w", 0, 1);
}

/* Places a regular file where the stream files directory for `id` would go,
 * so that writing the stream's file fails. Returns its path in out. */
static void block_stream_dir(fx *f, uint64_t id, char *out, size_t cap) {
    snprintf(out, cap, "%s/streams/%02x", f->dir, (unsigned)(id & 0xff));
    int fd = open(out, O_WRONLY | O_CREAT | O_EXCL, 0644);
    assert_true(fd >= 0);
    close(fd);
}

static void test_append_whose_file_cannot_be_reserved_changes_nothing(void **state) {
    fx *f = *state;
    uint64_t id = create(f, "/r", NULL, NULL).stream_id; /* no data: no file yet */
    char blocker[PATH_MAX];
    block_stream_dir(f, id, blocker, sizeof blocker);
    outcome o = append(f, "/r", "abc");
    assert_int_equal(o.result, RN_ERR_UNAVAILABLE);
    assert_int_equal(o.next_offset, 0);
    assert_false(rn_engine_busy(f->e));
    assert_int_equal(find(f, "/r")->tail, 0);
    assert_int_equal(unlink(blocker), 0);
    o = append(f, "/r", "def");
    assert_int_equal(o.result, RN_OK_APPENDED);
    expect_bytes(f, "/r", "def");
}

static void test_create_whose_file_cannot_be_reserved_creates_nothing(void **state) {
    fx *f = *state;
    /* The first stream of a fresh directory gets id 1. */
    char blocker[PATH_MAX];
    block_stream_dir(f, 1, blocker, sizeof blocker);
    outcome o = create(f, "/r", NULL, "abc");
    assert_int_equal(o.result, RN_ERR_UNAVAILABLE);
    assert_int_equal(o.stream_id, 0);
    assert_null(find(f, "/r"));
    assert_int_equal(unlink(blocker), 0);
    o = create(f, "/r", NULL, "def");
    assert_int_equal(o.result, RN_OK_CREATED);
    expect_bytes(f, "/r", "def");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        T(test_back_to_back_mutations_apply_in_order),
        T(test_back_to_back_mutations_of_two_streams_interleave_correctly),
        T(test_back_to_back_delete_and_recreate),
        T(test_failed_sync_answers_unavailable_and_changes_nothing),
        T(test_failed_create_leaves_no_stream),
        T(test_failed_append_is_absent_after_crash_when_log_moved_on),
        T(test_failed_append_is_absent_after_crash_right_after_it),
        T(test_failed_sync_fails_back_to_back_queue_consistently),
        T(test_append_whose_file_cannot_be_reserved_changes_nothing),
        T(test_create_whose_file_cannot_be_reserved_creates_nothing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
