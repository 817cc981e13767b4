/*
 * sc_bootstrap.c — the `bootstrap` scenario: --clients clients, each with
 * its own stream pre-filled with --events events of --event-bytes bytes
 * (--batch events per append), all released in the same loop turn to
 * replay their whole stream from offset -1, following Stream-Next-Offset
 * until Stream-Up-To-Date, on the connection that filled it (already open).
 * Reports each client's completion latency (release to up-to-date) and the
 * bytes read.
 *
 * --mode replay is the only mode today; --mode bootstrap (snapshot +
 * bootstrap over the bucket surface) is refused until Runnel has it.
 */
#include <stdlib.h>
#include <string.h>

#include "hist.h"
#include "phases.h"
#include "report.h"
#include "run.h"
#include "scenarios.h"
#include "util/buf.h"

typedef struct {
    bn_fill fill;
    bn_replay replay;
} client;

static struct {
    char **paths;
    client *cl;
    char *body;
    bn_hist done_lat;
    int pending;
    uint64_t stream_bytes, bytes, requests;
    uint64_t t_fill_ns, t_release_ns;
} s;

static void replayed(bn_replay *r) {
    if (r->bytes != s.stream_bytes) {
        bn_report_error("replay read %llu bytes, the stream holds %llu",
                        (unsigned long long)r->bytes, (unsigned long long)s.stream_bytes);
        bn_run_stop();
        return;
    }
    bn_hist_add(&s.done_lat, (r->t_end_ns - s.t_release_ns) / 1000);
    s.bytes += r->bytes;
    s.requests += r->requests;
    if (--s.pending > 0)
        return;
    double secs = bn_secs(s.t_release_ns, uv_hrtime());
    bn_report_real("replay_makespan_s", secs);
    bn_report_int("replay_bytes", (int64_t)s.bytes);
    bn_report_int("replay_requests", (int64_t)s.requests);
    bn_report_real("replay_mb_per_s", (double)s.bytes / 1e6 / secs);
    bn_report_hist("completion_latency", &s.done_lat);
    bn_report_int("server_rss_kib", bn_server_rss_kib());
    bn_run_stop();
}

static void filled(bn_fill *f) {
    if (--s.pending > 0)
        return;
    double fill_s = bn_secs(s.t_fill_ns, uv_hrtime());
    bn_report_str("scenario", "bootstrap");
    bn_report_str("mode", "replay");
    bn_report_int("clients", bn_o.clients);
    bn_report_int("events", bn_o.events);
    bn_report_int("event_bytes", (int64_t)bn_o.event_bytes);
    bn_report_int("bytes_per_client", (int64_t)s.stream_bytes);
    bn_report_real("fill_s", fill_s);
    s.pending = bn_o.clients;
    s.t_release_ns = uv_hrtime();
    for (int i = 0; i < bn_o.clients; i++)
        bn_replay_start(&s.cl[i].replay, s.cl[i].fill.c, s.paths[i], replayed);
}

static void created(void) {
    s.pending = bn_o.clients;
    s.t_fill_ns = uv_hrtime();
    size_t chunk = (size_t)bn_o.batch * bn_o.event_bytes;
    for (int i = 0; i < bn_o.clients; i++)
        bn_fill_start(&s.cl[i].fill, bn_conn_new(bn_cl, NULL, NULL), s.paths[i], i, s.stream_bytes,
                      chunk, s.body, filled);
}

void bn_bootstrap_start(void) {
    bn_hist_init(&s.done_lat);
    s.stream_bytes = (uint64_t)bn_o.events * bn_o.event_bytes;
    s.paths = bn_stream_paths("b", bn_o.clients);
    s.cl = rn_xcalloc((size_t)bn_o.clients, sizeof *s.cl);
    size_t chunk = (size_t)bn_o.batch * bn_o.event_bytes;
    s.body = rn_xmalloc(chunk);
    memset(s.body, '.', chunk);
    bn_create_streams(s.paths, bn_o.clients, created);
}
