/*
 * test_json_corpus.c - unit tests of src/util/json_text.{h,c} on
 * hand-written cases: tables of valid bodies with their exact message text
 * and of invalid ones with their exact status and error position (each also
 * compared with the reference parser of json_fixture.h), the empty body,
 * very long numbers, the output capacity bound, status names, and stored
 * message text read back as an array.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "json_fixture.h"

/* ------------------------------------------------------------------------ */
/* Table-driven corpora                                                      */

typedef struct {
    const char *in;
    size_t len;
    const char *out;
    size_t count;
} valid_case;

static const valid_case valid_cases[] = {
    /* scalars, whitespace dropped around the top-level value */
    {S("0"), "0\n", 1},
    {S(" 1 "), "1\n", 1},
    {S("\t\r\n 42\n\r\t "), "42\n", 1},
    {S("-0"), "-0\n", 1},
    {S("-0.0"), "-0.0\n", 1},
    {S("0.0e-0"), "0.0e-0\n", 1},
    {S("1E+308"), "1E+308\n", 1},
    {S("1e-400"), "1e-400\n", 1},
    {S("-1.5E10"), "-1.5E10\n", 1},
    {S("1e5"), "1e5\n", 1},
    {S("0e0"), "0e0\n", 1},
    {S("10"), "10\n", 1},
    {S("123456789012345678901234567890.123456789012345678901234567890e-1234567890123"),
     "123456789012345678901234567890.123456789012345678901234567890e-1234567890123\n", 1},
    {S("true"), "true\n", 1},
    {S("false"), "false\n", 1},
    {S(" null "), "null\n", 1},
    /* strings: escapes kept exactly as written, whitespace inside kept */
    {S("\"\""), "\"\"\n", 1},
    {S(" \"a  b\" "), "\"a  b\"\n", 1},
    {S("\"\\\" \\\\ \\/ \\b \\f \\n \\r \\t\""), "\"\\\" \\\\ \\/ \\b \\f \\n \\r \\t\"\n", 1},
    {S("\"\\u00e9\\u00E9\\uABCD\\u0000\\u001f\""), "\"\\u00e9\\u00E9\\uABCD\\u0000\\u001f\"\n", 1},
    {S("\"\\ud800\""), "\"\\ud800\"\n", 1},
    {S("\"\\uDFFF\""), "\"\\uDFFF\"\n", 1},
    {S("\"\\udc00\\ud800\""), "\"\\udc00\\ud800\"\n", 1},
    {S("\"\\ud83d\\ude00\""), "\"\\ud83d\\ude00\"\n", 1},
    {S("\"/\""), "\"/\"\n", 1},
    {S("\"\x7f\""), "\"\x7f\"\n", 1},
    /* raw UTF-8 at every length and range edge */
    {S("\"\xc3\xa9\""), "\"\xc3\xa9\"\n", 1},
    {S("\"\xc2\x80\""), "\"\xc2\x80\"\n", 1},
    {S("\"\xdf\xbf\""), "\"\xdf\xbf\"\n", 1},
    {S("\"\xe0\xa0\x80\""), "\"\xe0\xa0\x80\"\n", 1},
    {S("\"\xe2\x82\xac\""), "\"\xe2\x82\xac\"\n", 1},
    {S("\"\xed\x9f\xbf\""), "\"\xed\x9f\xbf\"\n", 1},
    {S("\"\xee\x80\x80\""), "\"\xee\x80\x80\"\n", 1},
    {S("\"\xef\xbb\xbf\""), "\"\xef\xbb\xbf\"\n", 1}, /* U+FEFF inside a string is fine */
    {S("\"\xef\xbf\xbf\""), "\"\xef\xbf\xbf\"\n", 1},
    {S("\"\xf0\x90\x80\x80\""), "\"\xf0\x90\x80\x80\"\n", 1},
    {S("\"\xf0\x9f\x98\x80\""), "\"\xf0\x9f\x98\x80\"\n", 1},
    {S("\"\xf3\xbf\xbf\xbf\""), "\"\xf3\xbf\xbf\xbf\"\n", 1},
    {S("\"\xf4\x8f\xbf\xbf\""), "\"\xf4\x8f\xbf\xbf\"\n", 1},
    {S("\"caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x8e\x89!\""),
     "\"caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x8e\x89!\"\n", 1},
    {S("\"[1,2]\""), "\"[1,2]\"\n", 1},
    /* objects: order, duplicates and key text preserved */
    {S("{}"), "{}\n", 1},
    {S(" { \t} "), "{}\n", 1},
    {S("{\"a\":1,\"a\":2}"), "{\"a\":1,\"a\":2}\n", 1},
    {S("{\"b\":1,\"a\":2}"), "{\"b\":1,\"a\":2}\n", 1},
    {S(" { \"a\" : 1 , \"b\" : [ true , false , null ] } "), "{\"a\":1,\"b\":[true,false,null]}\n",
     1},
    {S("{\"a,b\":\"c:d\",\"\\u0041\":\"}]\"}"), "{\"a,b\":\"c:d\",\"\\u0041\":\"}]\"}\n", 1},
    {S("{\r\n  \"k\" :\r\n {\"x\":{\"y\":[]}}\r\n}\r\n"), "{\"k\":{\"x\":{\"y\":[]}}}\n", 1},
    {S("{\"\":\"\"}"), "{\"\":\"\"}\n", 1},
    /* top-level arrays: exactly one level flattened */
    {S("[]"), "", 0},
    {S(" [ ] "), "", 0},
    {S("\t\r\n[\n]\r\n"), "", 0},
    {S("[[]]"), "[]\n", 1},
    {S("[{}]"), "{}\n", 1},
    {S("[[],[]]"), "[]\n[]\n", 2},
    {S("[null]"), "null\n", 1},
    {S("[1]"), "1\n", 1},
    {S("[1, 2 ,3]"), "1\n2\n3\n", 3},
    {S("[[1,2],[3,4]]"), "[1,2]\n[3,4]\n", 2},
    {S("[[[1,2,3]]]"), "[[1,2,3]]\n", 1},
    {S("[ [ [ 1 , 2 , 3 ] ] ]"), "[[1,2,3]]\n", 1},
    {S("[\"a b\", \" \"]"), "\"a b\"\n\" \"\n", 2},
    {S("[\"\\n\"]"), "\"\\n\"\n", 1},
    {S("[\"]\",\",\",\"[\"]"), "\"]\"\n\",\"\n\"[\"\n", 3},
    {S("[ {\"x\" : [ ] } , [ { } ] , \"s\" , 0 , -1.5e3 , true ]"),
     "{\"x\":[]}\n[{}]\n\"s\"\n0\n-1.5e3\ntrue\n", 6},
    {S("\n[\n\t{\"id\": 1, \"tags\": [\"a\", \"b\"]},\n\t{\"id\": 2, \"tags\": []}\n]\n"),
     "{\"id\":1,\"tags\":[\"a\",\"b\"]}\n{\"id\":2,\"tags\":[]}\n", 2},
};

static void test_valid_corpus(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof valid_cases / sizeof valid_cases[0]; i++) {
        const valid_case *c = &valid_cases[i];
        expect_output(c->in, c->len, c->out, strlen(c->out), c->count);
        check_against_ref((const uint8_t *)c->in, c->len);
    }
}

typedef struct {
    const char *in;
    size_t len;
    rn_json_status st;
    size_t err;
} invalid_case;

#define BAD(lit, pos)                                                                              \
    { S(lit), RN_JSON_INVALID, (pos) }

static const invalid_case invalid_cases[] = {
    /* empty / whitespace only / BOM / non-JSON whitespace */
    BAD("", 0),
    BAD("   ", 3),
    BAD(" \t\r\n", 4),
    BAD("\xef\xbb\xbf{}", 0),
    BAD("\xef\xbb\xbf", 0),
    BAD("\xef\xbb\xbf[1]", 0),
    BAD("\f1", 0),
    BAD("\v1", 0),
    BAD("1 \f", 2),
    BAD("\xc2\xa0"
        "1",
        0),
    BAD("\x00", 0),
    BAD("1\x00", 1),
    BAD("[1,\x00]", 3),
    /* numbers */
    BAD("01", 1),
    BAD("00", 1),
    BAD("-01", 2),
    BAD("[01]", 2),
    BAD("+1", 0),
    BAD(".5", 0),
    BAD("1.", 2),
    BAD("1.e5", 2),
    BAD("1e", 2),
    BAD("1E", 2),
    BAD("1e+", 3),
    BAD("1E-", 3),
    BAD("1e+x", 3),
    BAD("1ee5", 2),
    BAD("1.5.5", 3),
    BAD("-", 1),
    BAD("--1", 1),
    BAD("-a", 1),
    BAD("- 1", 1),
    BAD("NaN", 0),
    BAD("nan", 1),
    BAD("Infinity", 0),
    BAD("-Infinity", 1),
    BAD("0x1F", 1),
    BAD("1_000", 1),
    BAD("[1.]", 3),
    BAD("[.1]", 1),
    BAD("{\"a\":01}", 6),
    /* literals */
    BAD("tru", 3),
    BAD("True", 0),
    BAD("TRUE", 0),
    BAD("nul", 3),
    BAD("nulll", 4),
    BAD("falsy", 4),
    BAD("fals", 4),
    BAD("t", 1),
    BAD("truex", 4),
    BAD("undefined", 0),
    BAD("[nil]", 2),
    /* structure */
    BAD("[", 1),
    BAD("]", 0),
    BAD("[1", 2),
    BAD("[1,", 3),
    BAD("[1,]", 3),
    BAD("[,1]", 1),
    BAD("[,]", 1),
    BAD("[1 2]", 3),
    BAD("[1]]", 3),
    BAD("[1],", 3),
    BAD("[[]", 3),
    BAD("[[1]", 4),
    BAD("[[1,]]", 4),
    BAD("[1}", 2),
    BAD("[{]", 2),
    BAD("{", 1),
    BAD("}", 0),
    BAD("{,}", 1),
    BAD("{\"a\"}", 4),
    BAD("{\"a\":}", 5),
    BAD("{\"a\":1,}", 7),
    BAD("{\"a\" 1}", 5),
    BAD("{\"a\":1 \"b\":2}", 7),
    BAD("{\"a\"::1}", 5),
    BAD("{\"a\":1]", 6),
    BAD("{a:1}", 1),
    BAD("{'a':1}", 1),
    BAD("{1:2}", 1),
    BAD("{null:1}", 1),
    BAD("{\"a\":1", 6),
    BAD("{\"a\"", 4),
    BAD("{\"a\":", 5),
    BAD("{\"a\":{\"b\":1}", 12),
    /* trailing content after the top-level value */
    BAD("1 2", 2),
    BAD("1,2", 1),
    BAD("{} {}", 3),
    BAD("{}{}", 2),
    BAD("[] []", 3),
    BAD("[]x", 2),
    BAD("[1]x", 3),
    BAD("\"a\" \"b\"", 4),
    BAD("null null", 5),
    BAD("[] ,", 3),
    BAD("1\n\n2\n", 3),
    /* strings: grammar */
    BAD("\"abc", 4),
    BAD("\"", 1),
    BAD("\"\\", 2),
    BAD("\"\\\"", 3),
    BAD("\"\\x\"", 2),
    BAD("\"\\a\"", 2),
    BAD("\"\\'\"", 2),
    BAD("\"\\0\"", 2),
    BAD("\"\\U0041\"", 2),
    BAD("\"\\u", 3),
    BAD("\"\\u12", 5),
    BAD("\"\\u12\"", 5),
    BAD("\"\\u12g4\"", 5),
    BAD("\"\\u 123\"", 3),
    BAD("'a'", 0),
    /* strings: unescaped control characters */
    BAD("\"a\x01"
        "b\"",
        2),
    BAD("\"\t\"", 1),
    BAD("\"\n\"", 1),
    BAD("\"\r\"", 1),
    BAD("\"\x1f\"", 1),
    BAD("\"a\x00"
        "b\"",
        2),
    BAD("{\"k\x0a\":1}", 3),
    /* UTF-8: stray continuation bytes */
    BAD("\"\x80\"", 1),
    BAD("\"\xbf\"", 1),
    BAD("\"a\x80\"", 2),
    BAD("\"\xc3\xa9\xa9\"", 3),
    /* UTF-8: overlong forms */
    BAD("\"\xc0\x80\"", 1),
    BAD("\"\xc0\xaf\"", 1),
    BAD("\"\xc1\xbf\"", 1),
    BAD("\"\xe0\x80\x80\"", 2),
    BAD("\"\xe0\x9f\xbf\"", 2),
    BAD("\"\xf0\x80\x80\x80\"", 2),
    BAD("\"\xf0\x8f\xbf\xbf\"", 2),
    /* UTF-8: surrogates encoded directly */
    BAD("\"\xed\xa0\x80\"", 2),
    BAD("\"\xed\xaf\xbf\"", 2),
    BAD("\"\xed\xb0\x80\"", 2),
    BAD("\"\xed\xbf\xbf\"", 2),
    /* UTF-8: above U+10FFFF and impossible lead bytes */
    BAD("\"\xf4\x90\x80\x80\"", 2),
    BAD("\"\xf4\xbf\xbf\xbf\"", 2),
    BAD("\"\xf5\x80\x80\x80\"", 1),
    BAD("\"\xf7\xbf\xbf\xbf\"", 1),
    BAD("\"\xf8\x88\x80\x80\x80\"", 1),
    BAD("\"\xfc\x84\x80\x80\x80\x80\"", 1),
    BAD("\"\xfe\"", 1),
    BAD("\"\xff\"", 1),
    /* UTF-8: bad continuation bytes */
    BAD("\"\xc3\x28\"", 2),
    BAD("\"\xc3\xc3\xa9\"", 2),
    BAD("\"\xe2\x28\xa1\"", 2),
    BAD("\"\xe2\x82\x28\"", 3),
    BAD("\"\xf0\x9f\x28\x80\"", 3),
    BAD("\"\xf0\x9f\x98\x28\"", 4),
    /* UTF-8: truncated sequences at end of input and before the quote */
    BAD("\"\xc3", 2),
    BAD("\"\xe2", 2),
    BAD("\"\xe2\x82", 3),
    BAD("\"\xf0", 2),
    BAD("\"\xf0\x9f", 3),
    BAD("\"\xf0\x9f\x98", 4),
    BAD("\"\xc3\"", 2),
    BAD("\"\xe2\x82\"", 3),
    BAD("\"\xf0\x9f\x98\"", 4),
    /* non-ASCII outside strings */
    BAD("\xc3\xa9", 0),
    BAD("[1,\xc3\xa9]", 3),
    BAD("{\"\xff\":1}", 2),
    BAD("{\"a\"\xc2\xa0:1}", 4),
    BAD("\xe2\x80\x9c"
        "a\xe2\x80\x9d",
        0),
};

static void test_invalid_corpus(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof invalid_cases / sizeof invalid_cases[0]; i++) {
        const invalid_case *c = &invalid_cases[i];
        expect_error(c->in, c->len, c->st, c->err);
        check_against_ref((const uint8_t *)c->in, c->len);
    }
}

/* NULL input is allowed for an empty body. */
static void test_null_empty_input(void **state) {
    (void)state;
    uint8_t out[1];
    size_t ol = 7, mc = 7, ep = 7;
    assert_int_equal(rn_json_to_messages(NULL, 0, out, &ol, &mc, &ep), RN_JSON_INVALID);
    assert_int_equal(ol, 0);
    assert_int_equal(mc, 0);
    assert_int_equal(ep, 0);
}

/* A very long number is copied verbatim, including across the whole input. */
static void test_long_numbers(void **state) {
    (void)state;
    buf in = {0}, exp = {0};
    bputs(&in, "[ -");
    for (int i = 0; i < 5000; i++)
        bputc(&in, (uint8_t)('1' + i % 9));
    bputs(&in, ".");
    for (int i = 0; i < 5000; i++)
        bputc(&in, (uint8_t)('0' + i % 10));
    bputs(&in, "e-");
    for (int i = 0; i < 5000; i++)
        bputc(&in, (uint8_t)('9' - i % 10));
    bput(&exp, in.b + 2, in.n - 2);
    bputs(&in, " , 0 ]");
    bputs(&exp, "\n0\n");
    expect_output(in.b, in.n, exp.b, exp.n, 2);
    /* the same number truncated right after the exponent sign is invalid */
    size_t cut = 2 + 1 + 5000 + 1 + 5000 + 2;
    expect_error(in.b, cut, RN_JSON_INVALID, cut);
    bfree(&in);
    bfree(&exp);
}

/* ------------------------------------------------------------------------ */
/* Misc API                                                                  */

/* Renders stored message text as an array and compares it with want. */
static void check_array(const char *text, size_t len, const char *want) {
    rn_buf out = {0};
    rn_buf_append_str(&out, "x"); /* appended after what out holds */
    rn_json_append_array(&out, (const uint8_t *)text, len);
    assert_int_equal(out.len, 1 + strlen(want));
    assert_memory_equal(out.data, "x", 1);
    assert_memory_equal(out.data + 1, want, strlen(want));
    rn_buf_free(&out);
}

static void test_append_array(void **state) {
    (void)state;
    check_array(NULL, 0, "[]");
    check_array("1\n", 2, "[1]");
    const char *text = "{\"a\":[1,2]}\n\"x\\ny\"\n[]\n";
    check_array(text, strlen(text), "[{\"a\":[1,2]},\"x\\ny\",[]]");
    /* what rn_json_to_messages stores reads back as the array it was sent as */
    const char *body = "[ {\"k\": \"v\"}, 2, \"s\" ]";
    uint8_t stored[64];
    size_t stored_len, count;
    assert_int_equal(
        rn_json_to_messages((const uint8_t *)body, strlen(body), stored, &stored_len, &count, NULL),
        RN_JSON_OK);
    check_array((const char *)stored, stored_len, "[{\"k\":\"v\"},2,\"s\"]");
}

static void test_status_names(void **state) {
    (void)state;
    assert_string_equal(rn_json_status_name(RN_JSON_OK), "ok");
    assert_string_equal(rn_json_status_name(RN_JSON_EMPTY_ARRAY), "empty array");
    assert_string_equal(rn_json_status_name(RN_JSON_INVALID), "invalid JSON");
    assert_string_equal(rn_json_status_name(RN_JSON_TOO_DEEP), "JSON nested too deeply");
    assert_string_equal(rn_json_status_name((rn_json_status)99), "unknown JSON status");
}

/* The output bound len + 1 is tight for a bare scalar and sufficient for
 * arrays; expect_output() already checks a canary right after len + 1 bytes. */
static void test_capacity_bound(void **state) {
    (void)state;
    expect_output(S("7"), "7\n", 2, 1); /* out_len == len + 1 */
    expect_output(S("\"abcdefghijklmnopqrstuvwxyz0123456789\""),
                  "\"abcdefghijklmnopqrstuvwxyz0123456789\"\n", 39, 1);
    expect_output(S("[1,2,3]"), "1\n2\n3\n", 6, 3); /* out_len == len - 1 */
    /* a 16-byte block store near the end of a long string stays in bounds */
    for (size_t n = 1; n < 64; n++) {
        buf w = {0}, e = {0};
        bputc(&w, '"');
        for (size_t i = 0; i < n; i++)
            bputc(&w, 'q');
        bputc(&w, '"');
        bput(&e, w.b, w.n);
        bputc(&e, '\n');
        expect_output(w.b, w.n, e.b, e.n, 1);
        expect_error(w.b, w.n - 1, RN_JSON_INVALID, w.n - 1);
        bfree(&w);
        bfree(&e);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid_corpus),     cmocka_unit_test(test_invalid_corpus),
        cmocka_unit_test(test_null_empty_input), cmocka_unit_test(test_long_numbers),
        cmocka_unit_test(test_append_array),     cmocka_unit_test(test_status_names),
        cmocka_unit_test(test_capacity_bound),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
