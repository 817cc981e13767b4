/*
 * test_gw_quota.c - unit tests for src/gateway/quota.h: a tenant's quotas
 * against its limits, on a fake clock (now_ms is passed in), and the
 * counters behind the metrics and the usage log.
 *
 * How: written from the header and docs/GATEWAY.md's limits table, not
 * from the code. The token bucket (the burst at once, refill at the rate,
 * never past the burst, Retry-After rounded up to whole seconds); byte
 * rates in and out (admitted up to a second's worth of debt, refused past
 * it until repaid, after the Retry-After it names); live reads, uploads
 * and upload bytes held at once and given back exactly on release; the
 * gateway-wide upload budget across tenants, a refusal holding nothing;
 * the usage log's JSON lines (parsed with jansson, counts per bucket,
 * buckets that are no bucket id under "-", reset by each call) and the
 * Prometheus lines (per tenant, refusals summed per code).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/quota.h"
#include "util/text.h"

#define T0 UINT64_C(1000000) /* the fake clock's start, in ms */

static const rn_quota_ask plain_ask = {0};

/* Admits ask at now; returns the refusal (0: admitted, *hold filled). */
static rn_error admit(rn_quotas *q, rn_tenant_use *u, const rn_tenant_limits *lim,
                      const rn_quota_ask *ask, uint64_t now, rn_quota_hold *hold, uint64_t *ra) {
    uint64_t ignored;
    return rn_quota_admit(q, u, lim, ask, now, hold, ra ? ra : &ignored);
}

/* Admits a plain request at now and ends it at once with no bytes. */
static rn_error request(rn_quotas *q, rn_tenant_use *u, const rn_tenant_limits *lim, uint64_t now,
                        uint64_t *ra) {
    rn_quota_hold h;
    rn_error e = admit(q, u, lim, &plain_ask, now, &h, ra);
    if (e == 0)
        rn_quota_release(q, &h, lim, NULL, 0, 0, 0, now);
    return e;
}

static void test_state_is_per_tenant_name(void **state) {
    (void)state;
    rn_quotas *q = rn_quotas_new(0);
    rn_tenant_use *a = rn_quota_use(q, "acme");
    assert_non_null(a);
    assert_ptr_equal(rn_quota_use(q, "acme"), a);
    assert_ptr_not_equal(rn_quota_use(q, "beta"), a);
    rn_quotas_free(q);
}

static void test_unbounded_limits_admit_everything(void **state) {
    (void)state;
    rn_quotas *q = rn_quotas_new(0);
    rn_tenant_use *u = rn_quota_use(q, "acme");
    static const rn_tenant_limits lim = {0};
    const rn_quota_ask big = {.live_read = 1, .upload = 1, .upload_bytes = UINT64_C(1) << 40};
    rn_quota_hold holds[100];
    for (int i = 0; i < 100; i++)
        assert_int_equal(admit(q, u, &lim, &big, T0, &holds[i], NULL), 0);
    for (int i = 0; i < 100; i++)
        rn_quota_release(q, &holds[i], &lim, "orders", 6, UINT64_C(1) << 30, UINT64_C(1) << 30, T0);
    assert_int_equal(request(q, u, &lim, T0, NULL), 0);
    rn_quotas_free(q);
}

static void test_token_bucket(void **state) {
    (void)state;
    rn_quotas *q = rn_quotas_new(0);
    rn_tenant_use *u = rn_quota_use(q, "acme");
    const rn_tenant_limits lim = {.requests_per_second = 2, .burst = 4};
    for (int i = 0; i < 4; i++)
        assert_int_equal(request(q, u, &lim, T0, NULL), 0);
    uint64_t ra = 0;
    assert_int_equal(request(q, u, &lim, T0, &ra), RN_E_GW_RATE_LIMITED);
    assert_int_equal(ra, 1); /* half a second, rounded up */
    ra = 0;
    assert_int_equal(request(q, u, &lim, T0 + 499, &ra), RN_E_GW_RATE_LIMITED);
    assert_int_equal(ra, 1); /* a millisecond, rounded up */
    assert_int_equal(request(q, u, &lim, T0 + 500, NULL), 0);
    assert_int_equal(request(q, u, &lim, T0 + 500, NULL), RN_E_GW_RATE_LIMITED);
    assert_int_equal(request(q, u, &lim, T0 + 1500, NULL), 0);
    assert_int_equal(request(q, u, &lim, T0 + 1500, NULL), 0);
    assert_int_equal(request(q, u, &lim, T0 + 1500, NULL), RN_E_GW_RATE_LIMITED);
    /* a long idle fills the bucket to the burst, not past it */
    for (int i = 0; i < 4; i++)
        assert_int_equal(request(q, u, &lim, T0 + 100000, NULL), 0);
    assert_int_equal(request(q, u, &lim, T0 + 100000, NULL), RN_E_GW_RATE_LIMITED);

    /* another tenant's bucket is its own */
    rn_tenant_use *b = rn_quota_use(q, "beta");
    const rn_tenant_limits one = {.requests_per_second = 1, .burst = 1};
    assert_int_equal(request(q, b, &one, T0 + 100000, NULL), 0);
    ra = 0;
    assert_int_equal(request(q, b, &one, T0 + 100001, &ra), RN_E_GW_RATE_LIMITED);
    assert_int_equal(ra, 1);
    assert_int_equal(request(q, b, &one, T0 + 100999, NULL), RN_E_GW_RATE_LIMITED);
    assert_int_equal(request(q, b, &one, T0 + 101000, NULL), 0);
    rn_quotas_free(q);
}

/* A refusal of the byte rates: 429 RATE_LIMITED, whichever rn_error. */
static void assert_rate_refusal(rn_error e) {
    assert_true(e != 0);
    assert_int_equal(rn_error_status(e), 429);
    assert_string_equal(rn_error_code(e), "RATE_LIMITED");
}

/* Charges bytes in (or out) at now through one admitted request. */
static void charge(rn_quotas *q, rn_tenant_use *u, const rn_tenant_limits *lim, uint64_t in,
                   uint64_t out, uint64_t now) {
    rn_quota_hold h;
    assert_int_equal(admit(q, u, lim, &plain_ask, now, &h, NULL), 0);
    rn_quota_release(q, &h, lim, "orders", 6, in, out, now);
}

static void byte_rate(int inbound) {
    rn_quotas *q = rn_quotas_new(0);
    rn_tenant_use *u = rn_quota_use(q, inbound ? "in" : "out");
    rn_tenant_limits lim = {0};
    *(inbound ? &lim.bytes_in_per_second : &lim.bytes_out_per_second) = 1000;
    /* a second's worth of debt is allowed */
    charge(q, u, &lim, inbound ? 1000 : 0, inbound ? 0 : 1000, T0);
    assert_int_equal(request(q, u, &lim, T0, NULL), 0);
    /* repaid after a second; then one byte more than a second's worth */
    charge(q, u, &lim, inbound ? 1001 : 0, inbound ? 0 : 1001, T0 + 1000);
    uint64_t ra = 0;
    assert_rate_refusal(request(q, u, &lim, T0 + 1000, &ra));
    assert_true(ra >= 1 && ra <= 2); /* 1 ms to a second's worth, 1.001 s to nothing */
    assert_int_equal(request(q, u, &lim, T0 + 2000, NULL), 0);

    /* 3500 bytes: owes more than a second's worth until 2.5 s have passed */
    const uint64_t t = T0 + 10000;
    charge(q, u, &lim, inbound ? 3500 : 0, inbound ? 0 : 3500, t);
    ra = 0;
    assert_rate_refusal(request(q, u, &lim, t, &ra));
    assert_true(ra >= 3 && ra <= 4); /* repays to a second's worth (2.5 s) or all (3.5 s) */
    ra = 0;
    assert_rate_refusal(request(q, u, &lim, t + 2400, &ra));
    assert_true(ra >= 1 && ra <= 2); /* 0.1 s or 1.1 s, rounded up */
    assert_int_equal(request(q, u, &lim, t + 2500, NULL), 0);
    /* the other direction is not limited */
    charge(q, u, &lim, inbound ? 0 : 1 << 30, inbound ? 1 << 30 : 0, t + 2500);
    assert_int_equal(request(q, u, &lim, t + 2500, NULL), 0);
    rn_quotas_free(q);
}

static void test_bytes_in_rate(void **state) {
    (void)state;
    byte_rate(1);
}

static void test_bytes_out_rate(void **state) {
    (void)state;
    byte_rate(0);
}

static void test_byte_debt_waits_its_retry_after(void **state) {
    (void)state;
    rn_quotas *q = rn_quotas_new(0);
    rn_tenant_use *u = rn_quota_use(q, "acme");
    const rn_tenant_limits lim = {.bytes_in_per_second = 100};
    charge(q, u, &lim, 1050, 0, T0); /* owes 10.5 s, 9.5 s past a second's worth */
    uint64_t ra = 0;
    assert_rate_refusal(request(q, u, &lim, T0, &ra));
    assert_true(ra >= 10 && ra <= 11);
    assert_int_equal(request(q, u, &lim, T0 + ra * 1000, NULL), 0);
    rn_quotas_free(q);
}

static void test_live_reads_and_uploads(void **state) {
    (void)state;
    rn_quotas *q = rn_quotas_new(0);
    rn_tenant_use *u = rn_quota_use(q, "acme");
    const rn_tenant_limits lim = {.live_reads = 2, .uploads = 1};
    const rn_quota_ask live = {.live_read = 1};
    const rn_quota_ask upload = {.upload = 1, .upload_bytes = 10};
    rn_quota_hold l1, l2, l3, up, up2, other;
    assert_int_equal(admit(q, u, &lim, &live, T0, &l1, NULL), 0);
    assert_int_equal(admit(q, u, &lim, &live, T0, &l2, NULL), 0);
    assert_int_equal(admit(q, u, &lim, &live, T0, &l3, NULL), RN_E_GW_LIVE_READS_EXHAUSTED);
    assert_int_equal(admit(q, u, &lim, &upload, T0, &up, NULL), 0);
    assert_int_equal(admit(q, u, &lim, &upload, T0, &up2, NULL), RN_E_GW_UPLOADS_EXHAUSTED);
    /* a request that is neither is not held back by them */
    assert_int_equal(admit(q, u, &lim, &plain_ask, T0, &other, NULL), 0);
    rn_quota_release(q, &other, &lim, NULL, 0, 0, 0, T0);
    /* another tenant's are its own */
    rn_tenant_use *b = rn_quota_use(q, "beta");
    assert_int_equal(admit(q, b, &lim, &live, T0, &other, NULL), 0);
    rn_quota_release(q, &other, &lim, NULL, 0, 0, 0, T0);
    /* release gives back one each */
    rn_quota_release(q, &l1, &lim, "orders", 6, 0, 100, T0 + 1);
    assert_int_equal(admit(q, u, &lim, &live, T0 + 1, &l3, NULL), 0);
    assert_int_equal(admit(q, u, &lim, &live, T0 + 1, &l1, NULL), RN_E_GW_LIVE_READS_EXHAUSTED);
    rn_quota_release(q, &up, &lim, "orders", 6, 10, 0, T0 + 1);
    assert_int_equal(admit(q, u, &lim, &upload, T0 + 1, &up2, NULL), 0);
    rn_quota_release(q, &up2, &lim, "orders", 6, 10, 0, T0 + 2);
    rn_quota_release(q, &l2, &lim, "orders", 6, 0, 0, T0 + 2);
    rn_quota_release(q, &l3, &lim, "orders", 6, 0, 0, T0 + 2);
    /* all given back: the limits' worth at once again */
    assert_int_equal(admit(q, u, &lim, &live, T0 + 2, &l1, NULL), 0);
    assert_int_equal(admit(q, u, &lim, &live, T0 + 2, &l2, NULL), 0);
    assert_int_equal(admit(q, u, &lim, &live, T0 + 2, &l3, NULL), RN_E_GW_LIVE_READS_EXHAUSTED);
    rn_quotas_free(q);
}

static void test_upload_bytes(void **state) {
    (void)state;
    rn_quotas *q = rn_quotas_new(0);
    rn_tenant_use *u = rn_quota_use(q, "acme");
    const rn_tenant_limits lim = {.upload_bytes = 1000};
    const rn_quota_ask a600 = {.upload = 1, .upload_bytes = 600};
    const rn_quota_ask a500 = {.upload = 1, .upload_bytes = 500};
    const rn_quota_ask a400 = {.upload = 1, .upload_bytes = 400};
    const rn_quota_ask a1 = {.upload = 1, .upload_bytes = 1};
    rn_quota_hold h600, h400, h, h1000;
    assert_int_equal(admit(q, u, &lim, &a600, T0, &h600, NULL), 0);
    assert_int_equal(admit(q, u, &lim, &a500, T0, &h, NULL), RN_E_GW_UPLOAD_BYTES_EXHAUSTED);
    assert_int_equal(admit(q, u, &lim, &a400, T0, &h400, NULL), 0); /* exactly the limit */
    assert_int_equal(admit(q, u, &lim, &a1, T0, &h, NULL), RN_E_GW_UPLOAD_BYTES_EXHAUSTED);
    /* the 600 given back, exactly */
    rn_quota_release(q, &h600, &lim, "orders", 6, 600, 0, T0 + 1);
    assert_int_equal(admit(q, u, &lim, &a600, T0 + 1, &h600, NULL), 0);
    assert_int_equal(admit(q, u, &lim, &a1, T0 + 1, &h, NULL), RN_E_GW_UPLOAD_BYTES_EXHAUSTED);
    rn_quota_release(q, &h600, &lim, "orders", 6, 600, 0, T0 + 2);
    rn_quota_release(q, &h400, &lim, "orders", 6, 400, 0, T0 + 2);
    const rn_quota_ask all = {.upload = 1, .upload_bytes = 1000};
    assert_int_equal(admit(q, u, &lim, &all, T0 + 2, &h1000, NULL), 0);
    rn_quota_release(q, &h1000, &lim, "orders", 6, 1000, 0, T0 + 3);
    rn_quotas_free(q);
}

static void test_upload_budget(void **state) {
    (void)state;
    rn_quotas *q = rn_quotas_new(1000);
    rn_tenant_use *a = rn_quota_use(q, "acme");
    rn_tenant_use *b = rn_quota_use(q, "beta");
    static const rn_tenant_limits none = {0};
    const rn_tenant_limits one_upload = {.uploads = 1};
    const rn_quota_ask a600 = {.upload = 1, .upload_bytes = 600};
    const rn_quota_ask a500 = {.upload = 1, .upload_bytes = 500};
    const rn_quota_ask a400 = {.upload = 1, .upload_bytes = 400};
    rn_quota_hold ha, hb, h;
    assert_int_equal(admit(q, a, &none, &a600, T0, &ha, NULL), 0);
    uint64_t ra = 0;
    assert_int_equal(admit(q, b, &one_upload, &a500, T0, &h, &ra), RN_E_GW_UPLOAD_BUDGET_EXHAUSTED);
    assert_true(ra >= 1); /* every 503 carries Retry-After */
    /* the refusal held nothing: b's one upload is still free */
    assert_int_equal(admit(q, b, &one_upload, &a400, T0, &hb, NULL), 0);
    assert_int_equal(admit(q, a, &none, &a400, T0, &h, NULL), RN_E_GW_UPLOAD_BUDGET_EXHAUSTED);
    /* a's 600 given back, exactly */
    rn_quota_release(q, &ha, &none, "orders", 6, 600, 0, T0 + 1);
    assert_int_equal(admit(q, a, &none, &a600, T0 + 1, &ha, NULL), 0);
    const rn_quota_ask a1 = {.upload = 1, .upload_bytes = 1};
    assert_int_equal(admit(q, a, &none, &a1, T0 + 1, &h, NULL), RN_E_GW_UPLOAD_BUDGET_EXHAUSTED);
    /* a request without a body is not held back by the budget */
    assert_int_equal(admit(q, a, &none, &plain_ask, T0 + 1, &h, NULL), 0);
    rn_quota_release(q, &h, &none, NULL, 0, 0, 0, T0 + 1);
    rn_quota_release(q, &ha, &none, "orders", 6, 600, 0, T0 + 2);
    rn_quota_release(q, &hb, &one_upload, "orders", 6, 400, 0, T0 + 2);
    const rn_quota_ask all = {.upload = 1, .upload_bytes = 1000};
    assert_int_equal(admit(q, b, &one_upload, &all, T0 + 2, &hb, NULL), 0);
    rn_quota_release(q, &hb, &one_upload, "orders", 6, 1000, 0, T0 + 3);
    rn_quotas_free(q);
}

/* The value of the metrics line "series value" (series with its labels),
 * which must appear exactly once; -1 when it is absent. */
static long long metric(const char *text, const char *series) {
    size_t n = strlen(series);
    long long value = -1;
    int seen = 0;
    for (const char *line = text; *line;) {
        const char *end = strchr(line, '\n');
        if (!end)
            end = line + strlen(line);
        if ((size_t)(end - line) > n && strncmp(line, series, n) == 0 && line[n] == ' ') {
            value = strtoll(line + n + 1, NULL, 10);
            seen++;
        }
        line = *end ? end + 1 : end;
    }
    if (seen > 1)
        fail_msg("%s appears %d times", series, seen);
    return value;
}

/* out's bytes as a string (free it); out is freed. */
static char *text_of(rn_buf *out) {
    char *text = malloc(out->len + 1);
    assert_non_null(text);
    if (out->len)
        memcpy(text, out->data, out->len);
    text[out->len] = '\0';
    rn_buf_free(out);
    return text;
}

static char *metrics_text(const rn_quotas *q) {
    rn_buf out = {0};
    rn_quota_metrics(q, &out);
    return text_of(&out);
}

static void test_metrics(void **state) {
    (void)state;
    rn_quotas *q = rn_quotas_new(0);
    rn_tenant_use *a = rn_quota_use(q, "acme");
    rn_tenant_use *b = rn_quota_use(q, "beta");
    rn_tenant_use *anon = rn_quota_use(q, "-");
    static const rn_tenant_limits none = {0};
    for (int i = 0; i < 3; i++)
        charge(q, a, &none, 100, 1000, T0);
    charge(q, b, &none, 7, 9, T0);
    rn_quota_count_refusal(a, RN_E_GW_RATE_LIMITED, NULL, 0);
    rn_quota_count_refusal(a, RN_E_GW_BYTE_RATE_LIMITED, NULL, 0); /* the same code */
    rn_quota_count_refusal(a, RN_E_GW_BYTE_RATE_LIMITED, NULL, 0);
    rn_quota_count_refusal(a, RN_E_GW_FORBIDDEN, NULL, 0);
    rn_quota_count_refusal(a, RN_E_GW_ADMIN_REQUIRED, NULL, 0); /* also FORBIDDEN */
    rn_quota_count_refusal(a, RN_E_GW_UPLOADS_EXHAUSTED, NULL, 0);
    rn_quota_count_refusal(anon, RN_E_GW_INVALID_CREDENTIAL, NULL, 0);
    rn_quota_count_refusal(anon, RN_E_GW_INVALID_CREDENTIAL, NULL, 0);
    char *text = metrics_text(q);
    assert_int_equal(metric(text, "runnel_gateway_requests_total{tenant=\"acme\"}"), 3);
    assert_int_equal(metric(text, "runnel_gateway_requests_total{tenant=\"beta\"}"), 1);
    assert_int_equal(metric(text, "runnel_gateway_bytes_in_total{tenant=\"acme\"}"), 300);
    assert_int_equal(metric(text, "runnel_gateway_bytes_out_total{tenant=\"acme\"}"), 3000);
    assert_int_equal(metric(text, "runnel_gateway_bytes_in_total{tenant=\"beta\"}"), 7);
    assert_int_equal(metric(text, "runnel_gateway_bytes_out_total{tenant=\"beta\"}"), 9);
    assert_int_equal(
        metric(text, "runnel_gateway_refusals_total{tenant=\"acme\",code=\"RATE_LIMITED\"}"), 3);
    assert_int_equal(
        metric(text, "runnel_gateway_refusals_total{tenant=\"acme\",code=\"FORBIDDEN\"}"), 2);
    assert_int_equal(
        metric(text, "runnel_gateway_refusals_total{tenant=\"acme\",code=\"UPLOADS_EXHAUSTED\"}"),
        1);
    assert_int_equal(
        metric(text, "runnel_gateway_refusals_total{tenant=\"-\",code=\"INVALID_CREDENTIAL\"}"), 2);
    assert_int_equal(
        metric(text, "runnel_gateway_refusals_total{tenant=\"beta\",code=\"RATE_LIMITED\"}"), -1);
    free(text);
    rn_quotas_free(q);
}

/* One usage line's counts, found by tenant and bucket. */
typedef struct {
    long long requests, bytes_in, bytes_out, refusals;
    int lines;
} usage;

static usage usage_of(const char *text, const char *tenant, const char *bucket, int64_t ts_ms) {
    usage u = {0};
    for (const char *line = text; *line;) {
        const char *end = strchr(line, '\n');
        assert_non_null(end); /* every line ends */
        json_error_t jerr;
        json_t *o = json_loadb(line, (size_t)(end - line), 0, &jerr);
        if (!o)
            fail_msg("a usage line is not JSON (%s): %.*s", jerr.text, (int)(end - line), line);
        assert_true(json_is_object(o));
        const char *ts = json_string_value(json_object_get(o, "ts"));
        assert_non_null(ts);
        int64_t ms = 0;
        assert_int_equal(rn_parse_rfc3339(ts, strlen(ts), &ms), 0);
        assert_int_equal(ms, ts_ms);
        const char *t = json_string_value(json_object_get(o, "tenant"));
        const char *b = json_string_value(json_object_get(o, "bucket"));
        assert_non_null(t);
        assert_non_null(b);
        if (strcmp(t, tenant) == 0 && strcmp(b, bucket) == 0) {
            u.lines++;
            u.requests = json_integer_value(json_object_get(o, "requests"));
            u.bytes_in = json_integer_value(json_object_get(o, "bytes_in"));
            u.bytes_out = json_integer_value(json_object_get(o, "bytes_out"));
        }
        if (strcmp(t, tenant) == 0)
            u.refusals += json_integer_value(json_object_get(o, "refusals"));
        json_decref(o);
        line = end + 1;
    }
    return u;
}

static char *usage_text(rn_quotas *q, int64_t ts_ms) {
    rn_buf out = {0};
    rn_quota_usage_lines(q, ts_ms, &out);
    return text_of(&out);
}

static void test_usage_lines(void **state) {
    (void)state;
    rn_quotas *q = rn_quotas_new(0);
    rn_tenant_use *a = rn_quota_use(q, "acme");
    static const rn_tenant_limits none = {0};
    rn_quota_hold h;
    static const struct {
        const char *bucket;
        uint64_t in, out;
    } reqs[] = {
        {"orders", 10, 20}, {"orders", 5, 5}, {"audit", 1, 2}, {"Bad!", 100, 0},
        {"a-b/c", 0, 100},  {NULL, 1, 1},     {"a/b", 3, 3},
    };
    for (size_t i = 0; i < sizeof reqs / sizeof reqs[0]; i++) {
        assert_int_equal(admit(q, a, &none, &plain_ask, T0, &h, NULL), 0);
        const char *bk = reqs[i].bucket;
        rn_quota_release(q, &h, &none, bk, bk ? strlen(bk) : 0, reqs[i].in, reqs[i].out, T0);
    }
    rn_quota_count_refusal(a, RN_E_GW_RATE_LIMITED, NULL, 0);
    rn_quota_count_refusal(a, RN_E_GW_FORBIDDEN, NULL, 0);
    const int64_t ts = INT64_C(1811808000123);
    char *text = usage_text(q, ts);
    usage o = usage_of(text, "acme", "orders", ts);
    assert_int_equal(o.lines, 1);
    assert_int_equal(o.requests, 2);
    assert_int_equal(o.bytes_in, 15);
    assert_int_equal(o.bytes_out, 25);
    usage au = usage_of(text, "acme", "audit", ts);
    assert_int_equal(au.lines, 1);
    assert_int_equal(au.requests, 1);
    assert_int_equal(au.bytes_in, 1);
    assert_int_equal(au.bytes_out, 2);
    usage none_bucket = usage_of(text, "acme", "-", ts); /* Bad!, a-b/c, NULL, a/b */
    assert_int_equal(none_bucket.lines, 1);
    assert_int_equal(none_bucket.requests, 4);
    assert_int_equal(none_bucket.bytes_in, 104);
    assert_int_equal(none_bucket.bytes_out, 104);
    assert_int_equal(usage_of(text, "acme", "Bad!", ts).lines, 0);
    assert_int_equal(o.refusals, 2); /* the tenant's, over its lines */
    free(text);

    /* counting starts anew */
    text = usage_text(q, ts + 10000);
    usage again = usage_of(text, "acme", "orders", ts + 10000);
    assert_int_equal(again.requests + again.bytes_in + again.bytes_out + again.refusals, 0);
    usage again_none = usage_of(text, "acme", "-", ts + 10000);
    assert_int_equal(again_none.requests + again_none.bytes_in + again_none.bytes_out, 0);
    free(text);
    charge(q, a, &none, 42, 43, T0 + 1);
    text = usage_text(q, ts + 20000);
    o = usage_of(text, "acme", "orders", ts + 20000);
    assert_int_equal(o.lines, 1);
    assert_int_equal(o.requests, 1);
    assert_int_equal(o.bytes_in, 42);
    assert_int_equal(o.bytes_out, 43);
    free(text);

    /* the metrics are totals, not reset by the usage log */
    text = metrics_text(q);
    assert_int_equal(metric(text, "runnel_gateway_requests_total{tenant=\"acme\"}"), 8);
    assert_int_equal(metric(text, "runnel_gateway_bytes_in_total{tenant=\"acme\"}"), 162);
    free(text);
    rn_quotas_free(q);
}

/* Names made only of a bucket id's characters but of the wrong length are
 * no bucket ids either (extensions §1: 4 to 64 characters). */
static void test_usage_bucket_ids_of_the_wrong_length(void **state) {
    (void)state;
    rn_quotas *q = rn_quotas_new(0);
    rn_tenant_use *a = rn_quota_use(q, "acme");
    static const rn_tenant_limits none = {0};
    char long_id[66];
    memset(long_id, 'a', 65);
    long_id[65] = '\0';
    const char *const names[] = {"ab", "abc", long_id, "abcd"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        rn_quota_hold h;
        assert_int_equal(admit(q, a, &none, &plain_ask, T0, &h, NULL), 0);
        rn_quota_release(q, &h, &none, names[i], strlen(names[i]), 1, 1, T0);
    }
    const int64_t ts = INT64_C(1811808000000);
    char *text = usage_text(q, ts);
    assert_int_equal(usage_of(text, "acme", "abcd", ts).requests, 1);
    usage dash = usage_of(text, "acme", "-", ts);
    if (dash.requests != 3)
        fail_msg("3 requests under \"-\" expected, %lld there; the lines:\n%s", dash.requests,
                 text);
    free(text);
    rn_quotas_free(q);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_state_is_per_tenant_name),
        cmocka_unit_test(test_unbounded_limits_admit_everything),
        cmocka_unit_test(test_token_bucket),
        cmocka_unit_test(test_bytes_in_rate),
        cmocka_unit_test(test_bytes_out_rate),
        cmocka_unit_test(test_byte_debt_waits_its_retry_after),
        cmocka_unit_test(test_live_reads_and_uploads),
        cmocka_unit_test(test_upload_bytes),
        cmocka_unit_test(test_upload_budget),
        cmocka_unit_test(test_metrics),
        cmocka_unit_test(test_usage_lines),
        cmocka_unit_test(test_usage_bucket_ids_of_the_wrong_length),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
