/*
 * test_tail.c — runnel_tail against a live server: SSE and long-poll, text
 * and binary (base64 over SSE), catching up and stopping at the tail,
 * following across a server killed (SIGKILL) and restarted mid-tail with
 * every byte delivered once and in order, the end of a closed stream, an
 * incarnation change (a history rewrite) and a deleted stream reported to
 * the caller, and the bound on an event's size.
 */
#include "support.h"
#include "util/buf.h"

#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

typedef struct {
    rn_buf data;
    pthread_mutex_t lock;
    int events[8];
    char last_offset[RUNNEL_VALUE_MAX];
    char new_incarnation[32];
} seen;

static int on_data(void *arg, const void *d, size_t n, const char *next) {
    seen *s = arg;
    pthread_mutex_lock(&s->lock);
    rn_buf_append(&s->data, d, n);
    snprintf(s->last_offset, sizeof s->last_offset, "%s", next);
    pthread_mutex_unlock(&s->lock);
    return 0;
}

static int on_event(void *arg, runnel_tail_event ev, const char *next, const runnel_answer *a) {
    seen *s = arg;
    pthread_mutex_lock(&s->lock);
    s->events[ev]++;
    if (ev == RUNNEL_TAIL_INCARNATION)
        snprintf(s->new_incarnation, sizeof s->new_incarnation, "%s", a->incarnation);
    pthread_mutex_unlock(&s->lock);
    return 0;
}

static size_t seen_len(seen *s) {
    pthread_mutex_lock(&s->lock);
    size_t n = s->data.len;
    pthread_mutex_unlock(&s->lock);
    return n;
}

static void append(const char *url, const char *type, const void *d, size_t n) {
    runnel_answer a;
    runnel_append_options o = {.content_type = type};
    runnel_body b = {.data = d, .len = n};
    assert_int_equal(runnel_append(C, url, &b, &o, &a), RUNNEL_OK);
}

static void make(const char *url, const char *type) {
    runnel_answer a;
    runnel_create_options o = {.content_type = type};
    assert_int_equal(runnel_create(C, url, &o, &a), RUNNEL_OK);
}

static void catch_up(void **state) {
    static const char *paths[] = {"/v1/stream/tail/text", "/tailb/text"};
    for (int mode = RUNNEL_TAIL_SSE; mode <= RUNNEL_TAIL_LONG_POLL; mode++) {
        for (int p = 0; p < 2; p++) {
            char url[128];
            snprintf(url, sizeof url, "%s-%d", paths[p], mode);
            make(url, "text/plain");
            append(url, "text/plain", "line one\nline two\n", 18);
            append(url, "text/plain", " third\r\n", 8);
            seen s = {.lock = PTHREAD_MUTEX_INITIALIZER};
            runnel_tail_options o = {
                .mode = mode, .on_data = on_data, .on_event = on_event, .arg = &s};
            char last[RUNNEL_VALUE_MAX];
            runnel_answer a;
            assert_int_equal(runnel_tail(C, url, &o, last, &a), RUNNEL_OK);
            rn_buf_append_byte(&s.data, 0);
            /* SSE turns a text stream's CR into a line break (PROTOCOL §5.8
             * framing); long-poll carries the bytes as they are */
            assert_string_equal((char *)s.data.data, mode == RUNNEL_TAIL_SSE
                                                         ? "line one\nline two\n third\n"
                                                         : "line one\nline two\n third\r\n");
            assert_true(s.events[RUNNEL_TAIL_UP_TO_DATE] >= 1);
            assert_string_equal(last, s.last_offset);
            rn_buf_free(&s.data);
        }
    }
}

static void binary_sse(void **state) {
    const char *url = "/v1/stream/tail/bin";
    make(url, "application/octet-stream");
    uint8_t bytes[300];
    for (int i = 0; i < 300; i++)
        bytes[i] = (uint8_t)(i * 7);
    append(url, "application/octet-stream", bytes, 300);
    seen s = {.lock = PTHREAD_MUTEX_INITIALIZER};
    runnel_tail_options o = {.on_data = on_data, .arg = &s};
    runnel_answer a;
    assert_int_equal(runnel_tail(C, url, &o, NULL, &a), RUNNEL_OK);
    assert_int_equal(s.data.len, 300);
    assert_memory_equal(s.data.data, bytes, 300);
    rn_buf_free(&s.data);
    /* an event larger than max_event_bytes is refused, not buffered */
    o.max_event_bytes = 64;
    assert_int_equal(runnel_tail(C, url, &o, NULL, &a), RUNNEL_E_PROTOCOL);
    rn_buf_free(&s.data);
}

typedef struct {
    const char *url;
    runnel_tail_options o;
    runnel_result result;
    char last[RUNNEL_VALUE_MAX];
} tail_run;

static void *run_tail(void *arg) {
    tail_run *t = arg;
    runnel_client *c = ts_client(S); /* its own client: this thread's */
    runnel_answer a;
    t->result = runnel_tail(c, t->url, &t->o, t->last, &a);
    runnel_client_free(c);
    return NULL;
}

static void wait_for(seen *s, size_t n) {
    for (int i = 0; i < 400 && seen_len(s) < n; i++)
        ts_sleep_ms(25);
    assert_true(seen_len(s) >= n);
}

/* The server dies (SIGKILL) and comes back while the tail follows: it
 * reconnects from its last offset, and every byte arrives once. */
static void server_restart(void **state) {
    for (int mode = RUNNEL_TAIL_SSE; mode <= RUNNEL_TAIL_LONG_POLL; mode++) {
        char url[64];
        snprintf(url, sizeof url, "/tailb/restart-%d", mode);
        make(url, "text/plain");
        append(url, "text/plain", "before\n", 7);
        seen s = {.lock = PTHREAD_MUTEX_INITIALIZER};
        tail_run t = {.url = url,
                      .o = {.mode = mode,
                            .follow = 1,
                            .timeout_ms = 500,
                            .reconnect_for_ms = 30000,
                            .on_data = on_data,
                            .on_event = on_event,
                            .arg = &s}};
        pthread_t th;
        pthread_create(&th, NULL, run_tail, &t);
        wait_for(&s, 7);
        append(url, "text/plain", "second\n", 7);
        wait_for(&s, 14);
        ts_kill(S);
        ts_sleep_ms(300);
        ts_restart(S);
        append(url, "text/plain", "after\n", 6);
        wait_for(&s, 20);
        runnel_answer a;
        assert_int_equal(runnel_close(C, url, NULL, &a), RUNNEL_OK);
        pthread_join(th, NULL);
        assert_int_equal(t.result, RUNNEL_OK); /* the end of a closed stream */
        rn_buf_append_byte(&s.data, 0);
        assert_string_equal((char *)s.data.data, "before\nsecond\nafter\n");
        assert_true(s.events[RUNNEL_TAIL_RECONNECTING] >= 1);
        assert_int_equal(s.events[RUNNEL_TAIL_CLOSED], 1);
        rn_buf_free(&s.data);
    }
}

/* A history rewrite gives the stream a new incarnation: the tail stops
 * and says so, on both surfaces and in both modes. */
static void incarnation_change(void **state) {
    for (int mode = RUNNEL_TAIL_SSE; mode <= RUNNEL_TAIL_LONG_POLL; mode++) {
        for (int bucket = 0; bucket <= 1; bucket++) {
            char url[64], key[64], hook[160];
            snprintf(key, sizeof key, "tailr/inc-%d-%d", mode, bucket);
            snprintf(url, sizeof url, "%s/%s", bucket ? "" : "/v1/stream", key);
            make(url, "text/plain");
            append(url, "text/plain", "kept\n", 5);
            runnel_answer a;
            runnel_head(C, url, NULL, &a);
            char old[32];
            snprintf(old, sizeof old, "%s", a.incarnation);
            seen s = {.lock = PTHREAD_MUTEX_INITIALIZER};
            tail_run t = {.url = url,
                          .o = {.mode = mode,
                                .follow = 1,
                                .timeout_ms = 500,
                                .on_data = on_data,
                                .on_event = on_event,
                                .arg = &s}};
            pthread_t th;
            pthread_create(&th, NULL, run_tail, &t);
            wait_for(&s, 5);
            snprintf(hook, sizeof hook, "rewrite/tailr%%2Finc-%d-%d", mode, bucket);
            assert_int_equal(ts_hook(C, hook), 204);
            pthread_join(th, NULL);
            assert_int_equal(t.result, RUNNEL_E_INCARNATION);
            assert_int_equal(s.events[RUNNEL_TAIL_INCARNATION], 1);
            runnel_head(C, url, NULL, &a);
            assert_string_not_equal(a.incarnation, old);
            if (s.new_incarnation[0]) /* a 412 names the new token; an SSE error event not */
                assert_string_equal(s.new_incarnation, a.incarnation);
            rn_buf_free(&s.data);
        }
    }
    /* a deleted stream: the tail stops and reports it gone */
    const char *url = "/tailb/deleted";
    make(url, "text/plain");
    append(url, "text/plain", "x", 1);
    seen s = {.lock = PTHREAD_MUTEX_INITIALIZER};
    tail_run t = {.url = url,
                  .o = {.follow = 1, .on_data = on_data, .on_event = on_event, .arg = &s}};
    pthread_t th;
    pthread_create(&th, NULL, run_tail, &t);
    wait_for(&s, 1);
    runnel_answer a;
    assert_int_equal(runnel_delete(C, url, NULL, &a), RUNNEL_OK);
    pthread_join(th, NULL);
    assert_int_equal(t.result, RUNNEL_E_STATUS);
    assert_int_equal(s.events[RUNNEL_TAIL_GONE], 1);
    rn_buf_free(&s.data);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(catch_up),
        cmocka_unit_test(binary_sse),
        cmocka_unit_test(server_restart),
        cmocka_unit_test(incarnation_change),
    };
    return cmocka_run_group_tests(tests, ts_group_setup, ts_group_teardown);
}
