/*
 * test_json_random.c - unit tests of src/util/json_text.{h,c} on generated
 * bodies: a seeded generator makes valid bodies with their expected message
 * text (round trip, and idempotence of the stored form), and randomly
 * mutated ones are compared with the reference parser of json_fixture.h
 * (differential test).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "json_fixture.h"
#include "test_rng.h"

/* A value below n from the high bits of the shared sequence. */
static unsigned rnd(unsigned n) {
    return (unsigned)((test_rng_next() >> 32) % n);
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
    test_rng_seed(0x1234567887654321u);
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
    test_rng_seed(0xC0FFEEu);
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

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random_roundtrip),
        cmocka_unit_test(test_random_mutations),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
