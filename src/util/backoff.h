/*
 * backoff.h — exponential backoff with jitter, for callers that retry a
 * failed remote call (webhook deliveries, object-store requests).
 */
#ifndef RN_BACKOFF_H
#define RN_BACKOFF_H

#include <stdint.h>

/* The delay before retry number `attempt` (1 for the first retry):
 * base_ms * 2^(attempt-1), at most cap_ms, then scaled by a factor drawn
 * uniformly from [1 - jitter, 1 + jitter) using `unit` (a number in [0, 1),
 * e.g. rn_backoff_unit()). Preconditions: attempt >= 1, base_ms <= cap_ms
 * <= 2^52 (about 140,000 years), 0 <= jitter <= 1, 0 <= unit < 1. Never
 * overflows, whatever `attempt`. */
uint64_t rn_backoff_ms(uint32_t attempt, uint64_t base_ms, uint64_t cap_ms, double jitter,
                       double unit);

/* A pseudo-random number in [0, 1) for rn_backoff_ms (not for secrets). */
double rn_backoff_unit(void);

#endif
