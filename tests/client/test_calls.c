/*
 * test_calls.c — librunnel's calls against a live server, on both
 * surfaces: create (with body, closed, fork), append (plain, JSON, with a
 * producer key), read and read_all, HEAD, close, delete, bucket create,
 * retention, snapshot publish (whole and in parts), snapshot reads (with a
 * range, immutable), chunk reads and bootstrap; and their error paths (the
 * call's result, outcome and code).
 */
#include "support.h"
#include "util/buf.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

/* The whole stream from -1, as a NUL-terminated string in out. */
static void read_all(const char *url, rn_buf *out) {
    ts_read_all(C, url, out);
    rn_buf_append_byte(out, 0);
}

static void url_of(const char *name, int bucket, char *out) {
    assert_int_equal(runnel_stream_url(C, name, bucket, out, 512), 0);
}

static void create_append_read(void **state) {
    for (int bucket = 0; bucket <= 1; bucket++) {
        char url[512];
        url_of(bucket ? "callsb/one" : "calls/one", bucket, url);
        runnel_answer a;
        runnel_create_options co = {.content_type = "text/plain",
                                    .body = {.data = "first ", .len = 6}};
        assert_int_equal(runnel_create(C, url, &co, &a), RUNNEL_OK);
        assert_int_equal(a.status, 201);
        assert_int_equal(a.outcome, RUNNEL_APPLIED);
        char inc[32];
        snprintf(inc, sizeof inc, "%s", a.incarnation);
        assert_int_equal(runnel_create(C, url, &co, &a), RUNNEL_OK);
        assert_int_equal(a.status, 200);
        runnel_append_options ao = {.content_type = "text/plain", .incarnation = inc};
        runnel_body b = {.data = "second", .len = 6};
        assert_int_equal(runnel_append(C, url, &b, &ao, &a), RUNNEL_OK);
        assert_int_equal(a.outcome, RUNNEL_APPLIED);
        assert_true(a.next_offset[0]);
        /* a producer append carries its key and digest */
        runnel_append_options po = {.content_type = "text/plain",
                                    .producer_id = "w",
                                    .producer_epoch = 0,
                                    .producer_seq = 0};
        runnel_body pb = {.data = "!", .len = 1};
        assert_int_equal(runnel_append(C, url, &pb, &po, &a), RUNNEL_OK);
        assert_int_equal(a.outcome, RUNNEL_APPLIED);
        assert_int_equal(runnel_append(C, url, &pb, &po, &a), RUNNEL_OK);
        assert_int_equal(a.outcome, RUNNEL_REPEAT);
        runnel_body other = {.data = "?", .len = 1};
        assert_int_equal(runnel_append(C, url, &other, &po, &a), RUNNEL_E_REFUSED);
        assert_true(a.producer_answer);
        assert_string_equal(a.error_code, "PRODUCER_KEY_CONFLICT");
        rn_buf got = {0};
        read_all(url, &got);
        assert_string_equal((char *)got.data, "first second!");
        /* one read from an offset, bounded */
        runnel_read_options ro = {.offset = "-1", .on_data = ts_collect, .arg = &got};
        got.len = 0;
        assert_int_equal(runnel_read(C, url, &ro, &a), RUNNEL_OK);
        assert_true(a.up_to_date);
        assert_int_equal(a.body_bytes, 13);
        rn_buf_free(&got);
        /* HEAD, close, then appends are refused with the final tail */
        assert_int_equal(runnel_head(C, url, inc, &a), RUNNEL_OK);
        assert_string_equal(a.content_type, "text/plain");
        assert_false(a.closed);
        assert_int_equal(runnel_close(C, url, NULL, &a), RUNNEL_OK);
        assert_true(a.closed);
        assert_int_equal(runnel_append(C, url, &b, &ao, &a), RUNNEL_E_REFUSED);
        assert_string_equal(a.error_code, "STREAM_CLOSED");
        assert_int_equal(a.outcome, RUNNEL_REFUSED);
        /* delete, then everything answers 404 */
        assert_int_equal(runnel_delete(C, url, inc, &a), RUNNEL_OK);
        assert_int_equal(runnel_head(C, url, NULL, &a), RUNNEL_E_STATUS);
        assert_int_equal(a.status, 404);
        assert_int_equal(runnel_append(C, url, &b, &ao, &a), RUNNEL_E_REFUSED);
        assert_int_equal(a.status, 404);
        assert_int_equal(runnel_read(C, url, NULL, &a), RUNNEL_E_STATUS);
        assert_int_equal(runnel_delete(C, url, NULL, &a), RUNNEL_E_REFUSED);
    }
}

static void json_mode(void **state) {
    char v1[512], bucket[512];
    url_of("callsb/json", 0, v1);
    url_of("callsb/json", 1, bucket);
    runnel_answer a;
    runnel_create_options co = {.content_type = "application/json",
                                .body = {.data = "[{\"a\": 1}, {\"b\": 2}]", .len = 20}};
    assert_int_equal(runnel_create(C, v1, &co, &a), RUNNEL_OK);
    rn_buf got = {0};
    read_all(v1, &got);
    assert_string_equal((char *)got.data, "[{\"a\":1},{\"b\":2}]");
    /* the same stream on the bucket surface reads as NDJSON */
    read_all(bucket, &got);
    assert_string_equal((char *)got.data, "{\"a\":1}\n{\"b\":2}\n");
    runnel_append_options ao = {.content_type = "application/json"};
    runnel_body bad = {.data = "{oops", .len = 5};
    assert_int_equal(runnel_append(C, v1, &bad, &ao, &a), RUNNEL_E_REFUSED);
    assert_string_equal(a.error_code, "INVALID_REQUEST");
    rn_buf_free(&got);
}

static void bad_arguments(void **state) {
    runnel_answer a;
    runnel_append_options ao = {.content_type = "text/plain\r\nX-Evil: 1"};
    runnel_body b = {.data = "x", .len = 1};
    assert_int_equal(runnel_append(C, "/v1/stream/calls/x", &b, &ao, &a), RUNNEL_E_USAGE);
    assert_int_equal(a.status, 0);
    char long_name[3000];
    memset(long_name, 'a', sizeof long_name - 1);
    long_name[sizeof long_name - 1] = 0;
    assert_int_equal(runnel_head(C, long_name, NULL, &a), RUNNEL_E_USAGE);
    /* a server that is not there: no answer, unknown for a write */
    runnel_client_options o = {.base_url = "http://127.0.0.1:1", .connect_timeout_ms = 2000};
    runnel_client *dead = runnel_client_new(&o);
    assert_int_equal(runnel_append(dead, "/v1/stream/x", &b, NULL, &a), RUNNEL_E_TRANSPORT);
    assert_int_equal(a.outcome, RUNNEL_UNKNOWN);
    assert_true(a.transport_error != 0);
    assert_int_equal(runnel_read(dead, "/v1/stream/x", NULL, &a), RUNNEL_E_TRANSPORT);
    runnel_client_free(dead);
}

static void fork_and_buckets(void **state) {
    runnel_answer a;
    char src[512], fork[512];
    url_of("calls/src", 0, src);
    url_of("calls/fork", 0, fork);
    runnel_create_options co = {.content_type = "text/plain",
                                .body = {.data = "draft one", .len = 9}};
    assert_int_equal(runnel_create(C, src, &co, &a), RUNNEL_OK);
    runnel_create_options fo = {.forked_from = "/v1/stream/calls/src",
                                .fork_offset = "0000000000000000_0000000000000000",
                                .fork_sub_offset = "5",
                                .body = {.data = " two", .len = 4}};
    assert_int_equal(runnel_create(C, fork, &fo, &a), RUNNEL_OK);
    rn_buf got = {0};
    read_all(fork, &got);
    assert_string_equal((char *)got.data, "draft two");
    rn_buf_free(&got);
    assert_int_equal(runnel_bucket_create(C, "good-bucket", &a), RUNNEL_OK);
    assert_int_equal(runnel_bucket_create(C, "Bad", &a), RUNNEL_E_REFUSED);
    assert_string_equal(a.error_code, "INVALID_BUCKET_ID");
}

typedef struct {
    rn_buf parts[8];
    char types[8][64];
    unsigned n;
} boot;

static int b_begin(void *arg, unsigned i, const char *type) {
    boot *b = arg;
    assert_true(i < 8);
    snprintf(b->types[i], 64, "%s", type);
    b->n = i + 1;
    return 0;
}
static int b_data(void *arg, unsigned i, const void *d, size_t n) {
    boot *b = arg;
    rn_buf_append(&b->parts[i], d, n);
    return 0;
}
static int b_end(void *arg, unsigned i) {
    boot *b = arg;
    rn_buf_append_byte(&b->parts[i], 0);
    return 0;
}

static long from_memory(void *arg, void *buf, size_t cap) {
    rn_buf *src = arg; /* data, len = size, cap used as the read position */
    size_t left = src->len - src->cap;
    size_t n = left < cap ? left : cap;
    memcpy(buf, src->data + src->cap, n);
    src->cap += n;
    return (long)n;
}

static void snapshots_and_bootstrap(void **state) {
    runnel_answer a;
    char url[512];
    url_of("callsb/snap", 1, url);
    runnel_create_options co = {.content_type = "application/json",
                                .body = {.data = "[{\"m\":1},{\"m\":2}]", .len = 17}};
    assert_int_equal(runnel_create(C, url, &co, &a), RUNNEL_OK);
    char inc[32], tail[RUNNEL_VALUE_MAX];
    assert_int_equal(runnel_head(C, url, NULL, &a), RUNNEL_OK);
    snprintf(inc, sizeof inc, "%s", a.incarnation);
    snprintf(tail, sizeof tail, "%s", a.next_offset);
    runnel_body state_body = {.data = "{\"count\":2}", .len = 11};
    assert_int_equal(
        runnel_snapshot_publish(C, url, tail, "application/x-state", &state_body, inc, &a),
        RUNNEL_OK);
    char digest[80];
    snprintf(digest, sizeof digest, "%s", a.snapshot_digest);
    runnel_snapshot_hasher h;
    char mine[65];
    runnel_snapshot_digest_init(&h, "application/x-state");
    runnel_snapshot_digest_update(&h, "{\"count\":2}", 11);
    runnel_snapshot_digest_final(&h, mine);
    assert_string_equal(digest, mine);
    /* another body at the same offset: 409 naming the latest */
    runnel_body other = {.data = "{}", .len = 2};
    assert_int_equal(runnel_snapshot_publish(C, url, tail, "application/x-state", &other, NULL, &a),
                     RUNNEL_E_REFUSED);
    assert_string_equal(a.error_code, "SNAPSHOT_CONFLICT");
    assert_string_equal(a.snapshot_digest, digest);
    runnel_body msg = {.data = "{\"m\":3}", .len = 7};
    runnel_append_options ao = {.content_type = "application/json"};
    assert_int_equal(runnel_append(C, url, &msg, &ao, &a), RUNNEL_OK);
    /* bootstrap: the snapshot, then one part per message after it */
    boot b = {0};
    runnel_bootstrap_handler bh = {b_begin, b_data, b_end, &b};
    assert_int_equal(runnel_bootstrap(C, url, inc, &bh, &a), RUNNEL_OK);
    assert_int_equal(b.n, 2);
    assert_string_equal(b.types[0], "application/x-state");
    assert_string_equal((char *)b.parts[0].data, "{\"count\":2}");
    assert_string_equal((char *)b.parts[1].data, "{\"m\":3}"); /* one message, no LF */
    assert_string_equal(a.snapshot_offset, tail);
    for (int i = 0; i < 8; i++)
        rn_buf_free(&b.parts[i]);
    /* snapshot reads: whole, a range, immutable */
    rn_buf got = {0};
    runnel_snapshot_read_options so = {.on_data = ts_collect, .arg = &got};
    assert_int_equal(runnel_snapshot_read(C, url, tail, &so, &a), RUNNEL_OK);
    assert_int_equal(got.len, 11);
    got.len = 0;
    so.range = "bytes=0-4";
    assert_int_equal(runnel_snapshot_read(C, url, tail, &so, &a), RUNNEL_OK);
    assert_int_equal(a.status, 206);
    assert_memory_equal(got.data, "{\"cou", 5);
    got.len = 0;
    so = (runnel_snapshot_read_options){
        .immutable = 1, .incarnation = inc, .on_data = ts_collect, .arg = &got};
    assert_int_equal(runnel_snapshot_read(C, url, tail, &so, &a), RUNNEL_OK);
    assert_true(a.immutable);
    assert_int_equal(got.len, 11);
    /* retention, then reads below it answer 410 */
    assert_int_equal(runnel_retention(C, url, tail, inc, &a), RUNNEL_OK);
    assert_string_equal(a.retained_offset, tail);
    runnel_read_options ro = {.offset = "-1"};
    assert_int_equal(runnel_read(C, url, &ro, &a), RUNNEL_E_STATUS);
    assert_int_equal(a.status, 410);
    /* an immutable chunk from the retained offset */
    got.len = 0;
    assert_int_equal(runnel_chunk_read(C, url, inc, tail, ts_collect, &got, &a), RUNNEL_OK);
    assert_int_equal(got.len, 8); /* NDJSON of {"m":3} */
    assert_int_equal(runnel_chunk_read(C, url, "4503599627370497", tail, ts_collect, &got, &a),
                     RUNNEL_E_STATUS);
    assert_int_equal(a.status, 412);

    /* a snapshot in parts, from a source, committed by digest */
    char bin[512];
    url_of("callsb/parts", 1, bin);
    runnel_create_options bo = {.content_type = "application/octet-stream",
                                .body = {.data = "0123456789", .len = 10}};
    assert_int_equal(runnel_create(C, bin, &bo, &a), RUNNEL_OK);
    assert_int_equal(runnel_head(C, bin, NULL, &a), RUNNEL_OK);
    snprintf(tail, sizeof tail, "%s", a.next_offset);
    rn_buf big = {0};
    for (int i = 0; i < 100000; i++)
        rn_buf_appendf(&big, "%07d\n", i); /* 800,000 bytes */
    big.cap = 0;                           /* the source's read position */
    runnel_body src = {.len = big.len, .source = from_memory, .arg = &big};
    assert_int_equal(
        runnel_snapshot_publish_parts(C, bin, tail, "application/x-big", &src, 300000, 0, NULL, &a),
        RUNNEL_OK);
    assert_int_equal(a.outcome, RUNNEL_APPLIED);
    got.len = 0;
    so = (runnel_snapshot_read_options){.on_data = ts_collect, .arg = &got};
    assert_int_equal(runnel_snapshot_read(C, bin, tail, &so, &a), RUNNEL_OK);
    assert_int_equal(got.len, big.len);
    assert_memory_equal(got.data, big.data, big.len);
    assert_string_equal(a.content_type, "application/x-big");
    rn_buf_free(&got);
    free(big.data);
    /* parts refused: a stream that does not exist */
    runnel_body small = {.data = "x", .len = 1};
    assert_int_equal(
        runnel_snapshot_publish_parts(C, "/callsb/none", tail, NULL, &small, 0, 0, NULL, &a),
        RUNNEL_E_REFUSED);
    assert_int_equal(a.status, 404);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(create_append_read),      cmocka_unit_test(json_mode),
        cmocka_unit_test(bad_arguments),           cmocka_unit_test(fork_and_buckets),
        cmocka_unit_test(snapshots_and_bootstrap),
    };
    return cmocka_run_group_tests(tests, ts_group_setup, ts_group_teardown);
}
