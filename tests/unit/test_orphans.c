/*
 * test_orphans.c - unit tests for the cold store's orphan sweep when the
 * store is shared by the nodes of a cluster (src/tiers/orphans.c,
 * rn_tiers_sweep_owned): a node judges only the objects of the streams it
 * owns, removes nothing its owner confirmation does not back, and judges
 * each doomed object again against the confirmed state.
 *
 * How: the tiers over the local-directory cold store with a grace of
 * GRACE_MS (a sweep every quarter of it); history objects are files planted
 * under <data>/cold/history/; the loop runs until a condition holds
 * (bounded). The confirmation answers later, from a timer, as a cluster's
 * does.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <uv.h>

#include "tiers/tiers.h"
#include "tmpdir.h"
#include "util/clock.h"

#define GRACE_MS 40

typedef struct {
    char root[64];
    char dir[128];
    uv_loop_t loop;
    rn_tiers *tiers;
    int kept[8];     /* stream i is in the state */
    int owned[8];    /* stream i's group is led here */
    int confirm_ok;  /* what confirmations answer */
    int confirms;    /* asked so far */
    int gain_during; /* stream whose state appears while a confirmation runs (-1: none) */
    uv_timer_t answer;
    rn_tiers_status_fn done;
    void *done_arg;
} fx;

static int kept(void *ctx, uint64_t id) {
    fx *f = ctx;
    return id < 8 && f->kept[id];
}

static int owns(void *ctx, uint64_t id) {
    fx *f = ctx;
    return id < 8 && f->owned[id];
}

static void answer(uv_timer_t *t) {
    fx *f = t->data;
    if (f->gain_during >= 0)
        f->kept[f->gain_during] = 1;
    f->done(f->done_arg, f->confirm_ok ? 0 : -EAGAIN);
}

static void confirm(void *ctx, const uint64_t *streams, size_t n, rn_tiers_status_fn done,
                    void *arg) {
    fx *f = ctx;
    for (size_t i = 0; i < n; i++)
        assert_true(owns(f, streams[i])); /* only the owner's objects are doomed */
    f->confirms++;
    f->done = done;
    f->done_arg = arg;
    uv_timer_start(&f->answer, answer, 5, 0);
}

static void object_path(fx *f, uint64_t id, char *out, size_t cap) {
    snprintf(out, cap, "%s/cold/history/%016llx/%016llx", f->dir, (unsigned long long)id, 0ull);
}

static void plant(fx *f, uint64_t id) {
    char dir[PATH_MAX], path[PATH_MAX + 32];
    snprintf(dir, sizeof dir, "%s/cold/history/%016llx", f->dir, (unsigned long long)id);
    mkdir(dir, 0755);
    object_path(f, id, path, sizeof path);
    FILE *o = fopen(path, "w");
    assert_non_null(o);
    fputs("a chunk", o);
    fclose(o);
}

static int present(fx *f, uint64_t id) {
    char path[PATH_MAX];
    object_path(f, id, path, sizeof path);
    return access(path, F_OK) == 0;
}

static int setup(void **state) {
    fx *f = calloc(1, sizeof *f);
    assert_non_null(f);
    strcpy(f->root, "/tmp/runnel-orphans-XXXXXX");
    assert_non_null(mkdtemp(f->root));
    snprintf(f->dir, sizeof f->dir, "%s/data", f->root);
    assert_int_equal(mkdir(f->dir, 0755), 0);
    assert_int_equal(uv_loop_init(&f->loop), 0);
    uv_timer_init(&f->loop, &f->answer);
    f->answer.data = f;
    f->gain_during = -1;
    f->confirm_ok = 1;
    rn_tiers_config tc = {.data_dir = f->dir,
                          .cold_store = 1,
                          .max_open_files = 16,
                          .parts_grace_ms = GRACE_MS,
                          .history_cache_bytes = 32u << 20};
    char err[256] = "";
    f->tiers = rn_tiers_open(&f->loop, &tc, err, sizeof err);
    if (!f->tiers)
        fail_msg("rn_tiers_open: %s", err);
    char history[PATH_MAX];
    snprintf(history, sizeof history, "%s/cold/history", f->dir);
    mkdir(history, 0755);
    rn_tiers_watch_history(f->tiers, kept, f);
    rn_tiers_sweep_owned(f->tiers, owns, confirm, f);
    *state = f;
    return 0;
}

static int teardown(void **state) {
    fx *f = *state;
    rn_tiers_stop(f->tiers);
    uv_run(&f->loop, UV_RUN_DEFAULT); /* a confirmation in flight answers, removing nothing */
    uv_close((uv_handle_t *)&f->answer, NULL);
    uv_run(&f->loop, UV_RUN_DEFAULT);
    rn_tiers_close(f->tiers);
    assert_int_equal(uv_loop_close(&f->loop), 0);
    rm_tree(f->root);
    free(f);
    return 0;
}

/* Runs the loop for ms milliseconds. */
static void run_for(fx *f, uint64_t ms) {
    uint64_t end = rn_mono_ms() + ms;
    while (rn_mono_ms() < end)
        uv_run(&f->loop, UV_RUN_NOWAIT), usleep(1000);
}

/* Runs the loop until stream id's object is gone, for at most 5 s. */
static void run_until_gone(fx *f, uint64_t id) {
    uint64_t end = rn_mono_ms() + 5000;
    while (present(f, id)) {
        if (rn_mono_ms() > end)
            fail_msg("stream %llu's object still there after 5 s", (unsigned long long)id);
        uv_run(&f->loop, UV_RUN_NOWAIT);
        usleep(1000);
    }
}

static void test_only_the_owned_streams_objects_are_judged(void **state) {
    fx *f = *state;
    f->owned[1] = 1; /* streams 1 and 2 are gone; only 1's group is led here */
    plant(f, 1);
    plant(f, 2);
    rn_tiers_start(f->tiers);
    run_until_gone(f, 1);
    run_for(f, 10 * GRACE_MS);
    assert_true(present(f, 2)); /* another node's to judge */
}

static void test_nothing_goes_without_a_confirmation(void **state) {
    fx *f = *state;
    f->owned[1] = 1;
    f->confirm_ok = 0;
    plant(f, 1);
    rn_tiers_start(f->tiers);
    run_for(f, 10 * GRACE_MS);
    assert_true(f->confirms >= 2); /* asked at every sweep past the grace */
    assert_true(present(f, 1));
    f->confirm_ok = 1; /* the leadership is confirmed again: it goes */
    run_until_gone(f, 1);
}

static void test_doomed_objects_are_judged_again_after_the_confirmation(void **state) {
    fx *f = *state;
    f->owned[3] = 1;
    f->gain_during = 3; /* the confirmed state holds the stream after all */
    plant(f, 3);
    rn_tiers_start(f->tiers);
    run_for(f, 10 * GRACE_MS);
    assert_true(f->confirms >= 1);
    assert_true(present(f, 3));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_only_the_owned_streams_objects_are_judged, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_nothing_goes_without_a_confirmation, setup, teardown),
        cmocka_unit_test_setup_teardown(test_doomed_objects_are_judged_again_after_the_confirmation,
                                        setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
