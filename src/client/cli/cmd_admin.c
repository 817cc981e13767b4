/*
 * cmd_admin.c — the operator's commands on the routes under
 * /__runnel/admin/ (the server's docs/ADMIN.md): runnel ls, stat, usage and
 * purge. They send the admin credential: --admin-token (or
 * RUNNEL_ADMIN_TOKEN), else the common --token (a gateway admin tenant's
 * key). Listings walk every page, holding one page at a time; --json
 * prints each page's answer as it came, one JSON document per line.
 */
#include "client/cli/cli.h"
#include "util/buf.h"

#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define ANSWER_MAX (64u << 20) /* one page's answer, held to parse it */
#define POLL_MS 500

/* ---- calls ---- */

static int collect(void *arg, const void *data, size_t len) {
    rn_buf *b = arg;
    if (b->len + len > ANSWER_MAX)
        return 1;
    rn_buf_append(b, data, len);
    return 0;
}

/* Appends s percent-encoded as one path segment (or a query value). */
static void encode(rn_buf *out, const char *s) {
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
            c == '-' || c == '_' || c == '.' || c == '~')
            rn_buf_append_byte(out, c);
        else
            rn_buf_appendf(out, "%%%02X", c);
    }
}

/* One call; the parsed answer, or NULL after reporting the failure (*code:
 * the exit code, *status the answer's status: 0 without one). */
static json_t *call(cli_ctx *x, const char *cmd, const char *method, rn_buf *path, int *code,
                    int *status) {
    rn_buf_append_byte(path, 0);
    rn_buf body = {0};
    runnel_answer a;
    runnel_result r =
        runnel_admin_call(x->client, method, (const char *)path->data, collect, &body, &a);
    json_t *doc = NULL;
    *status = a.status;
    if (r == RUNNEL_OK)
        doc = json_loadb((const char *)body.data, body.len, 0, NULL);
    rn_buf_free(&body);
    if (doc)
        return doc;
    if (r == RUNNEL_OK)
        fprintf(stderr, "runnel %s: the answer is not JSON\n", cmd);
    else
        *code = cli_report(x, cmd, r, &a, 0);
    if (r == RUNNEL_OK)
        *code = RN_EXIT_REFUSED;
    return NULL;
}

/* The admin credential, then the connection (cli.h). */
int cli_connect_admin(cli_ctx *x, const char *admin_token) {
    if (!admin_token)
        admin_token = getenv("RUNNEL_ADMIN_TOKEN");
    if (admin_token && admin_token[0])
        x->token = admin_token;
    return cli_connect(x);
}

static const struct option ADMIN_OPTS[] = {
    {"admin-token", required_argument, NULL, 'A'}, {"prefix", required_argument, NULL, 'p'},
    {"limit", required_argument, NULL, 'l'},       {"yes", no_argument, NULL, 'y'},
    {"no-wait", no_argument, NULL, 'W'},           {0},
};

typedef struct {
    const char *admin_token, *prefix, *limit;
    int yes, no_wait;
} admin_args;

/* Parses the options of cmd (those it takes: `takes`, letters of
 * ADMIN_OPTS); returns RN_EXIT_OK and the operands from optind on. */
static int parse(cli_ctx *x, int argc, char **argv, const char *cmd, const char *takes,
                 admin_args *o) {
    int c;
    while ((c = cli_getopt(x, argc, argv, "", ADMIN_OPTS)) != -1) {
        if (c == '?' || !strchr(takes, c))
            return c == '?' ? RN_EXIT_USAGE
                            : cli_usage_error(cmd, "this option is not one of %s's", cmd);
        if (c == 'A')
            o->admin_token = cli_optarg();
        else if (c == 'p')
            o->prefix = cli_optarg();
        else if (c == 'l')
            o->limit = cli_optarg();
        else if (c == 'y')
            o->yes = 1;
        else
            o->no_wait = 1;
    }
    return RN_EXIT_OK;
}

static int operands(int argc, char **argv) {
    return argc - optind;
}

/* ---- human output ---- */

static json_int_t num(const json_t *o, const char *k) {
    return json_integer_value(json_object_get(o, k));
}

static const char *str(const json_t *o, const char *k) {
    const char *s = json_string_value(json_object_get(o, k));
    return s ? s : "-";
}

static json_int_t bytes_total(const json_t *bytes) {
    return num(bytes, "hot") + num(bytes, "cold") + num(bytes, "snapshots") +
           num(bytes, "cold_snapshots");
}

static void print_bucket(const json_t *b) {
    const json_t *p = json_object_get(b, "purge");
    printf("%-32s %8lld streams %14lld bytes", str(b, "bucket"), (long long)num(b, "streams"),
           (long long)bytes_total(json_object_get(b, "bytes")));
    if (json_is_object(p))
        printf("  erased %s%s", str(b, "erased_at"),
               json_is_true(json_object_get(p, "done")) ? "" : " (purge under way)");
    printf("\n");
}

static void print_stream(const json_t *s) {
    printf("%-40s %12lld bytes  %s  %s%s\n", str(s, "stream"), (long long)num(s, "bytes"),
           str(s, "tail"), str(s, "content_type"),
           json_is_true(json_object_get(s, "closed")) ? "  closed" : "");
}

static void print_usage(const json_t *b) {
    const json_t *rq = json_object_get(b, "requests");
    json_int_t parts = 0;
    size_t i;
    json_t *g;
    json_array_foreach(json_object_get(b, "staged_parts"), i, g) {
        parts += num(g, "bytes");
    }
    printf("%-32s %14lld bytes %10lld staged  %lld reads %lld writes  %lld in %lld out\n",
           str(b, "bucket"), (long long)bytes_total(json_object_get(b, "bytes")), (long long)parts,
           (long long)num(rq, "reads"), (long long)num(rq, "writes"), (long long)num(b, "bytes_in"),
           (long long)num(b, "bytes_out"));
}

/* Names what the answer lacks (a cluster's unreachable groups). */
static int warn_unreachable(const char *cmd, const json_t *doc) {
    const json_t *g = json_object_get(doc, "unreachable_groups");
    if (!json_array_size(g))
        return 0;
    char *list = json_dumps(g, JSON_COMPACT);
    fprintf(stderr, "runnel %s: groups %s could not be reached: their part is missing\n", cmd,
            list);
    free(list);
    return 1;
}

/* ---- listings ---- */

/* Walks every page of a listing at base (a path with or without a query),
 * printing each entry of `field` with print (or each page, --json). */
static int walk(cli_ctx *x, const char *cmd, const char *base, const char *field,
                void (*print)(const json_t *)) {
    char *cursor = NULL;
    int code = RN_EXIT_OK, partial = 0;
    for (;;) {
        rn_buf path = {0};
        rn_buf_append_str(&path, base);
        if (cursor) {
            rn_buf_append_str(&path, strchr(base, '?') ? "&cursor=" : "?cursor=");
            encode(&path, cursor);
            free(cursor);
            cursor = NULL;
        }
        int status;
        json_t *doc = call(x, cmd, "GET", &path, &code, &status);
        rn_buf_free(&path);
        if (!doc)
            return code;
        partial |= warn_unreachable(cmd, doc);
        if (x->json) {
            json_dumpf(doc, stdout, JSON_COMPACT);
            printf("\n");
        } else {
            size_t i;
            json_t *e;
            json_array_foreach(json_object_get(doc, field), i, e) {
                print(e);
            }
        }
        const char *next = json_string_value(json_object_get(doc, "next_cursor"));
        cursor = next ? strdup(next) : NULL;
        json_decref(doc);
        if (!cursor)
            return partial ? RN_EXIT_UNKNOWN : RN_EXIT_OK;
    }
}

int cli_ls(cli_ctx *x, int argc, char **argv) {
    admin_args o = {0};
    if (parse(x, argc, argv, "ls", "Apl", &o))
        return RN_EXIT_USAGE;
    if (operands(argc, argv) > 1)
        return cli_usage_error("ls", "at most one BUCKET");
    if (o.prefix && operands(argc, argv) == 0)
        return cli_usage_error("ls", "--prefix lists the streams of a BUCKET");
    if (cli_connect_admin(x, o.admin_token))
        return RN_EXIT_USAGE;
    rn_buf base = {0};
    rn_buf_append_str(&base, "/__runnel/admin/buckets");
    const char *bucket = operands(argc, argv) ? argv[optind] : NULL;
    if (bucket) {
        rn_buf_append_byte(&base, '/');
        encode(&base, bucket);
        rn_buf_append_str(&base, "/streams");
    }
    rn_buf_append_str(&base, "?limit=");
    rn_buf_append_str(&base, o.limit ? o.limit : "1000");
    if (o.prefix) {
        rn_buf_append_str(&base, "&prefix=");
        encode(&base, o.prefix);
    }
    rn_buf_append_byte(&base, 0);
    int code = walk(x, "ls", (const char *)base.data, bucket ? "streams" : "buckets",
                    bucket ? print_stream : print_bucket);
    rn_buf_free(&base);
    return code;
}

int cli_usage(cli_ctx *x, int argc, char **argv) {
    admin_args o = {0};
    if (parse(x, argc, argv, "usage", "Al", &o))
        return RN_EXIT_USAGE;
    if (operands(argc, argv) != 0)
        return cli_usage_error("usage", "no operand");
    if (cli_connect_admin(x, o.admin_token))
        return RN_EXIT_USAGE;
    char base[128];
    snprintf(base, sizeof base, "/__runnel/admin/usage?limit=%s", o.limit ? o.limit : "1000");
    return walk(x, "usage", base, "buckets", print_usage);
}

/* ---- one bucket or stream ---- */

/* The route of BUCKET or BUCKET/NAME (the name may hold more "/"). */
static void target_path(rn_buf *path, const char *arg) {
    const char *slash = strchr(arg, '/');
    rn_buf_append_str(path, "/__runnel/admin/buckets/");
    char *bucket = slash ? strndup(arg, (size_t)(slash - arg)) : strdup(arg);
    encode(path, bucket);
    free(bucket);
    if (!slash)
        return;
    rn_buf_append_str(path, "/streams");
    for (const char *seg = slash + 1;;) {
        const char *end = strchr(seg, '/');
        char *part = end ? strndup(seg, (size_t)(end - seg)) : strdup(seg);
        rn_buf_append_byte(path, '/');
        encode(path, part);
        free(part);
        if (!end)
            return;
        seg = end + 1;
    }
}

static void print_object(const json_t *o, int depth) {
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)o, k, v) {
        if (!strcmp(k, "unreachable_groups") || !strcmp(k, "unreachable_nodes"))
            continue;
        if (json_is_object(v)) {
            printf("%*s%s:\n", depth * 2, "", k);
            print_object(v, depth + 1);
        } else {
            char *text = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
            printf("%*s%s: %s\n", depth * 2, "", k, text);
            free(text);
        }
    }
}

int cli_stat(cli_ctx *x, int argc, char **argv) {
    admin_args o = {0};
    if (parse(x, argc, argv, "stat", "A", &o))
        return RN_EXIT_USAGE;
    if (operands(argc, argv) != 1 || !argv[optind][0])
        return cli_usage_error("stat", "one BUCKET or BUCKET/NAME");
    if (cli_connect_admin(x, o.admin_token))
        return RN_EXIT_USAGE;
    rn_buf path = {0};
    target_path(&path, argv[optind]);
    int code = RN_EXIT_OK, status;
    json_t *doc = call(x, "stat", "GET", &path, &code, &status);
    rn_buf_free(&path);
    if (!doc)
        return code;
    int partial = warn_unreachable("stat", doc);
    if (x->json) {
        json_dumpf(doc, stdout, JSON_COMPACT);
        printf("\n");
    } else {
        print_object(doc, 0);
    }
    json_decref(doc);
    return partial ? RN_EXIT_UNKNOWN : RN_EXIT_OK;
}

/* ---- purge ---- */

/* The operator types the bucket's name on the terminal: 1 when it matches. */
static int confirmed(const char *bucket) {
    fprintf(stderr,
            "runnel purge: this removes bucket \"%s\" with every stream, snapshot and staged "
            "part in it, for good, and no stream can be created in it again.\n"
            "Type the bucket's name to purge it: ",
            bucket);
    char line[2048];
    if (!fgets(line, sizeof line, stdin))
        return 0;
    line[strcspn(line, "\r\n")] = 0;
    return strcmp(line, bucket) == 0;
}

int cli_purge(cli_ctx *x, int argc, char **argv) {
    admin_args o = {0};
    if (parse(x, argc, argv, "purge", "AyW", &o))
        return RN_EXIT_USAGE;
    if (operands(argc, argv) != 1 || !argv[optind][0] || strchr(argv[optind], '/'))
        return cli_usage_error("purge", "one BUCKET");
    const char *bucket = argv[optind];
    if (!o.yes && !isatty(STDIN_FILENO))
        return cli_usage_error("purge", "confirm with --yes, or type the name on a terminal");
    if (!o.yes && !confirmed(bucket)) {
        fprintf(stderr, "runnel purge: the name typed is not \"%s\": nothing was purged\n", bucket);
        return RN_EXIT_USAGE;
    }
    if (cli_connect_admin(x, o.admin_token))
        return RN_EXIT_USAGE;
    rn_buf base = {0};
    target_path(&base, bucket);
    rn_buf_append_byte(&base, 0);
    const char *route = (const char *)base.data;
    rn_buf path = {0};
    rn_buf_appendf(&path, "%s/purge", route);
    int code = RN_EXIT_OK, status;
    json_t *doc = call(x, "purge", "POST", &path, &code, &status);
    int posted = status;
    rn_buf_free(&path);
    cli_progress progress;
    cli_progress_init(&progress, "purged");
    json_int_t total = 0;
    while (doc && !json_is_true(json_object_get(json_object_get(doc, "purge"), "done")) &&
           !o.no_wait) {
        json_int_t left = num(json_object_get(doc, "purge"), "streams_left");
        if (left > total)
            total = left;
        cli_progress_update(&progress, (uint64_t)(total - left), (uint64_t)total);
        json_decref(doc);
        struct timespec pause = {0, POLL_MS * 1000000L};
        nanosleep(&pause, NULL);
        rn_buf again = {0};
        rn_buf_append_str(&again, route);
        doc = call(x, "purge", "GET", &again, &code, &status);
        rn_buf_free(&again);
    }
    cli_progress_end(&progress);
    rn_buf_free(&base);
    if (!doc) /* a 503 of the POST: recorded in some groups, not all; repeat it */
        return posted == 503 || (posted >= 200 && posted < 300) ? RN_EXIT_UNKNOWN : code;
    int done = json_is_true(json_object_get(json_object_get(doc, "purge"), "done"));
    if (x->json) {
        json_dumpf(doc, stdout, JSON_COMPACT);
        printf("\n");
    } else if (!x->quiet) {
        fprintf(stderr, "runnel purge: bucket \"%s\" %s\n", bucket,
                done ? "purged: nothing of it is left, and it stays fenced"
                     : "fenced; its streams are being removed");
    }
    json_decref(doc);
    return RN_EXIT_OK;
}
