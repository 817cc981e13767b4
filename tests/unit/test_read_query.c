/*
 * test_read_query.c - unit tests for the query of a stream read
 * (src/protocol/read_query.h), as docs/HTTP.md ("Names, headers and query
 * parameters") and docs/PROTOCOL_SUPPORT.md (§9 read path) state it:
 * offset -1, now or a token; live long-poll or sse, which need an offset;
 * cursor, timeout_ms and max_bytes ignored when they are not canonical
 * decimal, timeout_ms clamped to 1..60000, max_bytes only lowering the
 * cap; consistency local or leader, leader only on a catch-up read; every
 * parameter at most once, even an ignorable one; unknown ones ignored.
 *
 * How: each case parses a query over defaults (a 30 s wait, a 4 MiB cap)
 * and checks the fields or the refusal with its code and detail.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "protocol/read_query.h"

#define DEFAULT_WAIT 30000
#define DEFAULT_CAP (4u << 20)

/* Parses q over the defaults; returns the call's result. */
static int parse(const char *q, rn_read_query *rq, rn_param_fault *f) {
    *rq = (rn_read_query){.timeout_ms = DEFAULT_WAIT, .max_bytes = DEFAULT_CAP};
    return rn_read_query_parse(q, strlen(q), rq, f);
}

/* The error q is refused with (its detail in *detail). */
static rn_error refusal(const char *q, const char **detail) {
    rn_read_query rq;
    rn_param_fault f;
    assert_int_equal(parse(q, &rq, &f), -1);
    if (detail)
        *detail = f.detail;
    return f.error;
}

static void test_no_query_is_a_catch_up_from_the_start(void **state) {
    (void)state;
    rn_read_query rq;
    rn_param_fault f;
    assert_int_equal(parse("", &rq, &f), 0);
    assert_int_equal(rq.offset_kind, RN_OFFSET_START);
    assert_int_equal(rq.mode, RN_READ_CATCHUP);
    assert_false(rq.has_cursor);
    assert_int_equal(rq.timeout_ms, DEFAULT_WAIT);
    assert_int_equal(rq.max_bytes, DEFAULT_CAP);
    /* names it does not know are ignored, whatever their values */
    assert_int_equal(parse("foo=bar&&=&x&offsets=1&Offset=zz", &rq, &f), 0);
    assert_int_equal(rq.offset_kind, RN_OFFSET_START);
    assert_int_equal(rq.mode, RN_READ_CATCHUP);
}

static void test_offsets_are_start_now_or_a_token(void **state) {
    (void)state;
    rn_read_query rq;
    rn_param_fault f;
    assert_int_equal(parse("offset=-1", &rq, &f), 0);
    assert_int_equal(rq.offset_kind, RN_OFFSET_START);
    assert_int_equal(parse("offset=now", &rq, &f), 0);
    assert_int_equal(rq.offset_kind, RN_OFFSET_NOW);
    assert_int_equal(parse("offset=0000000000000000_0000000000001234", &rq, &f), 0);
    assert_int_equal(rq.offset_kind, RN_OFFSET_POSITION);
    assert_int_equal(rq.offset, 1234);
    /* percent-decoded like every parameter */
    assert_int_equal(parse("offset=%2D1", &rq, &f), 0);
    assert_int_equal(rq.offset_kind, RN_OFFSET_START);
    const char *bad[] = {"offset=",    "offset",      "offset=-2",
                         "offset=NOW", "offset=1234", "offset=0000000000000000-0000000000001234",
                         "offset=%zz", "offset=-1 ",  "offset=0000000000000000_000000000000123"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *detail = "unset";
        assert_int_equal(refusal(bad[i], &detail), RN_E_INVALID_OFFSET);
        assert_null(detail);
    }
}

static void test_live_modes_need_an_offset(void **state) {
    (void)state;
    rn_read_query rq;
    rn_param_fault f;
    assert_int_equal(parse("offset=now&live=long-poll", &rq, &f), 0);
    assert_int_equal(rq.mode, RN_READ_LONG_POLL);
    assert_int_equal(parse("live=sse&offset=-1", &rq, &f), 0);
    assert_int_equal(rq.mode, RN_READ_SSE);
    const char *bad[] = {"offset=-1&live=",    "offset=-1&live",      "offset=-1&live=longpoll",
                         "offset=-1&live=SSE", "offset=-1&live=true", "offset=-1&live=sse "};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_equal(refusal(bad[i], NULL), RN_E_INVALID_QUERY_LIVE);
    assert_int_equal(refusal("live=long-poll", NULL), RN_E_INVALID_QUERY_OFFSET_REQUIRED);
    assert_int_equal(refusal("live=sse&cursor=5", NULL), RN_E_INVALID_QUERY_OFFSET_REQUIRED);
    /* a malformed offset is named before the missing one */
    assert_int_equal(refusal("live=sse&offset=x", NULL), RN_E_INVALID_OFFSET);
}

static void test_cursor_is_an_echo_kept_only_when_canonical(void **state) {
    (void)state;
    rn_read_query rq;
    rn_param_fault f;
    assert_int_equal(parse("offset=now&live=long-poll&cursor=1234", &rq, &f), 0);
    assert_true(rq.has_cursor);
    assert_int_equal(rq.cursor, 1234);
    const char *ignored[] = {"cursor=",   "cursor=abc", "cursor=01",
                             "cursor=-5", "cursor=1e3", "cursor=99999999999999999999999"};
    for (size_t i = 0; i < sizeof ignored / sizeof ignored[0]; i++) {
        assert_int_equal(parse(ignored[i], &rq, &f), 0);
        assert_false(rq.has_cursor);
    }
}

static void test_timeout_ms_is_clamped_and_ignored_when_malformed(void **state) {
    (void)state;
    const struct {
        const char *q;
        uint64_t wait;
    } cases[] = {
        {"timeout_ms=5000", 5000},
        {"timeout_ms=1", 1},
        {"timeout_ms=0", 1},
        {"timeout_ms=60000", 60000},
        {"timeout_ms=60001", 60000},
        {"timeout_ms=18446744073709551615", 60000},
        {"timeout_ms=18446744073709551616", DEFAULT_WAIT}, /* past 64 bits: no number */
        {"timeout_ms=", DEFAULT_WAIT},
        {"timeout_ms=abc", DEFAULT_WAIT},
        {"timeout_ms=0100", DEFAULT_WAIT},
        {"timeout_ms=-1", DEFAULT_WAIT},
        {"timeout_ms=1.5", DEFAULT_WAIT},
        {"timeout_ms=%35", 5},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        rn_read_query rq;
        rn_param_fault f;
        assert_int_equal(parse(cases[i].q, &rq, &f), 0);
        assert_int_equal(rq.timeout_ms, cases[i].wait);
    }
}

static void test_max_bytes_only_lowers_the_cap(void **state) {
    (void)state;
    const struct {
        const char *q;
        size_t cap;
    } cases[] = {
        {"max_bytes=100", 100},
        {"max_bytes=0", 1},
        {"max_bytes=1", 1},
        {"max_bytes=4194303", DEFAULT_CAP - 1},
        {"max_bytes=4194304", DEFAULT_CAP},
        {"max_bytes=100000000", DEFAULT_CAP},
        {"max_bytes=18446744073709551615", DEFAULT_CAP},
        {"max_bytes=", DEFAULT_CAP},
        {"max_bytes=10k", DEFAULT_CAP},
        {"max_bytes=010", DEFAULT_CAP},
        /* an SSE event holds at least one UTF-8 character */
        {"offset=-1&live=sse&max_bytes=1", RN_READ_SSE_MIN_BYTES},
        {"offset=-1&live=sse&max_bytes=5", 5},
        {"offset=-1&live=long-poll&max_bytes=1", 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        rn_read_query rq;
        rn_param_fault f;
        assert_int_equal(parse(cases[i].q, &rq, &f), 0);
        assert_int_equal(rq.max_bytes, cases[i].cap);
    }
}

static void test_consistency_is_local_or_leader_and_leader_only_catches_up(void **state) {
    (void)state;
    rn_read_query rq;
    rn_param_fault f;
    assert_int_equal(parse("consistency=local", &rq, &f), 0);
    assert_int_equal(parse("consistency=leader&offset=-1", &rq, &f), 0);
    assert_int_equal(rq.mode, RN_READ_CATCHUP);
    assert_int_equal(parse("consistency=local&offset=-1&live=sse", &rq, &f), 0);
    const char *bad[] = {"consistency=",
                         "consistency",
                         "consistency=LEADER",
                         "consistency=strong",
                         "consistency=local ",
                         "offset=now&live=long-poll&consistency=leader",
                         "offset=-1&live=sse&consistency=leader"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *detail = "unset";
        assert_int_equal(refusal(bad[i], &detail), RN_E_INVALID_QUERY_CONSISTENCY);
        assert_null(detail);
    }
}

static void test_every_parameter_at_most_once_even_ignorable_ones(void **state) {
    (void)state;
    const struct {
        const char *q, *name;
    } cases[] = {
        {"offset=-1&offset=-1", "offset"},
        {"offset=-1&live=sse&live=sse", "live"},
        {"cursor=1&cursor=1", "cursor"},
        {"cursor=x&cursor=", "cursor"},
        {"timeout_ms=5&timeout_ms=6", "timeout_ms"},
        {"max_bytes=&max_bytes", "max_bytes"},
        {"consistency=local&c%6Fnsistency=local", "consistency"},
        /* a repeat is found before its value is judged */
        {"offset=x&offset=-1", "offset"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *detail = NULL;
        assert_int_equal(refusal(cases[i].q, &detail), RN_E_QUERY_REPEATED);
        assert_non_null(detail);
        assert_string_equal(detail, cases[i].name);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_no_query_is_a_catch_up_from_the_start),
        cmocka_unit_test(test_offsets_are_start_now_or_a_token),
        cmocka_unit_test(test_live_modes_need_an_offset),
        cmocka_unit_test(test_cursor_is_an_echo_kept_only_when_canonical),
        cmocka_unit_test(test_timeout_ms_is_clamped_and_ignored_when_malformed),
        cmocka_unit_test(test_max_bytes_only_lowers_the_cap),
        cmocka_unit_test(test_consistency_is_local_or_leader_and_leader_only_catches_up),
        cmocka_unit_test(test_every_parameter_at_most_once_even_ignorable_ones),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
