/*
 * test_params.c - unit tests for the request rules of the surfaces: the v1
 * stream-name rule (src/surface/v1.c), query parameters under the one rule
 * for headers and parameters (src/protocol/params.c) and lowercase hex
 * digests (src/util/text.c).
 *
 * How: tables of accepted and refused inputs with the answer each must get;
 * the header half of params.c needs a request and is covered by the
 * black-box tests (tests/blackbox/names_params.test.mjs).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "protocol/params.h"
#include "surface/v1.h"
#include "util/text.h"

static int name_ok(const char *s) {
    return rn_v1_name_valid(s, strlen(s));
}

static void test_v1_names_accepted(void **state) {
    (void)state;
    const char *ok[] = {"a",   "a/b", "a/b/c",   "caf\xc3\xa9", ".hidden", "a..b",
                        "...", "a b", "a/.b/c.", "__x",         "a%2Fb"};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
        assert_true(name_ok(ok[i]));
    char max[1024];
    memset(max, 'x', sizeof max);
    assert_true(rn_v1_name_valid(max, sizeof max));
}

static void test_v1_names_refused(void **state) {
    (void)state;
    const char *bad[] = {"",       "/",    "/a",       "a/",           "a//b", ".",
                         "..",     "a/.",  "a/..",     "./a",          "../a", "a/./b",
                         "a/../b", "\xff", "\xc0\xaf", "a\xed\xa0\x80"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_false(name_ok(bad[i]));
    assert_false(rn_v1_name_valid("a\0b", 3));
    char over[1025];
    memset(over, 'x', sizeof over);
    assert_false(rn_v1_name_valid(over, sizeof over));
}

/* Looks up `name` in q with `malformed` RN_E_INVALID_QUERY; returns the
 * call's result, the value in val and its length in *n, the fault in *f. */
static int lookup(const char *q, const char *name, rn_error malformed, char *val, long *n,
                  rn_param_fault *f) {
    return rn_param_query(q, strlen(q), name, malformed, val, 64, n, f);
}

static void test_query_parameters_found_once(void **state) {
    (void)state;
    char val[64];
    long n;
    rn_param_fault f;
    assert_int_equal(lookup("offset=-1&live=sse", "live", RN_E_INVALID_QUERY_LIVE, val, &n, &f), 0);
    assert_int_equal(n, 3);
    assert_memory_equal(val, "sse", 3);
    assert_int_equal(lookup("a=1&b=2", "offset", RN_E_INVALID_OFFSET, val, &n, &f), 0);
    assert_int_equal(n, -1); /* absent */
    /* Names and values are percent-decoded; names are compared whole. */
    assert_int_equal(lookup("o%66fset=%2D1&offsets=9", "offset", RN_E_INVALID_OFFSET, val, &n, &f),
                     0);
    assert_int_equal(n, 2);
    assert_memory_equal(val, "-1", 2);
}

static void test_query_parameters_repeated_or_empty_are_refused(void **state) {
    (void)state;
    char val[64];
    long n;
    rn_param_fault f;
    const char *repeats[] = {"live=sse&live=sse", "live=sse&live=long-poll", "live&live=sse",
                             "l%69ve=sse&live=sse"};
    for (size_t i = 0; i < sizeof repeats / sizeof repeats[0]; i++) {
        assert_int_equal(lookup(repeats[i], "live", RN_E_INVALID_QUERY_LIVE, val, &n, &f), -1);
        assert_int_equal(f.error, RN_E_QUERY_REPEATED);
        assert_string_equal(f.detail, "live");
    }
    const char *malformed[] = {"offset=", "offset", "offset=%zz", "x=1&offset=&y=2"};
    for (size_t i = 0; i < sizeof malformed / sizeof malformed[0]; i++) {
        assert_int_equal(lookup(malformed[i], "offset", RN_E_INVALID_OFFSET, val, &n, &f), -1);
        assert_int_equal(f.error, RN_E_INVALID_OFFSET);
        assert_null(f.detail);
    }
    /* A lenient parameter returns its malformed value as empty... */
    assert_int_equal(lookup("timeout_ms=", "timeout_ms", RN_PARAM_LENIENT, val, &n, &f), 0);
    assert_int_equal(n, 0);
    assert_int_equal(lookup("timeout_ms=%zz", "timeout_ms", RN_PARAM_LENIENT, val, &n, &f), 0);
    assert_int_equal(n, 0);
    /* ...but its repeat is refused all the same. */
    assert_int_equal(
        lookup("timeout_ms=1&timeout_ms=1", "timeout_ms", RN_PARAM_LENIENT, val, &n, &f), -1);
    assert_int_equal(f.error, RN_E_QUERY_REPEATED);
}

static void test_lower_hex_parses_only_lowercase_digits(void **state) {
    (void)state;
    uint8_t out[4];
    assert_int_equal(rn_parse_lower_hex("00ff7a10", 8, out), 0);
    assert_memory_equal(out, "\x00\xff\x7a\x10", 4);
    const char *bad[] = {"00FF7a10", "00ff7g10", "00ff 710", "-0ff7a10"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_equal(rn_parse_lower_hex(bad[i], 8, out), -1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_v1_names_accepted),
        cmocka_unit_test(test_v1_names_refused),
        cmocka_unit_test(test_query_parameters_found_once),
        cmocka_unit_test(test_query_parameters_repeated_or_empty_are_refused),
        cmocka_unit_test(test_lower_hex_parses_only_lowercase_digits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
