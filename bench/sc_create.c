/*
 * sc_create.c — the `create` scenario: --streams empty streams created with
 * PUT (bn_o.content_type) over --clients keep-alive connections, one PUT in
 * flight per connection. For idle-stream capacity: the server's RSS before,
 * after and at every tenth of the way (--server-pid), the create rate and
 * latency. Names are generated per request ("<run_id>-c-<i>"), so a million
 * streams cost the generator no memory; every PUT must answer 201.
 * Progress goes to stderr every 10 s (a million creates take a while).
 */
#include <stdio.h>
#include <string.h>

#include "hist.h"
#include "report.h"
#include "run.h"
#include "scenarios.h"

static struct {
    bn_hist lat;
    int next, done;
    int64_t rss0;
    int64_t rss_tenth[11];
    uint64_t t0_ns;
} s;

static void create_next(bn_conn *c) {
    if (s.next >= bn_o.streams) {
        bn_conn_close(c);
        return;
    }
    char name[128], path[512], h[256];
    snprintf(name, sizeof name, "%s-c-%d", bn_o.run_id, s.next++);
    bn_target_path(&bn_o.target, name, path, sizeof path);
    snprintf(h, sizeof h, "Content-Type: %s\r\n", bn_o.content_type);
    bn_conn_request(c, "PUT", path, h, NULL, 0);
}

static void finished(void) {
    double secs = bn_secs(s.t0_ns, uv_hrtime());
    int64_t rss = bn_server_rss_kib();
    bn_report_str("scenario", "create");
    bn_report_int("streams", bn_o.streams);
    bn_report_int("connections", bn_o.clients);
    bn_report_real("create_s", secs);
    bn_report_real("creates_per_s", bn_o.streams / secs);
    bn_report_hist("create_latency", &s.lat);
    bn_report_int("server_rss_start_kib", s.rss0);
    for (int t = 1; t <= 10; t++) {
        char k[40];
        snprintf(k, sizeof k, "server_rss_at_%d0pct_kib", t);
        bn_report_int(k, s.rss_tenth[t]);
    }
    bn_report_int("server_rss_kib", rss);
    if (s.rss0 >= 0 && rss >= 0)
        bn_report_real("rss_bytes_per_stream", (double)(rss - s.rss0) * 1024 / bn_o.streams);
    bn_run_stop();
}

static void create_done(bn_conn *c, int err) {
    static const int ok[] = {201, 0};
    if (!bn_expect(c, err, "create stream (PUT)", ok))
        return;
    bn_hist_add(&s.lat, (uv_hrtime() - bn_conn_resp(c)->t_start_ns) / 1000);
    s.done++;
    if ((int64_t)s.done * 10 % bn_o.streams < 10) /* crossed a tenth */
        s.rss_tenth[(int64_t)s.done * 10 / bn_o.streams] = bn_server_rss_kib();
    if (s.done == bn_o.streams) {
        bn_conn_close(c);
        finished();
        return;
    }
    create_next(c);
}

static void progress(uv_timer_t *t) {
    double secs = bn_secs(s.t0_ns, uv_hrtime());
    fprintf(stderr, "create: %d of %d streams in %.0f s (%.0f/s), server RSS %lld KiB\n", s.done,
            bn_o.streams, secs, s.done / secs, (long long)bn_server_rss_kib());
}

void bn_create_start(void) {
    static const bn_handlers h = {.on_done = create_done};
    bn_hist_init(&s.lat);
    for (int t = 0; t <= 10; t++)
        s.rss_tenth[t] = -1;
    s.rss0 = bn_server_rss_kib();
    s.t0_ns = uv_hrtime();
    bn_timer(progress, 10000, 10000);
    for (int i = 0; i < bn_o.clients && i < bn_o.streams; i++)
        create_next(bn_conn_new(bn_cl, &h, NULL));
}
