/*
 * test_live.c - unit tests for the live-read registry (src/live/live.c)
 * with parked long-polls (src/live/longpoll.c).
 *
 * How: streams are bare rn_stream structs and requests bare rn_request
 * structs (a long-poll's answers are the test's rn_live_ops, which record
 * them, so no transport is needed); the engine's notifications are calls of
 * rn_live_observer. Checked: the bounds and the counts, which readers a
 * change wakes and what each hears, that readers of a rewritten or removed
 * stream are unregistered before they answer, that a reader parked during
 * a wake is not visited by it, timeouts, aborts, half-closes, shutdown,
 * the wake hooks,
 * that a stream's room goes when its last reader does, and that a reader
 * is given back (release) only after its timer has closed. SSE readers
 * need the transport and the engine: the black-box tests cover them
 * (sse_fanout, live_rewrite, live_shutdown).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "live/live.h"

#define MAX_READERS 16

typedef struct {
    rn_live_reader r;
    rn_request req;
    int answers;         /* answer_poll calls */
    rn_live_end why;     /* the last one's reason */
    uint32_t readers_at; /* the stream's reader count during it */
    int released;
} reader;

static struct {
    uv_loop_t loop;
    rn_live *live;
    reader rd[MAX_READERS];
    int wake_begins, wake_ends;
    /* set by a test: parks this reader on this stream from the next answer */
    reader *park_from_answer;
    rn_stream *park_on;
} t;

static reader *of(rn_live_reader *r) {
    return (reader *)((char *)r - offsetof(reader, r));
}

static void answer_poll(rn_live_reader *r, rn_stream *s, rn_live_end why) {
    reader *x = of(r);
    x->answers++;
    x->why = why;
    x->readers_at = s->live_readers;
    if (t.park_from_answer) {
        reader *p = t.park_from_answer;
        t.park_from_answer = NULL;
        rn_live_poll(t.live, &p->r, t.park_on, 60000);
    }
}

static void sse_error(const rn_live_reader *r, rn_live_end why, rn_buf *out) {
    (void)r, (void)why, (void)out;
    fail_msg("no SSE reader in these tests");
}

static void append_offset(rn_buf *out, uint64_t position) {
    (void)out, (void)position;
    fail_msg("no SSE reader in these tests");
}

static void release(rn_live_reader *r) {
    reader *x = of(r);
    assert_int_equal(x->released, 0);
    x->released = 1;
}

static const rn_live_ops ops = {.answer_poll = answer_poll,
                                .sse_error = sse_error,
                                .append_offset = append_offset,
                                .release = release};

static void wake_begin(void *arg) {
    assert_ptr_equal(arg, &t);
    t.wake_begins++;
}

static void wake_end(void *arg) {
    assert_ptr_equal(arg, &t);
    t.wake_ends++;
}

static int setup(void **state) {
    (void)state;
    memset(&t, 0, sizeof t);
    assert_int_equal(uv_loop_init(&t.loop), 0);
    rn_live_config cfg = {.max_reads = 8,
                          .max_reads_per_stream = 3,
                          .wake_begin = wake_begin,
                          .wake_end = wake_end,
                          .wake_arg = &t};
    t.live = rn_live_new(&t.loop, NULL, &cfg);
    return 0;
}

/* Runs the loop until every timer closed, and checks that every reader
 * handed over was given back exactly once (each test ends its readers: the
 * streams are its locals). */
static int teardown(void **state) {
    (void)state;
    uv_run(&t.loop, UV_RUN_DEFAULT);
    for (int i = 0; i < MAX_READERS; i++)
        assert_int_equal(t.rd[i].released, t.rd[i].r.live != NULL);
    assert_int_equal(rn_live_count(t.live), 0);
    rn_live_free(t.live);
    assert_int_equal(uv_loop_close(&t.loop), 0);
    return 0;
}

/* Parks reader i on s at s's tail for timeout_ms. */
static reader *park_for(int i, rn_stream *s, uint64_t timeout_ms) {
    reader *x = &t.rd[i];
    x->r.req = &x->req;
    x->r.ops = &ops;
    x->r.offset = s->tail;
    assert_int_equal(rn_live_admit(t.live, s), RN_LIVE_ADMITTED);
    rn_live_poll(t.live, &x->r, s, timeout_ms);
    return x;
}

static reader *park(int i, rn_stream *s) {
    return park_for(i, s, 60000);
}

static void test_bounds_and_counts(void **state) {
    (void)state;
    rn_stream a = {.id = 1, .tail = 5}, b = {.id = 2}, d = {.id = 3};
    for (int i = 0; i < 3; i++)
        park(i, &a);
    assert_int_equal(a.live_readers, 3);
    assert_int_equal(rn_live_admit(t.live, &a), RN_LIVE_STREAM_FULL);
    for (int i = 3; i < 8; i++)
        park(i, i < 6 ? &b : &d);
    assert_int_equal(b.live_readers, 3);
    assert_int_equal(d.live_readers, 2);
    assert_int_equal(rn_live_count(t.live), 8);
    rn_stream c = {.id = 4};
    assert_int_equal(rn_live_admit(t.live, &c), RN_LIVE_FULL);
    /* an answered reader frees its place at once, before its timer closed */
    a.tail = 9;
    rn_live_observer(&a, RN_STREAM_CHANGED, t.live);
    assert_int_equal(rn_live_count(t.live), 5);
    assert_int_equal(rn_live_admit(t.live, &c), RN_LIVE_ADMITTED);
    assert_int_equal(rn_live_admit(t.live, &a), RN_LIVE_ADMITTED);
    rn_live_end_all(t.live);
    assert_int_equal(t.rd[7].answers, 1);
    assert_int_equal(t.rd[7].why, RN_LIVE_TIMEOUT);
}

static void test_change_wakes_readers_behind_the_tail(void **state) {
    (void)state;
    rn_stream s = {.id = 1, .tail = 10}, other = {.id = 2, .tail = 10};
    reader *x = park(0, &s), *y = park(1, &s), *z = park(2, &other);
    rn_live_observer(&s, RN_STREAM_CREATED, t.live); /* not a change */
    assert_int_equal(x->answers + y->answers, 0);
    rn_live_observer(&s, RN_STREAM_CHANGED, t.live); /* nothing new: they wait */
    assert_int_equal(x->answers + y->answers, 0);
    s.tail = 12;
    rn_live_observer(&s, RN_STREAM_CHANGED, t.live);
    assert_int_equal(x->answers, 1);
    assert_int_equal(x->why, RN_LIVE_DATA);
    assert_int_equal(y->answers, 1);
    assert_int_equal(y->why, RN_LIVE_DATA);
    assert_int_equal(z->answers, 0);
    assert_int_equal(t.wake_begins, 2);
    assert_int_equal(t.wake_ends, 2);
    assert_null(s.live_room); /* the room went with the last reader */
    assert_non_null(other.live_room);
    assert_int_equal(x->released, 0); /* given back once the timer closed */
    uv_run(&t.loop, UV_RUN_NOWAIT);
    assert_int_equal(x->released + y->released, 2);
    /* a change without readers does not bracket anything */
    rn_live_observer(&s, RN_STREAM_CHANGED, t.live);
    assert_int_equal(t.wake_begins, 2);
    /* a close at the tail answers with nothing new */
    other.closed = 1;
    rn_live_observer(&other, RN_STREAM_CHANGED, t.live);
    assert_int_equal(z->answers, 1);
    assert_int_equal(z->why, RN_LIVE_TIMEOUT);
}

static void test_rewrite_and_removal_unregister_before_answering(void **state) {
    (void)state;
    rn_stream s = {.id = 1, .tail = 4}, gone = {.id = 2, .tail = 4};
    reader *x = park(0, &s), *y = park(1, &s), *z = park(2, &gone);
    rn_live_observer(&s, RN_STREAM_REWRITTEN, t.live);
    assert_int_equal(x->why, RN_LIVE_REWRITTEN);
    assert_int_equal(y->why, RN_LIVE_REWRITTEN);
    assert_int_equal(y->readers_at, 1); /* the newest first, without itself */
    assert_int_equal(x->readers_at, 0);
    assert_null(s.live_room);
    rn_live_observer(&gone, RN_STREAM_REMOVED, t.live);
    assert_int_equal(z->answers, 1);
    assert_int_equal(z->why, RN_LIVE_REMOVED);
    assert_int_equal(z->readers_at, 0);
    assert_int_equal(rn_live_count(t.live), 0);
    assert_int_equal(t.wake_begins, 0); /* only changes are bracketed */
}

static void test_reader_parked_during_a_wake_waits(void **state) {
    (void)state;
    rn_stream s = {.id = 1, .tail = 3};
    reader *x = park(0, &s);
    s.tail = 6;
    /* x's answer parks a new reader at the new tail (a pipelined request) */
    reader *later = &t.rd[1];
    later->r.req = &later->req;
    later->r.ops = &ops;
    later->r.offset = 6;
    t.park_from_answer = later;
    t.park_on = &s;
    rn_live_observer(&s, RN_STREAM_CHANGED, t.live);
    assert_int_equal(x->answers, 1);
    assert_int_equal(later->answers, 0);
    assert_int_equal(s.live_readers, 1);
    assert_non_null(s.live_room); /* kept: the new reader is in it */
    rn_live_end_all(t.live);
    assert_int_equal(later->answers, 1);
    assert_int_equal(later->why, RN_LIVE_TIMEOUT);
    assert_null(s.live_room);
}

static void test_timeout_abort_and_shutdown(void **state) {
    (void)state;
    rn_stream s = {.id = 1, .tail = 0};
    reader *x = park_for(0, &s, 1), *y = park(1, &s), *z = park(2, &s);
    uv_run(&t.loop, UV_RUN_ONCE); /* x's time is up */
    assert_int_equal(x->answers, 1);
    assert_int_equal(x->why, RN_LIVE_TIMEOUT);
    assert_int_equal(s.live_readers, 2);
    y->req.on_abort(&y->req); /* y's client went away: no answer */
    assert_int_equal(y->answers, 0);
    assert_null(y->req.on_abort);
    assert_int_equal(s.live_readers, 1);
    rn_live_end_all(t.live);
    assert_int_equal(z->answers, 1);
    assert_int_equal(z->why, RN_LIVE_TIMEOUT);
    assert_int_equal(rn_live_count(t.live), 0);
    assert_null(s.live_room);
}

/* A client that half-closes ends its read at once, as its timeout would;
 * the transport calls the hook as http.c does (taking it first). */
static void test_half_close_answers_as_at_the_timeout(void **state) {
    (void)state;
    rn_stream s = {.id = 1, .tail = 4};
    reader *x = park(0, &s), *y = park(1, &s);
    assert_non_null(x->req.on_input_end);
    void (*input_end)(rn_request *) = x->req.on_input_end;
    x->req.on_input_end = NULL;
    input_end(&x->req);
    assert_int_equal(x->answers, 1);
    assert_int_equal(x->why, RN_LIVE_TIMEOUT);
    assert_null(x->req.on_abort);
    assert_int_equal(s.live_readers, 1);
    assert_int_equal(y->answers, 0);
    rn_live_end_all(t.live); /* y answers once, and drops its hook */
    assert_int_equal(y->answers, 1);
    assert_null(y->req.on_input_end);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_bounds_and_counts, setup, teardown),
        cmocka_unit_test_setup_teardown(test_change_wakes_readers_behind_the_tail, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rewrite_and_removal_unregister_before_answering, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_reader_parked_during_a_wake_waits, setup, teardown),
        cmocka_unit_test_setup_teardown(test_timeout_abort_and_shutdown, setup, teardown),
        cmocka_unit_test_setup_teardown(test_half_close_answers_as_at_the_timeout, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
