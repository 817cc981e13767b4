/*
 * hist.h — latency histograms with log-linear buckets at microsecond
 * resolution.
 *
 * Values below 64 µs get one bucket each; above that every power of two is
 * split into 32 equal buckets, so a reported percentile is within ~3 % of
 * the true value at any magnitude while the whole histogram stays a fixed
 * 1920-entry array (no allocation while recording). Exact min, max and sum
 * are kept beside the buckets.
 */
#ifndef BN_HIST_H
#define BN_HIST_H

#include <stdint.h>

#define BN_HIST_BUCKETS 1920 /* index of UINT64_MAX is 1919 */

typedef struct {
    uint64_t count;
    uint64_t min_us;
    uint64_t max_us;
    double sum_us;
    uint64_t bucket[BN_HIST_BUCKETS];
} bn_hist;

/* Empties h. */
void bn_hist_init(bn_hist *h);
/* Records one value in microseconds. */
void bn_hist_add(bn_hist *h, uint64_t us);
/* Adds every value of src to dst. */
void bn_hist_merge(bn_hist *dst, const bn_hist *src);
/* The value at percentile p (0 < p <= 100): the midpoint of the bucket holding
 * the ceil(p/100 * count)-th smallest value, clamped to [min, max]. 0 when
 * the histogram is empty. */
uint64_t bn_hist_percentile(const bn_hist *h, double p);

#endif
