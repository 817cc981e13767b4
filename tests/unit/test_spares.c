/*
 * test_spares.c - unit tests for src/tiers/spares.{h,c}: the reserve of
 * empty stream file sets that new streams take their files from.
 *
 * How: a store and a reserve of four sets in a fresh temporary directory,
 * the loop run until the pool's refills are done. A set taken becomes the
 * stream's three empty files and the reserve fills up again; nothing is
 * made before the start, and an empty reserve answers 0 (the caller then
 * makes the files itself); a take never replaces a file that exists (a
 * stream that had files in an earlier process keeps its bytes); files an
 * earlier process left in the reserve's directory are removed.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tiers/spares.h"
#include "tiers/streamfiles.h"
#include "tmpdir.h"

#define TARGET 4

typedef struct {
    char dir[PATH_MAX];
    uv_loop_t loop;
    rn_streamfiles *st;
    rn_spares *sp;
} fx;

static int setup(void **state) {
    fx *f = calloc(1, sizeof *f);
    snprintf(f->dir, sizeof f->dir, "/tmp/runnel-spares-XXXXXX");
    if (!mkdtemp(f->dir) || uv_loop_init(&f->loop) != 0) {
        free(f);
        return -1;
    }
    f->st = rn_streamfiles_open(f->dir, 16);
    f->sp = rn_spares_open(&f->loop, f->st, f->dir, TARGET);
    *state = f;
    return f->sp ? 0 : -1;
}

static int teardown(void **state) {
    fx *f = *state;
    rn_spares_stop(f->sp);
    uv_run(&f->loop, UV_RUN_DEFAULT);
    rn_spares_close(f->sp);
    rn_streamfiles_close(f->st);
    int rc = uv_loop_close(&f->loop);
    rm_tree(f->dir);
    free(f);
    return rc == 0 ? 0 : -1;
}

/* Files in the reserve's directory. */
static int spare_files(const fx *f) {
    char p[PATH_MAX + 32];
    snprintf(p, sizeof p, "%s/spares", f->dir);
    DIR *d = opendir(p);
    assert_non_null(d);
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)))
        n += de->d_name[0] != '.';
    closedir(d);
    return n;
}

/* The size of stream id's file with the given suffix, or -1 when none. */
static long stream_file_size(const fx *f, uint64_t id, const char *suffix) {
    char p[PATH_MAX + 64];
    snprintf(p, sizeof p, "%s/streams/%02x/%016llx.%s", f->dir, (unsigned)(id & 0xff),
             (unsigned long long)id, suffix);
    struct stat sb;
    return stat(p, &sb) == 0 ? (long)sb.st_size : -1;
}

static void test_nothing_is_made_before_the_start(void **state) {
    fx *f = *state;
    assert_int_equal(rn_spares_take(f->sp, 1), 0);
    uv_run(&f->loop, UV_RUN_DEFAULT);
    assert_int_equal(spare_files(f), 0);
    assert_int_equal(stream_file_size(f, 1, "dat"), -1);
}

static void test_a_taken_set_becomes_the_streams_files_and_is_made_again(void **state) {
    fx *f = *state;
    rn_spares_start(f->sp);
    uv_run(&f->loop, UV_RUN_DEFAULT);
    assert_int_equal(spare_files(f), 3 * TARGET);
    for (uint64_t id = 0x101; id < 0x101 + TARGET; id++) /* the whole reserve */
        assert_int_equal(rn_spares_take(f->sp, id), 1);
    for (uint64_t id = 0x101; id < 0x101 + TARGET; id++) {
        assert_int_equal(stream_file_size(f, id, "dat"), 0);
        assert_int_equal(stream_file_size(f, id, "idx"), 0);
        assert_int_equal(stream_file_size(f, id, "sum"), 0);
    }
    uint8_t b[3] = {1, 2, 3}; /* the files are the stream's own */
    assert_int_equal(rn_streamfiles_append(f->st, 0x101, b, sizeof b, 0, 0), 0);
    assert_int_equal(stream_file_size(f, 0x101, "dat"), 3);
    uv_run(&f->loop, UV_RUN_DEFAULT);
    assert_int_equal(spare_files(f), 3 * TARGET);
}

static void test_an_empty_reserve_answers_0_and_fills_again(void **state) {
    fx *f = *state;
    rn_spares_start(f->sp);
    uv_run(&f->loop, UV_RUN_DEFAULT);
    for (uint64_t id = 1; id <= TARGET; id++)
        assert_int_equal(rn_spares_take(f->sp, id), 1);
    assert_int_equal(rn_spares_take(f->sp, 99), 0); /* the refill is still on the pool */
    assert_int_equal(stream_file_size(f, 99, "dat"), -1);
    uv_run(&f->loop, UV_RUN_DEFAULT);
    assert_int_equal(rn_spares_take(f->sp, 99), 1);
    assert_int_equal(stream_file_size(f, 99, "dat"), 0);
}

static void test_a_take_never_replaces_a_file_that_exists(void **state) {
    fx *f = *state;
    uint8_t b[5] = {9, 8, 7, 6, 5};
    assert_int_equal(rn_streamfiles_ensure(f->st, 7), 0);
    assert_int_equal(rn_streamfiles_append(f->st, 7, b, sizeof b, 0, 0), 0);
    rn_spares_start(f->sp);
    uv_run(&f->loop, UV_RUN_DEFAULT);
    assert_int_equal(rn_spares_take(f->sp, 7), 1);
    assert_int_equal(stream_file_size(f, 7, "dat"), 5);
    uint8_t back[5] = {0};
    uint64_t bad = 0;
    assert_int_equal(rn_streamfiles_read(f->st, 7, back, sizeof back, 0, &bad), 5);
    assert_memory_equal(back, b, sizeof b);
    uv_run(&f->loop, UV_RUN_DEFAULT);
    assert_int_equal(spare_files(f), 3 * TARGET); /* the set was removed, then made again */
}

static void test_files_an_earlier_process_left_are_removed(void **state) {
    fx *f = *state;
    char p[PATH_MAX + 64];
    for (int i = 0; i < 10; i++) {
        snprintf(p, sizeof p, "%s/spares/left-%d", f->dir, i);
        FILE *out = fopen(p, "w");
        assert_non_null(out);
        fclose(out);
    }
    rn_spares_start(f->sp);
    uv_run(&f->loop, UV_RUN_DEFAULT);
    assert_int_equal(spare_files(f), 3 * TARGET);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_nothing_is_made_before_the_start, setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_a_taken_set_becomes_the_streams_files_and_is_made_again, setup, teardown),
        cmocka_unit_test_setup_teardown(test_an_empty_reserve_answers_0_and_fills_again, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_a_take_never_replaces_a_file_that_exists, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_files_an_earlier_process_left_are_removed, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
