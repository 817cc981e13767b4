/*
 * mux.c — one TCP port per node for every Raft group: libraft's transport
 * interface per group over one listener, with the hello of wire.h. See mux.h.
 *
 * Handle ownership: the mux owns its listener, its sweep timer, its idle
 * handle (which fires transports' close callbacks outside libraft's call)
 * and every accepted connection until its hello is complete. A group owns
 * its outgoing connection attempts until libraft's connect callback. A
 * stream handed to libraft is libraft's from then on.
 */
#include "consensus/mux.h"

#include <assert.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <raft.h>
#include <raft/uv.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "consensus/handshake.h"
#include "consensus/peer_link.h"
#include "consensus/wire.h"
#include "util/buf.h"
#include "util/list.h"
#include "util/log.h"

typedef struct mux_group mux_group;
typedef struct mux_connect mux_connect;
typedef struct mux_incoming mux_incoming;

struct mux_group {
    struct raft_uv_transport transport; /* impl points back here */
    rn_mux *mux;
    unsigned index;
    bool initialized; /* libraft called init */
    raft_id id;
    char address[RN_WIRE_MAX_ADDRESS + 1];
    raft_uv_accept_cb accept_cb; /* set by listen; NULL: refuse incoming */
    bool closing;
    raft_uv_transport_close_cb close_cb;
    rn_list connects;       /* outgoing attempts not yet reported (mux_connect.link) */
    mux_group *next_closed; /* on mux->closed: close_cb is due */
};

struct mux_connect {
    rn_list_node link; /* on group->connects */
    mux_group *group;
    struct raft_uv_connect *req;
    raft_uv_connect_cb cb;
    uv_tcp_t *tcp;       /* raft_malloc'd; the link's once stream is its plaintext */
    uv_stream_t *stream; /* the tcp, or its link's plaintext (raft_malloc'd): libraft
                          * frees it once handed over; the handshake's while hs is set */
    uv_connect_t connect;
    rn_handshake *hs; /* the hello (and proofs) under way */
    uint64_t peer_id; /* the node libraft connects to */
    rn_buf hello;
    bool closing;
    int status; /* reported when the handle is closed */
};

struct mux_incoming {
    rn_list_node link; /* on mux->incoming */
    rn_mux *mux;
    uv_stream_t *stream; /* raft_malloc'd, see mux_connect; the handshake's while hs is set */
    rn_handshake *hs;    /* the cluster key's proofs under way, after the hello */
    uint64_t accepted_ms;
    size_t prefix;   /* bytes before the hello: the link's certificate id, or none */
    size_t got;      /* bytes read (prefix and hello) */
    bool fixed_done; /* the fixed part is decoded into hello */
    rn_wire_hello hello;
    uint8_t bytes[RN_PEER_LINK_ID_BYTES + RN_WIRE_MAX_HELLO + 1];
};

struct rn_mux {
    rn_mux_options o;
    char listen_address[RN_WIRE_MAX_ADDRESS + 1];
    uv_tcp_t listener;
    uv_timer_t sweep;
    uv_idle_t defer;
    mux_group *groups;
    rn_list incoming; /* accepted, hello not complete (mux_incoming.link) */
    unsigned n_incoming;
    mux_group *closed;
    bool closing;
    unsigned open_handles; /* the mux's own handles still open while closing */
    void (*done)(void *arg);
    void *done_arg;
    rn_log_throttle refused_log[RN_PEER_REASON_COUNT]; /* incoming refused, per reason */
    rn_log_throttle refusal_log[RN_PEER_REASON_COUNT]; /* outgoing refused, per reason */
};

/* --- sockets --------------------------------------------------------------- */

void rn_mux_tune_socket(uv_tcp_t *tcp, bool nodelay, unsigned peer_timeout_ms) {
    (void)uv_tcp_nodelay(tcp, nodelay ? 1 : 0);
    if (peer_timeout_ms == 0)
        return;
    unsigned half_s = peer_timeout_ms / 2000 ? peer_timeout_ms / 2000 : 1;
    (void)uv_tcp_keepalive(tcp, 1, half_s);
    uv_os_fd_t fd;
    if (uv_fileno((uv_handle_t *)tcp, &fd) != 0)
        return;
    int interval = 1, count = (int)half_s;
    unsigned user_timeout = peer_timeout_ms;
    (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof interval);
    (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof count);
    (void)setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout, sizeof user_timeout);
}

static void tune_socket(rn_mux *m, uv_tcp_t *tcp) {
    rn_mux_tune_socket(tcp, m->o.tcp_nodelay, m->o.peer_timeout_ms);
}

static void free_raft_handle(uv_handle_t *h) {
    raft_free(h);
}

/* --- closing ------------------------------------------------------------- */

static void mux_maybe_done(rn_mux *m) {
    if (!m->closing || m->open_handles > 0)
        return;
    void (*done)(void *) = m->done;
    void *arg = m->done_arg;
    free(m->groups);
    free(m);
    if (done)
        done(arg);
}

static void mux_handle_closed(uv_handle_t *h) {
    rn_mux *m = h->data;
    assert(m->open_handles > 0);
    m->open_handles--;
    mux_maybe_done(m);
}

/* Fires the close callbacks of transports whose connections are all gone. */
static void on_defer(uv_idle_t *idle) {
    rn_mux *m = idle->data;
    uv_idle_stop(idle);
    mux_group *list = m->closed;
    m->closed = NULL;
    while (list) {
        mux_group *g = list;
        list = g->next_closed;
        raft_uv_transport_close_cb cb = g->close_cb;
        g->close_cb = NULL;
        if (cb)
            cb(&g->transport);
        if (!m->closing) { /* the group may be started again (consensus_group_start) */
            g->initialized = false;
            g->closing = false;
        }
    }
}

static void group_maybe_closed(mux_group *g) {
    if (!g->closing || !rn_list_empty(&g->connects) || g->close_cb == NULL)
        return;
    g->next_closed = g->mux->closed;
    g->mux->closed = g;
    uv_idle_start(&g->mux->defer, on_defer);
}

/* --- incoming ------------------------------------------------------------ */

static void unlink_incoming(rn_mux *m, mux_incoming *in) {
    rn_list_remove(&m->incoming, &in->link);
    m->n_incoming--;
}

static void incoming_closed(uv_handle_t *h) {
    mux_incoming *in = h->data;
    rn_mux *m = in->mux;
    raft_free(in->stream);
    free(in);
    assert(m->open_handles > 0);
    m->open_handles--;
    mux_maybe_done(m);
}

/* Closes an accepted connection that did not complete a valid hello (or
 * gives up its handshake, which reports to incoming_authenticated). */
static void refuse_incoming(mux_incoming *in, const char *why) {
    rn_mux *m = in->mux;
    if (in->hs) {
        rn_handshake_abort(in->hs);
        return;
    }
    unlink_incoming(m, in);
    if (why)
        rn_log(RN_LOG_WARN, "cluster_hello_refused", "incoming raft connection closed: %s", why);
    in->stream->data = in; /* a handshake that ended (a group not running here) had it */
    uv_close((uv_handle_t *)in->stream, incoming_closed);
}

static size_t hello_needed(const mux_incoming *in) {
    return in->prefix + RN_WIRE_FIXED_BYTES + (in->fixed_done ? in->hello.address_len : 0);
}

/* The hello's bytes (after the prefix) and their count once complete. */
static const uint8_t *hello_bytes(const mux_incoming *in) {
    return in->bytes + in->prefix;
}

/* The node id the client's certificate names (the link's prefix). */
static uint64_t certificate_id(const mux_incoming *in) {
    uint64_t v = 0;
    for (unsigned i = 0; i < RN_PEER_LINK_ID_BYTES; i++)
        v |= (uint64_t)in->bytes[i] << (8 * i);
    return v;
}

static void alloc_hello(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
    (void)suggested;
    mux_incoming *in = h->data;
    size_t need = hello_needed(in);
    assert(in->got < need);
    buf->base = (char *)in->bytes + in->got;
    buf->len = need - in->got;
}

/* Takes a completed hello's stream off the mux (its receiver owns it from
 * now on) and frees in. */
static uv_stream_t *hand_over(mux_incoming *in) {
    rn_mux *m = in->mux;
    uv_read_stop(in->stream);
    unlink_incoming(m, in);
    m->open_handles--;
    uv_stream_t *stream = in->stream;
    stream->data = NULL;
    free(in);
    return stream;
}

/* Counts and logs (throttled) a refused incoming connection. */
static void log_refused(rn_mux *m, const mux_incoming *in, rn_peer_reason reason) {
    rn_peer_refused(RN_PEER_CHANNEL_RAFT, reason);
    char cert[64] = "";
    if (m->o.tls)
        snprintf(cert, sizeof cert, " (its certificate names node %llu)",
                 (unsigned long long)certificate_id(in));
    rn_log_throttled(&m->refused_log[reason], 10000, RN_LOG_WARN, "cluster_peer_refused",
                     "raft connection claiming node %llu%s refused (%s): %s",
                     (unsigned long long)in->hello.sender_id, cert, rn_peer_reason_name(reason),
                     rn_peer_reason_text(reason));
}

/* Hands a completed hello's stream to its group or the control channel, or
 * refuses it. */
static void dispatch_incoming(mux_incoming *in) {
    rn_mux *m = in->mux;
    raft_id sender = in->hello.sender_id;
    if (in->hello.group == RN_WIRE_CONTROL_GROUP) {
        if (m->o.control_accept == NULL) {
            refuse_incoming(in, "control connection, and no control channel");
            return;
        }
        uv_stream_t *stream = hand_over(in);
        m->o.control_accept(m->o.control_ctx, sender, stream);
        return;
    }
    mux_group *g = &m->groups[in->hello.group];
    if (g->accept_cb == NULL || g->closing) {
        refuse_incoming(in, NULL); /* the group is not listening (yet, or any more) */
        return;
    }
    char address[RN_WIRE_MAX_ADDRESS + 1];
    memcpy(address, hello_bytes(in) + RN_WIRE_FIXED_BYTES, in->hello.address_len);
    address[in->hello.address_len] = '\0';
    uv_stream_t *stream = hand_over(in);
    g->accept_cb(&g->transport, sender, address, stream);
}

/* The cluster key's proofs of an incoming connection are done. */
static void incoming_authenticated(void *arg, uv_stream_t *stream, rn_peer_reason reason) {
    mux_incoming *in = arg;
    rn_mux *m = in->mux;
    in->hs = NULL;
    if (stream) {
        dispatch_incoming(in);
        return;
    }
    if (reason != RN_PEER_MISSING) /* MISSING: given up, or the peer went away */
        log_refused(m, in, reason);
    unlink_incoming(m, in);
    free(in);
    m->open_handles--; /* the handshake closed the handle */
    mux_maybe_done(m);
}

/* How this node's peers prove they are members. */
static rn_wire_auth mux_auth(const rn_mux *m) {
    return m->o.tls                    ? RN_WIRE_AUTH_CERT
           : m->o.key && m->o.key->len ? RN_WIRE_AUTH_KEY
                                       : RN_WIRE_AUTH_NONE;
}

/* A complete hello: checks how its sender proves it is a member, then
 * dispatches it (no key; with certificates, after the verdict is queued),
 * or proves it (the cluster key). */
static void authenticate_incoming(mux_incoming *in) {
    rn_mux *m = in->mux;
    rn_wire_auth auth = mux_auth(m);
    rn_peer_reason refused = RN_PEER_OK;
    if (in->hello.auth != auth)
        refused = auth == RN_WIRE_AUTH_KEY ? RN_PEER_MISSING : RN_PEER_MODE;
    else if (auth != RN_WIRE_AUTH_NONE && in->hello.sender_id == m->o.self_id)
        refused = RN_PEER_WRONG_ID;
    else if (auth == RN_WIRE_AUTH_CERT && certificate_id(in) != in->hello.sender_id)
        refused = RN_PEER_CERT_ID;
    if (refused != RN_PEER_OK) {
        log_refused(m, in, refused);
        uv_stream_t *stream = hand_over(in); /* the mux is done with it: refused below */
        if (refused == RN_PEER_MISSING)
            uv_close((uv_handle_t *)stream, free_raft_handle); /* the sender does not read */
        else
            rn_handshake_refuse(stream, refused);
        return;
    }
    if (auth == RN_WIRE_AUTH_CERT)
        rn_handshake_admit(in->stream);
    if (auth != RN_WIRE_AUTH_KEY) {
        dispatch_incoming(in);
        return;
    }
    uv_read_stop(in->stream);
    in->hs =
        rn_handshake_serve(in->stream, m->o.key, hello_bytes(in), hello_needed(in) - in->prefix,
                           m->o.self_id, incoming_authenticated, in);
}

static void read_hello(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf) {
    (void)buf;
    mux_incoming *in = s->data;
    if (nread == 0)
        return;
    if (nread < 0) {
        refuse_incoming(in, NULL); /* the peer went away mid-hello */
        return;
    }
    in->got += (size_t)nread;
    assert(in->got <= hello_needed(in));
    if (!in->fixed_done && in->got == in->prefix + RN_WIRE_FIXED_BYTES) {
        rn_wire_status st = rn_wire_hello_decode(hello_bytes(in), in->mux->o.groups,
                                                 in->mux->o.cluster_tag, &in->hello);
        if (st != RN_WIRE_OK) {
            refuse_incoming(in, rn_wire_status_name(st));
            return;
        }
        in->fixed_done = true;
    }
    if (in->fixed_done && in->got == hello_needed(in))
        authenticate_incoming(in);
}

static void on_connection(uv_stream_t *server, int status) {
    rn_mux *m = server->data;
    if (status < 0) {
        rn_log(RN_LOG_WARN, "cluster_accept_failed", "%s", uv_strerror(status));
        return;
    }
    uv_tcp_t *tcp = raft_malloc(sizeof *tcp);
    if (tcp == NULL)
        abort();
    uv_tcp_init(m->o.loop, tcp);
    if (uv_accept(server, (uv_stream_t *)tcp) != 0 || m->closing ||
        m->n_incoming >= m->o.max_handshakes) {
        uv_close((uv_handle_t *)tcp, free_raft_handle);
        return;
    }
    tune_socket(m, tcp);
    uv_stream_t *stream = (uv_stream_t *)tcp;
    if (m->o.tls && (stream = rn_peer_link_open(m->o.tls, tcp, 0)) == NULL)
        return; /* the link closed tcp */
    mux_incoming *in = rn_xcalloc(1, sizeof *in);
    in->mux = m;
    in->stream = stream;
    in->prefix = m->o.tls ? RN_PEER_LINK_ID_BYTES : 0;
    in->accepted_ms = uv_now(m->o.loop);
    stream->data = in;
    rn_list_push_front(&m->incoming, &in->link);
    m->n_incoming++;
    m->open_handles++;
    uv_read_start(stream, alloc_hello, read_hello);
}

/* Closes connections whose hello did not arrive in time. */
static void on_sweep(uv_timer_t *t) {
    rn_mux *m = t->data;
    uint64_t now = uv_now(m->o.loop);
    for (rn_list_node *n = m->incoming.first, *next; n; n = next) {
        next = n->next;
        mux_incoming *in = rn_list_entry(n, mux_incoming, link);
        if (now - in->accepted_ms >= m->o.handshake_timeout_ms)
            refuse_incoming(in, "no hello in time");
    }
}

/* --- outgoing ------------------------------------------------------------ */

static void unlink_connect(mux_group *g, mux_connect *c) {
    rn_list_remove(&g->connects, &c->link);
}

/* Reports c to libraft (the stream, or NULL with c->status) and frees
 * it. */
static void report_connect(mux_connect *c, uv_stream_t *stream) {
    mux_group *g = c->group;
    unlink_connect(g, c);
    struct raft_uv_connect *req = c->req;
    raft_uv_connect_cb cb = c->cb;
    int status = stream ? 0 : c->status;
    rn_buf_free(&c->hello);
    free(c);
    cb(req, stream, status);
    group_maybe_closed(g);
}

static void connect_closed(uv_handle_t *h) {
    mux_connect *c = h->data;
    raft_free(c->stream);
    report_connect(c, NULL);
}

static void fail_connect(mux_connect *c, int status) {
    if (c->closing)
        return;
    c->closing = true;
    c->status = status;
    if (c->hs)
        rn_handshake_abort(c->hs); /* connect_authenticated reports */
    else
        uv_close((uv_handle_t *)c->stream, connect_closed);
}

/* The hello (and with a key the proofs) of an outgoing connection are
 * done: the stream goes to libraft, or the failure does. */
static void connect_authenticated(void *arg, uv_stream_t *stream, rn_peer_reason reason) {
    mux_connect *c = arg;
    rn_mux *m = c->group->mux;
    c->hs = NULL;
    if (stream && c->closing) { /* cannot happen: an abort reports no stream */
        uv_close((uv_handle_t *)stream, free_raft_handle);
        stream = NULL;
    }
    if (stream == NULL) {
        if (!c->closing)
            c->status = RAFT_NOCONNECTION;
        if (reason != RN_PEER_MISSING)
            rn_log_throttled(&m->refusal_log[reason], 10000, RN_LOG_WARN, "cluster_peer_refusal",
                             "node %llu refused this node's raft connection (%s): %s",
                             (unsigned long long)c->peer_id, rn_peer_reason_name(reason),
                             rn_peer_reason_text(reason));
    }
    report_connect(c, stream);
}

static void connected(uv_connect_t *creq, int status) {
    mux_connect *c = creq->data;
    if (status == UV_ECANCELED || c->closing)
        return;
    if (status < 0) {
        fail_connect(c, RAFT_NOCONNECTION);
        return;
    }
    rn_mux *m = c->group->mux;
    tune_socket(m, c->tcp);
    if (m->o.tls && (c->stream = rn_peer_link_open(m->o.tls, c->tcp, c->peer_id)) == NULL) {
        c->closing = true; /* the link closed the socket */
        c->status = RAFT_NOCONNECTION;
        report_connect(c, NULL);
        return;
    }
    static const rn_secret none = {0};
    c->hs = rn_handshake_connect(c->stream, mux_auth(m), m->o.key ? m->o.key : &none, c->hello.data,
                                 c->hello.len, c->peer_id, connect_authenticated, c);
}

/* --- the raft_uv_transport interface ------------------------------------ */

static int t_init(struct raft_uv_transport *t, raft_id id, const char *address) {
    mux_group *g = t->impl;
    assert(!g->initialized && id > 0);
    if (strcmp(address, g->mux->listen_address) != 0) {
        snprintf(t->errmsg, sizeof t->errmsg, "address %.100s is not the listener's %.100s",
                 address, g->mux->listen_address);
        return RAFT_INVALID;
    }
    g->initialized = true;
    g->id = id;
    snprintf(g->address, sizeof g->address, "%s", address);
    return 0;
}

static int t_listen(struct raft_uv_transport *t, raft_uv_accept_cb cb) {
    mux_group *g = t->impl;
    assert(g->initialized && !g->closing && cb != NULL);
    g->accept_cb = cb;
    return 0;
}

static int t_connect(struct raft_uv_transport *t, struct raft_uv_connect *req, raft_id id,
                     const char *address, raft_uv_connect_cb cb) {
    mux_group *g = t->impl;
    rn_mux *m = g->mux;
    assert(g->initialized && !g->closing);
    struct sockaddr_storage addr;
    if (rn_wire_parse_address(address, &addr) != 0) {
        snprintf(t->errmsg, sizeof t->errmsg, "address %.200s is not numeric ip:port", address);
        return RAFT_NOCONNECTION;
    }
    mux_connect *c = rn_xcalloc(1, sizeof *c);
    c->group = g;
    c->req = req;
    c->cb = cb;
    c->peer_id = id;
    if (rn_wire_hello_encode(&c->hello, g->index, g->id, m->o.cluster_tag, g->address,
                             mux_auth(m)) != 0)
        abort(); /* t_init accepted the address, and the mux parsed it */
    c->tcp = raft_malloc(sizeof *c->tcp);
    if (c->tcp == NULL)
        abort();
    uv_tcp_init(m->o.loop, c->tcp);
    c->tcp->data = c;
    c->stream = (uv_stream_t *)c->tcp;
    c->connect.data = c;
    int rv = uv_tcp_connect(&c->connect, c->tcp, (struct sockaddr *)&addr, connected);
    if (rv != 0) {
        snprintf(t->errmsg, sizeof t->errmsg, "connect: %s", uv_strerror(rv));
        uv_close((uv_handle_t *)c->tcp, free_raft_handle);
        rn_buf_free(&c->hello);
        free(c);
        return RAFT_NOCONNECTION;
    }
    rn_list_push_front(&g->connects, &c->link);
    return 0;
}

static void t_close(struct raft_uv_transport *t, raft_uv_transport_close_cb cb) {
    mux_group *g = t->impl;
    assert(g->initialized && !g->closing);
    g->closing = true;
    g->accept_cb = NULL;
    g->close_cb = cb;
    for (rn_list_node *n = g->connects.first; n; n = n->next)
        fail_connect(rn_list_entry(n, mux_connect, link), RAFT_CANCELED);
    group_maybe_closed(g);
}

/* --- the mux ------------------------------------------------------------- */

int rn_mux_open(const rn_mux_options *o, rn_mux **out) {
    assert(o != NULL && out != NULL && o->loop != NULL && o->groups > 0);
    assert(o->max_handshakes > 0 && o->handshake_timeout_ms > 0);
    struct sockaddr_storage addr;
    if (strlen(o->listen_address) > RN_WIRE_MAX_ADDRESS ||
        rn_wire_parse_address(o->listen_address, &addr) != 0)
        return UV_EINVAL;
    rn_mux *m = rn_xcalloc(1, sizeof *m);
    m->o = *o;
    snprintf(m->listen_address, sizeof m->listen_address, "%s", o->listen_address);
    m->o.listen_address = m->listen_address;
    uv_tcp_init(o->loop, &m->listener);
    m->listener.data = m;
    int rv = uv_tcp_bind(&m->listener, (struct sockaddr *)&addr, 0);
    if (rv == 0)
        rv = uv_listen((uv_stream_t *)&m->listener, 128, on_connection);
    if (rv != 0) {
        m->closing = true;
        m->open_handles = 1;
        uv_close((uv_handle_t *)&m->listener, mux_handle_closed);
        return rv;
    }
    uv_timer_init(o->loop, &m->sweep);
    m->sweep.data = m;
    uint64_t every = o->handshake_timeout_ms / 2 ? o->handshake_timeout_ms / 2 : 1;
    uv_timer_start(&m->sweep, on_sweep, every, every);
    uv_idle_init(o->loop, &m->defer);
    m->defer.data = m;
    m->open_handles = 3;
    m->groups = rn_xcalloc(o->groups, sizeof *m->groups);
    for (unsigned i = 0; i < o->groups; i++) {
        mux_group *g = &m->groups[i];
        g->mux = m;
        g->index = i;
        g->transport.impl = g;
        g->transport.init = t_init;
        g->transport.listen = t_listen;
        g->transport.connect = t_connect;
        g->transport.close = t_close;
    }
    *out = m;
    return 0;
}

struct raft_uv_transport *rn_mux_transport(rn_mux *m, unsigned group) {
    assert(m != NULL && group < m->o.groups && !m->closing);
    return &m->groups[group].transport;
}

void rn_mux_close(rn_mux *m, void (*done)(void *arg), void *arg) {
    assert(m != NULL && !m->closing);
    for (unsigned i = 0; i < m->o.groups; i++) {
        const mux_group *g = &m->groups[i];
        assert(!g->initialized ||
               (g->closing && rn_list_empty(&g->connects) && g->close_cb == NULL));
        (void)g;
    }
    m->closing = true;
    m->done = done;
    m->done_arg = arg;
    for (rn_list_node *n = m->incoming.first, *next; n; n = next) {
        next = n->next; /* one in its handshake stays listed until it reports */
        refuse_incoming(rn_list_entry(n, mux_incoming, link), NULL);
    }
    uv_close((uv_handle_t *)&m->listener, mux_handle_closed);
    uv_close((uv_handle_t *)&m->sweep, mux_handle_closed);
    uv_close((uv_handle_t *)&m->defer, mux_handle_closed);
}
