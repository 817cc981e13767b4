/*
 * test_s3_client.c - the S3 client (src/tiers/s3/s3.h) against the S3
 * test endpoint: s3rver behind the SigV4-verifying, fault-injecting proxy
 * (tests/s3/), which tests/s3/run_with_endpoint.sh starts and describes in
 * the environment (S3_ENDPOINT, S3_VHOST_ENDPOINT, S3_CONTROL, S3_BUCKET,
 * AWS_*). Every request the client makes has its signature recomputed by
 * botocore in the proxy; a wrong one fails the call (403) and the test.
 *
 * Covered: every call (put from memory and from an fd range, ranged GET
 * into a buffer and into an fd, head, delete, delete-many, list with
 * continuation, create/part/part-copy/complete/abort of multipart
 * uploads), odd keys, path-style and virtual-host addressing, a session
 * token, https with signed and UNSIGNED-PAYLOAD bodies and an unverifiable
 * certificate, both paths of each fake of the proxy (UploadPartCopy, Abort,
 * DeleteObjects faked, and s3rver's own answers), the typed results of
 * faults (unreachable, refused, 500, 503 SlowDown, 403, slow past the
 * timeout, a cut or stalled body, a reset, an Error inside a 200, an
 * answer past its bound), the bound on calls in flight, cancel, and a
 * failing request's log line carrying no secret.
 *
 * Every wait is bounded (a watchdog per call).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <curl/curl.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <uv.h>

#include "tiers/s3/creds.h"
#include "tiers/s3/s3.h"
#include "util/buf.h"
#include "util/clock.h"

#define WATCHDOG_MS 30000

static uv_loop_t loop;
static rn_s3_creds creds;
static char *region;

/* ---- the endpoint's control port ---- */

static size_t discard(char *p, size_t s, size_t n, void *u) {
    (void)p;
    (void)u;
    return s * n;
}

static void control(const char *method, const char *path, const char *json) {
    char url[512];
    snprintf(url, sizeof url, "%s%s", getenv("S3_CONTROL"), path);
    CURL *e = curl_easy_init();
    curl_easy_setopt(e, CURLOPT_URL, url);
    curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, discard);
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, 10000L);
    if (json)
        curl_easy_setopt(e, CURLOPT_POSTFIELDS, json);
    assert_int_equal(curl_easy_perform(e), CURLE_OK);
    long status = 0;
    curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &status);
    assert_int_equal(status, 200);
    curl_easy_cleanup(e);
}

static void faults(const char *json) {
    control("POST", "/faults", json);
}

static int reset_endpoint(void **state) {
    (void)state;
    control("DELETE", "/faults", NULL);
    control("POST", "/config",
            "{\"fake_upload_part_copy\":true,\"fake_abort\":true,\"fake_delete_objects\":true,"
            "\"fix_first_byte_range\":true}");
    return 0;
}

/* ---- clients and waiting for results ---- */

static rn_s3_config base_config(const char *endpoint, int vhost) {
    rn_s3_config cfg;
    rn_s3_config_defaults(&cfg);
    cfg.endpoint = endpoint;
    cfg.bucket = getenv("S3_BUCKET");
    cfg.region = region;
    cfg.virtual_host = vhost;
    cfg.access_key = creds.access_key;
    cfg.secret_key = creds.secret_key;
    cfg.session_token = creds.session_token;
    cfg.timeout_ms = 10000;
    return cfg;
}

static rn_s3 *client_with(const rn_s3_config *cfg) {
    char err[256] = "";
    rn_s3 *s3 = rn_s3_new(&loop, cfg, err, sizeof err);
    if (!s3)
        fail_msg("rn_s3_new: %s", err);
    return s3;
}

static rn_s3 *client(int vhost) {
    rn_s3_config cfg = base_config(getenv(vhost ? "S3_VHOST_ENDPOINT" : "S3_ENDPOINT"), vhost);
    return client_with(&cfg);
}

static void close_client(rn_s3 *s3) {
    rn_s3_stop(s3);
    uv_run(&loop, UV_RUN_DEFAULT);
    rn_s3_free(s3);
}

/* A copy of a result, taken in the callback. */
typedef struct {
    int done;
    rn_s3_outcome outcome;
    long status;
    char code[64], etag[128], upload_id[256], token[1100];
    uint64_t length, object_size;
    char keys[64][256];
    uint64_t sizes[64];
    size_t nkeys, nkey_errors;
    int truncated;
} got;

static void on_result(void *arg, const rn_s3_result *r) {
    got *g = arg;
    g->done++;
    g->outcome = r->outcome;
    g->status = r->status;
    snprintf(g->code, sizeof g->code, "%s", r->code);
    snprintf(g->etag, sizeof g->etag, "%s", r->etag);
    snprintf(g->upload_id, sizeof g->upload_id, "%s", r->upload_id);
    snprintf(g->token, sizeof g->token, "%s", r->next_token);
    g->length = r->length;
    g->object_size = r->object_size;
    g->truncated = r->truncated;
    g->nkey_errors = r->nkey_errors;
    g->nkeys = r->nentries < 64 ? r->nentries : 64;
    for (size_t i = 0; i < g->nkeys; i++) {
        snprintf(g->keys[i], sizeof g->keys[i], "%s", r->entries[i].key);
        g->sizes[i] = r->entries[i].size;
    }
}

/* Runs the loop until g's callback ran (or fails after the watchdog). */
static void wait_for(got *g) {
    int64_t deadline = rn_now_ms() + WATCHDOG_MS;
    while (!g->done && rn_now_ms() < deadline)
        uv_run(&loop, UV_RUN_ONCE);
    if (!g->done)
        fail_msg("no result within %d ms", WATCHDOG_MS);
    assert_int_equal(g->done, 1);
}

static void expect(const got *g, rn_s3_outcome outcome, const char *code) {
    if (g->outcome != outcome || strcmp(g->code, code) != 0)
        fail_msg("got %s %s (HTTP %ld), wanted %s %s", rn_s3_outcome_name(g->outcome), g->code,
                 g->status, rn_s3_outcome_name(outcome), code);
}

static void expect_ok(const got *g) {
    expect(g, RN_S3_OK, "");
}

static void put(rn_s3 *s3, const char *key, const void *data, size_t len) {
    got g = {0};
    assert_non_null(rn_s3_put(s3, key, rn_s3_mem(data, len), on_result, &g));
    wait_for(&g);
    expect_ok(&g);
}

static void get_into(rn_s3 *s3, const char *key, uint64_t off, uint64_t len, uint8_t *buf, got *g) {
    memset(g, 0, sizeof *g);
    assert_non_null(rn_s3_get(s3, key, off, len, rn_s3_into(buf), on_result, g));
    wait_for(g);
}

static uint8_t *pattern(size_t len, unsigned seed) {
    uint8_t *p = malloc(len);
    uint32_t x = seed * 2654435761u + 1;
    for (size_t i = 0; i < len; i++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        p[i] = (uint8_t)x;
    }
    return p;
}

static int temp_file(void) {
    char path[256];
    snprintf(path, sizeof path, "%s/s3-client-XXXXXX", getenv("S3_TEST_DIR"));
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    unlink(path);
    return fd;
}

/* ---- the calls ---- */

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

static void upload_part(rn_s3 *s3, const char *key, const char *id, uint32_t n, rn_s3_source src,
                        char *etag) {
    got g = {0};
    assert_non_null(rn_s3_mpu_part(s3, key, id, n, src, on_result, &g));
    wait_for(&g);
    expect_ok(&g);
    snprintf(etag, 128, "%s", g.etag);
}

static void create_upload(rn_s3 *s3, const char *key, char *id) {
    got g = {0};
    assert_non_null(rn_s3_mpu_create(s3, key, on_result, &g));
    wait_for(&g);
    expect_ok(&g);
    assert_true(strlen(g.upload_id) > 0);
    snprintf(id, 256, "%s", g.upload_id);
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

/* ---- faults ---- */

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
    if (!getenv("S3_ENDPOINT") || !getenv("S3_CONTROL") || !getenv("S3_TEST_DIR")) {
        fprintf(stderr, "run through tests/s3/run_with_endpoint.sh\n");
        return 1;
    }
    char err[256];
    if (rn_s3_creds_load(&creds, err, sizeof err) != 0 || !(region = rn_s3_region_from_env())) {
        fprintf(stderr, "credentials: %s\n", err);
        return 1;
    }
    uv_loop_init(&loop);
    curl_global_init(CURL_GLOBAL_DEFAULT);
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
        cmocka_unit_test_setup(test_unreachable, reset_endpoint),
        cmocka_unit_test_setup(test_error_answers, reset_endpoint),
        cmocka_unit_test_setup(test_slow_cut_reset, reset_endpoint),
        cmocka_unit_test_setup(test_answer_bound, reset_endpoint),
        cmocka_unit_test_setup(test_bounded_in_flight_and_cancel, reset_endpoint),
        cmocka_unit_test_setup(test_stop_inside_callback, reset_endpoint),
        cmocka_unit_test_setup(test_failure_log_has_no_secret, reset_endpoint),
        cmocka_unit_test(test_bad_configurations),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    curl_global_cleanup();
    uv_loop_close(&loop);
    free(region);
    rn_s3_creds_clear(&creds);
    return failed;
}
