/*
 * test_json_text.c - unit tests for src/util/json_text.{h,c}.
 *
 * Owns: the correctness evidence for JSON body validation / message-text
 * encoding. Combines hand-written tables (valid inputs with exact outputs,
 * invalid inputs with exact status and error position), boundary tests for
 * the depth limit and the 16/8-byte string fast paths, an exhaustive UTF-8
 * check against an independent arithmetic decoder, a seeded random
 * round-trip/idempotence test, and a differential test of randomly mutated
 * documents against a small recursive reference parser written here.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/json_text.h"

/* ------------------------------------------------------------------------ */
/* Harness                                                                   */

typedef struct {
    rn_json_status st;
    uint8_t *out; /* malloc'd, caller frees */
    size_t out_len, count, err;
} result;

#define CANARY_LEN 32

/* Runs rn_json_to_messages on an exact-size copy of the input (so ASan sees
 * over-reads) with an output buffer of exactly len + 1 bytes followed by a
 * canary (so over-writes are caught without ASan too), and checks the
 * contract invariants that hold for every input. */
static result run(const void *in, size_t len) {
    result r;
    uint8_t *copy = malloc(len ? len : 1);
    assert_non_null(copy);
    if (len)
        memcpy(copy, in, len);
    r.out = malloc(len + 1 + CANARY_LEN);
    assert_non_null(r.out);
    memset(r.out, 0xA5, len + 1 + CANARY_LEN);
    r.out_len = 12345;
    r.count = 12345;
    r.err = 12345;
    r.st = rn_json_to_messages(copy, len, r.out, &r.out_len, &r.count, &r.err);
    for (size_t i = 0; i < CANARY_LEN; i++)
        assert_int_equal(r.out[len + 1 + i], 0xA5);
    free(copy);

    if (r.st == RN_JSON_OK) {
        assert_true(r.count >= 1);
        assert_true(r.out_len <= len + 1);
        assert_int_equal(r.err, len);
        assert_int_equal(r.out[r.out_len - 1], '\n');
        assert_int_equal(rn_json_count_messages(r.out, r.out_len), r.count);
    } else if (r.st == RN_JSON_EMPTY_ARRAY) {
        assert_int_equal(r.out_len, 0);
        assert_int_equal(r.count, 0);
        assert_int_equal(r.err, len);
    } else {
        assert_true(r.st == RN_JSON_INVALID || r.st == RN_JSON_TOO_DEEP);
        assert_int_equal(r.out_len, 0);
        assert_int_equal(r.count, 0);
        assert_true(r.err <= len);
    }

    /* The optional outputs really are optional and do not change the result. */
    size_t ol2 = 999;
    uint8_t *out2 = malloc(len + 1);
    assert_non_null(out2);
    rn_json_status st2 = rn_json_to_messages(in, len, out2, &ol2, NULL, NULL);
    assert_int_equal(st2, r.st);
    if (st2 == RN_JSON_OK) {
        assert_int_equal(ol2, r.out_len);
        assert_memory_equal(out2, r.out, r.out_len);
    } else {
        assert_int_equal(ol2, 0);
    }
    free(out2);
    return r;
}

static void expect_output(const void *in, size_t len, const void *exp, size_t exp_len,
                          size_t exp_count) {
    result r = run(in, len);
    if (r.st != (exp_count ? RN_JSON_OK : RN_JSON_EMPTY_ARRAY) || r.out_len != exp_len ||
        (exp_len && memcmp(r.out, exp, exp_len) != 0)) {
        print_error("input (%zu bytes): %.*s\nexpected: %.*s\ngot status %s, %zu bytes: %.*s\n",
                    len, (int)len, (const char *)in, (int)exp_len, (const char *)exp,
                    rn_json_status_name(r.st), r.out_len, (int)r.out_len, (const char *)r.out);
        fail();
    }
    assert_int_equal(r.count, exp_count);
    free(r.out);
}

static void expect_error(const void *in, size_t len, rn_json_status exp_st, size_t exp_err) {
    result r = run(in, len);
    if (r.st != exp_st || r.err != exp_err) {
        print_error("input (%zu bytes): %.*s\nexpected %s at %zu, got %s at %zu\n", len, (int)len,
                    (const char *)in, rn_json_status_name(exp_st), exp_err,
                    rn_json_status_name(r.st), r.err);
        fail();
    }
    free(r.out);
}

/* Growable byte buffer. */
typedef struct {
    uint8_t *b;
    size_t n, cap;
} buf;

static void bput(buf *w, const void *s, size_t n) {
    if (w->n + n > w->cap) {
        size_t cap = w->cap ? w->cap : 64;
        while (cap < w->n + n)
            cap *= 2;
        w->b = realloc(w->b, cap);
        assert_non_null(w->b);
        w->cap = cap;
    }
    memcpy(w->b + w->n, s, n);
    w->n += n;
}
static void bputc(buf *w, uint8_t c) {
    bput(w, &c, 1);
}
static void bputs(buf *w, const char *s) {
    bput(w, s, strlen(s));
}
static void bfree(buf *w) {
    free(w->b);
    w->b = NULL;
    w->n = w->cap = 0;
}

/* Deterministic PRNG (xorshift64*). */
static uint64_t rng_state = 0x9E3779B97F4A7C15u;
static uint64_t rnd64(void) {
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545F4914F6CDD1Du;
}
static unsigned rnd(unsigned n) {
    return (unsigned)((rnd64() >> 32) % n);
}

/* ------------------------------------------------------------------------ */
/* Independent reference parser (recursive, byte-at-a-time, slow).           */
/* Same contract: status, output, and error position = first byte at which   */
/* the input stops being a valid prefix (len if merely truncated).           */

typedef struct {
    const uint8_t *s;
    size_t n, i;
    buf out;
    rn_json_status st;
    size_t err;
} ref;

static int ref_fail(ref *r, size_t pos, rn_json_status st) {
    r->st = st;
    r->err = pos;
    return 0;
}
static int ref_is_ws(uint8_t c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}
static void ref_ws(ref *r) {
    while (r->i < r->n && ref_is_ws(r->s[r->i]))
        r->i++;
}
static int ref_expect(ref *r, uint8_t c) {
    if (r->i >= r->n)
        return ref_fail(r, r->n, RN_JSON_INVALID);
    if (r->s[r->i] != c)
        return ref_fail(r, r->i, RN_JSON_INVALID);
    bputc(&r->out, c);
    r->i++;
    return 1;
}

/* Can a UTF-8 sequence of total length `len`, whose payload so far is
 * `partial` with `rem` continuation bytes still to come, still decode to a
 * non-overlong scalar value (not a surrogate, <= U+10FFFF)? */
static int ref_utf8_possible(uint32_t partial, unsigned rem, unsigned len) {
    static const uint32_t min_for_len[5] = {0, 0, 0x80, 0x800, 0x10000};
    uint32_t lo = partial << (6 * rem);
    uint32_t hi = lo | ((1u << (6 * rem)) - 1);
    if (lo < min_for_len[len])
        lo = min_for_len[len];
    if (hi > 0x10FFFF)
        hi = 0x10FFFF;
    if (lo > hi)
        return 0;
    return !(lo >= 0xD800 && hi <= 0xDFFF);
}

static int ref_string(ref *r) {
    if (!ref_expect(r, '"'))
        return 0;
    for (;;) {
        if (r->i >= r->n)
            return ref_fail(r, r->n, RN_JSON_INVALID);
        uint8_t c = r->s[r->i];
        if (c == '"') {
            bputc(&r->out, c);
            r->i++;
            return 1;
        }
        if (c == '\\') {
            if (r->i + 1 >= r->n)
                return ref_fail(r, r->n, RN_JSON_INVALID);
            uint8_t e = r->s[r->i + 1];
            if (strchr("\"\\/bfnrt", e) && e != 0) {
                bput(&r->out, r->s + r->i, 2);
                r->i += 2;
            } else if (e == 'u') {
                for (size_t k = 2; k < 6; k++) {
                    if (r->i + k >= r->n)
                        return ref_fail(r, r->n, RN_JSON_INVALID);
                    uint8_t h = r->s[r->i + k];
                    if (!((h >= '0' && h <= '9') || (h >= 'a' && h <= 'f') ||
                          (h >= 'A' && h <= 'F')))
                        return ref_fail(r, r->i + k, RN_JSON_INVALID);
                }
                bput(&r->out, r->s + r->i, 6);
                r->i += 6;
            } else {
                return ref_fail(r, r->i + 1, RN_JSON_INVALID);
            }
            continue;
        }
        if (c < 0x20)
            return ref_fail(r, r->i, RN_JSON_INVALID);
        if (c < 0x80) {
            bputc(&r->out, c);
            r->i++;
            continue;
        }
        unsigned len;
        uint32_t cp;
        if ((c & 0xE0) == 0xC0) {
            len = 2;
            cp = c & 0x1F;
        } else if ((c & 0xF0) == 0xE0) {
            len = 3;
            cp = c & 0x0F;
        } else if ((c & 0xF8) == 0xF0) {
            len = 4;
            cp = c & 0x07;
        } else {
            return ref_fail(r, r->i, RN_JSON_INVALID);
        }
        if (!ref_utf8_possible(cp, len - 1, len))
            return ref_fail(r, r->i, RN_JSON_INVALID);
        for (unsigned k = 1; k < len; k++) {
            if (r->i + k >= r->n)
                return ref_fail(r, r->n, RN_JSON_INVALID);
            uint8_t b = r->s[r->i + k];
            if ((b & 0xC0) != 0x80)
                return ref_fail(r, r->i + k, RN_JSON_INVALID);
            cp = (cp << 6) | (b & 0x3F);
            if (!ref_utf8_possible(cp, len - 1 - k, len))
                return ref_fail(r, r->i + k, RN_JSON_INVALID);
        }
        bput(&r->out, r->s + r->i, len);
        r->i += len;
    }
}

static int ref_digits(ref *r) { /* one or more */
    if (r->i >= r->n)
        return ref_fail(r, r->n, RN_JSON_INVALID);
    if (r->s[r->i] < '0' || r->s[r->i] > '9')
        return ref_fail(r, r->i, RN_JSON_INVALID);
    while (r->i < r->n && r->s[r->i] >= '0' && r->s[r->i] <= '9')
        bputc(&r->out, r->s[r->i++]);
    return 1;
}

static int ref_number(ref *r) {
    if (r->s[r->i] == '-')
        bputc(&r->out, r->s[r->i++]);
    if (r->i >= r->n)
        return ref_fail(r, r->n, RN_JSON_INVALID);
    if (r->s[r->i] == '0') {
        bputc(&r->out, r->s[r->i++]);
    } else if (!ref_digits(r)) {
        return 0;
    }
    if (r->i < r->n && r->s[r->i] == '.') {
        bputc(&r->out, r->s[r->i++]);
        if (!ref_digits(r))
            return 0;
    }
    if (r->i < r->n && (r->s[r->i] == 'e' || r->s[r->i] == 'E')) {
        bputc(&r->out, r->s[r->i++]);
        if (r->i < r->n && (r->s[r->i] == '+' || r->s[r->i] == '-'))
            bputc(&r->out, r->s[r->i++]);
        if (!ref_digits(r))
            return 0;
    }
    return 1;
}

/* depth = number of containers already open around this value (per message). */
static int ref_value(ref *r, int depth) {
    if (r->i >= r->n)
        return ref_fail(r, r->n, RN_JSON_INVALID);
    uint8_t c = r->s[r->i];
    if (c == '"')
        return ref_string(r);
    if (c == '-' || (c >= '0' && c <= '9'))
        return ref_number(r);
    if (c == 't' || c == 'f' || c == 'n') {
        const char *lit = c == 't' ? "true" : c == 'f' ? "false" : "null";
        for (const char *q = lit; *q; q++)
            if (!ref_expect(r, (uint8_t)*q))
                return 0;
        return 1;
    }
    if (c == '[' || c == '{') {
        if (depth + 1 > RN_JSON_MAX_DEPTH)
            return ref_fail(r, r->i, RN_JSON_TOO_DEEP);
        uint8_t close = c == '[' ? ']' : '}';
        bputc(&r->out, c);
        r->i++;
        ref_ws(r);
        if (r->i < r->n && r->s[r->i] == close) {
            bputc(&r->out, close);
            r->i++;
            return 1;
        }
        for (;;) {
            if (c == '{') {
                if (r->i >= r->n)
                    return ref_fail(r, r->n, RN_JSON_INVALID);
                if (r->s[r->i] != '"')
                    return ref_fail(r, r->i, RN_JSON_INVALID);
                if (!ref_string(r))
                    return 0;
                ref_ws(r);
                if (!ref_expect(r, ':'))
                    return 0;
                ref_ws(r);
            }
            if (!ref_value(r, depth + 1))
                return 0;
            ref_ws(r);
            if (r->i >= r->n)
                return ref_fail(r, r->n, RN_JSON_INVALID);
            if (r->s[r->i] == ',') {
                bputc(&r->out, ',');
                r->i++;
                ref_ws(r);
                continue;
            }
            return ref_expect(r, close);
        }
    }
    return ref_fail(r, r->i, RN_JSON_INVALID);
}

/* Full body -> messages, mirroring the documented contract. */
static void ref_run(ref *r, const uint8_t *s, size_t n, size_t *count) {
    memset(r, 0, sizeof *r);
    r->s = s;
    r->n = n;
    r->st = RN_JSON_OK;
    *count = 0;
    ref_ws(r);
    if (r->i >= r->n) {
        ref_fail(r, r->n, RN_JSON_INVALID);
        return;
    }
    if (r->s[r->i] == '[') {
        r->i++;
        ref_ws(r);
        if (r->i < r->n && r->s[r->i] == ']') {
            r->i++;
            r->st = RN_JSON_EMPTY_ARRAY;
        } else {
            for (;;) {
                if (!ref_value(r, 0))
                    return;
                bputc(&r->out, '\n');
                (*count)++;
                ref_ws(r);
                if (r->i >= r->n) {
                    ref_fail(r, r->n, RN_JSON_INVALID);
                    return;
                }
                if (r->s[r->i] == ']') {
                    r->i++;
                    break;
                }
                if (r->s[r->i] != ',') {
                    ref_fail(r, r->i, RN_JSON_INVALID);
                    return;
                }
                r->i++;
                ref_ws(r);
            }
        }
    } else {
        if (!ref_value(r, 0))
            return;
        bputc(&r->out, '\n');
        *count = 1;
    }
    ref_ws(r);
    if (r->i != r->n)
        ref_fail(r, r->i, RN_JSON_INVALID);
    else
        r->err = n;
}

/* Compares module and reference on one input. */
static void check_against_ref(const uint8_t *s, size_t n) {
    ref r;
    size_t rcount;
    ref_run(&r, s, n, &rcount);
    result m = run(s, n);
    if (m.st != r.st || m.err != r.err) {
        print_error("input (%zu bytes):", n);
        for (size_t i = 0; i < n; i++)
            print_error(" %02X", s[i]);
        print_error("\nmodule %s at %zu, reference %s at %zu\n", rn_json_status_name(m.st), m.err,
                    rn_json_status_name(r.st), r.err);
        fail();
    }
    if (m.st == RN_JSON_OK) {
        assert_int_equal(m.count, rcount);
        assert_int_equal(m.out_len, r.out.n);
        assert_memory_equal(m.out, r.out.b, m.out_len);
    }
    free(m.out);
    bfree(&r.out);
}

/* ------------------------------------------------------------------------ */
/* Table-driven corpora                                                      */

#define S(lit) (lit), (sizeof(lit) - 1)

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
/* Depth limit                                                               */

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
    nested_objects(&w, RN_JSON_MAX_DEPTH);
    bput(&e, w.b, w.n);
    bputc(&e, '\n');
    expect_output(w.b, w.n, e.b, e.n, 1);
    check_against_ref(w.b, w.n);
    bfree(&w);

    nested_objects(&w, RN_JSON_MAX_DEPTH + 1);
    /* error at the 128th '{', which starts at byte 127 * 5 */
    expect_error(w.b, w.n, RN_JSON_TOO_DEEP, (size_t)RN_JSON_MAX_DEPTH * 5);
    check_against_ref(w.b, w.n);
    bfree(&w);
    bfree(&e);

    /* object containing arrays: the object's own level counts */
    bputs(&w, "{\"a\":");
    nested_arrays(&w, RN_JSON_MAX_DEPTH - 1);
    bputc(&w, '}');
    bput(&e, w.b, w.n);
    bputc(&e, '\n');
    expect_output(w.b, w.n, e.b, e.n, 1);
    bfree(&w);
    bfree(&e);
    bputs(&w, "{\"a\":");
    nested_arrays(&w, RN_JSON_MAX_DEPTH);
    bputc(&w, '}');
    expect_error(w.b, w.n, RN_JSON_TOO_DEEP, 5 + RN_JSON_MAX_DEPTH - 1);
    bfree(&w);
}

static void test_depth_flattened_elements(void **state) {
    (void)state;
    buf w = {0}, e = {0};
    /* 128 brackets in total: the outer one is flattened away -> depth 127 */
    nested_arrays(&w, RN_JSON_MAX_DEPTH + 1);
    nested_arrays(&e, RN_JSON_MAX_DEPTH);
    bputc(&e, '\n');
    expect_output(w.b, w.n, e.b, e.n, 1);
    check_against_ref(w.b, w.n);
    bfree(&w);
    bfree(&e);

    /* 129 brackets: element depth 128; error at the bracket at index 128 */
    nested_arrays(&w, RN_JSON_MAX_DEPTH + 2);
    expect_error(w.b, w.n, RN_JSON_TOO_DEEP, RN_JSON_MAX_DEPTH + 1);
    check_against_ref(w.b, w.n);
    bfree(&w);

    /* object elements of a top-level array: 127 accepted, 128 rejected;
     * a shallow first element does not hide a too-deep second one */
    bputs(&w, "[ 1 , ");
    nested_objects(&w, RN_JSON_MAX_DEPTH);
    bputs(&w, " ]");
    bputs(&e, "1\n");
    nested_objects(&e, RN_JSON_MAX_DEPTH);
    bputc(&e, '\n');
    expect_output(w.b, w.n, e.b, e.n, 2);
    bfree(&w);
    bfree(&e);
    bputs(&w, "[ 1 , ");
    nested_objects(&w, RN_JSON_MAX_DEPTH + 1);
    bputs(&w, " ]");
    expect_error(w.b, w.n, RN_JSON_TOO_DEEP, 6 + (size_t)RN_JSON_MAX_DEPTH * 5);
    check_against_ref(w.b, w.n);
    bfree(&w);

    /* depth resets between elements: many elements each at depth 127 */
    bputc(&w, '[');
    for (int i = 0; i < 10; i++) {
        if (i)
            bputc(&w, ',');
        nested_arrays(&w, RN_JSON_MAX_DEPTH);
        nested_arrays(&e, RN_JSON_MAX_DEPTH);
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
    expect_error(w, n, RN_JSON_TOO_DEEP, RN_JSON_MAX_DEPTH + 1);
    memset(w + n, ']', n);
    expect_error(w, 2 * n, RN_JSON_TOO_DEEP, RN_JSON_MAX_DEPTH + 1);
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
    expect_error(b.b, b.n, RN_JSON_TOO_DEEP, RN_JSON_MAX_DEPTH + 1);
    bfree(&b);
    /* exactly at the limit, then a syntax error: INVALID */
    for (int i = 0; i < RN_JSON_MAX_DEPTH + 1; i++)
        bputc(&b, '[');
    bputc(&b, '}');
    expect_error(b.b, b.n, RN_JSON_INVALID, RN_JSON_MAX_DEPTH + 1);
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
/* Random generation: round trip, idempotence, differential mutation         */

static void gen_ws(buf *w) {
    static const char ws[] = " \t\n\r";
    if (rnd(3) == 0) {
        unsigned k = 1 + rnd(4);
        for (unsigned i = 0; i < k; i++)
            bputc(w, (uint8_t)ws[rnd(4)]);
    }
}

static void both(buf *w, buf *c, const void *s, size_t n) {
    bput(w, s, n);
    bput(c, s, n);
}
static void both_s(buf *w, buf *c, const char *s) {
    both(w, c, s, strlen(s));
}

static void gen_utf8(buf *w, buf *c) {
    uint32_t cp;
    uint8_t u[4];
    size_t n;
    switch (rnd(3)) {
    case 0:
        cp = 0x80 + rnd(0x800 - 0x80);
        break;
    case 1:
        do
            cp = 0x800 + rnd(0x10000 - 0x800);
        while (cp >= 0xD800 && cp <= 0xDFFF);
        break;
    default:
        cp = 0x10000 + rnd(0x110000 - 0x10000);
        break;
    }
    if (cp < 0x800) {
        u[0] = (uint8_t)(0xC0 | (cp >> 6));
        u[1] = (uint8_t)(0x80 | (cp & 0x3F));
        n = 2;
    } else if (cp < 0x10000) {
        u[0] = (uint8_t)(0xE0 | (cp >> 12));
        u[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
        u[2] = (uint8_t)(0x80 | (cp & 0x3F));
        n = 3;
    } else {
        u[0] = (uint8_t)(0xF0 | (cp >> 18));
        u[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3F));
        u[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
        u[3] = (uint8_t)(0x80 | (cp & 0x3F));
        n = 4;
    }
    both(w, c, u, n);
}

static void gen_string(buf *w, buf *c) {
    static const char hex[] = "0123456789abcdefABCDEF";
    static const char *esc[] = {"\\\"", "\\\\", "\\/", "\\b", "\\f", "\\n", "\\r", "\\t"};
    unsigned len = rnd(4) == 0 ? rnd(80) : rnd(12);
    both_s(w, c, "\"");
    for (unsigned i = 0; i < len; i++) {
        unsigned k = rnd(20);
        if (k < 12) {
            uint8_t ch;
            do
                ch = (uint8_t)(0x20 + rnd(0x60)); /* 0x20..0x7F */
            while (ch == '"' || ch == '\\');
            both(w, c, &ch, 1);
        } else if (k < 14) {
            both_s(w, c, esc[rnd(8)]);
        } else if (k < 16) {
            char u[7] = {'\\', 'u', 0, 0, 0, 0, 0};
            if (rnd(3) == 0) { /* surrogate range, often lone */
                u[2] = rnd(2) ? 'd' : 'D';
                u[3] = "89abAB"[rnd(6)];
            } else {
                u[2] = hex[rnd(22)];
                u[3] = hex[rnd(22)];
            }
            u[4] = hex[rnd(22)];
            u[5] = hex[rnd(22)];
            both_s(w, c, u);
        } else {
            gen_utf8(w, c);
        }
    }
    both_s(w, c, "\"");
}

static void gen_digits(buf *w, buf *c, unsigned n) {
    for (unsigned i = 0; i < n; i++) {
        uint8_t d = (uint8_t)('0' + rnd(10));
        both(w, c, &d, 1);
    }
}

static void gen_number(buf *w, buf *c) {
    if (rnd(2))
        both_s(w, c, "-");
    if (rnd(3) == 0) {
        both_s(w, c, "0");
    } else {
        uint8_t d = (uint8_t)('1' + rnd(9));
        both(w, c, &d, 1);
        gen_digits(w, c, rnd(4) == 0 ? rnd(40) : rnd(5));
    }
    if (rnd(2)) {
        both_s(w, c, ".");
        gen_digits(w, c, 1 + rnd(6));
    }
    if (rnd(3) == 0) {
        both_s(w, c, rnd(2) ? "e" : "E");
        unsigned s = rnd(3);
        if (s)
            both_s(w, c, s == 1 ? "+" : "-");
        gen_digits(w, c, 1 + rnd(4));
    }
}

/* no_array: the top-level single-message case, which must not be an array */
static void gen_value(buf *w, buf *c, unsigned depth, unsigned maxdepth, int no_array) {
    unsigned k = rnd(depth < maxdepth ? 9 : 6);
    if (no_array && (k == 6 || k == 7))
        k = 8;
    switch (k) {
    case 0:
    case 1:
        gen_string(w, c);
        break;
    case 2:
    case 3:
        gen_number(w, c);
        break;
    case 4:
        both_s(w, c, "true");
        break;
    case 5:
        both_s(w, c, rnd(2) ? "false" : "null");
        break;
    case 6:
    case 7: {
        unsigned n = rnd(5);
        both_s(w, c, "[");
        gen_ws(w);
        for (unsigned i = 0; i < n; i++) {
            if (i) {
                both_s(w, c, ",");
                gen_ws(w);
            }
            gen_value(w, c, depth + 1, maxdepth, 0);
            gen_ws(w);
        }
        both_s(w, c, "]");
        break;
    }
    default: {
        unsigned n = rnd(5);
        both_s(w, c, "{");
        gen_ws(w);
        for (unsigned i = 0; i < n; i++) {
            if (i) {
                both_s(w, c, ",");
                gen_ws(w);
            }
            gen_string(w, c);
            gen_ws(w);
            both_s(w, c, ":");
            gen_ws(w);
            gen_value(w, c, depth + 1, maxdepth, 0);
            gen_ws(w);
        }
        both_s(w, c, "}");
        break;
    }
    }
}

/* Generates one body into w (with whitespace) and its expected message text
 * into exp; returns the number of messages. */
static size_t gen_body(buf *w, buf *exp) {
    size_t count = 0;
    unsigned maxdepth = rnd(8);
    gen_ws(w);
    if (rnd(2)) {
        unsigned n = rnd(4) == 0 ? 0 : 1 + rnd(8);
        bputc(w, '[');
        gen_ws(w);
        for (unsigned i = 0; i < n; i++) {
            if (i) {
                bputc(w, ',');
                gen_ws(w);
            }
            gen_value(w, exp, 0, maxdepth, 0);
            bputc(exp, '\n');
            count++;
            gen_ws(w);
        }
        bputc(w, ']');
    } else {
        gen_value(w, exp, 0, maxdepth, 1);
        bputc(exp, '\n');
        count = 1;
    }
    gen_ws(w);
    return count;
}

static void check_idempotent(const uint8_t *text, size_t len, size_t count) {
    buf joined = {0};
    size_t start = 0, seen = 0;
    bputc(&joined, '[');
    for (size_t i = 0; i < len; i++) {
        if (text[i] != '\n')
            continue;
        const uint8_t *m = text + start;
        size_t mlen = i - start;
        assert_true(mlen > 0);
        /* [m] -> m\n, exactly one message */
        buf wrapped = {0};
        bputc(&wrapped, '[');
        bput(&wrapped, m, mlen);
        bputc(&wrapped, ']');
        expect_output(wrapped.b, wrapped.n, m, mlen + 1, 1);
        bfree(&wrapped);
        /* a non-array message fed back alone is a fixed point */
        if (m[0] != '[')
            expect_output(m, mlen, m, mlen + 1, 1);
        if (seen)
            bputc(&joined, ',');
        bput(&joined, m, mlen);
        seen++;
        start = i + 1;
    }
    assert_int_equal(start, len);
    assert_int_equal(seen, count);
    bputc(&joined, ']');
    expect_output(joined.b, joined.n, text, len, count);
    bfree(&joined);
}

static void test_random_roundtrip(void **state) {
    (void)state;
    rng_state = 0x1234567887654321u;
    size_t total_msgs = 0;
    for (int iter = 0; iter < 20000; iter++) {
        buf w = {0}, exp = {0};
        size_t count = gen_body(&w, &exp);
        expect_output(w.b, w.n, exp.b, exp.n, count);
        if (count)
            check_idempotent(exp.b, exp.n, count);
        total_msgs += count;
        bfree(&w);
        bfree(&exp);
    }
    assert_true(total_msgs > 20000); /* the generator really produced arrays */
}

static void test_random_mutations(void **state) {
    (void)state;
    static const uint8_t interesting[] = {
        '[',  ']',  '{',  '}',  ',',  ':',  '"',  '\\', '0',  '1',  '9',  '-',  '+',  '.',
        'e',  'E',  'u',  't',  'n',  ' ',  '\t', '\n', '\r', 0x00, 0x01, 0x1F, 0x7F, 0x80,
        0xBF, 0xC0, 0xC2, 0xDF, 0xE0, 0xED, 0xEF, 0xF0, 0xF4, 0xF5, 0xFF, 'a',  'x',  '\f',
    };
    rng_state = 0xC0FFEEu;
    size_t n_ok = 0, n_bad = 0;
    for (int iter = 0; iter < 60000; iter++) {
        buf w = {0}, exp = {0};
        gen_body(&w, &exp);
        unsigned muts = 1 + rnd(3);
        for (unsigned m = 0; m < muts && w.n > 0; m++) {
            size_t pos = rnd((unsigned)w.n);
            uint8_t b = rnd(4) ? interesting[rnd(sizeof interesting)] : (uint8_t)rnd(256);
            switch (rnd(4)) {
            case 0: /* replace */
                w.b[pos] = b;
                break;
            case 1: /* delete */
                memmove(w.b + pos, w.b + pos + 1, w.n - pos - 1);
                w.n--;
                break;
            case 2: /* insert */
                bputc(&w, 0);
                memmove(w.b + pos + 1, w.b + pos, w.n - pos - 1);
                w.b[pos] = b;
                break;
            default: /* truncate */
                w.n = pos;
                break;
            }
        }
        ref r;
        size_t rc;
        ref_run(&r, w.b, w.n, &rc);
        if (r.st == RN_JSON_OK || r.st == RN_JSON_EMPTY_ARRAY)
            n_ok++;
        else
            n_bad++;
        bfree(&r.out);
        check_against_ref(w.b, w.n);
        bfree(&w);
        bfree(&exp);
    }
    /* both outcomes must be well represented for the test to mean anything */
    assert_true(n_ok > 1000);
    assert_true(n_bad > 1000);
}

/* ------------------------------------------------------------------------ */
/* Misc API                                                                  */

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
 * arrays; run() already checks a canary right after len + 1 bytes. */
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
        cmocka_unit_test(test_valid_corpus),
        cmocka_unit_test(test_invalid_corpus),
        cmocka_unit_test(test_null_empty_input),
        cmocka_unit_test(test_long_numbers),
        cmocka_unit_test(test_depth_object_message),
        cmocka_unit_test(test_depth_flattened_elements),
        cmocka_unit_test(test_depth_hostile),
        cmocka_unit_test(test_string_block_boundaries),
        cmocka_unit_test(test_long_strings),
        cmocka_unit_test(test_utf8_exhaustive),
        cmocka_unit_test(test_random_roundtrip),
        cmocka_unit_test(test_random_mutations),
        cmocka_unit_test(test_count_messages),
        cmocka_unit_test(test_append_array),
        cmocka_unit_test(test_status_names),
        cmocka_unit_test(test_capacity_bound),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
