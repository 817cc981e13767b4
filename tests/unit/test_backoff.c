/*
 * test_backoff.c - unit tests for src/util/backoff.{h,c}: exponential
 * backoff with jitter (webhook retries, S3 callers).
 *
 * How: the delays without jitter (doubling from the base, capped), the
 * jitter's bounds at both ends of the random unit, attempts far past the
 * point where the doubling would overflow, and rn_backoff_unit's range.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "util/backoff.h"

static void test_doubling_and_cap(void **state) {
    (void)state;
    static const uint64_t want[] = {1000, 2000, 4000, 8000, 16000, 32000, 60000, 60000};
    for (uint32_t a = 1; a <= 8; a++)
        assert_int_equal(rn_backoff_ms(a, 1000, 60000, 0, 0.5), want[a - 1]);
    assert_int_equal(rn_backoff_ms(1, 60000, 60000, 0, 0), 60000);
    assert_int_equal(rn_backoff_ms(3, 0, 100, 0, 0), 0);
}

static void test_jitter_bounds(void **state) {
    (void)state;
    /* ±20%: the factor runs from 0.8 (unit 0) towards 1.2 (unit -> 1) */
    assert_int_equal(rn_backoff_ms(1, 1000, 60000, 0.2, 0), 800);
    uint64_t high = rn_backoff_ms(1, 1000, 60000, 0.2, 0.999999);
    assert_true(high >= 1199 && high < 1200);
    assert_int_equal(rn_backoff_ms(1, 1000, 60000, 0.2, 0.5), 1000);
    /* full jitter: from 0 to twice the delay */
    assert_int_equal(rn_backoff_ms(2, 100, 1000, 1, 0), 0);
    assert_true(rn_backoff_ms(2, 100, 1000, 1, 0.999999) < 400);
}

static void test_no_overflow(void **state) {
    (void)state;
    assert_int_equal(rn_backoff_ms(UINT32_MAX, 1000, 60000, 0, 0), 60000);
    uint64_t cap = (uint64_t)1 << 52; /* the largest cap allowed */
    assert_int_equal(rn_backoff_ms(200, 3, cap, 0, 0), cap);
    assert_int_equal(rn_backoff_ms(53, 1, cap, 0, 0), cap);
    assert_int_equal(rn_backoff_ms(52, 1, cap, 0, 0), cap / 2);
    assert_true(rn_backoff_ms(UINT32_MAX, 1, cap, 1, 0.999999) < 2 * cap);
}

static void test_unit_range(void **state) {
    (void)state;
    for (int i = 0; i < 10000; i++) {
        double u = rn_backoff_unit();
        assert_true(u >= 0 && u < 1);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_doubling_and_cap),
        cmocka_unit_test(test_jitter_bounds),
        cmocka_unit_test(test_no_overflow),
        cmocka_unit_test(test_unit_range),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
