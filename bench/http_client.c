/*
 * http_client.c — the benchmark's HTTP/1.1 connections (see http_client.h).
 *
 * State of a connection's socket: DOWN (none), QUEUED (waiting for a
 * connect slot), CONNECTING, UP, CLOSING (uv_close called, waiting for its
 * callback). The request in flight, if
 * any, is `out`: its bytes stay allocated until both its write finished and
 * its answer arrived, so a retry can send them again. Whenever the socket
 * comes back DOWN while a request is pending, the close callback starts a
 * new connect; so "request while the socket is closing" and "retry" are the
 * same path.
 *
 * Response completion: on_message_complete pauses llhttp, the read callback
 * resumes it and completes the request after llhttp_execute returned, so
 * the user's on_done (which may issue the next request or free the conn)
 * is always the last thing that touches the connection.
 */
#include "http_client.h"

#include <llhttp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "report.h"
#include "util/buf.h"

#define MAX_CONNECTING 128
#define READ_BUF (256 * 1024)

enum state { DOWN, QUEUED, CONNECTING, UP, CLOSING };

typedef struct {
    uv_write_t w;
    int writing;  /* uv_write in progress */
    int released; /* the request finished; free when the write ends */
    int retried;
    size_t len;
    char data[];
} outreq;

struct bn_client {
    uv_loop_t *loop;
    const bn_target *target;
    bn_conn *conns;     /* all live connections (doubly linked) */
    bn_conn *wait_head; /* connections waiting for a connect slot */
    bn_conn *wait_tail;
    int connecting;
    int closing_all;
};

struct bn_conn {
    uv_tcp_t tcp;
    uv_connect_t connect_req;
    llhttp_t parser;
    bn_client *cl;
    const bn_handlers *h;
    void *user;
    bn_conn *prev, *next; /* in cl->conns */
    bn_conn *wait_next;   /* in cl's connect queue */
    enum state state;
    int dying;                    /* bn_conn_close called: free after the socket closed */
    int reused;                   /* this socket already completed a response */
    int complete;                 /* on_message_complete seen for the current response */
    int head;                     /* the request in flight is a HEAD: its answer has no body */
    size_t got;                   /* response bytes received for the current request */
    outreq *out;                  /* the request in flight */
    struct sockaddr_storage addr; /* where it connects (the target's by default) */
    bn_resp resp;
    char hf[32]; /* current header field (truncated) */
    size_t hf_len;
    char hv[160]; /* current header value (truncated) */
    size_t hv_len;
};

static char read_buf[READ_BUF];
static llhttp_settings_t settings;

static void start_connect(bn_conn *c);
static void close_socket(bn_conn *c);

/* ---- parser callbacks ------------------------------------------------ */

static void append_trunc(char *dst, size_t cap, size_t *len, const char *at, size_t n) {
    size_t room = cap - 1 - *len;
    if (n > room)
        n = room;
    memcpy(dst + *len, at, n);
    *len += n;
    dst[*len] = 0;
}

static int on_header_field(llhttp_t *p, const char *at, size_t n) {
    bn_conn *c = p->data;
    append_trunc(c->hf, sizeof c->hf, &c->hf_len, at, n);
    return 0;
}

static int on_header_value(llhttp_t *p, const char *at, size_t n) {
    bn_conn *c = p->data;
    append_trunc(c->hv, sizeof c->hv, &c->hv_len, at, n);
    return 0;
}

static int is_field(const bn_conn *c, const char *name) {
    return c->hf_len == strlen(name) && strncasecmp(c->hf, name, c->hf_len) == 0;
}

/* Copies the current header value into dst[cap], truncated to fit. */
static void copy_value(char *dst, size_t cap, const bn_conn *c) {
    size_t n = c->hv_len < cap - 1 ? c->hv_len : cap - 1;
    memcpy(dst, c->hv, n);
    dst[n] = 0;
}

static int on_header_value_complete(llhttp_t *p) {
    bn_conn *c = p->data;
    if (is_field(c, "stream-next-offset"))
        copy_value(c->resp.next_offset, sizeof c->resp.next_offset, c);
    else if (is_field(c, "stream-up-to-date"))
        c->resp.up_to_date = strcasecmp(c->hv, "true") == 0;
    else if (is_field(c, "stream-closed"))
        c->resp.closed = strcasecmp(c->hv, "true") == 0;
    else if (is_field(c, "stream-snapshot-offset"))
        copy_value(c->resp.snapshot_offset, sizeof c->resp.snapshot_offset, c);
    else if (is_field(c, "content-type"))
        copy_value(c->resp.content_type, sizeof c->resp.content_type, c);
    else if (is_field(c, "location"))
        copy_value(c->resp.location, sizeof c->resp.location, c);
    c->hf_len = c->hv_len = 0;
    c->hf[0] = c->hv[0] = 0;
    return 0;
}

static int on_headers_complete(llhttp_t *p) {
    bn_conn *c = p->data;
    c->resp.status = p->status_code;
    if (c->h->on_headers)
        c->h->on_headers(c);
    return c->head ? 1 : 0; /* 1: llhttp expects no body (answer to HEAD) */
}

static int on_body(llhttp_t *p, const char *at, size_t n) {
    bn_conn *c = p->data;
    c->resp.body_bytes += n;
    if (c->h->on_body)
        c->h->on_body(c, at, n);
    return 0;
}

static int on_message_complete(llhttp_t *p) {
    bn_conn *c = p->data;
    c->complete = 1;
    return HPE_PAUSED;
}

/* ---- request lifecycle ------------------------------------------------ */

/* Releases the request in flight and reports err (0: complete response).
 * Must be the caller's last use of c. */
static void finish(bn_conn *c, int err) {
    outreq *o = c->out;
    c->out = NULL;
    if (o->writing)
        o->released = 1;
    else
        free(o);
    c->h->on_done(c, err);
}

/* The socket failed or the server closed it while a request was pending:
 * retry once if nothing of the answer came on a reused socket, else fail. */
static void transport_error(bn_conn *c, int err) {
    int retry = c->reused && c->got == 0 && !c->out->retried;
    close_socket(c);
    if (retry)
        c->out->retried = 1; /* the close callback reconnects and resends */
    else
        finish(c, err);
}

static void on_write(uv_write_t *w, int status) {
    outreq *o = (outreq *)w;
    bn_conn *c = w->data;
    o->writing = 0;
    if (o->released) {
        free(o);
        return;
    }
    if (status < 0 && c->state == UP)
        transport_error(c, status);
}

static void send_out(bn_conn *c) {
    c->got = 0;
    c->complete = 0;
    llhttp_init(&c->parser, HTTP_RESPONSE, &settings);
    c->parser.data = c;
    uv_buf_t b = uv_buf_init(c->out->data, (unsigned)c->out->len);
    c->out->writing = 1;
    c->out->w.data = c;
    int rc = uv_write(&c->out->w, (uv_stream_t *)&c->tcp, &b, 1, on_write);
    if (rc < 0) {
        c->out->writing = 0;
        transport_error(c, rc);
    }
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
    *buf = uv_buf_init(read_buf, sizeof read_buf);
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf) {
    bn_conn *c = s->data;
    if (nread == 0)
        return;
    if (!c->out) { /* idle: the server closed a keep-alive socket, or sent junk */
        if (nread > 0)
            bn_report_error("%zd unexpected bytes on an idle connection", nread);
        close_socket(c);
        return;
    }
    if (nread < 0) {
        if (nread == UV_EOF && c->got > 0)
            llhttp_finish(&c->parser); /* completes a body delimited by the end of the socket */
        if (c->complete) {
            close_socket(c);
            finish(c, 0);
        } else {
            transport_error(c, (int)nread);
        }
        return;
    }
    c->got += (size_t)nread;
    llhttp_errno_t e = llhttp_execute(&c->parser, buf->base, (size_t)nread);
    if (e == HPE_OK)
        return;
    if (e == HPE_PAUSED && c->complete) {
        size_t used = (size_t)(llhttp_get_error_pos(&c->parser) - buf->base);
        llhttp_resume(&c->parser);
        if (used != (size_t)nread) {
            close_socket(c);
            finish(c, BN_EHTTP);
            return;
        }
        c->reused = 1;
        if (!llhttp_should_keep_alive(&c->parser))
            close_socket(c);
        finish(c, 0);
        return;
    }
    bn_report_error("bad HTTP response: %s", llhttp_errno_name(e));
    close_socket(c);
    finish(c, BN_EHTTP);
}

/* ---- sockets ------------------------------------------------------------ */

static void pump_connects(bn_client *cl) {
    while (cl->wait_head && cl->connecting < MAX_CONNECTING) {
        bn_conn *c = cl->wait_head;
        cl->wait_head = c->wait_next;
        if (!cl->wait_head)
            cl->wait_tail = NULL;
        c->wait_next = NULL;
        start_connect(c);
    }
}

static void on_connect(uv_connect_t *r, int status) {
    bn_conn *c = r->data;
    c->cl->connecting--;
    pump_connects(c->cl);
    if (c->state != CONNECTING) /* closed meanwhile */
        return;
    if (status < 0) {
        close_socket(c);
        if (c->out)
            finish(c, status);
        return;
    }
    c->state = UP;
    uv_tcp_nodelay(&c->tcp, 1);
    uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
    if (c->out)
        send_out(c);
}

static void start_connect(bn_conn *c) {
    bn_client *cl = c->cl;
    if (cl->connecting >= MAX_CONNECTING) {
        c->state = QUEUED;
        if (cl->wait_tail)
            cl->wait_tail->wait_next = c;
        else
            cl->wait_head = c;
        cl->wait_tail = c;
        return;
    }
    cl->connecting++;
    c->state = CONNECTING;
    c->reused = 0;
    uv_tcp_init(cl->loop, &c->tcp);
    c->tcp.data = c;
    c->connect_req.data = c;
    int rc =
        uv_tcp_connect(&c->connect_req, &c->tcp, (const struct sockaddr *)&c->addr, on_connect);
    if (rc < 0) {
        cl->connecting--;
        close_socket(c);
        if (c->out)
            finish(c, rc);
    }
}

static void unlink_waiting(bn_conn *c) {
    bn_client *cl = c->cl;
    bn_conn **pp = &cl->wait_head, *prev = NULL;
    while (*pp && *pp != c) {
        prev = *pp;
        pp = &(*pp)->wait_next;
    }
    if (!*pp)
        return;
    *pp = c->wait_next;
    if (cl->wait_tail == c)
        cl->wait_tail = prev;
    c->wait_next = NULL;
}

static void free_conn(bn_conn *c) {
    bn_client *cl = c->cl;
    if (c->prev)
        c->prev->next = c->next;
    else
        cl->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    if (c->out) {
        if (c->out->writing)
            c->out->released = 1;
        else
            free(c->out);
    }
    free(c);
    if (cl->closing_all && !cl->conns)
        free(cl);
}

static void on_close(uv_handle_t *h) {
    bn_conn *c = h->data;
    c->state = DOWN;
    if (c->dying)
        free_conn(c);
    else if (c->out)
        start_connect(c);
}

/* Moves the socket towards DOWN (no-op when already DOWN or CLOSING). A
 * connection still queued for a connect slot has no socket yet. */
static void close_socket(bn_conn *c) {
    if (c->state == QUEUED) {
        unlink_waiting(c);
        c->state = DOWN;
        return;
    }
    if (c->state == CONNECTING || c->state == UP) {
        c->state = CLOSING;
        uv_close((uv_handle_t *)&c->tcp, on_close);
    }
}

/* ---- public API ------------------------------------------------------------ */

bn_client *bn_client_new(uv_loop_t *loop, const bn_target *target) {
    settings = (llhttp_settings_t){0};
    llhttp_settings_init(&settings);
    settings.on_header_field = on_header_field;
    settings.on_header_value = on_header_value;
    settings.on_header_value_complete = on_header_value_complete;
    settings.on_headers_complete = on_headers_complete;
    settings.on_body = on_body;
    settings.on_message_complete = on_message_complete;
    bn_client *cl = rn_xcalloc(1, sizeof *cl);
    cl->loop = loop;
    cl->target = target;
    return cl;
}

bn_conn *bn_conn_new(bn_client *cl, const bn_handlers *h, void *user) {
    bn_conn *c = rn_xcalloc(1, sizeof *c);
    c->cl = cl;
    c->h = h;
    c->user = user;
    c->state = DOWN;
    c->addr = cl->target->addr;
    c->next = cl->conns;
    if (cl->conns)
        cl->conns->prev = c;
    cl->conns = c;
    return c;
}

void bn_conn_set_addr(bn_conn *c, const struct sockaddr_storage *addr) {
    if (memcmp(&c->addr, addr, sizeof *addr) == 0)
        return;
    c->addr = *addr;
    close_socket(c); /* the next request connects to addr */
}

void *bn_conn_user(const bn_conn *c) {
    return c->user;
}

void bn_conn_rebind(bn_conn *c, const bn_handlers *h, void *user) {
    c->h = h;
    c->user = user;
}

const bn_resp *bn_conn_resp(const bn_conn *c) {
    return &c->resp;
}

int bn_conn_busy(const bn_conn *c) {
    return c->out != NULL;
}

void bn_conn_request(bn_conn *c, const char *method, const char *path, const char *headers,
                     const void *body, size_t body_len) {
    int with_length = body_len > 0 || strcmp(method, "POST") == 0 || strcmp(method, "PUT") == 0;
    char head[2048];
    int n =
        snprintf(head, sizeof head, "%s %s HTTP/1.1\r\nHost: %s\r\n%s%s", method, path,
                 c->cl->target->host_header, c->cl->target->extra_headers, headers ? headers : "");
    if (with_length)
        n += snprintf(head + n, sizeof head - (size_t)n, "Content-Length: %zu\r\n", body_len);
    n += snprintf(head + n, sizeof head - (size_t)n, "\r\n");
    if (n >= (int)sizeof head) {
        fprintf(stderr, "runnel-bench: request head too long\n");
        abort();
    }
    outreq *o = rn_xmalloc(sizeof *o + (size_t)n + body_len);
    memset(o, 0, sizeof *o);
    memcpy(o->data, head, (size_t)n);
    if (body_len)
        memcpy(o->data + n, body, body_len);
    o->len = (size_t)n + body_len;
    c->out = o;
    c->head = strcmp(method, "HEAD") == 0;
    memset(&c->resp, 0, sizeof c->resp);
    c->resp.t_start_ns = uv_hrtime();
    if (c->state == UP)
        send_out(c);
    else if (c->state == DOWN)
        start_connect(c);
    /* QUEUED / CONNECTING / CLOSING: on_connect or on_close picks it up */
}

void bn_conn_close(bn_conn *c) {
    c->dying = 1;
    if (c->state == DOWN || c->state == QUEUED) {
        unlink_waiting(c);
        free_conn(c);
        return;
    }
    close_socket(c);
}

void bn_client_close(bn_client *cl) {
    cl->closing_all = 1;
    if (!cl->conns) {
        free(cl);
        return;
    }
    for (bn_conn *c = cl->conns, *next; c; c = next) {
        next = c->next;
        bn_conn_close(c);
    }
}
