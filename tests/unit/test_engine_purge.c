/*
 * test_engine_purge.c - unit tests of bucket purges in the engine
 * (src/engine/purge.c, fences.c and the state they add): a fence hides its
 * namespace's streams and refuses every request there, the purge driver
 * removes them with their files and leaves other namespaces alone, a
 * create logged before the fence applied is refused at apply (the pending
 * stream and its files gone), forks in other namespaces lose what they
 * read through a purged source and keep their own bytes, the fence and an
 * unfinished purge survive clean and crash restarts (checkpoint and log
 * replay), and a checkpoint is "RNCKPT04" only with fences.
 *
 * How: engine_fixture.h. The purge driver's timer does not hold the loop,
 * so purge_all() runs the loop with a timer of its own until no fenced
 * stream is left.
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_fixture.h"
#include "util/clock.h"

/* ---- helpers ---- */

static void fenced_done(void *arg, rn_result r) {
    *(rn_result *)arg = r;
}

/* Records the fence of ns (a single node's: every stream) and waits for it. */
static rn_result fence(fx *f, const char *ns) {
    rn_result r = (rn_result)-1;
    rn_engine_fence(f->e, ns, strlen(ns), -1, fenced_done, &r);
    run(f);
    return r;
}

static void count_one(rn_stream *s, void *arg) {
    (void)s;
    (*(size_t *)arg)++;
}

static size_t fenced_left(fx *f) {
    size_t n = 0;
    rn_engine_foreach_fenced(f->e, count_one, &n);
    return n;
}

static void keep_alive(uv_timer_t *t) {
    (void)t;
}

/* Runs the purge driver until no fenced stream is left (at most 10 s). */
static void purge_all(fx *f) {
    rn_engine_purge_start(f->e);
    uv_timer_t alive;
    uv_timer_init(&f->loop, &alive);
    uv_timer_start(&alive, keep_alive, 10, 10);
    uint64_t deadline = rn_mono_ms() + 10000;
    while ((fenced_left(f) || rn_engine_busy(f->e)) && rn_mono_ms() < deadline)
        uv_run(&f->loop, UV_RUN_ONCE);
    uv_close((uv_handle_t *)&alive, NULL);
    rn_engine_purge_stop(f->e);
    run(f);
    assert_int_equal(fenced_left(f), 0);
}

/* True when a file under the data directory's streams/ names stream id. */
static int has_files(fx *f, uint64_t id) {
    char hex[17], dir[PATH_MAX];
    snprintf(hex, sizeof hex, "%016llx", (unsigned long long)id);
    snprintf(dir, sizeof dir, "%s/streams", f->dir);
    DIR *top = opendir(dir);
    if (!top)
        return 0;
    int found = 0;
    struct dirent *d;
    while (!found && (d = readdir(top))) {
        if (d->d_name[0] == '.')
            continue;
        char sub[PATH_MAX + 300];
        snprintf(sub, sizeof sub, "%s/%s", dir, d->d_name);
        DIR *inner = opendir(sub);
        struct dirent *e;
        while (inner && !found && (e = readdir(inner)))
            found = strstr(e->d_name, hex) != NULL;
        if (inner)
            closedir(inner);
    }
    closedir(top);
    return found;
}

/* The checkpoint's magic (8 bytes). */
static void checkpoint_magic(fx *f, char out[9]) {
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/checkpoint", f->dir);
    FILE *c = fopen(path, "rb");
    assert_non_null(c);
    assert_int_equal(fread(out, 1, 8, c), 8);
    out[8] = 0;
    fclose(c);
}

/* ---- tests ---- */

static void test_a_fence_hides_refuses_and_the_purge_removes(void **state) {
    fx *f = *state;
    uint64_t a = create(f, "gone/a", NULL, "aaaa").stream_id;
    uint64_t b = create(f, "gone/b", "text/plain", "bb").stream_id;
    uint64_t k = create(f, "kept/a", NULL, "kkk").stream_id;
    assert_true(has_files(f, a) && has_files(f, b));
    assert_int_equal(fence(f, "gone"), RN_OK_FENCED);
    /* hidden at once, and every request there refused */
    assert_null(find(f, "gone/a"));
    assert_true(rn_engine_path_erased(f->e, "gone/a", 6, 0));
    assert_true(rn_engine_path_erased(f->e, "gone", 4, 1));
    assert_false(rn_engine_path_erased(f->e, "kept/a", 6, 0));
    assert_int_equal(append(f, "gone/a", "x").result, RN_ERR_BUCKET_ERASED);
    assert_int_equal(create(f, "gone/new", NULL, NULL).result, RN_ERR_BUCKET_ERASED);
    assert_int_equal(delete_stream(f, "gone/b").result, RN_ERR_BUCKET_ERASED);
    assert_int_equal(fenced_left(f), 2);
    /* a repeat is recorded already */
    assert_int_equal(fence(f, "gone"), RN_OK_FENCED);
    purge_all(f);
    assert_false(has_files(f, a) || has_files(f, b));
    assert_true(has_files(f, k));
    expect_bytes(f, "kept/a", "kkk");
    assert_int_equal(append(f, "kept/a", "!").result, RN_OK_APPENDED);
    assert_int_equal(create(f, "gone/a", NULL, NULL).result, RN_ERR_BUCKET_ERASED);
}

static void test_a_create_logged_before_the_fence_applied_is_refused_at_apply(void **state) {
    fx *f = *state;
    rn_result fenced = (rn_result)-1;
    /* the fence is in the log, not applied, when the create is validated */
    rn_engine_fence(f->e, "race", 4, -1, fenced_done, &fenced);
    req r;
    req_init(&r, RN_OP_CREATE, "race/s");
    req_text(&r, OCTET, "data logged with the create");
    rn_engine_submit(f->e, &r.op);
    run(f);
    assert_int_equal(fenced, RN_OK_FENCED);
    assert_true(r.out.done);
    assert_int_equal(r.out.result, RN_ERR_BUCKET_ERASED);
    assert_null(find(f, "race/s"));
    assert_int_equal(fenced_left(f), 0); /* nothing was created: nothing to purge */
    /* replayed from the log, the create is refused again */
    restart_crash(f, "replayed", NULL);
    assert_null(find(f, "race/s"));
    assert_int_equal(create(f, "race/s", NULL, NULL).result, RN_ERR_BUCKET_ERASED);
}

static void test_forks_elsewhere_lose_what_they_read_through_a_purged_source(void **state) {
    fx *f = *state;
    uint64_t src = create(f, "gone/src", NULL, "0123456789").stream_id;
    req r;
    req_init(&r, RN_OP_CREATE, "kept/fork");
    r.op.in.fork_source = "gone/src";
    r.op.in.fork_source_len = 8;
    outcome o = run_req(f, &r);
    assert_int_equal(o.result, RN_OK_CREATED);
    assert_int_equal(append(f, "kept/fork", "own").result, RN_OK_APPENDED);
    req_init(&r, RN_OP_CREATE, "kept/grandchild");
    r.op.in.fork_source = "kept/fork";
    r.op.in.fork_source_len = 9;
    assert_int_equal(run_req(f, &r).result, RN_OK_CREATED);
    assert_int_equal(fence(f, "gone"), RN_OK_FENCED);
    purge_all(f);
    assert_false(has_files(f, src));
    rn_stream *fork = find(f, "kept/fork");
    assert_non_null(fork);
    assert_null(fork->source);
    assert_int_equal(fork->fork_depth, 0);
    assert_int_equal(fork->retained, 10); /* the source's bytes are gone: 410 below */
    assert_int_equal(fork->tail, 13);
    expect_bytes_from(f, "kept/fork", 10, "own", 3);
    rn_stream *g = find(f, "kept/grandchild");
    assert_non_null(g);
    assert_ptr_equal(g->source, fork);
    assert_int_equal(g->fork_depth, 1);
    assert_int_equal(g->retained, 10); /* its chain reached the source below 10 */
    expect_bytes_from(f, "kept/grandchild", 10, "own", 3);
    restart_clean(f);
    assert_int_equal(find(f, "kept/fork")->retained, 10);
    assert_int_equal(find(f, "kept/grandchild")->retained, 10);
}

static void test_the_fence_and_an_unfinished_purge_survive_restarts(void **state) {
    fx *f = *state;
    create(f, "gone/a", NULL, "aaaa");
    uint64_t b = create(f, "gone/b", NULL, "bbbb").stream_id;
    create(f, "kept/a", NULL, "k");
    restart_clean(f);
    char magic[9];
    checkpoint_magic(f, magic);
    assert_string_equal(magic, "RNCKPT03"); /* no fence: readable by builds before fences */
    assert_int_equal(fence(f, "gone"), RN_OK_FENCED);
    /* a crash before the driver ran: the log has the fence, the streams are there */
    restart_crash(f, "fenced", NULL);
    assert_null(find(f, "gone/a"));
    assert_int_equal(fenced_left(f), 2);
    assert_int_equal(create(f, "gone/c", NULL, NULL).result, RN_ERR_BUCKET_ERASED);
    restart_clean(f); /* now from the checkpoint */
    checkpoint_magic(f, magic);
    assert_string_equal(magic, "RNCKPT04");
    assert_int_equal(fenced_left(f), 2);
    purge_all(f);
    assert_false(has_files(f, b));
    restart_clean(f);
    assert_int_equal(fenced_left(f), 0);
    assert_int_equal(create(f, "gone/a", NULL, NULL).result, RN_ERR_BUCKET_ERASED);
    expect_bytes(f, "kept/a", "k");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        T(test_a_fence_hides_refuses_and_the_purge_removes),
        T(test_a_create_logged_before_the_fence_applied_is_refused_at_apply),
        T(test_forks_elsewhere_lose_what_they_read_through_a_purged_source),
        T(test_the_fence_and_an_unfinished_purge_survive_restarts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
