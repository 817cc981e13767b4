/*
 * runnel_bench.c — the `runnel-bench` command: parses the scenario and its
 * options, prepares the run and prints the report.
 *
 *   runnel-bench <writes|fanout|catchup|longpoll|bootstrap|create|fill|replay|tokens> --base
 * http://127.0.0.1:PORT [options]
 *
 * Every scenario is a closed-loop (or paced) HTTP/1.1 load generator on one
 * libuv loop; see the sc_*.c files. Exit status: 0 when the run finished
 * without protocol errors, 1 when it saw any (they are reported), 2 for
 * usage errors.
 */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "report.h"
#include "run.h"
#include "scenarios.h"

static const char USAGE[] =
    "usage: runnel-bench <scenario> --base http://127.0.0.1:PORT [options]\n"
    "\n"
    "scenarios (defaults in brackets):\n"
    "  writes     --streams [100] writers, --payload [256] B appends with producer headers,\n"
    "             --rate [0 = one in flight per stream] total appends/s, --duration [10] s\n"
    "  fanout     one stream, --subscribers [100] SSE readers, a writer at --rate [50]\n"
    "             events/s of --payload [64] B for --duration [10] s; with --tail-cmd CMD\n"
    "             also --tails [1] processes of CMD (split at spaces) + the stream's URL,\n"
    "             e.g. 'runnel tail -f', whose stdout must be the stream's bytes (timed\n"
    "             like the SSE readers' events; not for JSON streams)\n"
    "  catchup    pre-fill --bytes [256M] in --append-bytes [1M] appends, read it from\n"
    "             offset -1 with 1 client, then with --clients [4] clients\n"
    "  longpoll   --readers [1000] parked long-polls on --streams [100] streams, writers at\n"
    "             --rate [100] appends/s of --payload [64] B for --duration [10] s\n"
    "  bootstrap  --clients [100] streams of --events [1000] x --event-bytes [256] B\n"
    "             (pre-filled --batch [10] events per append), read by all clients at once:\n"
    "             --mode replay [default]: each replays its stream from offset -1;\n"
    "             --mode bootstrap (needs --surface bucket): a --snapshot-bytes [64K] snapshot\n"
    "             is published at the tail (offset from HEAD), then --after-events [0] more\n"
    "             events; each client does GET {stream}/bootstrap and checks the answer\n"
    "  create     --streams [100] empty streams created with PUT over --clients [64]\n"
    "             connections (idle-stream capacity; progress on stderr every 10 s)\n"
    "  fill       --streams [100] streams filled with --bytes [256M] in total, in\n"
    "             --append-bytes [1M] appends, one connection per stream\n"
    "  replay     --streams [100] streams an earlier fill of --run-id made, each read from\n"
    "             offset -1 to its tail on a connection of its own, all at once, for at\n"
    "             most --duration [10] s (cold reads beside a writes run)\n"
    "  tokens     --streams [1000] streams, each appended --rate [20] times a second with\n"
    "             --payload [40] B and tailed by --readers-per-stream [10] SSE readers, for\n"
    "             --duration [8] s (token streaming); Runnel needs --max-connections and\n"
    "             --max-live-reads above streams x readers (12000 for the defaults); server\n"
    "             CPU per delivery with --server-pid\n"
    "\n"
    "common options:\n"
    "  --surface v1|bucket      URL shape: {base}/v1/stream/{name} | {base}/{bucket}/{name}\n"
    "  --url-template T         explicit shape with {base}, {bucket}, {name}\n"
    "  --bucket NAME            bucket for the bucket surface [bench]\n"
    "  --content-type T         stream content type [text/plain]\n"
    "  --server-pid PID         report the server's VmRSS from /proc/PID/status (tokens:\n"
    "                           also its CPU time from /proc/PID/stat)\n"
    "  --timeout S              hard deadline of the whole run [300]\n"
    "  --json                   print the report as JSON (summary goes to stderr)\n"
    "  --follow-leaders         a cluster (--base: any node): each stream is created where\n"
    "                           a 307 sends it and written there, on its group's leader\n"
    "                           (writes only)\n"
    "  --header 'Name: value'   sent on every request (repeatable), e.g. a gateway's\n"
    "                           'Authorization: Bearer KEY'\n"
    "  --run-id ID              prefix of stream and producer names [unique per run]\n";

enum {
    O_BASE = 256,
    O_SURFACE,
    O_TEMPLATE,
    O_BUCKET,
    O_STREAMS,
    O_SUBSCRIBERS,
    O_READERS,
    O_READERS_PER_STREAM,
    O_CLIENTS,
    O_RATE,
    O_DURATION,
    O_PAYLOAD,
    O_CTYPE,
    O_BYTES,
    O_APPEND_BYTES,
    O_EVENTS,
    O_EVENT_BYTES,
    O_BATCH,
    O_MODE,
    O_SNAPSHOT_BYTES,
    O_AFTER_EVENTS,
    O_PID,
    O_TIMEOUT,
    O_TAIL_CMD,
    O_TAILS,
    O_JSON,
    O_FOLLOW,
    O_HEADER,
    O_RUN_ID,
    O_HELP,
};

static const struct option OPTS[] = {
    {"base", 1, 0, O_BASE},
    {"surface", 1, 0, O_SURFACE},
    {"url-template", 1, 0, O_TEMPLATE},
    {"bucket", 1, 0, O_BUCKET},
    {"streams", 1, 0, O_STREAMS},
    {"subscribers", 1, 0, O_SUBSCRIBERS},
    {"readers", 1, 0, O_READERS},
    {"readers-per-stream", 1, 0, O_READERS_PER_STREAM},
    {"clients", 1, 0, O_CLIENTS},
    {"rate", 1, 0, O_RATE},
    {"duration", 1, 0, O_DURATION},
    {"payload", 1, 0, O_PAYLOAD},
    {"content-type", 1, 0, O_CTYPE},
    {"bytes", 1, 0, O_BYTES},
    {"append-bytes", 1, 0, O_APPEND_BYTES},
    {"events", 1, 0, O_EVENTS},
    {"event-bytes", 1, 0, O_EVENT_BYTES},
    {"batch", 1, 0, O_BATCH},
    {"mode", 1, 0, O_MODE},
    {"snapshot-bytes", 1, 0, O_SNAPSHOT_BYTES},
    {"after-events", 1, 0, O_AFTER_EVENTS},
    {"server-pid", 1, 0, O_PID},
    {"timeout", 1, 0, O_TIMEOUT},
    {"tail-cmd", 1, 0, O_TAIL_CMD},
    {"tails", 1, 0, O_TAILS},
    {"json", 0, 0, O_JSON},
    {"follow-leaders", 0, 0, O_FOLLOW},
    {"header", 1, 0, O_HEADER},
    {"run-id", 1, 0, O_RUN_ID},
    {"help", 0, 0, O_HELP},
    {0, 0, 0, 0},
};

static void usage_error(const char *msg, const char *arg) {
    fprintf(stderr, "runnel-bench: %s%s%s\n\n%s", msg, arg ? ": " : "", arg ? arg : "", USAGE);
    exit(2);
}

/* A non-negative number with an optional K/M/G (binary) suffix. */
static double number(const char *s, int sizes) {
    char *end;
    double v = strtod(s, &end);
    if (end == s || v < 0)
        usage_error("not a non-negative number", s);
    if (sizes && *end) {
        const char *units = "KMG";
        const char *u = strchr(units, *end);
        if (!u || end[1])
            usage_error("size suffix must be K, M or G", s);
        for (const char *k = units; k <= u; k++)
            v *= 1024;
    } else if (*end) {
        usage_error("not a number", s);
    }
    return v;
}

static int positive_int(const char *s) {
    double v = number(s, 0);
    if (v < 1 || v > 1e6 || v != (int)v)
        usage_error("must be an integer in 1..1000000", s);
    return (int)v;
}

static int count_int(const char *s) {
    double v = number(s, 0);
    if (v > 1e6 || v != (int)v)
        usage_error("must be an integer in 0..1000000", s);
    return (int)v;
}

/* Scenario defaults; options given on the command line override them. */
static void defaults(const char *sc) {
    bn_o.scenario = sc;
    bn_o.content_type = "text/plain";
    bn_o.duration = 10;
    bn_o.timeout = 300;
    bn_o.payload = 256;
    bn_o.streams = 100;
    bn_o.subscribers = 100;
    bn_o.readers = 1000;
    bn_o.readers_per_stream = 10;
    bn_o.clients = 4;
    bn_o.events = 1000;
    bn_o.event_bytes = 256;
    bn_o.batch = 10;
    bn_o.replay_mode = 1;
    bn_o.snapshot_bytes = 64u << 10;
    bn_o.bytes = 256u << 20;
    bn_o.append_bytes = 1u << 20;
    if (strcmp(sc, "fanout") == 0) {
        bn_o.rate = 50;
        bn_o.payload = 64;
    } else if (strcmp(sc, "longpoll") == 0) {
        bn_o.rate = 100;
        bn_o.payload = 64;
    } else if (strcmp(sc, "bootstrap") == 0) {
        bn_o.clients = 100;
    } else if (strcmp(sc, "create") == 0) {
        bn_o.clients = 64;
    } else if (strcmp(sc, "tokens") == 0) {
        bn_o.streams = 1000;
        bn_o.rate = 20;
        bn_o.payload = 40;
        bn_o.duration = 8;
    }
}

static void raise_fd_limit(void) {
    struct rlimit r;
    if (getrlimit(RLIMIT_NOFILE, &r) == 0 && r.rlim_cur < r.rlim_max) {
        r.rlim_cur = r.rlim_max;
        setrlimit(RLIMIT_NOFILE, &r);
    }
}

int main(int argc, char **argv) {
    static const struct {
        const char *name;
        void (*start)(void);
    } SCENARIOS[] = {{"writes", bn_writes_start},       {"fanout", bn_fanout_start},
                     {"catchup", bn_catchup_start},     {"longpoll", bn_longpoll_start},
                     {"bootstrap", bn_bootstrap_start}, {"create", bn_create_start},
                     {"fill", bn_fill_scenario_start},  {"replay", bn_replay_scenario_start},
                     {"tokens", bn_tokens_start}};
    if (argc < 2 || argv[1][0] == '-') {
        fputs(USAGE, argc >= 2 && strcmp(argv[1], "--help") == 0 ? stdout : stderr);
        return argc >= 2 && strcmp(argv[1], "--help") == 0 ? 0 : 2;
    }
    void (*start)(void) = NULL;
    for (size_t i = 0; i < sizeof SCENARIOS / sizeof *SCENARIOS; i++)
        if (strcmp(argv[1], SCENARIOS[i].name) == 0)
            start = SCENARIOS[i].start;
    if (!start)
        usage_error("unknown scenario", argv[1]);
    defaults(argv[1]);
    const char *base = NULL, *tmpl = BN_TEMPLATE_V1, *bucket = "bench";
    char headers[sizeof bn_o.target.extra_headers] = "";
    int opt;
    optind = 2;
    while ((opt = getopt_long(argc, argv, "", OPTS, NULL)) != -1) {
        switch (opt) {
        case O_BASE:
            base = optarg;
            break;
        case O_SURFACE:
            if (strcmp(optarg, "v1") == 0)
                tmpl = BN_TEMPLATE_V1;
            else if (strcmp(optarg, "bucket") == 0)
                tmpl = BN_TEMPLATE_BUCKET;
            else
                usage_error("--surface must be v1 or bucket", optarg);
            break;
        case O_TEMPLATE:
            tmpl = optarg;
            break;
        case O_BUCKET:
            bucket = optarg;
            break;
        case O_STREAMS:
            bn_o.streams = positive_int(optarg);
            break;
        case O_SUBSCRIBERS:
            bn_o.subscribers = positive_int(optarg);
            break;
        case O_READERS:
            bn_o.readers = positive_int(optarg);
            break;
        case O_READERS_PER_STREAM:
            bn_o.readers_per_stream = positive_int(optarg);
            break;
        case O_CLIENTS:
            bn_o.clients = positive_int(optarg);
            break;
        case O_EVENTS:
            bn_o.events = positive_int(optarg);
            break;
        case O_BATCH:
            bn_o.batch = positive_int(optarg);
            break;
        case O_PID:
            bn_o.server_pid = positive_int(optarg);
            break;
        case O_RATE:
            bn_o.rate = number(optarg, 0);
            break;
        case O_DURATION:
            bn_o.duration = number(optarg, 0);
            break;
        case O_TIMEOUT:
            bn_o.timeout = number(optarg, 0);
            break;
        case O_PAYLOAD:
            bn_o.payload = (size_t)number(optarg, 1);
            break;
        case O_EVENT_BYTES:
            bn_o.event_bytes = (size_t)number(optarg, 1);
            break;
        case O_APPEND_BYTES:
            bn_o.append_bytes = (size_t)number(optarg, 1);
            break;
        case O_BYTES:
            bn_o.bytes = (uint64_t)number(optarg, 1);
            break;
        case O_CTYPE:
            bn_o.content_type = optarg;
            break;
        case O_RUN_ID:
            if (!optarg[0] || strlen(optarg) >= sizeof bn_o.run_id)
                usage_error("--run-id must be 1 to 39 characters", optarg);
            snprintf(bn_o.run_id, sizeof bn_o.run_id, "%s", optarg);
            break;
        case O_MODE:
            if (strcmp(optarg, "replay") != 0 && strcmp(optarg, "bootstrap") != 0)
                usage_error("--mode must be replay or bootstrap", optarg);
            bn_o.replay_mode = strcmp(optarg, "replay") == 0;
            break;
        case O_SNAPSHOT_BYTES:
            bn_o.snapshot_bytes = (size_t)number(optarg, 1);
            break;
        case O_AFTER_EVENTS:
            bn_o.after_events = count_int(optarg);
            break;
        case O_TAIL_CMD:
            bn_o.tail_cmd = optarg;
            break;
        case O_TAILS:
            bn_o.tails = positive_int(optarg);
            break;
        case O_JSON:
            bn_o.json = 1;
            break;
        case O_FOLLOW:
            bn_o.follow_leaders = 1;
            break;
        case O_HEADER:
            if (!strchr(optarg, ':') || strpbrk(optarg, "\r\n") ||
                strlen(headers) + strlen(optarg) + 3 > sizeof headers)
                usage_error("--header takes 'Name: value' (all of them together under 512 bytes)",
                            optarg);
            strcat(headers, optarg);
            strcat(headers, "\r\n");
            break;
        case O_HELP:
            fputs(USAGE, stdout);
            return 0;
        default:
            usage_error("bad option", NULL);
        }
    }
    if (optind < argc)
        usage_error("unexpected argument", argv[optind]);
    if (!base)
        usage_error("--base is required", NULL);
    if (bn_target_init(&bn_o.target, base, tmpl, bucket) != 0)
        return 2;
    memcpy(bn_o.target.extra_headers, headers, sizeof headers);
    if (bn_o.payload < BN_STAMP_MIN || bn_o.payload > (32u << 20))
        usage_error("--payload must be in 19 B .. 32 MiB", NULL);
    if (bn_o.append_bytes < 1 || bn_o.append_bytes > (32u << 20) || bn_o.event_bytes < 1 ||
        (uint64_t)bn_o.batch * bn_o.event_bytes > (32u << 20))
        usage_error("appends must be 1 B .. 32 MiB", NULL);
    if (bn_o.duration <= 0 || bn_o.timeout <= 0)
        usage_error("--duration and --timeout must be positive", NULL);
    bn_o.surface_bucket = strstr(tmpl, "/v1/stream/") == NULL;
    if (start == bn_bootstrap_start && !bn_o.replay_mode && !bn_o.surface_bucket)
        usage_error("--mode bootstrap needs the bucket surface (--surface bucket): snapshots and "
                    "/bootstrap are stream subresources there (extensions.txt §2-3)",
                    NULL);
    if (bn_o.snapshot_bytes > (32u << 20))
        usage_error("--snapshot-bytes must be at most 32 MiB (one request)", NULL);
    if (start == bn_fill_scenario_start && bn_o.bytes < (uint64_t)bn_o.streams)
        usage_error("--bytes must be at least one byte per stream", NULL);
    int json_stream = strncmp(bn_o.content_type, "application/json", 16) == 0;
    if (json_stream && (start == bn_catchup_start || start == bn_bootstrap_start ||
                        start == bn_fill_scenario_start))
        usage_error("catchup, bootstrap and fill send and verify raw bytes: use a non-JSON "
                    "--content-type",
                    NULL);
    if (bn_o.tails && !bn_o.tail_cmd)
        usage_error("--tails needs --tail-cmd", NULL);
    if (bn_o.tail_cmd && (start != bn_fanout_start || json_stream || !bn_o.tail_cmd[0]))
        usage_error("--tail-cmd is a non-empty command for fanout on a non-JSON stream", NULL);
    if (bn_o.tail_cmd && !bn_o.tails)
        bn_o.tails = 1;
    if (start == bn_tokens_start &&
        (bn_o.rate <= 0 || (int64_t)bn_o.streams * bn_o.readers_per_stream > 1000000))
        usage_error("tokens needs --rate > 0 (appends per stream per second) and at most "
                    "1000000 readers (streams x readers-per-stream)",
                    NULL);
    if (start == bn_longpoll_start && bn_o.readers < bn_o.streams)
        usage_error("--readers must be >= --streams", NULL);
    if (!bn_o.run_id[0])
        snprintf(bn_o.run_id, sizeof bn_o.run_id, "bench%ld-%d", (long)time(NULL), (int)getpid());

    signal(SIGPIPE, SIG_IGN);
    raise_fd_limit();
    bn_run_init();
    start();
    uv_run(bn_loop, UV_RUN_DEFAULT);
    bn_report_print(stdout, bn_o.json);
    if (bn_o.json)
        bn_report_print(stderr, 0);
    return bn_report_error_count() ? 1 : 0;
}
