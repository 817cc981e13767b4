/*
 * sc_fanout.c — the `fanout` scenario: one stream, --subscribers SSE readers
 * (`?offset=now&live=sse`), one writer appending --rate events/s for
 * --duration seconds. Every payload carries its send time (monotonic clock;
 * writer and readers share this process), so each delivery to each
 * subscriber gives one publish-to-receive latency.
 *
 * Phases: create the stream; open all subscriptions and wait until every
 * one has its response headers (at most 10 s, then go on and report how
 * many were ready); write; then wait up to 3 s for the deliveries still in
 * flight. expected = acknowledged appends × ready subscribers.
 * An SSE response that ends early is reopened at offset=now and counted.
 *
 * With --tail-cmd, --tails copies of that command (a client program, e.g.
 * `runnel tail -f`) are started with the stream's URL as last argument
 * right after the stream is created, before the SSE subscriptions, and
 * read from offset -1 on. Their stdout is read on this loop
 * (proc_readers.c) and cut into --payload-byte records: each record must
 * be, byte for byte, the next payload sent (else a run error), and gives
 * one latency on the same clock, taken the same way, as the SSE readers'.
 * The drain also waits for them; then they get SIGTERM.
 *
 * Started first, the tails are the server's oldest waiters; it wakes the
 * newest first, so a tail gets each event about last. To tell that place
 * in line from the client's own cost, each tail record is also compared
 * with the last SSE reader's arrival of the same event (tail_after_last_sse:
 * its percentiles over all events and tails, in µs; negative when the tail
 * came first).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hist.h"
#include "proc_readers.h"
#include "report.h"
#include "run.h"
#include "scenarios.h"
#include "sse.h"
#include "util/buf.h"

typedef struct {
    bn_conn *c;
    bn_sse sse;
    int ready;
} sub;

static struct {
    char *path;
    char sse_path[600];
    sub *subs;
    int ready;
    bn_conn *writer;
    bn_hist lat, append_lat;
    bn_pacer pacer;
    char *payload;
    int writing;
    uint64_t seq, acked, delivered, reopened;
    uint64_t t_subscribe_ns, t_ready_ns, t_drain_ns;
    /* --tail-cmd readers */
    bn_hist tail_lat;
    uint64_t *sent;     /* stamp of every payload sent, in order */
    uint64_t *sse_last; /* per payload: the last SSE reader's arrival */
    uint64_t *tail_at;  /* per payload and tail: the tail's arrival */
    size_t n_sent, cap_sent;
    uint64_t *tail_next; /* per reader: index in sent of its next record */
    uint64_t tail_delivered;
    char *expect; /* scratch: the payload a record must equal */
} s;

/* The index in s.sent of the payload stamped ns (stamps rise), or n_sent. */
static size_t sent_index(uint64_t ns) {
    size_t lo = 0, hi = s.n_sent;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (s.sent[mid] < ns)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < s.n_sent && s.sent[lo] == ns ? lo : s.n_sent;
}

static void on_stamp(void *arg, uint64_t ns) {
    uint64_t now = uv_hrtime();
    bn_hist_add(&s.lat, (now - ns) / 1000);
    s.delivered++;
    if (bn_o.tails) {
        size_t i = sent_index(ns);
        if (i < s.n_sent && now > s.sse_last[i])
            s.sse_last[i] = now;
    }
}

static void on_data_line(void *arg, const char *line, size_t n) {
    bn_stamp_scan(line, n, on_stamp, arg);
}

static void sub_headers(bn_conn *c) {
    sub *u = bn_conn_user(c);
    if (bn_conn_resp(c)->status == 200 && !u->ready) {
        u->ready = 1;
        s.ready++;
    }
}

static void sub_body(bn_conn *c, const char *at, size_t n) {
    sub *u = bn_conn_user(c);
    bn_sse_feed(&u->sse, at, n);
}

static void sub_done(bn_conn *c, int err) {
    static const int ok[] = {200, 0};
    if (!bn_expect(c, err, "SSE subscription (GET live=sse)", ok))
        return;
    s.reopened++;
    bn_conn_request(c, "GET", s.sse_path, NULL, NULL, 0);
}

static void on_tail_record(void *arg, int reader, const char *rec, size_t len) {
    uint64_t i = s.tail_next[reader]++;
    if (i < s.n_sent)
        bn_stamp(s.expect, len, s.sent[i]);
    if (i >= s.n_sent || memcmp(rec, s.expect, len) != 0) {
        bn_report_error("tail reader %d: record %llu (%zu bytes) is not payload %llu as sent",
                        reader, (unsigned long long)i, len, (unsigned long long)i);
        bn_run_stop();
        return;
    }
    uint64_t now = uv_hrtime();
    bn_hist_add(&s.tail_lat, (now - s.sent[i]) / 1000);
    s.tail_at[i * (size_t)bn_o.tails + (size_t)reader] = now;
    s.tail_delivered++;
}

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* tail_after_last_sse_{p50,p99,max}_us over the payloads every SSE reader
 * and the tail both got. */
static void report_tail_vs_sse(void) {
    size_t n = 0, t = (size_t)bn_o.tails;
    int64_t *d = rn_xmalloc((s.n_sent * t + 1) * sizeof *d);
    for (size_t i = 0; i < s.n_sent; i++)
        for (size_t k = 0; k < t; k++)
            if (s.sse_last[i] && s.tail_at[i * t + k])
                d[n++] = ((int64_t)s.tail_at[i * t + k] - (int64_t)s.sse_last[i]) / 1000;
    qsort(d, n, sizeof *d, cmp_i64);
    bn_report_int("tail_after_last_sse_count", (int64_t)n);
    bn_report_int("tail_after_last_sse_p50_us", n ? d[(n - 1) / 2] : 0);
    bn_report_int("tail_after_last_sse_p99_us", n ? d[(n * 99 + 99) / 100 - 1] : 0);
    bn_report_int("tail_after_last_sse_max_us", n ? d[n - 1] : 0);
    free(d);
}

static void report(void) {
    uint64_t data_events = 0, control_events = 0;
    if (s.acked == 0)
        bn_report_error("no append was acknowledged during the %.0f s of writing", bn_o.duration);
    for (int i = 0; i < bn_o.subscribers; i++) {
        data_events += s.subs[i].sse.data_events;
        control_events += s.subs[i].sse.control_events;
    }
    bn_report_str("scenario", "fanout");
    bn_report_int("subscribers", bn_o.subscribers);
    bn_report_int("subscribers_ready", s.ready);
    bn_report_real("rate_target", bn_o.rate);
    bn_report_int("payload_bytes", (int64_t)bn_o.payload);
    bn_report_real("duration_s", bn_o.duration);
    bn_report_int("appends", (int64_t)s.acked);
    bn_report_int("expected", (int64_t)(s.acked * (uint64_t)s.ready));
    bn_report_int("delivered", (int64_t)s.delivered);
    bn_report_int("sse_data_events", (int64_t)data_events);
    bn_report_int("sse_control_events", (int64_t)control_events);
    bn_report_int("sse_reopened", (int64_t)s.reopened);
    bn_report_hist("delivery_latency", &s.lat);
    bn_report_hist("append_latency", &s.append_lat);
    if (bn_o.tails) {
        uint64_t bytes = 0;
        for (int i = 0; i < bn_o.tails; i++)
            bytes += bn_procs_bytes(i);
        bn_report_int("tail_readers", bn_o.tails);
        bn_report_int("tail_expected", (int64_t)(s.acked * (uint64_t)bn_o.tails));
        bn_report_int("tail_delivered", (int64_t)s.tail_delivered);
        bn_report_int("tail_bytes", (int64_t)bytes);
        bn_report_int("tail_bytes_expected",
                      (int64_t)(s.acked * bn_o.payload * (uint64_t)bn_o.tails));
        bn_report_hist("tail_delivery_latency", &s.tail_lat);
        report_tail_vs_sse();
        bn_report_real("tail_cpu_s", bn_procs_cpu_s());
    }
    bn_report_int("server_rss_kib", bn_server_rss_kib());
    bn_run_stop();
}

static void finish(void) {
    if (bn_o.tails)
        bn_procs_stop(report); /* reports once they are reaped (their CPU time) */
    else
        report();
}

static void send_event(void) {
    char h[512];
    uint64_t now = uv_hrtime();
    bn_stamp(s.payload, bn_o.payload, now);
    if (bn_o.tails) {
        if (s.n_sent == s.cap_sent) {
            s.cap_sent = s.cap_sent ? 2 * s.cap_sent : 1024;
            s.sent = rn_xrealloc(s.sent, s.cap_sent * sizeof *s.sent);
            s.sse_last = rn_xrealloc(s.sse_last, s.cap_sent * sizeof *s.sse_last);
            s.tail_at = rn_xrealloc(s.tail_at, s.cap_sent * (size_t)bn_o.tails * sizeof *s.tail_at);
        }
        s.sse_last[s.n_sent] = 0;
        memset(&s.tail_at[s.n_sent * (size_t)bn_o.tails], 0,
               (size_t)bn_o.tails * sizeof *s.tail_at);
        s.sent[s.n_sent++] = now;
    }
    s.pacer.issued++;
    bn_conn_request(s.writer, "POST", s.path, bn_append_headers(h, sizeof h, 0, s.seq), s.payload,
                    bn_o.payload);
}

static void on_append(bn_conn *c, int err) {
    static const int ok[] = {200, 204, 0};
    if (!bn_expect(c, err, "append (POST)", ok))
        return;
    bn_hist_add(&s.append_lat, (uv_hrtime() - bn_conn_resp(c)->t_start_ns) / 1000);
    s.seq++;
    s.acked++;
    if (s.writing && bn_pacer_due(&s.pacer, uv_hrtime()) > 0)
        send_event();
}

/* 1 ms tick: paces the writer while writing, then ends the drain once every
 * delivery arrived or 3 s passed. */
static void on_tick(uv_timer_t *t) {
    uint64_t now = uv_hrtime();
    if (s.writing) {
        if (bn_secs(s.pacer.t0_ns, now) >= bn_o.duration) {
            s.writing = 0;
            s.t_drain_ns = now;
        } else if (!bn_conn_busy(s.writer) && bn_pacer_due(&s.pacer, now) > 0) {
            send_event();
        }
        return;
    }
    if (bn_conn_busy(s.writer))
        return;
    int all = s.delivered >= s.acked * (uint64_t)s.ready &&
              s.tail_delivered >= s.acked * (uint64_t)bn_o.tails;
    if (all || bn_secs(s.t_drain_ns, now) > 3.0) {
        uv_timer_stop(t);
        finish();
    }
}

/* 10 ms poll while subscribing: writing starts 200 ms after the last
 * subscription got its headers (or after 10 s). */
static void on_wait_ready(uv_timer_t *t) {
    uint64_t now = uv_hrtime();
    if (!s.t_ready_ns) {
        if (s.ready < bn_o.subscribers && bn_secs(s.t_subscribe_ns, now) < 10.0)
            return;
        s.t_ready_ns = now;
    }
    if (bn_secs(s.t_ready_ns, now) < 0.2)
        return;
    uv_timer_stop(t);
    s.writing = 1;
    s.pacer = (bn_pacer){.rate = bn_o.rate, .t0_ns = now};
    bn_timer(on_tick, 1, 1);
}

static void subscribe(void) {
    static const bn_handlers sh = {
        .on_headers = sub_headers, .on_body = sub_body, .on_done = sub_done};
    static const bn_handlers wh = {.on_done = on_append};
    s.writer = bn_conn_new(bn_cl, &wh, NULL);
    if (bn_o.tails) {
        char url[700];
        snprintf(url, sizeof url, "http://%s%s", bn_o.target.host_header, s.path);
        s.tail_next = rn_xcalloc((size_t)bn_o.tails, sizeof *s.tail_next);
        s.expect = rn_xmalloc(bn_o.payload);
        if (bn_procs_start(bn_o.tail_cmd, url, bn_o.tails, bn_o.payload, on_tail_record, NULL))
            return;
    }
    s.t_subscribe_ns = uv_hrtime();
    for (int i = 0; i < bn_o.subscribers; i++) {
        sub *u = &s.subs[i];
        bn_sse_init(&u->sse, on_data_line, u);
        u->c = bn_conn_new(bn_cl, &sh, u);
        bn_conn_request(u->c, "GET", s.sse_path, NULL, NULL, 0);
    }
    bn_timer(on_wait_ready, 10, 10);
}

void bn_fanout_start(void) {
    bn_hist_init(&s.lat);
    bn_hist_init(&s.append_lat);
    bn_hist_init(&s.tail_lat);
    s.subs = rn_xcalloc((size_t)bn_o.subscribers, sizeof *s.subs);
    s.payload = rn_xmalloc(bn_o.payload);
    char **paths = bn_stream_paths("f", 1);
    s.path = paths[0];
    snprintf(s.sse_path, sizeof s.sse_path, "%s?offset=now&live=sse", s.path);
    bn_create_streams(paths, 1, subscribe);
}
