/*
 * cmd_append.c — runnel append: one body (DATA or --file), or an input
 * (stdin, a file) cut into writes by input.c. With --producer ID the writes
 * go through librunnel's producer: exactly once, pipelined, and resumable
 * after a crash from a state file (rerun the same command on the same
 * input: what was written is skipped, what may not have been is repeated
 * under its recorded key, the rest follows). Without it each write is a
 * plain append, and the first one whose outcome is unknown stops the run.
 */
#include "client/cli/cli.h"
#include "client/cli/input.h"
#include "util/blake3.h"
#include "util/text.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct {
    const char *type, *file, *seq, *incarnation, *producer, *state;
    int close, no_incarnation;
    uint64_t epoch, window, batch_bytes;
    long retry_for_ms;
} append_opts;

typedef struct {
    uint64_t writes, repeats, bytes;
    char next_offset[RUNNEL_VALUE_MAX];
    cli_progress progress;
    uint64_t total; /* input size when known */
    uint64_t base;  /* the tag where this input starts */
} append_tally;

static int parse_count(const char *name, uint64_t max, uint64_t *out) {
    const char *v = cli_optarg();
    if (rn_parse_strict_u64(v, strlen(v), max, out))
        return cli_usage_error("append", "%s takes a decimal number up to %llu", name,
                               (unsigned long long)max);
    return 0;
}

/* Lines for text and JSON streams, bytes for the rest. */
static cli_input_kind kind_of(const char *type) {
    size_t n = strcspn(type, "; ");
    if (rn_iprefix(type, n, "text/"))
        return CLI_TEXT_LINES;
    if (n == 16 && rn_iprefix(type, n, "application/json"))
        return CLI_JSON_LINES;
    return CLI_BYTES;
}

/* The default state file: $XDG_STATE_HOME/runnel/producers/ (or
 * ~/.local/state/runnel/producers/), named after the id and a digest of
 * the stream URL and id. */
static int default_state_path(const char *url, const char *id, char *out, size_t cap) {
    const char *xdg = getenv("XDG_STATE_HOME"), *home = getenv("HOME");
    char path[4096];
    int w;
    if (xdg && xdg[0] == '/')
        w = snprintf(path, sizeof path, "%s/runnel/producers", xdg);
    else if (home && home[0])
        w = snprintf(path, sizeof path, "%s/.local/state/runnel/producers", home);
    else
        return -1;
    if (w < 0 || (size_t)w >= sizeof path - 100)
        return -1;
    /* mkdir -p of the last levels (the base exists or is made too) */
    for (char *p = path + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = 0;
        mkdir(path, 0700);
        *p = '/';
    }
    if (mkdir(path, 0700) && errno != EEXIST)
        return -1;
    rn_buf key = {0};
    rn_buf_append_str(&key, url);
    rn_buf_append_byte(&key, '\n');
    rn_buf_append_str(&key, id);
    uint8_t d[32];
    char hex[65];
    rn_blake3_hash(key.data, key.len, d);
    rn_blake3_hex(d, hex);
    rn_buf_free(&key);
    char safe[41];
    size_t n = 0;
    for (const char *s = id; *s && n < sizeof safe - 1; s++)
        safe[n++] = (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
                            (*s >= '0' && *s <= '9') || *s == '-' || *s == '_' || *s == '.'
                        ? *s
                        : '_';
    safe[n] = 0;
    w = snprintf(out, cap, "%s/%s-%.16s.state", path, safe, hex);
    return w < 0 || (size_t)w >= cap ? -1 : 0;
}

static void on_receipt(void *arg, const runnel_receipt *r) {
    append_tally *t = arg;
    t->writes++;
    t->repeats += (uint64_t)r->repeat;
    if (r->next_offset[0])
        snprintf(t->next_offset, sizeof t->next_offset, "%s", r->next_offset);
    cli_progress_update(&t->progress, r->tag - t->base, t->total);
}

static void summary(cli_ctx *x, const append_tally *t, const char *producer,
                    const runnel_producer_stats *st, const char *state_path) {
    if (x->json) {
        json_t *o = json_object();
        json_object_set_new(o, "outcome", json_string("applied"));
        json_object_set_new(o, "bytes", json_integer((json_int_t)t->bytes));
        json_object_set_new(o, "writes", json_integer((json_int_t)t->writes));
        json_object_set_new(o, "repeats", json_integer((json_int_t)t->repeats));
        if (t->next_offset[0])
            json_object_set_new(o, "next_offset", json_string(t->next_offset));
        if (producer) {
            json_object_set_new(o, "producer",
                                json_pack("{s:s,s:I,s:I}", "id", producer, "epoch",
                                          (json_int_t)st->epoch, "next_seq",
                                          (json_int_t)st->next_seq));
            if (state_path)
                json_object_set_new(o, "state", json_string(state_path));
        }
        char *s = json_dumps(o, JSON_COMPACT);
        printf("%s\n", s);
        free(s);
        json_decref(o);
    } else if (!x->quiet) {
        fprintf(stderr, "append: applied %llu bytes in %llu writes (%llu repeats)",
                (unsigned long long)t->bytes, (unsigned long long)t->writes,
                (unsigned long long)t->repeats);
        if (producer)
            fprintf(stderr, ", producer %s epoch %llu next seq %llu", producer,
                    (unsigned long long)st->epoch, (unsigned long long)st->next_seq);
        fprintf(stderr, "%s%s\n", t->next_offset[0] ? ", next offset " : "", t->next_offset);
    }
}

/* Reports a producer's failure; returns the exit code. */
static int producer_failed(cli_ctx *x, runnel_producer *p, runnel_result r,
                           const char *state_path) {
    char why[400];
    runnel_outcome oc = RUNNEL_REFUSED;
    const runnel_answer *a = runnel_producer_failure(p, NULL, &oc, why, sizeof why);
    if (a && x->json)
        cli_print_answer_json(stdout, a, 1, "why", why, strlen(why));
    fprintf(stderr, "runnel append: %s\n", a ? why : runnel_result_name(r));
    uint64_t note[2];
    runnel_producer_note(p, note);
    fprintf(stderr, "runnel append: the input up to byte %llu holds",
            (unsigned long long)(runnel_producer_acked_tag(p) - note[0]));
    if (state_path)
        fprintf(stderr, "; %s keeps the rest: run the same command on the same input to resume",
                state_path);
    fprintf(stderr, "\n");
    runnel_answer none = {.outcome = oc};
    return cli_exit_code(r, a ? a : &none, 1);
}

static int run_producer(cli_ctx *x, const char *url, const append_opts *o, cli_input *in,
                        append_tally *t) {
    char state_path[4096];
    const char *state = o->state;
    if (!state) {
        if (default_state_path(url, o->producer, state_path, sizeof state_path)) {
            fprintf(stderr, "runnel append: no $XDG_STATE_HOME or $HOME for the state file: "
                            "give --state FILE\n");
            return RN_EXIT_LOCAL;
        }
        state = state_path;
    }
    runnel_producer_options po = {.id = o->producer,
                                  .content_type = o->type,
                                  .epoch = o->epoch,
                                  .state_path = state,
                                  .window = (unsigned)o->window,
                                  .use_incarnation = !o->no_incarnation,
                                  .retry_for_ms = o->retry_for_ms,
                                  .on_receipt = on_receipt,
                                  .arg = t};
    runnel_producer *p;
    char err[512];
    runnel_result r = runnel_producer_open(x->client, url, &po, &p, err, sizeof err);
    if (r != RUNNEL_OK) {
        fprintf(stderr, "runnel append: %s\n", err);
        runnel_answer none = {.outcome = RUNNEL_REFUSED};
        return cli_exit_code(r, &none, 1);
    }
    /* the note keeps where the current input starts (in tags) and whether
     * it was written to its end: a finished input makes the next run a new
     * input; an unfinished one is resumed (the same input, again) */
    uint64_t note[2];
    runnel_producer_note(p, note);
    if (note[1]) {
        note[0] = runnel_producer_acked_tag(p);
        note[1] = 0;
        r = runnel_producer_set_note(p, note);
    }
    const uint64_t base = note[0];
    t->base = base;
    rn_buf body = {0};
    char ierr[300];
    int got = 0;
    uint64_t from, until;
    if (r == RUNNEL_OK && cli_input_skip(in, runnel_producer_acked_tag(p) - base)) {
        snprintf(ierr, sizeof ierr,
                 "the input is shorter than what the producer state says was written (%llu "
                 "bytes)",
                 (unsigned long long)(runnel_producer_acked_tag(p) - base));
        got = -1;
    }
    /* writes the state recorded but not as held: the same bytes again */
    while (got >= 0 && r == RUNNEL_OK && runnel_producer_replay_next(p, &from, &until)) {
        got = cli_input_batch(in, &body, until - base, ierr, sizeof ierr);
        if (got == 1) {
            r = runnel_producer_send(p, body.data, body.len, base + in->pos);
            t->bytes += body.len;
        }
    }
    while (got >= 0 && r == RUNNEL_OK) {
        if (!cli_input_ready(in) && (r = runnel_producer_flush(p)) != RUNNEL_OK)
            break; /* idle input: everything sent is acknowledged first */
        got = cli_input_batch(in, &body, 0, ierr, sizeof ierr);
        if (got <= 0)
            break;
        r = runnel_producer_send(p, body.data, body.len, base + in->pos);
        t->bytes += body.len;
    }
    if (got >= 0 && r == RUNNEL_OK && o->close)
        r = runnel_producer_close_stream(p, base + in->pos);
    if (got >= 0 && r == RUNNEL_OK)
        r = runnel_producer_flush(p);
    if (got >= 0 && r == RUNNEL_OK) { /* the input is written to its end */
        note[1] = 1;
        r = runnel_producer_set_note(p, note);
    }
    cli_progress_end(&t->progress);
    rn_buf_free(&body);
    int code;
    if (got < 0) {
        runnel_producer_flush(p);
        fprintf(stderr, "runnel append: %s\n", ierr);
        code = RN_EXIT_LOCAL;
    } else if (r != RUNNEL_OK) {
        code = producer_failed(x, p, r, state);
    } else {
        runnel_producer_stats st;
        runnel_producer_get_stats(p, &st);
        t->repeats = st.repeats;
        summary(x, t, o->producer, &st, state);
        code = RN_EXIT_OK;
    }
    runnel_producer_free(p);
    return code;
}

/* Plain appends, one per batch; stops at the first that does not apply. */
static int run_plain(cli_ctx *x, const char *url, const append_opts *o, const char *type,
                     cli_input *in, append_tally *t) {
    rn_buf body = {0};
    char ierr[300];
    int code = RN_EXIT_OK;
    for (;;) {
        uint64_t before = in->pos;
        int got = cli_input_batch(in, &body, 0, ierr, sizeof ierr);
        if (got < 0) {
            fprintf(stderr, "runnel append: %s\n", ierr);
            code = RN_EXIT_LOCAL;
            break;
        }
        int last = got == 0 || (in->eof && in->start == in->end);
        if (got == 0 && !(o->close && t->writes == 0 && before == 0))
            break;
        runnel_append_options ao = {.content_type = type,
                                    .closed = o->close && last,
                                    .stream_seq = o->seq,
                                    .incarnation = o->incarnation};
        runnel_body b = {.data = body.data, .len = got ? body.len : 0};
        runnel_answer a;
        runnel_result r = runnel_append(x->client, url, &b, &ao, &a);
        if (r != RUNNEL_OK) {
            code = cli_report(x, "append", r, &a, 1);
            fprintf(stderr,
                    "runnel append: input bytes %llu to %llu: %s; the input before "
                    "them applied\n",
                    (unsigned long long)before, (unsigned long long)in->pos,
                    runnel_outcome_name(a.outcome));
            break;
        }
        t->writes++;
        t->bytes += b.len;
        snprintf(t->next_offset, sizeof t->next_offset, "%s", a.next_offset);
        cli_progress_update(&t->progress, in->pos, t->total);
        if (last)
            break;
    }
    cli_progress_end(&t->progress);
    rn_buf_free(&body);
    if (code == RN_EXIT_OK)
        summary(x, t, NULL, NULL, NULL);
    return code;
}

static void body_progress(void *arg, uint64_t done, uint64_t total) {
    cli_progress_update(arg, done, total);
}

/* The stream's content type, from --type or a HEAD. */
static int learn_type(cli_ctx *x, const char *url, const char **type, char *buf, size_t cap) {
    if (*type)
        return RN_EXIT_OK;
    runnel_answer a;
    runnel_result r = runnel_head(x->client, url, NULL, &a);
    if (r != RUNNEL_OK)
        return cli_report(x, "append", r, &a, 0);
    snprintf(buf, cap, "%s", a.content_type[0] ? a.content_type : "application/octet-stream");
    *type = buf;
    return RN_EXIT_OK;
}

int cli_append(cli_ctx *x, int argc, char **argv) {
    static const struct option opts[] = {
        {"type", required_argument, NULL, 't'},
        {"file", required_argument, NULL, 'f'},
        {"close", no_argument, NULL, 'c'},
        {"seq", required_argument, NULL, 's'},
        {"if-incarnation", required_argument, NULL, 'I'},
        {"producer", required_argument, NULL, 'p'},
        {"epoch", required_argument, NULL, 'e'},
        {"state", required_argument, NULL, 'S'},
        {"window", required_argument, NULL, 'w'},
        {"batch-bytes", required_argument, NULL, 'b'},
        {"retry-for-ms", required_argument, NULL, 'r'},
        {"no-incarnation", no_argument, NULL, 'N'},
        {0},
    };
    append_opts o = {.batch_bytes = 1u << 20};
    uint64_t retry = 0;
    int c;
    while ((c = cli_getopt(x, argc, argv, "t:f:p:", opts)) != -1) {
        const char *v = cli_optarg();
        switch (c) {
        case 't':
            o.type = v;
            break;
        case 'f':
            o.file = v;
            break;
        case 'c':
            o.close = 1;
            break;
        case 's':
            o.seq = v;
            break;
        case 'I':
            o.incarnation = v;
            break;
        case 'p':
            o.producer = v;
            break;
        case 'S':
            o.state = v;
            break;
        case 'N':
            o.no_incarnation = 1;
            break;
        case 'e':
            if (parse_count("--epoch", (1ull << 53) - 1, &o.epoch))
                return RN_EXIT_USAGE;
            break;
        case 'w':
            if (parse_count("--window", 64, &o.window) || !o.window)
                return o.window ? RN_EXIT_USAGE : cli_usage_error("append", "--window is 1 to 64");
            break;
        case 'b':
            if (parse_count("--batch-bytes", 32u << 20, &o.batch_bytes) || !o.batch_bytes)
                return RN_EXIT_USAGE;
            break;
        case 'r':
            if (parse_count("--retry-for-ms", 86400000, &retry))
                return RN_EXIT_USAGE;
            o.retry_for_ms = (long)retry;
            break;
        default:
            return RN_EXIT_USAGE;
        }
    }
    const char *data = NULL;
    char url[2048];
    if (cli_stream_operands(x, "append", argc, argv, 1, url, sizeof url, &data))
        return RN_EXIT_USAGE;
    if (data && strcmp(data, "-") == 0)
        data = NULL; /* stdin */
    if (data && o.file)
        return cli_usage_error("append", "give DATA or --file, not both");
    if (o.producer && (o.seq || o.incarnation))
        return cli_usage_error("append", "--seq and --if-incarnation are for plain appends");
    if (o.seq && !data && !o.file)
        return cli_usage_error("append", "--seq is for one body (DATA or --file), not stdin");

    append_tally t = {0};
    cli_progress_init(&t.progress, "append");
    if (!o.producer && (data || o.file)) { /* one body, one append */
        char *buf = NULL;
        size_t len = data ? strlen(data) : 0;
        if (o.file) {
            int r = cli_read_file(o.file, 32u << 20, &buf, &len);
            if (r) {
                fprintf(stderr, "runnel append: %s %s\n", o.file,
                        r == -2 ? "is larger than a request may be (32 MiB): use --producer, "
                                  "which cuts it into writes"
                                : "cannot be read");
                return r == -2 ? RN_EXIT_USAGE : RN_EXIT_LOCAL;
            }
        }
        char type_buf[128];
        int code = learn_type(x, url, &o.type, type_buf, sizeof type_buf);
        if (code != RN_EXIT_OK) {
            free(buf);
            return code;
        }
        runnel_append_options ao = {.content_type = o.type,
                                    .closed = o.close,
                                    .stream_seq = o.seq,
                                    .incarnation = o.incarnation};
        runnel_body b = {
            .data = buf ? buf : data, .len = len, .progress = body_progress, .arg = &t.progress};
        runnel_answer a;
        runnel_result r = runnel_append(x->client, url, &b, &ao, &a);
        cli_progress_end(&t.progress);
        free(buf);
        return cli_report(x, "append", r, &a, 1);
    }

    char type_buf[128];
    int code = learn_type(x, url, &o.type, type_buf, sizeof type_buf);
    if (code != RN_EXIT_OK)
        return code;
    int fd = 0;
    if (o.file && (fd = open(o.file, O_RDONLY | O_CLOEXEC)) < 0) {
        fprintf(stderr, "runnel append: cannot open %s: %s\n", o.file, strerror(errno));
        return RN_EXIT_LOCAL;
    }
    struct stat sb;
    if (!data && fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode))
        t.total = (uint64_t)sb.st_size;
    /* no write larger than the server's Ursula-Max-Request-Bytes
     * (extensions §10): a HEAD learns it (the type's HEAD did, unless
     * --type was given); a failed one leaves the protocol's limit */
    if (o.type != type_buf) { /* --type was given: no HEAD yet */
        runnel_answer h;
        (void)runnel_head(x->client, url, NULL, &h);
    }
    uint64_t limit = (uint64_t)runnel_client_max_request_bytes(x->client);
    if (o.batch_bytes > limit)
        o.batch_bytes = limit;
    cli_input in;
    cli_input_init(&in, data ? -1 : fd, data, data ? strlen(data) : 0, kind_of(o.type),
                   (size_t)o.batch_bytes);
    code = o.producer ? run_producer(x, url, &o, &in, &t) : run_plain(x, url, &o, o.type, &in, &t);
    cli_input_free(&in);
    if (o.file)
        close(fd);
    return code;
}
