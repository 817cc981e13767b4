/*
 * test_store_walk.c - unit tests of the walks over every stream that the
 * scrape and the operator's listings make (src/ops/store_walk.{h,c}) and
 * of the page they keep across loop turns (src/util/topk.{h,c}, an owned
 * selection): a small map walked inside the ask, a large one a slice per
 * loop turn with several walks taking turns, a walk stopped before its
 * end, and a page whose keys outlive the names offered.
 *
 * How: engine_fixture.h (a fresh data directory and engine per test); the
 * loop is run one iteration at a time (UV_RUN_NOWAIT) to count the slices
 * each turn took.
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_fixture.h"
#include "ops/store_walk.h"
#include "util/topk.h"

#define STREAMS 100

/* One walk's record: visits per stream /w/<i>, the slices it took, how it
 * ended. */
typedef struct {
    int visits[STREAMS];
    uint64_t slices;
    int restarts, finished, whole;
} walk_rec;

static void visit(rn_stream *s, void *arg) {
    walk_rec *r = arg;
    int i;
    if (sscanf(s->path, "/w/%d", &i) == 1 && i >= 0 && i < STREAMS)
        r->visits[i]++;
}

static void restart(void *arg) {
    walk_rec *r = arg;
    memset(r->visits, 0, sizeof r->visits);
    r->restarts++;
}

static void finish(void *arg, int whole) {
    walk_rec *r = arg;
    r->finished++;
    r->whole = whole;
}

static rn_store_walk_job job_of(walk_rec *r) {
    return (rn_store_walk_job){
        .visit = visit, .restart = restart, .finish = finish, .arg = r, .slices = &r->slices};
}

static void make_streams(fx *f) {
    char path[32];
    for (int i = 0; i < STREAMS; i++) {
        snprintf(path, sizeof path, "/w/%d", i);
        assert_int_equal(create(f, path, NULL, "x").result, RN_OK_CREATED);
    }
    assert_int_equal(delete_stream(f, "/w/3").result, RN_OK_DELETED);
}

static void assert_each_once(const walk_rec *r) {
    for (int i = 0; i < STREAMS; i++)
        assert_int_equal(r->visits[i], i == 3 ? 0 : 1);
}

/* A map of at most at_once slots is walked inside the ask. */
static void test_a_small_map_is_walked_inside_the_ask(void **state) {
    fx *f = *state;
    make_streams(f);
    rn_store_walk *w = rn_store_walk_new(&f->loop, f->e, rn_engine_stream_slots(f->e), 16);
    walk_rec r = {0};
    rn_store_walk_job job = job_of(&r);
    rn_store_walk_run(w, &job);
    assert_int_equal(r.finished, 1);
    assert_int_equal(r.whole, 1);
    assert_int_equal(r.slices, 0);
    assert_each_once(&r);
    rn_store_walk_stop(w);
    run(f);
    rn_store_walk_free(w);
}

/* A larger map: one slice per loop turn in all, two walks taking turns,
 * each visiting every visible stream once. */
static void test_walks_over_turns_take_one_slice_per_turn(void **state) {
    fx *f = *state;
    make_streams(f);
    size_t slots = rn_engine_stream_slots(f->e);
    rn_store_walk *w = rn_store_walk_new(&f->loop, f->e, 0, 16);
    walk_rec a = {0}, b = {0};
    rn_store_walk_job ja = job_of(&a), jb = job_of(&b);
    rn_store_walk_run(w, &ja);
    rn_store_walk_run(w, &jb);
    assert_int_equal(a.finished + b.finished, 0);
    int turns = 0;
    while (a.finished + b.finished < 2) {
        uint64_t before = a.slices + b.slices;
        uv_run(&f->loop, UV_RUN_NOWAIT);
        assert_true(a.slices + b.slices - before <= 1);
        /* taking turns: neither is more than one slice ahead */
        assert_true(a.slices <= b.slices + 1 && b.slices <= a.slices + 1);
        assert_true(++turns < 10000);
    }
    assert_int_equal(a.slices, slots / 16);
    assert_int_equal(b.slices, slots / 16);
    assert_true(a.whole && b.whole);
    assert_int_equal(a.restarts + b.restarts, 0);
    assert_each_once(&a);
    assert_each_once(&b);
    rn_store_walk_stop(w);
    run(f);
    rn_store_walk_free(w);
}

/* A walk under way when the walker stops ends unwhole, and so does one
 * asked for afterwards, at once. */
static void test_a_stopped_walker_ends_its_walks(void **state) {
    fx *f = *state;
    make_streams(f);
    rn_store_walk *w = rn_store_walk_new(&f->loop, f->e, 0, 16);
    walk_rec a = {0}, b = {0};
    rn_store_walk_job ja = job_of(&a), jb = job_of(&b);
    rn_store_walk_run(w, &ja);
    uv_run(&f->loop, UV_RUN_NOWAIT);
    assert_int_equal(a.slices, 1);
    rn_store_walk_stop(w);
    assert_int_equal(a.finished, 1);
    assert_int_equal(a.whole, 0);
    rn_store_walk_run(w, &jb);
    assert_int_equal(b.finished, 1);
    assert_int_equal(b.whole, 0);
    run(f);
    rn_store_walk_free(w);
}

/* An owned page copies the keys it keeps (the names may go before the
 * page is read), keeps a key offered twice once, and still keeps the k
 * smallest above its bound. */
static void test_an_owned_page_copies_its_keys_and_keeps_each_once(void **state) {
    (void)state;
    rn_topk t;
    rn_topk_init_owned(&t, 3, "b", 1);
    char name[8];
    const char *offers[] = {"e", "a", "d", "c", "d", "f", "c", "b", "bb"};
    for (size_t i = 0; i < sizeof offers / sizeof offers[0]; i++) {
        snprintf(name, sizeof name, "%s", offers[i]);
        rn_topk_offer(&t, name, strlen(name), NULL);
        memset(name, '#', sizeof name); /* the offered bytes change at once */
    }
    assert_int_equal(rn_topk_sort(&t), 3);
    assert_int_equal(t.heap[0].len, 2);
    assert_memory_equal(t.heap[0].key, "bb", 2);
    assert_memory_equal(t.heap[1].key, "c", 1);
    assert_memory_equal(t.heap[2].key, "d", 1);
    rn_topk_free(&t);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        T(test_a_small_map_is_walked_inside_the_ask),
        T(test_walks_over_turns_take_one_slice_per_turn),
        T(test_a_stopped_walker_ends_its_walks),
        cmocka_unit_test(test_an_owned_page_copies_its_keys_and_keeps_each_once),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
