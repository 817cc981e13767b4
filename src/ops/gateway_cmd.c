/*
 * gateway_cmd.c — `runnel gateway`: the standalone gateway in front of one
 * node or a cluster's nodes (docs/GATEWAY.md), and `runnel gateway key
 * new`.
 *
 * A request meets the gate (gateway/gate.h) and then the forwarder
 * (gateway/forward.h). A request with a body is first seen from its head
 * (the transport's on_headers hook, for every body): a refusal answers
 * before any of the body is read; an admitted request whose body is large
 * (or of unknown length) streams it through from there; any other is read
 * whole, then forwarded. A decision that must wait (an issuer's keys, the
 * authorizer) is taken once the request is whole. The gateway answers its
 * own /__runnel/livez, /__runnel/readyz (ready while a node is usable) and
 * /__runnel/gateway/metrics; other operator routes go to a node.
 *
 * Start: the tenants file must load, and the nodes are asked once (a few
 * seconds at most): a node that accepts less than the gateway's request
 * limit refuses the start, since the gateway could then accept a body a
 * node refuses unread (ext §11.1). Nodes that do not answer yet do not stop
 * the start; requests get 503 NO_UPSTREAM until one does. SIGHUP reloads
 * the tenants file and the TLS certificate; SIGTERM drains.
 */
#include "gateway/forward.h"
#include "gateway/gate.h"
#include "gateway/keyfile.h"
#include "ops/config.h"
#include "ops/gateway_cmd.h"
#include "transport/http.h"
#include "transport/tls.h"
#include "util/clock.h"
#include "util/files.h"
#include "util/log.h"
#include "util/metrics.h"
#include "util/routes.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define START_PROBE_MS 5000

typedef struct {
    uv_loop_t *loop;
    rn_config cfg;
    rn_gate *gate;
    rn_forwarder *fwd;
    rn_http_server *http;
    rn_tls_context *tls;
    uv_signal_t sigterm, sigint, sighup;
    uv_timer_t drain, probe_wait;
    uint64_t drain_deadline;
    int probed, stopping, exit_code;
    int timers_on, signals_on, closed; /* which handles are open (close_all) */
    char probe_why[512];
} gateway;

/* ---- the gateway's own routes ---- */

static void answer_text(rn_request *req, int status, const char *type, rn_buf *body) {
    rn_buf h = {0};
    rn_buf_appendf(&h, "Content-Type: %s\r\nCache-Control: no-store\r\n", type);
    rn_http_respond(req, status, &h, body);
}

/* Answers /__runnel/livez and readyz (open), and gateway/metrics (an
 * operator route: only once the gate admitted it); returns 0 for any other
 * path. */
static int own_route(gateway *gw, rn_request *req) {
    const char *q = memchr(req->target, '?', req->target_len);
    size_t n = q ? (size_t)(q - req->target) : req->target_len;
    int get = req->method == RN_HTTP_GET || req->method == RN_HTTP_HEAD;
    rn_buf body = {0};
    if (get && n == 15 && memcmp(req->target, "/__runnel/livez", 15) == 0) {
        rn_buf_append_str(&body, "ok\n");
        answer_text(req, 200, "text/plain", &body);
        return 1;
    }
    if (get && n == 16 && memcmp(req->target, "/__runnel/readyz", 16) == 0) {
        int ready = rn_forwarder_ready(gw->fwd) && !gw->stopping;
        rn_buf_append_str(&body, ready ? "ready\n" : "not ready: no node is usable\n");
        answer_text(req, ready ? 200 : 503, "text/plain", &body);
        return 1;
    }
    if (get && n == 25 && memcmp(req->target, "/__runnel/gateway/metrics", 25) == 0 &&
        rn_gate_admitted(req)) {
        rn_gate_metrics(gw->gate, &body);
        rn_forwarder_metrics(gw->fwd, &body);
        answer_text(req, 200, "text/plain; version=0.0.4", &body);
        return 1;
    }
    return 0;
}

/* ---- requests ---- */

/* The gateway's answer when the forwarder answers itself: an
 * intermediary's codes (ext §11), the redirect it could not follow as
 * NO_LEADER, which the redirect proved (nothing applied). */
static void refuse_forward(rn_request *req, rn_forward_failure why) {
    static const rn_error codes[RN_FWD_FAILURES] = {
        [RN_FWD_NO_NODE] = RN_E_GW_NO_UPSTREAM,
        [RN_FWD_UNREACHABLE] = RN_E_GW_UPSTREAM_UNREACHABLE,
        [RN_FWD_NOT_LED] = RN_E_NO_LEADER,
        [RN_FWD_FAILED] = RN_E_GW_UPSTREAM_FAILED,
        [RN_FWD_TIMEOUT] = RN_E_GW_UPSTREAM_TIMEOUT,
        [RN_FWD_BODY_SLOW] = RN_E_GW_BODY_TOO_SLOW,
        [RN_FWD_BODY_TOO_LARGE] = RN_E_GW_REQUEST_TOO_LARGE,
        [RN_FWD_BODY_CUT] = RN_E_INVALID_REQUEST,
        [RN_FWD_BODY_STALLED] = RN_E_GW_STALLED_AFTER_FORWARD};
    rn_gate_refuse(req, codes[why], why == RN_FWD_NOT_LED ? 1 : 0);
}

static void admitted(rn_request *req, void *arg) {
    gateway *gw = arg;
    if (rn_gate_admitted(req) && !rn_request_gone(req) && !own_route(gw, req))
        rn_forward(gw->fwd, req);
}

static void on_request(rn_request *req, void *arg) {
    gateway *gw = arg;
    /* refused by the transport's bounds before anything was forwarded: the
     * credential is judged first, then the gateway's own answer */
    rn_error early = req->timed_out          ? RN_E_GW_BODY_TOO_SLOW
                     : req->body_too_large   ? RN_E_GW_REQUEST_TOO_LARGE
                     : req->body_over_budget ? RN_E_GW_UPLOAD_BUDGET_EXHAUSTED
                                             : RN_E_COUNT;
    if (early != RN_E_COUNT) {
        rn_gate_check(gw->gate, req, 0, NULL, NULL);
        if (!rn_request_gone(req) && req->status == 0)
            rn_gate_refuse(req, early, 0);
        return;
    }
    if (own_route(gw, req))
        return;
    if (rn_gate_check(gw->gate, req, 1, admitted, gw) == RN_GATE_PASS)
        admitted(req, gw);
}

/* The head of a request whose body follows: refused now, streamed from
 * now, or read whole first (see the top of this file). */
static void on_headers(rn_request *req, void *arg) {
    gateway *gw = arg;
    rn_gate_verdict v = rn_gate_check(gw->gate, req, 0, NULL, NULL);
    if (v == RN_GATE_PASS && rn_forward_streams_body(gw->fwd, req))
        rn_forward_streamed(gw->fwd, req);
}

static void access_line(const rn_request *req) {
    const char *q = memchr(req->target, '?', req->target_len);
    size_t path_len = q ? (size_t)(q - req->target) : req->target_len;
    rn_log_access(req->method_name ? req->method_name : "-", req->target, path_len, req->status,
                  req->bytes_out, (uv_hrtime() - req->start_ns) / 1000, rn_gate_tenant(req));
}

/* ---- lifecycle ---- */

/* Closes every handle the gateway opened (once): run the loop afterwards
 * so that they finish closing. */
static void close_all(gateway *gw) {
    if (gw->closed)
        return;
    gw->closed = 1;
    if (gw->timers_on) {
        uv_timer_stop(&gw->drain);
        uv_close((uv_handle_t *)&gw->drain, NULL);
        uv_close((uv_handle_t *)&gw->probe_wait, NULL);
    }
    if (gw->signals_on) {
        uv_close((uv_handle_t *)&gw->sigterm, NULL);
        uv_close((uv_handle_t *)&gw->sigint, NULL);
        uv_close((uv_handle_t *)&gw->sighup, NULL);
    }
    if (gw->http)
        rn_http_close(gw->http);
    if (gw->fwd)
        rn_forwarder_stop(gw->fwd);
    if (gw->gate)
        rn_gate_stop(gw->gate);
}

static void on_drain_tick(uv_timer_t *t) {
    gateway *gw = t->data;
    if (!gw->http || rn_http_active_connections(gw->http) == 0 ||
        rn_mono_ms() >= gw->drain_deadline)
        close_all(gw);
}

static void begin_shutdown(gateway *gw) {
    if (gw->stopping)
        return;
    gw->stopping = 1;
    if (gw->http)
        rn_http_stop_accepting(gw->http);
    gw->drain_deadline = rn_mono_ms() + gw->cfg.shutdown_grace_ms;
    uv_timer_start(&gw->drain, on_drain_tick, 0, 10);
}

static void on_signal(uv_signal_t *sig, int signum) {
    gateway *gw = sig->data;
    rn_log(RN_LOG_INFO, "shutdown", "received %s; draining",
           signum == SIGTERM ? "SIGTERM" : "SIGINT");
    begin_shutdown(gw);
}

static void on_sighup(uv_signal_t *sig, int signum) {
    (void)signum;
    gateway *gw = sig->data;
    char err[1024];
    if (rn_gate_reload(gw->gate, err, sizeof err) < 0)
        rn_log(RN_LOG_ERROR, "reload", "tenants file not reloaded, the previous one stays: %s",
               err);
    if (gw->tls && rn_tls_context_reload(gw->tls, err, sizeof err) < 0)
        rn_log(RN_LOG_ERROR, "reload", "TLS certificate not reloaded, the previous one stays: %s",
               err);
}

/* The start's probe of the nodes answered (or its time ran out). */
static void probed(void *arg, size_t usable, const char *why) {
    gateway *gw = arg;
    if (gw->probed)
        return;
    gw->probed = 1;
    uv_timer_stop(&gw->probe_wait);
    snprintf(gw->probe_why, sizeof gw->probe_why, "%s", why);
    if (why[0]) {
        rn_log(RN_LOG_ERROR, "start", "%s", why);
        gw->exit_code = 1;
        uv_stop(gw->loop);
        return;
    }
    if (!usable)
        rn_log(RN_LOG_WARN, "start",
               "no node answered yet: requests get 503 NO_UPSTREAM until one does");
    uv_stop(gw->loop);
}

static void probe_timeout(uv_timer_t *t) {
    probed(t->data, 0, "");
}

/* Reads the nodes' admin token (one line; never logged). */
static int read_token(const char *path, char **out, char *err, size_t cap) {
    rn_buf b = {0};
    int rc = rn_read_path(path, &b);
    if (rc < 0) {
        snprintf(err, cap, "cannot read --upstream-admin-token-file %s", path);
        rn_buf_free(&b);
        return -1;
    }
    while (b.len && (b.data[b.len - 1] == '\n' || b.data[b.len - 1] == '\r'))
        b.len--;
    *out = rn_xmalloc(b.len + 1);
    memcpy(*out, b.data, b.len);
    (*out)[b.len] = 0;
    memset(b.data, 0, b.cap);
    rn_buf_free(&b);
    return 0;
}

static int run(gateway *gw) {
    char err[1024];
    rn_config *c = &gw->cfg;
    rn_gate_config gc = {.tenants_path = c->tenants,
                         .max_request_bytes = c->max_body_bytes,
                         .upload_budget_bytes = c->upload_budget_bytes,
                         .usage_log = c->usage_log,
                         .usage_log_max_bytes = c->usage_log_max_bytes,
                         .usage_log_interval_ms = c->usage_log_interval_ms};
    gw->gate = rn_gate_new(gw->loop, &gc, err, sizeof err);
    if (!gw->gate) {
        rn_log(RN_LOG_ERROR, "start", "%s", err);
        return 1;
    }
    char *token = NULL;
    if (c->upstream_admin_token_file[0] &&
        read_token(c->upstream_admin_token_file, &token, err, sizeof err)) {
        rn_log(RN_LOG_ERROR, "start", "%s", err);
        return 1;
    }
    const char *urls[RN_MAX_PEERS];
    for (int i = 0; i < c->n_upstreams; i++)
        urls[i] = c->upstreams[i];
    rn_forward_config fc = {.upstreams = urls,
                            .nupstreams = (size_t)c->n_upstreams,
                            .upstream_timeout_ms = c->upstream_timeout_ms,
                            .hold_body_bytes = c->hold_body_bytes,
                            .max_request_bytes = c->max_body_bytes,
                            .idle_ms = c->upstream_idle_ms,
                            .admin_token = token,
                            .mark = RN_NO_FORWARD_HEADER ": gateway\r\n", /* 307s teach routes */
                            .refuse = refuse_forward};
    gw->fwd = rn_forwarder_new(gw->loop, &fc);
    if (token) {
        memset(token, 0, strlen(token));
        free(token);
    }
    uv_timer_init(gw->loop, &gw->probe_wait);
    uv_timer_init(gw->loop, &gw->drain);
    gw->probe_wait.data = gw->drain.data = gw;
    gw->timers_on = 1;
    uv_timer_start(&gw->probe_wait, probe_timeout, START_PROBE_MS, 0);
    rn_forwarder_probe(gw->fwd, probed, gw);
    uv_run(gw->loop, UV_RUN_DEFAULT); /* until probed() stops it */
    if (gw->exit_code)
        return gw->exit_code;
    if (c->tls_cert[0]) {
        rn_tls_files f = {.cert_path = c->tls_cert, .key_path = c->tls_key};
        gw->tls = rn_tls_context_new(&f, err, sizeof err);
        if (!gw->tls) {
            rn_log(RN_LOG_ERROR, "start", "%s", err);
            return 1;
        }
    }
    rn_http_config hc = {.host = c->listen.host,
                         .port = c->listen.port,
                         .max_body_bytes = c->max_body_bytes,
                         .max_header_bytes = c->max_header_bytes,
                         .max_headers = c->max_headers,
                         .request_timeout_ms = c->request_timeout_ms,
                         .min_body_rate = c->min_body_rate,
                         .idle_timeout_ms = c->idle_timeout_ms,
                         .max_connections = (int)c->max_connections,
                         .max_connections_per_ip = (int)c->max_connections_per_ip,
                         .http2_max_streams = (uint32_t)c->http2_max_streams,
                         .http2_max_header_list_bytes = (uint32_t)c->http2_max_header_list_bytes,
                         .http2_header_table_bytes = (uint32_t)c->http2_header_table_bytes,
                         .http2_max_control_frames = (uint32_t)c->http2_max_control_frames,
                         .max_body_bytes_in_flight = c->max_body_bytes_in_flight,
                         .max_answer_bytes_in_flight = c->max_answer_bytes_in_flight,
                         .on_complete = c->access_log ? access_line : NULL,
                         .on_headers = on_headers,
                         .on_headers_every_body = 1,
                         .tls = gw->tls};
    gw->http = rn_http_listen(gw->loop, &hc, on_request, gw, err, sizeof err);
    if (!gw->http) {
        rn_log(RN_LOG_ERROR, "start", "%s", err);
        return 1;
    }
    uv_signal_init(gw->loop, &gw->sigterm);
    uv_signal_init(gw->loop, &gw->sigint);
    uv_signal_init(gw->loop, &gw->sighup);
    gw->sigterm.data = gw->sigint.data = gw->sighup.data = gw;
    uv_signal_start(&gw->sigterm, on_signal, SIGTERM);
    uv_signal_start(&gw->sigint, on_signal, SIGINT);
    uv_signal_start(&gw->sighup, on_sighup, SIGHUP);
    gw->signals_on = 1;
    char where[512];
    rn_http_listen_addresses(gw->http, where, sizeof where);
    rn_log(RN_LOG_INFO, "ready", "gateway on %s in front of %d node(s)", where, c->n_upstreams);
    uv_run(gw->loop, UV_RUN_DEFAULT);
    return 0;
}

/* `runnel gateway key new ...` */
static int key_new(int argc, char **argv) {
    const char *tenant = NULL, *rights = NULL, *file = NULL, *expires = NULL;
    for (int i = 0; i < argc; i++) {
        const char **slot = strcmp(argv[i], "--tenant") == 0    ? &tenant
                            : strcmp(argv[i], "--buckets") == 0 ? &rights
                            : strcmp(argv[i], "--tenants") == 0 ? &file
                            : strcmp(argv[i], "--expires") == 0 ? &expires
                                                                : NULL;
        if (!slot || i + 1 >= argc) {
            fprintf(stderr,
                    "usage: runnel gateway key new --tenant NAME --buckets RIGHTS --tenants FILE "
                    "[--expires RFC3339]\n");
            return 2;
        }
        *slot = argv[++i];
    }
    if (!tenant || !rights || !file) {
        fprintf(stderr, "runnel gateway key new: --tenant, --buckets and --tenants are required\n");
        return 2;
    }
    char key[RN_API_KEY_LEN + 1], err[1024];
    if (rn_keyfile_add(file, tenant, rights, expires, key, err, sizeof err)) {
        fprintf(stderr, "runnel gateway key new: %s\n", err);
        return 1;
    }
    printf("%s\n", key);
    memset(key, 0, sizeof key);
    return 0;
}

int rn_gateway_cmd(int argc, char **argv) {
    if (argc >= 2 && strcmp(argv[0], "key") == 0 && strcmp(argv[1], "new") == 0)
        return key_new(argc - 2, argv + 2);
    static gateway gw; /* the process's one gateway */
    memset(&gw, 0, sizeof gw);
    char err[512];
    int rc = rn_config_load(&gw.cfg, RN_CONFIG_GATEWAY, argc, argv, err, sizeof err);
    if (rc == 1)
        return 0;
    if (rc == 0 && !gw.cfg.n_upstreams)
        snprintf(err, sizeof err, "at least one --upstream is required"), rc = -1;
    if (rc == 0 && !gw.cfg.tenants[0])
        snprintf(err, sizeof err, "--tenants is required (a missing file lets nobody in)"), rc = -1;
    if (rc < 0) {
        fprintf(stderr, "runnel gateway: %s\n", err);
        return 2;
    }
    char desc[8192];
    if (gw.cfg.print_config) {
        rn_config_describe(&gw.cfg, RN_CONFIG_GATEWAY, "\n", desc, sizeof desc);
        printf("%s\n", desc);
        return 0;
    }
    rn_log_setup(strcmp(gw.cfg.log_format, "json") == 0, rn_log_level_parse(gw.cfg.log_level));
    signal(SIGPIPE, SIG_IGN);
    gw.loop = uv_default_loop();
    rn_config_describe(&gw.cfg, RN_CONFIG_GATEWAY, " ", desc, sizeof desc);
    rn_log(RN_LOG_INFO, "start", "runnel gateway starting: %s", desc);
    gw.exit_code = run(&gw);
    close_all(&gw);                  /* a start that failed left handles open */
    uv_run(gw.loop, UV_RUN_DEFAULT); /* they finish closing */
    if (gw.http)
        rn_http_free(gw.http);
    rn_forwarder_free(gw.fwd);
    rn_gate_free(gw.gate);
    rn_tls_context_free(gw.tls);
    uv_loop_close(gw.loop);
    rn_log(RN_LOG_INFO, "stopped", "exit code %d", gw.exit_code);
    return gw.exit_code;
}
