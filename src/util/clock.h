/*
 * clock.h — wall-clock and monotonic time in milliseconds.
 *
 * Stream expiry is wall-clock based (Stream-Expires-At is an absolute time,
 * TTL windows must survive restarts), so the engine takes "now" from
 * rn_now_ms().
 */
#ifndef RN_CLOCK_H
#define RN_CLOCK_H

#include <stdint.h>

/* Milliseconds since the Unix epoch (wall clock). */
int64_t rn_now_ms(void);
/* Milliseconds from an arbitrary fixed point (monotonic; for durations). */
uint64_t rn_mono_ms(void);

#endif
