/*
 * test_json_limits.c - unit tests of src/util/json_text.{h,c} at its limits
 * and block boundaries: the nesting depth limit (exact, flattened, hostile
 * inputs), the 16/8-byte string fast paths with a special byte at every
 * block position, long strings, every short UTF-8 sequence checked against
 * the reference parser of json_fixture.h, and message counting across the
 * SIMD block and fold sizes.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "json_fixture.h"

/* ------------------------------------------------------------------------ */
/* Depth limit                                                               */

/* The document's number, not the code's constant (RN_JSON_MAX_DEPTH): the
 * extension profile's "JSON Message Text" refuses a message whose depth
 * exceeds 127, so a change of the constant fails these tests. */
#define SPEC_MAX_DEPTH 127

/* Builds `{"a":{"a":...1...}}` with k objects. */
static void nested_objects(buf *w, int k) {
    for (int i = 0; i < k; i++)
        bputs(w, "{\"a\":");
    bputc(w, '1');
    for (int i = 0; i < k; i++)
        bputc(w, '}');
}
static void nested_arrays(buf *w, int k) {
    for (int i = 0; i < k; i++)
        bputc(w, '[');
    for (int i = 0; i < k; i++)
        bputc(w, ']');
}

static void test_depth_object_message(void **state) {
    (void)state;
    buf w = {0}, e = {0};
    nested_objects(&w, SPEC_MAX_DEPTH);
    bput(&e, w.b, w.n);
    bputc(&e, '\n');
    expect_output(w.b, w.n, e.b, e.n, 1);
    check_against_ref(w.b, w.n);
    bfree(&w);

    nested_objects(&w, SPEC_MAX_DEPTH + 1);
    /* error at the 128th '{', which starts at byte 127 * 5 */
    expect_error(w.b, w.n, RN_JSON_TOO_DEEP, (size_t)SPEC_MAX_DEPTH * 5);
    check_against_ref(w.b, w.n);
    bfree(&w);
    bfree(&e);

    /* object containing arrays: the object's own level counts */
    bputs(&w, "{\"a\":");
    nested_arrays(&w, SPEC_MAX_DEPTH - 1);
    bputc(&w, '}');
    bput(&e, w.b, w.n);
    bputc(&e, '\n');
    expect_output(w.b, w.n, e.b, e.n, 1);
    bfree(&w);
    bfree(&e);
    bputs(&w, "{\"a\":");
    nested_arrays(&w, SPEC_MAX_DEPTH);
    bputc(&w, '}');
    expect_error(w.b, w.n, RN_JSON_TOO_DEEP, 5 + SPEC_MAX_DEPTH - 1);
    bfree(&w);
}

static void test_depth_flattened_elements(void **state) {
    (void)state;
    buf w = {0}, e = {0};
    /* 128 brackets in total: the outer one is flattened away -> depth 127 */
    nested_arrays(&w, SPEC_MAX_DEPTH + 1);
    nested_arrays(&e, SPEC_MAX_DEPTH);
    bputc(&e, '\n');
    expect_output(w.b, w.n, e.b, e.n, 1);
    check_against_ref(w.b, w.n);
    bfree(&w);
    bfree(&e);

    /* 129 brackets: element depth 128; error at the bracket at index 128 */
    nested_arrays(&w, SPEC_MAX_DEPTH + 2);
    expect_error(w.b, w.n, RN_JSON_TOO_DEEP, SPEC_MAX_DEPTH + 1);
    check_against_ref(w.b, w.n);
    bfree(&w);

    /* object elements of a top-level array: 127 accepted, 128 rejected;
     * a shallow first element does not hide a too-deep second one */
    bputs(&w, "[ 1 , ");
    nested_objects(&w, SPEC_MAX_DEPTH);
    bputs(&w, " ]");
    bputs(&e, "1\n");
    nested_objects(&e, SPEC_MAX_DEPTH);
    bputc(&e, '\n');
    expect_output(w.b, w.n, e.b, e.n, 2);
    bfree(&w);
    bfree(&e);
    bputs(&w, "[ 1 , ");
    nested_objects(&w, SPEC_MAX_DEPTH + 1);
    bputs(&w, " ]");
    expect_error(w.b, w.n, RN_JSON_TOO_DEEP, 6 + (size_t)SPEC_MAX_DEPTH * 5);
    check_against_ref(w.b, w.n);
    bfree(&w);

    /* depth resets between elements: many elements each at depth 127 */
    bputc(&w, '[');
    for (int i = 0; i < 10; i++) {
        if (i)
            bputc(&w, ',');
        nested_arrays(&w, SPEC_MAX_DEPTH);
        nested_arrays(&e, SPEC_MAX_DEPTH);
        bputc(&e, '\n');
    }
    bputc(&w, ']');
    expect_output(w.b, w.n, e.b, e.n, 10);
    bfree(&w);
    bfree(&e);

    /* a top-level scalar string containing brackets is depth 0 */
    bputc(&w, '"');
    for (int i = 0; i < 1000; i++)
        bputc(&w, '[');
    bputc(&w, '"');
    bput(&e, w.b, w.n);
    bputc(&e, '\n');
    expect_output(w.b, w.n, e.b, e.n, 1);
    bfree(&w);
    bfree(&e);
}

static void test_depth_hostile(void **state) {
    (void)state;
    /* a million opens must not exhaust the C stack */
    size_t n = 1000000;
    uint8_t *w = malloc(2 * n);
    assert_non_null(w);
    memset(w, '[', n);
    expect_error(w, n, RN_JSON_TOO_DEEP, SPEC_MAX_DEPTH + 1);
    memset(w + n, ']', n);
    expect_error(w, 2 * n, RN_JSON_TOO_DEEP, SPEC_MAX_DEPTH + 1);
    for (size_t i = 0; i < n; i++)
        w[i] = (i % 2) ? '[' : '{';
    expect_error(w, n, RN_JSON_INVALID, 1); /* `{[`: key expected */
    free(w);

    /* an earlier syntax error wins over a later depth violation */
    buf b = {0};
    bputs(&b, "[1 x");
    nested_arrays(&b, 300);
    expect_error(b.b, b.n, RN_JSON_INVALID, 3);
    bfree(&b);
    /* and a depth violation wins over a later syntax error */
    nested_arrays(&b, 300);
    bputs(&b, "x");
    expect_error(b.b, b.n, RN_JSON_TOO_DEEP, SPEC_MAX_DEPTH + 1);
    bfree(&b);
    /* exactly at the limit, then a syntax error: INVALID */
    for (int i = 0; i < SPEC_MAX_DEPTH + 1; i++)
        bputc(&b, '[');
    bputc(&b, '}');
    expect_error(b.b, b.n, RN_JSON_INVALID, SPEC_MAX_DEPTH + 1);
    bfree(&b);
}

/* ------------------------------------------------------------------------ */
/* String fast-path boundaries                                               */

/* Places a special item after k plain bytes inside a string that is itself
 * preceded by `pad` bytes of whitespace, for every k and alignment, so the
 * special byte lands at every position of a 16-byte (or 8-byte) block. */
static void test_string_block_boundaries(void **state) {
    (void)state;
    static const struct {
        const char *item;
        size_t len;
        int valid;
        size_t err_off; /* error offset within the item when invalid */
    } items[] = {
        {S("\\n"), 1, 0},
        {S("\\\""), 1, 0},
        {S("\\u00e9"), 1, 0},
        {S("\\ud800"), 1, 0},
        {S("\xc3\xa9"), 1, 0},
        {S("\xe2\x82\xac"), 1, 0},
        {S("\xf0\x9f\x98\x80"), 1, 0},
        {S("\xf0\x9f\x98\x80\xc3\xa9\xe2\x82\xac"), 1, 0},
        {S("\x7f"), 1, 0},
        {S("\x01"), 0, 0},
        {S("\x1f"), 0, 0},
        {S("\x00"), 0, 0},
        {S("\x80"), 0, 0},
        {S("\xff"), 0, 0},
        {S("\xc3\xa9\xa9"), 0, 2},
        {S("\xed\xa0\x80"), 0, 1},
        {S("\\q"), 0, 1},
        {S("\\u12x4"), 0, 4},
    };
    for (size_t it = 0; it < sizeof items / sizeof items[0]; it++) {
        for (size_t pad = 0; pad < 16; pad++) {
            for (size_t k = 0; k < 40; k++) {
                buf w = {0}, e = {0};
                for (size_t i = 0; i < pad; i++)
                    bputc(&w, ' ');
                bputc(&w, '"');
                for (size_t i = 0; i < k; i++)
                    bputc(&w, (uint8_t)('a' + i % 26));
                bput(&w, items[it].item, items[it].len);
                for (size_t i = 0; i < 40 - k; i++)
                    bputc(&w, (uint8_t)('A' + i % 26));
                bputc(&w, '"');
                if (items[it].valid) {
                    bput(&e, w.b + pad, w.n - pad);
                    bputc(&e, '\n');
                    expect_output(w.b, w.n, e.b, e.n, 1);
                } else {
                    expect_error(w.b, w.n, RN_JSON_INVALID, pad + 1 + k + items[it].err_off);
                }
                /* truncated just after the item */
                size_t cut = pad + 1 + k + items[it].len;
                check_against_ref(w.b, cut);
                if (items[it].valid)
                    expect_error(w.b, cut, RN_JSON_INVALID, cut);
                bfree(&w);
                bfree(&e);
            }
        }
    }
}

static void test_long_strings(void **state) {
    (void)state;
    /* 1 MiB string of plain ASCII with a few specials, as an array element */
    size_t n = 1 << 20;
    buf w = {0}, e = {0};
    bputs(&w, " [ \"");
    for (size_t i = 0; i < n; i++) {
        if (i % 4099 == 17)
            bputs(&w, "\\t");
        else if (i % 7919 == 5)
            bputs(&w, "\xe2\x82\xac");
        else {
            uint8_t ch = (uint8_t)(' ' + i % 95);
            bputc(&w, ch == '"' || ch == '\\' ? 'x' : ch);
        }
    }
    bputs(&w, "\" ] ");
    bput(&e, w.b + 3, w.n - 3 - 4);
    bputs(&e, "\"\n");
    expect_output(w.b, w.n, e.b, e.n, 1);
    /* unterminated: error at end */
    expect_error(w.b, w.n - 4, RN_JSON_INVALID, w.n - 4);
    /* a control byte deep inside */
    w.b[500000] = 0x0B;
    expect_error(w.b, w.n, RN_JSON_INVALID, 500000);
    bfree(&w);
    bfree(&e);
}

/* ------------------------------------------------------------------------ */
/* Exhaustive short UTF-8 sequences vs. the independent decoder              */

static void check_utf8_case(const uint8_t *s, size_t n) {
    /* lightweight variant of check_against_ref for millions of cases */
    ref r;
    size_t rcount;
    ref_run(&r, s, n, &rcount);
    uint8_t out[16];
    size_t ol, mc, ep;
    rn_json_status st = rn_json_to_messages(s, n, out, &ol, &mc, &ep);
    if (st != r.st || ep != r.err ||
        (st == RN_JSON_OK && (ol != r.out.n || memcmp(out, r.out.b, ol)))) {
        print_error("input:");
        for (size_t i = 0; i < n; i++)
            print_error(" %02X", s[i]);
        print_error("\nmodule %s at %zu, reference %s at %zu\n", rn_json_status_name(st), ep,
                    rn_json_status_name(r.st), r.err);
        fail();
    }
    bfree(&r.out);
}

static void test_utf8_exhaustive(void **state) {
    (void)state;
    uint8_t s[8];
    size_t accepted3 = 0, accepted4 = 0;
    s[0] = '"';
    for (unsigned a = 0; a < 256; a++) {
        s[1] = (uint8_t)a;
        check_utf8_case(s, 2);
        s[2] = '"';
        check_utf8_case(s, 3);
        for (unsigned b = 0; b < 256; b++) {
            s[2] = (uint8_t)b;
            check_utf8_case(s, 3);
            s[3] = '"';
            check_utf8_case(s, 4);
        }
    }
    /* every 3-byte sequence with a non-ASCII lead */
    for (unsigned a = 0x80; a < 256; a++) {
        for (unsigned b = 0; b < 256; b++) {
            for (unsigned c = 0; c < 256; c++) {
                s[1] = (uint8_t)a;
                s[2] = (uint8_t)b;
                s[3] = (uint8_t)c;
                s[4] = '"';
                check_utf8_case(s, 5);
                if (a >= 0xE0 && a < 0xF0 && b >= 0x80 && b < 0xC0 && c >= 0x80 && c < 0xC0) {
                    size_t ol;
                    uint8_t out[8];
                    if (rn_json_to_messages(s, 5, out, &ol, NULL, NULL) == RN_JSON_OK)
                        accepted3++;
                }
            }
        }
    }
    /* 0x800..0xFFFF minus 2048 surrogates */
    assert_int_equal(accepted3, 0x10000 - 0x800 - 0x800);

    /* 4-byte leads: all second and fourth bytes, representative third bytes */
    static const uint8_t thirds[] = {0x00, 0x22, 0x7F, 0x80, 0x9F, 0xA0, 0xBF, 0xC0, 0xFF};
    for (unsigned a = 0xF0; a < 256; a++)
        for (unsigned b = 0; b < 256; b++)
            for (size_t t = 0; t < sizeof thirds; t++)
                for (unsigned d = 0; d < 256; d++) {
                    s[1] = (uint8_t)a;
                    s[2] = (uint8_t)b;
                    s[3] = thirds[t];
                    s[4] = (uint8_t)d;
                    s[5] = '"';
                    check_utf8_case(s, 6);
                    check_utf8_case(s, 4);
                }
    /* every 4-byte scalar value is accepted (count them exactly) */
    for (unsigned cp = 0x10000; cp <= 0x10FFFF; cp++) {
        s[1] = (uint8_t)(0xF0 | (cp >> 18));
        s[2] = (uint8_t)(0x80 | ((cp >> 12) & 0x3F));
        s[3] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
        s[4] = (uint8_t)(0x80 | (cp & 0x3F));
        s[5] = '"';
        size_t ol;
        uint8_t out[8];
        if (rn_json_to_messages(s, 6, out, &ol, NULL, NULL) == RN_JSON_OK && ol == 7)
            accepted4++;
    }
    assert_int_equal(accepted4, 0x110000 - 0x10000);
}

/* ------------------------------------------------------------------------ */
/* Message counting across SIMD blocks                                       */

static void test_count_messages(void **state) {
    (void)state;
    assert_int_equal(rn_json_count_messages(NULL, 0), 0);
    assert_int_equal(rn_json_count_messages((const uint8_t *)"1\n", 2), 1);
    assert_int_equal(rn_json_count_messages((const uint8_t *)"1\n{}\n\"x\"\n", 9), 3);
    assert_int_equal(rn_json_count_messages((const uint8_t *)"no newline", 10), 0);
    assert_int_equal(rn_json_count_messages((const uint8_t *)"a\nb", 3), 1);

    /* large buffers cross the SIMD block and the 255-block fold */
    size_t n = 100003;
    uint8_t *t = malloc(n);
    assert_non_null(t);
    memset(t, '\n', n);
    assert_int_equal(rn_json_count_messages(t, n), n);
    /* all-LF runs around the 255-block fold size must not wrap a lane */
    for (size_t len = 16 * 240; len <= 16 * 530 + 15; len += 7)
        assert_int_equal(rn_json_count_messages(t, len), len);
    size_t expect = 0;
    for (size_t i = 0; i < n; i++) {
        t[i] = (i % 7 == 3 || i % 4096 == 0) ? '\n' : (uint8_t)('a' + i % 26);
        expect += t[i] == '\n';
    }
    assert_int_equal(rn_json_count_messages(t, n), expect);
    /* chunked counting sums up */
    size_t sum = 0;
    for (size_t off = 0; off < n; off += 333)
        sum += rn_json_count_messages(t + off, off + 333 <= n ? 333 : n - off);
    assert_int_equal(sum, expect);
    /* every length/offset in a small window */
    for (size_t off = 0; off < 20; off++)
        for (size_t len = 0; len < 600; len++) {
            size_t e = 0;
            for (size_t i = off; i < off + len; i++)
                e += t[i] == '\n';
            assert_int_equal(rn_json_count_messages(t + off, len), e);
        }
    free(t);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_depth_object_message),
        cmocka_unit_test(test_depth_flattened_elements),
        cmocka_unit_test(test_depth_hostile),
        cmocka_unit_test(test_string_block_boundaries),
        cmocka_unit_test(test_long_strings),
        cmocka_unit_test(test_utf8_exhaustive),
        cmocka_unit_test(test_count_messages),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
