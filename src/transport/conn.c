/*
 * conn.c — client connections and the server that accepts them: accept
 * and the connection limits (in all, per client address), the one timer of
 * a connection (its protocol's timeouts, the send watch, the lingering
 * close), reading into the connection's input, half-closes, and the end of
 * a connection, and the table of protocols a connection can speak (by
 * ALPN name). What the bytes mean is the protocol's (rn_protocol, set at
 * accept, or after the TLS handshake: HTTP/1.1). See conn.h.
 *
 * Until a TLS connection's handshake completes it has no protocol: its
 * timer running out, its client's EOF and a server that stops close it,
 * and it counts as idle.
 *
 * EOF (a half-close) stops reading and is told to the protocol, which
 * still serves what was received; a read error closes the connection at
 * once. An ending connection (conn_end) serves no more input and, once its
 * writes are out, shuts its write side and drops what the client still
 * sends for up to LINGER_MS (conn_finish), so that a client still sending
 * gets its answer instead of a reset.
 */
#include "transport/conn.h"
#include "transport/http1.h"
#include "transport/http2.h"

#include <assert.h>
#include <linux/sockios.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#define LINGER_MS 2000 /* ending: read and drop input this long */

/* The open connections of one client address. */
struct conn_peer {
    uint8_t addr[16]; /* the map key: an IPv6 address, or an IPv4 one mapped into it */
    int count;
};

static void conn_finish(rn_conn *c);

/* ---- protocols ---- */

typedef struct {
    const char *alpn; /* its ALPN name */
    void (*attach)(rn_conn *c);
} conn_protocol;

/* The server's preference first; the last is the default. */
static const conn_protocol PROTOCOLS[] = {
    {"h2", http2_attach},
    {"http/1.1", http1_attach},
};
#define N_PROTOCOLS (sizeof PROTOCOLS / sizeof PROTOCOLS[0])

const unsigned char *conn_alpn_protocols(size_t *len) {
    static unsigned char wire[64];
    static size_t wire_len;
    if (!wire_len)
        for (size_t i = 0; i < N_PROTOCOLS; i++) {
            size_t n = strlen(PROTOCOLS[i].alpn);
            assert(n < 256 && wire_len + 1 + n <= sizeof wire);
            wire[wire_len++] = (unsigned char)n;
            memcpy(wire + wire_len, PROTOCOLS[i].alpn, n);
            wire_len += n;
        }
    *len = wire_len;
    return wire;
}

void conn_attach_protocol(rn_conn *c, const unsigned char *alpn, size_t len) {
    assert(!c->closed && !c->proto);
    const conn_protocol *p = &PROTOCOLS[N_PROTOCOLS - 1];
    for (size_t i = 0; i < N_PROTOCOLS; i++)
        if (len && strlen(PROTOCOLS[i].alpn) == len && memcmp(PROTOCOLS[i].alpn, alpn, len) == 0)
            p = &PROTOCOLS[i];
    conn_arm_timer(c, c->srv->cfg.idle_timeout_ms); /* idle until its first request */
    p->attach(c);                                   /* which may arm the timer for its own use */
}

/* ---- the timer ----
 * One timer per connection: the send watch while answer bytes wait, the
 * end of a lingering close, and otherwise what the protocol armed it for
 * (HTTP/1.1: the request and idle timeouts).
 *
 * The send watch: while answer bytes wait for a client (pending_writes),
 * the connection's timer checks every idle-timeout period whether the
 * client took any: a queued write completed, the transport's write queue
 * shrank, or the kernel's unacknowledged bytes (SIOCOUTQ) shrank since the
 * last reading. A client
 * that took nothing for a whole period is closed; a slow one that keeps
 * reading is not, however long its answer takes. */

/* Records the current send state of c as the reference for the next check. */
static void watch_read(rn_conn *c) {
    int fd = -1, unsent = 0;
    uv_fileno((const uv_handle_t *)&c->tcp, &fd);
    if (fd < 0 || ioctl(fd, SIOCOUTQ, &unsent) < 0)
        unsent = 0;
    c->watch_writes = c->writes_done;
    c->watch_queued = c->bytes->queued(c);
    c->watch_unsent = unsent;
    c->watching = 1;
}

/* True when the client took bytes since watch_read (or there was none),
 * or nothing waits for it now: every byte left the transport's queue and
 * the kernel's send queue, and only the write's completion has not run
 * yet (a loop turn that took longer than the period runs the timer
 * first); takes a new reading either way. */
static int output_progressed(rn_conn *c) {
    int had = c->watching;
    uint64_t writes = c->watch_writes;
    size_t queued = c->watch_queued;
    int unsent = c->watch_unsent;
    watch_read(c);
    int nothing_waits = c->watch_queued == 0 && c->watch_unsent == 0;
    return !had || nothing_waits || c->writes_done != writes || c->watch_queued < queued ||
           c->watch_unsent < unsent;
}

void conn_watch_output(rn_conn *c) {
    if (!uv_is_active((uv_handle_t *)&c->timer)) {
        watch_read(c);
        conn_arm_timer(c, c->srv->cfg.idle_timeout_ms);
    } else if (!c->watching)
        watch_read(c);
}

static void on_timeout(uv_timer_t *t) {
    rn_conn *c = t->data;
    if (c->pending_writes > 0) {
        if (output_progressed(c))
            conn_arm_timer(c, c->srv->cfg.idle_timeout_ms);
        else
            conn_close(c); /* a whole period without taking a byte */
        return;
    }
    c->watching = 0;
    if (c->ending || !c->proto) {
        conn_close(c); /* the lingering close is over, or the handshake took too long */
        return;
    }
    c->proto->timeout(c);
}

void conn_arm_timer(rn_conn *c, uint64_t ms) {
    if (ms)
        uv_timer_start(&c->timer, on_timeout, ms, 0);
    else
        uv_timer_stop(&c->timer);
}

void conn_finish_when_written(rn_conn *c) {
    if (c->ending && c->pending_writes == 0)
        conn_finish(c);
}

/* ---- reading ---- */

/* The client shut its sending side: reading stops; an ending connection
 * closes once its answers are out, any other is told to its protocol. */
static void input_end(rn_conn *c) {
    conn_read_stop(c);
    c->input_ended = 1;
    if (!c->proto) {
        conn_close(c); /* the client left during the TLS handshake */
        return;
    }
    if (c->ending) {
        if (c->pending_writes == 0)
            conn_close(c);
        return;
    }
    c->proto->input_end(c);
}

void conn_received(rn_conn *c, ssize_t n) {
    if (c->lingering) { /* the answer is out: drop input until EOF or LINGER_MS */
        if (n < 0)
            conn_close(c);
        c->input.len = c->input_off = 0;
        return;
    }
    if (n == UV_EOF) {
        input_end(c);
        return;
    }
    if (n < 0) {
        conn_close(c);
        return;
    }
    c->input.len += (size_t)n;
    c->proto->received(c);
}

void conn_read_start(rn_conn *c) {
    if (!c->reading && c->bytes->read_start(c) == 0)
        c->reading = 1;
}

void conn_read_stop(rn_conn *c) {
    c->bytes->read_stop(c);
    c->reading = 0;
}

/* ---- connection lifecycle ---- */

static void on_handle_closed(uv_handle_t *h) {
    rn_conn *c = h->data;
    if (--c->handles_open > 0)
        return;
    rn_http_server *srv = c->srv;
    rn_list_remove(&srv->conns, &c->link);
    srv->conn_count--;
    if (c->proto)
        c->proto->free(c);
    if (c->bytes->free)
        c->bytes->free(c);
    rn_buf_free(&c->input);
    free(c);
}
/* Counts c against its client address; returns 0, or -1 when the address
 * already holds max_connections_per_ip (or cannot be read). */
static int peer_join(rn_conn *c) {
    rn_http_server *srv = c->srv;
    struct sockaddr_storage ss;
    int len = sizeof ss;
    if (uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&ss, &len) < 0)
        return -1;
    uint8_t addr[16] = {0};
    if (ss.ss_family == AF_INET) {
        addr[10] = addr[11] = 0xff; /* ::ffff:a.b.c.d */
        memcpy(addr + 12, &((struct sockaddr_in *)&ss)->sin_addr, 4);
    } else {
        memcpy(addr, &((struct sockaddr_in6 *)&ss)->sin6_addr, 16);
    }
    conn_peer *p = rn_map_get(&srv->peers, addr, sizeof addr);
    if (p && p->count >= srv->cfg.max_connections_per_ip)
        return -1;
    if (!p) {
        p = rn_xcalloc(1, sizeof *p);
        memcpy(p->addr, addr, sizeof addr);
        rn_map_put(&srv->peers, p->addr, sizeof p->addr, p);
    }
    p->count++;
    c->peer = p;
    return 0;
}

/* Uncounts c from its client address, forgetting an address left with none. */
static void peer_leave(rn_conn *c) {
    conn_peer *p = c->peer;
    if (!p)
        return;
    c->peer = NULL;
    if (--p->count == 0) {
        rn_map_remove(&c->srv->peers, p->addr, sizeof p->addr);
        free(p);
    }
}

void conn_close(rn_conn *c) {
    if (c->closed)
        return;
    c->closed = 1;
    peer_leave(c);
    if (c->proto)
        c->proto->closing(c);
    uv_close((uv_handle_t *)&c->tcp, on_handle_closed);
    uv_close((uv_handle_t *)&c->timer, on_handle_closed);
}

static void on_shutdown(uv_shutdown_t *sr, int status) {
    rn_conn *c = sr->data;
    free(sr);
    if (status < 0)
        conn_close(c); /* idempotent; also runs (ECANCELED) before a close completes */
}

/* Ends a connection whose last response is written: shuts the write side
 * and reads (and drops) what the client still sends until it closes or
 * LINGER_MS pass; closes at once when the client's input ended. Closing
 * with unread input would make the kernel send a reset, and the client
 * could lose the response it was sent (a 413, 431 or 400 to a client still
 * sending). */
static void conn_finish(rn_conn *c) {
    assert(c->ending);
    if (c->closed || c->lingering)
        return;
    if (c->input_ended) {
        conn_close(c);
        return;
    }
    c->lingering = 1;
    uv_shutdown_t *sr = rn_xcalloc(1, sizeof *sr);
    sr->data = c;
    if (c->bytes->shutdown(c, sr, on_shutdown) < 0) {
        free(sr);
        conn_close(c);
        return;
    }
    c->input.len = c->input_off = 0;
    conn_arm_timer(c, LINGER_MS); /* on_timeout closes: the connection is ending */
    conn_read_start(c);
}

void conn_end(rn_conn *c) {
    if (c->closed)
        return;
    c->ending = 1;
    conn_read_stop(c);
    conn_finish_when_written(c);
}

/* Whether listener is one of the peer listener's sockets. */
static int is_peer_listener(const rn_http_server *srv, const uv_stream_t *listener) {
    const uv_tcp_t *t = (const uv_tcp_t *)listener;
    return t >= srv->peer_listeners.tcp && t < srv->peer_listeners.tcp + RN_LISTEN_MAX;
}

static void on_connection(uv_stream_t *listener, int status) {
    rn_http_server *srv = listener->data;
    if (status < 0)
        return;
    rn_conn *c = rn_xcalloc(1, sizeof *c);
    c->srv = srv;
    c->peer_listener = is_peer_listener(srv, listener);
    uv_tcp_init(srv->loop, &c->tcp);
    c->tcp.data = c;
    c->bytes = &rn_tcp_bytes;
    if (uv_accept(listener, (uv_stream_t *)&c->tcp) < 0) {
        free(c);
        return;
    }
    uv_timer_init(srv->loop, &c->timer);
    c->timer.data = c;
    c->handles_open = 2;
    rn_list_push_front(&srv->conns, &c->link);
    srv->conn_count++;
    if (srv->stopping ||
        (srv->cfg.max_connections && (int)srv->conn_count > srv->cfg.max_connections) ||
        (srv->cfg.max_connections_per_ip && peer_join(c) < 0)) {
        conn_close(c);
        return;
    }
    uv_tcp_nodelay(&c->tcp, 1);
    rn_tls_context *tls = c->peer_listener ? srv->cfg.peer_tls : srv->cfg.tls;
    if (!tls)
        conn_attach_protocol(c, NULL, 0);
    else if (tls_accept(c, tls) < 0) {
        conn_close(c);
        return;
    }
    conn_arm_timer(c, srv->cfg.idle_timeout_ms);
    conn_read_start(c);
}

rn_http_server *rn_http_listen(uv_loop_t *loop, const rn_http_config *cfg, rn_request_fn on_request,
                               void *arg, char *err, size_t errcap) {
    rn_http_server *srv = rn_xcalloc(1, sizeof *srv);
    srv->loop = loop;
    srv->cfg = *cfg;
    if (!srv->cfg.http2_max_streams)
        srv->cfg.http2_max_streams = 100;
    if (!srv->cfg.http2_max_header_list_bytes)
        srv->cfg.http2_max_header_list_bytes = 16384;
    if (!srv->cfg.http2_header_table_bytes)
        srv->cfg.http2_header_table_bytes = 4096;
    if (!srv->cfg.http2_max_control_frames)
        srv->cfg.http2_max_control_frames = 200;
    srv->on_request = on_request;
    srv->arg = arg;
    if (rn_listeners_open(&srv->listeners, loop, cfg->host, cfg->port, on_connection, srv, err,
                          errcap) != 0) {
        uv_run(loop, UV_RUN_NOWAIT); /* the listeners that were opened finish closing */
        rn_http_free(srv);
        return NULL;
    }
    if (cfg->peer_host && rn_listeners_open(&srv->peer_listeners, loop, cfg->peer_host,
                                            cfg->peer_port, on_connection, srv, err, errcap) != 0) {
        rn_listeners_close(&srv->listeners);
        uv_run(loop, UV_RUN_NOWAIT);
        rn_http_free(srv);
        return NULL;
    }
    if (cfg->fanout_threads > 0)
        srv->fanout = rn_fanout_new(cfg->fanout_threads);
    return srv;
}

int rn_http_listen_addresses(const rn_http_server *srv, char *out, size_t cap) {
    return rn_listeners_describe(&srv->listeners, out, cap);
}

void rn_http_stop_accepting(rn_http_server *srv) {
    if (srv->stopping)
        return;
    srv->stopping = 1;
    rn_listeners_close(&srv->listeners);
    rn_listeners_close(&srv->peer_listeners);
    for (rn_list_node *n = srv->conns.first, *next; n; n = next) {
        next = n->next;
        rn_conn *c = rn_list_entry(n, rn_conn, link);
        if (!c->closed && (!c->proto || c->proto->idle(c)))
            conn_close(c);
    }
}

size_t rn_http_connections(const rn_http_server *srv) {
    return srv->conn_count;
}

size_t rn_http_active_connections(const rn_http_server *srv) {
    size_t n = 0;
    for (const rn_list_node *l = srv->conns.first; l; l = l->next) {
        const rn_conn *c = rn_list_entry(l, rn_conn, link);
        if (!c->closed && c->proto && c->proto->busy(c))
            n++;
    }
    return n;
}

void rn_http_close(rn_http_server *srv) {
    if (!srv->stopping)
        rn_http_stop_accepting(srv);
    for (rn_list_node *n = srv->conns.first, *next; n; n = next) {
        next = n->next;
        rn_conn *c = rn_list_entry(n, rn_conn, link);
        conn_close(c);
    }
}

void rn_http_free(rn_http_server *srv) {
    rn_map_free(&srv->peers); /* empty: every connection left its peer */
    rn_fanout_free(srv->fanout);
    free(srv->batch);
    free(srv);
}
