/*
 * gate_embed.c — a program that embeds the gate (src/gateway/gate.h) the
 * way a hosting service would: its own HTTP server, the gate in front of
 * its one handler (which answers 200 "served"), and a refusal hook that
 * refuses tenants by their name (ext §11.1's embedding refusals):
 *   hook-unpaid   402 PAYMENT_REQUIRED
 *   hook-revoked  403 ACCOUNT_REVOKED
 *   hook-denied   403 FORBIDDEN
 *   hook-limited  429 RATE_LIMITED, Retry-After: 7
 * Usage: gate_embed TENANTS_FILE PORT (prints "listening" once it does;
 * stops on SIGTERM). tests/gateway/gate_embed.test.mjs drives it.
 */
#include "gateway/gate.h"
#include "transport/http.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static rn_gate *gate;
static rn_http_server *http;
static uv_signal_t sigterm;

static rn_gate_refusal hook(void *arg, const rn_gate_info *info) {
    (void)arg;
    static const struct {
        const char *tenant;
        rn_error refusal;
        uint64_t retry_after_s;
    } rules[] = {{"hook-unpaid", RN_E_GW_PAYMENT_REQUIRED, 0},
                 {"hook-revoked", RN_E_GW_ACCOUNT_REVOKED, 0},
                 {"hook-denied", RN_E_GW_FORBIDDEN, 0},
                 {"hook-limited", RN_E_GW_RATE_LIMITED, 7}};
    for (size_t i = 0; i < sizeof rules / sizeof rules[0]; i++)
        if (strcmp(info->tenant, rules[i].tenant) == 0)
            return (rn_gate_refusal){rules[i].refusal, rules[i].retry_after_s};
    return (rn_gate_refusal){0};
}

static void serve(rn_request *req) {
    rn_buf h = {0}, body = {0};
    rn_buf_append_str(&h, "Content-Type: text/plain\r\n");
    rn_buf_append_str(&body, "served\n");
    rn_http_respond(req, 200, &h, &body);
}

static void admitted(rn_request *req, void *arg) {
    (void)arg;
    if (rn_gate_admitted(req) && !rn_request_gone(req))
        serve(req);
}

static void on_request(rn_request *req, void *arg) {
    (void)arg;
    if (rn_gate_check(gate, req, 1, admitted, NULL) == RN_GATE_PASS)
        serve(req);
}

static void on_term(uv_signal_t *s, int signum) {
    (void)signum;
    uv_close((uv_handle_t *)s, NULL);
    rn_gate_stop(gate);
    rn_http_close(http);
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: gate_embed TENANTS_FILE PORT\n");
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    uv_loop_t *loop = uv_default_loop();
    char err[512];
    rn_gate_config gc = {.tenants_path = argv[1], .max_request_bytes = 1 << 20};
    gate = rn_gate_new(loop, &gc, err, sizeof err);
    if (!gate) {
        fprintf(stderr, "gate_embed: %s\n", err);
        return 1;
    }
    rn_gate_set_refusal_hook(gate, hook, NULL);
    rn_http_config hc = {.host = "127.0.0.1",
                         .port = atoi(argv[2]),
                         .max_body_bytes = 1 << 20,
                         .max_header_bytes = 16384,
                         .max_headers = 100,
                         .request_timeout_ms = 10000,
                         .idle_timeout_ms = 10000,
                         .max_connections = 100};
    http = rn_http_listen(loop, &hc, on_request, NULL, err, sizeof err);
    if (!http) {
        fprintf(stderr, "gate_embed: %s\n", err);
        return 1;
    }
    uv_signal_init(loop, &sigterm);
    uv_signal_start(&sigterm, on_term, SIGTERM);
    printf("listening\n");
    fflush(stdout);
    uv_run(loop, UV_RUN_DEFAULT);
    rn_http_free(http);
    rn_gate_free(gate);
    uv_loop_close(loop);
    return 0;
}
