/*
 * test_s3_sigv4.c - unit tests for src/tiers/s3/sigv4.{h,c}: AWS Signature
 * Version 4 as S3 uses it.
 *
 * How: the worked examples AWS publishes for S3's Authorization header
 * ("Signature Calculations for the Authorization Header: Transferring
 * Payload in a Single Chunk": GET Object with a Range, PUT Object, GET
 * Bucket Lifecycle, GET Bucket (List Objects); access key
 * AKIAIOSFODNN7EXAMPLE, 20130524, us-east-1) with their published
 * canonical request, string to sign and signatures, and the example
 * signing keys of the IAM SigV4 documentation; then the encoding,
 * sorting and trimming rules one by one. The byte-for-byte comparison with
 * botocore over generated requests is tests/s3/sigv4_crosscheck.py.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "tiers/s3/sigv4.h"
#include "util/text.h"

#define EMPTY_SHA256 "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
#define HOST "examplebucket.s3.amazonaws.com"
#define DATE "20130524T000000Z"

static const rn_sigv4_identity aws_example = {.access_key = "AKIAIOSFODNN7EXAMPLE",
                                              .secret_key =
                                                  "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
                                              .region = "us-east-1",
                                              .service = "s3"};

static void assert_buf(const rn_buf *b, const char *want) {
    assert_int_equal(b->len, strlen(want));
    assert_memory_equal(b->data, want, b->len);
}

static void assert_authorization(const rn_sigv4_request *r, const char *signed_headers,
                                 const char *signature) {
    rn_buf got = {0}, want = {0};
    rn_sigv4_authorization(r, &aws_example, &got);
    rn_buf_appendf(&want,
                   "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/"
                   "aws4_request, SignedHeaders=%s, Signature=%s",
                   signed_headers, signature);
    rn_buf_append_byte(&want, 0);
    rn_buf_append_byte(&got, 0);
    assert_string_equal((char *)got.data, (char *)want.data);
    rn_buf_free(&got);
    rn_buf_free(&want);
}

/* AWS example "GET Object": the first 10 bytes of test.txt. */
static void test_aws_get_object_range(void **state) {
    (void)state;
    rn_sigv4_param headers[] = {{"Host", HOST},
                                {"Range", "bytes=0-9"},
                                {"x-amz-content-sha256", EMPTY_SHA256},
                                {"x-amz-date", DATE}};
    rn_sigv4_request r = {.method = "GET",
                          .path = "/test.txt",
                          .headers = headers,
                          .nheaders = 4,
                          .payload_hash = EMPTY_SHA256,
                          .amz_date = DATE};
    rn_buf canonical = {0}, sts = {0};
    rn_sigv4_canonical_request(&r, &canonical);
    assert_buf(&canonical, "GET\n/test.txt\n\nhost:" HOST "\nrange:bytes=0-9\n"
                           "x-amz-content-sha256:" EMPTY_SHA256 "\nx-amz-date:" DATE "\n\n"
                           "host;range;x-amz-content-sha256;x-amz-date\n" EMPTY_SHA256);
    rn_sigv4_string_to_sign(&r, &aws_example, &canonical, &sts);
    assert_buf(&sts, "AWS4-HMAC-SHA256\n" DATE "\n20130524/us-east-1/s3/aws4_request\n"
                     "7344ae5b7ee6c3e7e6b0fe0640412a37625d1fbfff95c48bbb2dc43964946972");
    rn_buf_free(&canonical);
    rn_buf_free(&sts);
    assert_authorization(&r, "host;range;x-amz-content-sha256;x-amz-date",
                         "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
}

/* AWS example "PUT Object": test$file.text, a body, a Date header and a
 * storage class. */
static void test_aws_put_object(void **state) {
    (void)state;
    const char *body = "Welcome to Amazon S3.";
    char hash[65];
    rn_sha256_hex(body, strlen(body), hash);
    assert_string_equal(hash, "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072");
    rn_sigv4_param headers[] = {{"Host", HOST},
                                {"Date", "Fri, 24 May 2013 00:00:00 GMT"},
                                {"x-amz-date", DATE},
                                {"x-amz-storage-class", "REDUCED_REDUNDANCY"},
                                {"x-amz-content-sha256", hash}};
    rn_sigv4_request r = {.method = "PUT",
                          .path = "/test$file.text",
                          .headers = headers,
                          .nheaders = 5,
                          .payload_hash = hash,
                          .amz_date = DATE};
    rn_buf canonical = {0};
    rn_sigv4_canonical_request(&r, &canonical);
    assert_true(canonical.len > 20 &&
                memcmp(canonical.data, "PUT\n/test%24file.text\n\n", 23) == 0);
    rn_buf_free(&canonical);
    assert_authorization(&r, "date;host;x-amz-content-sha256;x-amz-date;x-amz-storage-class",
                         "98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd");
}

/* A GET of the bucket itself (path "/") with the given query: the two
 * bucket examples below. */
static void check_bucket_get(const rn_sigv4_param *query, size_t nquery, const char *line3,
                             const char *signature) {
    rn_sigv4_param headers[] = {
        {"Host", HOST}, {"x-amz-date", DATE}, {"x-amz-content-sha256", EMPTY_SHA256}};
    rn_sigv4_request r = {.method = "GET",
                          .path = "/",
                          .query = query,
                          .nquery = nquery,
                          .headers = headers,
                          .nheaders = 3,
                          .payload_hash = EMPTY_SHA256,
                          .amz_date = DATE};
    rn_buf canonical = {0}, want = {0};
    rn_sigv4_canonical_request(&r, &canonical);
    rn_buf_appendf(&want, "GET\n/\n%s\nhost:", line3);
    assert_true(canonical.len > want.len && memcmp(canonical.data, want.data, want.len) == 0);
    rn_buf_free(&canonical);
    rn_buf_free(&want);
    assert_authorization(&r, "host;x-amz-content-sha256;x-amz-date", signature);
}

/* AWS example "GET Bucket Lifecycle": a sub-resource without a value. */
static void test_aws_get_lifecycle(void **state) {
    (void)state;
    rn_sigv4_param query[] = {{"lifecycle", NULL}};
    check_bucket_get(
        query, 1, "lifecycle=", "fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543");
}

/* AWS example "GET Bucket (List Objects)": two parameters, given out of
 * order. */
static void test_aws_list_objects(void **state) {
    (void)state;
    rn_sigv4_param query[] = {{"prefix", "J"}, {"max-keys", "2"}};
    check_bucket_get(query, 2, "max-keys=2&prefix=J",
                     "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7");
}

/* The IAM documentation's example signing keys (kSigning). */
static void test_iam_signing_keys(void **state) {
    (void)state;
    static const struct {
        const char *date, *want;
    } cases[] = {
        {"20120215", "f4780e2d9f65fa895f9c67b32ce1baf0b0d8a43505a000a1a9e090d414db404d"},
        {"20150830", "c4afb1cc5771d871763a393e44b703571b55cc28424d1a5e86da6ed3c154a4b9"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint8_t key[32];
        char hex[65];
        rn_sigv4_signing_key("wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", cases[i].date, "us-east-1",
                             "iam", key);
        rn_hex_encode(key, 32, hex);
        assert_string_equal(hex, cases[i].want);
    }
}

static void assert_encoded(const char *in, int keep_slash, const char *want) {
    rn_buf b = {0};
    rn_sigv4_encode(&b, in, strlen(in), keep_slash);
    rn_buf_append_byte(&b, 0);
    assert_string_equal((char *)b.data, want);
    rn_buf_free(&b);
}

static void test_uri_encoding(void **state) {
    (void)state;
    assert_encoded("AZaz09-_.~", 0, "AZaz09-_.~");
    assert_encoded("a b+c=d&e", 0, "a%20b%2Bc%3Dd%26e");
    assert_encoded("dir/sub dir/f", 1, "dir/sub%20dir/f");
    assert_encoded("dir/f", 0, "dir%2Ff");
    assert_encoded("%41", 1, "%2541"); /* a raw '%' is data: encoded once, here */
    assert_encoded("\xc3\xa9\xe2\x82\xac", 1, "%C3%A9%E2%82%AC");
    assert_encoded("a//b/./../c", 1, "a//b/./../c"); /* S3: no normalization */
    assert_encoded("*'()!$", 1, "%2A%27%28%29%21%24");
}

static void assert_query(const rn_sigv4_param *q, size_t n, const char *want) {
    rn_buf b = {0};
    rn_sigv4_query(&b, q, n);
    rn_buf_append_byte(&b, 0);
    assert_string_equal((char *)b.data, want);
    rn_buf_free(&b);
}

static void test_query_canonical(void **state) {
    (void)state;
    rn_sigv4_param q1[] = {{"uploadId", "a/b+c"}, {"partNumber", "10"}};
    assert_query(q1, 2, "partNumber=10&uploadId=a%2Fb%2Bc");
    /* repeated names sort by value; empty and NULL values are "name=" */
    rn_sigv4_param q2[] = {{"k", "b"}, {"k", "a"}, {"k", ""}, {"e", NULL}};
    assert_query(q2, 4, "e=&k=&k=a&k=b");
    /* sorted by the encoded name: "%20" (0x25) sorts before "A" (0x41) */
    rn_sigv4_param q3[] = {{"A", "1"}, {" ", "2"}, {"a", "3"}, {"~", "4"}};
    assert_query(q3, 4, "%20=2&A=1&a=3&~=4");
    assert_query(NULL, 0, "");
}

static void test_header_canonical(void **state) {
    (void)state;
    rn_sigv4_param headers[] = {{"X-Amz-Meta-B", "  two   spaces\tand tab  "},
                                {"host", "h"},
                                {"x-amz-meta-a", "first"},
                                {"X-AMZ-META-A", "second"},
                                {"x-amz-date", DATE}};
    rn_sigv4_request r = {.method = "GET",
                          .path = "/k",
                          .headers = headers,
                          .nheaders = 5,
                          .payload_hash = RN_SIGV4_UNSIGNED_PAYLOAD,
                          .amz_date = DATE};
    rn_buf canonical = {0};
    rn_sigv4_canonical_request(&r, &canonical);
    assert_buf(&canonical, "GET\n/k\n\nhost:h\nx-amz-date:" DATE "\nx-amz-meta-a:first,second\n"
                           "x-amz-meta-b:two spaces and tab\n\n"
                           "host;x-amz-date;x-amz-meta-a;x-amz-meta-b\nUNSIGNED-PAYLOAD");
    rn_buf_free(&canonical);
}

static void test_amz_date(void **state) {
    (void)state;
    char d[17];
    rn_sigv4_amz_date(1369353600000, d);
    assert_string_equal(d, DATE);
    rn_sigv4_amz_date(1700000000999, d);
    assert_string_equal(d, "20231114T221320Z");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_aws_get_object_range),
        cmocka_unit_test(test_aws_put_object),
        cmocka_unit_test(test_aws_get_lifecycle),
        cmocka_unit_test(test_aws_list_objects),
        cmocka_unit_test(test_iam_signing_keys),
        cmocka_unit_test(test_uri_encoding),
        cmocka_unit_test(test_query_canonical),
        cmocka_unit_test(test_header_canonical),
        cmocka_unit_test(test_amz_date),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
