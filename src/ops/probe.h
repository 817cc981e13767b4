/*
 * probe.h — the data directory probe behind /__runnel/readyz. Once a
 * second a worker reads a block of the data directory past the page cache
 * (O_DIRECT), so readiness answers 503 while the file system fails reads or
 * a read hangs, not only while recovery runs: a cached read would succeed
 * on a device that fails every read.
 */
#ifndef RN_PROBE_H
#define RN_PROBE_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

typedef struct rn_probe rn_probe;

/* Starts probing data_dir (its FORMAT file, which every data directory
 * has once the server checked it) every interval_ms. */
rn_probe *rn_probe_start(uv_loop_t *loop, const char *data_dir, uint64_t interval_ms);

/* Returns 1 and writes why (one sentence) into out when the data directory
 * cannot serve: the last read failed, or one has been running for more
 * than 5 s. Returns 0 otherwise, also before the first probe finished and
 * for NULL (no probe). Loop thread. */
int rn_probe_failing(rn_probe *p, char *out, size_t cap);

/* Stops probing; the probe frees itself once a read in progress returns
 * (the loop keeps running until then). NULL is a no-op. Loop thread. */
void rn_probe_stop(rn_probe *p);

#endif
