/*
 * proc_readers.c — child processes read as stream readers (see
 * proc_readers.h): spawning, reading their stdout into records, reaping.
 */
#include "proc_readers.h"

#include <assert.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <uv.h>

#include "report.h"
#include "run.h"
#include "util/buf.h"

#define READ_CHUNK 65536

typedef struct {
    int index;
    uv_process_t proc;
    uv_pipe_t out;
    int running;     /* the process has not been reaped */
    int out_open;    /* the pipe handle is not closed */
    char *buf;       /* an incomplete record, then room for a read */
    size_t len, cap; /* bytes held in buf, its size */
    uint64_t bytes;
} reader;

static struct {
    reader *r;
    int n;
    size_t record;
    bn_record_fn fn;
    void *arg;
    int stopping;
    void (*done)(void);
} p;

static void check_done(void) {
    for (int i = 0; i < p.n; i++)
        if (p.r[i].running || p.r[i].out_open)
            return;
    if (p.done) {
        void (*done)(void) = p.done;
        p.done = NULL;
        done();
    }
}

static void closed(uv_handle_t *h) {
    reader *r = h->data;
    if (h == (uv_handle_t *)&r->out)
        r->out_open = 0;
    check_done();
}

static void close_out(reader *r) {
    if (!uv_is_closing((uv_handle_t *)&r->out))
        uv_close((uv_handle_t *)&r->out, closed);
}

static void reaped(uv_process_t *proc, int64_t status, int sig) {
    reader *r = proc->data;
    r->running = 0;
    if (!p.stopping && !bn_run_stopping()) {
        bn_report_error("reader process %d exited before the end (status %lld, signal %d)",
                        r->index, (long long)status, sig);
        bn_run_stop();
    }
    uv_close((uv_handle_t *)proc, closed);
}

static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *b) {
    reader *r = h->data;
    *b = uv_buf_init(r->buf + r->len, (unsigned)(r->cap - r->len));
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *b) {
    reader *r = s->data;
    if (nread < 0) {
        if (!p.stopping && !bn_run_stopping()) {
            bn_report_error("reader process %d: stdout %s", r->index,
                            nread == UV_EOF ? "closed before the end" : uv_strerror((int)nread));
            bn_run_stop();
        }
        close_out(r);
        return;
    }
    r->bytes += (uint64_t)nread;
    r->len += (size_t)nread;
    size_t at = 0;
    for (; r->len - at >= p.record && !bn_run_stopping(); at += p.record)
        p.fn(p.arg, r->index, r->buf + at, p.record);
    memmove(r->buf, r->buf + at, r->len - at);
    r->len -= at;
}

/* Kills whatever still runs (the run is stopping, maybe on an error). */
static void kill_all(void) {
    p.stopping = 1;
    for (int i = 0; i < p.n; i++) {
        if (p.r[i].running)
            uv_process_kill(&p.r[i].proc, SIGKILL);
        if (p.r[i].out_open)
            close_out(&p.r[i]);
    }
}

int bn_procs_start(const char *cmd, const char *url, int n, size_t record, bn_record_fn fn,
                   void *arg) {
    assert(n >= 1 && record >= 1 && fn);
    p.r = rn_xcalloc((size_t)n, sizeof *p.r);
    p.record = record;
    p.fn = fn;
    p.arg = arg;
    bn_run_at_stop(kill_all);

    char *words = rn_xmalloc(strlen(cmd) + 1);
    strcpy(words, cmd);
    char *args[64]; /* up to 62 words, the URL, NULL */
    int argc = 0;
    for (char *w = strtok(words, " "); w && argc < 63; w = strtok(NULL, " "))
        args[argc++] = w;
    if (argc == 0 || argc == 63) {
        bn_report_error("reader command: %s", argc ? "more than 62 words" : "empty");
        bn_run_stop();
        free(words);
        return -1;
    }
    args[argc++] = (char *)url;
    args[argc] = NULL;

    int rc = 0;
    for (int i = 0; i < n; i++) {
        reader *r = &p.r[i];
        r->index = i;
        r->cap = record + READ_CHUNK;
        r->buf = rn_xmalloc(r->cap);
        uv_pipe_init(bn_loop, &r->out, 0);
        r->out.data = r;
        r->proc.data = r;
        r->out_open = 1;
        p.n = i + 1;
        uv_stdio_container_t io[3] = {
            {.flags = UV_IGNORE},
            {.flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE, .data.stream = (uv_stream_t *)&r->out},
            {.flags = UV_INHERIT_FD, .data.fd = 2},
        };
        uv_process_options_t o = {
            .exit_cb = reaped, .file = args[0], .args = args, .stdio_count = 3, .stdio = io};
        int e = uv_spawn(bn_loop, &r->proc, &o);
        if (e) {
            bn_report_error("cannot start reader command %s: %s", args[0], uv_strerror(e));
            uv_close((uv_handle_t *)&r->proc, NULL);
            close_out(r);
            bn_run_stop();
            rc = -1;
            break;
        }
        r->running = 1;
        uv_read_start((uv_stream_t *)&r->out, on_alloc, on_read);
    }
    free(words);
    return rc;
}

uint64_t bn_procs_bytes(int i) {
    assert(i >= 0 && i < p.n);
    return p.r[i].bytes;
}

void bn_procs_stop(void (*done)(void)) {
    assert(!p.stopping && done);
    p.stopping = 1;
    p.done = done;
    for (int i = 0; i < p.n; i++)
        if (p.r[i].running)
            uv_process_kill(&p.r[i].proc, SIGTERM);
    check_done();
}

double bn_procs_cpu_s(void) {
    struct rusage u;
    if (getrusage(RUSAGE_CHILDREN, &u) != 0)
        return 0;
    return (double)u.ru_utime.tv_sec + (double)u.ru_utime.tv_usec / 1e6 +
           (double)u.ru_stime.tv_sec + (double)u.ru_stime.tv_usec / 1e6;
}
