/*
 * test_s3_faults.c - the S3 client (src/tiers/s3/s3.h) under the faults the
 * test endpoint's proxy injects (s3_endpoint.h): the typed results of
 * faults (unreachable, refused, 500, 503 SlowDown, 403, slow past the
 * timeout, a cut or stalled body, a reset, an Error inside a 200, an answer
 * past its bound), the bound on calls in flight, cancel, a stop inside a
 * callback, a failing request's log line carrying no secret, and the
 * configurations the client refuses. Every wait is bounded (a watchdog per
 * call).
 */
#include "s3_endpoint.h"

#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "util/clock.h"

static void get_expect(rn_s3 *s3, const char *key, rn_s3_outcome outcome, const char *code) {
    uint8_t buf[200000];
    got g;
    get_into(s3, key, 0, sizeof buf, buf, &g);
    expect(&g, outcome, code);
}

static void test_unreachable(void **state) {
    (void)state;
    int sock = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t alen = sizeof a;
    assert_int_equal(bind(sock, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(getsockname(sock, (struct sockaddr *)&a, &alen), 0);
    close(sock); /* nothing listens there now */
    char endpoint[64];
    snprintf(endpoint, sizeof endpoint, "http://127.0.0.1:%d", ntohs(a.sin_port));
    rn_s3_config cfg = base_config(endpoint, 0);
    rn_s3 *s3 = client_with(&cfg);
    get_expect(s3, "any", RN_S3_RETRY, "ConnectFailed");
    close_client(s3);

    s3 = client(0);
    uint8_t data[150000];
    memset(data, 'f', sizeof data);
    put(s3, "fault/obj", data, sizeof data);
    control("POST", "/refuse", "{\"ms\":0}"); /* also closes kept-alive connections */
    get_expect(s3, "fault/obj", RN_S3_RETRY, "ConnectFailed");
    control("POST", "/accept", NULL);
    got g;
    get_into(s3, "fault/obj", 0, sizeof data, data, &g);
    expect_ok(&g);
    close_client(s3);
}

static void test_error_answers(void **state) {
    (void)state;
    rn_s3 *s3 = client(0);
    uint8_t data[150000];
    memset(data, 'e', sizeof data);
    put(s3, "fault/obj", data, sizeof data);
    faults("{\"kind\":\"status\",\"op\":\"GetObject\",\"status\":500,\"code\":\"InternalError\"}");
    get_expect(s3, "fault/obj", RN_S3_RETRY, "InternalError");
    faults("{\"kind\":\"status\",\"op\":\"GetObject\",\"status\":503,\"code\":\"SlowDown\","
           "\"retry_after\":1}");
    get_expect(s3, "fault/obj", RN_S3_RETRY, "SlowDown");
    faults("{\"kind\":\"status\",\"op\":\"PutObject\",\"status\":403,\"code\":\"AccessDenied\"}");
    got g = {0};
    assert_non_null(rn_s3_put(s3, "fault/x", rn_s3_mem("x", 1), on_result, &g));
    wait_for(&g);
    expect(&g, RN_S3_FAILED, "AccessDenied");
    /* S3 may fail a CompleteMultipartUpload inside a 200 answer */
    char id[256], etag[128];
    create_upload(s3, "fault/mpu", id);
    upload_part(s3, "fault/mpu", id, 1, rn_s3_mem("abc", 3), etag);
    faults("{\"kind\":\"status\",\"op\":\"CompleteMultipartUpload\",\"status\":200,"
           "\"code\":\"InternalError\"}");
    rn_s3_part parts[] = {{1, etag}};
    memset(&g, 0, sizeof g);
    assert_non_null(rn_s3_mpu_complete(s3, "fault/mpu", id, parts, 1, on_result, &g));
    wait_for(&g);
    expect(&g, RN_S3_RETRY, "InternalError");
    assert_int_equal(g.status, 200);
    memset(&g, 0, sizeof g); /* and then it succeeds */
    assert_non_null(rn_s3_mpu_complete(s3, "fault/mpu", id, parts, 1, on_result, &g));
    wait_for(&g);
    expect_ok(&g);
    get_expect(s3, "fault/obj", RN_S3_OK, ""); /* the faults were used up */
    close_client(s3);
}

static void test_slow_cut_reset(void **state) {
    (void)state;
    rn_s3_config cfg = base_config(getenv("S3_ENDPOINT"), 0);
    cfg.timeout_ms = 800;
    cfg.min_rate = UINT64_MAX / 2; /* no allowance for the payload: 800 ms it is */
    rn_s3 *s3 = client_with(&cfg);
    uint8_t data[150000];
    memset(data, 's', sizeof data);
    put(s3, "fault/obj", data, sizeof data);
    faults("{\"kind\":\"delay\",\"op\":\"GetObject\",\"delay_ms\":3000}");
    int64_t t0 = rn_now_ms();
    get_expect(s3, "fault/obj", RN_S3_RETRY, "Timeout");
    assert_true(rn_now_ms() - t0 < 2500);
    faults("{\"kind\":\"stall\",\"op\":\"GetObject\",\"after_bytes\":50000,\"delay_ms\":3000}");
    get_expect(s3, "fault/obj", RN_S3_RETRY, "Timeout");
    faults("{\"kind\":\"cut\",\"op\":\"GetObject\",\"after_bytes\":1000}");
    get_expect(s3, "fault/obj", RN_S3_RETRY, "ResponseCut");
    faults("{\"kind\":\"reset\",\"op\":\"GetObject\"}");
    get_expect(s3, "fault/obj", RN_S3_RETRY, "ResponseCut");
    faults("{\"kind\":\"cut\",\"op\":\"ListObjectsV2\",\"after_bytes\":100}");
    got g = {0};
    assert_non_null(rn_s3_list(s3, "fault/", NULL, 10, on_result, &g));
    wait_for(&g);
    expect(&g, RN_S3_RETRY, "ResponseCut");
    get_expect(s3, "fault/obj", RN_S3_OK, "");
    close_client(s3);
}

static void test_answer_bound(void **state) {
    (void)state;
    rn_s3_config cfg = base_config(getenv("S3_ENDPOINT"), 0);
    cfg.max_response_bytes = 1024;
    rn_s3 *s3 = client_with(&cfg);
    for (int i = 0; i < 12; i++) {
        char key[64];
        snprintf(key, sizeof key, "bound/a-rather-long-key-name-%02d", i);
        put(s3, key, "b", 1);
    }
    got g = {0};
    assert_non_null(rn_s3_list(s3, "bound/", NULL, 1000, on_result, &g));
    wait_for(&g);
    expect(&g, RN_S3_FAILED, "ResponseTooLarge");
    close_client(s3);
}

static void test_bounded_in_flight_and_cancel(void **state) {
    (void)state;
    rn_s3_config cfg = base_config(getenv("S3_ENDPOINT"), 0);
    cfg.max_running = 2;
    cfg.max_queued = 3;
    rn_s3 *s3 = client_with(&cfg);
    put(s3, "bound/obj", "0123456789", 10);
    faults("{\"kind\":\"delay\",\"op\":\"GetObject\",\"delay_ms\":400,\"count\":0}");
    got g[6];
    memset(g, 0, sizeof g);
    uint8_t bufs[6][10];
    int64_t t0 = rn_now_ms();
    for (int i = 0; i < 5; i++)
        assert_non_null(rn_s3_get(s3, "bound/obj", 0, 10, rn_s3_into(bufs[i]), on_result, &g[i]));
    assert_int_equal(rn_s3_in_flight(s3), 5);
    assert_null(rn_s3_get(s3, "bound/obj", 0, 10, rn_s3_into(bufs[5]), on_result, &g[5]));
    for (int i = 0; i < 5; i++) {
        wait_for(&g[i]);
        expect_ok(&g[i]);
    }
    /* two at a time, 400 ms each: three rounds */
    assert_true(rn_now_ms() - t0 >= 1100);
    assert_int_equal(g[5].done, 0);
    rn_s3_call *c = rn_s3_get(s3, "bound/obj", 0, 10, rn_s3_into(bufs[5]), on_result, &g[5]);
    assert_non_null(c);
    uv_run(&loop, UV_RUN_NOWAIT);
    rn_s3_cancel(c);
    assert_int_equal(rn_s3_in_flight(s3), 0);
    int64_t until = rn_now_ms() + 700;
    while (rn_now_ms() < until)
        uv_run(&loop, UV_RUN_NOWAIT);
    assert_int_equal(g[5].done, 0);
    close_client(s3);
}

typedef struct {
    rn_s3 *s3;
    int calls;
} stopper;

static void stop_inside(void *arg, const rn_s3_result *r) {
    stopper *st = arg;
    (void)r;
    st->calls++;
    rn_s3_stop(st->s3); /* cancels the other calls, not this one again */
}

/* A callback may stop the client: the other calls never call back. */
static void test_stop_inside_callback(void **state) {
    (void)state;
    rn_s3 *s3 = client(0);
    put(s3, "stop/obj", "0123456789", 10);
    faults("{\"kind\":\"delay\",\"op\":\"GetObject\",\"key_contains\":\"stop/\","
           "\"delay_ms\":300,\"count\":2}");
    stopper st = {.s3 = s3};
    uint8_t bufs[3][10];
    for (int i = 0; i < 3; i++)
        assert_non_null(rn_s3_get(s3, "stop/obj", 0, 10, rn_s3_into(bufs[i]), stop_inside, &st));
    int64_t deadline = rn_now_ms() + WATCHDOG_MS;
    while (!st.calls && rn_now_ms() < deadline)
        uv_run(&loop, UV_RUN_ONCE);
    assert_int_equal(st.calls, 1);
    uv_run(&loop, UV_RUN_DEFAULT);
    assert_int_equal(st.calls, 1);
    assert_int_equal(rn_s3_in_flight(s3), 0);
    rn_s3_free(s3);
}

static void test_failure_log_has_no_secret(void **state) {
    (void)state;
    const char *wrong = "WRONGsecretWRONGsecretWRONGsecret/+1234";
    const char *token = "TOKENtokenTOKENtoken";
    rn_s3_config cfg = base_config(getenv("S3_ENDPOINT"), 0);
    cfg.secret_key = wrong;
    cfg.session_token = token;
    rn_s3 *s3 = client_with(&cfg);
    int fd = temp_file();
    fflush(stderr);
    int saved = dup(2);
    dup2(fd, 2);
    got g = {0};
    uint8_t buf[10];
    assert_non_null(rn_s3_get(s3, "secret/obj", 0, 10, rn_s3_into(buf), on_result, &g));
    wait_for(&g);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    expect(&g, RN_S3_FAILED, "SignatureDoesNotMatch");
    assert_int_equal(g.status, 403);
    char log[4096] = "";
    ssize_t n = pread(fd, log, sizeof log - 1, 0);
    assert_true(n > 0);
    log[n] = '\0';
    close(fd);
    assert_non_null(strstr(log, "s3_request_failed"));
    assert_non_null(strstr(log, "SignatureDoesNotMatch"));
    assert_null(strstr(log, wrong));
    assert_null(strstr(log, creds.secret_key));
    assert_null(strstr(log, token));
    assert_null(strstr(log, "Signature="));
    close_client(s3);
}

static void test_bad_configurations(void **state) {
    (void)state;
    static const struct {
        const char *endpoint, *bucket, *region;
        int vhost, unsigned_payload;
    } bad[] = {
        {"ftp://127.0.0.1:1", "b", "us-east-1", 0, 0},
        {"http://127.0.0.1:1/prefix", "b", "us-east-1", 0, 0},
        {"http://127.0.0.1:1", "b", "us-east-1", 1, 0}, /* vhost on an address */
        {"http://localhost:1", "Bad_Bucket", "us-east-1", 1, 0},
        {"http://localhost:1", "b", "us-east-1", 0, 1}, /* unsigned over http */
        {"http://localhost:1", "b", "", 0, 0},
        {"http://localhost:1", "b/c", "us-east-1", 0, 0},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        rn_s3_config cfg = base_config(bad[i].endpoint, bad[i].vhost);
        cfg.bucket = bad[i].bucket;
        cfg.region = bad[i].region;
        cfg.unsigned_payload = bad[i].unsigned_payload;
        char err[256] = "";
        rn_s3 *s3 = rn_s3_new(&loop, &cfg, err, sizeof err);
        if (s3)
            fail_msg("configuration %zu was accepted", i);
        assert_true(strncmp(err, "S3: ", 4) == 0);
    }
    rn_s3_config cfg = base_config("http://localhost:1", 0);
    cfg.secret_key = "SeCrEt\nX";
    char err[256] = "";
    assert_null(rn_s3_new(&loop, &cfg, err, sizeof err));
    assert_null(strstr(err, "SeCrEt"));
    assert_false(rn_s3_key_valid(""));
    assert_false(rn_s3_key_valid("tab\there"));
    assert_false(rn_s3_key_valid("\xff"));
    assert_true(rn_s3_key_valid("ok/é"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_unreachable, reset_endpoint),
        cmocka_unit_test_setup(test_error_answers, reset_endpoint),
        cmocka_unit_test_setup(test_slow_cut_reset, reset_endpoint),
        cmocka_unit_test_setup(test_answer_bound, reset_endpoint),
        cmocka_unit_test_setup(test_bounded_in_flight_and_cancel, reset_endpoint),
        cmocka_unit_test_setup(test_stop_inside_callback, reset_endpoint),
        cmocka_unit_test_setup(test_failure_log_has_no_secret, reset_endpoint),
        cmocka_unit_test(test_bad_configurations),
    };
    return s3_endpoint_run(tests, sizeof tests / sizeof tests[0]);
}
