/*
 * test_params.c - unit tests for the request rules of the surfaces: the v1
 * stream-name rule (src/surface/v1.c), headers and query parameters under
 * the one rule for both (src/protocol/params.c) and lowercase hex
 * digests (src/util/text.c).
 *
 * How: tables of accepted and refused inputs with the answer each must get;
 * the header half of params.c runs on requests built here as the transport
 * hands them over (their parsed header fields). The read path's parameters
 * are test_read_query.c's.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "protocol/params.h"
#include "surface/v1.h"
#include "util/text.h"

static int name_ok(const char *s) {
    return rn_v1_name_valid(s, strlen(s));
}

static void test_v1_names_accepted(void **state) {
    (void)state;
    const char *ok[] = {"a",   "a/b", "a/b/c",   "caf\xc3\xa9", ".hidden", "a..b",
                        "...", "a b", "a/.b/c.", "__x",         "a%2Fb"};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
        assert_true(name_ok(ok[i]));
    char max[1024];
    memset(max, 'x', sizeof max);
    assert_true(rn_v1_name_valid(max, sizeof max));
}

static void test_v1_names_refused(void **state) {
    (void)state;
    const char *bad[] = {"",       "/",    "/a",       "a/",           "a//b", ".",
                         "..",     "a/.",  "a/..",     "./a",          "../a", "a/./b",
                         "a/../b", "\xff", "\xc0\xaf", "a\xed\xa0\x80"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_false(name_ok(bad[i]));
    assert_false(rn_v1_name_valid("a\0b", 3));
    char over[1025];
    memset(over, 'x', sizeof over);
    assert_false(rn_v1_name_valid(over, sizeof over));
}

/* Looks up `name` in q with `malformed` RN_E_INVALID_QUERY; returns the
 * call's result, the value in val and its length in *n, the fault in *f. */
static int lookup(const char *q, const char *name, rn_error malformed, char *val, long *n,
                  rn_param_fault *f) {
    return rn_param_query(q, strlen(q), name, malformed, val, 64, n, f);
}

static void test_query_parameters_found_once(void **state) {
    (void)state;
    char val[64];
    long n;
    rn_param_fault f;
    assert_int_equal(lookup("offset=-1&live=sse", "live", RN_E_INVALID_QUERY_LIVE, val, &n, &f), 0);
    assert_int_equal(n, 3);
    assert_memory_equal(val, "sse", 3);
    assert_int_equal(lookup("a=1&b=2", "offset", RN_E_INVALID_OFFSET, val, &n, &f), 0);
    assert_int_equal(n, -1); /* absent */
    /* Names and values are percent-decoded; names are compared whole. */
    assert_int_equal(lookup("o%66fset=%2D1&offsets=9", "offset", RN_E_INVALID_OFFSET, val, &n, &f),
                     0);
    assert_int_equal(n, 2);
    assert_memory_equal(val, "-1", 2);
}

static void test_query_parameters_repeated_or_empty_are_refused(void **state) {
    (void)state;
    char val[64];
    long n;
    rn_param_fault f;
    const char *repeats[] = {"live=sse&live=sse", "live=sse&live=long-poll", "live&live=sse",
                             "l%69ve=sse&live=sse"};
    for (size_t i = 0; i < sizeof repeats / sizeof repeats[0]; i++) {
        assert_int_equal(lookup(repeats[i], "live", RN_E_INVALID_QUERY_LIVE, val, &n, &f), -1);
        assert_int_equal(f.error, RN_E_QUERY_REPEATED);
        assert_string_equal(f.detail, "live");
    }
    const char *malformed[] = {"offset=", "offset", "offset=%zz", "x=1&offset=&y=2"};
    for (size_t i = 0; i < sizeof malformed / sizeof malformed[0]; i++) {
        assert_int_equal(lookup(malformed[i], "offset", RN_E_INVALID_OFFSET, val, &n, &f), -1);
        assert_int_equal(f.error, RN_E_INVALID_OFFSET);
        assert_null(f.detail);
    }
    /* A lenient parameter returns its malformed value as empty... */
    assert_int_equal(lookup("timeout_ms=", "timeout_ms", RN_PARAM_LENIENT, val, &n, &f), 0);
    assert_int_equal(n, 0);
    assert_int_equal(lookup("timeout_ms=%zz", "timeout_ms", RN_PARAM_LENIENT, val, &n, &f), 0);
    assert_int_equal(n, 0);
    /* ...but its repeat is refused all the same. */
    assert_int_equal(
        lookup("timeout_ms=1&timeout_ms=1", "timeout_ms", RN_PARAM_LENIENT, val, &n, &f), -1);
    assert_int_equal(f.error, RN_E_QUERY_REPEATED);
}

/* A request whose header fields are the "Name: value" strings of `lines`
 * (NULL-terminated, at most 8), split at the first ": ". */
typedef struct {
    rn_header fields[8];
    rn_request req;
} request;

static const rn_request *with_headers(request *r, const char *const *lines) {
    memset(r, 0, sizeof *r);
    size_t n = 0;
    for (; lines[n]; n++) {
        assert_true(n < 8);
        const char *sep = strstr(lines[n], ": ");
        assert_non_null(sep);
        r->fields[n] = (rn_header){lines[n], (size_t)(sep - lines[n]), sep + 2, strlen(sep + 2)};
    }
    r->req.headers = r->fields;
    r->req.header_count = n;
    return &r->req;
}

#define LINES(...) ((const char *const[]){__VA_ARGS__, NULL})

static void test_headers_found_once_by_any_case(void **state) {
    (void)state;
    request r;
    const rn_header *h;
    rn_param_fault f;
    const rn_request *req = with_headers(&r, LINES("Host: a", "stream-SEQ: 7"));
    assert_int_equal(rn_param_header(req, "Stream-Seq", RN_E_INVALID_STREAM_SEQ, &h, &f), 0);
    assert_ptr_equal(h, &r.fields[1]);
    assert_int_equal(rn_param_header(req, "Stream-Closed", RN_PARAM_LENIENT, &h, &f), 0);
    assert_null(h); /* absent */
    /* a prefix or an extension of the name is another header */
    req = with_headers(&r, LINES("Stream-Se: 1", "Stream-Seqs: 2"));
    assert_int_equal(rn_param_header(req, "Stream-Seq", RN_E_INVALID_STREAM_SEQ, &h, &f), 0);
    assert_null(h);
}

static void test_headers_repeated_or_empty_are_refused(void **state) {
    (void)state;
    request r;
    const rn_header *h;
    rn_param_fault f;
    const char *const *repeats[] = {LINES("Stream-Seq: 1", "Stream-Seq: 1"),
                                    LINES("Stream-Seq: 1", "Host: a", "stream-seq: 2"),
                                    LINES("Stream-Seq: ", "Stream-Seq: 1")};
    for (size_t i = 0; i < sizeof repeats / sizeof repeats[0]; i++) {
        assert_int_equal(rn_param_header(with_headers(&r, repeats[i]), "Stream-Seq",
                                         RN_E_INVALID_STREAM_SEQ, &h, &f),
                         -1);
        assert_int_equal(f.error, RN_E_HEADER_REPEATED);
        assert_string_equal(f.detail, "Stream-Seq");
    }
    /* an empty value gets the header's own error, which names it */
    const rn_request *req = with_headers(&r, LINES("Content-Type: "));
    assert_int_equal(rn_param_header(req, "Content-Type", RN_E_INVALID_CONTENT_TYPE, &h, &f), -1);
    assert_int_equal(f.error, RN_E_INVALID_CONTENT_TYPE);
    assert_null(f.detail);
    /* ...unless the protocol ignores a malformed one: then it is returned */
    req = with_headers(&r, LINES("Stream-Closed: "));
    assert_int_equal(rn_param_header(req, "Stream-Closed", RN_PARAM_LENIENT, &h, &f), 0);
    assert_non_null(h);
    assert_int_equal(h->value_len, 0);
    /* whose repeat is refused all the same */
    req = with_headers(&r, LINES("Stream-Closed: true", "Stream-Closed: true"));
    assert_int_equal(rn_param_header(req, "Stream-Closed", RN_PARAM_LENIENT, &h, &f), -1);
    assert_int_equal(f.error, RN_E_HEADER_REPEATED);
}

/* rn_param_header_u64 on one "Stream-TTL: value" field, max 1000. */
static int ttl(const char *value, uint64_t *v, rn_param_fault *f) {
    char line[64];
    snprintf(line, sizeof line, "Stream-TTL: %s", value);
    request r;
    int present = -1;
    int rc = rn_param_header_u64(with_headers(&r, LINES(line)), "Stream-TTL", 1000,
                                 RN_E_INVALID_HEADER_TTL, &present, v, f);
    if (rc == 0)
        assert_int_equal(present, 1);
    return rc;
}

static void test_header_integers_are_canonical_decimals_up_to_max(void **state) {
    (void)state;
    uint64_t v;
    rn_param_fault f;
    const struct {
        const char *text;
        uint64_t value;
    } ok[] = {{"0", 0}, {"7", 7}, {"1000", 1000}, {"999", 999}};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        assert_int_equal(ttl(ok[i].text, &v, &f), 0);
        assert_int_equal(v, ok[i].value);
    }
    const char *bad[] = {"",   "01",  "00",  "+1",   "-1",  "1 ", " 1",
                         "1a", "0x1", "1e3", "1001", "1.0", "１", "10000000000000000000000"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(ttl(bad[i], &v, &f), -1);
        assert_int_equal(f.error, RN_E_INVALID_HEADER_TTL);
        assert_null(f.detail);
    }
    request r;
    int present = -1;
    assert_int_equal(rn_param_header_u64(with_headers(&r, LINES("Host: a")), "Stream-TTL", 1000,
                                         RN_E_INVALID_HEADER_TTL, &present, &v, &f),
                     0);
    assert_int_equal(present, 0);
    assert_int_equal(rn_param_header_u64(with_headers(&r, LINES("Stream-TTL: 1", "Stream-TTL: x")),
                                         "Stream-TTL", 1000, RN_E_INVALID_HEADER_TTL, &present, &v,
                                         &f),
                     -1);
    assert_int_equal(f.error, RN_E_HEADER_REPEATED);
    assert_string_equal(f.detail, "Stream-TTL");
}

static void test_lower_hex_parses_only_lowercase_digits(void **state) {
    (void)state;
    uint8_t out[4];
    assert_int_equal(rn_parse_lower_hex("00ff7a10", 8, out), 0);
    assert_memory_equal(out, "\x00\xff\x7a\x10", 4);
    const char *bad[] = {"00FF7a10", "00ff7g10", "00ff 710", "-0ff7a10"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_equal(rn_parse_lower_hex(bad[i], 8, out), -1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_v1_names_accepted),
        cmocka_unit_test(test_v1_names_refused),
        cmocka_unit_test(test_query_parameters_found_once),
        cmocka_unit_test(test_query_parameters_repeated_or_empty_are_refused),
        cmocka_unit_test(test_headers_found_once_by_any_case),
        cmocka_unit_test(test_headers_repeated_or_empty_are_refused),
        cmocka_unit_test(test_header_integers_are_canonical_decimals_up_to_max),
        cmocka_unit_test(test_lower_hex_parses_only_lowercase_digits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
