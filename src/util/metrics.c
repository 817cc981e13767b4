/*
 * metrics.c — the counters' storage. See metrics.h.
 */
#include "util/metrics.h"

rn_metrics rn_metric;

void rn_metric_sync(uint64_t us) {
    int k = 0;
    while (k < RN_SYNC_BUCKETS - 1 && us > (64ull << k))
        k++;
    rn_metric.wal_sync_le[k]++;
    rn_metric.wal_sync_us_sum += us;
}
