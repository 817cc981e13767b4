/*
 * report.h — the result of one benchmark run, printed as JSON or as a human
 * summary.
 *
 * A scenario adds named figures in the order it wants them shown (integers,
 * reals, strings, latency histograms) and protocol errors; bn_report_print()
 * then writes either one JSON object (--json) or aligned "name  value" lines.
 * Histograms print as {count, mean, min, p50, p90, p99, p99_9, max} in µs.
 */
#ifndef BN_REPORT_H
#define BN_REPORT_H

#include <stdint.h>
#include <stdio.h>

#include "hist.h"

/* Adds a figure. `name` is copied; it should be a JSON-safe identifier. */
void bn_report_int(const char *name, int64_t v);
void bn_report_real(const char *name, double v);
void bn_report_str(const char *name, const char *v);
void bn_report_hist(const char *name, const bn_hist *h);

/* Records a protocol or transport error (printf-style). The first 20 are
 * kept verbatim; all are counted. */
void bn_report_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Number of errors recorded so far. */
uint64_t bn_report_error_count(void);

/* Writes the report to out: JSON when json is non-zero, else the summary. */
void bn_report_print(FILE *out, int json);

#endif
