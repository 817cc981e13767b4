/*
 * cmd_stream.c — runnel create, head, close, rm and read.
 */
#include "client/cli/cli.h"
#include "util/buf.h"
#include "util/text.h"

#include <getopt.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#define JSON_READ_MAX (64u << 20) /* a read printed as JSON is held in memory */

int cli_create(cli_ctx *x, int argc, char **argv) {
    static const struct option opts[] = {
        {"type", required_argument, NULL, 't'},
        {"ttl", required_argument, NULL, 'T'},
        {"expires-at", required_argument, NULL, 'E'},
        {"closed", no_argument, NULL, 'c'},
        {"file", required_argument, NULL, 'f'},
        {"fork-of", required_argument, NULL, 'F'},
        {"fork-offset", required_argument, NULL, 'O'},
        {"fork-sub-offset", required_argument, NULL, 'S'},
        {"if-incarnation", required_argument, NULL, 'I'},
        {0},
    };
    runnel_create_options o = {0};
    const char *file = NULL, *fork_of = NULL;
    int c;
    while ((c = cli_getopt(x, argc, argv, "t:f:", opts)) != -1) {
        switch (c) {
        case 't':
            o.content_type = cli_optarg();
            break;
        case 'T':
            o.ttl = cli_optarg();
            break;
        case 'E':
            o.expires_at = cli_optarg();
            break;
        case 'c':
            o.closed = 1;
            break;
        case 'f':
            file = cli_optarg();
            break;
        case 'F':
            fork_of = cli_optarg();
            break;
        case 'O':
            o.fork_offset = cli_optarg();
            break;
        case 'S':
            o.fork_sub_offset = cli_optarg();
            break;
        case 'I':
            o.incarnation = cli_optarg();
            break;
        default:
            return RN_EXIT_USAGE;
        }
    }
    const char *data = NULL;
    char url[2048], fork_url[2048];
    if (cli_stream_operands(x, "create", argc, argv, 1, url, sizeof url, &data))
        return RN_EXIT_USAGE;
    if (data && file)
        return cli_usage_error("create", "give DATA or --file, not both");
    if (fork_of) { /* Stream-Forked-From is the source's path */
        if (cli_stream_url(x, fork_of, fork_url, sizeof fork_url))
            return cli_usage_error("create", "\"%s\" is not a stream name", fork_of);
        const char *path = fork_url;
        if (strncmp(path, "http", 4) == 0) {
            const char *p = strstr(path, "://");
            path = p ? strchr(p + 3, '/') : NULL;
            if (!path)
                return cli_usage_error("create", "--fork-of needs a stream");
        }
        o.forked_from = path; /* without --type the fork inherits the source's type */
    }
    char *body = NULL;
    size_t len = 0;
    if (file) {
        int r = cli_read_file(file, 32u << 20, &body, &len);
        if (r == -2)
            return cli_usage_error("create", "%s is larger than a request may be (32 MiB)", file);
        if (r) {
            fprintf(stderr, "runnel create: cannot read %s\n", file);
            return RN_EXIT_LOCAL;
        }
        o.body = (runnel_body){.data = body, .len = len};
    } else if (data) {
        o.body = (runnel_body){.data = data, .len = strlen(data)};
    }
    runnel_answer a;
    runnel_result r = runnel_create(x->client, url, &o, &a);
    free(body);
    return cli_report(x, "create", r, &a, 1);
}

/* close and rm: a write named by the stream, with --if-incarnation. */
static int stream_write(cli_ctx *x, int argc, char **argv, const char *cmd,
                        runnel_result (*call)(runnel_client *, const char *, const char *,
                                              runnel_answer *)) {
    static const struct option opts[] = {{"if-incarnation", required_argument, NULL, 'I'}, {0}};
    const char *inc = NULL;
    int c;
    while ((c = cli_getopt(x, argc, argv, "", opts)) != -1) {
        if (c != 'I')
            return RN_EXIT_USAGE;
        inc = cli_optarg();
    }
    char url[2048];
    if (cli_stream_operands(x, cmd, argc, argv, 0, url, sizeof url, NULL))
        return RN_EXIT_USAGE;
    runnel_answer a;
    return cli_report(x, cmd, call(x->client, url, inc, &a), &a, 1);
}

int cli_close(cli_ctx *x, int argc, char **argv) {
    return stream_write(x, argc, argv, "close", runnel_close);
}

int cli_rm(cli_ctx *x, int argc, char **argv) {
    return stream_write(x, argc, argv, "rm", runnel_delete);
}

static void show(const char *name, const char *value) {
    if (value && value[0])
        printf("%-22s %s\n", name, value);
}

int cli_head(cli_ctx *x, int argc, char **argv) {
    if (cli_getopt(x, argc, argv, "", NULL) != -1)
        return RN_EXIT_USAGE;
    char url[2048];
    if (cli_stream_operands(x, "head", argc, argv, 0, url, sizeof url, NULL))
        return RN_EXIT_USAGE;
    runnel_answer a;
    runnel_result r = runnel_head(x->client, url, NULL, &a);
    if (r != RUNNEL_OK || x->json)
        return cli_report(x, "head", r, &a, 0);
    char n[32];
    show("content-type", a.content_type);
    show("next-offset", a.next_offset);
    show("closed", a.closed ? "true" : "false");
    show("incarnation", a.incarnation);
    show("previous-incarnation", a.previous_incarnation);
    show("inherited-offset", a.inherited_offset);
    show("retained-offset", a.retained_offset);
    show("snapshot-offset", a.snapshot_offset);
    show("snapshot-digest", a.snapshot_digest);
    show("ttl", a.ttl);
    show("expires-at", a.expires_at);
    if (a.max_request_bytes >= 0) {
        snprintf(n, sizeof n, "%lld", (long long)a.max_request_bytes);
        show("max-request-bytes", n);
    }
    if (a.max_snapshot_bytes >= 0) {
        snprintf(n, sizeof n, "%lld", (long long)a.max_snapshot_bytes);
        show("max-snapshot-bytes", n);
    }
    show("cluster-id", a.cluster_id);
    return RN_EXIT_OK;
}

typedef struct {
    int json;
    rn_buf held; /* --json: the data, printed with the answer */
    uint64_t total;
    cli_progress progress;
    int too_large;
} read_sink;

static int on_read(void *arg, const void *data, size_t len) {
    read_sink *s = arg;
    s->total += len;
    if (s->json) {
        if (s->held.len + len > JSON_READ_MAX) {
            s->too_large = 1;
            return 1;
        }
        rn_buf_append(&s->held, data, len);
        return 0;
    }
    cli_progress_update(&s->progress, s->total, 0);
    return fwrite(data, 1, len, stdout) != len;
}

int cli_read(cli_ctx *x, int argc, char **argv) {
    static const struct option opts[] = {
        {"offset", required_argument, NULL, 'o'},
        {"max-bytes", required_argument, NULL, 'm'},
        {"if-incarnation", required_argument, NULL, 'I'},
        {0},
    };
    runnel_read_options o = {0};
    uint64_t max_total = 0;
    int c;
    while ((c = cli_getopt(x, argc, argv, "o:", opts)) != -1) {
        if (c == 'o') {
            o.offset = cli_optarg();
        } else if (c == 'm') {
            if (rn_parse_strict_u64(cli_optarg(), strlen(cli_optarg()), 1ull << 50, &max_total))
                return cli_usage_error("read", "--max-bytes takes a decimal count");
        } else if (c == 'I') {
            o.incarnation = cli_optarg();
        } else {
            return RN_EXIT_USAGE;
        }
    }
    char url[2048];
    if (cli_stream_operands(x, "read", argc, argv, 0, url, sizeof url, NULL))
        return RN_EXIT_USAGE;
    read_sink s = {.json = x->json};
    cli_progress_init(&s.progress, "read");
    o.on_data = on_read;
    o.arg = &s;
    runnel_answer a;
    runnel_result r = runnel_read_all(x->client, url, &o, max_total, &a);
    cli_progress_end(&s.progress);
    fflush(stdout);
    if (s.too_large) {
        fprintf(stderr, "runnel read: more than %u MiB: use --max-bytes, or no --json\n",
                JSON_READ_MAX >> 20);
        rn_buf_free(&s.held);
        return RN_EXIT_LOCAL;
    }
    if (r != RUNNEL_OK || !x->json) {
        int code = cli_report(x, "read", r, &a, 0);
        rn_buf_free(&s.held);
        return code;
    }
    int text = rn_utf8_valid(s.held.data, s.held.len);
    rn_buf b64 = {0};
    if (!text)
        rn_base64_append(&b64, s.held.data, s.held.len);
    const rn_buf *d = text ? &s.held : &b64;
    cli_print_answer_json(stdout, &a, 0, text ? "data" : "data_base64", (const char *)d->data,
                          d->len);
    rn_buf_free(&s.held);
    rn_buf_free(&b64);
    return RN_EXIT_OK;
}
