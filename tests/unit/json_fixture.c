/*
 * json_fixture.c - helpers shared by the JSON text unit tests. See
 * json_fixture.h.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "json_fixture.h"

/* ---- checked calls ---- */

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

void expect_output(const void *in, size_t len, const void *exp, size_t exp_len, size_t exp_count) {
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

void expect_error(const void *in, size_t len, rn_json_status exp_st, size_t exp_err) {
    result r = run(in, len);
    if (r.st != exp_st || r.err != exp_err) {
        print_error("input (%zu bytes): %.*s\nexpected %s at %zu, got %s at %zu\n", len, (int)len,
                    (const char *)in, rn_json_status_name(exp_st), exp_err,
                    rn_json_status_name(r.st), r.err);
        fail();
    }
    free(r.out);
}

/* ---- growable byte buffer ---- */

void bput(buf *w, const void *s, size_t n) {
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
void bputc(buf *w, uint8_t c) {
    bput(w, &c, 1);
}
void bputs(buf *w, const char *s) {
    bput(w, s, strlen(s));
}
void bfree(buf *w) {
    free(w->b);
    w->b = NULL;
    w->n = w->cap = 0;
}

/* ---- the reference parser ---- */

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
void ref_run(ref *r, const uint8_t *s, size_t n, size_t *count) {
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
void check_against_ref(const uint8_t *s, size_t n) {
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
