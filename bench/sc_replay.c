/*
 * sc_replay.c — the `replay` scenario: the --streams streams an earlier
 * `fill` of the same --run-id made ("<run_id>-f-<i>"), each read from
 * offset -1 to its tail on a connection of its own, all at once, for at
 * most --duration seconds. Beside a `writes` run after the server's page
 * cache was dropped, it is the load of cold catch-up readers
 * (bench/cold_reads.sh). Reports the bytes of the answers completed and
 * their rate, and how many streams were read to their tail.
 */
#include "phases.h"
#include "report.h"
#include "run.h"
#include "scenarios.h"
#include "util/buf.h"

static struct {
    char **paths;
    bn_replay *readers;
    int running, finished;
    uint64_t t0_ns;
} s;

static void finish(void) {
    if (s.finished)
        return;
    s.finished = 1;
    double secs = bn_secs(s.t0_ns, uv_hrtime());
    uint64_t bytes = 0, requests = 0;
    for (int i = 0; i < bn_o.streams; i++) {
        bytes += s.readers[i].bytes;
        requests += s.readers[i].requests;
    }
    bn_report_str("scenario", "replay");
    bn_report_int("streams", bn_o.streams);
    bn_report_int("streams_read_whole", bn_o.streams - s.running);
    bn_report_real("replay_s", secs);
    bn_report_int("bytes", (int64_t)bytes);
    bn_report_int("requests", (int64_t)requests);
    bn_report_real("mb_per_s", (double)bytes / 1e6 / secs);
    bn_report_int("server_rss_kib", bn_server_rss_kib());
    bn_run_stop();
}

static void read_whole(bn_replay *r) {
    (void)r;
    if (--s.running == 0)
        finish();
}

static void on_end(uv_timer_t *t) {
    (void)t;
    finish();
}

void bn_replay_scenario_start(void) {
    s.paths = bn_stream_paths("f", bn_o.streams);
    s.readers = rn_xcalloc((size_t)bn_o.streams, sizeof *s.readers);
    s.running = bn_o.streams;
    s.t0_ns = uv_hrtime();
    for (int i = 0; i < bn_o.streams; i++)
        bn_replay_start(&s.readers[i], bn_conn_new(bn_cl, NULL, NULL), s.paths[i], read_whole);
    bn_timer(on_end, (uint64_t)(bn_o.duration * 1000), 0);
}
