/*
 * cursor.h — Stream-Cursor values for live reads (PROTOCOL §10.1): the
 * current interval of CURSOR_INTERVAL_MS since a fixed epoch, so that
 * caches collapse the live reads of one interval, and never a value a
 * client already sent, so that a cache along the way cannot loop.
 */
#ifndef RN_CURSOR_H
#define RN_CURSOR_H

#include <stdint.h>

/* The client's echo of a cursor (the `cursor` query parameter). */
typedef struct {
    int present;
    uint64_t value;
} rn_cursor_echo;

/* The current cursor interval. */
uint64_t rn_cursor_interval(void);
/* The cursor to send in `interval` to a client that sent echo: the interval,
 * or past the echo by a random jitter when the echo is not behind it. Only
 * the jittered value differs from the interval. */
uint64_t rn_cursor_after(const rn_cursor_echo *echo, uint64_t interval);
/* The same in the current interval. */
uint64_t rn_cursor_next(const rn_cursor_echo *echo);

#endif
