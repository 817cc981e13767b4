/*
 * test_offset_text.c - unit tests for the small text and data helpers:
 * offset tokens and the path segments that carry offsets and incarnation
 * tokens (src/protocol/offset.c), strict integers, RFC 3339 dates,
 * base64 and percent-decoding (src/util/text.c). CRC-32C and the hash map
 * are test_crc_map.c's.
 *
 * How: table-driven checks against known answers (RFC 4648 base64 vectors,
 * epoch values computed independently with
 * `date -u -d ... +%s`) and round trips (format then parse).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "protocol/offset.h"
#include "util/buf.h"
#include "util/text.h"

#include "test_rng.h"

/* ------------------------------------------------------------------------ */
/* Offset tokens                                                             */

static int parse_offset(const char *s, rn_offset_kind *kind, uint64_t *pos) {
    return rn_offset_parse(s, strlen(s), kind, pos);
}

static void test_offset_format_is_fixed_width_zero_padded(void **state) {
    (void)state;
    char out[RN_OFFSET_LEN + 1];
    rn_offset_format(0, out);
    assert_string_equal(out, "0000000000000000_0000000000000000");
    rn_offset_format(42, out);
    assert_string_equal(out, "0000000000000000_0000000000000042");
    rn_offset_format(9999999999999999ull, out);
    assert_string_equal(out, "0000000000000000_9999999999999999");
    const uint64_t samples[] = {1, 9, 10, 12345, 4294967296ull, 1000000000000000ull};
    for (size_t i = 0; i < sizeof samples / sizeof samples[0]; i++) {
        rn_offset_format(samples[i], out);
        assert_int_equal(strlen(out), RN_OFFSET_LEN);
    }
}

static void test_offset_round_trips_through_format_and_parse(void **state) {
    (void)state;
    const uint64_t samples[] = {0,
                                1,
                                9,
                                10,
                                99,
                                100,
                                12345,
                                4294967295ull,
                                4294967296ull,
                                1000000000000000ull,
                                9999999999999998ull,
                                9999999999999999ull};
    for (size_t i = 0; i < sizeof samples / sizeof samples[0]; i++) {
        char out[RN_OFFSET_LEN + 1];
        rn_offset_format(samples[i], out);
        rn_offset_kind kind = RN_OFFSET_NOW;
        uint64_t pos = 77;
        assert_int_equal(parse_offset(out, &kind, &pos), 0);
        assert_int_equal(kind, RN_OFFSET_POSITION);
        assert_int_equal(pos, samples[i]);
    }
    test_rng_seed(11);
    for (int i = 0; i < 10000; i++) {
        uint64_t v = test_rng_below(10000000000000000ull);
        char out[RN_OFFSET_LEN + 1];
        rn_offset_format(v, out);
        rn_offset_kind kind;
        uint64_t pos = 0;
        assert_int_equal(parse_offset(out, &kind, &pos), 0);
        assert_int_equal(kind, RN_OFFSET_POSITION);
        assert_int_equal(pos, v);
    }
}

static void test_offset_parse_accepts_start_and_now_sentinels(void **state) {
    (void)state;
    rn_offset_kind kind = RN_OFFSET_POSITION;
    uint64_t pos = 5;
    assert_int_equal(parse_offset("-1", &kind, &pos), 0);
    assert_int_equal(kind, RN_OFFSET_START);
    assert_int_equal(pos, 0);
    pos = 5;
    assert_int_equal(parse_offset("now", &kind, &pos), 0);
    assert_int_equal(kind, RN_OFFSET_NOW);
    /* The slice length is what counts, not a terminating NUL. */
    assert_int_equal(rn_offset_parse("-1x", 2, &kind, &pos), 0);
    assert_int_equal(kind, RN_OFFSET_START);
}

static void test_offset_parse_rejects_malformed_tokens(void **state) {
    (void)state;
    const char *bad[] = {
        "",
        "-",
        "-2",
        "-01",
        "NOW",
        "Now",
        "now ",
        " now",
        "0",
        "0_0",
        "000000000000000_0000000000000000",   /* 32 chars, short high part */
        "0000000000000000_000000000000000",   /* 32 chars, short low part */
        "0000000000000000_00000000000000000", /* 34 chars */
        "00000000000000000000000000000000a",  /* 33 chars, no underscore */
        "000000000000000000000000000000000",  /* 33 digits, no underscore */
        "0000000000000000-0000000000000000",  /* wrong separator */
        "000000000000000_00000000000000000",  /* underscore one early */
        "00000000000000000_000000000000000",  /* underscore one late */
        "0000000000000001_0000000000000000",  /* non-zero high part */
        "1000000000000000_0000000000000000",  /* non-zero high part */
        "0000000000000000_000000000000000a",  /* non-digit */
        "0000000000000000_00000000000000x0",  /* non-digit */
        "000000000000000a_0000000000000000",  /* non-digit in high part */
        "0000000000000000_ 000000000000000",  /* space */
        " 0000000000000000_000000000000000",  /* leading space */
        "0000000000000000_000000000000000 ",  /* trailing space */
        "0000000000000000_+000000000000001",  /* sign */
        "0000000000000000_-000000000000001",  /* sign */
        "0000000000000000_00000000000000,1",  /* comma */
        "0,1",
        "0000000000000000_0000000000000000_",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        rn_offset_kind kind;
        uint64_t pos;
        if (parse_offset(bad[i], &kind, &pos) != -1)
            fail_msg("accepted malformed offset \"%s\"", bad[i]);
    }
    /* An embedded NUL inside an otherwise valid token. */
    char tok[RN_OFFSET_LEN + 1];
    rn_offset_format(123, tok);
    tok[20] = '\0';
    rn_offset_kind kind;
    uint64_t pos;
    assert_int_equal(rn_offset_parse(tok, RN_OFFSET_LEN, &kind, &pos), -1);
}

static void test_offset_parse_rejects_positions_above_maximum(void **state) {
    (void)state;
    /* The low part has 16 digits, so 9999999999999999 is the largest value
     * a well-formed token can hold; check the neighbourhood of the limit by
     * building tokens whose low part only just fits. */
    rn_offset_kind kind;
    uint64_t pos;
    assert_int_equal(parse_offset("0000000000000000_9999999999999999", &kind, &pos), 0);
    assert_int_equal(pos, 9999999999999999ull);
    /* Values above the maximum need 17 digits: the token is then too long. */
    assert_int_equal(parse_offset("0000000000000000_10000000000000000", &kind, &pos), -1);
    assert_int_equal(parse_offset("0000000000000001_0000000000000000", &kind, &pos), -1);
    assert_int_equal(parse_offset("9999999999999999_9999999999999999", &kind, &pos), -1);
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void test_offset_byte_order_matches_numeric_order(void **state) {
    (void)state;
    enum { N = 2000 };
    uint64_t *v = malloc(N * sizeof *v);
    assert_non_null(v);
    test_rng_seed(99);
    for (int i = 0; i < N; i++) {
        /* Mix magnitudes so that tokens differ in many digit positions. */
        uint64_t digits = 1 + test_rng_below(16);
        uint64_t lim = 1;
        for (uint64_t d = 0; d < digits; d++)
            lim *= 10;
        v[i] = test_rng_below(lim);
    }
    v[0] = 0;
    v[1] = 9999999999999999ull;
    v[2] = 9;
    v[3] = 10;
    qsort(v, N, sizeof *v, cmp_u64);
    for (int i = 0; i + 1 < N; i++) {
        char a[RN_OFFSET_LEN + 1], b[RN_OFFSET_LEN + 1];
        rn_offset_format(v[i], a);
        rn_offset_format(v[i + 1], b);
        int c = strcmp(a, b);
        if (v[i] == v[i + 1])
            assert_int_equal(c, 0);
        else
            assert_true(c < 0);
    }
    free(v);
}

/* ------------------------------------------------------------------------ */
/* Strict integers                                                           */

static int strict(const char *s, uint64_t max, uint64_t *out) {
    return rn_parse_strict_u64(s, strlen(s), max, out);
}

static void test_strict_u64_accepts_canonical_decimals(void **state) {
    (void)state;
    uint64_t v = 1;
    assert_int_equal(strict("0", UINT64_MAX, &v), 0);
    assert_int_equal(v, 0);
    assert_int_equal(strict("7", UINT64_MAX, &v), 0);
    assert_int_equal(v, 7);
    assert_int_equal(strict("10", UINT64_MAX, &v), 0);
    assert_int_equal(v, 10);
    assert_int_equal(strict("1234567890", UINT64_MAX, &v), 0);
    assert_int_equal(v, 1234567890ull);
    assert_int_equal(strict("18446744073709551615", UINT64_MAX, &v), 0);
    assert_true(v == UINT64_MAX);
    assert_int_equal(strict("18446744073709551614", UINT64_MAX, &v), 0);
    assert_true(v == UINT64_MAX - 1);
    /* Only the slice is read. */
    assert_int_equal(rn_parse_strict_u64("12x", 2, UINT64_MAX, &v), 0);
    assert_int_equal(v, 12);
}

static void test_strict_u64_rejects_noncanonical_forms(void **state) {
    (void)state;
    const char *bad[] = {"",    "00",  "01",  "007", "+1",   "-1", "-0",  " 1",  "1 ", "1.0",
                         "1e3", "0x1", "1,0", "1_0", "abc",  "٣",  "\t1", "1\n", "+0", "1a",
                         "a1",  "--1", "0 0", "1 2", "0001", "9-", "1+1", "0.",  ".",  "１"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        uint64_t v;
        if (strict(bad[i], UINT64_MAX, &v) != -1)
            fail_msg("accepted \"%s\"", bad[i]);
    }
}

static void test_strict_u64_rejects_overflow_and_values_above_max(void **state) {
    (void)state;
    uint64_t v;
    assert_int_equal(strict("18446744073709551616", UINT64_MAX, &v), -1);  /* 2^64 */
    assert_int_equal(strict("18446744073709551619", UINT64_MAX, &v), -1);  /* 2^64 + 3 */
    assert_int_equal(strict("18446744073709551620", UINT64_MAX, &v), -1);  /* 2^64 + 4 */
    assert_int_equal(strict("99999999999999999999", UINT64_MAX, &v), -1);  /* 20 digits */
    assert_int_equal(strict("28446744073709551615", UINT64_MAX, &v), -1);  /* wraps mod 2^64 */
    assert_int_equal(strict("100000000000000000000", UINT64_MAX, &v), -1); /* 21 digits */
    assert_int_equal(strict("9", 9, &v), 0);
    assert_int_equal(v, 9);
    assert_int_equal(strict("10", 9, &v), -1);
    assert_int_equal(strict("0", 0, &v), 0);
    assert_int_equal(strict("1", 0, &v), -1);
    assert_int_equal(strict("9999999999999999", 9999999999999999ull, &v), 0);
    assert_int_equal(strict("10000000000000000", 9999999999999999ull, &v), -1);
}

/* ------------------------------------------------------------------------ */
/* RFC 3339                                                                  */

static int rfc(const char *s, int64_t *ms) {
    return rn_parse_rfc3339(s, strlen(s), ms);
}

static void test_rfc3339_parses_known_instants(void **state) {
    (void)state;
    /* Expected values from `date -u -d <instant> +%s`, times 1000. */
    static const struct {
        const char *text;
        int64_t ms;
    } cases[] = {
        {"1970-01-01T00:00:00Z", 0},
        {"2025-01-01T00:00:00Z", 1735689600000},
        {"2025-01-01t00:00:00z", 1735689600000},
        {"2025-01-01T00:00:00+00:00", 1735689600000},
        {"2025-01-01T00:00:00-00:00", 1735689600000},
        {"2025-01-01T00:00:00-05:30", 1735709400000},
        {"2025-01-01T05:30:00+05:30", 1735689600000},
        {"2025-01-01T00:00:00+23:59", 1735689600000 - (23 * 60 + 59) * 60000ll},
        {"2000-02-29T12:34:56Z", 951827696000},
        {"2000-02-29T12:34:56.789Z", 951827696789},
        {"2000-02-29T12:34:56.7Z", 951827696700},
        {"2000-02-29T12:34:56.07Z", 951827696070},
        {"2000-02-29T12:34:56.000Z", 951827696000},
        {"2000-02-29T12:34:56.123456789Z", 951827696123}, /* sub-ms digits dropped */
        {"2000-02-29T18:04:56.5+05:30", 951827696500},
        {"2024-02-29T23:59:59Z", 1709251199000},
        {"2025-06-15T08:00:00Z", 1749974400000},
        {"1969-12-31T23:59:59Z", -1000},
        {"1969-12-31T23:59:59.999Z", -1},
        {"1900-03-01T00:00:00Z", -2203891200000},
        {"9999-12-31T23:59:59.999Z", 253402300799999},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int64_t ms = 12345;
        if (rfc(cases[i].text, &ms) != 0)
            fail_msg("rejected \"%s\"", cases[i].text);
        if (ms != cases[i].ms)
            fail_msg("\"%s\": got %lld, want %lld", cases[i].text, (long long)ms,
                     (long long)cases[i].ms);
    }
}

static void test_rfc3339_rejects_invalid_dates_and_syntax(void **state) {
    (void)state;
    const char *bad[] = {
        "",
        "garbage",
        "2025-01-01",
        "2025-01-01T00:00:00",       /* no zone */
        "2025-01-01T00:00Z",         /* no seconds */
        "2025-01-01 00:00:00Z",      /* no T */
        "2025-01-01X00:00:00Z",      /* no T */
        "2025-01-0100:00:00Z",       /* no T */
        "20250101T000000Z",          /* basic format */
        "2025-02-30T00:00:00Z",      /* Feb 30 */
        "2025-02-29T00:00:00Z",      /* not a leap year */
        "1900-02-29T00:00:00Z",      /* century, not a leap year */
        "2025-04-31T00:00:00Z",      /* April has 30 days */
        "2025-13-01T00:00:00Z",      /* month 13 */
        "2025-00-10T00:00:00Z",      /* month 0 */
        "2025-01-00T00:00:00Z",      /* day 0 */
        "2025-01-32T00:00:00Z",      /* day 32 */
        "2025-01-01T24:00:00Z",      /* hour 24 */
        "2025-01-01T00:60:00Z",      /* minute 60 */
        "2025-01-01T00:00:61Z",      /* second 61 */
        "2025-01-01T00:00:00.Z",     /* empty fraction */
        "2025-01-01T00:00:00,5Z",    /* comma fraction */
        "2025-01-01T00:00:00+0500",  /* offset without colon */
        "2025-01-01T00:00:00+05",    /* short offset */
        "2025-01-01T00:00:00+24:00", /* offset hour 24 */
        "2025-01-01T00:00:00+05:60", /* offset minute 60 */
        "2025-01-01T00:00:00+05:00x",
        "2025-01-01T00:00:00Zjunk",
        "2025-01-01T00:00:00ZZ",
        " 2025-01-01T00:00:00Z",
        "2025-01-01T00:00:00Z ",
        "2025-1-01T00:00:00Z",
        "225-01-01T00:00:00Z",
        "2025-01-01T0:00:00Z",
        "2025-01-01T00:00:0Z",
        "+2025-01-01T00:00:00Z",
        "2025-0a-01T00:00:00Z",
        "2025-01-01T00:00:00.12aZ",
        "2025-01-01T-1:00:00Z",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int64_t ms;
        if (rfc(bad[i], &ms) == 0)
            fail_msg("accepted \"%s\"", bad[i]);
    }
}

static void test_rfc3339_format_round_trips_through_parse(void **state) {
    (void)state;
    static const struct {
        int64_t ms;
        const char *text;
    } known[] = {
        {0, "1970-01-01T00:00:00.000Z"},
        {1735689600000, "2025-01-01T00:00:00.000Z"},
        {951827696789, "2000-02-29T12:34:56.789Z"},
        {-1, "1969-12-31T23:59:59.999Z"},
        {-1000, "1969-12-31T23:59:59.000Z"},
        {-1001, "1969-12-31T23:59:58.999Z"},
        {253402300799999, "9999-12-31T23:59:59.999Z"},
    };
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
        char out[48];
        rn_format_rfc3339(known[i].ms, out);
        assert_string_equal(out, known[i].text);
    }
    test_rng_seed(5);
    for (int i = 0; i < 20000; i++) {
        /* From year 1900 to 9999. */
        int64_t lo = -2208988800000ll, hi = 253402300799999ll;
        int64_t ms = lo + (int64_t)test_rng_below((uint64_t)(hi - lo + 1));
        char out[48];
        rn_format_rfc3339(ms, out);
        assert_int_equal(strlen(out), 24);
        int64_t back = 0;
        if (rfc(out, &back) != 0 || back != ms)
            fail_msg("%lld -> \"%s\" -> %lld", (long long)ms, out, (long long)back);
    }
}

static void test_http_date_formats_imf_fixdate(void **state) {
    (void)state;
    char out[40];
    rn_format_http_date(0, out);
    assert_string_equal(out, "Thu, 01 Jan 1970 00:00:00 GMT");
    rn_format_http_date(1735689600999, out);
    assert_string_equal(out, "Wed, 01 Jan 2025 00:00:00 GMT");
}

/* ------------------------------------------------------------------------ */
/* Base64 and percent-decoding                                               */

static void test_base64_matches_rfc4648_vectors(void **state) {
    (void)state;
    static const char *in[] = {"", "f", "fo", "foo", "foob", "fooba", "foobar"};
    static const char *want[] = {"", "Zg==", "Zm8=", "Zm9v", "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy"};
    for (size_t i = 0; i < sizeof in / sizeof in[0]; i++) {
        rn_buf b = {0};
        rn_base64_append(&b, (const uint8_t *)in[i], strlen(in[i]));
        assert_int_equal(b.len, strlen(want[i]));
        if (b.len)
            assert_memory_equal(b.data, want[i], b.len);
        rn_buf_free(&b);
    }
}

static void test_base64_appends_after_existing_bytes_and_uses_full_alphabet(void **state) {
    (void)state;
    rn_buf b = {0};
    rn_buf_append_str(&b, "prefix:");
    const uint8_t bin[] = {0xfb, 0xff, 0xbf, 0x00, 0x10, 0x83};
    rn_base64_append(&b, bin, sizeof bin);
    const char *want = "prefix:+/+/ABCD";
    assert_int_equal(b.len, strlen(want));
    assert_memory_equal(b.data, want, b.len);
    rn_buf_free(&b);

    /* Every 6-bit value appears once, in order. */
    uint8_t all[48];
    for (int i = 0; i < 16; i++) {
        uint32_t v = (uint32_t)(4 * i) << 18 | (uint32_t)(4 * i + 1) << 12 |
                     (uint32_t)(4 * i + 2) << 6 | (uint32_t)(4 * i + 3);
        all[3 * i] = (uint8_t)(v >> 16);
        all[3 * i + 1] = (uint8_t)(v >> 8);
        all[3 * i + 2] = (uint8_t)v;
    }
    rn_base64_append(&b, all, sizeof all);
    const char *alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    assert_int_equal(b.len, 64);
    assert_memory_equal(b.data, alphabet, 64);
    rn_buf_free(&b);
}

static void test_percent_decode_decodes_escapes_and_rejects_bad_ones(void **state) {
    (void)state;
    static const struct {
        const char *in;
        const char *out;
        long len;
    } ok[] = {
        {"", "", 0},
        {"abc", "abc", 3},
        {"a%20b", "a b", 3},
        {"%2F", "/", 1},
        {"%2f", "/", 1},
        {"%41%42%43", "ABC", 3},
        {"%e2%82%ac", "\xe2\x82\xac", 3},
        {"%00", "\0", 1},
        {"a+b", "a+b", 3},
        {"%25", "%", 1},
        {"%2541", "%41", 3},
        {"x%7A", "xz", 2},
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        char out[32];
        memset(out, 0x5a, sizeof out);
        long n = rn_percent_decode(ok[i].in, strlen(ok[i].in), out);
        if (n != ok[i].len)
            fail_msg("\"%s\": length %ld, want %ld", ok[i].in, n, ok[i].len);
        assert_memory_equal(out, ok[i].out, (size_t)n);
    }
    const char *bad[] = {"%", "%4", "a%", "a%4", "%zz", "%4g", "%g4", "%%", "ab%2", "% 41", "%-1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char out[32];
        if (rn_percent_decode(bad[i], strlen(bad[i]), out) != -1)
            fail_msg("accepted \"%s\"", bad[i]);
    }
    /* The slice end is respected: "%41" cut to "%4" is malformed. */
    char out[8];
    assert_int_equal(rn_percent_decode("%41", 2, out), -1);
}

/* ------------------------------------------------------------------------ */
/* Offsets and tokens in path segments (percent-decoded first)              */

/* Escapes the characters of s whose bit is set in mask (bit i: character i,
 * cycled), with upper or lower case hex. */
static void escape(const char *s, uint64_t mask, int lower, char *out) {
    for (size_t i = 0; s[i]; i++) {
        if (mask >> (i % 64) & 1)
            out += sprintf(out, lower ? "%%%02x" : "%%%02X", (unsigned char)s[i]);
        else
            *out++ = s[i];
    }
    *out = 0;
}

static void test_offset_segments_decode_any_escapes(void **state) {
    (void)state;
    test_rng_seed(42);
    for (int i = 0; i < 2000; i++) {
        uint64_t want = test_rng_below(10000000000000000ull), got = 0;
        char token[RN_OFFSET_LEN + 1], seg[3 * RN_OFFSET_LEN + 1];
        rn_offset_format(want, token);
        uint64_t mask = i == 0 ? ~0ull : i == 1 ? 0 : test_rng_next();
        escape(token, mask, (int)(i & 1), seg);
        if (rn_offset_parse_segment(seg, strlen(seg), &got) != 0 || got != want)
            fail_msg("\"%s\" did not parse as %llu", seg, (unsigned long long)want);
    }
}

static void test_offset_segments_reject_what_is_no_position(void **state) {
    (void)state;
    const char *bad[] = {
        "",
        "-1",
        "now",
        "%2D1",
        "%6E%6F%77",
        "0000000000000000_000000000000000%", /* lone % */
        "0000000000000000_00000000000000%3",
        "%zz00000000000000_0000000000000000",
        "0000000000000000%2F0000000000000000",
        "0000000000000000_00000000000000001",
        "0000000000000001_0000000000000000",
        "%300000000000000000_0000000000000000",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        uint64_t pos;
        if (rn_offset_parse_segment(bad[i], strlen(bad[i]), &pos) != -1)
            fail_msg("accepted \"%s\"", bad[i]);
    }
    /* Longer than any escaped token: refused without decoding. */
    char seg[3 * RN_OFFSET_LEN + 2];
    escape("0000000000000000_0000000000000000", ~0ull, 0, seg);
    strcat(seg, "0");
    uint64_t pos;
    assert_int_equal(rn_offset_parse_segment(seg, strlen(seg), &pos), -1);
}

static void test_token_segments_decode_and_check_the_range(void **state) {
    (void)state;
    static const struct {
        const char *seg;
        uint64_t want; /* 0: refused */
    } cases[] = {
        {"4503599627370496", 1ull << 52},
        {"%34%35%30%33%35%39%39%36%32%37%33%37%30%34%39%36", 1ull << 52},
        {"9007199254740991", (1ull << 53) - 1},
        {"90071992547409%391", (1ull << 53) - 1},
        {"4503599627370495", 0}, /* 2^52 - 1 */
        {"9007199254740992", 0}, /* 2^53 */
        {"04503599627370496", 0},
        {"%30%34%35%30%33%35%39%39%36%32%37%33%37%30%34%39%36", 0}, /* too long */
        {"", 0},
        {"%", 0},
        {"45035996273704%zz", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint64_t got = 0;
        int rc = rn_token_parse_segment(cases[i].seg, strlen(cases[i].seg), &got);
        if (cases[i].want ? rc != 0 || got != cases[i].want : rc != -1)
            fail_msg("\"%s\": rc %d, token %llu", cases[i].seg, rc, (unsigned long long)got);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_offset_format_is_fixed_width_zero_padded),
        cmocka_unit_test(test_offset_round_trips_through_format_and_parse),
        cmocka_unit_test(test_offset_parse_accepts_start_and_now_sentinels),
        cmocka_unit_test(test_offset_parse_rejects_malformed_tokens),
        cmocka_unit_test(test_offset_parse_rejects_positions_above_maximum),
        cmocka_unit_test(test_offset_byte_order_matches_numeric_order),
        cmocka_unit_test(test_offset_segments_decode_any_escapes),
        cmocka_unit_test(test_offset_segments_reject_what_is_no_position),
        cmocka_unit_test(test_token_segments_decode_and_check_the_range),
        cmocka_unit_test(test_strict_u64_accepts_canonical_decimals),
        cmocka_unit_test(test_strict_u64_rejects_noncanonical_forms),
        cmocka_unit_test(test_strict_u64_rejects_overflow_and_values_above_max),
        cmocka_unit_test(test_rfc3339_parses_known_instants),
        cmocka_unit_test(test_rfc3339_rejects_invalid_dates_and_syntax),
        cmocka_unit_test(test_rfc3339_format_round_trips_through_parse),
        cmocka_unit_test(test_http_date_formats_imf_fixdate),
        cmocka_unit_test(test_base64_matches_rfc4648_vectors),
        cmocka_unit_test(test_base64_appends_after_existing_bytes_and_uses_full_alphabet),
        cmocka_unit_test(test_percent_decode_decodes_escapes_and_rejects_bad_ones),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
