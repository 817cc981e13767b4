/*
 * sc_tokens.c — the `tokens` scenario (issue 31, token streaming, the
 * workload of AI apps): --streams streams [1000], each appended --rate
 * [20] times a second with --payload [40] B, each tailed by
 * --readers-per-stream [10] SSE readers (`?offset=now&live=sse`): by
 * default 20,000 appends/s and 200,000 deliveries/s for --duration [8] s.
 *
 * Phases: create the streams; open the streams × readers-per-stream SSE
 * readers (reader r on stream r mod streams) and wait until each has its
 * answer's headers (at most 10 s + 1 s per 1,000 readers; readers not ready
 * by then are an error and are not counted: readers_ready vs
 * readers_counted); connect the writers (one connection per stream, made by
 * a HEAD of the stream, so no append pays a connect); write; then drain:
 * wait until every append was answered and every delivery arrived, or 5 s.
 *
 * Writing is paced, not in bursts: append k of stream i is due at
 * t0 + (k × streams + i + 1) / (streams × rate), so the streams take turns
 * evenly (a 1 ms tick issues what is due, so an append starts up to 1 ms
 * after its due time even when nothing waits). A stream has one append in
 * flight at a time, with producer headers; an append due while the
 * previous one is unanswered goes out when that answer comes
 * (append_start_lag: due time to send time). Every payload carries its send
 * time (monotonic clock; writers and readers share this process), so each
 * delivery gives one append-to-delivery latency.
 *
 * expected = appends sent × ready readers of their stream: every append
 * sent must reach every reader (appends sent but never answered count too;
 * expected_acked counts only the answered ones). A reader whose SSE answer
 * ends cleanly (e.g. the server's --sse-max-duration-ms) is reopened at
 * offset=now and counted (sse_reopened); what it missed meanwhile counts as
 * lost. A reader or writer that fails while writing is an error; it is
 * retired and the run goes on to its end, so a server that dies mid-run
 * gives a report with delivered < expected and exit status 1, not a hang.
 * A refusal while the readers open (a 503, or a connection closed before
 * any answer) ends the run at once with an error naming the server flags.
 *
 * Server CPU: with --server-pid, user + system time of that process (all
 * its threads, /proc/PID/stat) from the start of writing to the end of the
 * drain: server_cpu_s and server_cpu_per_delivery_us. bench_cpu_s is this
 * process's own over the same window: the load generator is one libuv loop,
 * so a value near measured_s means it was the bottleneck.
 *
 * Runnel's defaults (--max-connections 10000, --max-live-reads 8192) are
 * too small for the default sizes: 10,000 readers + 1,000 writers need
 *   runnel serve ... --max-connections 12000 --max-live-reads 12000
 * (as bench/compare starts it), and this process needs
 * readers + streams + 100 file descriptors (its soft limit is raised to the
 * hard one; ulimit -n 20000 is enough). The Node reference:
 *   node bench/reference/start.mjs PORT DATA 30000 1024
 * (1,024 open stream files for the 1,000 streams).
 *
 * How to run it:
 *   build-release/bench/runnel-bench tokens --base http://127.0.0.1:PORT \
 *       --server-pid PID --json
 * (defaults: --streams 1000 --rate 20 --payload 40 --readers-per-stream 10
 * --duration 8); bench/tokens.sh runs it against a fresh Runnel and the
 * reference, beside the fan-out floor, for several rounds.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "hist.h"
#include "report.h"
#include "run.h"
#include "scenarios.h"
#include "sse.h"
#include "util/buf.h"

#define DRAIN_S 5.0
#define SETTLE_S 0.2 /* between the last reader ready and the first append */

enum phase { CREATING, SUBSCRIBING, CONNECTING, WRITING, DRAINING, DONE };

typedef struct {
    bn_conn *c;
    bn_sse sse;
    int stream;
    int ready;   /* its answer's headers arrived (200) */
    int counted; /* ready when writing began: its deliveries are expected */
    uint64_t got;
} reader;

typedef struct {
    bn_conn *c;
    int idx;
    int dead;
    uint64_t due;  /* appends of this stream due so far */
    uint64_t sent; /* appends issued (= the next producer seq) */
} writer;

static struct {
    char **paths;
    char **sse_paths;
    reader *r;
    int n_readers;
    writer *w;
    int *counted; /* per stream: counted readers */
    char *payload;
    enum phase phase;
    bn_hist lat, append_lat, start_lag;
    bn_pacer pacer; /* all streams' appends, in turn */
    int ready, n_counted, connected, dead_writers;
    uint64_t inflight, sent, acked, append_errors, reader_errors, reopened, delivered;
    uint64_t expected, expected_acked, unsent;
    uint64_t t_subscribe_ns, t_ready_ns, t0_ns, t_write_end_ns;
    double server_cpu0, bench_cpu0;
    int reported;
} s;

/* ---- CPU ------------------------------------------------------------- */

/* User + system seconds of the server so far (all threads), or -1. */
static double server_cpu_s(void) {
    char path[64], buf[1024];
    if (bn_o.server_pid <= 0)
        return -1;
    snprintf(path, sizeof path, "/proc/%d/stat", bn_o.server_pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    const char *p = strrchr(buf, ')'); /* the command name may hold spaces */
    unsigned long long ut, st;
    /* after ") ": state(3) ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt
     * utime(14) stime(15) */
    if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
        return -1;
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

static double bench_cpu_s(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

/* ---- report ------------------------------------------------------------ */

static void report(void) {
    if (s.reported)
        return;
    s.reported = 1;
    uint64_t now = uv_hrtime(), data_events = 0, control_events = 0;
    int short_readers = 0;
    for (int i = 0; i < s.n_readers; i++) {
        reader *r = &s.r[i];
        data_events += r->sse.data_events;
        control_events += r->sse.control_events;
        if (r->counted && r->got < s.w[r->stream].sent)
            short_readers++;
    }
    double window = s.t0_ns ? bn_secs(s.t0_ns, now) : 0;
    double writing = s.t0_ns ? bn_secs(s.t0_ns, s.t_write_end_ns ? s.t_write_end_ns : now) : 0;
    double cpu = -1, bench_cpu = -1, cpu1 = s.t0_ns ? server_cpu_s() : -1;
    if (s.t0_ns && cpu1 >= 0 && s.server_cpu0 >= 0)
        cpu = cpu1 - s.server_cpu0;
    if (s.t0_ns)
        bench_cpu = bench_cpu_s() - s.bench_cpu0;
    if (s.t0_ns && s.acked == 0)
        bn_report_error("no append was acknowledged during the %.0f s of writing", bn_o.duration);
    bn_report_str("scenario", "tokens");
    bn_report_int("streams", bn_o.streams);
    bn_report_int("readers_per_stream", bn_o.readers_per_stream);
    bn_report_int("readers", s.n_readers);
    bn_report_int("readers_ready", s.ready);
    bn_report_int("readers_counted", s.n_counted);
    bn_report_real("rate_per_stream", bn_o.rate);
    bn_report_real("appends_per_s_target", bn_o.rate * bn_o.streams);
    bn_report_int("payload_bytes", (int64_t)bn_o.payload);
    bn_report_real("duration_s", writing);
    bn_report_int("appends_sent", (int64_t)s.sent);
    bn_report_int("appends", (int64_t)s.acked);
    bn_report_int("appends_unsent", (int64_t)s.unsent);
    bn_report_int("append_errors", (int64_t)s.append_errors);
    bn_report_real("appends_per_s", writing > 0 ? (double)s.acked / writing : 0);
    bn_report_int("expected", (int64_t)s.expected);
    bn_report_int("expected_acked", (int64_t)s.expected_acked);
    bn_report_int("delivered", (int64_t)s.delivered);
    bn_report_real("deliveries_per_s", window > 0 ? (double)s.delivered / window : 0);
    bn_report_int("readers_short", short_readers);
    bn_report_int("reader_errors", (int64_t)s.reader_errors);
    bn_report_int("sse_data_events", (int64_t)data_events);
    bn_report_int("sse_control_events", (int64_t)control_events);
    bn_report_int("sse_reopened", (int64_t)s.reopened);
    bn_report_hist("delivery_latency", &s.lat);
    bn_report_hist("append_latency", &s.append_lat);
    bn_report_hist("append_start_lag", &s.start_lag);
    bn_report_real("measured_s", window);
    bn_report_real("server_cpu_s", cpu);
    bn_report_real("server_cpu_per_delivery_us",
                   cpu >= 0 && s.delivered ? cpu * 1e6 / (double)s.delivered : -1);
    bn_report_real("bench_cpu_s", bench_cpu);
    bn_report_int("server_rss_kib", bn_server_rss_kib());
}

static void finish(void) {
    s.phase = DONE;
    report();
    bn_run_stop();
}

/* ---- readers ------------------------------------------------------------ */

static void on_stamp(void *arg, uint64_t ns) {
    reader *r = arg;
    if (!r->counted)
        return;
    bn_hist_add(&s.lat, (uv_hrtime() - ns) / 1000);
    s.delivered++;
    r->got++;
}

static void on_data_line(void *arg, const char *line, size_t n) {
    bn_stamp_scan(line, n, on_stamp, arg);
}

static void sub_headers(bn_conn *c) {
    reader *r = bn_conn_user(c);
    if (bn_conn_resp(c)->status == 200 && !r->ready) {
        r->ready = 1;
        s.ready++;
    }
}

static void sub_body(bn_conn *c, const char *at, size_t n) {
    reader *r = bn_conn_user(c);
    bn_sse_feed(&r->sse, at, n);
}

/* What the server needs for this run's connections. */
static void flags_hint(char *out, size_t cap) {
    int conns = s.n_readers + bn_o.streams + 100;
    snprintf(out, cap,
             "Runnel needs --max-live-reads >= %d and --max-connections >= %d "
             "(e.g. --max-connections 12000 --max-live-reads 12000 for the default sizes)",
             s.n_readers, conns);
}

static void sub_done(bn_conn *c, int err) {
    reader *r = bn_conn_user(c);
    int status = err ? 0 : bn_conn_resp(c)->status;
    if (bn_run_stopping())
        return;
    if (!r->ready && s.phase < WRITING && (err || status != 200)) {
        char hint[256];
        flags_hint(hint, sizeof hint);
        if (err)
            bn_report_error("SSE reader %d of %d: the connection ended before an answer (%s): "
                            "the server refused it? %s",
                            (int)(r - s.r), s.n_readers,
                            err == BN_EHTTP ? "malformed response" : uv_strerror(err), hint);
        else
            bn_report_error("SSE reader %d of %d: status %d%s; %s", (int)(r - s.r), s.n_readers,
                            status, status == 503 ? " (a live-read or connection limit)" : "",
                            hint);
        finish();
        return;
    }
    if (!err && status == 200) { /* the SSE answer ended: reopen it */
        s.reopened++;
        r->sse.line.len = 0;
        r->sse.in_data = r->sse.is_control = 0;
        bn_conn_request(c, "GET", s.sse_paths[r->stream], NULL, NULL, 0);
        return;
    }
    s.reader_errors++; /* not reopened: what it misses counts as lost */
    if (err)
        bn_report_error("SSE reader %d: %s", (int)(r - s.r),
                        err == BN_EHTTP ? "malformed response" : uv_strerror(err));
    else
        bn_report_error("SSE reader %d: status %d", (int)(r - s.r), status);
}

/* ---- writers ------------------------------------------------------------ */

static void send_append(writer *w, uint64_t now) {
    char h[512];
    double R = bn_o.rate * bn_o.streams;
    uint64_t due_at =
        s.t0_ns +
        (uint64_t)((double)(w->sent * (uint64_t)bn_o.streams + (uint64_t)w->idx + 1) * 1e9 / R);
    bn_hist_add(&s.start_lag, now > due_at ? (now - due_at) / 1000 : 0);
    bn_stamp(s.payload, bn_o.payload, now);
    bn_conn_request(w->c, "POST", s.paths[w->idx], bn_append_headers(h, sizeof h, w->idx, w->sent),
                    s.payload, bn_o.payload);
    w->sent++;
    s.sent++;
    s.inflight++;
    s.expected += (uint64_t)s.counted[w->idx];
}

static void writer_failed(writer *w, int err, int status) {
    s.append_errors++;
    w->dead = 1;
    s.dead_writers++;
    if (err)
        bn_report_error("append to stream %d: %s", w->idx,
                        err == BN_EHTTP ? "malformed response" : uv_strerror(err));
    else
        bn_report_error("append to stream %d: status %d", w->idx, status);
}

static void on_append(bn_conn *c, int err) {
    writer *w = bn_conn_user(c);
    if (bn_run_stopping())
        return;
    s.inflight--;
    int status = err ? 0 : bn_conn_resp(c)->status;
    if (err || (status != 200 && status != 204)) {
        writer_failed(w, err, status);
        return;
    }
    uint64_t now = uv_hrtime();
    bn_hist_add(&s.append_lat, (now - bn_conn_resp(c)->t_start_ns) / 1000);
    s.acked++;
    s.expected_acked += (uint64_t)s.counted[w->idx];
    if (s.phase == WRITING && w->due > w->sent)
        send_append(w, now);
}

/* 1 ms tick: issues the appends due while writing, then ends the drain. */
static void on_tick(uv_timer_t *t) {
    uint64_t now = uv_hrtime();
    if (s.phase == WRITING) {
        if (bn_secs(s.t0_ns, now) >= bn_o.duration || s.dead_writers == bn_o.streams) {
            s.phase = DRAINING;
            s.t_write_end_ns = now;
            for (int i = 0; i < bn_o.streams; i++)
                s.unsent += s.w[i].due - s.w[i].sent;
            return;
        }
        for (uint64_t due = bn_pacer_due(&s.pacer, now); due > 0; due--) {
            writer *w = &s.w[s.pacer.issued++ % (uint64_t)bn_o.streams];
            w->due++;
            if (!w->dead && !bn_conn_busy(w->c))
                send_append(w, now);
        }
        return;
    }
    if (s.phase != DRAINING)
        return;
    if ((s.inflight == 0 && s.delivered >= s.expected) || bn_secs(s.t_write_end_ns, now) > DRAIN_S)
        finish();
}

static void start_writing(void) {
    s.phase = WRITING;
    s.t0_ns = uv_hrtime();
    s.server_cpu0 = server_cpu_s();
    s.bench_cpu0 = bench_cpu_s();
    s.pacer = (bn_pacer){.rate = bn_o.rate * bn_o.streams, .t0_ns = s.t0_ns};
    bn_timer(on_tick, 1, 1);
}

/* The HEAD that connects a writer. */
static void on_connected(bn_conn *c, int err) {
    static const bn_handlers wh = {.on_done = on_append};
    static const int ok[] = {200, 0};
    if (!bn_expect(c, err, "writer connect (HEAD of its stream)", ok))
        return;
    bn_conn_rebind(c, &wh, bn_conn_user(c));
    if (++s.connected == bn_o.streams)
        start_writing();
}

/* ---- setup ------------------------------------------------------------- */

static void connect_writers(void) {
    static const bn_handlers ch = {.on_done = on_connected};
    s.phase = CONNECTING;
    for (int i = 0; i < bn_o.streams; i++) {
        writer *w = &s.w[i];
        w->idx = i;
        w->c = bn_conn_new(bn_cl, &ch, w);
        bn_conn_request(w->c, "HEAD", s.paths[i], NULL, NULL, 0);
    }
}

/* 10 ms poll while the readers open; the writers connect SETTLE_S after the
 * last one is ready (or after the bound). */
static void on_wait_ready(uv_timer_t *t) {
    uint64_t now = uv_hrtime();
    double bound = 10.0 + s.n_readers / 1000.0;
    if (s.phase != SUBSCRIBING)
        return;
    if (!s.t_ready_ns) {
        if (s.ready < s.n_readers && bn_secs(s.t_subscribe_ns, now) < bound)
            return;
        s.t_ready_ns = now;
    }
    if (bn_secs(s.t_ready_ns, now) < SETTLE_S)
        return;
    uv_timer_stop(t);
    for (int i = 0; i < s.n_readers; i++) {
        reader *r = &s.r[i];
        if (r->ready) {
            r->counted = 1;
            s.counted[r->stream]++;
            s.n_counted++;
        }
    }
    if (s.n_counted < s.n_readers)
        bn_report_error("only %d of %d SSE readers had their answer's headers after %.0f s; the "
                        "others are not counted",
                        s.n_counted, s.n_readers, bound);
    connect_writers();
}

static void subscribe(void) {
    static const bn_handlers sh = {
        .on_headers = sub_headers, .on_body = sub_body, .on_done = sub_done};
    s.phase = SUBSCRIBING;
    s.t_subscribe_ns = uv_hrtime();
    for (int i = 0; i < s.n_readers; i++) {
        reader *r = &s.r[i];
        r->stream = i % bn_o.streams;
        bn_sse_init(&r->sse, on_data_line, r);
        r->c = bn_conn_new(bn_cl, &sh, r);
        bn_conn_request(r->c, "GET", s.sse_paths[r->stream], NULL, NULL, 0);
    }
    bn_timer(on_wait_ready, 10, 10);
}

void bn_tokens_start(void) {
    struct rlimit rl;
    bn_hist_init(&s.lat);
    bn_hist_init(&s.append_lat);
    bn_hist_init(&s.start_lag);
    s.n_readers = bn_o.streams * bn_o.readers_per_stream;
    s.r = rn_xcalloc((size_t)s.n_readers, sizeof *s.r);
    s.w = rn_xcalloc((size_t)bn_o.streams, sizeof *s.w);
    s.counted = rn_xcalloc((size_t)bn_o.streams, sizeof *s.counted);
    s.payload = rn_xmalloc(bn_o.payload);
    s.paths = bn_stream_paths("t", bn_o.streams);
    s.sse_paths = rn_xcalloc((size_t)bn_o.streams, sizeof *s.sse_paths);
    for (int i = 0; i < bn_o.streams; i++) {
        s.sse_paths[i] = rn_xmalloc(600);
        snprintf(s.sse_paths[i], 600, "%s?offset=now&live=sse", s.paths[i]);
    }
    bn_run_at_stop(report); /* a run stopped early (error, --timeout) still reports */
    int need = s.n_readers + bn_o.streams + 100;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < (rlim_t)need) {
        bn_report_error("%d readers and %d writers need %d file descriptors; the limit is %llu "
                        "(raise it: ulimit -n)",
                        s.n_readers, bn_o.streams, need, (unsigned long long)rl.rlim_cur);
        bn_run_stop();
        return;
    }
    s.phase = CREATING;
    bn_create_streams(s.paths, bn_o.streams, subscribe);
}
