/*
 * cmd_snapshot.c — runnel publish (a snapshot at an offset, default the
 * tail: whole, or in parts when it is larger than a request may be or
 * --parts asks) and runnel bootstrap (the snapshot and the messages after
 * it, part by part, to stdout or to files).
 */
#include "client/cli/cli.h"
#include "util/text.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

typedef struct {
    int fd;
    cli_progress progress;
} file_source;

static long read_source(void *arg, void *buf, size_t cap) {
    file_source *s = arg;
    for (;;) {
        ssize_t n = read(s->fd, buf, cap);
        if (n < 0 && errno == EINTR)
            continue;
        return n < 0 ? -1 : (long)n;
    }
}

static int rewind_source(void *arg) {
    file_source *s = arg;
    return lseek(s->fd, 0, SEEK_SET) == 0 ? 0 : -1;
}

static void on_progress(void *arg, uint64_t done, uint64_t total) {
    file_source *s = arg;
    cli_progress_update(&s->progress, done, total);
}

int cli_publish(cli_ctx *x, int argc, char **argv) {
    static const struct option opts[] = {
        {"offset", required_argument, NULL, 'o'},
        {"type", required_argument, NULL, 't'},
        {"file", required_argument, NULL, 'f'},
        {"parts", no_argument, NULL, 'P'},
        {"part-bytes", required_argument, NULL, 'B'},
        {"if-incarnation", required_argument, NULL, 'I'},
        {"retry-for-ms", required_argument, NULL, 'r'},
        {0},
    };
    const char *offset = NULL, *type = NULL, *file = NULL, *inc = NULL;
    int parts = 0, c;
    uint64_t part_bytes = 0, retry_for = 60000;
    while ((c = cli_getopt(x, argc, argv, "o:t:f:", opts)) != -1) {
        const char *v = cli_optarg();
        switch (c) {
        case 'o':
            offset = v;
            break;
        case 't':
            type = v;
            break;
        case 'f':
            file = v;
            break;
        case 'P':
            parts = 1;
            break;
        case 'I':
            inc = v;
            break;
        case 'B':
        case 'r':
            if (rn_parse_strict_u64(v, strlen(v), c == 'B' ? 32u << 20 : 86400000,
                                    c == 'B' ? &part_bytes : &retry_for))
                return cli_usage_error("publish", "%s takes a decimal number",
                                       c == 'B' ? "--part-bytes" : "--retry-for-ms");
            break;
        default:
            return RN_EXIT_USAGE;
        }
    }
    const char *data = NULL;
    char url[2048];
    if (cli_stream_operands(x, "publish", argc, argv, 1, url, sizeof url, &data))
        return RN_EXIT_USAGE;
    if (data && strcmp(data, "-") == 0) {
        data = NULL;
        file = "-";
    }
    if (data && file)
        return cli_usage_error("publish", "give DATA or --file, not both");
    if (!data && !file)
        return cli_usage_error("publish", "give the snapshot as DATA, --file F or - (stdin)");
    runnel_answer a;
    runnel_result r = runnel_head(x->client, url, inc, &a);
    if (r != RUNNEL_OK)
        return cli_report(x, "publish", r, &a, 0);
    char tail[RUNNEL_VALUE_MAX], token[32];
    snprintf(tail, sizeof tail, "%s", a.next_offset);
    snprintf(token, sizeof token, "%s", inc ? inc : a.incarnation);
    uint64_t limit = a.max_request_bytes > 0 ? (uint64_t)a.max_request_bytes : 32u << 20;
    if (!offset)
        offset = tail;
    if (!type)
        type = "application/octet-stream";

    file_source src = {.fd = -1};
    cli_progress_init(&src.progress, "publish");
    runnel_body body = {0};
    char *held = NULL;
    uint64_t size = 0;
    if (data) {
        body = (runnel_body){.data = data, .len = strlen(data)};
        size = body.len;
    } else if (strcmp(file, "-") == 0) { /* stdin: held in memory, at most one request */
        size_t n;
        int rr = cli_read_file("-", parts ? 1ull << 40 : limit, &held, &n);
        if (rr) {
            fprintf(stderr, "runnel publish: %s\n",
                    rr == -2 ? "stdin holds more than one request may: use --file, or --parts"
                             : "cannot read stdin");
            return rr == -2 ? RN_EXIT_USAGE : RN_EXIT_LOCAL;
        }
        body = (runnel_body){.data = held, .len = n};
        size = n;
    } else {
        struct stat sb;
        if ((src.fd = open(file, O_RDONLY | O_CLOEXEC)) < 0 || fstat(src.fd, &sb)) {
            fprintf(stderr, "runnel publish: cannot open %s: %s\n", file, strerror(errno));
            return RN_EXIT_LOCAL;
        }
        size = (uint64_t)sb.st_size;
        body =
            (runnel_body){.len = size, .source = read_source, .rewind = rewind_source, .arg = &src};
    }
    body.progress = src.fd >= 0 ? on_progress : NULL;
    if (parts || size > limit) {
        r = runnel_snapshot_publish_parts(x->client, url, offset, type, &body, part_bytes,
                                          (long)retry_for, token[0] ? token : NULL, &a);
    } else {
        /* a publish is keyed by its offset, type and body (ext §5.1): an
         * unknown outcome is repeated */
        struct timespec start;
        clock_gettime(CLOCK_MONOTONIC, &start);
        for (int attempt = 0;; attempt++) {
            r = runnel_snapshot_publish(x->client, url, offset, type, &body,
                                        token[0] ? token : NULL, &a);
            struct timespec now;
            clock_gettime(CLOCK_MONOTONIC, &now);
            uint64_t spent = (uint64_t)(now.tv_sec - start.tv_sec) * 1000;
            if (a.outcome != RUNNEL_UNKNOWN || spent >= retry_for ||
                (body.source && rewind_source(&src)))
                break;
            struct timespec pause = {attempt < 3 ? 0 : 1, attempt < 3 ? 300000000L : 0};
            nanosleep(&pause, NULL);
        }
    }
    cli_progress_end(&src.progress);
    if (src.fd >= 0)
        close(src.fd);
    free(held);
    return cli_report(x, "publish", r, &a, 1);
}

typedef struct {
    cli_ctx *x;
    const char *dir;
    FILE *out;
    json_t *parts;
    uint64_t bytes, total;
    cli_progress progress;
    int failed;
} boot_sink;

static int part_begin(void *arg, unsigned index, const char *content_type) {
    boot_sink *b = arg;
    b->bytes = 0;
    if (b->dir) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%04u%s", b->dir, index, index ? ".update" : ".snapshot");
        if (!(b->out = fopen(path, "wb"))) {
            b->failed = 1;
            return 1;
        }
    } else {
        b->out = b->x->json ? NULL : stdout;
    }
    json_array_append_new(
        b->parts, json_pack("{s:i,s:s}", "index", (int)index, "content_type", content_type));
    return 0;
}

static int part_data(void *arg, unsigned index, const void *data, size_t len) {
    boot_sink *b = arg;
    b->bytes += len;
    b->total += len;
    cli_progress_update(&b->progress, b->total, 0);
    if (b->out && fwrite(data, 1, len, b->out) != len) {
        b->failed = 1;
        return 1;
    }
    return 0;
}

static int part_end(void *arg, unsigned index) {
    boot_sink *b = arg;
    json_t *p = json_array_get(b->parts, index);
    json_object_set_new(p, "bytes", json_integer((json_int_t)b->bytes));
    if (b->out && b->out != stdout && fclose(b->out)) {
        b->out = NULL;
        b->failed = 1;
        return 1;
    }
    b->out = NULL;
    return 0;
}

int cli_bootstrap(cli_ctx *x, int argc, char **argv) {
    static const struct option opts[] = {
        {"out", required_argument, NULL, 'O'},
        {"if-incarnation", required_argument, NULL, 'I'},
        {0},
    };
    boot_sink b = {.x = x};
    const char *inc = NULL;
    int c;
    while ((c = cli_getopt(x, argc, argv, "", opts)) != -1) {
        if (c == 'O')
            b.dir = cli_optarg();
        else if (c == 'I')
            inc = cli_optarg();
        else
            return RN_EXIT_USAGE;
    }
    char url[2048];
    if (cli_stream_operands(x, "bootstrap", argc, argv, 0, url, sizeof url, NULL))
        return RN_EXIT_USAGE;
    if (b.dir && mkdir(b.dir, 0755) && errno != EEXIST) {
        fprintf(stderr, "runnel bootstrap: cannot make %s: %s\n", b.dir, strerror(errno));
        return RN_EXIT_LOCAL;
    }
    cli_progress_init(&b.progress, "bootstrap");
    b.parts = json_array();
    runnel_bootstrap_handler h = {part_begin, part_data, part_end, &b};
    runnel_answer a;
    runnel_result r = runnel_bootstrap(x->client, url, inc, &h, &a);
    cli_progress_end(&b.progress);
    if (b.out && b.out != stdout)
        fclose(b.out);
    fflush(stdout);
    int code;
    if (b.failed) {
        fprintf(stderr, "runnel bootstrap: writing a part failed\n");
        code = RN_EXIT_LOCAL;
    } else if (r != RUNNEL_OK) {
        code = cli_report(x, "bootstrap", r, &a, 0);
    } else {
        code = RN_EXIT_OK;
        if (x->json || !x->quiet) {
            json_t *o =
                json_pack("{s:s,s:s,s:b,s:O}", "snapshot_offset", a.snapshot_offset, "next_offset",
                          a.next_offset, "up_to_date", a.up_to_date, "parts", b.parts);
            if (a.incarnation[0])
                json_object_set_new(o, "incarnation", json_string(a.incarnation));
            char *s = json_dumps(o, JSON_COMPACT);
            fprintf(x->json ? stdout : stderr, "%s%s\n", x->json ? "" : "bootstrap: ", s);
            free(s);
            json_decref(o);
        }
    }
    json_decref(b.parts);
    return code;
}
