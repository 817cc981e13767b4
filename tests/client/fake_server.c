/*
 * fake_server.c — the scripted HTTP/1.1 server of the client tests. See
 * fake_server.h.
 */
#define _GNU_SOURCE /* memmem, strcasestr */
#include "fake_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

typedef struct {
    int fd; /* -1: free */
    char buf[1 << 20];
    size_t len;
    int continued; /* 100 Continue sent for the request being read */
} conn;

struct fake_server {
    int listen_fd;
    char url[64];
    pthread_t thread;
    volatile int stop;
    fake_script script;
    void *arg;
    conn conns[FAKE_MAX_CONN];
    fake_request reqs[FAKE_MAX_CONN]; /* one pending request per connection */
    unsigned count;
    pthread_mutex_t lock;
};

const char *fake_header(const fake_request *r, const char *name, char *out, size_t cap) {
    out[0] = 0;
    size_t n = strlen(name);
    for (const char *l = r->head; *l;) {
        const char *eol = strstr(l, "\r\n");
        if (!eol)
            break;
        if (strncasecmp(l, name, n) == 0 && l[n] == ':') {
            const char *v = l + n + 1;
            while (*v == ' ')
                v++;
            snprintf(out, cap, "%.*s", (int)(eol - v), v);
            return out;
        }
        l = eol + 2;
    }
    return out;
}

void fake_answer(fake_server *f, fake_request *r, const char *raw) {
    conn *c = &f->conns[r->conn];
    size_t len = strlen(raw);
    for (size_t off = 0; off < len && c->fd >= 0;) {
        ssize_t w = write(c->fd, raw + off, len - off);
        if (w <= 0)
            break;
        off += (size_t)w;
    }
    free(r->body);
    r->body = NULL;
    r->pending = 0;
}

unsigned fake_count(fake_server *f) {
    pthread_mutex_lock(&f->lock);
    unsigned n = f->count;
    pthread_mutex_unlock(&f->lock);
    return n;
}

/* Parses a complete request from c into slot i; 1 when one was taken. */
static int take_request(fake_server *f, int i) {
    conn *c = &f->conns[i];
    fake_request *r = &f->reqs[i];
    if (r->pending)
        return 0; /* one request at a time per connection (no pipelining) */
    char *end = memmem(c->buf, c->len, "\r\n\r\n", 4);
    if (!end)
        return 0;
    size_t head_len = (size_t)(end - c->buf) + 4;
    char head[8192];
    snprintf(head, sizeof head, "%.*s", (int)head_len, c->buf);
    size_t body_len = 0;
    char *cl = strcasestr(head, "\r\nContent-Length:");
    if (cl)
        body_len = strtoul(cl + 17, NULL, 10);
    if (c->len < head_len + body_len) {
        if (!c->continued && strcasestr(head, "\r\nExpect: 100-continue")) {
            c->continued = 1;
            (void)!write(c->fd, "HTTP/1.1 100 Continue\r\n\r\n", 25);
        }
        return 0;
    }
    memset(r, 0, sizeof *r);
    sscanf(head, "%15s %1023s", r->method, r->path);
    char *first_eol = strstr(head, "\r\n");
    snprintf(r->head, sizeof r->head, "%s", first_eol ? first_eol + 2 : "");
    r->body = malloc(body_len + 1);
    memcpy(r->body, c->buf + head_len, body_len);
    r->body[body_len] = 0;
    r->body_len = body_len;
    r->conn = i;
    r->pending = 1;
    pthread_mutex_lock(&f->lock);
    r->seq = ++f->count;
    pthread_mutex_unlock(&f->lock);
    memmove(c->buf, c->buf + head_len + body_len, c->len - head_len - body_len);
    c->len -= head_len + body_len;
    c->continued = 0;
    return 1;
}

static void *serve(void *arg) {
    fake_server *f = arg;
    while (!f->stop) {
        struct pollfd p[FAKE_MAX_CONN + 1];
        int n = 0;
        p[n++] = (struct pollfd){.fd = f->listen_fd, .events = POLLIN};
        for (int i = 0; i < FAKE_MAX_CONN; i++)
            p[n++] = (struct pollfd){.fd = f->conns[i].fd, .events = POLLIN};
        poll(p, (nfds_t)n, 20);
        if (p[0].revents & POLLIN) {
            int fd = accept(f->listen_fd, NULL, NULL);
            for (int i = 0; fd >= 0 && i < FAKE_MAX_CONN; i++)
                if (f->conns[i].fd < 0) {
                    f->conns[i].fd = fd;
                    f->conns[i].len = 0;
                    fd = -1;
                }
            if (fd >= 0)
                close(fd);
        }
        for (int i = 0; i < FAKE_MAX_CONN; i++) {
            conn *c = &f->conns[i];
            if (c->fd < 0 || !(p[i + 1].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            ssize_t got = read(c->fd, c->buf + c->len, sizeof c->buf - c->len);
            if (got <= 0) {
                close(c->fd);
                c->fd = -1;
                free(f->reqs[i].body);
                f->reqs[i].body = NULL;
                f->reqs[i].pending = 0;
                continue;
            }
            c->len += (size_t)got;
        }
        for (int i = 0; i < FAKE_MAX_CONN; i++)
            if (f->conns[i].fd >= 0)
                take_request(f, i);
        f->script(f, f->reqs, FAKE_MAX_CONN, f->arg);
    }
    return NULL;
}

fake_server *fake_start(fake_script script, void *arg) {
    fake_server *f = calloc(1, sizeof *f);
    f->script = script;
    f->arg = arg;
    pthread_mutex_init(&f->lock, NULL);
    for (int i = 0; i < FAKE_MAX_CONN; i++)
        f->conns[i].fd = -1;
    f->listen_fd = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(f->listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    if (bind(f->listen_fd, (struct sockaddr *)&a, sizeof a) || listen(f->listen_fd, 16) ||
        getsockname(f->listen_fd, (struct sockaddr *)&a, &len))
        abort();
    snprintf(f->url, sizeof f->url, "http://127.0.0.1:%d", ntohs(a.sin_port));
    pthread_create(&f->thread, NULL, serve, f);
    return f;
}

void fake_stop(fake_server *f) {
    f->stop = 1;
    pthread_join(f->thread, NULL);
    for (int i = 0; i < FAKE_MAX_CONN; i++) {
        if (f->conns[i].fd >= 0)
            close(f->conns[i].fd);
        free(f->reqs[i].body);
    }
    close(f->listen_fd);
    pthread_mutex_destroy(&f->lock);
    free(f);
}

const char *fake_url(const fake_server *f) {
    return f->url;
}
