/*
 * test_s3_client.c - the S3 client (src/tiers/s3/s3.h) against the S3
 * test endpoint (s3_endpoint.h): every call (put from memory and from an
 * fd range, ranged GET into a buffer and into an fd, head, delete,
 * delete-many, list with continuation, create/part/part-copy/complete/abort
 * of multipart uploads), odd keys, path-style and virtual-host addressing,
 * a session token, https with signed and UNSIGNED-PAYLOAD bodies and an
 * unverifiable certificate, and both paths of each fake of the proxy
 * (UploadPartCopy, Abort, DeleteObjects faked, and s3rver's own answers).
 * Every request the client makes has its signature recomputed by botocore
 * in the proxy; a wrong one fails the call (403) and the test. Faults are
 * in test_s3_faults.c.
 */
#include "s3_endpoint.h"

#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/buf.h"

static void check_object_calls(int vhost) {
    rn_s3 *s3 = client(vhost);
    const char *key = vhost ? "vhost/obj.bin" : "path/obj.bin";
    size_t len = 3 * 1024 * 1024 + 17; /* hashed in slices */
    uint8_t *data = pattern(len, 1), *buf = malloc(len);
    put(s3, key, data, len);

    got g = {0};
    assert_non_null(rn_s3_head(s3, key, on_result, &g));
    wait_for(&g);
    expect_ok(&g);
    assert_int_equal(g.length, len);
    assert_int_equal(g.object_size, len);
    assert_true(strlen(g.etag) > 2);

    static const uint64_t ranges[][2] = {{0, 1}, {0, 1000}, {12345, 65536}, {1 << 20, 1 << 21}};
    for (size_t i = 0; i < sizeof ranges / sizeof ranges[0]; i++) {
        get_into(s3, key, ranges[i][0], ranges[i][1], buf, &g);
        expect_ok(&g);
        assert_int_equal(g.status, 206);
        assert_int_equal(g.length, ranges[i][1]);
        assert_int_equal(g.object_size, len);
        assert_memory_equal(buf, data + ranges[i][0], ranges[i][1]);
    }
    get_into(s3, key, len - 10, 100, buf, &g); /* past the end: fewer bytes */
    expect_ok(&g);
    assert_int_equal(g.length, 10);
    assert_memory_equal(buf, data + len - 10, 10);
    get_into(s3, key, len + 5, 10, buf, &g); /* starts past the end */
    expect(&g, RN_S3_FAILED, "InvalidRange");
    assert_int_equal(g.status, 416);

    int fd = temp_file();
    memset(&g, 0, sizeof g);
    assert_non_null(rn_s3_get(s3, key, 100, len - 100, rn_s3_to_file(fd, 7), on_result, &g));
    wait_for(&g);
    expect_ok(&g);
    assert_int_equal(pread(fd, buf, len - 100, 7), (ssize_t)(len - 100));
    assert_memory_equal(buf, data + 100, len - 100);
    close(fd);

    memset(&g, 0, sizeof g);
    assert_non_null(rn_s3_delete(s3, key, on_result, &g));
    wait_for(&g);
    expect_ok(&g);
    get_into(s3, key, 0, 10, buf, &g);
    expect(&g, RN_S3_NOT_FOUND, "NoSuchKey");
    memset(&g, 0, sizeof g);
    assert_non_null(rn_s3_head(s3, key, on_result, &g));
    wait_for(&g);
    expect(&g, RN_S3_NOT_FOUND, "NotFound"); /* a HEAD answer has no body */
    memset(&g, 0, sizeof g);
    assert_non_null(rn_s3_delete(s3, key, on_result, &g)); /* deleting nothing is fine */
    wait_for(&g);
    expect_ok(&g);
    free(data);
    free(buf);
    close_client(s3);
}

static void test_object_calls_path_style(void **state) {
    (void)state;
    check_object_calls(0);
}

static void test_object_calls_virtual_host(void **state) {
    (void)state;
    check_object_calls(1);
}

static void test_put_from_fd(void **state) {
    (void)state;
    rn_s3 *s3 = client(0);
    size_t len = 2 * 1024 * 1024 + 3;
    uint8_t *data = pattern(len, 2), *buf = malloc(len);
    int fd = temp_file();
    assert_int_equal(pwrite(fd, data, len, 0), (ssize_t)len);
    got g = {0};
    /* a 70000-byte range from the middle (hashed in a slice), then most of it */
    assert_non_null(rn_s3_put(s3, "fd/small", rn_s3_file(fd, 4096, 70000), on_result, &g));
    wait_for(&g);
    expect_ok(&g);
    get_into(s3, "fd/small", 0, 70000, buf, &g);
    expect_ok(&g);
    assert_memory_equal(buf, data + 4096, 70000);
    memset(&g, 0, sizeof g);
    assert_non_null(rn_s3_put(s3, "fd/large", rn_s3_file(fd, 1, len - 1), on_result, &g));
    wait_for(&g);
    expect_ok(&g);
    get_into(s3, "fd/large", 0, len - 1, buf, &g);
    expect_ok(&g);
    assert_memory_equal(buf, data + 1, len - 1);
    /* a range past the file's end fails before anything is sent */
    memset(&g, 0, sizeof g);
    assert_non_null(rn_s3_put(s3, "fd/short", rn_s3_file(fd, len - 10, 100000), on_result, &g));
    wait_for(&g);
    expect(&g, RN_S3_FAILED, "LocalIO");
    close(fd);
    free(data);
    free(buf);
    close_client(s3);
}

/* Keys s3rver can store (no empty, "." or ".." segments: it keeps objects
 * as files) with the characters URI encoding gets wrong most often. */
static const char *const odd_keys[] = {
    "odd/with space",           "odd/plus+equals=amp&",     "odd/tilde~star*",
    "odd/percent%20not-escape", "odd/question?hash#",       "odd/unicode-é-日本-🎉",
    "odd/quote'paren()bang!$",  "odd/comma,semi;colon:at@",
};

static void check_odd_keys(int vhost) {
    rn_s3 *s3 = client(vhost);
    size_t n = sizeof odd_keys / sizeof odd_keys[0];
    for (size_t i = 0; i < n; i++)
        put(s3, odd_keys[i], odd_keys[i], strlen(odd_keys[i]));
    uint8_t buf[128];
    got g;
    for (size_t i = 0; i < n; i++) {
        get_into(s3, odd_keys[i], 0, strlen(odd_keys[i]), buf, &g);
        expect_ok(&g);
        assert_memory_equal(buf, odd_keys[i], strlen(odd_keys[i]));
    }
    memset(&g, 0, sizeof g);
    assert_non_null(rn_s3_list(s3, "odd/", NULL, 1000, on_result, &g));
    wait_for(&g);
    expect_ok(&g);
    assert_int_equal(g.nkeys, n);
    for (size_t i = 0; i < n; i++) {
        int found = 0;
        for (size_t j = 0; j < g.nkeys; j++)
            found |= strcmp(g.keys[j], odd_keys[i]) == 0 && g.sizes[j] == strlen(odd_keys[i]);
        if (!found)
            fail_msg("listing lacks %s", odd_keys[i]);
    }
    memset(&g, 0, sizeof g);
    assert_non_null(rn_s3_list(s3, "odd/unicode-é", NULL, 1000, on_result, &g));
    wait_for(&g);
    expect_ok(&g);
    assert_int_equal(g.nkeys, 1);
    memset(&g, 0, sizeof g);
    assert_non_null(rn_s3_delete_many(s3, odd_keys, n, on_result, &g));
    wait_for(&g);
    expect_ok(&g);
    close_client(s3);
}

static void test_odd_keys_path_style(void **state) {
    (void)state;
    check_odd_keys(0);
}

static void test_odd_keys_virtual_host(void **state) {
    (void)state;
    check_odd_keys(1);
}

static void list_all(rn_s3 *s3, const char *prefix, unsigned page, size_t want_pages,
                     size_t want_keys) {
    char token[1100] = "";
    size_t pages = 0, keys = 0;
    char last[256] = "";
    do {
        got g = {0};
        assert_non_null(rn_s3_list(s3, prefix, token[0] ? token : NULL, page, on_result, &g));
        wait_for(&g);
        expect_ok(&g);
        pages++;
        keys += g.nkeys;
        for (size_t i = 0; i < g.nkeys; i++) {
            assert_true(strncmp(g.keys[i], prefix, strlen(prefix)) == 0);
            assert_true(strcmp(last, g.keys[i]) < 0); /* sorted, no repeats across pages */
            snprintf(last, sizeof last, "%s", g.keys[i]);
        }
        assert_int_equal(g.truncated, g.token[0] != '\0');
        snprintf(token, sizeof token, "%s", g.token);
        assert_true(pages <= want_pages);
    } while (token[0]);
    assert_int_equal(pages, want_pages);
    assert_int_equal(keys, want_keys);
}

static void test_list_and_delete_many(void **state) {
    (void)state;
    rn_s3 *s3 = client(0);
    char keys[25][32];
    const char *ptrs[25];
    for (int i = 0; i < 25; i++) {
        snprintf(keys[i], sizeof keys[i], "list/k%02d", i);
        ptrs[i] = keys[i];
        put(s3, keys[i], "x", 1);
    }
    put(s3, "listing-neighbour", "y", 1);
    list_all(s3, "list/", 10, 3, 25);
    list_all(s3, "list/k1", 4, 3, 10);
    list_all(s3, "nothing-here/", 10, 1, 0);
    /* the proxy's DeleteObjects (one delete per key) */
    got g = {0};
    assert_non_null(rn_s3_delete_many(s3, ptrs, 20, on_result, &g));
    wait_for(&g);
    expect_ok(&g);
    list_all(s3, "list/", 10, 1, 5);
    /* s3rver's own DeleteObjects, with keys that share no directory */
    control("POST", "/config", "{\"fake_delete_objects\":false}");
    const char *top[] = {"top-a", "top-b", "top-c"};
    for (int i = 0; i < 3; i++)
        put(s3, top[i], "z", 1);
    memset(&g, 0, sizeof g);
    assert_non_null(rn_s3_delete_many(s3, top, 3, on_result, &g));
    wait_for(&g);
    expect_ok(&g);
    list_all(s3, "top-", 10, 1, 0);
    /* (s3rver's own fails now and then when keys share a directory) */
    control("POST", "/config", "{\"fake_delete_objects\":true}");
    memset(&g, 0, sizeof g);
    assert_non_null(rn_s3_delete_many(s3, ptrs + 20, 5, on_result, &g));
    wait_for(&g);
    expect_ok(&g);
    list_all(s3, "list/", 10, 1, 0);
    close_client(s3);
}

static void test_multipart(void **state) {
    (void)state;
    rn_s3 *s3 = client(0);
    size_t part = 5 * 1024 * 1024;
    uint8_t *a = pattern(part, 3), *b = pattern(part, 4), *src = pattern(300000, 5);
    put(s3, "mpu/source", src, 300000);
    int fd = temp_file();
    assert_int_equal(pwrite(fd, b, part, 0), (ssize_t)part);
    char id[256], etags[3][128];
    create_upload(s3, "mpu/whole", id);
    upload_part(s3, "mpu/whole", id, 1, rn_s3_mem(a, part), etags[0]);
    upload_part(s3, "mpu/whole", id, 2, rn_s3_file(fd, 0, part), etags[1]);
    got g = {0};
    assert_non_null(
        rn_s3_mpu_part_copy(s3, "mpu/whole", id, 3, "mpu/source", 1000, 200000, on_result, &g));
    wait_for(&g);
    expect_ok(&g);
    snprintf(etags[2], sizeof etags[2], "%s", g.etag);
    rn_s3_part parts[] = {{1, etags[0]}, {2, etags[1]}, {3, etags[2]}};
    memset(&g, 0, sizeof g);
    assert_non_null(rn_s3_mpu_complete(s3, "mpu/whole", id, parts, 3, on_result, &g));
    wait_for(&g);
    expect_ok(&g);
    assert_true(strlen(g.etag) > 2);
    size_t total = 2 * part + 200000;
    uint8_t *buf = malloc(total);
    get_into(s3, "mpu/whole", 0, total, buf, &g);
    expect_ok(&g);
    assert_int_equal(g.object_size, total);
    assert_memory_equal(buf, a, part);
    assert_memory_equal(buf + part, b, part);
    assert_memory_equal(buf + 2 * part, src + 1000, 200000);

    /* a copy range past the source's end, a missing source */
    create_upload(s3, "mpu/bad", id);
    memset(&g, 0, sizeof g);
    assert_non_null(
        rn_s3_mpu_part_copy(s3, "mpu/bad", id, 1, "mpu/source", 299999, 2, on_result, &g));
    wait_for(&g);
    expect(&g, RN_S3_FAILED, "InvalidArgument");
    memset(&g, 0, sizeof g);
    assert_non_null(rn_s3_mpu_part_copy(s3, "mpu/bad", id, 1, "mpu/none", 0, 2, on_result, &g));
    wait_for(&g);
    expect(&g, RN_S3_NOT_FOUND, "NoSuchKey");
    /* abort: then the upload is gone */
    memset(&g, 0, sizeof g);
    assert_non_null(rn_s3_mpu_abort(s3, "mpu/bad", id, on_result, &g));
    wait_for(&g);
    expect_ok(&g);
    assert_int_equal(g.status, 204);
    memset(&g, 0, sizeof g);
    assert_non_null(rn_s3_mpu_part(s3, "mpu/bad", id, 1, rn_s3_mem("x", 1), on_result, &g));
    wait_for(&g);
    expect(&g, RN_S3_NOT_FOUND, "NoSuchUpload");
    memset(&g, 0, sizeof g);
    assert_non_null(rn_s3_mpu_abort(s3, "mpu/bad", id, on_result, &g));
    wait_for(&g);
    expect(&g, RN_S3_NOT_FOUND, "NoSuchUpload");
    close(fd);
    free(a);
    free(b);
    free(src);
    free(buf);
    close_client(s3);
}

/* s3rver's own answers where the proxy has fakes. */
static void test_s3rver_gaps(void **state) {
    (void)state;
    control("POST", "/config", "{\"fake_upload_part_copy\":false,\"fake_abort\":false}");
    rn_s3 *s3 = client(0);
    put(s3, "gap/source", "0123456789", 10);
    char id[256];
    create_upload(s3, "gap/target", id);
    got g = {0};
    assert_non_null(
        rn_s3_mpu_part_copy(s3, "gap/target", id, 1, "gap/source", 0, 5, on_result, &g));
    wait_for(&g);
    expect(&g, RN_S3_FAILED, "NotImplemented");
    assert_int_equal(g.status, 501);
    memset(&g, 0, sizeof g);
    assert_non_null(rn_s3_mpu_abort(s3, "gap/target", id, on_result, &g));
    wait_for(&g);
    expect(&g, RN_S3_FAILED, "MethodNotAllowed");
    assert_int_equal(g.status, 405);
    /* s3rver answers Range: bytes=0-0 with the whole object; the client
     * refuses more bytes than it asked for */
    control("POST", "/config", "{\"fix_first_byte_range\":false}");
    uint8_t byte[1];
    get_into(s3, "gap/source", 0, 1, byte, &g);
    expect(&g, RN_S3_FAILED, "ResponseTooLarge");
    control("POST", "/config", "{\"fix_first_byte_range\":true}");
    get_into(s3, "gap/source", 0, 1, byte, &g);
    expect_ok(&g);
    assert_int_equal(byte[0], '0');
    close_client(s3);
}

/* A second endpoint, started with extra environment settings. */
typedef struct {
    char dir[512], endpoint[512], vhost_endpoint[512], control[512], secret[512], token[512],
        ca_file[512];
} second_endpoint;

static void start_endpoint(second_endpoint *ep, const char *name, const char *settings) {
    memset(ep, 0, sizeof *ep);
    snprintf(ep->dir, sizeof ep->dir, "%s/%s", getenv("S3_TEST_DIR"), name);
    char cmd[1500], path[600], line[700];
    snprintf(cmd, sizeof cmd, "%s tests/s3/start.sh '%s' >/dev/null", settings, ep->dir);
    assert_int_equal(system(cmd), 0);
    snprintf(path, sizeof path, "%s/env", ep->dir);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    static const struct {
        const char *prefix;
        size_t field;
    } fields[] = {{"S3_ENDPOINT=", offsetof(second_endpoint, endpoint)},
                  {"S3_VHOST_ENDPOINT=", offsetof(second_endpoint, vhost_endpoint)},
                  {"S3_CONTROL=", offsetof(second_endpoint, control)},
                  {"AWS_SECRET_ACCESS_KEY=", offsetof(second_endpoint, secret)},
                  {"AWS_SESSION_TOKEN=", offsetof(second_endpoint, token)},
                  {"S3_CA_FILE=", offsetof(second_endpoint, ca_file)}};
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
            size_t n = strlen(fields[i].prefix);
            if (strncmp(line, fields[i].prefix, n) == 0)
                snprintf((char *)ep + fields[i].field, 512, "%.500s", line + n);
        }
    }
    fclose(f);
}

static void stop_endpoint(second_endpoint *ep) {
    char cmd[600];
    snprintf(cmd, sizeof cmd, "tests/s3/stop.sh '%s'", ep->dir);
    assert_int_equal(system(cmd), 0);
}

static void test_session_token(void **state) {
    (void)state;
    second_endpoint ep;
    start_endpoint(&ep, "token-endpoint", "S3_TEST_SESSION_TOKEN=FwoGZXIvYXdzEXAMPLETOKEN/+=");
    assert_string_equal(ep.token, "FwoGZXIvYXdzEXAMPLETOKEN/+=");
    rn_s3_config cfg = base_config(ep.endpoint, 0);
    cfg.secret_key = ep.secret;
    cfg.session_token = ep.token;
    rn_s3 *s3 = client_with(&cfg);
    put(s3, "token/obj", "abc", 3);
    close_client(s3);
    cfg.session_token = NULL;
    s3 = client_with(&cfg);
    got g = {0};
    assert_non_null(rn_s3_put(s3, "token/obj", rn_s3_mem("abc", 3), on_result, &g));
    wait_for(&g);
    expect(&g, RN_S3_FAILED, "InvalidToken");
    close_client(s3);
    stop_endpoint(&ep);
}

/* Reads a control URL's answer (at most cap - 1 bytes). */
static size_t keep(char *p, size_t s, size_t n, void *u) {
    rn_buf *b = u;
    rn_buf_append(b, p, s * n);
    return s * n;
}

static char *control_get(const char *control_url, const char *path) {
    char url[600];
    snprintf(url, sizeof url, "%s%s", control_url, path);
    rn_buf b = {0};
    CURL *e = curl_easy_init();
    curl_easy_setopt(e, CURLOPT_URL, url);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, keep);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, 10000L);
    assert_int_equal(curl_easy_perform(e), CURLE_OK);
    curl_easy_cleanup(e);
    rn_buf_append_byte(&b, 0);
    return (char *)b.data;
}

/* An https endpoint: signed and UNSIGNED-PAYLOAD bodies, both addressing
 * styles, and a certificate the client cannot verify. */
static void test_tls(void **state) {
    (void)state;
    second_endpoint ep;
    start_endpoint(&ep, "tls-endpoint", "S3_TEST_TLS=1");
    assert_true(strncmp(ep.endpoint, "https://", 8) == 0);
    size_t len = 3 * 1024 * 1024 + 5;
    uint8_t *data = pattern(len, 9), *buf = malloc(len);
    for (int vhost = 0; vhost < 2; vhost++) {
        for (int unsigned_payload = 0; unsigned_payload < 2; unsigned_payload++) {
            rn_s3_config cfg = base_config(vhost ? ep.vhost_endpoint : ep.endpoint, vhost);
            cfg.secret_key = ep.secret;
            cfg.ca_file = ep.ca_file;
            cfg.unsigned_payload = unsigned_payload;
            rn_s3 *s3 = client_with(&cfg);
            put(s3, "tls/obj", data, len);
            got g;
            get_into(s3, "tls/obj", 1, len - 1, buf, &g);
            expect_ok(&g);
            assert_memory_equal(buf, data + 1, len - 1);
            close_client(s3);
        }
    }
    char *recent = control_get(ep.control, "/requests");
    assert_non_null(strstr(recent, "\"unsigned\": true"));
    assert_non_null(strstr(recent, "\"unsigned\": false"));
    free(recent);
    rn_s3_config cfg = base_config(ep.endpoint, 0);
    cfg.secret_key = ep.secret;
    rn_s3 *s3 = client_with(&cfg); /* the system's CAs do not know the test certificate */
    got g;
    get_into(s3, "tls/obj", 0, 10, buf, &g);
    expect(&g, RN_S3_FAILED, "TLSVerifyFailed");
    close_client(s3);
    free(data);
    free(buf);
    stop_endpoint(&ep);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_object_calls_path_style, reset_endpoint),
        cmocka_unit_test_setup(test_object_calls_virtual_host, reset_endpoint),
        cmocka_unit_test_setup(test_put_from_fd, reset_endpoint),
        cmocka_unit_test_setup(test_odd_keys_path_style, reset_endpoint),
        cmocka_unit_test_setup(test_odd_keys_virtual_host, reset_endpoint),
        cmocka_unit_test_setup(test_list_and_delete_many, reset_endpoint),
        cmocka_unit_test_setup(test_multipart, reset_endpoint),
        cmocka_unit_test_setup(test_s3rver_gaps, reset_endpoint),
        cmocka_unit_test_setup(test_session_token, reset_endpoint),
        cmocka_unit_test_setup(test_tls, reset_endpoint),
    };
    return s3_endpoint_run(tests, sizeof tests / sizeof tests[0]);
}
