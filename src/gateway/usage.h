/*
 * usage.h — the usage log: every interval, what a fill function appends
 * (JSON lines) is added to a file, which is renamed to FILE.1 once it
 * passed its size bound (the one before is replaced), so the log takes at
 * most about twice the bound on disk. Writes are small and run on the loop
 * thread once an interval.
 */
#ifndef RN_GATEWAY_USAGE_H
#define RN_GATEWAY_USAGE_H

#include <stdint.h>
#include <uv.h>

#include "util/buf.h"

typedef struct rn_usage_log rn_usage_log;

/* Starts writing to path every interval_ms (>= 1) what fill(arg, out)
 * appends. */
rn_usage_log *rn_usage_log_start(uv_loop_t *loop, const char *path, uint64_t max_bytes,
                                 uint64_t interval_ms, void (*fill)(void *arg, rn_buf *out),
                                 void *arg);
/* Writes once more, then stops (NULL: no-op). */
void rn_usage_log_stop(rn_usage_log *u);
/* Frees it once the loop closed its timer (NULL: no-op). */
void rn_usage_log_free(rn_usage_log *u);

#endif
