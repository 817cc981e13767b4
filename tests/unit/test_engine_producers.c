/*
 * test_engine_producers.c - unit tests of what the engine
 * (src/engine/engine.{h,c}) keeps per stream to judge writes: idempotent
 * producers (sequences, epochs, per-stream state), Stream-Seq, closure,
 * and the extensions of ext §5: producer identity and receipts, closed
 * epochs and their history after a rewrite, re-reads after a change, idle
 * producers, the epoch floor and the producer cap, answers given early.
 *
 * How: engine_fixture.h (a fresh data directory and engine per test).
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "engine_fixture.h"
#include "util/blake3.h"

/* ------------------------------------------------------------------------ */
/* Idempotent producers                                                      */

static void test_producer_sequence_rules(void **state) {
    fx *f = *state;
    create(f, "/p", NULL, NULL);
    outcome o = append_prod(f, "/p", OCTET, "a", "w1", 0, 0, 0);
    assert_int_equal(o.result, RN_OK_APPENDED);
    assert_int_equal(o.ack_epoch, 0);
    assert_int_equal(o.ack_seq, 0);
    o = append_prod(f, "/p", OCTET, "b", "w1", 0, 1, 0);
    assert_int_equal(o.result, RN_OK_APPENDED);
    assert_int_equal(o.ack_seq, 1);
    o = append_prod(f, "/p", OCTET, "c", "w1", 0, 2, 0);
    assert_int_equal(o.result, RN_OK_APPENDED);
    expect_bytes(f, "/p", "abc");

    /* Repeats of any earlier seq are duplicates acknowledging the highest. */
    o = append_prod(f, "/p", OCTET, "c", "w1", 0, 2, 0);
    assert_int_equal(o.result, RN_OK_DUPLICATE);
    assert_int_equal(o.ack_epoch, 0);
    assert_int_equal(o.ack_seq, 2);
    assert_int_equal(o.next_offset, 3);
    o = append_prod(f, "/p", OCTET, "a", "w1", 0, 0, 0);
    assert_int_equal(o.result, RN_OK_DUPLICATE);
    assert_int_equal(o.ack_seq, 2);
    expect_bytes(f, "/p", "abc");

    /* A gap names the expected seq. */
    o = append_prod(f, "/p", OCTET, "e", "w1", 0, 4, 0);
    assert_int_equal(o.result, RN_ERR_SEQ_GAP);
    assert_int_equal(o.expected_seq, 3);
    /* An unknown producer must start at 0. */
    o = append_prod(f, "/p", OCTET, "x", "w2", 0, 5, 0);
    assert_int_equal(o.result, RN_ERR_SEQ_GAP);
    assert_int_equal(o.expected_seq, 0);
    /* A new epoch must start at seq 0. */
    assert_int_equal(append_prod(f, "/p", OCTET, "x", "w1", 1, 1, 0).result, RN_ERR_EPOCH_SEQ);
    expect_bytes(f, "/p", "abc");
    o = append_prod(f, "/p", OCTET, "D", "w1", 1, 0, 0);
    assert_int_equal(o.result, RN_OK_APPENDED);
    assert_int_equal(o.ack_epoch, 1);
    assert_int_equal(o.ack_seq, 0);
    /* The old epoch is now closed by the claim, up to its seq 2. */
    o = append_prod(f, "/p", OCTET, "x", "w1", 0, 3, 0);
    assert_int_equal(o.result, RN_ERR_EPOCH_CLOSED);
    assert_int_equal(o.current_epoch, 1);
    assert_int_equal(o.closed_by_history, 0);
    assert_int_equal(o.closed_epoch, 0);
    assert_int_equal(o.closed_seq, 2);
    /* Epochs may jump; the jump closes epoch 1, and epoch 0 is now stale. */
    o = append_prod(f, "/p", OCTET, "E", "w1", 7, 0, 0);
    assert_int_equal(o.result, RN_OK_APPENDED);
    assert_int_equal(o.closes_epoch, 1);
    assert_int_equal(o.closed_epoch, 1);
    assert_int_equal(o.closed_seq, 0);
    o = append_prod(f, "/p", OCTET, "x", "w1", 0, 3, 0);
    assert_int_equal(o.result, RN_ERR_STALE_EPOCH);
    assert_int_equal(o.current_epoch, 7);
    /* Producers are independent of each other. */
    assert_int_equal(append_prod(f, "/p", OCTET, "F", "w2", 0, 0, 0).result, RN_OK_APPENDED);
    assert_int_equal(append_prod(f, "/p", OCTET, "G", "w2", 0, 1, 0).result, RN_OK_APPENDED);
    expect_bytes(f, "/p", "abcDEFG");
    rn_stream *s = find(f, "/p");
    expect_producer(s, "w1", 7, 0);
    expect_producer(s, "w2", 0, 1);
    assert_int_equal(s->producers.count, 2);
    /* Plain appends do not disturb producer state. */
    append(f, "/p", "h");
    expect_producer(find(f, "/p"), "w2", 0, 1);
}

static void test_producer_state_is_per_stream(void **state) {
    fx *f = *state;
    create(f, "/a", NULL, NULL);
    create(f, "/b", NULL, NULL);
    assert_int_equal(append_prod(f, "/a", OCTET, "1", "w", 0, 0, 0).result, RN_OK_APPENDED);
    assert_int_equal(append_prod(f, "/a", OCTET, "2", "w", 0, 1, 0).result, RN_OK_APPENDED);
    outcome o = append_prod(f, "/b", OCTET, "1", "w", 0, 1, 0);
    assert_int_equal(o.result, RN_ERR_SEQ_GAP);
    assert_int_equal(o.expected_seq, 0);
    assert_int_equal(append_prod(f, "/b", OCTET, "1", "w", 0, 0, 0).result, RN_OK_APPENDED);
}

/* ------------------------------------------------------------------------ */
/* Stream-Seq                                                                */

static void test_stream_seq_must_increase_lexicographically(void **state) {
    fx *f = *state;
    create(f, "/q", NULL, NULL);
    assert_int_equal(append(f, "/q", "0").result, RN_OK_APPENDED); /* no seq: fine */
    assert_int_equal(append_seq(f, "/q", OCTET, "1", "b").result, RN_OK_APPENDED);
    expect_last_seq(find(f, "/q"), "b");
    assert_int_equal(append_seq(f, "/q", OCTET, "x", "b").result, RN_ERR_SEQ_REGRESSION);
    assert_int_equal(append_seq(f, "/q", OCTET, "x", "a").result, RN_ERR_SEQ_REGRESSION);
    assert_int_equal(append_seq(f, "/q", OCTET, "x", "az").result, RN_ERR_SEQ_REGRESSION);
    assert_int_equal(append_seq(f, "/q", OCTET, "2", "ba").result, RN_OK_APPENDED);
    assert_int_equal(append_seq(f, "/q", OCTET, "x", "b").result, RN_ERR_SEQ_REGRESSION);
    assert_int_equal(append_seq(f, "/q", OCTET, "3", "c").result, RN_OK_APPENDED);
    /* Byte order, not numeric order: "10" sorts before "9". */
    assert_int_equal(append_seq(f, "/q", OCTET, "4", "c9").result, RN_OK_APPENDED);
    assert_int_equal(append_seq(f, "/q", OCTET, "x", "c10").result, RN_ERR_SEQ_REGRESSION);
    /* Appends without a seq neither check nor reset it. */
    assert_int_equal(append(f, "/q", "5").result, RN_OK_APPENDED);
    assert_int_equal(append_seq(f, "/q", OCTET, "x", "c9").result, RN_ERR_SEQ_REGRESSION);
    expect_bytes(f, "/q", "012345");
    expect_last_seq(find(f, "/q"), "c9");
}

/* ------------------------------------------------------------------------ */
/* Close                                                                     */

static void test_close_refuses_later_appends_and_repeat_close_is_duplicate(void **state) {
    fx *f = *state;
    create(f, "/c", NULL, "ab");
    outcome o = append_ct(f, "/c", OCTET, "cd", 1);
    assert_int_equal(o.result, RN_OK_APPENDED);
    assert_int_equal(o.closed, 1);
    assert_int_equal(o.next_offset, 4);
    assert_int_equal(find(f, "/c")->closed, 1);
    o = append(f, "/c", "ef");
    assert_int_equal(o.result, RN_ERR_CLOSED);
    assert_int_equal(o.closed, 1);
    assert_int_equal(o.next_offset, 4);
    o = close_only(f, "/c");
    assert_int_equal(o.result, RN_OK_DUPLICATE);
    assert_int_equal(o.next_offset, 4);
    /* Data with close on a closed stream is still refused. */
    assert_int_equal(append_ct(f, "/c", OCTET, "gh", 1).result, RN_ERR_CLOSED);
    /* A producer that did not close it is refused too. */
    assert_int_equal(append_prod(f, "/c", OCTET, "x", "w", 0, 0, 0).result, RN_ERR_CLOSED);
    expect_bytes(f, "/c", "abcd");
}

static void test_close_only_closes_without_data(void **state) {
    fx *f = *state;
    create(f, "/c", NULL, "ab");
    outcome o = close_only(f, "/c");
    assert_int_equal(o.result, RN_OK_APPENDED);
    assert_int_equal(o.closed, 1);
    assert_int_equal(o.next_offset, 2);
    assert_int_equal(append(f, "/c", "x").result, RN_ERR_CLOSED);
    expect_bytes(f, "/c", "ab");
}

static void test_closing_producer_repeat_is_duplicate(void **state) {
    fx *f = *state;
    create(f, "/c", NULL, NULL);
    assert_int_equal(append_prod(f, "/c", OCTET, "a", "w", 2, 0, 0).result, RN_OK_APPENDED);
    outcome o = append_prod(f, "/c", OCTET, "b", "w", 2, 1, 1);
    assert_int_equal(o.result, RN_OK_APPENDED);
    assert_int_equal(o.closed, 1);
    rn_stream *s = find(f, "/c");
    expect_producer(s, "w", 2, 1);
    assert_int_equal(producer(s, "w")->newest_closed, 1);
    /* The same tuple again (a retry of the closing write) is a duplicate
     * carrying the write's receipt. */
    o = append_prod(f, "/c", OCTET, "b", "w", 2, 1, 1);
    assert_int_equal(o.result, RN_OK_DUPLICATE);
    assert_int_equal(o.ack_epoch, 2);
    assert_int_equal(o.ack_seq, 1);
    assert_int_equal(o.closed, 1);
    assert_int_equal(o.receipt, 1);
    assert_int_equal(o.receipt_start, 1);
    assert_int_equal(o.receipt_end, 2);
    assert_int_equal(o.receipt_closed, 1);
    /* Any write that would apply is refused for the closure; the producer
     * rules come first (ext §5.3), so an unknown producer's seq 1 is a gap. */
    assert_int_equal(append_prod(f, "/c", OCTET, "c", "w", 2, 2, 0).result, RN_ERR_CLOSED);
    assert_int_equal(append_prod(f, "/c", OCTET, "c", "w", 3, 0, 0).result, RN_ERR_CLOSED);
    assert_int_equal(append_prod(f, "/c", OCTET, "c", "v", 2, 0, 0).result, RN_ERR_CLOSED);
    assert_int_equal(append_prod(f, "/c", OCTET, "c", "v", 2, 1, 0).result, RN_ERR_SEQ_GAP);
    expect_bytes(f, "/c", "ab");
}

static void test_producer_close_only_records_closing_tuple(void **state) {
    fx *f = *state;
    create(f, "/c", NULL, "x");
    outcome o = append_prod(f, "/c", OCTET, NULL, "w", 0, 0, 1);
    assert_int_equal(o.result, RN_OK_APPENDED);
    assert_int_equal(o.closed, 1);
    assert_int_equal(append_prod(f, "/c", OCTET, NULL, "w", 0, 0, 1).result, RN_OK_DUPLICATE);
    expect_bytes(f, "/c", "x");
}

/* ------------------------------------------------------------------------ */
/* Producer identity, receipts, closures, history, floor (ext §5)           */

/* A producer write with Producer-Digest `digest_of` (its BLAKE3 need not
 * match the body for repeats and conflicts, which never read the body), or
 * without one when digest_of is NULL, and an optional Stream-Incarnation. */
static outcome write_id(fx *f, const char *path, const char *body, const char *pid, uint64_t epoch,
                        uint64_t seq, const char *digest_of, uint64_t incarnation) {
    req r;
    req_init(&r, RN_OP_APPEND, path);
    req_text(&r, OCTET, body);
    req_producer(&r, pid, epoch, seq);
    if (digest_of) {
        r.op.in.has_producer_digest = 1;
        rn_blake3_hash(digest_of, strlen(digest_of), r.op.in.producer_digest);
    }
    if (incarnation) {
        r.op.in.has_incarnation = 1;
        r.op.in.incarnation = incarnation;
    }
    return run_req(f, &r);
}

static void expect_receipt(outcome o, rn_result result, uint64_t start, uint64_t end,
                           uint64_t ack_seq) {
    assert_int_equal(o.result, result);
    assert_int_equal(o.receipt, 1);
    assert_int_equal(o.receipt_start, start);
    assert_int_equal(o.receipt_end, end);
    assert_int_equal(o.ack_seq, ack_seq);
}

static void test_producer_identity_and_receipts(void **state) {
    fx *f = *state;
    create(f, "/i", NULL, NULL);
    expect_receipt(write_id(f, "/i", "aa", "w", 0, 0, "aa", 0), RN_OK_APPENDED, 0, 2, 0);
    expect_receipt(write_id(f, "/i", "bbb", "w", 0, 1, "bbb", 0), RN_OK_APPENDED, 2, 5, 1);
    /* The newest write repeats with its receipt; another identity conflicts. */
    expect_receipt(write_id(f, "/i", "bbb", "w", 0, 1, "bbb", 0), RN_OK_DUPLICATE, 2, 5, 1);
    outcome o = write_id(f, "/i", "bbb", "w", 0, 1, "zzz", 0);
    assert_int_equal(o.result, RN_ERR_KEY_CONFLICT);
    assert_int_equal(o.current_epoch, 0);
    assert_int_equal(write_id(f, "/i", "bbb", "w", 0, 1, NULL, 0).result, RN_ERR_KEY_CONFLICT);
    /* The claim's identity is held; its receipt is not. */
    assert_int_equal(write_id(f, "/i", "aa", "w", 0, 0, "zz", 0).result, RN_ERR_KEY_CONFLICT);
    o = write_id(f, "/i", "aa", "w", 0, 0, "aa", 0);
    assert_int_equal(o.result, RN_OK_DUPLICATE);
    assert_int_equal(o.receipt, 0);
    assert_int_equal(o.ack_seq, 1);
    /* A wrong digest refuses a write that would apply, last, applying nothing. */
    assert_int_equal(write_id(f, "/i", "cc", "w", 0, 2, "cd", 0).result, RN_ERR_DIGEST_MISMATCH);
    expect_bytes(f, "/i", "aabbb");
    expect_receipt(write_id(f, "/i", "cc", "w", 0, 2, "cc", 0), RN_OK_APPENDED, 5, 7, 2);
    /* A claim closes the epoch before; its repeats report it too. */
    o = write_id(f, "/i", "dd", "w", 3, 0, "dd", 0);
    expect_receipt(o, RN_OK_APPENDED, 7, 9, 0);
    assert_int_equal(o.closes_epoch, 1);
    assert_int_equal(o.closed_epoch, 0);
    assert_int_equal(o.closed_seq, 2);
    o = write_id(f, "/i", "dd", "w", 3, 0, "dd", 0);
    assert_int_equal(o.result, RN_OK_DUPLICATE);
    assert_int_equal(o.closes_epoch, 1);
    o = write_id(f, "/i", "x", "w", 0, 1, NULL, 0);
    assert_int_equal(o.result, RN_ERR_EPOCH_CLOSED);
    assert_int_equal(o.closed_by_history, 0);
    assert_int_equal(o.closed_seq, 2);
    rn_producer *p = producer(find(f, "/i"), "w");
    assert_int_equal(p->claim.has_digest, 1);
    assert_int_equal(p->above_floor, 1);
}

/* Producer state after a clean restart (checkpoint) and after a crash (log
 * replay) answers as before. */
static void test_producer_state_survives_restarts(void **state) {
    fx *f = *state;
    create(f, "/r", NULL, NULL);
    write_id(f, "/r", "ab", "w", 1, 0, "ab", 0);
    write_id(f, "/r", "cd", "w", 2, 0, "cd", 0);
    write_id(f, "/r", "ef", "w", 2, 1, "ef", 0);
    for (int round = 0; round < 2; round++) {
        if (round == 0)
            restart_clean(f);
        else
            restart_crash(f, "crash", drop_stream_files);
        expect_receipt(write_id(f, "/r", "ef", "w", 2, 1, "ef", 0), RN_OK_DUPLICATE, 4, 6, 1);
        assert_int_equal(write_id(f, "/r", "ef", "w", 2, 1, "xx", 0).result, RN_ERR_KEY_CONFLICT);
        assert_int_equal(write_id(f, "/r", "cd", "w", 2, 0, "xx", 0).result, RN_ERR_KEY_CONFLICT);
        outcome o = write_id(f, "/r", "zz", "w", 1, 1, NULL, 0);
        assert_int_equal(o.result, RN_ERR_EPOCH_CLOSED);
        assert_int_equal(o.closed_epoch, 1);
        assert_int_equal(o.closed_seq, 0);
    }
}

/* A later piece of an answer is read only while the stream keeps the id and
 * incarnation the answer began with, and the piece lies within its bytes. */
static void test_read_again_refuses_once_the_bytes_may_have_changed(void **state) {
    fx *f = *state;
    create(f, "/again", NULL, "0123456789");
    rn_stream *s = find(f, "/again");
    uint64_t id = s->id, inc = s->incarnation;
    uint8_t out[8];
    assert_int_equal(rn_engine_read_again(f->e, id, inc, 2, 3, 1, out), 0);
    assert_memory_equal(out, "234", 3);
    assert_int_equal(rn_engine_read_again(f->e, id, inc + 1, 2, 3, 1, out), -ESTALE);
    assert_int_equal(rn_engine_read_again(f->e, id, inc, 8, 3, 1, out),
                     -ESTALE); /* past the tail */
    append(f, "/again", "ab");
    assert_int_equal(rn_engine_read_again(f->e, id, inc, 8, 3, 1, out),
                     0); /* an append changes nothing below */
    assert_memory_equal(out, "89a", 3);
    assert_int_equal(rewrite_to(f, "/again", 5).result, RN_OK_REWRITTEN);
    append(f, "/again", "ZZZZZ");
    assert_int_equal(rn_engine_read_again(f->e, id, inc, 2, 3, 1, out),
                     -ESTALE); /* another incarnation */
    s = find(f, "/again");
    inc = s->incarnation;
    assert_int_equal(rn_engine_read_again(f->e, id, inc, 4, 3, 1, out), 0);
    assert_memory_equal(out, "4ZZ", 3);
    assert_int_equal(delete_stream(f, "/again").result, RN_OK_DELETED);
    assert_int_equal(rn_engine_read_again(f->e, id, inc, 4, 3, 1, out), -ESTALE); /* gone */
    create(f, "/again", NULL, "0123456789");
    assert_int_equal(rn_engine_read_again(f->e, id, inc, 2, 3, 1, out),
                     -ESTALE); /* another stream */
}

static void test_rewrite_closes_producer_epochs(void **state) {
    fx *f = *state;
    create(f, "/h", NULL, NULL);
    for (uint64_t seq = 0; seq < 3; seq++)
        write_id(f, "/h", "abcd", "kept", 0, seq, NULL, 0); /* newest [8, 12) */
    for (uint64_t seq = 0; seq < 2; seq++)
        write_id(f, "/h", "abcd", "cut", 0, seq, NULL, 0); /* newest [16, 20) */
    write_id(f, "/h", "abcd", "lost", 0, 0, NULL, 0);      /* [20, 24) */
    assert_int_equal(rewrite_to(f, "/h", 18).result, RN_OK_REWRITTEN);
    rn_stream *s = find(f, "/h");
    assert_int_equal(producer(s, "kept")->history, RN_EPOCH_REWRITTEN);
    assert_int_equal(producer(s, "kept")->history_seq, 2);
    assert_int_equal(producer(s, "cut")->history_seq, 0);
    assert_int_equal(producer(s, "lost")->history, RN_EPOCH_LOST);
    outcome o = write_id(f, "/h", "x", "kept", 0, 3, NULL, 0);
    assert_int_equal(o.result, RN_ERR_EPOCH_CLOSED);
    assert_int_equal(o.closed_by_history, 1);
    assert_int_equal(o.closed_seq, 2);
    expect_receipt(write_id(f, "/h", "abcd", "kept", 0, 2, NULL, 0), RN_OK_DUPLICATE, 8, 12, 2);
    o = write_id(f, "/h", "abcd", "cut", 0, 1, NULL, 0);
    assert_int_equal(o.result, RN_ERR_EPOCH_CLOSED);
    assert_int_equal(o.closed_seq, 0);
    assert_int_equal(write_id(f, "/h", "abcd", "lost", 0, 0, NULL, 0).result, RN_ERR_STALE_EPOCH);
    /* A claim after the rewrite closes the epoch at its surviving seq. */
    o = write_id(f, "/h", "n", "cut", 1, 0, NULL, 0);
    assert_int_equal(o.result, RN_OK_APPENDED);
    assert_int_equal(o.closes_epoch, 1);
    assert_int_equal(o.closed_seq, 0);
    restart_clean(f);
    assert_int_equal(producer(find(f, "/h"), "kept")->history_seq, 2);
}

/* A producer TTL short enough for a test and long enough that writes meant
 * to be back to back stay within it on a loaded machine (the sanitizer
 * build under parallel tests has stalled for more than 100 ms). */
#define IDLE_TTL_MS 1000
#define PAST_IDLE_TTL_US (1200 * 1000)

static void test_idle_producers_expire_and_raise_the_floor(void **state) {
    fx *f = *state;
    f->producer_ttl_ms = IDLE_TTL_MS;
    restart_clean(f);
    create(f, "/x", NULL, NULL);
    uint64_t inc = find(f, "/x")->incarnation;
    write_id(f, "/x", "a", "old", 5, 0, NULL, 0);
    usleep(PAST_IDLE_TTL_US);
    rn_engine_sweep_expired(f->e);
    run(f);
    rn_stream *s = find(f, "/x");
    assert_int_equal(s->producers.count, 0);
    assert_int_equal(s->has_floor, 1);
    assert_int_equal(s->epoch_floor, 5);
    outcome o = write_id(f, "/x", "b", "new", 5, 0, NULL, inc);
    assert_int_equal(o.result, RN_ERR_PRODUCER_EXPIRED);
    assert_int_equal(o.current_epoch, 5);
    /* Without the incarnation: a new producer, opened below the floor. */
    assert_int_equal(write_id(f, "/x", "b", "new", 2, 0, NULL, 0).result, RN_OK_APPENDED);
    assert_int_equal(producer(find(f, "/x"), "new")->above_floor, 0);
    assert_int_equal(write_id(f, "/x", "c", "new", 2, 1, NULL, inc).result,
                     RN_ERR_PRODUCER_EXPIRED);
    o = write_id(f, "/x", "c", "new", 6, 0, NULL, inc);
    assert_int_equal(o.result, RN_OK_APPENDED);
    assert_int_equal(o.closes_epoch, 0);
    assert_int_equal(producer(find(f, "/x"), "new")->above_floor, 1);
    /* On access: the writer's own idle state goes before its write is judged. */
    usleep(PAST_IDLE_TTL_US);
    o = write_id(f, "/x", "d", "new", 6, 1, NULL, 0);
    assert_int_equal(o.result, RN_ERR_SEQ_GAP);
    assert_int_equal(find(f, "/x")->epoch_floor, 6);
    restart_crash(f, "crash", NULL);
    assert_int_equal(find(f, "/x")->epoch_floor, 6);
    assert_int_equal(write_id(f, "/x", "d", "other", 6, 0, NULL, inc).result,
                     RN_ERR_PRODUCER_EXPIRED);
}

static void test_producer_cap_displaces_only_idle_producers(void **state) {
    fx *f = *state;
    f->producer_ttl_ms = IDLE_TTL_MS;
    f->producer_cap = 2;
    restart_clean(f);
    create(f, "/cap", NULL, NULL);
    write_id(f, "/cap", "a", "A", 3, 0, NULL, 0);
    write_id(f, "/cap", "b", "B", 0, 0, NULL, 0);
    outcome o = write_id(f, "/cap", "c", "C", 0, 0, NULL, 0);
    assert_int_equal(o.result, RN_ERR_PRODUCER_LIMIT);
    assert_int_equal(o.retry_after_s, 1);
    usleep(PAST_IDLE_TTL_US);
    assert_int_equal(write_id(f, "/cap", "c", "C", 0, 0, NULL, 0).result, RN_OK_APPENDED);
    rn_stream *s = find(f, "/cap");
    assert_int_equal(s->producers.count, 2);
    assert_null(rn_map_get(&s->producers, "A", 1));
    assert_int_equal(s->epoch_floor, 3);
    expect_bytes(f, "/cap", "abc");
}

static void test_answer_early_only_for_repeats_and_conflicts(void **state) {
    fx *f = *state;
    create(f, "/e", NULL, NULL);
    uint64_t inc = find(f, "/e")->incarnation;
    write_id(f, "/e", "abc", "w", 0, 0, "abc", 0);
    struct {
        uint64_t seq;
        const char *digest_of;
        uint64_t incarnation;
        int early;
        rn_result result;
    } cases[] = {
        {0, "abc", inc, 1, RN_OK_DUPLICATE},
        {0, "xyz", inc, 1, RN_ERR_KEY_CONFLICT},
        {1, "abc", inc, 0, 0},
        {0, "abc", inc + 1, 0, 0},
        {0, "abc", 0, 0, 0},
        {5, "abc", inc, 0, 0},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        rn_op op = {.in = {.kind = RN_OP_APPEND, .path = "/e", .path_len = 2}};
        op.in.has_producer = 1;
        op.in.producer_id = "w";
        op.in.producer_id_len = 1;
        op.in.producer_seq = cases[k].seq;
        op.in.has_producer_digest = 1;
        rn_blake3_hash(cases[k].digest_of, 3, op.in.producer_digest);
        op.in.has_incarnation = cases[k].incarnation != 0;
        op.in.incarnation = cases[k].incarnation;
        assert_int_equal(rn_engine_answer_early(f->e, &op), cases[k].early);
        if (cases[k].early)
            assert_int_equal(op.out.result, cases[k].result);
    }
    /* While a write of the stream is in the log, nothing is answered early. */
    req r;
    req_init(&r, RN_OP_APPEND, "/e");
    req_text(&r, OCTET, "d");
    rn_engine_submit(f->e, &r.op);
    rn_op op = {.in = {.kind = RN_OP_APPEND,
                       .path = "/e",
                       .path_len = 2,
                       .has_producer = 1,
                       .producer_id = "w",
                       .producer_id_len = 1,
                       .has_incarnation = 1,
                       .incarnation = inc}};
    assert_int_equal(rn_engine_answer_early(f->e, &op), 0);
    run(f);
    expect_bytes(f, "/e", "abcd");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        T(test_read_again_refuses_once_the_bytes_may_have_changed),
        T(test_producer_sequence_rules),
        T(test_producer_state_is_per_stream),
        T(test_stream_seq_must_increase_lexicographically),
        T(test_close_refuses_later_appends_and_repeat_close_is_duplicate),
        T(test_close_only_closes_without_data),
        T(test_closing_producer_repeat_is_duplicate),
        T(test_producer_close_only_records_closing_tuple),
        T(test_producer_identity_and_receipts),
        T(test_producer_state_survives_restarts),
        T(test_rewrite_closes_producer_epochs),
        T(test_idle_producers_expire_and_raise_the_floor),
        T(test_producer_cap_displaces_only_idle_producers),
        T(test_answer_early_only_for_repeats_and_conflicts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
