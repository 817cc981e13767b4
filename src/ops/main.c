/*
 * main.c — the runnel command: `runnel serve` wires config, the data
 * directory lock, the engine, the surfaces and the transport onto one libuv
 * loop, and runs it until SIGTERM/SIGINT, then drains and exits 0.
 *
 * Shutdown: stop accepting, close idle connections, answer parked live reads,
 * stop subscription deliveries, wait (bounded by --shutdown-grace-ms) until
 * no request is in progress and the log is idle, then write the final
 * subscription state and close the engine, which writes a final checkpoint.
 */
#include "engine/engine.h"
#include "live/live.h"
#include "ops/config.h"
#include "subs/subs.h"
#include "surface/router.h"
#include "surface/parts.h"
#include "surface/reply.h"
#include "surface/streams.h"
#include "transport/http.h"
#include "util/clock.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#ifndef RUNNEL_VERSION
#define RUNNEL_VERSION "dev"
#endif

typedef struct {
    uv_loop_t *loop;
    rn_config cfg;
    rn_engine *engine;
    rn_surface *surface;
    rn_subs *subs;
    rn_parts *parts;
    rn_router router;
    rn_http_server *http;
    uv_signal_t sigterm, sigint;
    uv_timer_t sweep, drain;
    uint64_t drain_deadline;
    int stopping;
} server;

static void log_line(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void log_line(const char *fmt, ...) {
    char ts[32];
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%SZ", &tm);
    fprintf(stderr, "%s runnel: ", ts);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

/* Creates the data directory and takes its lock; returns the lock fd. */
static int lock_data_dir(const char *dir) {
    if (mkdir(dir, 0755) < 0 && errno != EEXIST) {
        log_line("cannot create data directory %s: %s", dir, strerror(errno));
        return -1;
    }
    char path[PATH_MAX + 8];
    snprintf(path, sizeof path, "%s/LOCK", dir);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
        log_line("cannot open %s: %s", path, strerror(errno));
        return -1;
    }
    if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
        log_line("data directory %s is in use by another runnel process; refusing to start", dir);
        close(fd);
        return -1;
    }
    return fd;
}

static int cluster_id_valid(const char *id) {
    size_t n = strlen(id);
    if (n < 1 || n > 64)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)id[i]) && id[i] != '.' && id[i] != '_' && id[i] != '-')
            return 0;
    return 1;
}

/* The deployment's id (ext §10): --cluster-id when given, else the one kept
 * in <data>/cluster-id, generated (random hex) and synced at the first
 * start. Returns 0, or -1 after logging why not. */
static int load_cluster_id(const rn_config *cfg, char out[65]) {
    if (cfg->cluster_id[0]) {
        if (!cluster_id_valid(cfg->cluster_id)) {
            log_line("--cluster-id must be 1 to 64 characters from A-Z a-z 0-9 . _ -");
            return -1;
        }
        memcpy(out, cfg->cluster_id, strlen(cfg->cluster_id) + 1); /* valid: at most 64 */
        return 0;
    }
    char path[PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/cluster-id", cfg->data_dir);
    FILE *f = fopen(path, "r");
    if (f) {
        int ok = fgets(out, 65, f) != NULL;
        fclose(f);
        out[strcspn(out, "\r\n")] = 0;
        if (ok && cluster_id_valid(out))
            return 0;
        log_line("%s is damaged; refusing to start", path);
        return -1;
    }
    uint8_t raw[8];
    int rfd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (rfd < 0 || read(rfd, raw, sizeof raw) != (ssize_t)sizeof raw) {
        log_line("cannot read /dev/urandom for a cluster id");
        if (rfd >= 0)
            close(rfd);
        return -1;
    }
    close(rfd);
    snprintf(out, 65, "runnel-%02x%02x%02x%02x%02x%02x%02x%02x", raw[0], raw[1], raw[2], raw[3],
             raw[4], raw[5], raw[6], raw[7]);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    int ok = fd >= 0 && write(fd, out, strlen(out)) == (ssize_t)strlen(out) && fsync(fd) == 0;
    if (fd >= 0)
        close(fd);
    if (!ok) {
        log_line("cannot write %s: %s", path, strerror(errno));
        return -1;
    }
    return 0;
}

static void on_sweep(uv_timer_t *t) {
    server *s = t->data;
    rn_engine_sweep_expired(s->engine);
}

static void finish_shutdown(server *s) {
    uv_timer_stop(&s->drain);
    uv_close((uv_handle_t *)&s->drain, NULL);
    uv_close((uv_handle_t *)&s->sweep, NULL);
    uv_close((uv_handle_t *)&s->sigterm, NULL);
    uv_close((uv_handle_t *)&s->sigint, NULL);
    rn_subs_stop(s->subs);
    rn_parts_close(s->parts);
    rn_http_close(s->http);
}

static void on_drain_tick(uv_timer_t *t) {
    server *s = t->data;
    int idle = rn_http_active_connections(s->http) == 0 && !rn_engine_busy(s->engine);
    if (idle || rn_mono_ms() >= s->drain_deadline) {
        if (!idle)
            log_line("shutdown grace period over with requests still in progress");
        finish_shutdown(s);
    }
}

static void on_signal(uv_signal_t *sig, int signum) {
    server *s = sig->data;
    if (s->stopping)
        return;
    s->stopping = 1;
    log_line("received %s; draining", signum == SIGTERM ? "SIGTERM" : "SIGINT");
    rn_http_stop_accepting(s->http);
    rn_surface_end_live_reads(s->surface);
    rn_subs_quiesce(s->subs);
    s->drain_deadline = rn_mono_ms() + s->cfg.shutdown_grace_ms;
    uv_timer_start(&s->drain, on_drain_tick, 0, 10);
}

/* The URL clients reach the server at: --public-url, else http://<listen>. */
static void public_url(const rn_config *cfg, char *out, size_t cap) {
    if (cfg->public_url[0])
        snprintf(out, cap, "%s", cfg->public_url);
    else if (strchr(cfg->listen_host, ':'))
        snprintf(out, cap, "http://[%s]:%d", cfg->listen_host, cfg->listen_port);
    else
        snprintf(out, cap, "http://%s:%d", cfg->listen_host, cfg->listen_port);
}

static int serve(int argc, char **argv) {
    server s;
    memset(&s, 0, sizeof s);
    char err[512];
    int rc = rn_config_load(&s.cfg, argc, argv, err, sizeof err);
    if (rc == 1)
        return 0;
    if (rc < 0) {
        fprintf(stderr, "runnel: %s\n", err);
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    int lock_fd = lock_data_dir(s.cfg.data_dir);
    if (lock_fd < 0)
        return 1;
    char cluster_id[65];
    if (load_cluster_id(&s.cfg, cluster_id) != 0)
        return 1;
    rn_reply_set_cluster_id(cluster_id);
    s.loop = uv_default_loop();
    srand((unsigned)(rn_now_ms() ^ getpid()));

    uint64_t t0 = rn_mono_ms();
    rn_engine_config ec = {.data_dir = s.cfg.data_dir,
                           .cold_store = (int)s.cfg.cold_store,
                           .wal_segment_bytes = s.cfg.wal_segment_bytes,
                           .checkpoint_bytes = s.cfg.checkpoint_bytes,
                           .max_open_files = (int)s.cfg.max_open_files};
    rn_recovery_stats stats;
    s.engine = rn_engine_open(s.loop, &ec, &stats, err, sizeof err);
    if (!s.engine) {
        log_line("%s", err);
        return 1;
    }
    log_line("recovered %llu streams (checkpoint %llu, %llu log records replayed, %llu torn "
             "bytes cut) in %llu ms",
             (unsigned long long)stats.streams, (unsigned long long)stats.checkpoint_streams,
             (unsigned long long)stats.records_replayed, (unsigned long long)stats.torn_bytes,
             (unsigned long long)(rn_mono_ms() - t0));

    rn_engine_observe(s.engine, rn_live_observer, NULL);
    char url[sizeof s.cfg.public_url + sizeof s.cfg.listen_host + 16];
    public_url(&s.cfg, url, sizeof url);
    rn_subs_config subc = {.data_dir = s.cfg.data_dir,
                           .public_url = url,
                           .allow_loopback = s.cfg.webhook_allow_loopback,
                           .webhook_timeout_ms = s.cfg.webhook_timeout_ms,
                           .user_agent = "runnel/" RUNNEL_VERSION};
    s.subs = rn_subs_open(s.loop, s.engine, &subc, err, sizeof err);
    if (!s.subs) {
        log_line("%s", err);
        rn_engine_close(s.engine);
        return 1;
    }
    rn_surface_config sc = {.long_poll_timeout_ms = s.cfg.long_poll_timeout_ms,
                            .sse_max_duration_ms = s.cfg.sse_max_duration_ms,
                            .max_read_bytes = s.cfg.max_read_bytes,
                            .sse_queue_bytes = s.cfg.sse_queue_bytes,
                            .max_body_bytes = s.cfg.max_body_bytes,
                            .cold_store = (int)s.cfg.cold_store};
    s.surface = rn_surface_new(s.loop, s.engine, &sc);
    s.parts = rn_parts_new(s.surface, s.cfg.parts_grace_ms);
    rn_surface_set_parts(s.surface, s.parts);
    s.router = (rn_router){.streams = s.surface,
                           .subs = s.subs,
                           .max_body_bytes = s.cfg.max_body_bytes,
                           .test_hooks = (int)s.cfg.test_hooks};
    rn_http_config hc = {.host = s.cfg.listen_host,
                         .port = s.cfg.listen_port,
                         .max_body_bytes = s.cfg.max_body_bytes,
                         .max_header_bytes = s.cfg.max_header_bytes,
                         .max_headers = s.cfg.max_headers,
                         .request_timeout_ms = s.cfg.request_timeout_ms,
                         .idle_timeout_ms = s.cfg.idle_timeout_ms,
                         .max_connections = (int)s.cfg.max_connections};
    s.http = rn_http_listen(s.loop, &hc, rn_router_handle, &s.router, err, sizeof err);
    if (!s.http) {
        log_line("%s", err);
        rn_subs_stop(s.subs);
        uv_run(s.loop, UV_RUN_NOWAIT); /* let the subscription handles close */
        rn_subs_close(s.subs);
        rn_engine_close(s.engine);
        return 1;
    }
    char desc[2048];
    rn_config_describe(&s.cfg, desc, sizeof desc);
    log_line("runnel %s serving: %s", RUNNEL_VERSION, desc);

    uv_signal_init(s.loop, &s.sigterm);
    uv_signal_init(s.loop, &s.sigint);
    s.sigterm.data = s.sigint.data = &s;
    uv_signal_start(&s.sigterm, on_signal, SIGTERM);
    uv_signal_start(&s.sigint, on_signal, SIGINT);
    uv_timer_init(s.loop, &s.sweep);
    uv_timer_init(s.loop, &s.drain);
    s.sweep.data = s.drain.data = &s;
    uv_timer_start(&s.sweep, on_sweep, s.cfg.expiry_sweep_ms, s.cfg.expiry_sweep_ms);

    uv_run(s.loop, UV_RUN_DEFAULT);

    rn_subs_close(s.subs);
    rn_engine_close(s.engine);
    rn_surface_free(s.surface);
    rn_http_free(s.http);
    uv_loop_close(s.loop);
    close(lock_fd);
    log_line("stopped");
    return 0;
}

static void usage(void) {
    printf("usage: runnel <command> [options]\n\n"
           "commands:\n"
           "  serve      run the server (runnel serve --help for options)\n"
           "  version    print the version\n");
}

int main(int argc, char **argv) {
    if (argc >= 2 && strcmp(argv[1], "serve") == 0)
        return serve(argc - 2, argv + 2);
    if (argc >= 2 && (strcmp(argv[1], "version") == 0 || strcmp(argv[1], "--version") == 0)) {
        printf("runnel %s\n", RUNNEL_VERSION);
        return 0;
    }
    if (argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "help") == 0)) {
        usage();
        return 0;
    }
    usage();
    return 2;
}
