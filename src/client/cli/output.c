/*
 * output.c — how the CLI reports: an answer as one JSON object, a human
 * line on stderr, the exit code of a result, and progress on a terminal.
 */
#include "client/cli/cli.h"

#include <jansson.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int cli_exit_code(runnel_result r, const runnel_answer *a, int is_write) {
    switch (r) {
    case RUNNEL_OK:
    case RUNNEL_E_STOPPED:
        return RN_EXIT_OK;
    case RUNNEL_E_USAGE:
        return RN_EXIT_USAGE;
    case RUNNEL_E_IO:
    case RUNNEL_E_STATE:
        return RN_EXIT_LOCAL;
    case RUNNEL_E_UNKNOWN:
        return RN_EXIT_UNKNOWN;
    case RUNNEL_E_REFUSED:
    case RUNNEL_E_INCARNATION:
        return RN_EXIT_REFUSED;
    case RUNNEL_E_TRANSPORT:
        return is_write ? RN_EXIT_UNKNOWN : RN_EXIT_UNREACHABLE;
    case RUNNEL_E_STATUS:
    case RUNNEL_E_PROTOCOL:
        if (is_write)
            return a->outcome == RUNNEL_UNKNOWN ? RN_EXIT_UNKNOWN : RN_EXIT_REFUSED;
        return RN_EXIT_REFUSED;
    }
    return RN_EXIT_REFUSED;
}

static void put_str(json_t *o, const char *key, const char *v) {
    if (v && v[0])
        json_object_set_new(o, key, json_string(v));
}

static void put_int(json_t *o, const char *key, int64_t v) {
    if (v >= 0)
        json_object_set_new(o, key, json_integer(v));
}

static void put_flag(json_t *o, const char *key, int v) {
    if (v)
        json_object_set_new(o, key, json_true());
}

void cli_print_answer_json(FILE *out, const runnel_answer *a, int is_write, const char *extra_key,
                           const char *extra_value, size_t extra_len) {
    json_t *o = json_object();
    json_object_set_new(o, "status", json_integer(a->status));
    if (is_write)
        json_object_set_new(o, "outcome", json_string(runnel_outcome_name(a->outcome)));
    if (!a->status && a->transport_message[0])
        put_str(o, "transport_error", a->transport_message);
    if (a->error_code[0] || a->error_message[0]) {
        json_t *e = json_object();
        put_str(e, "code", a->error_code);
        put_str(e, "message", a->error_message);
        json_object_set_new(o, "error", e);
    }
    put_str(o, "url", a->url);
    put_str(o, "content_type", a->content_type);
    put_str(o, "offset", a->offset);
    put_str(o, "next_offset", a->next_offset);
    put_str(o, "incarnation", a->incarnation);
    put_str(o, "previous_incarnation", a->previous_incarnation);
    put_str(o, "inherited_offset", a->inherited_offset);
    put_flag(o, "closed", a->closed);
    put_flag(o, "up_to_date", a->up_to_date);
    put_str(o, "ttl", a->ttl);
    put_str(o, "expires_at", a->expires_at);
    put_str(o, "retained_offset", a->retained_offset);
    put_str(o, "snapshot_offset", a->snapshot_offset);
    put_str(o, "snapshot_digest", a->snapshot_digest);
    put_str(o, "snapshot_part", a->snapshot_part);
    put_str(o, "last_seq", a->last_seq);
    put_str(o, "producer_outcome", a->producer_outcome);
    put_int(o, "producer_epoch", a->producer_epoch);
    put_int(o, "producer_seq", a->producer_seq);
    put_int(o, "producer_closed_epoch", a->closed_epoch);
    put_int(o, "producer_closed_seq", a->closed_seq);
    put_int(o, "producer_expected_seq", a->expected_seq);
    put_int(o, "retry_after", a->retry_after_s);
    put_int(o, "max_request_bytes", a->max_request_bytes);
    put_int(o, "max_snapshot_bytes", a->max_snapshot_bytes);
    put_str(o, "location", a->location);
    if (extra_key)
        json_object_set_new(o, extra_key, json_stringn(extra_value ? extra_value : "", extra_len));
    char *text = json_dumps(o, JSON_COMPACT);
    fprintf(out, "%s\n", text);
    free(text);
    json_decref(o);
}

/* "404 STREAM_NOT_FOUND: the stream does not exist (...)" */
static void describe(const runnel_answer *a, char *out, size_t cap) {
    if (!a->status) {
        snprintf(out, cap, "no answer from the server (%s)",
                 a->transport_message[0] ? a->transport_message : "connection failed");
        return;
    }
    int n = snprintf(out, cap, "%d", a->status);
    if (!a->error_code[0] && a->status == 404 && n > 0 && (size_t)n < cap)
        n += snprintf(out + n, cap - (size_t)n, " (no such stream)"); /* a HEAD has no body */
    if (a->error_code[0] && n > 0 && (size_t)n < cap)
        n += snprintf(out + n, cap - (size_t)n, " %s", a->error_code);
    if (a->error_message[0] && n > 0 && (size_t)n < cap)
        snprintf(out + n, cap - (size_t)n, ": %s", a->error_message);
}

int cli_report(cli_ctx *x, const char *what, runnel_result r, const runnel_answer *a,
               int is_write) {
    int code = cli_exit_code(r, a, is_write);
    if (x->json)
        cli_print_answer_json(stdout, a, is_write, NULL, NULL, 0);
    char d[600];
    describe(a, d, sizeof d);
    if (code == RN_EXIT_OK) {
        if (!x->quiet && !x->json) {
            fprintf(stderr, "%s: %s%s%s%s%s%s%s\n", what,
                    is_write ? runnel_outcome_name(a->outcome) : "ok", is_write ? " (" : "",
                    is_write ? d : "", is_write ? ")" : "",
                    a->next_offset[0] ? ", next offset " : "", a->next_offset,
                    a->closed ? ", closed" : "");
        }
        return code;
    }
    if (code == RN_EXIT_UNKNOWN)
        fprintf(stderr,
                "runnel %s: outcome unknown (%s): the write may or may not have applied; "
                "repeat it (with a producer key a repeat is safe), or read the stream to find "
                "out\n",
                what, d);
    else if (r == RUNNEL_E_USAGE)
        fprintf(stderr, "runnel %s: %s\n", what,
                a->transport_message[0] ? a->transport_message : "bad argument");
    else
        fprintf(stderr, "runnel %s: %s%s\n", what, is_write ? "refused: " : "", d);
    return code;
}

static int64_t mono_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void cli_progress_init(cli_progress *p, const char *label) {
    memset(p, 0, sizeof *p);
    p->label = label;
    p->enabled = isatty(STDERR_FILENO);
}

void cli_progress_update(cli_progress *p, uint64_t done, uint64_t total) {
    if (!p->enabled || (total && total < (1u << 20)))
        return; /* small transfers need no progress */
    int64_t now = mono_ms();
    if (p->shown && now - p->last_ms < 100 && done != total)
        return;
    p->last_ms = now;
    p->shown = 1;
    if (total)
        fprintf(stderr, "\r%s %5.1f%% (%.1f of %.1f MiB)  ", p->label, 100.0 * done / total,
                done / 1048576.0, total / 1048576.0);
    else
        fprintf(stderr, "\r%s %.1f MiB  ", p->label, done / 1048576.0);
}

void cli_progress_end(cli_progress *p) {
    if (p->shown)
        fprintf(stderr, "\n");
    p->shown = 0;
}
