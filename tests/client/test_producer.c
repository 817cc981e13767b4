/*
 * test_producer.c — librunnel's producer against a live server: pipelined
 * writes (a window of several in flight) land once and in order with their
 * receipts in seq order; writes whose log sync fails (unknown) are
 * repeated with the same key and land once; a producer that stops without
 * flushing (a crash) resumes from its state file, sends the recorded
 * writes again under their keys and lands everything once, whether the
 * first tries had applied or not; a resumed write with other bytes is
 * refused locally; a state file is held by one process; a fresh producer
 * whose id an earlier, forgotten run used claims a new epoch; a refusal
 * ends the producer with its reason.
 */
#include "support.h"
#include "util/buf.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

static void make(const char *url) {
    runnel_answer a;
    runnel_create_options o = {.content_type = "text/plain"};
    assert_int_equal(runnel_create(C, url, &o, &a), RUNNEL_OK);
}

typedef struct {
    uint64_t next_seq, count, repeats;
    char last_next[RUNNEL_VALUE_MAX];
    int out_of_order;
    int started; /* a resumed producer's first receipt is of a recorded seq */
} receipts;

static void on_receipt(void *arg, const runnel_receipt *r) {
    receipts *x = arg;
    if (r->seq != x->next_seq && x->started)
        x->out_of_order = 1;
    x->started = 1;
    if (r->next_offset[0] && strcmp(r->next_offset, x->last_next) <= 0)
        x->out_of_order = 1;
    x->next_seq = r->seq + 1;
    x->count++;
    x->repeats += (uint64_t)r->repeat;
    if (r->next_offset[0])
        snprintf(x->last_next, sizeof x->last_next, "%s", r->next_offset);
}

/* write i's body */
static void body(int i, char *out) {
    snprintf(out, 32, "w%05d\n", i);
}

static void expect_writes(const char *url, int n) {
    rn_buf want = {0}, got = {0};
    char b[32];
    for (int i = 0; i < n; i++) {
        body(i, b);
        rn_buf_append_str(&want, b);
    }
    ts_read_all(C, url, &got);
    assert_int_equal(got.len, want.len);
    assert_memory_equal(got.data, want.data, want.len);
    rn_buf_free(&want);
    rn_buf_free(&got);
}

static void state_path(char *out, const char *name) {
    snprintf(out, 512, "%s/%s.state", S->dir, name);
}

static void pipelined(void **state) {
    const char *url = "/v1/stream/prod/pipe";
    make(url);
    receipts r = {0};
    runnel_producer_options o = {.id = "pipe", .window = 8, .on_receipt = on_receipt, .arg = &r};
    runnel_producer *p;
    char err[256];
    assert_int_equal(runnel_producer_open(C, url, &o, &p, err, sizeof err), RUNNEL_OK);
    char b[32];
    for (int i = 0; i < 300; i++) {
        body(i, b);
        assert_int_equal(runnel_producer_send(p, b, strlen(b), (uint64_t)i + 1), RUNNEL_OK);
    }
    assert_int_equal(runnel_producer_flush(p), RUNNEL_OK);
    runnel_producer_stats st;
    runnel_producer_get_stats(p, &st);
    printf("  300 writes, window 8: %llu sent, %llu repeated, %llu gaps\n",
           (unsigned long long)st.writes, (unsigned long long)st.retries,
           (unsigned long long)st.gaps);
    assert_int_equal(r.count, 300);
    assert_false(r.out_of_order);
    assert_int_equal(runnel_producer_acked_tag(p), 300);
    runnel_producer_free(p);
    expect_writes(url, 300);
}

/* Large writes on 8 connections arrive out of order at times: the gaps
 * (409 Producer-Expected-Seq naming an earlier write still on its way)
 * are resent in order, never taken for a server that lost the state. */
static void crossed_connections(void **state) {
    const char *url = "/v1/stream/prod/crossed";
    make(url);
    receipts r = {0};
    runnel_producer_options o = {.id = "x", .window = 8, .on_receipt = on_receipt, .arg = &r};
    runnel_producer *p;
    char err[256];
    assert_int_equal(runnel_producer_open(C, url, &o, &p, err, sizeof err), RUNNEL_OK);
    size_t len = 96 * 1024;
    char *big = malloc(len);
    rn_buf want = {0};
    for (int i = 0; i < 120; i++) {
        memset(big, 'a' + i % 26, len);
        snprintf(big, 16, "%06d", i);
        rn_buf_append(&want, big, len);
        assert_int_equal(runnel_producer_send(p, big, len, (uint64_t)(i + 1) * len), RUNNEL_OK);
    }
    assert_int_equal(runnel_producer_flush(p), RUNNEL_OK);
    runnel_producer_stats st;
    runnel_producer_get_stats(p, &st);
    printf("  120 writes of 96 KiB, window 8: %llu gaps resent in order\n",
           (unsigned long long)st.gaps);
    assert_false(r.out_of_order);
    runnel_producer_free(p);
    rn_buf got = {0};
    ts_read_all(C, url, &got);
    assert_int_equal(got.len, want.len);
    assert_memory_equal(got.data, want.data, want.len);
    rn_buf_free(&got);
    rn_buf_free(&want);
    free(big);
}

static void unknown_outcomes(void **state) {
    const char *url = "/v1/stream/prod/unknown";
    make(url);
    receipts r = {0};
    runnel_producer_options o = {.id = "u", .window = 4, .on_receipt = on_receipt, .arg = &r};
    runnel_producer *p;
    char err[256];
    assert_int_equal(runnel_producer_open(C, url, &o, &p, err, sizeof err), RUNNEL_OK);
    char b[32];
    for (int i = 0; i < 40; i++) {
        if (i % 10 == 3)
            assert_int_equal(ts_hook(C, "fail-syncs?n=2"), 204);
        body(i, b);
        assert_int_equal(runnel_producer_send(p, b, strlen(b), (uint64_t)i + 1), RUNNEL_OK);
    }
    assert_int_equal(runnel_producer_flush(p), RUNNEL_OK);
    runnel_producer_stats st;
    runnel_producer_get_stats(p, &st);
    printf("  40 writes with failed syncs: %llu repeated\n", (unsigned long long)st.retries);
    assert_true(st.retries > 0);
    assert_false(r.out_of_order);
    runnel_producer_free(p);
    expect_writes(url, 40);
}

/* What a (re)started process does: skips what holds, sends again what the
 * state recorded, then the writes up to `to`. With crash it stops without
 * a flush (the state file keeps what was not acknowledged); with
 * fail_syncs every log sync fails meanwhile, so nothing it sends applies. */
static void produce(const char *url, const char *path, int to, int crash, int fail_syncs) {
    receipts r = {0};
    runnel_producer_options o = {.id = "c",
                                 .window = 4,
                                 .state_path = path,
                                 .use_incarnation = 1,
                                 .on_receipt = on_receipt,
                                 .arg = &r};
    runnel_producer *p;
    char err[256] = "", b[32];
    if (runnel_producer_open(C, url, &o, &p, err, sizeof err) != RUNNEL_OK)
        fail_msg("open: %s", err);
    if (fail_syncs)
        assert_int_equal(ts_hook(C, "fail-syncs?n=1000"), 204);
    int i = (int)runnel_producer_acked_tag(p);
    uint64_t from, tag;
    while (runnel_producer_replay_next(p, &from, &tag)) {
        assert_int_equal(from, (uint64_t)i);
        body(i, b);
        assert_int_equal(runnel_producer_send(p, b, strlen(b), (uint64_t)++i), RUNNEL_OK);
    }
    for (; i < to; i++) {
        body(i, b);
        assert_int_equal(runnel_producer_send(p, b, strlen(b), (uint64_t)i + 1), RUNNEL_OK);
    }
    if (crash) {
        ts_sleep_ms(300); /* sent; applied unless the syncs fail; answers unread */
        runnel_producer_free(p);
        if (fail_syncs)
            assert_int_equal(ts_hook(C, "fail-syncs?n=0"), 204);
        return;
    }
    assert_int_equal(runnel_producer_flush(p), RUNNEL_OK);
    assert_false(r.out_of_order);
    runnel_producer_free(p);
}

static void restart_from_state(void **state) {
    char path[512];
    /* the first tries never applied (their syncs failed) */
    const char *url = "/v1/stream/prod/crash1";
    make(url);
    state_path(path, "crash1");
    produce(url, path, 10, 1, 0);
    produce(url, path, 13, 1, 1);
    produce(url, path, 20, 0, 0);
    expect_writes(url, 20);
    /* the first tries applied but the process died before reading why */
    url = "/v1/stream/prod/crash2";
    make(url);
    state_path(path, "crash2");
    produce(url, path, 12, 1, 0);
    produce(url, path, 20, 0, 0);
    expect_writes(url, 20);
}

static void state_guards(void **state) {
    const char *url = "/v1/stream/prod/guards";
    make(url);
    char path[512], err[256];
    state_path(path, "guards");
    produce(url, path, 3, 1, 1);
    runnel_producer_options o = {.id = "c", .state_path = path, .use_incarnation = 1};
    runnel_producer *p, *q;
    assert_int_equal(runnel_producer_open(C, url, &o, &p, err, sizeof err), RUNNEL_OK);
    /* one process at a time */
    assert_int_equal(runnel_producer_open(C, url, &o, &q, err, sizeof err), RUNNEL_E_STATE);
    /* a recorded write sent again with other bytes is refused here */
    assert_int_equal(runnel_producer_send(p, "other\n", 6, 1), RUNNEL_E_STATE);
    runnel_producer_free(p);
    /* another id or stream is another state */
    runnel_producer_options o2 = {.id = "someone", .state_path = path};
    assert_int_equal(runnel_producer_open(C, url, &o2, &p, err, sizeof err), RUNNEL_E_STATE);
    produce(url, path, 3, 0, 0);
    expect_writes(url, 3);
}

static void fresh_claim(void **state) {
    const char *url = "/v1/stream/prod/fresh";
    make(url);
    /* an earlier run of producer "f" (its state lost) wrote seq 0 and 1 */
    runnel_answer a;
    runnel_append_options ao = {.content_type = "text/plain", .producer_id = "f"};
    runnel_body b0 = {.data = "w00000\n", .len = 7}, b1 = {.data = "w00001\n", .len = 7};
    assert_int_equal(runnel_append(C, url, &b0, &ao, &a), RUNNEL_OK);
    ao.producer_seq = 1;
    assert_int_equal(runnel_append(C, url, &b1, &ao, &a), RUNNEL_OK);
    runnel_producer_options o = {.id = "f"};
    runnel_producer *p;
    char err[256];
    assert_int_equal(runnel_producer_open(C, url, &o, &p, err, sizeof err), RUNNEL_OK);
    /* its first write is the same bytes as the old seq 0: still written */
    assert_int_equal(runnel_producer_send(p, "w00000\n", 7, 1), RUNNEL_OK);
    assert_int_equal(runnel_producer_send(p, "w00001\n", 7, 2), RUNNEL_OK);
    assert_int_equal(runnel_producer_flush(p), RUNNEL_OK);
    runnel_producer_stats st;
    runnel_producer_get_stats(p, &st);
    assert_int_equal(st.epoch, 1); /* claimed above the epoch the server held */
    runnel_producer_free(p);
    rn_buf got = {0};
    ts_read_all(C, url, &got);
    rn_buf_append_byte(&got, 0);
    assert_string_equal((char *)got.data, "w00000\nw00001\nw00000\nw00001\n");
    rn_buf_free(&got);
}

static void refusal_ends(void **state) {
    const char *url = "/v1/stream/prod/closed";
    make(url);
    runnel_answer a;
    assert_int_equal(runnel_close(C, url, NULL, &a), RUNNEL_OK);
    runnel_producer_options o = {.id = "z"};
    runnel_producer *p;
    char err[256], why[300];
    assert_int_equal(runnel_producer_open(C, url, &o, &p, err, sizeof err), RUNNEL_OK);
    runnel_producer_send(p, "x", 1, 1);
    assert_int_equal(runnel_producer_flush(p), RUNNEL_E_REFUSED);
    uint64_t seq;
    runnel_outcome oc;
    const runnel_answer *f = runnel_producer_failure(p, &seq, &oc, why, sizeof why);
    assert_non_null(f);
    assert_int_equal(oc, RUNNEL_REFUSED);
    assert_string_equal(f->error_code, "STREAM_CLOSED");
    assert_int_equal(seq, 0);
    assert_int_equal(runnel_producer_send(p, "y", 1, 2), RUNNEL_E_REFUSED);
    runnel_producer_free(p);
    assert_int_equal(runnel_producer_open(C, "/v1/stream/prod/none", &o, &p, err, sizeof err),
                     RUNNEL_E_STATUS);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(pipelined),        cmocka_unit_test(crossed_connections),
        cmocka_unit_test(unknown_outcomes), cmocka_unit_test(restart_from_state),
        cmocka_unit_test(state_guards),     cmocka_unit_test(fresh_claim),
        cmocka_unit_test(refusal_ends),
    };
    return cmocka_run_group_tests(tests, ts_group_setup, ts_group_teardown);
}
