/*
 * support.c — the client tests' server and raw requests. See support.h.
 */
#define _GNU_SOURCE /* nftw flags */
#include "support.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ftw.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

void ts_sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts))
        ;
}

static void die(const char *what) {
    fprintf(stderr, "test support: %s\n", what);
    abort();
}

static int free_port(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) ||
        getsockname(fd, (struct sockaddr *)&a, &len))
        die("no free port");
    close(fd);
    return ntohs(a.sin_port);
}

static int ready(const ts_server *s) {
    runnel_client *c = ts_client(s);
    runnel_answer a;
    int st = ts_req(c, "GET", "/__runnel/readyz", NULL, NULL, 0, &a);
    runnel_client_free(c);
    return st == 200;
}

static void launch(ts_server *s) {
    const char *bin = getenv("RUNNEL_BIN");
    if (!bin)
        bin = "build/runnel";
    char listen[64], log[320];
    snprintf(listen, sizeof listen, "127.0.0.1:%d", s->port);
    snprintf(log, sizeof log, "%s/server.log", s->dir);
    const char *argv[40] = {bin, "serve", "--listen", listen, "--data-dir", s->data};
    int n = 6;
    for (int i = 0; i < s->nargs; i++)
        argv[n++] = s->args[i];
    argv[n] = NULL;
    s->pid = fork();
    if (s->pid < 0)
        die("fork");
    if (s->pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
        dup2(fd, 1);
        dup2(fd, 2);
        execv(bin, (char *const *)argv);
        _exit(127);
    }
    for (int i = 0; i < 200; i++) {
        if (ready(s))
            return;
        int st;
        if (waitpid(s->pid, &st, WNOHANG) == s->pid)
            die("the server exited while starting (see its server.log)");
        ts_sleep_ms(50);
    }
    die("the server did not become ready within 10 s");
}

ts_server *ts_start(const char *const *extra) {
    ts_server *s = calloc(1, sizeof *s);
    const char *tmp = getenv("TMPDIR");
    snprintf(s->dir, sizeof s->dir, "%s/runnel-client-XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
    if (!mkdtemp(s->dir))
        die("mkdtemp");
    snprintf(s->data, sizeof s->data, "%s/data", s->dir);
    for (; extra && extra[s->nargs] && s->nargs < 23; s->nargs++)
        s->args[s->nargs] = strdup(extra[s->nargs]);
    s->port = free_port();
    snprintf(s->url, sizeof s->url, "http://127.0.0.1:%d", s->port);
    launch(s);
    return s;
}

void ts_restart(ts_server *s) {
    launch(s);
}

int ts_stop(ts_server *s) {
    if (s->pid <= 0)
        return 0;
    kill(s->pid, SIGTERM);
    int st = 0;
    waitpid(s->pid, &st, 0);
    s->pid = 0;
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

void ts_kill(ts_server *s) {
    if (s->pid <= 0)
        return;
    kill(s->pid, SIGKILL);
    waitpid(s->pid, NULL, 0);
    s->pid = 0;
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *f) {
    return remove(path);
}

int ts_free(ts_server *s) {
    int rc = ts_stop(s);
    if (rc) {
        char cmd[400];
        snprintf(cmd, sizeof cmd, "tail -40 %s/server.log >&2", s->dir);
        fprintf(stderr, "the server did not exit 0 on SIGTERM:\n");
        (void)!system(cmd);
    }
    nftw(s->dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    for (int i = 0; i < s->nargs; i++)
        free(s->args[i]);
    free(s);
    return rc;
}

runnel_client *ts_client(const ts_server *s) {
    runnel_client_options o = {.base_url = s->url, .request_timeout_ms = 20000};
    runnel_client *c = runnel_client_new(&o);
    if (!c)
        die("client");
    return c;
}

int ts_req(runnel_client *c, const char *method, const char *target, const char *const *headers,
           const void *body, size_t len, runnel_answer *ans) {
    rnc_request req;
    if (rnc_request_init(&req, c, method, target, NULL))
        die("URL too long");
    for (; headers && *headers; headers++) {
        struct curl_slist *l = curl_slist_append(req.headers.list, *headers);
        if (!l)
            abort();
        req.headers.list = l;
    }
    runnel_body b = {.data = body, .len = len};
    if (body || strcmp(method, "POST") == 0 || strcmp(method, "PUT") == 0)
        req.body = &b;
    rnc_perform(c, &req, ans);
    rnc_request_free(&req);
    return ans->status;
}

int ts_hook(runnel_client *c, const char *what) {
    char path[512];
    snprintf(path, sizeof path, "/__runnel/test/%s", what);
    runnel_answer a;
    return ts_req(c, "POST", path, NULL, NULL, 0, &a);
}

void ts_create(runnel_client *c, const char *path, const char *type, char *inc) {
    char ct[160];
    snprintf(ct, sizeof ct, "Content-Type: %s", type);
    const char *h[] = {ct, NULL};
    runnel_answer a;
    if (ts_req(c, "PUT", path, h, NULL, 0, &a) != 201) {
        fprintf(stderr, "create %s answered %d %s\n", path, a.status, a.error_code);
        abort();
    }
    if (inc)
        snprintf(inc, 32, "%s", a.incarnation);
}

const char *ts_name(const char *prefix) {
    static char buf[8][64];
    static unsigned n, slot;
    char *out = buf[slot++ % 8];
    snprintf(out, 64, "%s%u", prefix, ++n);
    return out;
}

ts_server *S;
runnel_client *C;

int ts_group_setup(void **state) {
    const char *args[] = {"--test-hooks", NULL};
    S = ts_start(args);
    C = ts_client(S);
    return 0;
}

int ts_group_teardown(void **state) {
    runnel_client_free(C);
    return ts_free(S);
}

int ts_collect(void *arg, const void *d, size_t n) {
    rn_buf_append(arg, d, n);
    return 0;
}

void ts_read_all(runnel_client *c, const char *url, rn_buf *out) {
    out->len = 0;
    runnel_read_options o = {.on_data = ts_collect, .arg = out};
    runnel_answer a;
    if (runnel_read_all(c, url, &o, 0, &a) != RUNNEL_OK) {
        fprintf(stderr, "reading %s answered %d %s\n", url, a.status, a.error_code);
        abort();
    }
}
