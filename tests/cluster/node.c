/*
 * node.c — runnel-consensus-node: one cluster node running the consensus
 * layer (src/cluster/) with the toy state machine of toy_fsm.h, driven by
 * a line protocol for the cluster tests and the benchmark. Test-only: built
 * by CMake, never installed.
 *
 *   runnel-consensus-node --id N --address IP:PORT --data DIR --groups G
 *       [--peers ID=IP:PORT,...] [--join] [--no-nodelay] [--snapshot-compression]
 *       [--read-barriers]  (every read round a barrier entry, no confirm rounds)
 *       [--cluster-id S]
 *       [--snapshot-threshold N] [--snapshot-trailing N] [--segment-bytes N]
 *       [--election-timeout MS] [--heartbeat MS]
 *
 * Commands on stdin, one per line, each starting with a caller's tag; each
 * gets one JSON line on stdout carrying that tag (see commands.c). The node
 * also prints events: {"event":"started"} once every group runs (or
 * {"event":"failed","error":...} and exit 1), {"event":"leader",...} on
 * every leader_changed. It stops gracefully on EOF, SIGTERM or "stop".
 */
#include "node.h"

#include <assert.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/buf.h"
#include "util/text.h"

node_state N;

void node_print(json_t *j) {
    char *text = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    fputs(text, stdout);
    fputc('\n', stdout);
    fflush(stdout);
    free(text);
}

/* --- the state machine ------------------------------------------------------ */

static void *on_apply(void *ctx, unsigned group, uint64_t index, const void *data, size_t len) {
    return toy_apply(ctx, group, index, data, len);
}

static void on_free_result(void *ctx, unsigned group, void *result) {
    (void)ctx;
    (void)group;
    free(result);
}

static int on_snapshot(void *ctx, unsigned group, uint64_t index, void **out, size_t *len) {
    (void)index;
    toy_snapshot(ctx, group, out, len);
    return 0;
}

static int on_restore(void *ctx, unsigned group, uint64_t index, const void *m, size_t len) {
    return toy_restore(ctx, group, index, m, len);
}

static void on_leader(void *ctx, unsigned group, uint64_t leader, uint64_t term, bool ready) {
    (void)ctx;
    node_print(json_pack("{s:s, s:i, s:I, s:I, s:b}", "event", "leader", "group", (int)group,
                         "leader", (json_int_t)leader, "term", (json_int_t)term, "ready", ready));
}

/* --- lifecycle ------------------------------------------------------------- */

static void closed_all(void *arg) {
    (void)arg;
    uv_close((uv_handle_t *)&N.sigterm, NULL);
    if (!uv_is_closing((uv_handle_t *)&N.input))
        uv_close((uv_handle_t *)&N.input, NULL);
}

void node_stop(void) {
    if (N.stopping)
        return;
    N.stopping = true;
    uv_read_stop((uv_stream_t *)&N.input);
    consensus_stop(N.c, closed_all, NULL);
}

static void on_sigterm(uv_signal_t *s, int sig) {
    (void)s;
    (void)sig;
    node_stop();
}

static void alloc_input(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
    (void)h;
    (void)suggested;
    static char chunk[65536];
    buf->base = chunk;
    buf->len = sizeof chunk;
}

static void read_input(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf) {
    (void)s;
    if (nread < 0) {
        node_stop(); /* EOF: the driver went away */
        return;
    }
    for (ssize_t i = 0; i < nread; i++) {
        char ch = buf->base[i];
        if (ch != '\n') {
            rn_buf_append_byte(&N.line, (uint8_t)ch);
            continue;
        }
        rn_buf_append_byte(&N.line, 0);
        if (!N.stopping)
            node_command((char *)N.line.data);
        N.line.len = 0;
    }
}

/* --- arguments --------------------------------------------------------------- */

static void usage(const char *why) {
    fprintf(stderr, "runnel-consensus-node: %s\n", why);
    exit(2);
}

static uint64_t number(const char *s, uint64_t max) {
    uint64_t v;
    if (rn_parse_strict_u64(s, strlen(s), max, &v) != 0)
        usage("bad number");
    return v;
}

/* Parses "1=127.0.0.1:7001,2=..." into N.peers. */
static void parse_peers(char *list) {
    for (char *save = NULL, *item = strtok_r(list, ",", &save); item;
         item = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(item, '=');
        if (eq == NULL || N.n_peers == NODE_MAX_PEERS)
            usage("bad --peers");
        *eq = '\0';
        N.peers[N.n_peers].id = number(item, UINT32_MAX);
        N.peers[N.n_peers].address = eq + 1;
        N.n_peers++;
    }
}

static void parse_args(int argc, char **argv, consensus_config *cfg) {
    consensus_params_default(&cfg->params);
    cfg->bootstrap = true;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--join") == 0) {
            cfg->bootstrap = false;
            continue;
        }
        if (strcmp(a, "--no-nodelay") == 0) {
            cfg->params.tcp_nodelay = false;
            continue;
        }
        if (strcmp(a, "--read-barriers") == 0) {
            cfg->params.read_confirm = false;
            continue;
        }
        if (strcmp(a, "--snapshot-compression") == 0) {
            cfg->params.snapshot_compression = true;
            continue;
        }
        if (v == NULL)
            usage("missing value");
        i++;
        if (strcmp(a, "--id") == 0)
            cfg->self_id = number(v, UINT32_MAX);
        else if (strcmp(a, "--address") == 0)
            cfg->self_address = v;
        else if (strcmp(a, "--data") == 0)
            cfg->data_dir = v;
        else if (strcmp(a, "--groups") == 0)
            cfg->groups = (unsigned)number(v, 1024);
        else if (strcmp(a, "--peers") == 0)
            parse_peers(argv[i]);
        else if (strcmp(a, "--cluster-id") == 0)
            cfg->cluster_id = v;
        else if (strcmp(a, "--snapshot-threshold") == 0)
            cfg->params.snapshot_threshold = (unsigned)number(v, UINT32_MAX);
        else if (strcmp(a, "--snapshot-trailing") == 0)
            cfg->params.snapshot_trailing = (unsigned)number(v, UINT32_MAX);
        else if (strcmp(a, "--segment-bytes") == 0)
            cfg->params.segment_bytes = number(v, 1u << 30);
        else if (strcmp(a, "--election-timeout") == 0)
            cfg->params.election_timeout_ms = (unsigned)number(v, 60000);
        else if (strcmp(a, "--heartbeat") == 0)
            cfg->params.heartbeat_ms = (unsigned)number(v, 60000);
        else
            usage("unknown option");
    }
    if (cfg->self_id == 0 || cfg->self_address == NULL || cfg->data_dir == NULL || cfg->groups == 0)
        usage("--id, --address, --data and --groups are required");
}

int main(int argc, char **argv) {
    signal(SIGPIPE, SIG_IGN); /* consensus_start's precondition */
    uv_loop_t *loop = uv_default_loop();
    consensus_config cfg = {0};
    parse_args(argc, argv, &cfg);
    cfg.loop = loop;
    cfg.peers = N.peers;
    cfg.n_peers = N.n_peers;
    toy_init(&N.toy, cfg.groups);
    cfg.fsm = (consensus_fsm){
        .ctx = &N.toy,
        .apply = on_apply,
        .free_result = on_free_result,
        .snapshot = on_snapshot,
        .restore = on_restore,
        .leader_changed = on_leader,
    };
    uv_pipe_init(loop, &N.input, 0);
    uv_pipe_open(&N.input, 0);
    uv_signal_init(loop, &N.sigterm);
    uv_signal_start(&N.sigterm, on_sigterm, SIGTERM);
    int rv = consensus_start(&cfg, &N.c);
    int status = 0;
    if (rv != 0) {
        node_print(json_pack("{s:s, s:s}", "event", "failed", "error", consensus_error(N.c)));
        status = 1;
        node_stop();
    } else {
        node_print(json_pack("{s:s}", "event", "started"));
        uv_read_start((uv_stream_t *)&N.input, alloc_input, read_input);
    }
    uv_run(loop, UV_RUN_DEFAULT);
    toy_free(&N.toy);
    rn_buf_free(&N.line);
    node_bench_free();
    uv_loop_close(loop);
    return status;
}
