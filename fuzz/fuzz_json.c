/*
 * fuzz_json.c — libFuzzer harness for rn_json_to_messages (util/json_text.h).
 *
 * What it checks, on every input (the raw bytes are the request body):
 *  1. No crash, no out-of-bounds access: the input and the output buffer are
 *     exact-size heap blocks (out has the documented len + 1 bytes), so ASan
 *     sees any read past the body or write past the promised capacity.
 *  2. Agreement with a reference: a deliberately simple recursive-descent
 *     validator/minifier written here from RFC 8259 and the header's contract
 *     (one top-level array level flattened, depth limit RN_JSON_MAX_DEPTH per
 *     message, strict UTF-8). Status, err_pos (first byte at which the input
 *     stops being a valid prefix), the output bytes and the message count
 *     must all be equal. The reference's UTF-8 rule is not a range table: a
 *     sequence is valid when it is the canonical encoding of a Unicode scalar
 *     value (decode, re-encode, compare), and a partial sequence is a valid
 *     prefix when some scalar value's encoding starts with it (tables filled
 *     by encoding every scalar value once at start-up).
 *  3. The SIMD and the portable build of json_text.c (json_text_portable.c)
 *     give identical results.
 *  4. Idempotence: every output message m, fed back as "[m]", is accepted and
 *     comes out as exactly m + LF; fed back bare it comes out unchanged too
 *     (a message that is itself an array is flattened, so its output, with
 *     LFs turned back into commas and wrapped in brackets, must equal m).
 *     All messages fed back together as one array reproduce the output.
 *  5. rn_json_count_messages equals a naive LF count, on the output and on
 *     the raw input.
 * Any disagreement aborts with a description (libFuzzer reports a crash).
 */
#include "util/json_text.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

rn_json_status rn_json_to_messages_portable(const uint8_t *in, size_t len, uint8_t *out,
                                            size_t *out_len, size_t *msg_count, size_t *err_pos);
size_t rn_json_count_messages_portable(const uint8_t *text, size_t len);

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FAIL(...)                                                                                  \
    do {                                                                                           \
        fprintf(stderr, "fuzz_json: " __VA_ARGS__);                                                \
        fputc('\n', stderr);                                                                       \
        abort();                                                                                   \
    } while (0)

/* ---- UTF-8 tables built by encoding every scalar value ---- */

static uint8_t lead_len[256];      /* sequence length for a valid lead byte, else 0 */
static uint8_t prefix2[256 * 256]; /* 2-byte prefixes of valid 3/4-byte sequences */
static uint8_t prefix3[1u << 24];  /* 3-byte prefixes of valid 4-byte sequences */

static size_t encode_cp(uint32_t cp, uint8_t *o) {
    if (cp < 0x80) {
        o[0] = (uint8_t)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (uint8_t)(0xC0 | (cp >> 6));
        o[1] = (uint8_t)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (uint8_t)(0xE0 | (cp >> 12));
        o[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (uint8_t)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (uint8_t)(0xF0 | (cp >> 18));
    o[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (uint8_t)(0x80 | (cp & 0x3F));
    return 4;
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    for (uint32_t cp = 0x80; cp <= 0x10FFFF; cp++) {
        if (cp >= 0xD800 && cp <= 0xDFFF)
            continue; /* surrogates are not scalar values */
        uint8_t e[4];
        size_t n = encode_cp(cp, e);
        lead_len[e[0]] = (uint8_t)n;
        if (n >= 3)
            prefix2[e[0] << 8 | e[1]] = 1;
        if (n == 4)
            prefix3[(uint32_t)e[0] << 16 | (uint32_t)e[1] << 8 | e[2]] = 1;
    }
    return 0;
}

/* ---- the reference parser ---- */

typedef struct {
    const uint8_t *s;
    size_t n, i;
    uint8_t *out;
    size_t olen;
    size_t err;
    rn_json_status st; /* set on failure */
} ref;

static int fail_at(ref *r, size_t pos, rn_json_status st) {
    r->err = pos;
    r->st = st;
    return 0;
}

static int is_ws(uint8_t c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static void skip_ws(ref *r) {
    while (r->i < r->n && is_ws(r->s[r->i]))
        r->i++;
}

static void emit(ref *r, const uint8_t *p, size_t n) {
    memcpy(r->out + r->olen, p, n);
    r->olen += n;
}

/* One raw multi-byte sequence inside a string; r->i at its lead byte. */
static int ref_utf8(ref *r) {
    size_t start = r->i;
    uint8_t c = r->s[start];
    size_t n = lead_len[c];
    if (n == 0)
        return fail_at(r, start, RN_JSON_INVALID);
    for (size_t k = 1; k < n; k++) {
        size_t at = start + k;
        if (at == r->n)
            return fail_at(r, at, RN_JSON_INVALID);
        int ok;
        if (k == n - 1) { /* complete: must be the canonical encoding of a scalar */
            const uint8_t *q = r->s + start;
            uint32_t cp = n == 2   ? (uint32_t)(q[0] & 0x1F)
                          : n == 3 ? (uint32_t)(q[0] & 0x0F)
                                   : (uint32_t)(q[0] & 0x07);
            ok = 1;
            for (size_t j = 1; j < n; j++) {
                ok &= (q[j] & 0xC0) == 0x80;
                cp = cp << 6 | (q[j] & 0x3F);
            }
            uint8_t e[4];
            ok = ok && !(cp >= 0xD800 && cp <= 0xDFFF) && cp <= 0x10FFFF && encode_cp(cp, e) == n &&
                 memcmp(e, q, n) == 0;
        } else if (k == 1) {
            ok = prefix2[c << 8 | r->s[at]];
        } else {
            ok = prefix3[(uint32_t)c << 16 | (uint32_t)r->s[start + 1] << 8 | r->s[at]];
        }
        if (!ok)
            return fail_at(r, at, RN_JSON_INVALID);
    }
    emit(r, r->s + start, n);
    r->i = start + n;
    return 1;
}

static int is_hex(uint8_t c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

/* A string; r->i at the opening quote. */
static int ref_string(ref *r) {
    emit(r, r->s + r->i, 1);
    r->i++;
    for (;;) {
        if (r->i == r->n)
            return fail_at(r, r->n, RN_JSON_INVALID);
        uint8_t c = r->s[r->i];
        if (c == '"') {
            emit(r, &c, 1);
            r->i++;
            return 1;
        }
        if (c == '\\') {
            if (r->i + 1 == r->n)
                return fail_at(r, r->n, RN_JSON_INVALID);
            uint8_t e = r->s[r->i + 1];
            if (e == 'u') {
                for (size_t k = 2; k < 6; k++) {
                    if (r->i + k == r->n)
                        return fail_at(r, r->n, RN_JSON_INVALID);
                    if (!is_hex(r->s[r->i + k]))
                        return fail_at(r, r->i + k, RN_JSON_INVALID);
                }
                emit(r, r->s + r->i, 6);
                r->i += 6;
            } else if (strchr("\"\\/bfnrt", e) && e != 0) {
                emit(r, r->s + r->i, 2);
                r->i += 2;
            } else {
                return fail_at(r, r->i + 1, RN_JSON_INVALID);
            }
            continue;
        }
        if (c < 0x20)
            return fail_at(r, r->i, RN_JSON_INVALID);
        if (c >= 0x80) {
            if (!ref_utf8(r))
                return 0;
            continue;
        }
        emit(r, &c, 1);
        r->i++;
    }
}

static int is_digit_at(const ref *r, size_t i) {
    return i < r->n && r->s[i] >= '0' && r->s[i] <= '9';
}

/* -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? ; r->i at '-' or a digit. */
static int ref_number(ref *r) {
    size_t start = r->i, i = r->i;
    if (r->s[i] == '-')
        i++;
    if (i == r->n)
        return fail_at(r, i, RN_JSON_INVALID);
    if (r->s[i] == '0') {
        i++;
    } else if (is_digit_at(r, i)) {
        while (is_digit_at(r, i))
            i++;
    } else {
        return fail_at(r, i, RN_JSON_INVALID);
    }
    if (i < r->n && r->s[i] == '.') {
        i++;
        if (i == r->n)
            return fail_at(r, i, RN_JSON_INVALID);
        if (!is_digit_at(r, i))
            return fail_at(r, i, RN_JSON_INVALID);
        while (is_digit_at(r, i))
            i++;
    }
    if (i < r->n && (r->s[i] == 'e' || r->s[i] == 'E')) {
        i++;
        if (i < r->n && (r->s[i] == '+' || r->s[i] == '-'))
            i++;
        if (i == r->n)
            return fail_at(r, i, RN_JSON_INVALID);
        if (!is_digit_at(r, i))
            return fail_at(r, i, RN_JSON_INVALID);
        while (is_digit_at(r, i))
            i++;
    }
    emit(r, r->s + start, i - start);
    r->i = i;
    return 1;
}

static int ref_literal(ref *r, const char *lit) {
    size_t n = strlen(lit);
    for (size_t k = 0; k < n; k++) {
        if (r->i + k == r->n)
            return fail_at(r, r->n, RN_JSON_INVALID);
        if (r->s[r->i + k] != (uint8_t)lit[k])
            return fail_at(r, r->i + k, RN_JSON_INVALID);
    }
    emit(r, (const uint8_t *)lit, n);
    r->i += n;
    return 1;
}

/* One value with `depth` containers open around it inside its message;
 * r->i at its first byte (whitespace skipped). */
static int ref_value(ref *r, unsigned depth) {
    if (r->i == r->n)
        return fail_at(r, r->n, RN_JSON_INVALID);
    uint8_t c = r->s[r->i];
    if (c == '"')
        return ref_string(r);
    if (c == '-' || (c >= '0' && c <= '9'))
        return ref_number(r);
    if (c == 't')
        return ref_literal(r, "true");
    if (c == 'f')
        return ref_literal(r, "false");
    if (c == 'n')
        return ref_literal(r, "null");
    if (c != '[' && c != '{')
        return fail_at(r, r->i, RN_JSON_INVALID);
    if (depth + 1 > RN_JSON_MAX_DEPTH)
        return fail_at(r, r->i, RN_JSON_TOO_DEEP);
    uint8_t close = c == '[' ? ']' : '}';
    emit(r, &c, 1);
    r->i++;
    skip_ws(r);
    if (r->i < r->n && r->s[r->i] == close) {
        emit(r, &close, 1);
        r->i++;
        return 1;
    }
    for (;;) {
        if (c == '{') {
            if (r->i == r->n)
                return fail_at(r, r->n, RN_JSON_INVALID);
            if (r->s[r->i] != '"')
                return fail_at(r, r->i, RN_JSON_INVALID);
            if (!ref_string(r))
                return 0;
            skip_ws(r);
            if (r->i == r->n)
                return fail_at(r, r->n, RN_JSON_INVALID);
            if (r->s[r->i] != ':')
                return fail_at(r, r->i, RN_JSON_INVALID);
            emit(r, r->s + r->i, 1);
            r->i++;
            skip_ws(r);
        }
        if (!ref_value(r, depth + 1))
            return 0;
        skip_ws(r);
        if (r->i == r->n)
            return fail_at(r, r->n, RN_JSON_INVALID);
        uint8_t d = r->s[r->i];
        if (d == close) {
            emit(r, &d, 1);
            r->i++;
            return 1;
        }
        if (d != ',')
            return fail_at(r, r->i, RN_JSON_INVALID);
        emit(r, &d, 1);
        r->i++;
        skip_ws(r);
    }
}

/* The whole body. Returns the status; err/out/olen/count filled. */
static rn_json_status ref_body(ref *r, size_t *count) {
    static const uint8_t lf = '\n';
    *count = 0;
    r->st = RN_JSON_OK;
    r->err = r->n;
    skip_ws(r);
    if (r->i < r->n && r->s[r->i] == '[') {
        r->i++;
        skip_ws(r);
        if (r->i < r->n && r->s[r->i] == ']') {
            r->i++;
            skip_ws(r);
            if (r->i != r->n) {
                fail_at(r, r->i, RN_JSON_INVALID);
                return r->st;
            }
            return RN_JSON_EMPTY_ARRAY;
        }
        for (;;) {
            if (!ref_value(r, 0))
                return r->st;
            emit(r, &lf, 1);
            (*count)++;
            skip_ws(r);
            if (r->i == r->n) {
                fail_at(r, r->n, RN_JSON_INVALID);
                return r->st;
            }
            if (r->s[r->i] == ']') {
                r->i++;
                break;
            }
            if (r->s[r->i] != ',') {
                fail_at(r, r->i, RN_JSON_INVALID);
                return r->st;
            }
            r->i++;
            skip_ws(r);
        }
    } else {
        if (!ref_value(r, 0))
            return r->st;
        emit(r, &lf, 1);
        *count = 1;
    }
    skip_ws(r);
    if (r->i != r->n) {
        fail_at(r, r->i, RN_JSON_INVALID);
        return r->st;
    }
    return RN_JSON_OK;
}

/* ---- checks ---- */

typedef struct {
    rn_json_status st;
    uint8_t *out; /* malloc'ed, len + 1 bytes */
    size_t out_len, count, err;
} result;

/* Runs the implementation on an exact-size copy of in (so ASan sees reads
 * past it), also the portable build, and checks they agree. */
static result run_impl(const uint8_t *in, size_t len) {
    uint8_t *copy = malloc(len ? len : 1);
    if (len)
        memcpy(copy, in, len);
    result a = {.out = malloc(len + 1)};
    a.st = rn_json_to_messages(len ? copy : NULL, len, a.out, &a.out_len, &a.count, &a.err);
    uint8_t *out2 = malloc(len + 1);
    size_t out_len2, count2, err2;
    rn_json_status st2 =
        rn_json_to_messages_portable(len ? copy : NULL, len, out2, &out_len2, &count2, &err2);
    if (st2 != a.st || out_len2 != a.out_len || count2 != a.count || err2 != a.err ||
        (a.st == RN_JSON_OK && memcmp(out2, a.out, a.out_len) != 0))
        FAIL("SSE2 and portable builds disagree: status %d/%d err_pos %zu/%zu out_len %zu/%zu",
             a.st, st2, a.err, err2, a.out_len, out_len2);
    if (a.st != RN_JSON_OK && a.st != RN_JSON_EMPTY_ARRAY && (a.out_len != 0 || a.count != 0))
        FAIL("failure status %d but out_len %zu, msg_count %zu", a.st, a.out_len, a.count);
    free(out2);
    free(copy);
    return a;
}

static size_t naive_lf_count(const uint8_t *p, size_t n) {
    size_t c = 0;
    for (size_t i = 0; i < n; i++)
        c += p[i] == '\n';
    return c;
}

/* Feeds message m (without its LF) back and checks it comes out unchanged. */
static void check_message(const uint8_t *m, size_t n) {
    uint8_t *wrapped = malloc(n + 2);
    wrapped[0] = '[';
    memcpy(wrapped + 1, m, n);
    wrapped[n + 1] = ']';
    result w = run_impl(wrapped, n + 2);
    if (w.st != RN_JSON_OK || w.count != 1 || w.out_len != n + 1 || memcmp(w.out, m, n) != 0 ||
        w.out[n] != '\n')
        FAIL("message \"%.*s\" fed back as [m] gave status %d, %zu messages, %zu bytes", (int)n, m,
             w.st, w.count, w.out_len);
    free(w.out);
    free(wrapped);

    result b = run_impl(m, n);
    if (n == 2 && m[0] == '[' && m[1] == ']') {
        if (b.st != RN_JSON_EMPTY_ARRAY)
            FAIL("message [] fed back gave status %d", b.st);
    } else if (m[0] == '[') { /* flattened: rejoin its messages */
        if (b.st != RN_JSON_OK || b.out_len + 1 != n || b.out[b.out_len - 1] != '\n')
            FAIL("array message \"%.*s\" fed back gave status %d, %zu bytes", (int)n, m, b.st,
                 b.out_len);
        for (size_t i = 0; i + 1 < b.out_len; i++)
            if ((b.out[i] == '\n' ? ',' : b.out[i]) != m[i + 1])
                FAIL("array message \"%.*s\" fed back bare changed at byte %zu", (int)n, m, i + 1);
    } else if (b.st != RN_JSON_OK || b.count != 1 || b.out_len != n + 1 ||
               memcmp(b.out, m, n) != 0) {
        FAIL("message \"%.*s\" fed back bare gave status %d, %zu bytes", (int)n, m, b.st,
             b.out_len);
    }
    free(b.out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    result a = run_impl(data, size);

    uint8_t *rout = malloc(size + 1);
    ref r = {.s = data, .n = size, .out = rout};
    size_t rcount;
    rn_json_status rst = ref_body(&r, &rcount);
    if (rst != a.st)
        FAIL("status %s, reference says %s (err_pos %zu, reference %zu)", rn_json_status_name(a.st),
             rn_json_status_name(rst), a.err, r.err);
    if (a.err != r.err)
        FAIL("status %s: err_pos %zu, reference %zu", rn_json_status_name(a.st), a.err, r.err);
    if (a.st == RN_JSON_OK &&
        (a.out_len != r.olen || a.count != rcount || memcmp(a.out, rout, r.olen) != 0))
        FAIL("output differs from the reference (%zu bytes / %zu messages, reference %zu / %zu)",
             a.out_len, a.count, r.olen, rcount);
    free(rout);

    if (rn_json_count_messages(data, size) != naive_lf_count(data, size) ||
        rn_json_count_messages_portable(data, size) != naive_lf_count(data, size))
        FAIL("rn_json_count_messages of the input differs from a naive count");

    if (a.st == RN_JSON_OK) {
        if (rn_json_count_messages(a.out, a.out_len) != a.count)
            FAIL("rn_json_count_messages(out) != msg_count");
        /* Each message alone, then all of them as one array. */
        uint8_t *joined = malloc(a.out_len + 2);
        size_t jlen = 0, start = 0;
        joined[jlen++] = '[';
        for (size_t i = 0; i < a.out_len; i++) {
            if (a.out[i] != '\n')
                continue;
            if (i == start)
                FAIL("empty message in the output");
            check_message(a.out + start, i - start);
            memcpy(joined + jlen, a.out + start, i - start);
            jlen += i - start;
            joined[jlen++] = ',';
            start = i + 1;
        }
        if (start != a.out_len)
            FAIL("output does not end with LF");
        joined[jlen - 1] = ']';
        result j = run_impl(joined, jlen);
        if (j.st != RN_JSON_OK || j.out_len != a.out_len || memcmp(j.out, a.out, a.out_len) != 0)
            FAIL("the messages rejoined as one array do not reproduce the output");
        free(j.out);
        free(joined);
    }
    free(a.out);
    return 0;
}
