/*
 * sc_fill.c — the `fill` scenario: creates --streams streams and fills them
 * with --bytes in total (an equal share each, the first ones one byte more
 * when it does not divide), in --append-bytes appends with producer headers,
 * one connection per stream, all streams at once. Used to put a known
 * amount of data on a server (restart-time measurements, bench/capacity.sh);
 * reports the fill rate.
 */
#include <string.h>

#include "phases.h"
#include "report.h"
#include "run.h"
#include "scenarios.h"
#include "util/buf.h"

static struct {
    char **paths;
    bn_fill *fills;
    char *body;
    int pending;
    uint64_t t0_ns;
} s;

static void filled(bn_fill *f) {
    bn_conn_close(f->c);
    if (--s.pending > 0)
        return;
    double secs = bn_secs(s.t0_ns, uv_hrtime());
    bn_report_str("scenario", "fill");
    bn_report_int("streams", bn_o.streams);
    bn_report_int("bytes", (int64_t)bn_o.bytes);
    bn_report_int("append_bytes", (int64_t)bn_o.append_bytes);
    bn_report_real("fill_s", secs);
    bn_report_real("fill_mb_per_s", (double)bn_o.bytes / 1e6 / secs);
    bn_report_int("server_rss_kib", bn_server_rss_kib());
    bn_run_stop();
}

static void created(void) {
    s.pending = bn_o.streams;
    s.t0_ns = uv_hrtime();
    uint64_t share = bn_o.bytes / (uint64_t)bn_o.streams,
             extra = bn_o.bytes % (uint64_t)bn_o.streams;
    for (int i = 0; i < bn_o.streams; i++)
        bn_fill_start(&s.fills[i], bn_conn_new(bn_cl, NULL, NULL), s.paths[i], i,
                      share + ((uint64_t)i < extra), bn_o.append_bytes, s.body, filled);
}

void bn_fill_scenario_start(void) {
    s.paths = bn_stream_paths("f", bn_o.streams);
    s.fills = rn_xcalloc((size_t)bn_o.streams, sizeof *s.fills);
    s.body = rn_xmalloc(bn_o.append_bytes);
    memset(s.body, '.', bn_o.append_bytes);
    bn_create_streams(s.paths, bn_o.streams, created);
}
