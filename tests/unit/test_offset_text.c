/*
 * test_offset_text.c - unit tests for the small text and data helpers:
 * offset tokens and the path segments that carry offsets and incarnation
 * tokens (src/protocol/offset.c), strict integers, RFC 3339 dates,
 * base64 and percent-decoding (src/util/text.c), CRC-32C
 * (src/util/crc32c.c) and the hash map (src/util/map.c).
 *
 * How: table-driven checks against known answers (RFC 4648 base64 vectors,
 * the CRC-32C check value, epoch values computed independently with
 * `date -u -d ... +%s`), round trips (format then parse), a bitwise CRC-32C
 * reference written here compared over seeded random data and random splits,
 * and a seeded random sequence of map operations checked step by step against
 * a plain array model.
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
#include "util/crc32c.h"
#include "util/map.h"
#include "util/text.h"

/* A small deterministic PRNG (xorshift64*), so failures reproduce. */
static uint64_t rng_state;

static void rng_seed(uint64_t s) {
    rng_state = s ? s : 1;
}

static uint64_t rng_next(void) {
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545F4914F6CDD1Dull;
}

static uint64_t rng_below(uint64_t n) {
    return rng_next() % n;
}

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
    rng_seed(11);
    for (int i = 0; i < 10000; i++) {
        uint64_t v = rng_below(10000000000000000ull);
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
    rng_seed(99);
    for (int i = 0; i < N; i++) {
        /* Mix magnitudes so that tokens differ in many digit positions. */
        uint64_t digits = 1 + rng_below(16);
        uint64_t lim = 1;
        for (uint64_t d = 0; d < digits; d++)
            lim *= 10;
        v[i] = rng_below(lim);
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
    rng_seed(5);
    for (int i = 0; i < 20000; i++) {
        /* From year 1900 to 9999. */
        int64_t lo = -2208988800000ll, hi = 253402300799999ll;
        int64_t ms = lo + (int64_t)rng_below((uint64_t)(hi - lo + 1));
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
    rng_seed(42);
    for (int i = 0; i < 2000; i++) {
        uint64_t want = rng_below(10000000000000000ull), got = 0;
        char token[RN_OFFSET_LEN + 1], seg[3 * RN_OFFSET_LEN + 1];
        rn_offset_format(want, token);
        uint64_t mask = i == 0 ? ~0ull : i == 1 ? 0 : rng_next();
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

/* ------------------------------------------------------------------------ */
/* CRC-32C                                                                   */

/* Bitwise reference: reflected Castagnoli polynomial, one bit at a time. */
static uint32_t crc32c_ref(uint32_t crc, const uint8_t *p, size_t len) {
    crc = ~crc;
    for (size_t i = 0; i < len; i++) {
        crc ^= p[i];
        for (int k = 0; k < 8; k++)
            crc = (crc >> 1) ^ (0x82f63b78u & (0u - (crc & 1)));
    }
    return ~crc;
}

static void test_crc32c_check_value(void **state) {
    (void)state;
    assert_int_equal(rn_crc32c(0, "123456789", 9), 0xE3069283u);
    assert_int_equal(rn_crc32c(0, "", 0), 0);
    /* RFC 3720 (iSCSI) B.4 vectors. */
    uint8_t zeros[32] = {0}, ones[32], inc[32];
    memset(ones, 0xff, sizeof ones);
    for (int i = 0; i < 32; i++)
        inc[i] = (uint8_t)i;
    assert_int_equal(rn_crc32c(0, zeros, 32), 0x8A9136AAu);
    assert_int_equal(rn_crc32c(0, ones, 32), 0x62A8AB43u);
    assert_int_equal(rn_crc32c(0, inc, 32), 0x46DD794Eu);
}

static void test_crc32c_matches_bitwise_reference_on_random_data(void **state) {
    (void)state;
    enum { MAX = 4096 };
    uint8_t *buf = malloc(MAX + 16);
    assert_non_null(buf);
    rng_seed(2024);
    for (size_t i = 0; i < MAX + 16; i++)
        buf[i] = (uint8_t)rng_next();
    for (int round = 0; round < 3000; round++) {
        size_t start = rng_below(16); /* unaligned starts */
        size_t len = round < 64 ? (size_t)round : rng_below(MAX);
        uint32_t want = crc32c_ref(0, buf + start, len);
        assert_int_equal(rn_crc32c(0, buf + start, len), want);
        /* the table path too, which a CPU with SSE4.2 never takes */
        assert_int_equal(rn_crc32c_portable(0, buf + start, len), want);
    }
    free(buf);
}

static void test_crc32c_incremental_equals_one_shot_over_random_splits(void **state) {
    (void)state;
    enum { MAX = 3000 };
    uint8_t *buf = malloc(MAX);
    assert_non_null(buf);
    rng_seed(77);
    for (size_t i = 0; i < MAX; i++)
        buf[i] = (uint8_t)rng_next();
    for (int round = 0; round < 2000; round++) {
        size_t len = rng_below(MAX + 1);
        uint32_t whole = rn_crc32c(0, buf, len);
        uint32_t inc = 0;
        size_t pos = 0;
        while (pos < len) {
            /* Pieces of 0..40 bytes, sometimes empty, often unaligned. */
            size_t n = rng_below(41);
            if (n > len - pos)
                n = len - pos;
            inc = rn_crc32c(inc, buf + pos, n);
            pos += n;
        }
        assert_int_equal(inc, whole);
    }
    free(buf);
}

/* ------------------------------------------------------------------------ */
/* Hash map                                                                  */

enum { KEYS = 1500 };

typedef struct {
    char key[KEYS][24];
    size_t key_len[KEYS];
    void *model[KEYS]; /* value stored under key i in the model, or NULL */
} map_world;

static map_world *world_new(void) {
    map_world *w = calloc(1, sizeof *w);
    assert_non_null(w);
    for (int i = 0; i < KEYS; i++) {
        /* Varied lengths, shared prefixes, an empty key and binary keys. */
        if (i == 0) {
            w->key_len[i] = 0;
        } else if (i % 7 == 0) {
            for (int k = 0; k < 9; k++)
                w->key[i][k] = (char)((i >> k) & 1 ? 0 : 0xff);
            w->key_len[i] = 9 + (size_t)(i % 5);
            memcpy(w->key[i] + 9, &i, sizeof i);
        } else {
            w->key_len[i] = (size_t)snprintf(w->key[i], sizeof w->key[i], "stream/%d", i);
        }
    }
    return w;
}

static void *value_for(int key, int version) {
    /* Distinct non-NULL pointers that encode (key, version). */
    return (void *)(uintptr_t)(((uintptr_t)key << 20) | (uintptr_t)(version & 0xfffff) | 1u << 31);
}

static void check_map_against_model(const rn_map *m, map_world *w) {
    size_t present = 0;
    for (int i = 0; i < KEYS; i++) {
        void *got = rn_map_get(m, w->key[i], w->key_len[i]);
        if (got != w->model[i])
            fail_msg("key %d: got %p, want %p", i, got, w->model[i]);
        present += w->model[i] != NULL;
    }
    assert_int_equal(m->count, present);
    /* Iteration visits each present value exactly once. */
    char *seen = calloc(KEYS, 1);
    assert_non_null(seen);
    size_t cursor = 0, visited = 0;
    void *v;
    while (rn_map_next(m, &cursor, &v)) {
        int key = (int)(((uintptr_t)v & 0x7fffffff) >> 20);
        assert_true(key >= 0 && key < KEYS);
        assert_ptr_equal(v, w->model[key]);
        assert_int_equal(seen[key], 0);
        seen[key] = 1;
        visited++;
    }
    assert_int_equal(visited, present);
    free(seen);
}

static void test_map_put_get_remove_match_array_model(void **state) {
    (void)state;
    map_world *w = world_new();
    rn_map m = {0};
    assert_null(rn_map_get(&m, "x", 1));
    assert_null(rn_map_remove(&m, "x", 1));
    rng_seed(31337);
    int version = 0;
    for (int step = 0; step < 60000; step++) {
        int key = (int)rng_below(KEYS);
        uint64_t op = rng_below(10);
        if (op < 5) {
            void *nv = value_for(key, ++version);
            void *old = rn_map_put(&m, w->key[key], w->key_len[key], nv);
            assert_ptr_equal(old, w->model[key]);
            w->model[key] = nv;
        } else if (op < 9) {
            void *old = rn_map_remove(&m, w->key[key], w->key_len[key]);
            assert_ptr_equal(old, w->model[key]);
            w->model[key] = NULL;
        } else {
            assert_ptr_equal(rn_map_get(&m, w->key[key], w->key_len[key]), w->model[key]);
        }
        if (step % 5000 == 0)
            check_map_against_model(&m, w);
    }
    check_map_against_model(&m, w);
    rn_map_free(&m);
    assert_int_equal(m.count, 0);
    assert_null(rn_map_get(&m, w->key[1], w->key_len[1]));
    free(w);
}

static void test_map_survives_removal_heavy_patterns(void **state) {
    (void)state;
    map_world *w = world_new();
    rn_map m = {0};
    int version = 0;
    rng_seed(4242);
    for (int round = 0; round < 12; round++) {
        /* Fill everything, then remove most keys in a pattern, checking all
         * survivors after each pattern: backward-shift deletion must keep
         * every probe run reachable. */
        for (int i = 0; i < KEYS; i++) {
            void *nv = value_for(i, ++version);
            assert_ptr_equal(rn_map_put(&m, w->key[i], w->key_len[i], nv), w->model[i]);
            w->model[i] = nv;
        }
        check_map_against_model(&m, w);
        for (int i = 0; i < KEYS; i++) {
            int remove;
            switch (round % 4) {
            case 0:
                remove = i % 10 != 0; /* keep every tenth */
                break;
            case 1:
                remove = i >= KEYS / 20; /* keep a prefix */
                break;
            case 2:
                remove = rng_below(100) < 95; /* random */
                break;
            default:
                remove = 1; /* everything */
                break;
            }
            if (remove) {
                assert_ptr_equal(rn_map_remove(&m, w->key[i], w->key_len[i]), w->model[i]);
                w->model[i] = NULL;
                /* A second removal finds nothing. */
                assert_null(rn_map_remove(&m, w->key[i], w->key_len[i]));
            }
        }
        check_map_against_model(&m, w);
        /* Reverse-order removal of the remaining keys, checking as we go. */
        if (round % 3 == 2) {
            for (int i = KEYS - 1; i >= 0; i--) {
                if (w->model[i]) {
                    assert_ptr_equal(rn_map_remove(&m, w->key[i], w->key_len[i]), w->model[i]);
                    w->model[i] = NULL;
                }
                if (i % 97 == 0)
                    check_map_against_model(&m, w);
            }
            assert_int_equal(m.count, 0);
        }
    }
    /* Interleaved churn on a small live set inside a large table. */
    for (int step = 0; step < 30000; step++) {
        int key = (int)rng_below(64);
        if (w->model[key]) {
            assert_ptr_equal(rn_map_remove(&m, w->key[key], w->key_len[key]), w->model[key]);
            w->model[key] = NULL;
        } else {
            void *nv = value_for(key, ++version);
            assert_null(rn_map_put(&m, w->key[key], w->key_len[key], nv));
            w->model[key] = nv;
        }
    }
    check_map_against_model(&m, w);
    rn_map_free(&m);
    free(w);
}

static void test_map_keys_compare_by_bytes_not_pointer(void **state) {
    (void)state;
    rn_map m = {0};
    char a[] = "same-key", b[] = "same-key";
    int v1, v2;
    assert_null(rn_map_put(&m, a, 8, &v1));
    assert_ptr_equal(rn_map_get(&m, b, 8), &v1);
    assert_ptr_equal(rn_map_put(&m, b, 8, &v2), &v1);
    assert_int_equal(m.count, 1);
    /* A prefix is a different key. */
    assert_null(rn_map_get(&m, a, 7));
    assert_ptr_equal(rn_map_remove(&m, a, 8), &v2);
    assert_int_equal(m.count, 0);
    rn_map_free(&m);
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
        cmocka_unit_test(test_crc32c_check_value),
        cmocka_unit_test(test_crc32c_matches_bitwise_reference_on_random_data),
        cmocka_unit_test(test_crc32c_incremental_equals_one_shot_over_random_splits),
        cmocka_unit_test(test_map_put_get_remove_match_array_model),
        cmocka_unit_test(test_map_survives_removal_heavy_patterns),
        cmocka_unit_test(test_map_keys_compare_by_bytes_not_pointer),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
