/*
 * sc_longpoll.c — the `longpoll` scenario: --readers long-poll readers
 * parked on --streams streams (reader i on stream i mod streams), and
 * writers appending --rate events/s in total, round-robin over the streams,
 * for --duration seconds. Payloads carry their send time, so every wake-up
 * (a 200 carrying the new bytes) gives one append-to-wake latency per
 * append it delivers; the reader then parks again at Stream-Next-Offset.
 * A 204 (the server's long-poll timeout) re-parks the reader and is counted.
 *
 * The server's RSS (--server-pid) is sampled once all readers have had
 * 2 s + 1 s per 5,000 readers to park ("parked"), and every 100 ms after
 * ("peak"). Writers: min(streams, 16) connections, writer j owning streams
 * j, j+W, … so each stream's producer sequence stays in order.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hist.h"
#include "report.h"
#include "run.h"
#include "scenarios.h"
#include "util/buf.h"

typedef struct {
    bn_conn *c;
    int stream;
    rn_buf body;
} reader;

typedef struct {
    bn_conn *c;
    int j;
    int next;   /* index among its own streams */
    int stream; /* of the append in flight */
} writer;

static struct {
    char **paths;
    uint64_t *seq;  /* per stream */
    int *n_readers; /* per stream */
    reader *r;
    writer *w;
    int n_writers;
    char *payload;
    bn_hist lat;
    bn_pacer pacer;
    int writing;
    int next_writer;
    uint64_t appends, expected, wakes, timeouts, delivered;
    int64_t rss_parked, rss_peak;
    uint64_t t_drain_ns;
} s;

static void park(reader *r, const char *offset) {
    char path[1024];
    snprintf(path, sizeof path, "%s?offset=%s&live=long-poll", s.paths[r->stream], offset);
    r->body.len = 0;
    bn_conn_request(r->c, "GET", path, NULL, NULL, 0);
}

static void on_stamp(void *arg, uint64_t ns) {
    bn_hist_add(&s.lat, (uv_hrtime() - ns) / 1000);
    s.delivered++;
}

static void reader_body(bn_conn *c, const char *at, size_t n) {
    reader *r = bn_conn_user(c);
    rn_buf_append(&r->body, at, n);
}

static void reader_done(bn_conn *c, int err) {
    static const int ok[] = {200, 204, 0};
    reader *r = bn_conn_user(c);
    if (!bn_expect(c, err, "long-poll (GET live=long-poll)", ok))
        return;
    const bn_resp *resp = bn_conn_resp(c);
    if (resp->status == 200) {
        s.wakes++;
        bn_stamp_scan((const char *)r->body.data, r->body.len, on_stamp, r);
    } else {
        s.timeouts++;
    }
    if (!resp->next_offset[0]) {
        bn_report_error("long-poll answer %d without Stream-Next-Offset", resp->status);
        bn_run_stop();
        return;
    }
    char next[sizeof resp->next_offset];
    memcpy(next, resp->next_offset, sizeof next);
    park(r, next);
}

static void append(writer *w) {
    char h[512];
    int stream = w->j + w->next * s.n_writers;
    if (stream >= bn_o.streams) {
        w->next = 0;
        stream = w->j;
    }
    w->next++;
    w->stream = stream;
    bn_stamp(s.payload, bn_o.payload, uv_hrtime());
    s.pacer.issued++;
    bn_conn_request(w->c, "POST", s.paths[stream],
                    bn_append_headers(h, sizeof h, stream, s.seq[stream]++), s.payload,
                    bn_o.payload);
}

static void writer_done(bn_conn *c, int err) {
    static const int ok[] = {200, 204, 0};
    writer *w = bn_conn_user(c);
    if (!bn_expect(c, err, "append (POST)", ok))
        return;
    s.appends++;
    s.expected += (uint64_t)s.n_readers[w->stream];
}

static void finish(void) {
    if (s.appends == 0)
        bn_report_error("no append was acknowledged during the %.0f s of writing", bn_o.duration);
    bn_report_str("scenario", "longpoll");
    bn_report_int("readers", bn_o.readers);
    bn_report_int("streams", bn_o.streams);
    bn_report_real("rate_target", bn_o.rate);
    bn_report_real("duration_s", bn_o.duration);
    bn_report_int("appends", (int64_t)s.appends);
    bn_report_int("wakes", (int64_t)s.wakes);
    bn_report_int("delivered", (int64_t)s.delivered);
    bn_report_int("expected", (int64_t)s.expected);
    bn_report_int("timeouts_204", (int64_t)s.timeouts);
    bn_report_hist("wake_latency", &s.lat);
    bn_report_int("server_rss_parked_kib", s.rss_parked);
    bn_report_int("server_rss_peak_kib", s.rss_peak);
    bn_run_stop();
}

static void sample_rss(void) {
    int64_t kib = bn_server_rss_kib();
    if (kib > s.rss_peak)
        s.rss_peak = kib;
}

/* 1 ms tick: pacing, then a 1 s drain. */
static void on_tick(uv_timer_t *t) {
    uint64_t now = uv_hrtime();
    if (s.writing) {
        if (bn_secs(s.pacer.t0_ns, now) >= bn_o.duration) {
            s.writing = 0;
            s.t_drain_ns = now;
            return;
        }
        uint64_t due = bn_pacer_due(&s.pacer, now);
        for (int k = 0; k < s.n_writers && due > 0; k++) {
            writer *w = &s.w[(s.next_writer + k) % s.n_writers];
            if (bn_conn_busy(w->c))
                continue;
            append(w);
            due--;
            s.next_writer = (w->j + 1) % s.n_writers;
        }
        return;
    }
    if (bn_secs(s.t_drain_ns, now) > 1.0)
        finish();
}

static void on_rss(uv_timer_t *t) {
    sample_rss();
}

static void on_parked(uv_timer_t *t) {
    s.rss_parked = bn_server_rss_kib();
    sample_rss();
    bn_timer(on_rss, 100, 100);
    s.writing = 1;
    s.pacer = (bn_pacer){.rate = bn_o.rate, .t0_ns = uv_hrtime()};
    bn_timer(on_tick, 1, 1);
}

static void created(void) {
    static const bn_handlers rh = {.on_body = reader_body, .on_done = reader_done};
    static const bn_handlers wh = {.on_done = writer_done};
    for (int i = 0; i < bn_o.readers; i++) {
        s.r[i].stream = i % bn_o.streams;
        s.n_readers[s.r[i].stream]++;
        s.r[i].c = bn_conn_new(bn_cl, &rh, &s.r[i]);
        park(&s.r[i], "now");
    }
    for (int j = 0; j < s.n_writers; j++) {
        s.w[j].j = j;
        s.w[j].c = bn_conn_new(bn_cl, &wh, &s.w[j]);
    }
    bn_timer(on_parked, 2000 + (uint64_t)bn_o.readers / 5, 0);
}

void bn_longpoll_start(void) {
    bn_hist_init(&s.lat);
    s.rss_parked = s.rss_peak = -1;
    s.n_writers = bn_o.streams < 16 ? bn_o.streams : 16;
    s.paths = bn_stream_paths("l", bn_o.streams);
    s.seq = rn_xcalloc((size_t)bn_o.streams, sizeof *s.seq);
    s.n_readers = rn_xcalloc((size_t)bn_o.streams, sizeof *s.n_readers);
    s.r = rn_xcalloc((size_t)bn_o.readers, sizeof *s.r);
    s.w = rn_xcalloc((size_t)s.n_writers, sizeof *s.w);
    s.payload = rn_xmalloc(bn_o.payload);
    bn_create_streams(s.paths, bn_o.streams, created);
}
