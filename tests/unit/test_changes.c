/*
 * test_changes.c - unit tests for the journal of changed stream paths
 * (src/cluster/changes.h), which answers a peer's ask with the streams
 * changed since its last one.
 *
 * How: changes are noted (after the journal is told to keep them: before,
 * nothing is) and the paths reported since chosen points are
 * collected and compared with the paths expected, each with whether it was
 * reported removed; a path changed twice is reported once, with its last
 * change. Points the journal cannot answer (past its end, older than a
 * removal it forgot, of an incarnation before forget_all) are refused.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster/changes.h"

/* The paths reported, sorted, as "path" or "-path" (removed), joined by
 * spaces. */
typedef struct {
    char *items[64];
    size_t n;
} reported;

static void collect(const char *path, size_t len, int removed, void *arg) {
    reported *r = arg;
    assert_true(r->n < 64);
    char *s = malloc(len + 2);
    snprintf(s, len + 2, "%s%.*s", removed ? "-" : "", (int)len, path);
    r->items[r->n++] = s;
}

static int cmp(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Asserts what the journal reports since `since`: want, or (want NULL) a
 * refusal. */
static void check_since(const rn_changes *c, uint64_t since, const char *want) {
    reported r = {0};
    int ok = rn_changes_since(c, since, collect, &r);
    if (!want) {
        assert_int_equal(ok, 0);
        assert_int_equal(r.n, 0);
        return;
    }
    assert_int_equal(ok, 1);
    qsort(r.items, r.n, sizeof r.items[0], cmp);
    char got[1024] = "";
    for (size_t i = 0; i < r.n; i++) {
        if (i)
            strcat(got, " ");
        strcat(got, r.items[i]);
        free(r.items[i]);
    }
    assert_string_equal(got, want);
}

static void note(rn_changes *c, const char *path, int removed) {
    rn_changes_note(c, path, strlen(path), removed);
}

static void test_notes_nothing_until_kept(void **state) {
    (void)state;
    rn_changes *c = rn_changes_new(8);
    note(c, "a", 0);
    note(c, "b", 1);
    assert_int_equal(rn_changes_seq(c), 0);
    check_since(c, 0, "");
    rn_changes_keep(c);
    note(c, "c", 0);
    check_since(c, 0, "c");
    rn_changes_free(c);
}

static void test_reports_each_path_once_with_its_last_change(void **state) {
    (void)state;
    rn_changes *c = rn_changes_new(8);
    rn_changes_keep(c);
    assert_int_not_equal(rn_changes_incarnation(c), 0);
    assert_int_equal(rn_changes_seq(c), 0);
    check_since(c, 0, "");
    note(c, "a", 0);
    note(c, "b", 0);
    uint64_t after_b = rn_changes_seq(c);
    assert_int_equal(after_b, 2);
    note(c, "a", 0); /* a again: reported once, as changed after b */
    note(c, "c", 0);
    note(c, "b", 1); /* b removed */
    check_since(c, 0, "-b a c");
    check_since(c, after_b, "-b a c");
    check_since(c, after_b + 2, "-b");
    check_since(c, rn_changes_seq(c), "");
    note(c, "b", 0); /* re-created: live again */
    check_since(c, after_b + 2, "b");
    rn_changes_free(c);
}

static void test_refuses_points_it_cannot_answer(void **state) {
    (void)state;
    rn_changes *c = rn_changes_new(2);
    rn_changes_keep(c);
    note(c, "x", 0);
    check_since(c, rn_changes_seq(c) + 1, NULL); /* past its end: another journal's */
    note(c, "r1", 1);
    note(c, "r2", 1);
    uint64_t before_r3 = rn_changes_seq(c);
    check_since(c, 0, "-r1 -r2 x");
    note(c, "r3", 1); /* three removals kept two: r1 forgotten */
    check_since(c, 0, NULL);
    check_since(c, 1, NULL);
    check_since(c, 2, "-r2 -r3"); /* r1 was change 2: a point at it saw it */
    check_since(c, before_r3, "-r3");
    note(c, "x", 0); /* live paths are never forgotten */
    check_since(c, 2, "-r2 -r3 x");
    rn_changes_free(c);
}

static void test_forget_all_starts_a_new_incarnation(void **state) {
    (void)state;
    rn_changes *c = rn_changes_new(4);
    rn_changes_keep(c);
    note(c, "a", 0);
    note(c, "b", 1);
    uint64_t before = rn_changes_incarnation(c);
    rn_changes_forget_all(c);
    assert_int_not_equal(rn_changes_incarnation(c), before);
    assert_int_not_equal(rn_changes_incarnation(c), 0);
    assert_int_equal(rn_changes_seq(c), 0);
    check_since(c, 0, "");
    note(c, "a", 0);
    check_since(c, 0, "a");
    rn_changes_free(c);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_notes_nothing_until_kept),
        cmocka_unit_test(test_reports_each_path_once_with_its_last_change),
        cmocka_unit_test(test_refuses_points_it_cannot_answer),
        cmocka_unit_test(test_forget_all_starts_a_new_incarnation),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
