/*
 * sc_writes.c — the `writes` scenario: --streams streams, one writer
 * connection each, appending --payload bytes with producer headers for
 * --duration seconds.
 *
 * --rate 0: closed loop, every writer keeps one append in flight.
 * --rate R: R appends/s in total, issued by a 1 ms pacer to idle writers;
 * latency then counts from the scheduled send time, so a server that falls
 * behind is charged for the wait (no coordinated omission).
 * Reports appends/s over the measured window and append latency.
 */
#include <stdio.h>
#include <stdlib.h>

#include "hist.h"
#include "report.h"
#include "run.h"
#include "scenarios.h"
#include "util/buf.h"

typedef struct {
    bn_conn *c;
    int idx;
    uint64_t seq;
    uint64_t sched_ns; /* scheduled send time of the append in flight */
} writer;

static struct {
    char **paths;
    writer *w;
    char *payload;
    bn_hist lat;
    bn_pacer pacer;
    int measuring;
    int next_idle; /* round-robin start for the pacer */
    int inflight;
    uint64_t appends, dups;
    uint64_t t0_ns, t_last_ns;
} s;

static void send_append(writer *w, uint64_t sched_ns) {
    char h[512];
    w->sched_ns = sched_ns;
    s.inflight++;
    bn_conn_request(w->c, "POST", s.paths[w->idx], bn_append_headers(h, sizeof h, w->idx, w->seq),
                    s.payload, bn_o.payload);
}

/* Scheduled time of the next paced append. */
static uint64_t next_slot(void) {
    return s.pacer.t0_ns + (uint64_t)((double)s.pacer.issued * 1e9 / s.pacer.rate);
}

static void finish(void) {
    double secs = bn_secs(s.t0_ns, s.t_last_ns);
    bn_report_str("scenario", "writes");
    bn_report_int("streams", bn_o.streams);
    bn_report_int("payload_bytes", (int64_t)bn_o.payload);
    bn_report_real("rate_target", bn_o.rate);
    bn_report_real("duration_s", secs);
    bn_report_int("appends", (int64_t)s.appends);
    bn_report_int("duplicates", (int64_t)s.dups);
    bn_report_real("appends_per_s", secs > 0 ? (double)s.appends / secs : 0);
    bn_report_hist("append_latency", &s.lat);
    bn_report_int("server_rss_kib", bn_server_rss_kib());
    bn_run_stop();
}

static void on_append(bn_conn *c, int err) {
    static const int ok[] = {200, 204, 0};
    writer *w = bn_conn_user(c);
    if (!bn_expect(c, err, "append (POST)", ok))
        return;
    uint64_t now = uv_hrtime();
    s.inflight--;
    bn_hist_add(&s.lat, (now - w->sched_ns) / 1000);
    s.appends++;
    s.dups += bn_conn_resp(c)->status == 204;
    s.t_last_ns = now;
    w->seq++;
    if (!s.measuring) {
        if (s.inflight == 0)
            finish();
        return;
    }
    if (bn_o.rate <= 0)
        send_append(w, now);
    else if (bn_pacer_due(&s.pacer, now) > 0) {
        send_append(w, next_slot());
        s.pacer.issued++;
    }
}

static void on_pace(uv_timer_t *t) {
    if (!s.measuring)
        return; /* the window ended: the appends in flight finish the run */
    uint64_t now = uv_hrtime();
    uint64_t due = bn_pacer_due(&s.pacer, now);
    for (int k = 0; k < bn_o.streams && due > 0; k++) {
        writer *w = &s.w[(s.next_idle + k) % bn_o.streams];
        if (bn_conn_busy(w->c))
            continue;
        send_append(w, next_slot());
        s.pacer.issued++;
        due--;
        s.next_idle = (w->idx + 1) % bn_o.streams;
    }
}

static void on_end(uv_timer_t *t) {
    s.measuring = 0;
    if (s.inflight == 0)
        finish();
}

static void start_writing(void) {
    static const bn_handlers h = {.on_done = on_append};
    s.t0_ns = s.t_last_ns = uv_hrtime();
    s.measuring = 1;
    s.pacer = (bn_pacer){.rate = bn_o.rate, .t0_ns = s.t0_ns};
    for (int i = 0; i < bn_o.streams; i++) {
        s.w[i].c = bn_conn_new(bn_cl, &h, &s.w[i]);
        bn_conn_set_addr(s.w[i].c, bn_stream_leader(i));
        s.w[i].idx = i;
        if (bn_o.rate <= 0)
            send_append(&s.w[i], s.t0_ns);
    }
    if (bn_o.rate > 0)
        bn_timer(on_pace, 1, 1);
    bn_timer(on_end, (uint64_t)(bn_o.duration * 1000), 0);
}

void bn_writes_start(void) {
    bn_hist_init(&s.lat);
    s.paths = bn_stream_paths("w", bn_o.streams);
    s.w = rn_xcalloc((size_t)bn_o.streams, sizeof *s.w);
    s.payload = rn_xmalloc(bn_o.payload);
    bn_stamp(s.payload, bn_o.payload, 0);
    bn_create_streams(s.paths, bn_o.streams, start_writing);
}
