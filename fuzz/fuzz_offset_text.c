/*
 * fuzz_offset_text.c — libFuzzer harness for the small text parsers:
 * rn_offset_parse / rn_offset_format (protocol/offset.h) and
 * rn_parse_strict_u64, rn_parse_rfc3339 / rn_format_rfc3339,
 * rn_percent_decode, rn_utf8_valid and rn_base64_append (util/text.h).
 *
 * How: every function gets the whole input as an exact-size heap copy (no
 * NUL terminator), so ASan reports any read past it; output buffers are
 * exact-size too. Each result is compared with a simple reference written
 * here from the function's contract, and round trips are checked:
 *  - offsets: accepted exactly for "-1", "now" and 16 digits "0"x16 "_" 16
 *    digits; format(position) reproduces an accepted token byte for byte, and
 *    parse(format(p)) == p for every p up to 10^16 - 1 (p from the input);
 *  - strict u64: no sign, no leading zero, 1..20 digits, value <= max
 *    (checked for max = 2^64-1, 2^53-1, 65535 and a max from the input);
 *  - RFC 3339: grammar of RFC 3339 §5.6 (T/t, Z/z, numeric offsets up to
 *    23:59, seconds 60 accepted and counted as 59, fraction truncated to
 *    milliseconds), calendar checked, value compared with glibc's timegm;
 *    format(ms) parses back to ms for accepted values whose formatted year
 *    is 0000..9999, and for arbitrary ms in that range (ms from the input);
 *  - percent-decoding: reference decoder, same length and bytes, -1 for a
 *    '%' not followed by two hex digits;
 *  - UTF-8: reference decoder (decode each sequence by its bit pattern, then
 *    reject overlong forms, surrogates and values above U+10FFFF);
 *  - base64: the output decodes back to the input with a reference decoder.
 * Any disagreement aborts with a description.
 */
#define _GNU_SOURCE
#include "protocol/offset.h"
#include "util/buf.h"
#include "util/text.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FAIL(...)                                                                                  \
    do {                                                                                           \
        fprintf(stderr, "fuzz_offset_text: " __VA_ARGS__);                                         \
        fputc('\n', stderr);                                                                       \
        abort();                                                                                   \
    } while (0)

static int is_digit(char c) {
    return c >= '0' && c <= '9';
}

/* Reads up to 8 input bytes as a little-endian integer (missing bytes 0). */
static uint64_t input_u64(const uint8_t *d, size_t n) {
    uint64_t v = 0;
    for (size_t i = 0; i < 8 && i < n; i++)
        v |= (uint64_t)d[i] << (8 * i);
    return v;
}

/* ---- offsets ---- */

static void check_offset(const char *s, size_t n, uint64_t salt) {
    rn_offset_kind kind;
    uint64_t pos = 12345;
    int rc = rn_offset_parse(s, n, &kind, &pos);
    int want_start = n == 2 && memcmp(s, "-1", 2) == 0;
    int want_now = n == 3 && memcmp(s, "now", 3) == 0;
    int want_token = n == 33 && s[16] == '_';
    for (size_t i = 0; want_token && i < 33; i++)
        if (i != 16 && (!is_digit(s[i]) || (i < 16 && s[i] != '0')))
            want_token = 0;
    if ((rc == 0) != (want_start || want_now || want_token))
        FAIL("rn_offset_parse(\"%.*s\") = %d", (int)n, s, rc);
    if (rc == 0 && want_start && (kind != RN_OFFSET_START || pos != 0))
        FAIL("\"-1\" parsed as kind %d position %llu", kind, (unsigned long long)pos);
    if (rc == 0 && want_now && (kind != RN_OFFSET_NOW || pos != 0))
        FAIL("\"now\" parsed as kind %d position %llu", kind, (unsigned long long)pos);
    if (rc == 0 && want_token) {
        uint64_t v = 0;
        for (size_t i = 17; i < 33; i++)
            v = v * 10 + (uint64_t)(s[i] - '0');
        char tok[RN_OFFSET_LEN + 1];
        rn_offset_format(pos, tok);
        if (kind != RN_OFFSET_POSITION || pos != v || memcmp(tok, s, 33) != 0 || tok[33] != 0)
            FAIL("token \"%.*s\" parsed as kind %d position %llu, formats as \"%s\"", (int)n, s,
                 kind, (unsigned long long)pos, tok);
    }
    /* format -> parse for a position from the input (positions stay below
     * 10^16: the token has 16 digits). */
    uint64_t p = salt % 10000000000000000ull;
    char tok[RN_OFFSET_LEN + 1];
    rn_offset_format(p, tok);
    if (strlen(tok) != RN_OFFSET_LEN || rn_offset_parse(tok, RN_OFFSET_LEN, &kind, &pos) != 0 ||
        kind != RN_OFFSET_POSITION || pos != p)
        FAIL("position %llu formats as \"%s\", which does not parse back", (unsigned long long)p,
             tok);
}

/* ---- strict u64 ---- */

static void check_u64(const char *s, size_t n, uint64_t max) {
    uint64_t got = 7;
    int rc = rn_parse_strict_u64(s, n, max, &got);
    int ok = n >= 1 && n <= 20 && !(n > 1 && s[0] == '0');
    unsigned __int128 v = 0;
    for (size_t i = 0; ok && i < n; i++) {
        ok = is_digit(s[i]);
        v = v * 10 + (unsigned)(s[i] - '0');
    }
    ok = ok && v <= max;
    if ((rc == 0) != ok || (ok && got != (uint64_t)v))
        FAIL("rn_parse_strict_u64(\"%.*s\", max %llu) = %d (%llu), reference %d", (int)n, s,
             (unsigned long long)max, rc, (unsigned long long)got, ok ? 0 : -1);
    if (rc != 0 && got != 7)
        FAIL("rn_parse_strict_u64 wrote its output on failure");
}

/* ---- RFC 3339 ---- */

/* n digits at s (all present: the caller checked the length). */
static int num(const char *s, int n, int *out) {
    int v = 0;
    for (int i = 0; i < n; i++) {
        if (!is_digit(s[i]))
            return 0;
        v = v * 10 + (s[i] - '0');
    }
    *out = v;
    return 1;
}

static int days_in_month(int y, int m) {
    static const int d[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    int leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    return m == 2 && leap ? 29 : d[m - 1];
}

/* Reference: returns 1 and *ms when s is an RFC 3339 date-time. */
static int ref_rfc3339(const char *s, size_t n, int64_t *ms) {
    int Y, M, D, h, mi, sec;
    /* full-date "T" partial-time: 19 bytes, then optional fraction and the offset */
    if (n < 20 || !num(s, 4, &Y) || s[4] != '-' || !num(s + 5, 2, &M) || s[7] != '-' ||
        !num(s + 8, 2, &D) || (s[10] != 'T' && s[10] != 't') || !num(s + 11, 2, &h) ||
        s[13] != ':' || !num(s + 14, 2, &mi) || s[16] != ':' || !num(s + 17, 2, &sec))
        return 0;
    if (M < 1 || M > 12 || D < 1 || D > days_in_month(Y, M) || h > 23 || mi > 59 || sec > 60)
        return 0;
    size_t i = 19;
    int frac = 0;
    if (s[i] == '.') {
        size_t digits = 0;
        for (i++; i < n && is_digit(s[i]); i++, digits++)
            if (digits < 3)
                frac = frac * 10 + (s[i] - '0');
        if (digits == 0)
            return 0;
        for (; digits < 3; digits++)
            frac *= 10;
    }
    int off = 0;
    if (i + 1 == n && (s[i] == 'Z' || s[i] == 'z')) {
        off = 0;
    } else if (i + 6 == n && (s[i] == '+' || s[i] == '-') && s[i + 3] == ':') {
        int oh, om;
        if (!num(s + i + 1, 2, &oh) || !num(s + i + 4, 2, &om) || oh > 23 || om > 59)
            return 0;
        off = (oh * 60 + om) * (s[i] == '+' ? 1 : -1);
    } else {
        return 0;
    }
    struct tm tm = {.tm_year = Y - 1900,
                    .tm_mon = M - 1,
                    .tm_mday = D,
                    .tm_hour = h,
                    .tm_min = mi,
                    .tm_sec = sec == 60 ? 59 : sec};
    time_t t = timegm(&tm);
    *ms = ((int64_t)t - (int64_t)off * 60) * 1000 + frac;
    return 1;
}

/* Milliseconds of 0000-01-01T00:00:00Z and 9999-12-31T23:59:59.999Z. */
#define MS_MIN (-62167219200000LL)
#define MS_MAX (253402300799999LL)

static void check_format_roundtrip(int64_t ms) {
    char buf[48];
    rn_format_rfc3339(ms, buf);
    size_t n = strlen(buf);
    int64_t back = 0;
    if (n != 24 || rn_parse_rfc3339(buf, n, &back) != 0 || back != ms)
        FAIL("rn_format_rfc3339(%lld) = \"%s\", parsed back as %lld", (long long)ms, buf,
             (long long)back);
}

static void check_rfc3339(const char *s, size_t n, uint64_t salt) {
    int64_t got = 0, want = 0;
    int rc = rn_parse_rfc3339(s, n, &got);
    int ok = ref_rfc3339(s, n, &want);
    if ((rc == 0) != ok || (ok && got != want))
        FAIL("rn_parse_rfc3339(\"%.*s\") = %d (%lld), reference %s (%lld)", (int)n, s, rc,
             (long long)got, ok ? "accepts" : "rejects", (long long)want);
    if (rc == 0 && got >= MS_MIN && got <= MS_MAX)
        check_format_roundtrip(got);
    check_format_roundtrip(MS_MIN + (int64_t)(salt % (uint64_t)(MS_MAX - MS_MIN + 1)));
}

/* ---- percent-decoding ---- */

static int hexval(char c) {
    const char *digits = "0123456789abcdef0123456789ABCDEF";
    const char *p = c ? strchr(digits, c) : NULL;
    return p ? (int)((p - digits) % 16) : -1;
}

static void check_percent(const char *s, size_t n) {
    char *out = malloc(n ? n : 1);
    char *want = malloc(n ? n : 1);
    long got = rn_percent_decode(s, n, out);
    long wlen = 0;
    for (size_t i = 0; i < n && wlen >= 0; i++) {
        if (s[i] != '%') {
            want[wlen++] = s[i];
        } else if (i + 2 < n && hexval(s[i + 1]) >= 0 && hexval(s[i + 2]) >= 0) {
            want[wlen++] = (char)(hexval(s[i + 1]) * 16 + hexval(s[i + 2]));
            i += 2;
        } else {
            wlen = -1;
        }
    }
    if (got != wlen || (got > 0 && memcmp(out, want, (size_t)got) != 0))
        FAIL("rn_percent_decode(\"%.*s\") = %ld, reference %ld", (int)n, s, got, wlen);
    free(want);
    free(out);
}

/* ---- UTF-8 ---- */

static int ref_utf8_valid(const uint8_t *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        uint8_t c = s[i];
        size_t len;
        uint32_t cp, min;
        if ((c & 0x80) == 0) {
            i++;
            continue;
        } else if ((c & 0xE0) == 0xC0) {
            len = 2, cp = c & 0x1F, min = 0x80;
        } else if ((c & 0xF0) == 0xE0) {
            len = 3, cp = c & 0x0F, min = 0x800;
        } else if ((c & 0xF8) == 0xF0) {
            len = 4, cp = c & 0x07, min = 0x10000;
        } else {
            return 0;
        }
        if (n - i < len)
            return 0;
        for (size_t k = 1; k < len; k++) {
            if ((s[i + k] & 0xC0) != 0x80)
                return 0;
            cp = cp << 6 | (s[i + k] & 0x3F);
        }
        if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
            return 0;
        i += len;
    }
    return 1;
}

/* ---- base64 ---- */

static void check_base64(const uint8_t *d, size_t n) {
    static const char alphabet[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    rn_buf b = {0};
    rn_buf_append(&b, "x", 1); /* appends after existing content */
    rn_base64_append(&b, d, n);
    if (b.len != 1 + (n + 2) / 3 * 4 || b.data[0] != 'x')
        FAIL("rn_base64_append of %zu bytes wrote %zu", n, b.len - 1);
    const uint8_t *e = b.data + 1;
    size_t elen = b.len - 1, o = 0;
    uint8_t *back = malloc(n ? n : 1);
    for (size_t i = 0; i < elen; i += 4) {
        uint32_t v = 0;
        int pad = 0;
        for (size_t k = 0; k < 4; k++) {
            const char *p = e[i + k] == '=' ? NULL : strchr(alphabet, e[i + k]);
            if (e[i + k] == '=' && i + 4 == elen && k >= 2)
                pad++;
            else if (!p || !e[i + k] || pad)
                FAIL("rn_base64_append wrote a bad character at %zu", i + k);
            v = v << 6 | (uint32_t)(p ? p - alphabet : 0);
        }
        for (int k = 0; k < 3 - pad; k++) {
            if (o == n)
                FAIL("rn_base64_append output decodes to more than %zu bytes", n);
            back[o++] = (uint8_t)(v >> (16 - 8 * k));
        }
    }
    if (o != n || (n && memcmp(back, d, n) != 0))
        FAIL("rn_base64_append output does not decode back to the input");
    free(back);
    rn_buf_free(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *s = malloc(size ? size : 1);
    if (size)
        memcpy(s, data, size);
    uint64_t salt = input_u64(data, size);

    check_offset(s, size, salt);
    check_u64(s, size, UINT64_MAX);
    check_u64(s, size, (1ull << 53) - 1);
    check_u64(s, size, 65535);
    check_u64(s, size, salt);
    check_rfc3339(s, size, salt);
    check_percent(s, size);
    if (rn_utf8_valid((const uint8_t *)s, size) != ref_utf8_valid((const uint8_t *)s, size))
        FAIL("rn_utf8_valid = %d, reference %d", rn_utf8_valid((const uint8_t *)s, size),
             ref_utf8_valid((const uint8_t *)s, size));
    check_base64((const uint8_t *)s, size);
    free(s);
    return 0;
}
