/*
 * s3_endpoint.c - the harness the S3 client's tests share (see
 * s3_endpoint.h): the endpoint's control port, clients, results and the
 * watchdog, and the programs' common main.
 */
#include "s3_endpoint.h"

#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/clock.h"

uv_loop_t loop;
rn_s3_creds creds;
char *region;

/* ---- the endpoint's control port ---- */

static size_t discard(char *p, size_t s, size_t n, void *u) {
    (void)p;
    (void)u;
    return s * n;
}

void control(const char *method, const char *path, const char *json) {
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

void faults(const char *json) {
    control("POST", "/faults", json);
}

int reset_endpoint(void **state) {
    (void)state;
    control("DELETE", "/faults", NULL);
    control("POST", "/config",
            "{\"fake_upload_part_copy\":true,\"fake_abort\":true,\"fake_delete_objects\":true,"
            "\"fix_first_byte_range\":true}");
    return 0;
}

/* ---- clients and waiting for results ---- */

rn_s3_config base_config(const char *endpoint, int vhost) {
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

rn_s3 *client_with(const rn_s3_config *cfg) {
    char err[256] = "";
    rn_s3 *s3 = rn_s3_new(&loop, cfg, err, sizeof err);
    if (!s3)
        fail_msg("rn_s3_new: %s", err);
    return s3;
}

rn_s3 *client(int vhost) {
    rn_s3_config cfg = base_config(getenv(vhost ? "S3_VHOST_ENDPOINT" : "S3_ENDPOINT"), vhost);
    return client_with(&cfg);
}

void close_client(rn_s3 *s3) {
    rn_s3_stop(s3);
    uv_run(&loop, UV_RUN_DEFAULT);
    rn_s3_free(s3);
}

void on_result(void *arg, const rn_s3_result *r) {
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
void wait_for(got *g) {
    int64_t deadline = rn_now_ms() + WATCHDOG_MS;
    while (!g->done && rn_now_ms() < deadline)
        uv_run(&loop, UV_RUN_ONCE);
    if (!g->done)
        fail_msg("no result within %d ms", WATCHDOG_MS);
    assert_int_equal(g->done, 1);
}

void expect(const got *g, rn_s3_outcome outcome, const char *code) {
    if (g->outcome != outcome || strcmp(g->code, code) != 0)
        fail_msg("got %s %s (HTTP %ld), wanted %s %s", rn_s3_outcome_name(g->outcome), g->code,
                 g->status, rn_s3_outcome_name(outcome), code);
}

void expect_ok(const got *g) {
    expect(g, RN_S3_OK, "");
}

void put(rn_s3 *s3, const char *key, const void *data, size_t len) {
    got g = {0};
    assert_non_null(rn_s3_put(s3, key, rn_s3_mem(data, len), on_result, &g));
    wait_for(&g);
    expect_ok(&g);
}

void get_into(rn_s3 *s3, const char *key, uint64_t off, uint64_t len, uint8_t *buf, got *g) {
    memset(g, 0, sizeof *g);
    assert_non_null(rn_s3_get(s3, key, off, len, rn_s3_into(buf), on_result, g));
    wait_for(g);
}

uint8_t *pattern(size_t len, unsigned seed) {
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

int temp_file(void) {
    char path[256];
    snprintf(path, sizeof path, "%s/s3-client-XXXXXX", getenv("S3_TEST_DIR"));
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    unlink(path);
    return fd;
}

void upload_part(rn_s3 *s3, const char *key, const char *id, uint32_t n, rn_s3_source src,
                 char *etag) {
    got g = {0};
    assert_non_null(rn_s3_mpu_part(s3, key, id, n, src, on_result, &g));
    wait_for(&g);
    expect_ok(&g);
    snprintf(etag, 128, "%s", g.etag);
}

void create_upload(rn_s3 *s3, const char *key, char *id) {
    got g = {0};
    assert_non_null(rn_s3_mpu_create(s3, key, on_result, &g));
    wait_for(&g);
    expect_ok(&g);
    assert_true(strlen(g.upload_id) > 0);
    snprintf(id, 256, "%s", g.upload_id);
}

int s3_endpoint_run(const struct CMUnitTest *tests, size_t n) {
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
    int failed = _cmocka_run_group_tests("s3_endpoint", tests, n, NULL, NULL);
    curl_global_cleanup();
    uv_loop_close(&loop);
    free(region);
    rn_s3_creds_clear(&creds);
    return failed;
}
