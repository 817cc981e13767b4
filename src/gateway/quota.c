/*
 * quota.c — tenants' use against their limits, and their counters. See
 * quota.h.
 *
 * Rates are kept in millis (tokens and bytes times 1000) so that refills of
 * a few milliseconds at low rates are not lost to rounding. The usage
 * counters per bucket are bounded: past USAGE_BUCKETS buckets in one
 * interval, a tenant's further buckets are counted under "-".
 */
#include "gateway/quota.h"
#include "util/map.h"
#include "util/text.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define USAGE_BUCKETS 4096
#define NAME_MAX_LEN 64

typedef struct {
    char name[NAME_MAX_LEN + 1]; /* the bucket, or "-" */
    uint64_t requests, bytes_in, bytes_out, refusals;
} usage_row;

struct rn_tenant_use {
    char name[NAME_MAX_LEN + 1];
    /* rates */
    uint64_t tokens_milli; /* request tokens, times 1000 */
    uint64_t debt_in_milli, debt_out_milli;
    uint64_t last_ms; /* of the last refill */
    int started;
    /* held now */
    uint64_t live_reads, uploads, upload_bytes;
    /* counters since start (metrics) */
    uint64_t requests, bytes_in, bytes_out;
    uint64_t refusals[RN_E_COUNT];
    /* since the last usage line */
    rn_map usage; /* bucket -> usage_row */
};

struct rn_quotas {
    rn_map tenants; /* name -> rn_tenant_use */
    uint64_t upload_budget, upload_bytes;
};

rn_quotas *rn_quotas_new(uint64_t upload_budget) {
    rn_quotas *q = rn_xcalloc(1, sizeof *q);
    q->upload_budget = upload_budget;
    return q;
}

void rn_quotas_free(rn_quotas *q) {
    if (!q)
        return;
    void *v;
    for (size_t i = 0; rn_map_next(&q->tenants, &i, &v);) {
        rn_tenant_use *u = v;
        rn_map_free_values(&u->usage);
    }
    rn_map_free_values(&q->tenants);
    free(q);
}

rn_tenant_use *rn_quota_use(rn_quotas *q, const char *name) {
    size_t n = strlen(name);
    assert(n >= 1 && n <= NAME_MAX_LEN);
    rn_tenant_use *u = rn_map_get(&q->tenants, name, n);
    if (u)
        return u;
    u = rn_xcalloc(1, sizeof *u);
    memcpy(u->name, name, n);
    rn_map_put(&q->tenants, u->name, n, u);
    return u;
}

/* Refills u's request tokens and repays its byte debts up to now_ms. */
static void refill(rn_tenant_use *u, const rn_tenant_limits *lim, uint64_t now_ms) {
    uint64_t burst = lim->burst ? lim->burst : lim->requests_per_second;
    if (!u->started) {
        u->started = 1;
        u->tokens_milli = burst * 1000;
        u->last_ms = now_ms;
        return;
    }
    uint64_t dt = now_ms > u->last_ms ? now_ms - u->last_ms : 0;
    u->last_ms = now_ms;
    u->tokens_milli += dt * lim->requests_per_second;
    if (u->tokens_milli > burst * 1000)
        u->tokens_milli = burst * 1000;
    uint64_t in = dt * lim->bytes_in_per_second, out = dt * lim->bytes_out_per_second;
    u->debt_in_milli = u->debt_in_milli > in ? u->debt_in_milli - in : 0;
    u->debt_out_milli = u->debt_out_milli > out ? u->debt_out_milli - out : 0;
}

/* Seconds until a debt of debt_milli at rate bytes/s is down to a second's
 * worth (rounded up, at least 1). */
static uint64_t repay_seconds(uint64_t debt_milli, uint64_t rate) {
    uint64_t over = debt_milli - rate * 1000;
    uint64_t s = (over + rate * 1000 - 1) / (rate * 1000);
    return s ? s : 1;
}

rn_error rn_quota_admit(rn_quotas *q, rn_tenant_use *u, const rn_tenant_limits *lim,
                        const rn_quota_ask *ask, uint64_t now_ms, rn_quota_hold *hold,
                        uint64_t *retry_after_s) {
    *hold = (rn_quota_hold){0};
    *retry_after_s = 0;
    refill(u, lim, now_ms);
    if (lim->requests_per_second && u->tokens_milli < 1000) {
        uint64_t missing = 1000 - u->tokens_milli, per_s = lim->requests_per_second * 1000;
        *retry_after_s = (missing + per_s - 1) / per_s; /* >= 1: missing > 0 */
        return RN_E_GW_RATE_LIMITED;
    }
    if (lim->bytes_in_per_second && u->debt_in_milli > lim->bytes_in_per_second * 1000) {
        *retry_after_s = repay_seconds(u->debt_in_milli, lim->bytes_in_per_second);
        return RN_E_GW_BYTE_RATE_LIMITED;
    }
    if (lim->bytes_out_per_second && u->debt_out_milli > lim->bytes_out_per_second * 1000) {
        *retry_after_s = repay_seconds(u->debt_out_milli, lim->bytes_out_per_second);
        return RN_E_GW_BYTE_RATE_LIMITED;
    }
    if (ask->live_read && lim->live_reads && u->live_reads >= lim->live_reads)
        return RN_E_GW_LIVE_READS_EXHAUSTED;
    if (ask->upload && lim->uploads && u->uploads >= lim->uploads)
        return RN_E_GW_UPLOADS_EXHAUSTED;
    if (ask->upload && lim->upload_bytes && u->upload_bytes + ask->upload_bytes > lim->upload_bytes)
        return RN_E_GW_UPLOAD_BYTES_EXHAUSTED;
    if (ask->upload && q->upload_budget && q->upload_bytes + ask->upload_bytes > q->upload_budget) {
        *retry_after_s = 1;
        return RN_E_GW_UPLOAD_BUDGET_EXHAUSTED;
    }
    if (lim->requests_per_second)
        u->tokens_milli -= 1000;
    hold->use = u;
    hold->live_read = ask->live_read;
    hold->upload = ask->upload;
    hold->upload_bytes = ask->upload ? ask->upload_bytes : 0;
    u->live_reads += (uint64_t)hold->live_read;
    u->uploads += (uint64_t)hold->upload;
    u->upload_bytes += hold->upload_bytes;
    q->upload_bytes += hold->upload_bytes;
    return 0;
}

/* The usage row of bucket in u (the row "-" past USAGE_BUCKETS). */
static usage_row *usage_of(rn_tenant_use *u, const char *bucket, size_t len) {
    int plain = bucket && len >= 4 && len <= NAME_MAX_LEN; /* a bucket id's length (ext §1.1) */
    for (size_t i = 0; plain && i < len; i++) /* a bucket id's characters: no JSON escaping */
        plain = (bucket[i] >= 'a' && bucket[i] <= 'z') || (bucket[i] >= '0' && bucket[i] <= '9') ||
                bucket[i] == '_' || bucket[i] == '-';
    if (!plain) {
        bucket = "-";
        len = 1;
    }
    usage_row *row = rn_map_get(&u->usage, bucket, len);
    if (row)
        return row;
    if (u->usage.count >= USAGE_BUCKETS && !(len == 1 && bucket[0] == '-'))
        return usage_of(u, "-", 1);
    row = rn_xcalloc(1, sizeof *row);
    memcpy(row->name, bucket, len);
    rn_map_put(&u->usage, row->name, len, row);
    return row;
}

void rn_quota_release(rn_quotas *q, rn_quota_hold *hold, const rn_tenant_limits *lim,
                      const char *bucket, size_t bucket_len, uint64_t bytes_in, uint64_t bytes_out,
                      uint64_t now_ms) {
    rn_tenant_use *u = hold->use;
    if (!u)
        return;
    u->live_reads -= (uint64_t)hold->live_read;
    u->uploads -= (uint64_t)hold->upload;
    u->upload_bytes -= hold->upload_bytes;
    q->upload_bytes -= hold->upload_bytes;
    refill(u, lim, now_ms);
    u->debt_in_milli += lim->bytes_in_per_second ? bytes_in * 1000 : 0;
    u->debt_out_milli += lim->bytes_out_per_second ? bytes_out * 1000 : 0;
    u->requests++;
    u->bytes_in += bytes_in;
    u->bytes_out += bytes_out;
    usage_row *row = usage_of(u, bucket, bucket_len);
    row->requests++;
    row->bytes_in += bytes_in;
    row->bytes_out += bytes_out;
    *hold = (rn_quota_hold){0};
}

void rn_quota_count_refusal(rn_tenant_use *u, rn_error e, const char *bucket, size_t bucket_len) {
    assert(e < RN_E_COUNT);
    u->refusals[e]++;
    usage_of(u, bucket, bucket_len)->refusals++;
}

void rn_quota_metrics(const rn_quotas *q, rn_buf *out) {
    static const char *const kinds[] = {"requests", "bytes_in", "bytes_out"};
    for (int k = 0; k < 3; k++) {
        rn_buf_appendf(out, "# TYPE runnel_gateway_%s_total counter\n", kinds[k]);
        void *v;
        for (size_t i = 0; rn_map_next(&q->tenants, &i, &v);) {
            const rn_tenant_use *u = v;
            uint64_t n = k == 0 ? u->requests : k == 1 ? u->bytes_in : u->bytes_out;
            rn_buf_appendf(out, "runnel_gateway_%s_total{tenant=\"%s\"} %llu\n", kinds[k], u->name,
                           (unsigned long long)n);
        }
    }
    rn_buf_append_str(out, "# TYPE runnel_gateway_refusals_total counter\n");
    void *v;
    for (size_t i = 0; rn_map_next(&q->tenants, &i, &v);) {
        const rn_tenant_use *u = v;
        /* several rows may share a code: one line per code, their sum */
        const char *codes[RN_E_COUNT] = {0};
        uint64_t counts[RN_E_COUNT] = {0};
        int n = 0;
        for (int e = 0; e < RN_E_COUNT; e++) {
            if (!u->refusals[e])
                continue;
            const char *code = rn_error_code((rn_error)e);
            int k = 0;
            while (k < n && strcmp(codes[k], code) != 0)
                k++;
            if (k == n) {
                codes[n] = code;
                counts[n++] = 0;
            }
            counts[k] += u->refusals[e];
        }
        for (int k = 0; k < n; k++)
            rn_buf_appendf(out, "runnel_gateway_refusals_total{tenant=\"%s\",code=\"%s\"} %llu\n",
                           u->name, codes[k], (unsigned long long)counts[k]);
    }
    rn_buf_append_str(out, "# TYPE runnel_gateway_live_reads gauge\n");
    for (size_t i = 0; rn_map_next(&q->tenants, &i, &v);) {
        const rn_tenant_use *u = v;
        rn_buf_appendf(out, "runnel_gateway_live_reads{tenant=\"%s\"} %llu\n", u->name,
                       (unsigned long long)u->live_reads);
    }
    rn_buf_appendf(out,
                   "# TYPE runnel_gateway_upload_bytes gauge\nrunnel_gateway_upload_bytes %llu\n",
                   (unsigned long long)q->upload_bytes);
}

void rn_quota_usage_lines(rn_quotas *q, int64_t ts_ms, rn_buf *out) {
    char ts[48];
    rn_format_rfc3339(ts_ms, ts);
    void *v;
    for (size_t i = 0; rn_map_next(&q->tenants, &i, &v);) {
        rn_tenant_use *u = v;
        void *r;
        for (size_t j = 0; rn_map_next(&u->usage, &j, &r);) {
            const usage_row *row = r;
            rn_buf_appendf(out,
                           "{\"ts\":\"%s\",\"tenant\":\"%s\",\"bucket\":\"%s\",\"requests\":%llu,"
                           "\"bytes_in\":%llu,\"bytes_out\":%llu,\"refusals\":%llu}\n",
                           ts, u->name, row->name, (unsigned long long)row->requests,
                           (unsigned long long)row->bytes_in, (unsigned long long)row->bytes_out,
                           (unsigned long long)row->refusals);
        }
        rn_map_free_values(&u->usage);
    }
}
