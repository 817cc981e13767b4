/*
 * test_http_status.c - unit tests for src/transport/status.{h,c}: every
 * status the server can send has its reason phrase on an HTTP/1.1 status
 * line.
 *
 * How: every status of the refusal table (protocol/errors.c, walked
 * entry by entry, so a new refusal is covered without touching this file),
 * every status a handler or the transport sends outside that table (the
 * list below, from the sources), some phrases word for word, and no made-up
 * phrase for a code no registry names (the reason phrase is then empty).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "protocol/errors.h"
#include "transport/status.h"

static void test_every_refusal_has_a_phrase(void **state) {
    (void)state;
    for (int e = 0; e < RN_E_COUNT; e++) {
        int status = rn_error_status((rn_error)e);
        const char *reason = rn_http_reason(status);
        if (reason[0] == '\0')
            fail_msg("%s: status %d has no reason phrase", rn_error_code((rn_error)e), status);
    }
}

/* What answers outside the refusal table send: interim and success answers
 * (100 Continue, 200, 201, 202 of the cluster's membership and backup
 * routes, 204, 206, 304), redirects (307), and the transport's own
 * refusals of a request no route saw (400, 408, 413, 414, 431, 501, 505). */
static void test_answers_outside_the_table(void **state) {
    (void)state;
    static const int sent[] = {100, 200, 201, 202, 204, 206, 304, 307,
                               400, 408, 413, 414, 431, 501, 505};
    for (size_t i = 0; i < sizeof sent / sizeof sent[0]; i++)
        if (rn_http_reason(sent[i])[0] == '\0')
            fail_msg("status %d has no reason phrase", sent[i]);
}

static void test_phrases(void **state) {
    (void)state;
    assert_string_equal(rn_http_reason(202), "Accepted");
    assert_string_equal(rn_http_reason(408), "Request Timeout");
    assert_string_equal(rn_http_reason(413), "Content Too Large");
    assert_string_equal(rn_http_reason(429), "Too Many Requests");
    assert_string_equal(rn_http_reason(502), "Bad Gateway");
    assert_string_equal(rn_http_reason(504), "Gateway Timeout");
}

static void test_unregistered_codes_have_none(void **state) {
    (void)state;
    assert_string_equal(rn_http_reason(299), "");
    assert_string_equal(rn_http_reason(418), "");
    assert_string_equal(rn_http_reason(599), "");
    for (int s = 100; s <= 599; s++)
        assert_true(strcmp(rn_http_reason(s), "Unknown") != 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_refusal_has_a_phrase),
        cmocka_unit_test(test_answers_outside_the_table),
        cmocka_unit_test(test_phrases),
        cmocka_unit_test(test_unregistered_codes_have_none),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
