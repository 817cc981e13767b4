/*
 * quota.h — what each tenant is using now, against its limits: a token
 * bucket of requests, byte rates in and out (charged when a request ends;
 * a tenant that owes more than a second's worth is refused until it has
 * repaid, which is how Kafka's client quotas behave), and what it holds at
 * once (live reads, uploads, upload bytes), plus the gateway-wide upload
 * budget. Also the tenant's counters for metrics and the usage log.
 *
 * State is kept per tenant name, so it survives a reload of the tenants
 * file. Everything runs on the loop thread.
 */
#ifndef RN_GATEWAY_QUOTA_H
#define RN_GATEWAY_QUOTA_H

#include <stddef.h>
#include <stdint.h>

#include "gateway/tenants.h"
#include "protocol/errors.h"
#include "util/buf.h"

typedef struct rn_quotas rn_quotas;
typedef struct rn_tenant_use rn_tenant_use;

/* What an admitted request holds until it ends (rn_quota_release). */
typedef struct {
    rn_tenant_use *use; /* NULL: nothing */
    int live_read;
    int upload;
    uint64_t upload_bytes;
} rn_quota_hold;

/* What a request asks of its tenant's quotas. */
typedef struct {
    int live_read;         /* a long-poll or SSE read */
    int upload;            /* it has a body */
    uint64_t upload_bytes; /* its declared body (the request limit when undeclared) */
} rn_quota_ask;

/* upload_budget: the gateway-wide bound on upload bytes at once (0: none). */
rn_quotas *rn_quotas_new(uint64_t upload_budget);
void rn_quotas_free(rn_quotas *q);

/* The state of the tenant named name (created when new; name "-" counts
 * requests no tenant was identified for). */
rn_tenant_use *rn_quota_use(rn_quotas *q, const char *name);

/* Admits a request of `use` (whose limits are lim) asking `ask` at now_ms:
 * returns 0 with what it now holds in *hold, or the refusal (RN_E_GW_*)
 * with the seconds to wait in *retry_after_s (for RATE_LIMITED and the
 * upload budget). Nothing is held on a refusal. */
rn_error rn_quota_admit(rn_quotas *q, rn_tenant_use *use, const rn_tenant_limits *lim,
                        const rn_quota_ask *ask, uint64_t now_ms, rn_quota_hold *hold,
                        uint64_t *retry_after_s);
/* Ends what hold holds, and charges the request's bytes in and out to its
 * tenant's rates and counters (bucket: the bucket it was about, for the
 * usage log; may be NULL). */
void rn_quota_release(rn_quotas *q, rn_quota_hold *hold, const rn_tenant_limits *lim,
                      const char *bucket, size_t bucket_len, uint64_t bytes_in, uint64_t bytes_out,
                      uint64_t now_ms);
/* Counts a request of use about bucket (NULL: none known) answered with
 * the gate's refusal e (before or after admission; a node's answers are
 * not the gate's refusals). */
void rn_quota_count_refusal(rn_tenant_use *use, rn_error e, const char *bucket, size_t bucket_len);

/* Appends the per-tenant metrics in Prometheus text (docs/GATEWAY.md). */
void rn_quota_metrics(const rn_quotas *q, rn_buf *out);
/* Appends one JSON line per tenant and bucket with what was counted since
 * the last call, and starts counting anew. ts_ms: the line's time. */
void rn_quota_usage_lines(rn_quotas *q, int64_t ts_ms, rn_buf *out);

#endif
