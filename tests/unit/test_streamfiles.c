/*
 * test_streamfiles.c - unit tests for src/tiers/streamfiles.{h,c}: stream files, the
 * descriptor cache and pins.
 *
 * How: a store in a fresh temporary directory with a descriptor cache of
 * two, so that touching a few other streams evicts everything that is not
 * pinned. A pinned append must still be writable through its descriptors
 * (as the log's worker writes it) and land in its own stream's files;
 * files are only created by the calls that say so; truncation of a stream
 * without files creates none; a gap record keeps what it holds (a kept
 * range with no gap left stays; one written before `held` reads as 0).
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

#include "tiers/streamfiles.h"

typedef struct {
    char dir[PATH_MAX];
    rn_streamfiles *st;
} fx;

static int setup(void **state) {
    fx *f = calloc(1, sizeof *f);
    snprintf(f->dir, sizeof f->dir, "/tmp/runnel-store-XXXXXX");
    if (!mkdtemp(f->dir)) {
        free(f);
        return -1;
    }
    f->st = rn_streamfiles_open(f->dir, 2);
    *state = f;
    return 0;
}

static int teardown(void **state) {
    fx *f = *state;
    rn_streamfiles_close(f->st);
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", f->dir);
    int rc = system(cmd);
    free(f);
    return rc == 0 ? 0 : -1;
}

/* Whether stream id's file of the given suffix ("dat" or "idx") exists. */
static int file_exists(const fx *f, uint64_t id, const char *suffix) {
    char p[PATH_MAX + 64];
    snprintf(p, sizeof p, "%s/streams/%02x/%016llx.%s", f->dir, (unsigned)(id & 0xff),
             (unsigned long long)id, suffix);
    struct stat sb;
    return stat(p, &sb) == 0;
}

static void test_a_pinned_append_survives_eviction_and_lands_in_its_own_files(void **state) {
    fx *f = *state;
    for (uint64_t id = 1; id <= 4; id++)
        assert_int_equal(rn_streamfiles_ensure(f->st, id), 0);
    rn_streamfiles_pin pin;
    assert_int_equal(rn_streamfiles_pin_append(f->st, 1, 0, 5, 0, &pin), 0);
    /* Other streams' files go through the cache of two meanwhile. */
    char other[8] = "other!!";
    for (uint64_t id = 2; id <= 4; id++)
        assert_int_equal(rn_streamfiles_append(f->st, id, other, 7, 0, 0), 0);
    assert_int_equal(rn_streamfiles_write_pinned(&pin, "hello", 5, 0, 0), 0);
    rn_streamfiles_unpin(&pin);
    char got[8] = {0};
    assert_int_equal(rn_streamfiles_read(f->st, 1, got, sizeof got, 0, NULL), 5);
    assert_memory_equal(got, "hello", 5);
    uint64_t end = 0;
    assert_int_equal(rn_streamfiles_index_get(f->st, 1, 0, &end), 0);
    assert_int_equal(end, 5);
    for (uint64_t id = 2; id <= 4; id++) {
        memset(got, 0, sizeof got);
        assert_int_equal(rn_streamfiles_read(f->st, id, got, sizeof got, 0, NULL), 7);
        assert_memory_equal(got, other, 7);
    }
    /* Unpinned, stream 1's files can be evicted and reopened. */
    for (uint64_t id = 2; id <= 4; id++)
        assert_int_equal(rn_streamfiles_read(f->st, id, got, 1, 0, NULL), 1);
    assert_int_equal(rn_streamfiles_read(f->st, 1, got, 5, 0, NULL), 5);
    assert_memory_equal(got, "hello", 5);
}

static void test_files_exist_only_once_made(void **state) {
    fx *f = *state;
    char b[4];
    assert_false(file_exists(f, 7, "dat"));
    assert_int_equal(rn_streamfiles_read(f->st, 7, b, sizeof b, 0, NULL), -ENOENT);
    assert_false(file_exists(f, 7, "dat"));
    /* Truncating a stream that has no files (recovery, rewrites) makes none. */
    assert_int_equal(rn_streamfiles_truncate(f->st, 7, 0, 0), 0);
    assert_false(file_exists(f, 7, "dat"));
    assert_false(file_exists(f, 7, "idx"));
    assert_int_equal(rn_streamfiles_ensure(f->st, 7), 0);
    assert_true(file_exists(f, 7, "dat"));
    assert_true(file_exists(f, 7, "idx"));
    /* Making them again keeps their content. */
    assert_int_equal(rn_streamfiles_append(f->st, 7, "abc", 3, 0, 0), 0);
    assert_int_equal(rn_streamfiles_ensure(f->st, 7), 0);
    assert_int_equal(rn_streamfiles_read(f->st, 7, b, sizeof b, 0, NULL), 3);
    assert_memory_equal(b, "abc", 3);
    assert_int_equal(rn_streamfiles_truncate(f->st, 7, 1, 0), 0);
    assert_int_equal(rn_streamfiles_read(f->st, 7, b, sizeof b, 0, NULL), 1);
}

static void test_a_gap_record_keeps_a_held_range_without_a_gap(void **state) {
    fx *f = *state;
    rn_streamfiles_gap g = {.from = 3, .to = 9, .held = 9}, back;
    assert_int_equal(rn_streamfiles_gap_put(f->st, 7, &g), 0);
    assert_int_equal(rn_streamfiles_gap_get(f->st, 7, &back), 0);
    assert_memory_equal(&back, &g, sizeof g);
    g.from = g.to = 0; /* copied: only the mark stays */
    assert_int_equal(rn_streamfiles_gap_put(f->st, 7, &g), 0);
    assert_int_equal(rn_streamfiles_gap_get(f->st, 7, &back), 0);
    assert_int_equal(back.held, 9);
    assert_true(back.from >= back.to && back.kfrom >= back.kto);
    g.held = 0; /* nothing left: the record goes */
    assert_int_equal(rn_streamfiles_gap_put(f->st, 7, &g), 0);
    assert_int_equal(rn_streamfiles_gap_get(f->st, 7, &back), -ENOENT);
    /* a record of four fields (before `held`) reads with none held */
    char p[PATH_MAX + 64];
    snprintf(p, sizeof p, "%s/streams/07/0000000000000007.gap", f->dir);
    uint64_t old[4] = {1, 2, 0, 0}; /* little-endian hosts: the record's byte order */
    FILE *o = fopen(p, "wb");
    assert_non_null(o);
    assert_int_equal(fwrite(old, sizeof old, 1, o), 1);
    fclose(o);
    assert_int_equal(rn_streamfiles_gap_get(f->st, 7, &back), 0);
    assert_int_equal(back.from, 1);
    assert_int_equal(back.to, 2);
    assert_int_equal(back.held, 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(
            test_a_pinned_append_survives_eviction_and_lands_in_its_own_files, setup, teardown),
        cmocka_unit_test_setup_teardown(test_files_exist_only_once_made, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_gap_record_keeps_a_held_range_without_a_gap, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
