/*
 * backoff.c — exponential backoff with jitter. See backoff.h.
 */
#include "util/backoff.h"

#include <assert.h>
#include <stdlib.h>

uint64_t rn_backoff_ms(uint32_t attempt, uint64_t base_ms, uint64_t cap_ms, double jitter,
                       double unit) {
    assert(attempt >= 1 && base_ms <= cap_ms && cap_ms <= (uint64_t)1 << 52);
    assert(jitter >= 0 && jitter <= 1 && unit >= 0 && unit < 1);
    uint64_t delay = base_ms;
    for (uint32_t i = 1; i < attempt && delay < cap_ms; i++)
        delay = delay > cap_ms / 2 ? cap_ms : delay * 2;
    if (delay > cap_ms)
        delay = cap_ms;
    return (uint64_t)((double)delay * (1.0 - jitter + 2.0 * jitter * unit));
}

double rn_backoff_unit(void) {
    return (double)rand() / ((double)RAND_MAX + 1.0);
}
