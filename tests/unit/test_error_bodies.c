/*
 * test_error_bodies.c - unit tests for src/protocol/errors.{h,c}: every
 * refusal of the table renders the body extensions §11 requires.
 *
 * How: each row, walked entry by entry (a new one is covered without
 * touching this file), rendered without and with a detail and parsed with
 * jansson: an object "error" with the string members "code" (uppercase
 * letters and underscores) and "message" (not empty: §11 says a server
 * sends both), and a 4xx or 5xx status. Before, the subscription fencing
 * codes FENCED and ALREADY_CLAIMED rendered without a message.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <string.h>

#include "protocol/errors.h"

static void check_body(rn_error e, const rn_buf *b) {
    json_error_t err;
    json_t *j = json_loadb((const char *)b->data, b->len, 0, &err);
    if (!j)
        fail_msg("%s: not JSON: %.*s", rn_error_code(e), (int)b->len, (const char *)b->data);
    json_t *o = json_object_get(j, "error");
    const char *code = json_string_value(json_object_get(o, "code"));
    const char *message = json_string_value(json_object_get(o, "message"));
    if (!code || !message || !message[0])
        fail_msg("%s: no code or message: %.*s", rn_error_code(e), (int)b->len,
                 (const char *)b->data);
    assert_string_equal(code, rn_error_code(e));
    assert_true(strspn(code, "ABCDEFGHIJKLMNOPQRSTUVWXYZ_") == strlen(code));
    json_decref(j);
}

static void test_every_refusal_has_code_and_message(void **state) {
    (void)state;
    for (int i = 0; i < RN_E_COUNT; i++) {
        rn_error e = (rn_error)i;
        int status = rn_error_status(e);
        assert_true(status >= 400 && status <= 599);
        rn_buf b = {0};
        rn_error_body(e, NULL, 0, &b);
        check_body(e, &b);
        rn_buf_free(&b);
        rn_error_body(e, "a \"detail\"\n", 11, &b);
        check_body(e, &b);
        rn_buf_free(&b);
        assert_non_null(rn_error_message(e));
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_refusal_has_code_and_message),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
