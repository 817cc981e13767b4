/*
 * cmd_tail.c — runnel tail: the stream's bytes on stdout as they come (by
 * SSE, or long-poll with --long-poll), from -1 or --offset; with -f it
 * waits for more and survives server restarts (librunnel reconnects from
 * the last offset it delivered). A deleted or recreated stream ends the
 * tail with exit code 6 and a message: offsets of one incarnation mean
 * nothing in another. An offset the stream retained away (410) ends it with
 * exit code 1 and the commands that go on: bootstrap, then tail from the
 * bootstrap's next offset (extensions §3).
 */
#include "client/cli/cli.h"
#include "util/buf.h"
#include "util/text.h"

#include <getopt.h>
#include <jansson.h>
#include <string.h>

typedef struct {
    cli_ctx *x;
    const char *arg; /* the STREAM operand, as given */
    int failed_write;
    int reached;  /* the stream answered at least once with data or its tail */
    int retained; /* stopped at an offset the stream retained away */
} tail_out;

static int on_data(void *arg, const void *data, size_t len, const char *next_offset) {
    tail_out *t = arg;
    t->reached = 1;
    if (t->x->json) {
        json_t *o = json_object();
        json_object_set_new(o, "next_offset", json_string(next_offset));
        if (rn_utf8_valid(data, len)) {
            json_object_set_new(o, "data", json_stringn(data, len));
        } else {
            rn_buf b = {0};
            rn_base64_append(&b, data, len);
            json_object_set_new(o, "data_base64", json_stringn((const char *)b.data, b.len));
            rn_buf_free(&b);
        }
        char *s = json_dumps(o, JSON_COMPACT);
        printf("%s\n", s);
        free(s);
        json_decref(o);
    } else if (fwrite(data, 1, len, stdout) != len) {
        t->failed_write = 1;
        return 1;
    }
    if (fflush(stdout)) {
        t->failed_write = 1;
        return 1;
    }
    return 0;
}

static int on_event(void *arg, runnel_tail_event ev, const char *next_offset,
                    const runnel_answer *a) {
    tail_out *t = arg;
    const char *what = NULL;
    switch (ev) {
    case RUNNEL_TAIL_RECONNECTING:
        if (!t->x->quiet)
            fprintf(stderr, "runnel tail: %s; reconnecting from %s\n",
                    a->status ? "the answer ended" : "connection lost", next_offset);
        return 0;
    case RUNNEL_TAIL_INCARNATION:
        fprintf(stderr,
                "runnel tail: the stream is another incarnation now%s%s (deleted and created "
                "again, or its history rewritten): offsets from before do not apply; stopping "
                "at %s\n",
                a->incarnation[0] ? ": " : "", a->incarnation, next_offset);
        what = "incarnation";
        break;
    case RUNNEL_TAIL_GONE:
        if (!t->reached)
            return 0; /* it never existed: reported as a refused read */
        fprintf(stderr, "runnel tail: the stream is gone (%d %s); stopping at %s\n", a->status,
                a->error_code, next_offset);
        what = "gone";
        break;
    case RUNNEL_TAIL_RETAINED:
        fprintf(stderr,
                "runnel tail: offset %s is below the stream's retained offset %s (410): the "
                "history before it is folded into the stream's snapshot. Fetch the snapshot and "
                "every later message with `runnel --bucket bootstrap %s` (the bucket form of the "
                "name), then go on with `runnel tail -f %s --offset NEXT`, NEXT being the "
                "bootstrap's next offset\n",
                next_offset, a->retained_offset[0] ? a->retained_offset : "(unknown)", t->arg,
                t->arg);
        what = "retained";
        t->retained = 1;
        break;
    case RUNNEL_TAIL_CLOSED:
        what = "closed";
        break;
    case RUNNEL_TAIL_UP_TO_DATE:
        t->reached = 1;
        return 0;
    }
    if (t->x->json && what) {
        printf("{\"event\":\"%s\",\"next_offset\":\"%s\"%s%s%s}\n", what, next_offset,
               a->incarnation[0] ? ",\"incarnation\":\"" : "", a->incarnation,
               a->incarnation[0] ? "\"" : "");
        fflush(stdout);
    }
    return 0;
}

int cli_tail(cli_ctx *x, int argc, char **argv) {
    static const struct option opts[] = {
        {"follow", no_argument, NULL, 'f'},
        {"offset", required_argument, NULL, 'o'},
        {"long-poll", no_argument, NULL, 'L'},
        {"timeout-ms", required_argument, NULL, 'T'},
        {"if-incarnation", required_argument, NULL, 'I'},
        {"reconnect-for-ms", required_argument, NULL, 'R'},
        {0},
    };
    tail_out out = {.x = x};
    runnel_tail_options o = {
        .mode = RUNNEL_TAIL_SSE, .on_data = on_data, .on_event = on_event, .arg = &out};
    int c;
    uint64_t n;
    while ((c = cli_getopt(x, argc, argv, "fo:", opts)) != -1) {
        const char *v = cli_optarg();
        switch (c) {
        case 'f':
            o.follow = 1;
            break;
        case 'o':
            o.offset = v;
            break;
        case 'L':
            o.mode = RUNNEL_TAIL_LONG_POLL;
            break;
        case 'I':
            o.incarnation = v;
            break;
        case 'T':
        case 'R':
            if (rn_parse_strict_u64(v, strlen(v), 86400000, &n))
                return cli_usage_error("tail", "%s takes milliseconds",
                                       c == 'T' ? "--timeout-ms" : "--reconnect-for-ms");
            if (c == 'T')
                o.timeout_ms = (long)n;
            else
                o.reconnect_for_ms = n ? (long)n : -1;
            break;
        default:
            return RN_EXIT_USAGE;
        }
    }
    char url[2048];
    if (cli_stream_operands(x, "tail", argc, argv, 0, url, sizeof url, NULL))
        return RN_EXIT_USAGE;
    out.arg = argv[argc - 1];
    if (o.follow && !o.reconnect_for_ms)
        o.reconnect_for_ms = -1; /* tail -f waits for the server however long it takes */
    char last[RUNNEL_VALUE_MAX];
    runnel_answer a;
    runnel_result r = runnel_tail(x->client, url, &o, last, &a);
    if (out.failed_write)
        return RN_EXIT_OK; /* stdout closed (a pipe's reader went away) */
    if (out.retained)
        return RN_EXIT_REFUSED; /* the stream is there: how to go on was printed */
    if (r == RUNNEL_E_INCARNATION ||
        (r == RUNNEL_E_STATUS && out.reached &&
         (a.status == 404 || strcmp(a.error_code, "STREAM_GONE") == 0)))
        return RN_EXIT_CHANGED;
    if (r == RUNNEL_OK)
        return RN_EXIT_OK;
    return cli_report(x, "tail", r, &a, 0);
}
