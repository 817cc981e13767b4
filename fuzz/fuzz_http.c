/*
 * fuzz_http.c — libFuzzer harness for the HTTP request path: raw bytes
 * through the transport (transport/http1.c, llhttp), the router, the v1 and
 * bucket surfaces, the subscription API and the operational routes, into a
 * real engine, wired as src/ops/server.c wires them.
 *
 * How, per input: a fresh data directory under /dev/shm; a real engine
 * (rn_engine_open; small log segments and checkpoint interval, so rotation
 * and checkpoints happen), the live-read observer, the subscriptions module,
 * a surface with tiny long-poll and SSE timeouts, the tiers, the
 * operational endpoints, rn_router_handle as the handler, and rn_http_listen
 * on a loopback port picked once per process. A client socket connects and
 * the input is written to it as one byte stream (so it may hold pipelined
 * requests, chunked bodies, Expect: 100-continue, ...) while one libuv loop
 * runs the server. Once the server can only be waiting for more input (no
 * log write, checkpoint, state write, socket write or live read in
 * progress), or after IDLE_WAIT_MS, the client half-closes and the loop runs
 * until the server closes the connection. Then everything is shut down in
 * server.c's order and freed, and the directory removed. Every wait is
 * bounded by a wall-clock limit. Webhook deliveries cannot leave loopback
 * (see curl_multi_add_handle below). RUNNEL_FUZZ_TRACE=1 in the environment
 * prints what the server sends (for reading a finding).
 *
 * What must hold:
 *  1. No crash, no ASan/UBSan report, no leak (LeakSanitizer runs on inputs
 *     whose allocations outlive them).
 *  2. No hang: the server closes the connection within CLOSE_WAIT_MS of the
 *     client's half-close, and after shutdown every handle closes and the
 *     engine goes idle within CLOSE_WAIT_MS.
 *  3. The bytes the server sends are well-formed HTTP/1.1 responses (parsed
 *     with llhttp in response mode, HEAD answers without a body; the last
 *     one may be cut short by the half-close), and none is a 500 (an
 *     internal error: on tmpfs every one is a bug).
 * Seeds (fuzz/corpus/fuzz_http) cover every method on both surfaces, live
 * reads, forks, producers, snapshots, subscriptions and the transport's
 * edge cases; fuzz/fuzz_http.dict holds the protocol's tokens.
 *
 * fuzz_http2.c compiles this file with FUZZ_HTTP2: the client sends
 * HTTP/2's connection preface, then the input as frames (h2c by prior
 * knowledge, through src/transport/http2.c), and http2_check.c checks
 * what the server sends instead of check 3.
 */
#define _GNU_SOURCE
#include "engine/engine.h"
#include "live/live.h"
#include "ops/endpoints.h"
#include "subs/subs.h"
#include "ops/router.h"
#include "surface/streams.h"
#include "tiers/tiers.h"
#include "transport/http.h"
#include "transport/http2.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <dlfcn.h>
#include <errno.h>
#include <ftw.h>
#include <llhttp.h>
#include <netinet/in.h>
#include <poll.h>
#include <sanitizer/common_interface_defs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void remove_dir(void);

/* Reports a failed check; the directory goes too (libFuzzer exits without
 * running atexit handlers after a crash). */
#define FAIL(...)                                                                                  \
    do {                                                                                           \
        fprintf(stderr, HARNESS ": " __VA_ARGS__);                                                 \
        fputc('\n', stderr);                                                                       \
        remove_dir();                                                                              \
        abort();                                                                                   \
    } while (0)

#ifndef HARNESS
#define HARNESS "fuzz_http"
#endif
#define MAX_BODY 4096
#define IDLE_WAIT_MS 200 /* longest wait for the server to finish the requests */
/* The bound on the server's closes and its shutdown: a hang, not a slow
 * machine. 2 s tripped in a long campaign at load 25 under nice 19 (the
 * log writer's completion not yet delivered: starved, not lost); below
 * the smoke's 10 s libFuzzer timeout, so a real hang reports as this. */
#define CLOSE_WAIT_MS 8000
#define QUIET_RUNS 4
#define MAX_METHODS 1024

static uv_loop_t loop;
static char dir[128];      /* per process: /dev/shm/runnel-fuzz-http-XXXXXX */
static char data_dir[160]; /* per input: <dir>/data */
static int port;
static int trace; /* RUNNEL_FUZZ_TRACE: print what the server sends */

static uint64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static void remove_data_dir(void) {
    nftw(data_dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static void remove_dir(void) {
    nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* ---- the server ---- */

/* Webhook deliveries never leave the machine: every transfer the
 * subscriptions module hands to libcurl is first pointed at a closed
 * loopback port, and since webhook loopback targets are not allowed the
 * module's socket callback refuses even that, so a subscription the fuzzer
 * creates fails its delivery like an unreachable endpoint. This definition
 * takes the place of libcurl's for the project code (static linking binds
 * outbound.c to it); libcurl's own is called through RTLD_NEXT. */
CURLMcode curl_multi_add_handle(CURLM *multi, CURL *easy) {
    static CURLMcode (*real)(CURLM *, CURL *);
    if (!real)
        real = (CURLMcode(*)(CURLM *, CURL *))dlsym(RTLD_NEXT, "curl_multi_add_handle");
    if (!real)
        FAIL("libcurl's curl_multi_add_handle not found");
    curl_easy_setopt(easy, CURLOPT_URL, "http://127.0.0.1:9/");
    return real(multi, easy);
}

typedef struct {
    rn_tiers *tiers;
    rn_engine *engine;
    rn_live *live;
    rn_subs *subs;
    rn_surface *surface;
    rn_router router;
    rn_endpoints endpoints;
    rn_http_server *http;
} server;

static const rn_http_config http_template = {.host = "127.0.0.1",
                                             .max_body_bytes = MAX_BODY,
                                             .max_header_bytes = 2048,
                                             .max_headers = 32,
                                             .request_timeout_ms = 10000,
                                             .idle_timeout_ms = 10000,
                                             .max_connections = 16};

/* Listens on `port`, moving to another port if it was taken meanwhile. */
static rn_http_server *listen_somewhere(rn_request_fn fn, void *arg) {
    char err[256] = "";
    for (int attempt = 0; attempt < 64; attempt++) {
        if (port) {
            rn_http_config cfg = http_template;
            cfg.port = port;
            rn_http_server *srv = rn_http_listen(&loop, &cfg, fn, arg, err, sizeof err);
            if (srv)
                return srv;
        }
        /* Below Linux's ephemeral range (32768-60999): clients never hold it. */
        port = 20000 + (int)(((unsigned)getpid() * 7919u + (unsigned)attempt * 131u) % 12000u);
    }
    FAIL("cannot listen on 127.0.0.1: %s", err);
}

/* Wires the modules as src/ops/server.c does once recovery has finished
 * (recovery runs here before listening, so the router is ready at once). */
static void server_start(server *s) {
    mkdir(data_dir, 0755);
    char err[512];
    rn_tiers_config tc = {.data_dir = data_dir, .max_open_files = 8, .parts_grace_ms = 1000};
    s->tiers = rn_tiers_open(&loop, &tc, err, sizeof err);
    if (!s->tiers)
        FAIL("rn_tiers_open: %s", err);
    rn_engine_config ec = {.data_dir = data_dir,
                           .tiers = s->tiers,
                           .wal_segment_bytes = 4096,
                           .checkpoint_bytes = 8192};
    rn_recovery_stats stats;
    s->engine = rn_engine_open(&loop, &ec, &stats, err, sizeof err);
    if (!s->engine)
        FAIL("rn_engine_open: %s", err);
    rn_live_config lc = {.max_reads = 64, .sse_queue_bytes = 4096, .sse_max_duration_ms = 10};
    s->live = rn_live_new(&loop, s->engine, &lc);
    rn_engine_observe(s->engine, rn_live_observer, s->live);
    rn_subs_config subc = {.data_dir = data_dir,
                           .public_url = "http://127.0.0.1:4437",
                           .webhook_timeout_ms = 100,
                           .max_subs = 16, /* small: the fuzzer reaches the 429s */
                           .max_explicit_links = 64,
                           .user_agent = "runnel-fuzz"};
    s->subs = rn_subs_open(&loop, s->engine, &subc, err, sizeof err);
    if (!s->subs)
        FAIL("rn_subs_open: %s", err);
    rn_surface_config sc = {.long_poll_timeout_ms = 5,
                            .max_read_bytes = 1024,
                            .max_body_bytes = MAX_BODY,
                            .tiers = s->tiers};
    s->surface = rn_surface_new(&loop, s->engine, s->live, &sc);
    rn_tiers_start(s->tiers);
    s->endpoints =
        (rn_endpoints){.ready = 1, .engine = s->engine, .surface = s->surface, .live = s->live};
    s->router = (rn_router){.streams = s->surface,
                            .subs = s->subs,
                            .max_body_bytes = MAX_BODY,
                            .ready = 1,
                            .ops_handler = rn_endpoints_handle,
                            .ops_arg = &s->endpoints};
    s->http = listen_somewhere(rn_router_handle, &s->router);
    s->endpoints.http = s->http;
}

static void on_walk(uv_handle_t *h, void *arg) {
    (void)arg;
    if (!uv_is_closing(h))
        fprintf(stderr, HARNESS ": handle still open: %s (active %d)\n",
                uv_handle_type_name(uv_handle_get_type(h)), uv_is_active(h));
}

/* Shuts down in server.c's order (drain, then close handles, then free),
 * bounded: the loop must run out of work within CLOSE_WAIT_MS. */
static void server_stop(server *s) {
    rn_http_stop_accepting(s->http);
    rn_live_end_all(s->live);
    rn_subs_quiesce(s->subs);
    rn_subs_stop(s->subs);
    rn_tiers_stop(s->tiers);
    rn_http_close(s->http);
    uint64_t deadline = now_ms() + CLOSE_WAIT_MS;
    while (uv_loop_alive(&loop) || rn_engine_busy(s->engine)) {
        if (now_ms() > deadline) {
            uv_walk(&loop, on_walk, NULL);
            FAIL("the loop still has work %d ms after shutdown began (engine busy: %d)",
                 CLOSE_WAIT_MS, rn_engine_busy(s->engine));
        }
        if (uv_run(&loop, UV_RUN_NOWAIT) == 0 && rn_engine_busy(s->engine))
            usleep(100);
    }
    rn_subs_close(s->subs);
    rn_engine_close(s->engine);
    rn_tiers_close(s->tiers);
    rn_surface_free(s->surface);
    rn_live_free(s->live);
    rn_http_free(s->http);
    remove_data_dir();
}

/* ---- checking what the server sends ---- */

#ifdef FUZZ_HTTP2
#include "http2_check.c"
#else
/* Methods of the requests in the input, in order, as llhttp (the server's
 * parser) sees them: a HEAD answer has no body, so the response parser must
 * know which answers belong to HEAD requests. */
typedef struct {
    llhttp_t req_parser, resp_parser;
    uint8_t methods[MAX_METHODS];
    size_t method_count, answered;
    size_t received;
} checker;

static llhttp_settings_t req_settings, resp_settings;

static int on_request_headers(llhttp_t *p) {
    checker *c = p->data;
    if (c->method_count < MAX_METHODS)
        c->methods[c->method_count++] = (uint8_t)p->method;
    return 0;
}

static int on_response_headers(llhttp_t *p) {
    checker *c = p->data;
    int status = p->status_code;
    if (status == 500)
        FAIL("the server answered 500 (response %zu)", c->answered);
    if (status < 100 || status > 599)
        FAIL("status %d", status);
    if (status < 200)
        return 0; /* 100 Continue: an interim answer to the same request */
    int head = c->answered < c->method_count && c->methods[c->answered] == HTTP_HEAD;
    c->answered++;
    return head ? 1 : 0;
}

static void checker_setup(void) {
    llhttp_settings_init(&req_settings);
    req_settings.on_headers_complete = on_request_headers;
    llhttp_settings_init(&resp_settings);
    resp_settings.on_headers_complete = on_response_headers;
}

/* HTTP/1.1 needs nothing sent before the input. */
static void client_begin(int fd) {
    (void)fd;
}

static void checker_init(checker *c, const uint8_t *data, size_t size) {
    memset(c, 0, sizeof *c);
    llhttp_init(&c->req_parser, HTTP_REQUEST, &req_settings);
    c->req_parser.data = c;
    llhttp_execute(&c->req_parser, (const char *)data, size);
    llhttp_init(&c->resp_parser, HTTP_RESPONSE, &resp_settings);
    c->resp_parser.data = c;
}

static void checker_feed(checker *c, const char *p, size_t n) {
    if (trace)
        fwrite(p, 1, n, stderr);
    c->received += n;
    llhttp_errno_t e = llhttp_execute(&c->resp_parser, p, n);
    if (e != HPE_OK) {
        FAIL("malformed response stream after %zu bytes (%zu answers): %s (%s)", c->received,
             c->answered, llhttp_errno_name(e), llhttp_get_error_reason(&c->resp_parser));
    }
}

#endif

/* Reads what the server sent; returns 1 once the server closed. */
static int client_drain(int fd, checker *c) {
    char buf[65536];
    for (;;) {
        ssize_t n = recv(fd, buf, sizeof buf, 0);
        if (n > 0) {
            checker_feed(c, buf, (size_t)n);
            continue;
        }
        if (n == 0)
            return 1;
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            return 0;
        if (errno == EINTR)
            continue;
        return 1; /* ECONNRESET: the server closed with unread input */
    }
}

/* Connects a non-blocking client socket to the server. The kernel completes
 * the handshake from the listen backlog, so this needs no loop run; signals
 * (libFuzzer's timeout timer) may interrupt the waits. */
static int client_connect(void) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        FAIL("socket: %s", strerror(errno));
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0 && errno != EINPROGRESS &&
        errno != EINTR)
        FAIL("connect to 127.0.0.1:%d: %s", port, strerror(errno));
    struct pollfd pfd = {.fd = fd, .events = POLLOUT};
    uint64_t deadline = now_ms() + CLOSE_WAIT_MS;
    while (poll(&pfd, 1, 10) <= 0) {
        if (now_ms() > deadline)
            FAIL("connect to 127.0.0.1:%d did not complete", port);
    }
    int err = 0;
    socklen_t len = sizeof err;
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0)
        FAIL("connect to 127.0.0.1:%d: %s", port, strerror(err));
    /* Abortive close at the end: no TIME_WAIT pile-up over millions of runs. */
    struct linger lg = {.l_onoff = 1, .l_linger = 0};
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    return fd;
}

/* ---- libFuzzer entry points ---- */

static uv_timer_t tick;
static void on_tick(uv_timer_t *t) {
    (void)t;
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    snprintf(dir, sizeof dir, "%s/runnel-fuzz-http-XXXXXX", base);
    if (!mkdtemp(dir))
        FAIL("mkdtemp: %s", strerror(errno));
    snprintf(data_dir, sizeof data_dir, "%s/data", dir);
    atexit(remove_dir);
    __sanitizer_set_death_callback(remove_dir);
    uv_loop_init(&loop);
    trace = getenv("RUNNEL_FUZZ_TRACE") != NULL;
    checker_setup();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
#ifndef FUZZ_HTTP2
    /* An input that opens with HTTP/2's connection preface is h2c, which
     * the server rightly answers in frames: fuzz_http2 checks those. */
    if (size >= HTTP2_PREFACE_LEN && memcmp(data, HTTP2_PREFACE, HTTP2_PREFACE_LEN) == 0)
        return 0;
#endif
    server s;
    server_start(&s);
    static checker chk;
    checker_init(&chk, data, size);

    int fd = client_connect();
    client_begin(fd);

    uv_timer_init(&loop, &tick);
    uv_timer_start(&tick, on_tick, 1, 1); /* UV_RUN_ONCE returns at least every 1 ms */

    size_t sent = 0;
    int closed = 0, write_failed = 0, quiet = 0;
    uint64_t idle_deadline = now_ms() + IDLE_WAIT_MS;
    /* Phase 1: send everything and let the server work through it. While a
     * log write, checkpoint, state write, socket write or live read is in
     * progress the loop blocks (at most 1 ms, the tick) for its events;
     * otherwise it only polls. Once everything is sent and the server had
     * QUIET_RUNS polls with none of those in progress (enough to accept,
     * read everything, since loopback delivers at once, and answer), it can
     * only be waiting for more input. */
    while (!closed && quiet < QUIET_RUNS && now_ms() < idle_deadline) {
        if (sent < size && !write_failed) {
            ssize_t n = send(fd, data + sent, size - sent, MSG_NOSIGNAL);
            if (n > 0)
                sent += (size_t)n;
            else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
                write_failed = 1; /* the server closed: it refused the input */
        }
        int busy =
            rn_engine_busy(s.engine) || rn_live_count(s.live) > 0 || loop.active_reqs.count > 0;
        uv_run(&loop, busy ? UV_RUN_ONCE : UV_RUN_NOWAIT);
        closed = client_drain(fd, &chk);
        quiet = (sent == size || write_failed) && !busy ? quiet + 1 : 0;
    }
    /* Phase 2: half-close; the server must close the connection. */
    shutdown(fd, SHUT_WR);
    uint64_t close_deadline = now_ms() + CLOSE_WAIT_MS;
    while (!closed) {
        if (now_ms() > close_deadline)
            FAIL("the server did not close the connection %d ms after the client's half-close",
                 CLOSE_WAIT_MS);
        uv_run(&loop, UV_RUN_ONCE);
        closed = client_drain(fd, &chk);
    }
    close(fd);
    uv_close((uv_handle_t *)&tick, NULL);
    server_stop(&s);
    return 0;
}
