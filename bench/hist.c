/*
 * hist.c — log-linear latency histogram (see hist.h for the bucket layout).
 *
 * Index of a value v: v itself when v < 64; otherwise, with m the position of
 * v's highest set bit (m >= 6) and g = m - 5, the index is g*32 + (v >> g):
 * v >> g lies in [32, 64), so each octave [2^m, 2^(m+1)) owns the 32 indexes
 * starting at (g+1)*32. The inverse (bucket_low) is used for percentiles.
 */
#include "hist.h"

#include <string.h>

static unsigned bucket_of(uint64_t v) {
    if (v < 64)
        return (unsigned)v;
    unsigned g = (unsigned)(63 - __builtin_clzll(v)) - 5;
    return g * 32 + (unsigned)(v >> g);
}

/* Smallest value that maps to bucket i. */
static uint64_t bucket_low(unsigned i) {
    if (i < 64)
        return i;
    unsigned g = i / 32 - 1;
    return (uint64_t)(i - g * 32) << g;
}

void bn_hist_init(bn_hist *h) {
    memset(h, 0, sizeof *h);
    h->min_us = UINT64_MAX;
}

void bn_hist_add(bn_hist *h, uint64_t us) {
    h->bucket[bucket_of(us)]++;
    h->count++;
    h->sum_us += (double)us;
    if (us < h->min_us)
        h->min_us = us;
    if (us > h->max_us)
        h->max_us = us;
}

void bn_hist_merge(bn_hist *dst, const bn_hist *src) {
    for (unsigned i = 0; i < BN_HIST_BUCKETS; i++)
        dst->bucket[i] += src->bucket[i];
    dst->count += src->count;
    dst->sum_us += src->sum_us;
    if (src->min_us < dst->min_us)
        dst->min_us = src->min_us;
    if (src->max_us > dst->max_us)
        dst->max_us = src->max_us;
}

uint64_t bn_hist_percentile(const bn_hist *h, double p) {
    if (h->count == 0)
        return 0;
    uint64_t rank = (uint64_t)(p / 100.0 * (double)h->count + 0.999999);
    if (rank < 1)
        rank = 1;
    uint64_t seen = 0;
    for (unsigned i = 0; i < BN_HIST_BUCKETS; i++) {
        seen += h->bucket[i];
        if (seen >= rank) {
            uint64_t lo = bucket_low(i);
            uint64_t hi = i + 1 < BN_HIST_BUCKETS ? bucket_low(i + 1) - 1 : UINT64_MAX;
            uint64_t mid = lo + (hi - lo) / 2;
            if (mid < h->min_us)
                mid = h->min_us;
            if (mid > h->max_us)
                mid = h->max_us;
            return mid;
        }
    }
    return h->max_us;
}
