/*
 * upstream.c — the gateway's connections to its nodes. See upstream.h.
 *
 * A connection is made for a call when its origin's pool has no idle one;
 * the call's bytes wait in `pending` until the connection is up. The
 * answer is parsed as it is read; a read that the call's data callback
 * pauses stops the socket's reading (the rest of the buffer in hand is
 * still delivered). One timer per connection serves whatever it waits for
 * next: the connect (CONNECT_MS), 100 Continue (CONTINUE_MS), the answer's
 * head (the call's timeout), or the end of an idle period in the pool.
 * An idle connection keeps reading, so a node that closes it is noticed
 * and the connection leaves the pool at once.
 */
#include "gateway/upstream.h"
#include "util/list.h"
#include "util/text.h"

#include <assert.h>
#include <llhttp.h>
#include <stdlib.h>
#include <string.h>

#define CONNECT_MS 5000
#define CONTINUE_MS 1000
#define READ_BYTES (64 * 1024)
#define HEAD_MAX_BYTES (64 * 1024)
#define MAX_HEADERS 128

typedef struct up_conn up_conn;

typedef struct {
    char origin[256];
    struct sockaddr_storage addr;
    int resolved; /* 1: addr holds the address; -1: it could not be resolved */
    rn_list idle; /* up_conn.link */
    size_t nidle;
} origin_pool;

struct rn_upstreams {
    uv_loop_t *loop;
    origin_pool **pools;
    size_t npools;
    size_t max_idle;
    uint64_t idle_ms;
    rn_list conns; /* every open connection (up_conn.all) */
    int stopping;
    /* what every connection reads into: a read is parsed whole before the
     * next one is made, so one buffer serves them all */
    uint8_t buf[READ_BYTES];
};

struct rn_up_call {
    rn_upstreams *u;
    up_conn *conn;
    rn_up_callbacks cb;
    void *arg;
    rn_buf pending; /* request bytes waiting for the connection */
    int sent_any, request_sent, expect_continue, continued, head_seen, is_head;
    uint64_t head_deadline; /* uv_now(); 0: none */
};

typedef struct {
    size_t name_off, name_len, value_off, value_len;
} span;

struct up_conn {
    uv_tcp_t tcp;
    uv_connect_t connect;
    uv_timer_t timer;
    rn_upstreams *u;
    origin_pool *pool;
    rn_up_call *call;
    llhttp_t parser;
    rn_list_node link; /* in pool->idle while idle */
    rn_list_node all;  /* in u->conns */
    int connected, closing, idle, reading, paused;
    int handles_open;
    uint64_t connect_deadline, continue_deadline, idle_deadline;
    /* the answer head being parsed */
    rn_buf head;
    span spans[MAX_HEADERS];
    size_t nspans;
    int last_was_value;
};

typedef struct {
    uv_write_t w;
    rn_buf bytes;
    up_conn *conn;
} up_write;

static void conn_close(up_conn *c);
static void arm_timer(up_conn *c);

/* ---- pools ---- */

rn_upstreams *rn_upstreams_new(uv_loop_t *loop, size_t max_idle, uint64_t idle_ms) {
    rn_upstreams *u = rn_xcalloc(1, sizeof *u);
    u->loop = loop;
    u->max_idle = max_idle;
    u->idle_ms = idle_ms;
    return u;
}

/* Parses "http://host:port" (host an IP literal, or a name resolved once,
 * when first used) into a pool. */
static origin_pool *pool_of(rn_upstreams *u, const char *origin) {
    for (size_t i = 0; i < u->npools; i++)
        if (strcmp(u->pools[i]->origin, origin) == 0)
            return u->pools[i];
    size_t n = strlen(origin);
    if (!rn_iprefix(origin, n, "http://") || n >= sizeof u->pools[0]->origin)
        return NULL;
    const char *hp = origin + 7;
    char host[256], port[8] = "80";
    const char *colon;
    if (hp[0] == '[') {
        const char *close = strchr(hp, ']');
        if (!close || (size_t)(close - hp - 1) >= sizeof host)
            return NULL;
        memcpy(host, hp + 1, (size_t)(close - hp - 1));
        host[close - hp - 1] = 0;
        colon = close[1] == ':' ? close + 1 : NULL;
    } else {
        colon = strrchr(hp, ':');
        size_t hl = colon ? (size_t)(colon - hp) : strlen(hp);
        if (hl == 0 || hl >= sizeof host)
            return NULL;
        memcpy(host, hp, hl);
        host[hl] = 0;
    }
    if (colon) {
        if (strlen(colon + 1) == 0 || strlen(colon + 1) >= sizeof port)
            return NULL;
        snprintf(port, sizeof port, "%s", colon + 1);
    }
    origin_pool *p = rn_xcalloc(1, sizeof *p);
    memcpy(p->origin, origin, n + 1);
    struct sockaddr_in6 a6;
    struct sockaddr_in a4;
    if (uv_ip4_addr(host, atoi(port), &a4) == 0) {
        memcpy(&p->addr, &a4, sizeof a4);
        p->resolved = 1;
    } else if (uv_ip6_addr(host, atoi(port), &a6) == 0) {
        memcpy(&p->addr, &a6, sizeof a6);
        p->resolved = 1;
    } else {
        uv_getaddrinfo_t gai; /* a name: resolved once, synchronously */
        struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
        if (uv_getaddrinfo(u->loop, &gai, NULL, host, port, &hints) == 0 && gai.addrinfo) {
            memcpy(&p->addr, gai.addrinfo->ai_addr, gai.addrinfo->ai_addrlen);
            p->resolved = 1;
            uv_freeaddrinfo(gai.addrinfo);
        } else {
            p->resolved = -1;
        }
    }
    u->pools = rn_xrealloc(u->pools, (u->npools + 1) * sizeof *u->pools);
    u->pools[u->npools++] = p;
    return p;
}

/* ---- ending calls ---- */

/* Ends c's call (if any) with how; the connection stays as it is. */
static void end_call(up_conn *c, rn_up_end how) {
    rn_up_call *call = c->call;
    if (!call)
        return;
    c->call = NULL;
    call->conn = NULL;
    rn_buf_free(&call->pending);
    call->cb.end(call->arg, how, call->sent_any);
    free(call);
}

static void on_closed(uv_handle_t *h) {
    up_conn *c = h->data;
    if (--c->handles_open == 0) {
        rn_buf_free(&c->head);
        free(c);
    }
}

static void conn_close(up_conn *c) {
    if (c->closing)
        return;
    c->closing = 1;
    if (c->idle) {
        rn_list_remove(&c->pool->idle, &c->link);
        c->pool->nidle--;
        c->idle = 0;
    }
    rn_list_remove(&c->u->conns, &c->all);
    end_call(c, c->connected ? RN_UP_BROKEN : RN_UP_CONNECT);
    uv_close((uv_handle_t *)&c->tcp, on_closed);
    uv_close((uv_handle_t *)&c->timer, on_closed);
}

/* A whole answer came to a whole request: the connection goes back to its
 * pool when the node keeps it alive and there is room, else it closes. */
static void conn_release(up_conn *c, int keep) {
    if (!keep || c->u->stopping || c->pool->nidle >= c->u->max_idle) {
        conn_close(c);
        return;
    }
    c->idle = 1;
    c->paused = 0;
    rn_list_push_back(&c->pool->idle, &c->link);
    c->pool->nidle++;
    c->idle_deadline = uv_now(c->u->loop) + c->u->idle_ms;
    arm_timer(c);
}

/* ---- the answer ---- */

static up_conn *conn_of(llhttp_t *p) {
    return p->data;
}

static int on_message_begin(llhttp_t *p) {
    up_conn *c = conn_of(p);
    c->head.len = 0;
    c->nspans = 0;
    c->last_was_value = 0;
    return c->call ? 0 : -1; /* an answer nobody asked for */
}

static int head_add(up_conn *c, const char *at, size_t len) {
    if (c->head.len + len > HEAD_MAX_BYTES)
        return -1;
    rn_buf_append(&c->head, at, len);
    return 0;
}

static int on_header_field(llhttp_t *p, const char *at, size_t len) {
    up_conn *c = conn_of(p);
    if (c->nspans == 0 || c->last_was_value) {
        if (c->nspans == MAX_HEADERS)
            return -1;
        c->spans[c->nspans++] = (span){c->head.len, 0, 0, 0};
        c->last_was_value = 0;
    }
    c->spans[c->nspans - 1].name_len += len;
    return head_add(c, at, len);
}

static int on_header_value(llhttp_t *p, const char *at, size_t len) {
    up_conn *c = conn_of(p);
    span *s = &c->spans[c->nspans - 1];
    if (!c->last_was_value) {
        s->value_off = c->head.len;
        c->last_was_value = 1;
    }
    s->value_len += len;
    return head_add(c, at, len);
}

static int on_headers_complete(llhttp_t *p) {
    up_conn *c = conn_of(p);
    rn_up_call *call = c->call;
    int status = p->status_code;
    if (status >= 100 && status < 200) {
        if (status == 100 && call->expect_continue && !call->continued) {
            call->continued = 1;
            c->continue_deadline = 0;
            arm_timer(c);
            call->cb.go_on(call->arg);
        }
        return 0;
    }
    call->head_seen = 1;
    call->head_deadline = 0;
    c->continue_deadline = 0;
    arm_timer(c);
    rn_header h[MAX_HEADERS];
    for (size_t i = 0; i < c->nspans; i++)
        h[i] =
            (rn_header){(const char *)c->head.data + c->spans[i].name_off, c->spans[i].name_len,
                        (const char *)c->head.data + c->spans[i].value_off, c->spans[i].value_len};
    int no_body = call->is_head || status == 204 || status == 304;
    uint64_t length = no_body                              ? RN_UP_NO_BODY
                      : (p->flags & F_CONTENT_LENGTH) != 0 ? p->content_length
                                                           : RN_UP_CHUNKED;
    call->cb.head(call->arg, status, h, c->nspans, length);
    if (!c->call)
        return HPE_PAUSED; /* cancelled meanwhile */
    return no_body ? 1 : 0;
}

static int on_body(llhttp_t *p, const char *at, size_t len) {
    up_conn *c = conn_of(p);
    if (!c->call)
        return HPE_PAUSED;
    rn_up_call *call = c->call;
    int pause = call->cb.data(call->arg, (const uint8_t *)at, len);
    if (pause && c->call && !c->paused) { /* the callback may have cancelled the call */
        c->paused = 1;
        if (c->reading) {
            uv_read_stop((uv_stream_t *)&c->tcp);
            c->reading = 0;
        }
    }
    return c->call ? 0 : HPE_PAUSED;
}

static int on_message_complete(llhttp_t *p) {
    up_conn *c = conn_of(p);
    if (!c->call)
        return HPE_PAUSED;
    if (!c->call->head_seen)
        return 0; /* a 1xx ended */
    /* reusable when the node keeps it, had all of the request, and read
     * its body (after Expect, a node that answered first closes) */
    int keep = llhttp_should_keep_alive(p) && c->call->request_sent &&
               (!c->call->expect_continue || c->call->continued);
    end_call(c, RN_UP_DONE);
    conn_release(c, keep);
    return HPE_PAUSED;
}

static const llhttp_settings_t answer_settings = {
    .on_message_begin = on_message_begin,
    .on_header_field = on_header_field,
    .on_header_value = on_header_value,
    .on_headers_complete = on_headers_complete,
    .on_body = on_body,
    .on_message_complete = on_message_complete,
};

static void on_alloc(uv_handle_t *h, size_t want, uv_buf_t *buf) {
    (void)want;
    up_conn *c = h->data;
    *buf = uv_buf_init((char *)c->u->buf, sizeof c->u->buf);
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf) {
    up_conn *c = s->data;
    if (n == 0)
        return;
    if (n < 0) {
        if (n == UV_EOF && c->call && c->call->head_seen)
            llhttp_finish(&c->parser); /* a body that runs to the close ends here */
        conn_close(c);
        return;
    }
    if (c->idle || !c->call) { /* bytes nobody asked for */
        conn_close(c);
        return;
    }
    llhttp_errno_t err = llhttp_execute(&c->parser, buf->base, (size_t)n);
    if (c->closing)
        return;
    if (err == HPE_PAUSED) { /* the answer ended: nothing may follow it */
        if (llhttp_get_error_pos(&c->parser) < buf->base + n)
            conn_close(c);
        return;
    }
    if (err != HPE_OK)
        conn_close(c);
}

static void read_start(up_conn *c) {
    if (!c->reading && !c->closing && !c->paused) {
        uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
        c->reading = 1;
    }
}

/* ---- writing ---- */

static void on_written(uv_write_t *w, int status) {
    up_write *uw = w->data;
    up_conn *c = uw->conn;
    rn_buf_free(&uw->bytes);
    free(uw);
    if (c->closing)
        return;
    if (status < 0) {
        conn_close(c);
        return;
    }
    if (c->call && uv_stream_get_write_queue_size((uv_stream_t *)&c->tcp) == 0)
        c->call->cb.drained(c->call->arg);
}

/* Hands bytes (taken over) to c's socket. */
static void conn_write(up_conn *c, rn_buf *bytes) {
    if (!bytes->len) {
        rn_buf_free(bytes);
        return;
    }
    up_write *uw = rn_xcalloc(1, sizeof *uw);
    uw->bytes = *bytes;
    *bytes = (rn_buf){0};
    uw->conn = c;
    uw->w.data = uw;
    uv_buf_t b = uv_buf_init((char *)uw->bytes.data, (unsigned)uw->bytes.len);
    c->call->sent_any = 1;
    if (uv_write(&uw->w, (uv_stream_t *)&c->tcp, &b, 1, on_written) != 0) {
        rn_buf_free(&uw->bytes);
        free(uw);
        conn_close(c);
    }
}

/* ---- the timer ---- */

static void on_timer(uv_timer_t *t) {
    up_conn *c = t->data;
    uint64_t now = uv_now(c->u->loop);
    if (c->idle) {
        if (now >= c->idle_deadline)
            conn_close(c);
        return;
    }
    if (!c->connected && c->connect_deadline && now >= c->connect_deadline) {
        conn_close(c);
        return;
    }
    rn_up_call *call = c->call;
    if (call && call->head_deadline && now >= call->head_deadline) {
        end_call(c, RN_UP_TIMEOUT);
        conn_close(c);
        return;
    }
    if (call && c->continue_deadline && now >= c->continue_deadline) {
        c->continue_deadline = 0;
        call->continued = 1;
        call->cb.go_on(call->arg);
    }
    arm_timer(c);
}

static void arm_timer(up_conn *c) {
    if (c->closing)
        return;
    uint64_t next = 0;
    uint64_t cands[4] = {c->idle ? c->idle_deadline : 0, c->connected ? 0 : c->connect_deadline,
                         c->call ? c->call->head_deadline : 0, c->continue_deadline};
    for (int i = 0; i < 4; i++)
        if (cands[i] && (!next || cands[i] < next))
            next = cands[i];
    if (!next) {
        uv_timer_stop(&c->timer);
        return;
    }
    uint64_t now = uv_now(c->u->loop);
    uv_timer_start(&c->timer, on_timer, next > now ? next - now : 0, 0);
}

/* ---- connections ---- */

static void on_connected(uv_connect_t *req, int status) {
    up_conn *c = req->data;
    if (c->closing)
        return;
    if (status < 0) {
        conn_close(c);
        return;
    }
    c->connected = 1;
    uv_tcp_nodelay(&c->tcp, 1);
    arm_timer(c);
    read_start(c);
    if (c->call)
        conn_write(c, &c->call->pending);
}

static up_conn *conn_new(rn_upstreams *u, origin_pool *p) {
    up_conn *c = rn_xcalloc(1, sizeof *c);
    c->u = u;
    c->pool = p;
    uv_tcp_init(u->loop, &c->tcp);
    uv_timer_init(u->loop, &c->timer);
    c->tcp.data = c->timer.data = c->connect.data = c;
    c->handles_open = 2;
    llhttp_init(&c->parser, HTTP_RESPONSE, &answer_settings);
    c->parser.data = c;
    rn_list_push_back(&u->conns, &c->all);
    c->connect_deadline = uv_now(u->loop) + CONNECT_MS;
    if (p->resolved != 1 ||
        uv_tcp_connect(&c->connect, &c->tcp, (const struct sockaddr *)&p->addr, on_connected) != 0)
        c->connect_deadline = uv_now(u->loop); /* fails at the timer's first run */
    return c;
}

rn_up_call *rn_up_call_start(rn_upstreams *u, const char *origin, rn_buf *head, int expect_continue,
                             uint64_t head_timeout_ms, const rn_up_callbacks *cb, void *arg) {
    origin_pool *p = pool_of(u, origin);
    if (!p) {
        rn_buf_free(head);
        return NULL;
    }
    rn_up_call *call = rn_xcalloc(1, sizeof *call);
    call->u = u;
    call->cb = *cb;
    call->arg = arg;
    call->expect_continue = expect_continue;
    call->is_head = head->len >= 5 && memcmp(head->data, "HEAD ", 5) == 0;
    uint64_t now = uv_now(u->loop);
    call->head_deadline = head_timeout_ms ? now + head_timeout_ms : 0;
    up_conn *c;
    if (p->nidle) {
        c = rn_list_entry(p->idle.first, up_conn, link);
        rn_list_remove(&p->idle, &c->link);
        p->nidle--;
        c->idle = 0;
        llhttp_init(&c->parser, HTTP_RESPONSE, &answer_settings);
        c->parser.data = c;
    } else {
        c = conn_new(u, p);
    }
    c->call = call;
    call->conn = c;
    c->continue_deadline = expect_continue ? now + CONTINUE_MS : 0;
    call->pending = *head;
    *head = (rn_buf){0};
    if (c->connected) {
        conn_write(c, &call->pending);
        read_start(c);
    }
    arm_timer(c);
    return call;
}

size_t rn_up_call_send(rn_up_call *call, rn_buf *bytes) {
    up_conn *c = call->conn;
    if (!c) {
        rn_buf_free(bytes);
        return 0;
    }
    if (!c->connected) {
        rn_buf_append(&call->pending, bytes->data, bytes->len);
        rn_buf_free(bytes);
        return call->pending.len;
    }
    conn_write(c, bytes);
    return c->closing ? 0 : uv_stream_get_write_queue_size((uv_stream_t *)&c->tcp);
}

void rn_up_call_sent(rn_up_call *call) {
    call->request_sent = 1;
}

int rn_up_call_sent_any(const rn_up_call *call) {
    return call->sent_any;
}

void rn_up_call_resume_read(rn_up_call *call) {
    up_conn *c = call->conn;
    if (!c || !c->paused)
        return;
    c->paused = 0;
    read_start(c);
}

void rn_up_call_cancel(rn_up_call *call) {
    up_conn *c = call->conn;
    if (c) {
        c->call = NULL;
        conn_close(c);
    }
    rn_buf_free(&call->pending);
    free(call);
}

void rn_upstreams_stop(rn_upstreams *u) {
    u->stopping = 1;
    while (u->conns.first)
        conn_close(rn_list_entry(u->conns.first, up_conn, all));
}

void rn_upstreams_free(rn_upstreams *u) {
    if (!u)
        return;
    for (size_t i = 0; i < u->npools; i++)
        free(u->pools[i]);
    free(u->pools);
    free(u);
}
