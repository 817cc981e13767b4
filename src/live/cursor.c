/*
 * cursor.c — Stream-Cursor values. See cursor.h.
 */
#include "live/cursor.h"
#include "util/clock.h"

#include <stdlib.h>

#define CURSOR_EPOCH_MS 1728432000000ll /* 2024-10-09T00:00:00Z */
#define CURSOR_INTERVAL_MS 20000
#define CURSOR_JITTER 180 /* a jittered cursor is 1 to this past the echo */

uint64_t rn_cursor_interval(void) {
    int64_t now = rn_now_ms();
    return now > CURSOR_EPOCH_MS ? (uint64_t)(now - CURSOR_EPOCH_MS) / CURSOR_INTERVAL_MS : 0;
}

uint64_t rn_cursor_after(const rn_cursor_echo *echo, uint64_t interval) {
    if (echo->present && echo->value >= interval)
        return echo->value + 1 + (uint64_t)(rand() % CURSOR_JITTER);
    return interval;
}

uint64_t rn_cursor_next(const rn_cursor_echo *echo) {
    return rn_cursor_after(echo, rn_cursor_interval());
}
