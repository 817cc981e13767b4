/*
 * metrics.c — the counters' storage. See metrics.h.
 */
#include "util/metrics.h"

rn_metrics rn_metric;

/* Counts us in its bucket (le 2^k * 64 us) and the sum. */
static void observe(uint64_t le[RN_SYNC_BUCKETS], uint64_t *sum, uint64_t us) {
    int k = 0;
    while (k < RN_SYNC_BUCKETS - 1 && us > (64ull << k))
        k++;
    le[k]++;
    *sum += us;
}

void rn_metric_sync(uint64_t us) {
    observe(rn_metric.wal_sync_le, &rn_metric.wal_sync_us_sum, us);
}

void rn_metric_commit(uint64_t us) {
    observe(rn_metric.raft_commit_le, &rn_metric.raft_commit_us_sum, us);
}
