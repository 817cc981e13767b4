/*
 * test_subs_glob.c - unit tests for src/subs/glob.{h,c}, the subscription
 * pattern matcher.
 *
 * How: a table of hand-picked cases (one-segment and any-depth stars,
 * partial-segment stars, empty segments, literal matches), then a seeded
 * differential test: random patterns and paths over a tiny alphabet
 * compared with a plainly recursive reference matcher written here from
 * the rules in glob.h (exponential, but fine at these sizes), and a
 * timing-free complexity check on a pathological pattern.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "subs/glob.h"

static int match(const char *p, const char *s) {
    return rn_glob_match(p, strlen(p), s, strlen(s));
}

static void test_table(void **state) {
    (void)state;
    static const struct {
        const char *pattern, *path;
        int expect;
    } cases[] = {
        {"events/*", "events/a", 1},
        {"events/*", "events/abc", 1},
        {"events/*", "events/a/b", 0},
        {"events/*", "events", 0},
        {"events/*", "other/a", 0},
        {"events/**", "events", 1},
        {"events/**", "events/a", 1},
        {"events/**", "events/a/b/c", 1},
        {"events/**", "eventsx/a", 0},
        {"**", "a", 1},
        {"**", "a/b/c", 1},
        {"**/x", "x", 1},
        {"**/x", "a/b/x", 1},
        {"**/x", "a/b/y", 0},
        {"a/**/b", "a/b", 1},
        {"a/**/b", "a/x/y/b", 1},
        {"a/**/b", "a/x/y/c", 0},
        {"a/**/b/**/c", "a/b/c", 1},
        {"a/**/b/**/c", "a/1/b/2/3/c", 1},
        {"a/**/b/**/c", "a/1/c/2/b", 0},
        {"*/*", "a/b", 1},
        {"*/*", "a", 0},
        {"*", "", 1},
        {"events/user-*", "events/user-42", 1},
        {"events/user-*", "events/admin-42", 0},
        {"events/*-log", "events/x-log", 1},
        {"events/*-log", "events/x-log/y", 0},
        {"a*b*c", "abc", 1},
        {"a*b*c", "aXbYc", 1},
        {"a*b*c", "aXbY", 0},
        {"exact/path", "exact/path", 1},
        {"exact/path", "exact/path2", 0},
        {"exact/path", "exact", 0},
        {"a//b", "a//b", 1},
        {"a/*/b", "a//b", 1},
        {"**/**", "a", 1},
        {"x**y", "xzzy", 1},
        {"x**y", "xz/zy", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int got = match(cases[i].pattern, cases[i].path);
        if (got != cases[i].expect)
            fail_msg("\"%s\" vs \"%s\": got %d, want %d", cases[i].pattern, cases[i].path, got,
                     cases[i].expect);
    }
}

/* ---- reference matcher: direct recursion over the rules ---- */

static int ref_segment(const char *p, size_t pn, const char *s, size_t sn) {
    if (pn == 0)
        return sn == 0;
    if (p[0] == '*')
        for (size_t k = 0; k <= sn; k++)
            if (ref_segment(p + 1, pn - 1, s + k, sn - k))
                return 1;
    return p[0] != '*' && sn > 0 && p[0] == s[0] && ref_segment(p + 1, pn - 1, s + 1, sn - 1);
}

/* Splits into segments (pointers and lengths); returns the count. */
static int split(const char *s, const char *seg[], size_t len[]) {
    int n = 0;
    const char *start = s;
    for (const char *c = s;; c++) {
        if (*c == '/' || *c == 0) {
            seg[n] = start;
            len[n++] = (size_t)(c - start);
            start = c + 1;
        }
        if (*c == 0)
            return n;
    }
}

static int ref_segments(const char **ps, size_t *pl, int pn, const char **ss, size_t *sl, int sn) {
    if (pn == 0)
        return sn == 0;
    if (pl[0] == 2 && ps[0][0] == '*' && ps[0][1] == '*') {
        for (int k = 0; k <= sn; k++)
            if (ref_segments(ps + 1, pl + 1, pn - 1, ss + k, sl + k, sn - k))
                return 1;
        return 0;
    }
    return sn > 0 && ref_segment(ps[0], pl[0], ss[0], sl[0]) &&
           ref_segments(ps + 1, pl + 1, pn - 1, ss + 1, sl + 1, sn - 1);
}

static int ref_match(const char *p, const char *s) {
    const char *ps[64], *ss[64];
    size_t pl[64], sl[64];
    int pn = split(p, ps, pl), sn = split(s, ss, sl);
    return ref_segments(ps, pl, pn, ss, sl, sn);
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint64_t next(void) {
    rng ^= rng >> 12;
    rng ^= rng << 25;
    rng ^= rng >> 27;
    return rng * 0x2545F4914F6CDD1Dull;
}

static void random_text(char *out, int max, const char *alphabet) {
    int n = (int)(next() % (uint64_t)(max + 1));
    size_t an = strlen(alphabet);
    for (int i = 0; i < n; i++)
        out[i] = alphabet[next() % an];
    out[n] = 0;
}

static void test_differential(void **state) {
    (void)state;
    char p[16], s[16];
    int matches = 0;
    for (int i = 0; i < 200000; i++) {
        random_text(p, 10, "ab/**");
        random_text(s, 10, "ab/");
        int want = ref_match(p, s), got = match(p, s);
        if (got != want)
            fail_msg("\"%s\" vs \"%s\": got %d, reference %d", p, s, got, want);
        matches += want;
    }
    assert_true(matches > 1000); /* the generator exercises both outcomes */
}

static void test_pathological_pattern_is_fast(void **state) {
    (void)state;
    /* 30 globstars against 2000 segments: exponential backtracking would
     * never finish; the single-backtrack algorithm does ~60k steps. */
    char p[256], s[4200];
    size_t n = 0;
    for (int i = 0; i < 30; i++)
        n += (size_t)sprintf(p + n, "**/a/");
    sprintf(p + n, "b");
    n = 0;
    for (int i = 0; i < 2000; i++)
        n += (size_t)sprintf(s + n, "a/");
    s[n - 1] = 0;
    assert_false(match(p, s));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table),
        cmocka_unit_test(test_differential),
        cmocka_unit_test(test_pathological_pattern_is_fast),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
