/*
 * test_request_head.c - unit tests for the transport's checks of a request
 * head (src/transport/request_head.h): what RFC 9112 and RFC 9110 ask a
 * server to refuse and llhttp's strict mode lets through. The version
 * (HTTP/1.0 and HTTP/1.1 only), an empty field name, line folding, Host
 * (exactly one in HTTP/1.1, none needed in HTTP/1.0, only the characters
 * of uri-host [":" port]) and Transfer-Encoding (chunked once and last,
 * else 400; another coding 501; never in HTTP/1.0), and the obs-fold scan
 * fed across reads.
 *
 * How: requests built as the transport hands them over (the parsed header
 * fields, the version llhttp read, the fold scan's verdict), tables of
 * accepted and refused heads with the status each must get.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "transport/request_head.h"

#define MAX_FIELDS 8

/* A request head: up to MAX_FIELDS "name: value" fields split at the first
 * ':' (no ':' at all: the whole string is the value of an empty name). */
typedef struct {
    rn_header fields[MAX_FIELDS];
    rn_request req;
} head;

static const rn_request *make(head *h, const char *const *lines) {
    memset(h, 0, sizeof *h);
    size_t n = 0;
    for (; lines[n]; n++) {
        assert_true(n < MAX_FIELDS);
        const char *colon = strchr(lines[n], ':');
        rn_header *f = &h->fields[n];
        f->name = lines[n];
        f->name_len = colon ? (size_t)(colon - lines[n]) : 0;
        f->value = colon ? colon + 1 : lines[n];
        f->value_len = strlen(f->value);
    }
    h->req.headers = h->fields;
    h->req.header_count = n;
    return &h->req;
}

/* The status rn_request_head_check gives an unfolded HTTP/1.minor head. */
static int check(unsigned minor, const char *const *lines) {
    head h;
    return rn_request_head_check(make(&h, lines), 1, minor, 0);
}

#define FIELDS(...) ((const char *const[]){__VA_ARGS__, NULL})
#define NO_FIELDS ((const char *const[]){NULL})

static void test_versions_other_than_1_0_and_1_1_are_refused(void **state) {
    (void)state;
    head h;
    const rn_request *r = make(&h, FIELDS("Host:a"));
    assert_int_equal(rn_request_head_check(r, 1, 1, 0), 0);
    assert_int_equal(rn_request_head_check(r, 1, 0, 0), 0);
    const unsigned bad[][2] = {{0, 9}, {1, 2}, {2, 0}, {0, 0}, {3, 1}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_equal(rn_request_head_check(r, bad[i][0], bad[i][1], 0), 400);
}

static void test_folded_lines_and_empty_names_are_refused(void **state) {
    (void)state;
    head h;
    assert_int_equal(rn_request_head_check(make(&h, FIELDS("Host:a")), 1, 1, 1), 400);
    assert_int_equal(rn_request_head_check(make(&h, FIELDS("Host:a")), 1, 0, 1), 400);
    assert_int_equal(check(1, FIELDS("Host:a", "x-empty-name")), 400);
    assert_int_equal(check(1, FIELDS(":v", "Host:a")), 400);
    assert_int_equal(check(0, FIELDS(":v")), 400);
}

static void test_host_is_needed_once_in_http_1_1_only(void **state) {
    (void)state;
    assert_int_equal(check(1, NO_FIELDS), 400);
    assert_int_equal(check(1, FIELDS("Accept:*/*")), 400);
    assert_int_equal(check(1, FIELDS("Host:a", "Host:a")), 400); /* even the same value */
    assert_int_equal(check(1, FIELDS("Host:a", "hOST:b")), 400);
    assert_int_equal(check(1, FIELDS("HOST:a")), 0); /* names are case-insensitive */
    assert_int_equal(check(0, NO_FIELDS), 0);
    assert_int_equal(check(0, FIELDS("Host:a")), 0);
    assert_int_equal(check(0, FIELDS("Host:a", "Host:a")), 400);
    /* RFC 9112 §3.2: an empty value when the target has no authority */
    assert_int_equal(check(1, FIELDS("Host:")), 0);
}

static void test_host_values_are_uri_host_and_port(void **state) {
    (void)state;
    const char *ok[] = {"Host:example.com",        "Host:example.com:8080",
                        "Host:127.0.0.1:4437",     "Host:[::1]:4437",
                        "Host:[fe80::1%25eth0]",   "Host:xn--caf-dma.example",
                        "Host:a-b_c~d!$&'()*+,;=", "Host:UPPER.Example"};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
        assert_int_equal(check(1, FIELDS(ok[i])), 0);
    const char *bad[] = {"Host:a b",         "Host:a/b", "Host:user@a", "Host:a\"b", "Host:<a>",
                         "Host:a\\b",        "Host:a?b", "Host:a#b",    "Host:a{b}", "Host:a\tb",
                         "Host:caf\xc3\xa9", "Host:a|b", "Host:a^b",    "Host:`a`"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_equal(check(1, FIELDS(bad[i])), 400);
    /* a NUL inside the value (llhttp hands values with their length) */
    head h;
    const rn_request *r = make(&h, FIELDS("Host:ab"));
    h.fields[0].value = "a\0b";
    h.fields[0].value_len = 3;
    assert_int_equal(rn_request_head_check(r, 1, 1, 0), 400);
}

static void test_chunked_once_and_last_is_the_only_framing_coding(void **state) {
    (void)state;
    const char *ok[] = {"Transfer-Encoding:chunked",   "Transfer-Encoding:Chunked",
                        "transfer-encoding:CHUNKED",   "Transfer-Encoding: \tchunked\t ",
                        "Transfer-Encoding:,chunked,", "Transfer-Encoding:chunked, ,"};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
        assert_int_equal(check(1, FIELDS("Host:a", ok[i])), 0);
    /* RFC 9112 §6.3: without chunked last the length is unknown: 400 */
    const char *bad[] = {"Transfer-Encoding:gzip",
                         "Transfer-Encoding:chunked, gzip",
                         "Transfer-Encoding:chunked,chunked",
                         "Transfer-Encoding:chunked, identity",
                         "Transfer-Encoding:",
                         "Transfer-Encoding: , ",
                         "Transfer-Encoding:chunkedx",
                         "Transfer-Encoding:chunked;q=1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_equal(check(1, FIELDS("Host:a", bad[i])), 400);
    /* the codings of every line count, in order */
    assert_int_equal(
        check(1, FIELDS("Host:a", "Transfer-Encoding:chunked", "Transfer-Encoding:chunked")), 400);
    assert_int_equal(
        check(1, FIELDS("Transfer-Encoding:chunked", "Host:a", "Transfer-Encoding:gzip")), 400);
}

static void test_a_coding_the_server_lacks_answers_501(void **state) {
    (void)state;
    /* RFC 9112 §6.1: a coding it does not understand, with chunked last */
    assert_int_equal(check(1, FIELDS("Host:a", "Transfer-Encoding:gzip, chunked")), 501);
    assert_int_equal(check(1, FIELDS("Host:a", "Transfer-Encoding:x-custom ,chunked")), 501);
    assert_int_equal(
        check(1, FIELDS("Host:a", "Transfer-Encoding:gzip", "Transfer-Encoding:chunked")), 501);
    /* framing errors win over the missing coding */
    assert_int_equal(check(1, FIELDS("Host:a", "Transfer-Encoding:gzip, chunked, chunked")), 400);
}

static void test_transfer_encoding_in_http_1_0_is_refused(void **state) {
    (void)state;
    /* RFC 9112 §6.1: an HTTP/1.0 message with it is faulty framing */
    assert_int_equal(check(0, FIELDS("Transfer-Encoding:chunked")), 400);
    assert_int_equal(check(0, FIELDS("Host:a", "Transfer-Encoding:chunked")), 400);
    assert_int_equal(check(0, FIELDS("Host:a", "Content-Length:3")), 0);
}

static int folds(const char *const *pieces) {
    rn_fold_scan scan = {0};
    for (size_t i = 0; pieces[i]; i++)
        rn_fold_scan_feed(&scan, pieces[i], pieces[i] + strlen(pieces[i]));
    return scan.folded;
}

static void test_fold_scan_finds_lines_starting_with_whitespace(void **state) {
    (void)state;
    assert_true(folds(FIELDS("\r\n", ": ", "\r\n ", "\r\n")));
    assert_true(folds(FIELDS("\r\n\t")));
    assert_true(folds(FIELDS("\n ")));
    /* across reads: the line feed in one, the space in the next */
    assert_true(folds(FIELDS("\r\n", "", " ")));
    assert_true(folds(FIELDS("x\r", "\n", "\tv")));
    /* the first byte of a span, where a fold shows when llhttp keeps it */
    assert_true(folds(FIELDS(": ", "\r\n", " continued")));
    assert_false(folds(FIELDS(" /target ", "\r\n", ": ", "\r\n", ": ", "\r\n\r\n")));
    assert_false(folds(FIELDS("\r\nX", " \r", "\r \n\n")));
    assert_false(folds(NO_FIELDS));
    /* once folded, it stays folded */
    assert_true(folds(FIELDS("\r\n ", "\r\nHost")));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_versions_other_than_1_0_and_1_1_are_refused),
        cmocka_unit_test(test_folded_lines_and_empty_names_are_refused),
        cmocka_unit_test(test_host_is_needed_once_in_http_1_1_only),
        cmocka_unit_test(test_host_values_are_uri_host_and_port),
        cmocka_unit_test(test_chunked_once_and_last_is_the_only_framing_coding),
        cmocka_unit_test(test_a_coding_the_server_lacks_answers_501),
        cmocka_unit_test(test_transfer_encoding_in_http_1_0_is_refused),
        cmocka_unit_test(test_fold_scan_finds_lines_starting_with_whitespace),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
