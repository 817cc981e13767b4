/*
 * sc_catchup.c — the `catchup` scenario: pre-fill one stream with --bytes
 * in --append-bytes appends, then read it whole from offset -1 (following
 * Stream-Next-Offset until Stream-Up-To-Date), first with one client, then
 * with --clients concurrent clients. Reports MB/s (10^6 bytes) of each phase;
 * every client must read exactly the pre-filled byte count.
 */
#include <stdlib.h>
#include <string.h>

#include "phases.h"
#include "report.h"
#include "run.h"
#include "scenarios.h"
#include "util/buf.h"

static struct {
    char *path;
    char *body;
    bn_fill fill;
    bn_replay *readers;
    int running;
    uint64_t t_fill_ns, t_phase_ns;
    double fill_s;
} s;

static int check_bytes(const bn_replay *r) {
    if (r->bytes == bn_o.bytes)
        return 1;
    bn_report_error("catch-up read %llu bytes, the stream holds %llu", (unsigned long long)r->bytes,
                    (unsigned long long)bn_o.bytes);
    bn_run_stop();
    return 0;
}

static void many_done(bn_replay *r) {
    if (!check_bytes(r) || --s.running > 0)
        return;
    uint64_t now = uv_hrtime(), requests = 0;
    for (int i = 0; i < bn_o.clients; i++)
        requests += s.readers[i].requests;
    double secs = bn_secs(s.t_phase_ns, now);
    bn_report_int("clients", bn_o.clients);
    bn_report_real("many_s", secs);
    bn_report_int("many_requests", (int64_t)requests);
    bn_report_real("many_mb_per_s", (double)bn_o.bytes * bn_o.clients / 1e6 / secs);
    bn_report_int("server_rss_kib", bn_server_rss_kib());
    bn_run_stop();
}

static void one_done(bn_replay *r) {
    if (!check_bytes(r))
        return;
    double secs = bn_secs(r->t_start_ns, r->t_end_ns);
    bn_report_real("one_s", secs);
    bn_report_int("one_requests", (int64_t)r->requests);
    bn_report_real("one_mb_per_s", (double)bn_o.bytes / 1e6 / secs);
    s.readers = rn_xcalloc((size_t)bn_o.clients, sizeof *s.readers);
    s.running = bn_o.clients;
    s.t_phase_ns = uv_hrtime();
    bn_replay_start(&s.readers[0], r->c, s.path, many_done);
    for (int i = 1; i < bn_o.clients; i++)
        bn_replay_start(&s.readers[i], bn_conn_new(bn_cl, NULL, NULL), s.path, many_done);
}

static void filled(bn_fill *f) {
    static bn_replay one;
    s.fill_s = bn_secs(s.t_fill_ns, uv_hrtime());
    bn_report_str("scenario", "catchup");
    bn_report_int("bytes", (int64_t)bn_o.bytes);
    bn_report_int("append_bytes", (int64_t)bn_o.append_bytes);
    bn_report_real("fill_s", s.fill_s);
    bn_report_real("fill_mb_per_s", (double)bn_o.bytes / 1e6 / s.fill_s);
    bn_replay_start(&one, f->c, s.path, one_done);
}

static void created(void) {
    s.t_fill_ns = uv_hrtime();
    bn_fill_start(&s.fill, bn_conn_new(bn_cl, NULL, NULL), s.path, 0, bn_o.bytes, bn_o.append_bytes,
                  s.body, filled);
}

void bn_catchup_start(void) {
    char **paths = bn_stream_paths("c", 1);
    s.path = paths[0];
    s.body = rn_xmalloc(bn_o.append_bytes);
    memset(s.body, '.', bn_o.append_bytes);
    bn_create_streams(paths, 1, created);
}
