/*
 * report.c — collects a run's figures in insertion order and renders them
 * (see report.h). Figures live in a growable array of tagged items; the
 * histogram items hold a copy of the histogram's summary numbers, not the
 * buckets, so the report never points into scenario state.
 */
#include "report.h"

#include <stdarg.h>
#include <string.h>

#include "util/buf.h"

enum kind { K_INT, K_REAL, K_STR, K_HIST };

/* Summary of a histogram in the order it is printed. */
static const char *const HIST_FIELDS[] = {"count",  "mean_us", "min_us",   "p50_us",
                                          "p90_us", "p99_us",  "p99_9_us", "max_us"};
#define HIST_N 8

typedef struct {
    char *name;
    enum kind kind;
    int64_t i;
    double r;
    char *s;
    double h[HIST_N];
} item;

static item *items;
static size_t n_items, cap_items;
#define MAX_KEPT_ERRORS 20
static char *errors[MAX_KEPT_ERRORS];
static uint64_t n_errors;

static item *add(const char *name, enum kind k) {
    if (n_items == cap_items) {
        cap_items = cap_items ? cap_items * 2 : 32;
        items = rn_xrealloc(items, cap_items * sizeof *items);
    }
    item *it = &items[n_items++];
    memset(it, 0, sizeof *it);
    it->name = rn_xstrdup(name);
    it->kind = k;
    return it;
}

void bn_report_int(const char *name, int64_t v) {
    add(name, K_INT)->i = v;
}

void bn_report_real(const char *name, double v) {
    add(name, K_REAL)->r = v;
}

void bn_report_str(const char *name, const char *v) {
    add(name, K_STR)->s = rn_xstrdup(v);
}

void bn_report_hist(const char *name, const bn_hist *h) {
    item *it = add(name, K_HIST);
    double v[HIST_N] = {(double)h->count,
                        h->count ? h->sum_us / (double)h->count : 0,
                        h->count ? (double)h->min_us : 0,
                        (double)bn_hist_percentile(h, 50),
                        (double)bn_hist_percentile(h, 90),
                        (double)bn_hist_percentile(h, 99),
                        (double)bn_hist_percentile(h, 99.9),
                        (double)h->max_us};
    memcpy(it->h, v, sizeof v);
}

void bn_report_error(const char *fmt, ...) {
    if (n_errors < MAX_KEPT_ERRORS) {
        char tmp[512];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(tmp, sizeof tmp, fmt, ap);
        va_end(ap);
        errors[n_errors] = rn_xstrdup(tmp);
    }
    n_errors++;
}

uint64_t bn_report_error_count(void) {
    return n_errors;
}

/* Writes s as a JSON string literal. */
static void json_str(FILE *out, const char *s) {
    fputc('"', out);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(out, "\\%c", c);
        else if (c < 0x20)
            fprintf(out, "\\u%04x", c);
        else
            fputc(c, out);
    }
    fputc('"', out);
}

static void print_json(FILE *out) {
    fputs("{", out);
    for (size_t k = 0; k < n_items; k++) {
        item *it = &items[k];
        fputs(k ? ",\n " : "", out);
        json_str(out, it->name);
        fputc(':', out);
        switch (it->kind) {
        case K_INT:
            fprintf(out, "%lld", (long long)it->i);
            break;
        case K_REAL:
            fprintf(out, "%.6g", it->r);
            break;
        case K_STR:
            json_str(out, it->s);
            break;
        case K_HIST:
            fputc('{', out);
            for (int f = 0; f < HIST_N; f++)
                fprintf(out, "%s\"%s\":%.1f", f ? "," : "", HIST_FIELDS[f], it->h[f]);
            fputc('}', out);
            break;
        }
    }
    fprintf(out, "%s\"errors\":%llu,\"error_messages\":[", n_items ? ",\n " : "",
            (unsigned long long)n_errors);
    for (uint64_t e = 0; e < n_errors && e < MAX_KEPT_ERRORS; e++) {
        fputs(e ? "," : "", out);
        json_str(out, errors[e]);
    }
    fputs("]}\n", out);
}

static void print_human(FILE *out) {
    for (size_t k = 0; k < n_items; k++) {
        item *it = &items[k];
        fprintf(out, "%-26s ", it->name);
        switch (it->kind) {
        case K_INT:
            fprintf(out, "%lld\n", (long long)it->i);
            break;
        case K_REAL:
            fprintf(out, "%.6g\n", it->r);
            break;
        case K_STR:
            fprintf(out, "%s\n", it->s);
            break;
        case K_HIST:
            fprintf(out,
                    "n=%.0f  mean %.0f  min %.0f  p50 %.0f  p90 %.0f  p99 %.0f  p99.9 %.0f  "
                    "max %.0f (µs)\n",
                    it->h[0], it->h[1], it->h[2], it->h[3], it->h[4], it->h[5], it->h[6], it->h[7]);
            break;
        }
    }
    fprintf(out, "%-26s %llu\n", "errors", (unsigned long long)n_errors);
    for (uint64_t e = 0; e < n_errors && e < MAX_KEPT_ERRORS; e++)
        fprintf(out, "  error: %s\n", errors[e]);
}

void bn_report_print(FILE *out, int json) {
    if (json)
        print_json(out);
    else
        print_human(out);
}
