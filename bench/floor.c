/*
 * floor.c — `runnel-floor`: the floor under the fanout benchmark (issue 31,
 * "fan-out against the floor"). The same delivery pattern as
 * `runnel-bench fanout` with no server between writer and readers: one
 * process, N connected loopback TCP sockets; for each event a writer
 * thread writes one --payload-byte record (carrying the event's send time)
 * to each of the N sockets, one write() each, and a reader thread waits on
 * all N with epoll and reads them. What it measures is what the kernel
 * alone makes a fan-out pay: N small socket writes and the readers'
 * wake-ups, nothing else.
 *
 * Raw epoll rather than libuv: a floor should be the least work that can
 * deliver the bytes, and the writer is then a plain loop of blocking
 * write()s in its own thread (as a server writing N subscribers from one
 * loop does), the reader one epoll_wait() plus one read() per ready socket
 * (what libuv does underneath, without its callbacks and buffers). Writer
 * and reader run on two threads, so, like server and load generator in the
 * fanout run, they can use both cores at once.
 *
 * Event k is sent at t0 + k / --rate (absolute sleeps, no drift), for
 * --duration s: rate × duration events. Its send time is taken just
 * before its first write; a delivery's latency is the time from then to the
 * reader's read() that completed the record on that socket (the first write
 * of an event to its arrival at each reader: the fanout scenario's
 * publish-to-receive). After the last event the reader waits until every
 * record arrived or 3 s passed. Records are the fanout payload's format
 * ('T' + 16 hex digits of CLOCK_MONOTONIC ns, '.' padding).
 *
 * Reported (bench/report.h: --json gives runnel-bench's JSON object, the
 * summary then goes to stderr): delivered / expected, delivery_latency
 * (count, mean, min, p50, p90, p99, p99.9, max in µs), event_write_time
 * (first to last write of one event), writer_late_max_us (how late the
 * writer started an event), cpu_s and cpu_per_delivery_us (this process,
 * user + system, over the writing and drain). Exit status 0, 1 when a
 * delivery is missing or a socket failed (listed under errors), 2 for usage
 * errors.
 *
 * How to run it (build: cmake --build build-release --target runnel-floor):
 *   build-release/bench/runnel-floor --connections 1000 --rate 50 --duration 8 --json
 * and compare its delivery_latency with runnel-bench fanout --subscribers
 * 1000 --rate 50 --payload 64 --duration 8 run in the same session;
 * bench/tokens.sh does both, alternating, for --rounds rounds.
 * Needs 2 × connections + a few file descriptors (the soft limit is raised
 * to the hard one).
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "hist.h"
#include "report.h"
#include "util/buf.h"

#define STAMP_LEN 17 /* 'T' + 16 hex digits */
#define DRAIN_S 3.0  /* after the last event, wait at most this for deliveries */
#define START_DELAY_MS 200

static const char USAGE[] =
    "usage: runnel-floor [--connections N] [--rate R] [--duration S] [--payload B] [--json]\n"
    "  --connections [1000]  loopback TCP sockets, each written once per event\n"
    "  --rate [50]           events per second\n"
    "  --duration [8]        seconds of events\n"
    "  --payload [64]        bytes per write (19 .. 65536), carrying the send time\n"
    "  --json                print the report as JSON (summary to stderr)\n";

typedef struct {
    int rfd;       /* the reader's end */
    int wfd;       /* the writer's end */
    uint32_t have; /* bytes of an incomplete record in part */
    char *part;    /* allocated when a read ends inside a record */
    uint64_t got;  /* records received */
    int dead;      /* EOF or error: no longer read */
} conn;

static struct {
    int n;
    double rate, duration;
    size_t payload;
    int json;
    conn *c;
    int ep;
    /* writer -> reader */
    atomic_ullong events_written;
    atomic_int writer_done;
    /* reader only (read by main after the join) */
    bn_hist lat;
    uint64_t delivered, bad_records, read_errors, eof;
    /* writer only */
    bn_hist write_time;
    uint64_t write_errors, late_max_ns;
} s;

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void sleep_until(uint64_t ns) {
    struct timespec ts = {.tv_sec = (time_t)(ns / 1000000000u),
                          .tv_nsec = (long)(ns % 1000000000u)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
        ;
}

static double cpu_now_s(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

static void die(const char *what) {
    fprintf(stderr, "runnel-floor: %s: %s\n", what, strerror(errno));
    exit(1);
}

/* ---- reader ---------------------------------------------------------- */

static int hexval(char ch) {
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    if (ch >= 'a' && ch <= 'f')
        return ch - 'a' + 10;
    return -1;
}

/* One complete record that arrived at t. */
static void record(conn *c, const char *p, uint64_t t) {
    uint64_t v = 0;
    int i;
    if (p[0] != 'T') {
        s.bad_records++;
        return;
    }
    for (i = 1; i < STAMP_LEN && hexval(p[i]) >= 0; i++)
        v = v << 4 | (uint64_t)hexval(p[i]);
    if (i != STAMP_LEN || v > t) {
        s.bad_records++;
        return;
    }
    bn_hist_add(&s.lat, (t - v) / 1000);
    s.delivered++;
    c->got++;
}

/* Cuts n bytes that arrived on c at t into records. */
static void consume(conn *c, const char *at, size_t n, uint64_t t) {
    size_t len = s.payload;
    if (c->have) {
        size_t k = len - c->have < n ? len - c->have : n;
        memcpy(c->part + c->have, at, k);
        c->have += (uint32_t)k;
        at += k;
        n -= k;
        if (c->have < len)
            return;
        record(c, c->part, t);
        c->have = 0;
    }
    for (; n >= len; at += len, n -= len)
        record(c, at, t);
    if (n) {
        if (!c->part)
            c->part = rn_xmalloc(len);
        memcpy(c->part, at, n);
        c->have = (uint32_t)n;
    }
}

static void *reader_main(void *arg) {
    static char buf[64 * 1024];
    struct epoll_event evs[1024];
    uint64_t t_done = 0;
    for (;;) {
        int k = epoll_wait(s.ep, evs, 1024, 20);
        if (k < 0 && errno != EINTR)
            die("epoll_wait");
        for (int e = 0; e < k; e++) {
            conn *c = &s.c[evs[e].data.u32];
            ssize_t r = read(c->rfd, buf, sizeof buf);
            uint64_t t = now_ns();
            if (r > 0) {
                consume(c, buf, (size_t)r, t);
                continue;
            }
            if (r < 0 && (errno == EAGAIN || errno == EINTR))
                continue;
            if (r == 0)
                s.eof++;
            else
                s.read_errors++;
            c->dead = 1;
            epoll_ctl(s.ep, EPOLL_CTL_DEL, c->rfd, NULL);
        }
        if (!atomic_load(&s.writer_done))
            continue;
        uint64_t now = now_ns();
        if (!t_done)
            t_done = now;
        uint64_t expected = atomic_load(&s.events_written) * (uint64_t)s.n;
        if (s.delivered >= expected || (double)(now - t_done) / 1e9 > DRAIN_S)
            break;
    }
    return NULL;
}

/* ---- writer ------------------------------------------------------------ */

static void stamp(char *buf, size_t len, uint64_t ns) {
    char m[24];
    snprintf(m, sizeof m, "T%016llx", (unsigned long long)ns);
    memset(buf, '.', len);
    memcpy(buf, m, STAMP_LEN);
}

static void write_all(int fd, const char *p, size_t n) {
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            s.write_errors++;
            return;
        }
        p += w;
        n -= (size_t)w;
    }
}

static void write_events(uint64_t t0, uint64_t events) {
    char *payload = rn_xmalloc(s.payload);
    for (uint64_t k = 0; k < events; k++) {
        uint64_t at = t0 + (uint64_t)((double)k * 1e9 / s.rate);
        sleep_until(at);
        uint64_t t = now_ns();
        if (t - at > s.late_max_ns)
            s.late_max_ns = t - at;
        stamp(payload, s.payload, t);
        for (int i = 0; i < s.n; i++)
            write_all(s.c[i].wfd, payload, s.payload);
        bn_hist_add(&s.write_time, (now_ns() - t) / 1000);
        atomic_store(&s.events_written, k + 1);
    }
    atomic_store(&s.writer_done, 1);
    free(payload);
}

/* ---- setup ------------------------------------------------------------- */

static void raise_fd_limit(int need) {
    struct rlimit r;
    if (getrlimit(RLIMIT_NOFILE, &r) != 0)
        die("getrlimit");
    if (r.rlim_cur < (rlim_t)need && r.rlim_cur < r.rlim_max) {
        r.rlim_cur = r.rlim_max;
        setrlimit(RLIMIT_NOFILE, &r);
    }
    if (r.rlim_cur < (rlim_t)need) {
        fprintf(stderr,
                "runnel-floor: %d connections need %d file descriptors; the limit is %llu "
                "(raise it: ulimit -n)\n",
                s.n, need, (unsigned long long)r.rlim_cur);
        exit(2);
    }
}

/* N connected pairs over one loopback listener. */
static void connect_all(void) {
    int one = 1;
    int l = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t alen = sizeof a;
    if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof a) != 0 || listen(l, 128) != 0 ||
        getsockname(l, (struct sockaddr *)&a, &alen) != 0)
        die("loopback listener");
    s.ep = epoll_create1(0);
    if (s.ep < 0)
        die("epoll_create1");
    for (int i = 0; i < s.n; i++) {
        conn *c = &s.c[i];
        c->rfd = socket(AF_INET, SOCK_STREAM, 0);
        if (c->rfd < 0 || connect(c->rfd, (struct sockaddr *)&a, sizeof a) != 0)
            die("connect");
        c->wfd = accept(l, NULL, NULL);
        if (c->wfd < 0)
            die("accept");
        setsockopt(c->rfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        setsockopt(c->wfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        fcntl(c->rfd, F_SETFL, fcntl(c->rfd, F_GETFL) | O_NONBLOCK);
        struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)i};
        if (epoll_ctl(s.ep, EPOLL_CTL_ADD, c->rfd, &ev) != 0)
            die("epoll_ctl");
    }
    close(l);
}

static void usage_error(const char *msg, const char *arg) {
    fprintf(stderr, "runnel-floor: %s%s%s\n\n%s", msg, arg ? ": " : "", arg ? arg : "", USAGE);
    exit(2);
}

static double number(const char *v, double lo, double hi) {
    char *end;
    double d = strtod(v, &end);
    if (end == v || *end || !(d >= lo && d <= hi))
        usage_error("bad number", v);
    return d;
}

int main(int argc, char **argv) {
    static const struct option opts[] = {
        {"connections", 1, 0, 'n'},
        {"rate", 1, 0, 'r'},
        {"duration", 1, 0, 'd'},
        {"payload", 1, 0, 'p'},
        {"json", 0, 0, 'j'},
        {"help", 0, 0, 'h'},
        {0, 0, 0, 0},
    };
    s.n = 1000;
    s.rate = 50;
    s.duration = 8;
    s.payload = 64;
    int o;
    while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (o) {
        case 'n': {
            double v = number(optarg, 1, 100000);
            if (v != (int)v)
                usage_error("--connections must be an integer", optarg);
            s.n = (int)v;
            break;
        }
        case 'r':
            s.rate = number(optarg, 0.001, 1e6);
            break;
        case 'd':
            s.duration = number(optarg, 0.001, 86400);
            break;
        case 'p':
            s.payload = (size_t)number(optarg, 19, 65536);
            break;
        case 'j':
            s.json = 1;
            break;
        case 'h':
            fputs(USAGE, stdout);
            return 0;
        default:
            usage_error("bad option", NULL);
        }
    }
    if (optind < argc)
        usage_error("unexpected argument", argv[optind]);
    uint64_t events = (uint64_t)(s.rate * s.duration + 1e-9);
    if (events == 0)
        usage_error("--rate x --duration must make at least one event", NULL);

    raise_fd_limit(2 * s.n + 16);
    bn_hist_init(&s.lat);
    bn_hist_init(&s.write_time);
    s.c = rn_xcalloc((size_t)s.n, sizeof *s.c);
    connect_all();

    pthread_t reader;
    if (pthread_create(&reader, NULL, reader_main, NULL) != 0)
        die("pthread_create");
    uint64_t t0 = now_ns() + START_DELAY_MS * 1000000ull;
    double cpu0 = cpu_now_s();
    write_events(t0, events);
    pthread_join(reader, NULL);
    uint64_t t_end = now_ns();
    double cpu = cpu_now_s() - cpu0;

    uint64_t written = atomic_load(&s.events_written);
    uint64_t expected = written * (uint64_t)s.n;
    bn_report_str("scenario", "floor");
    bn_report_int("connections", s.n);
    bn_report_real("rate_target", s.rate);
    bn_report_int("payload_bytes", (int64_t)s.payload);
    bn_report_real("duration_s", s.duration);
    bn_report_int("events", (int64_t)written);
    bn_report_int("expected", (int64_t)expected);
    bn_report_int("delivered", (int64_t)s.delivered);
    bn_report_hist("delivery_latency", &s.lat);
    bn_report_hist("event_write_time", &s.write_time);
    bn_report_int("writer_late_max_us", (int64_t)(s.late_max_ns / 1000));
    bn_report_real("measured_s", (double)(t_end - t0) / 1e9);
    bn_report_real("cpu_s", cpu);
    bn_report_real("cpu_per_delivery_us", s.delivered ? cpu * 1e6 / (double)s.delivered : 0);
    if (s.delivered < expected)
        bn_report_error("%llu of %llu deliveries missing %.0f s after the last event",
                        (unsigned long long)(expected - s.delivered), (unsigned long long)expected,
                        DRAIN_S);
    if (s.write_errors)
        bn_report_error("%llu writes failed", (unsigned long long)s.write_errors);
    if (s.read_errors || s.eof)
        bn_report_error("%llu sockets failed, %llu ended, while reading",
                        (unsigned long long)s.read_errors, (unsigned long long)s.eof);
    if (s.bad_records)
        bn_report_error("%llu records without a valid send time",
                        (unsigned long long)s.bad_records);
    bn_report_print(stdout, s.json);
    if (s.json)
        bn_report_print(stderr, 0);
    return bn_report_error_count() ? 1 : 0;
}
