/*
 * cli.c — the dispatcher of runnel's client subcommands: the common
 * options, the subcommand table, usage, stream resolution and reading a
 * whole input file.
 */
#include "client/cli/cli.h"

#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct {
    const char *name;
    int (*run)(cli_ctx *x, int argc, char **argv);
    const char *usage;
} command;

static const command COMMANDS[] = {
    {"create", cli_create,
     "create STREAM [--type CT] [--ttl S | --expires-at T] [--closed] [DATA | --file F]\n"
     "                 [--fork-of STREAM [--fork-offset OFF] [--fork-sub-offset N]]"},
    {"append", cli_append,
     "append STREAM [DATA | --file F | -] [--type CT] [--close] [--seq S]\n"
     "                 [--producer ID [--epoch N] [--state FILE] [--window N] [--batch-bytes N]]"},
    {"read", cli_read, "read STREAM [--offset OFF] [--max-bytes N]"},
    {"tail", cli_tail, "tail STREAM [-f] [--offset OFF|now] [--long-poll] [--timeout-ms N]"},
    {"head", cli_head, "head STREAM"},
    {"close", cli_close, "close STREAM"},
    {"rm", cli_rm, "rm STREAM"},
    {"publish", cli_publish,
     "publish STREAM [--offset OFF] [--type CT] [DATA | --file F | -] [--parts] [--part-bytes N]"},
    {"bootstrap", cli_bootstrap, "bootstrap STREAM [--out DIR]"},
    {"cluster", cli_cluster,
     "cluster status | add ID RAFTADDR URL [PEERURL] | remove ID | drain ID | undrain ID "
     "[--admin-token T]"},
    {"ls", cli_ls, "ls [BUCKET [--prefix P]] [--limit N] [--admin-token T]"},
    {"stat", cli_stat, "stat BUCKET[/NAME] [--admin-token T]"},
    {"usage", cli_usage, "usage [--limit N] [--admin-token T]"},
    {"purge", cli_purge, "purge BUCKET [--yes] [--no-wait] [--admin-token T]"},
};
#define NCOMMANDS (sizeof COMMANDS / sizeof COMMANDS[0])

void rn_cli_usage(FILE *out) {
    for (size_t i = 0; i < NCOMMANDS; i++)
        fprintf(out, "  runnel %s\n", COMMANDS[i].usage);
    fprintf(out,
            "\ncommon options: --url URL (or RUNNEL_URL; default http://127.0.0.1:4437),\n"
            "  --token TOKEN (or RUNNEL_TOKEN: a gateway's API key or JWT),\n"
            "  --cacert FILE (or RUNNEL_CACERT: the CA certificates, PEM, that an https\n"
            "  server's certificate must chain to; default the system's),\n"
            "  --json (machine-readable output), --bucket (STREAM is bucket/stream on the\n"
            "  bucket surface), -q (no summary on stderr), --cluster-aware (learn each\n"
            "  group's leader from a cluster's redirects and go there). STREAM is a name on the\n"
            "  /v1/stream/ surface, a path (/bucket/stream) or a full URL.\n"
            "operator commands (ls, stat, usage, purge, cluster) send --admin-token (or\n"
            "  RUNNEL_ADMIN_TOKEN), else --token, as the bearer credential; purge asks\n"
            "  for the bucket's name on a terminal, or takes --yes.\n"
            "exit codes: 0 applied, 1 refused, 2 usage, 3 outcome unknown, 4 no answer,\n"
            "  5 local file or producer state, 6 the stream changed under a tail.\n"
            "See runnel(1).\n");
}

static int optind_now = 1;
static const char *optarg_now;

int cli_getopt(cli_ctx *x, int argc, char **argv, const char *shortopts,
               const struct option *longopts) {
    /* the subcommand's options followed by the common ones */
    struct option all[48];
    size_t n = 0;
    for (; longopts && longopts[n].name && n < 40; n++)
        all[n] = longopts[n];
    all[n++] = (struct option){"url", required_argument, NULL, 0x100};
    all[n++] = (struct option){"token", required_argument, NULL, 0x103};
    all[n++] = (struct option){"cacert", required_argument, NULL, 0x104};
    all[n++] = (struct option){"json", no_argument, NULL, 0x101};
    all[n++] = (struct option){"bucket", no_argument, NULL, 0x102};
    all[n++] = (struct option){"quiet", no_argument, NULL, 'q'};
    all[n++] = (struct option){"cluster-aware", no_argument, NULL, 0x105};
    all[n++] = (struct option){"help", no_argument, NULL, 'h'};
    all[n] = (struct option){0};
    char shorts[64];
    snprintf(shorts, sizeof shorts, "%sqh", shortopts ? shortopts : "");
    for (;;) {
        int c = getopt_long(argc, argv, shorts, all, NULL);
        optind_now = optind;
        optarg_now = optarg;
        switch (c) {
        case 0x100:
            x->url = optarg;
            continue;
        case 0x101:
            x->json = 1;
            continue;
        case 0x103:
            x->token = optarg;
            continue;
        case 0x102:
            x->bucket = 1;
            continue;
        case 0x104:
            x->cacert = optarg;
            continue;
        case 0x105:
            x->cluster_aware = 1;
            continue;
        case 'q':
            x->quiet = 1;
            continue;
        case 'h':
            for (size_t i = 0; i < NCOMMANDS; i++)
                if (strcmp(COMMANDS[i].name, argv[0]) == 0)
                    printf("usage: runnel %s\n", COMMANDS[i].usage);
            exit(RN_EXIT_OK);
        default: /* -1 at the end (getopt puts the operands last), or an option */
            return c;
        }
    }
}

int cli_optind(void) {
    return optind_now;
}

const char *cli_optarg(void) {
    return optarg_now;
}

int cli_usage_error(const char *cmd, const char *fmt, ...) {
    va_list ap;
    fprintf(stderr, "runnel %s: ", cmd);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, " (runnel %s --help)\n", cmd);
    return RN_EXIT_USAGE;
}

int cli_connect(cli_ctx *x) {
    if (!x->url)
        x->url = getenv("RUNNEL_URL");
    if (!x->url || !x->url[0])
        x->url = "http://127.0.0.1:4437";
    if (!x->token)
        x->token = getenv("RUNNEL_TOKEN");
    if (!x->cacert)
        x->cacert = getenv("RUNNEL_CACERT");
    if (x->cacert && !x->cacert[0])
        x->cacert = NULL;
    if (x->cacert && access(x->cacert, R_OK) != 0) {
        fprintf(stderr, "runnel: the CA file %s cannot be read: %s\n", x->cacert, strerror(errno));
        return RN_EXIT_USAGE;
    }
    runnel_client_options o = {.base_url = x->url,
                               .token = x->token && x->token[0] ? x->token : NULL,
                               .ca_file = x->cacert,
                               .cluster_aware = x->cluster_aware};
    x->client = runnel_client_new(&o);
    if (!x->client) {
        fprintf(stderr, "runnel: %s is not an http:// or https:// URL\n", x->url);
        return RN_EXIT_USAGE;
    }
    return RN_EXIT_OK;
}

int cli_stream_url(cli_ctx *x, const char *arg, char *out, size_t cap) {
    if (!x->client && cli_connect(x))
        return -2; /* the URL option came with the subcommand's options */
    size_t n = strlen(arg);
    if (n == 0)
        return -1;
    if (strncmp(arg, "http://", 7) == 0 || strncmp(arg, "https://", 8) == 0 || arg[0] == '/') {
        if (n >= cap)
            return -1;
        memcpy(out, arg, n + 1);
        return 0;
    }
    return runnel_stream_url(x->client, arg, x->bucket, out, cap);
}

int cli_stream_operands(cli_ctx *x, const char *cmd, int argc, char **argv, int data_ok, char *url,
                        size_t cap, const char **data) {
    int i = optind_now, n = argc - i;
    if (n < 1 || n > (data_ok ? 2 : 1))
        return cli_usage_error(cmd, n < 1 ? "a STREAM is needed" : "too many operands");
    if (data)
        *data = n == 2 ? argv[i + 1] : NULL;
    int bad = cli_stream_url(x, argv[i], url, cap);
    if (bad == -2)
        return RN_EXIT_USAGE; /* a bad --url, already reported */
    if (bad)
        return cli_usage_error(cmd, "\"%s\" is not a stream name%s", argv[i],
                               x->bucket ? " of the form bucket/stream" : "");
    return 0;
}

int cli_read_file(const char *path, uint64_t max, char **data, size_t *len) {
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
    if (!f)
        return -1;
    size_t cap = 65536, n = 0;
    char *buf = malloc(cap);
    if (!buf)
        abort();
    for (;;) {
        if (n == cap) {
            if (cap > max) {
                free(buf);
                if (f != stdin)
                    fclose(f);
                return -2;
            }
            cap *= 2;
            buf = realloc(buf, cap);
            if (!buf)
                abort();
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0)
            break;
    }
    int err = ferror(f);
    if (f != stdin)
        fclose(f);
    if (err) {
        free(buf);
        errno = EIO;
        return -1;
    }
    if (n > max) {
        free(buf);
        return -2;
    }
    *data = buf;
    *len = n;
    return 0;
}

int rn_cli_main(int argc, char **argv) {
    cli_ctx x = {0};
    /* common options may come before the subcommand */
    int i = 1;
    for (; i < argc && argv[i][0] == '-'; i++) {
        if (strcmp(argv[i], "--json") == 0)
            x.json = 1;
        else if (strcmp(argv[i], "--bucket") == 0)
            x.bucket = 1;
        else if (strcmp(argv[i], "-q") == 0 || strcmp(argv[i], "--quiet") == 0)
            x.quiet = 1;
        else if (strcmp(argv[i], "--cluster-aware") == 0)
            x.cluster_aware = 1;
        else if (strcmp(argv[i], "--url") == 0 && i + 1 < argc)
            x.url = argv[++i];
        else if (strncmp(argv[i], "--url=", 6) == 0)
            x.url = argv[i] + 6;
        else if (strcmp(argv[i], "--cacert") == 0 && i + 1 < argc)
            x.cacert = argv[++i];
        else if (strncmp(argv[i], "--cacert=", 9) == 0)
            x.cacert = argv[i] + 9;
        else if (strcmp(argv[i], "--token") == 0 && i + 1 < argc)
            x.token = argv[++i];
        else if (strncmp(argv[i], "--token=", 8) == 0)
            x.token = argv[i] + 8;
        else
            return cli_usage_error("", "unknown option %s", argv[i]);
    }
    if (i >= argc) {
        fprintf(stderr, "usage: runnel <command> [options]\n");
        rn_cli_usage(stderr);
        return RN_EXIT_USAGE;
    }
    for (size_t k = 0; k < NCOMMANDS; k++) {
        if (strcmp(COMMANDS[k].name, argv[i]) != 0)
            continue;
        optind = 0; /* getopt_long restarts on the subcommand's argv */
        int rc = COMMANDS[k].run(&x, argc - i, argv + i);
        runnel_client_free(x.client);
        return rc;
    }
    fprintf(stderr,
            "runnel: unknown command \"%s\"\nusage: runnel <command> [options] (runnel help "
            "lists the commands)\n",
            argv[i]);
    return RN_EXIT_USAGE;
}
