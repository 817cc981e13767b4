/*
 * run.c — run lifecycle and the helpers shared by the scenarios (see run.h).
 */
#include "run.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report.h"
#include "util/buf.h"

bn_opts bn_o;
uv_loop_t *bn_loop;
bn_client *bn_cl;

#define MAX_TIMERS 16
static uv_timer_t *timers[MAX_TIMERS];
static int n_timers;
static int stopping;
#define MAX_STOP_HOOKS 4
static void (*stop_hooks[MAX_STOP_HOOKS])(void);
static int n_stop_hooks;

static void on_deadline(uv_timer_t *t) {
    bn_report_error("run did not finish within --timeout %.0f s", bn_o.timeout);
    bn_run_stop();
}

void bn_run_init(void) {
    bn_loop = uv_default_loop();
    bn_cl = bn_client_new(bn_loop, &bn_o.target);
    bn_timer(on_deadline, (uint64_t)(bn_o.timeout * 1000), 0);
}

static void free_timer(uv_handle_t *h) {
    free(h);
}

void bn_run_stop(void) {
    if (stopping)
        return;
    stopping = 1;
    bn_client_close(bn_cl);
    for (int i = 0; i < n_timers; i++)
        uv_close((uv_handle_t *)timers[i], free_timer);
    n_timers = 0;
    for (int i = 0; i < n_stop_hooks; i++)
        stop_hooks[i]();
}

void bn_run_at_stop(void (*fn)(void)) {
    assert(n_stop_hooks < MAX_STOP_HOOKS);
    stop_hooks[n_stop_hooks++] = fn;
}

int bn_run_stopping(void) {
    return stopping;
}

void bn_timer(uv_timer_cb cb, uint64_t timeout_ms, uint64_t repeat_ms) {
    if (n_timers == MAX_TIMERS) {
        fprintf(stderr, "runnel-bench: too many timers\n");
        abort();
    }
    uv_timer_t *t = rn_xcalloc(1, sizeof *t);
    uv_timer_init(bn_loop, t);
    uv_timer_start(t, cb, timeout_ms, repeat_ms);
    timers[n_timers++] = t;
}

char **bn_stream_paths(const char *tag, int n) {
    char **paths = rn_xcalloc((size_t)n, sizeof *paths);
    for (int i = 0; i < n; i++) {
        char name[128];
        snprintf(name, sizeof name, "%s-%s-%d", bn_o.run_id, tag, i);
        paths[i] = rn_xmalloc(512);
        bn_target_path(&bn_o.target, name, paths[i], 512);
    }
    return paths;
}

char *bn_append_headers(char *out, size_t cap, int producer, uint64_t seq) {
    snprintf(out, cap,
             "Content-Type: %s\r\nProducer-Id: %s-%d\r\nProducer-Epoch: 0\r\n"
             "Producer-Seq: %llu\r\n",
             bn_o.content_type, bn_o.run_id, producer, (unsigned long long)seq);
    return out;
}

int bn_expect(bn_conn *c, int err, const char *what, const int *allowed) {
    if (bn_run_stopping())
        return 0;
    if (err != 0) {
        bn_report_error("%s: %s", what, err == BN_EHTTP ? "malformed response" : uv_strerror(err));
        bn_run_stop();
        return 0;
    }
    int status = bn_conn_resp(c)->status;
    for (const int *a = allowed; *a; a++)
        if (*a == status)
            return 1;
    bn_report_error("%s: unexpected status %d", what, status);
    bn_run_stop();
    return 0;
}

/* ---- stream creation ---- */

#define CREATE_CONNS 64
static struct {
    char **paths;
    int n, next, done;
    void (*then)(void);
    struct sockaddr_storage *leaders; /* by stream index */
} cr;

static const bn_handlers create_handlers;

/* Issues the create of stream i on c (to its leader's address). */
static void create_one(bn_conn *c, int i) {
    char h[256];
    snprintf(h, sizeof h, "Content-Type: %s\r\n", bn_o.content_type);
    bn_conn_rebind(c, &create_handlers, (void *)(intptr_t)i);
    bn_conn_set_addr(c, &cr.leaders[i]);
    bn_conn_request(c, "PUT", cr.paths[i], h, NULL, 0);
}

static void create_next(bn_conn *c) {
    if (cr.next >= cr.n) {
        bn_conn_close(c);
        return;
    }
    create_one(c, cr.next++);
}

/* A 307 to the stream's leader: its address from Location's origin. */
static int follow_leader(bn_conn *c, int i) {
    const char *loc = bn_conn_resp(c)->location;
    const char *slash = strncmp(loc, "http://", 7) == 0 ? strchr(loc + 7, '/') : NULL;
    char origin[160];
    bn_target t;
    if (!slash || (size_t)(slash - loc) >= sizeof origin)
        return -1;
    memcpy(origin, loc, (size_t)(slash - loc));
    origin[slash - loc] = 0;
    if (bn_target_init(&t, origin, BN_TEMPLATE_V1, "bench") != 0)
        return -1;
    cr.leaders[i] = t.addr;
    create_one(c, i);
    return 0;
}

static void create_done(bn_conn *c, int err) {
    static const int ok[] = {201, 200, 0};
    if (!err && bn_o.follow_leaders && bn_conn_resp(c)->status == 307 &&
        follow_leader(c, (int)(intptr_t)bn_conn_user(c)) == 0)
        return;
    if (!bn_expect(c, err, "create stream (PUT)", ok))
        return;
    if (++cr.done == cr.n) {
        bn_conn_close(c);
        cr.then();
        return;
    }
    create_next(c);
}

static const bn_handlers create_handlers = {.on_done = create_done};

void bn_create_streams(char **paths, int n, void (*done)(void)) {
    cr.paths = paths;
    cr.n = n;
    cr.next = cr.done = 0;
    cr.then = done;
    free(cr.leaders);
    cr.leaders = rn_xcalloc(n ? (size_t)n : 1, sizeof *cr.leaders);
    for (int i = 0; i < n; i++)
        cr.leaders[i] = bn_o.target.addr;
    if (n == 0) {
        done();
        return;
    }
    for (int i = 0; i < CREATE_CONNS && i < n; i++)
        create_next(bn_conn_new(bn_cl, &create_handlers, NULL));
}

const struct sockaddr_storage *bn_stream_leader(int i) {
    return &cr.leaders[i];
}

/* ---- pacing, stamps, RSS ---- */

uint64_t bn_pacer_due(const bn_pacer *p, uint64_t now_ns) {
    double should = p->rate * bn_secs(p->t0_ns, now_ns);
    uint64_t s = should > 0 ? (uint64_t)should : 0;
    return s > p->issued ? s - p->issued : 0;
}

static int is_json(void) {
    return strncmp(bn_o.content_type, "application/json", 16) == 0;
}

void bn_stamp(char *buf, size_t len, uint64_t ns) {
    char m[24];
    snprintf(m, sizeof m, "T%016llx", (unsigned long long)ns);
    memset(buf, '.', len);
    if (is_json()) {
        buf[0] = '"';
        memcpy(buf + 1, m, 17);
        buf[len - 1] = '"';
    } else {
        memcpy(buf, m, 17);
    }
}

static int hexval(char c) {
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

void bn_stamp_scan(const char *s, size_t n, void (*fn)(void *arg, uint64_t ns), void *arg) {
    for (const char *p = memchr(s, 'T', n); p; p = memchr(p + 1, 'T', n - (size_t)(p + 1 - s))) {
        if ((size_t)(s + n - p) < 17)
            return;
        uint64_t v = 0;
        int i;
        for (i = 1; i <= 16 && hexval(p[i]) >= 0; i++)
            v = v << 4 | (uint64_t)hexval(p[i]);
        if (i == 17)
            fn(arg, v);
    }
}

int64_t bn_server_rss_kib(void) {
    if (bn_o.server_pid <= 0)
        return -1;
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", bn_o.server_pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    int64_t kib = -1;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "VmRSS:", 6) == 0)
            kib = strtoll(line + 6, NULL, 10);
    fclose(f);
    return kib;
}

double bn_secs(uint64_t from_ns, uint64_t to_ns) {
    return (double)(to_ns - from_ns) / 1e9;
}
