/*
 * s3_endpoint.h - the harness the S3 client's tests share (test_s3_client.c,
 * test_s3_faults.c): the test endpoint (s3rver behind the SigV4-verifying,
 * fault-injecting proxy of tests/s3/, which tests/s3/run_with_endpoint.sh
 * starts and describes in S3_ENDPOINT, S3_VHOST_ENDPOINT, S3_CONTROL,
 * S3_BUCKET, S3_TEST_DIR and AWS_*), clients on one loop, results copied in
 * their callbacks and waited for under a watchdog.
 */
#ifndef RUNNEL_TESTS_S3_ENDPOINT_H
#define RUNNEL_TESTS_S3_ENDPOINT_H

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <uv.h>

#include "tiers/s3/creds.h"
#include "tiers/s3/s3.h"

#define WATCHDOG_MS 30000 /* the longest wait for one call's result */

extern uv_loop_t loop;    /* every client's loop */
extern rn_s3_creds creds; /* from the environment */
extern char *region;      /* from the environment */

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

/* The endpoint's control port: a request that must answer 200. */
void control(const char *method, const char *path, const char *json);
/* Arms the proxy's faults (a JSON list, see tests/s3/). */
void faults(const char *json);
/* cmocka setup: no faults, the proxy's fakes on (each test starts there). */
int reset_endpoint(void **state);

/* A client configuration for endpoint (vhost: virtual-host addressing). */
rn_s3_config base_config(const char *endpoint, int vhost);
/* A client made from cfg, or the test fails. */
rn_s3 *client_with(const rn_s3_config *cfg);
/* A client of the path-style (0) or virtual-host (1) endpoint. */
rn_s3 *client(int vhost);
/* Stops s3, runs the loop dry, frees it. */
void close_client(rn_s3 *s3);

/* The callback that copies a result into the got its arg points to. */
void on_result(void *arg, const rn_s3_result *r);
/* Runs the loop until g's callback ran once (fails after WATCHDOG_MS). */
void wait_for(got *g);
/* Fails unless g has this outcome and code ("" for none). */
void expect(const got *g, rn_s3_outcome outcome, const char *code);
void expect_ok(const got *g);

/* Calls that must succeed: a put from memory, a multipart upload's
 * creation (id: 256 bytes) and one part (etag: 128 bytes). */
void put(rn_s3 *s3, const char *key, const void *data, size_t len);
void create_upload(rn_s3 *s3, const char *key, char *id);
void upload_part(rn_s3 *s3, const char *key, const char *id, uint32_t n, rn_s3_source src,
                 char *etag);
/* A ranged GET into buf; its result in g, whatever it is. */
void get_into(rn_s3 *s3, const char *key, uint64_t off, uint64_t len, uint8_t *buf, got *g);

/* len pseudo-random bytes from seed (malloc'd). */
uint8_t *pattern(size_t len, unsigned seed);
/* An unlinked temporary file under S3_TEST_DIR. */
int temp_file(void);

/* A test program's main: checks the environment, loads the credentials,
 * runs the n tests on the loop; returns what main returns. */
int s3_endpoint_run(const struct CMUnitTest *tests, size_t n);

#endif
