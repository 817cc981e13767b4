/*
 * cli.h — the client subcommands of the runnel command (everything but
 * `runnel serve`), built on librunnel: what the subcommand files share —
 * the common options, stream resolution, answer output (human or JSON),
 * exit codes, progress on a terminal, and the entry point main.c calls.
 */
#ifndef RN_CLI_H
#define RN_CLI_H

#include "runnel/client.h"

#include <stdint.h>
#include <stdio.h>

/* Exit codes: they tell applied, refused and unknown apart. */
enum {
    RN_EXIT_OK = 0,          /* applied (or a repeat), or the read succeeded */
    RN_EXIT_REFUSED = 1,     /* refused: nothing applied (a read: the server said no) */
    RN_EXIT_USAGE = 2,       /* bad arguments: nothing was sent */
    RN_EXIT_UNKNOWN = 3,     /* a write's outcome is unknown: it may have applied */
    RN_EXIT_UNREACHABLE = 4, /* a read got no answer (connection failed) */
    RN_EXIT_LOCAL = 5,       /* a local file or the producer state file failed */
    RN_EXIT_CHANGED = 6,     /* tail: the stream was deleted or is another incarnation */
};

/* Options every subcommand takes (--cluster-aware: the client's mode of
 * that name, runnel/client.h). */
typedef struct {
    const char *url;    /* --url, else RUNNEL_URL, else http://127.0.0.1:4437 */
    const char *token;  /* --token, else RUNNEL_TOKEN: a gateway's credential */
    const char *cacert; /* --cacert, else RUNNEL_CACERT, else NULL (the system's CAs) */
    int json;           /* --json: one JSON document (or one per line) on stdout */
    int bucket;         /* --bucket: names are bucket/stream on the bucket surface */
    int quiet;          /* -q: no human summary on stderr */
    int cluster_aware;  /* --cluster-aware: learn groups' leaders from a cluster's redirects */
    runnel_client *client;
} cli_ctx;

/* The entry point for `runnel <subcommand> ...` other than serve. */
int rn_cli_main(int argc, char **argv);
/* The subcommands' usage lines (for `runnel help`). */
void rn_cli_usage(FILE *out);

/* Subcommands: argv[0] is the subcommand's name; options are parsed by
 * each with cli_getopt. They return an exit code. */
int cli_create(cli_ctx *x, int argc, char **argv);
int cli_append(cli_ctx *x, int argc, char **argv);
int cli_read(cli_ctx *x, int argc, char **argv);
int cli_tail(cli_ctx *x, int argc, char **argv);
int cli_head(cli_ctx *x, int argc, char **argv);
int cli_close(cli_ctx *x, int argc, char **argv);
int cli_rm(cli_ctx *x, int argc, char **argv);
int cli_publish(cli_ctx *x, int argc, char **argv);
int cli_bootstrap(cli_ctx *x, int argc, char **argv);
/* The operator's commands (cmd_admin.c): listings, one bucket or stream,
 * usage, the bucket purge. */
int cli_ls(cli_ctx *x, int argc, char **argv);
int cli_stat(cli_ctx *x, int argc, char **argv);
int cli_usage(cli_ctx *x, int argc, char **argv);
int cli_purge(cli_ctx *x, int argc, char **argv);
/* The cluster's operator routes (cmd_cluster.c). */
int cli_cluster(cli_ctx *x, int argc, char **argv);

/* Option parsing shared by the subcommands: the common options (--url,
 * --cacert, --json, --bucket, -q) are handled here; `longopts` lists the
 * subcommand's own (getopt_long form, terminated by a zero entry). Returns
 * the option's value (as getopt_long), -1 at the end, or '?' after
 * printing an error. */
struct option;
int cli_getopt(cli_ctx *x, int argc, char **argv, const char *shortopts,
               const struct option *longopts);
/* The current option's argument. */
const char *cli_optarg(void);
/* The index in argv of the first operand, after cli_getopt returned -1. */
int cli_optind(void);

/* Prints "runnel <cmd>: <msg>" to stderr and returns RN_EXIT_USAGE. */
int cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Creates x->client from x->url and x->cacert (RN_EXIT_USAGE on a bad URL
 * or an unreadable CA file). */
int cli_connect(cli_ctx *x);
/* The same with the admin credential as the bearer token: admin_token
 * (--admin-token), else RUNNEL_ADMIN_TOKEN, else the common --token
 * (cmd_admin.c). */
int cli_connect_admin(cli_ctx *x, const char *admin_token);

/* Resolves a stream argument to a URL: a full http(s) URL or a path
 * ("/v1/stream/a", "/bucket/stream") is kept; a name is put on the v1
 * surface, or on the bucket surface with --bucket. Makes x->client first
 * (after the options, which may name the URL). Returns 0; -1 for a name
 * the surface refuses; -2 for a bad server URL (already reported). */
int cli_stream_url(cli_ctx *x, const char *arg, char *out, size_t cap);

/* After cli_getopt returned -1: the STREAM operand, resolved into url, and
 * with data_ok an optional DATA operand (NULL when absent; "-" is kept).
 * Returns 0, or RN_EXIT_USAGE after reporting what is wrong. */
int cli_stream_operands(cli_ctx *x, const char *cmd, int argc, char **argv, int data_ok, char *url,
                        size_t cap, const char **data);

/* Reports a call: on success a human line on stderr (unless -q) or the
 * answer as JSON on stdout; on failure a line on stderr naming the status,
 * code and message (and the JSON on stdout with --json). `what` names the
 * call ("create"). Returns the exit code for r and the answer's outcome. */
int cli_report(cli_ctx *x, const char *what, runnel_result r, const runnel_answer *a, int is_write);

/* The exit code of a call's result. */
int cli_exit_code(runnel_result r, const runnel_answer *a, int is_write);

/* Prints the answer as one JSON object (status, outcome, error, and every
 * typed header it carried) to out, followed by a newline; extra_key, when
 * not NULL, adds a string member (UTF-8, extra_len bytes). */
void cli_print_answer_json(FILE *out, const runnel_answer *a, int is_write, const char *extra_key,
                           const char *extra_value, size_t extra_len);

/* Progress on stderr when it is a terminal: a line rewritten at most ten
 * times a second. done/total in bytes (total 0: unknown). */
typedef struct {
    const char *label;
    int enabled;
    int64_t last_ms;
    int shown;
} cli_progress;
void cli_progress_init(cli_progress *p, const char *label);
void cli_progress_update(cli_progress *p, uint64_t done, uint64_t total);
void cli_progress_end(cli_progress *p);

/* Reads a whole file ("-" is stdin) into memory, at most max bytes.
 * Returns 0, -1 with errno, or -2 when it is larger than max. */
int cli_read_file(const char *path, uint64_t max, char **data, size_t *len);

#endif
