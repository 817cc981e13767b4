/*
 * test_fanout.c - unit tests for src/transport/fanout.{h,c}, the helper
 * threads of parallel fan-out.
 *
 * How: many jobs of varied sizes in a row (so that helpers waking late
 * meet newer jobs), each item counting its calls with an atomic; every
 * item of every job must be called exactly once and before its job
 * returns, and items must be spread over more than one thread when the
 * items are slow enough for helpers to join. Freeing joins the helpers
 * (LSan reports any thread left behind under ASan).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#include "transport/fanout.h"

typedef struct {
    _Atomic int calls;
    pthread_t by;
} item;

static void touch(void *p) {
    item *it = p;
    atomic_fetch_add(&it->calls, 1);
    it->by = pthread_self();
}

static void slow_touch(void *p) {
    struct timespec ts = {0, 20000}; /* 20 µs: long enough for helpers to take some */
    nanosleep(&ts, NULL);
    touch(p);
}

enum { MAX = 2000 };

typedef struct {
    rn_fanout *f;
    item *items;
} fixture;

static int setup(void **state) {
    fixture *x = calloc(1, sizeof *x);
    x->f = rn_fanout_new(3);
    x->items = calloc(MAX, sizeof *x->items);
    *state = x;
    return x->f && x->items ? 0 : -1;
}

static int teardown(void **state) {
    fixture *x = *state;
    rn_fanout_free(x->f);
    free(x->items);
    free(x);
    return 0;
}

static void test_every_item_once(void **state) {
    fixture *x = *state;
    srand(7);
    for (int job = 0; job < 2000; job++) {
        size_t n = job % 100 == 0 ? 0 : (size_t)(rand() % MAX) + 1;
        for (size_t i = 0; i < MAX; i++)
            atomic_store(&x->items[i].calls, 0);
        rn_fanout_run(x->f, touch, x->items, sizeof *x->items, n);
        for (size_t i = 0; i < MAX; i++)
            assert_int_equal(atomic_load(&x->items[i].calls), i < n ? 1 : 0);
    }
}

static void test_helpers_take_items(void **state) {
    fixture *x = *state;
    rn_fanout_run(x->f, slow_touch, x->items, sizeof *x->items, MAX);
    int others = 0;
    for (size_t i = 0; i < MAX; i++) {
        assert_int_equal(atomic_load(&x->items[i].calls), 1);
        others += !pthread_equal(x->items[i].by, pthread_self());
    }
    assert_true(others > 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_every_item_once, setup, teardown),
        cmocka_unit_test_setup_teardown(test_helpers_take_items, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
