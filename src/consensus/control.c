/*
 * control.c — the control channel between nodes: one outgoing connection
 * per peer for this node's asks (and their answers), the accepted ones for
 * the peers' asks. See control.h.
 *
 * Ownership: the channel owns every socket (outgoing ones from their
 * connect, accepted ones from rn_ctl_accept) until its handle is closed, and
 * a link per peer asked (its address, its current socket, the bytes waiting
 * for the connection). TCP handles (and the plaintext streams of TLS
 * links) are raft_malloc'd, as the mux's are.
 */
#include "consensus/control.h"

#include <assert.h>
#include <raft.h>
#include <stdlib.h>
#include <string.h>

#include "consensus/handshake.h"
#include "consensus/mux.h"
#include "consensus/peer_link.h"
#include "util/buf.h"
#include "util/list.h"
#include "util/log.h"

#define CTL_READ_BYTES (128u * RN_WIRE_CONFIRM_BYTES)   /* a multiple of a message */
#define CTL_MAX_PENDING (1024u * RN_WIRE_CONFIRM_BYTES) /* asks waiting for a connection */
#define CTL_MAX_QUEUED ((size_t)1 << 20)                /* bytes in a socket's write queue */

typedef struct ctl_sock ctl_sock;
typedef struct ctl_link ctl_link;

struct ctl_sock {
    rn_list_node node; /* on ctl->socks */
    rn_ctl *ctl;
    uv_tcp_t *tcp;       /* outgoing: the socket while it connects (then the link's) */
    uv_stream_t *stream; /* the socket, or its link's plaintext; the handshake's while hs is set */
    rn_handshake *hs;    /* outgoing: the hello (and proofs) under way */
    ctl_link *link;      /* outgoing: its link, until the socket closes; accepted: NULL */
    bool incoming;
    bool connected; /* outgoing: connected, the hello and pending asks written */
    bool closing;
    uint64_t peer;
    uint64_t started_ms;
    uv_connect_t connect;
    size_t got; /* bytes in `in` not yet consumed */
    uint8_t in[CTL_READ_BYTES];
};

struct ctl_link {
    rn_list_node node; /* on ctl->links */
    uint64_t peer;
    char address[RN_WIRE_MAX_ADDRESS + 1];
    ctl_sock *sock;    /* NULL: no connection */
    uint64_t retry_at; /* no connection: no attempt before this loop time */
    rn_buf pending;    /* connecting: the asks, written once connected and authenticated */
};

struct rn_ctl {
    rn_ctl_options o;
    char self_address[RN_WIRE_MAX_ADDRESS + 1];
    rn_list links; /* one per peer asked (ctl_link.node) */
    rn_list socks; /* open sockets (ctl_sock.node) */
    uv_timer_t sweep;
    bool closing;
    unsigned open_handles;
    void (*done)(void *arg);
    void *done_arg;
    rn_log_throttle refusal_log[RN_PEER_REASON_COUNT];
};

typedef struct {
    uv_write_t req;
    uint8_t bytes[];
} ctl_write;

/* --- sockets --------------------------------------------------------------- */

static void ctl_maybe_done(rn_ctl *ctl) {
    if (!ctl->closing || ctl->open_handles > 0)
        return;
    void (*done)(void *) = ctl->done;
    void *arg = ctl->done_arg;
    free(ctl);
    if (done)
        done(arg);
}

static void sock_closed(uv_handle_t *h) {
    ctl_sock *s = h->data;
    rn_ctl *ctl = s->ctl;
    rn_list_remove(&ctl->socks, &s->node);
    raft_free(s->stream);
    free(s);
    assert(ctl->open_handles > 0);
    ctl->open_handles--;
    ctl_maybe_done(ctl);
}

/* Takes s off its link (if any): down, not retried for retry_ms. */
static void sock_unlink(ctl_sock *s, unsigned retry_ms) {
    ctl_link *l = s->link;
    if (l) {
        l->sock = NULL;
        l->retry_at = uv_now(s->ctl->o.loop) + retry_ms;
        l->pending.len = 0;
        s->link = NULL;
    }
}

/* Closes s; its link (if any) is down and not retried for retry_ms. */
static void sock_close(ctl_sock *s, unsigned retry_ms) {
    if (s->closing)
        return;
    s->closing = true;
    sock_unlink(s, retry_ms);
    if (s->hs)
        rn_handshake_abort(s->hs); /* sock_authenticated frees s */
    else
        uv_close((uv_handle_t *)s->stream, sock_closed);
}

static void sock_fail(ctl_sock *s) {
    sock_close(s, s->ctl->o.connect_retry_ms);
}

/* A socket with its handle initialized (a stream given, or a TCP handle
 * allocated here). */
static ctl_sock *sock_new(rn_ctl *ctl, uv_stream_t *stream) {
    ctl_sock *s = rn_xcalloc(1, sizeof *s);
    s->ctl = ctl;
    if (stream == NULL) {
        s->tcp = raft_malloc(sizeof *s->tcp);
        if (s->tcp == NULL)
            abort();
        uv_tcp_init(ctl->o.loop, s->tcp);
        stream = (uv_stream_t *)s->tcp;
    }
    s->stream = stream;
    stream->data = s;
    s->started_ms = uv_now(ctl->o.loop);
    rn_list_push_front(&ctl->socks, &s->node);
    ctl->open_handles++;
    return s;
}

static void write_done(uv_write_t *req, int status) {
    ctl_sock *s = req->handle->data;
    free(req->data);
    if (status < 0 && status != UV_ECANCELED)
        sock_fail(s);
}

/* Queues len bytes on s. Returns false (nothing queued) when the queue is
 * over its bound or libuv refuses. */
static bool sock_write(ctl_sock *s, const uint8_t *bytes, size_t len) {
    assert(!s->closing && len > 0);
    if (uv_stream_get_write_queue_size(s->stream) >= CTL_MAX_QUEUED)
        return false;
    ctl_write *w = rn_xmalloc(sizeof *w + len);
    memcpy(w->bytes, bytes, len);
    w->req.data = w;
    uv_buf_t b = uv_buf_init((char *)w->bytes, (unsigned)len);
    if (uv_write(&w->req, s->stream, &b, 1, write_done) != 0) {
        free(w);
        sock_fail(s);
        return false;
    }
    return true;
}

static void alloc_in(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
    (void)suggested;
    ctl_sock *s = h->data;
    assert(s->got < sizeof s->in);
    buf->base = (char *)s->in + s->got;
    buf->len = sizeof s->in - s->got;
}

/* Handles one message; false: s was closed (a protocol error, or by a
 * callback) and nothing more is read. */
static bool handle_message(ctl_sock *s, const uint8_t *bytes) {
    rn_ctl *ctl = s->ctl;
    rn_wire_confirm m;
    rn_wire_confirm_kind expected = s->incoming ? RN_WIRE_CONFIRM_ASK : RN_WIRE_CONFIRM_ANSWER;
    if (rn_wire_confirm_decode(bytes, &m) != 0 || m.kind != expected) {
        sock_fail(s);
        return false;
    }
    if (s->incoming) {
        rn_wire_confirm answer;
        if (ctl->o.on_ask(ctl->o.ctx, s->peer, &m, &answer)) {
            assert(answer.kind == RN_WIRE_CONFIRM_ANSWER);
            uint8_t out[RN_WIRE_CONFIRM_BYTES];
            rn_wire_confirm_encode(&answer, out);
            if (!sock_write(s, out, sizeof out))
                sock_fail(s); /* the asker does not read its answers */
        }
    } else {
        ctl->o.on_answer(ctl->o.ctx, s->peer, &m);
    }
    return !s->closing;
}

static void read_in(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf) {
    (void)buf;
    ctl_sock *s = stream->data;
    if (nread == 0 || s->closing)
        return;
    if (nread < 0) {
        sock_fail(s);
        return;
    }
    s->got += (size_t)nread;
    size_t at = 0;
    while (s->got - at >= RN_WIRE_CONFIRM_BYTES) {
        if (!handle_message(s, s->in + at))
            return;
        at += RN_WIRE_CONFIRM_BYTES;
    }
    memmove(s->in, s->in + at, s->got - at);
    s->got -= at;
}

/* --- outgoing ------------------------------------------------------------ */

/* The hello (and with a key the proofs) are done: the pending asks go. */
static void sock_authenticated(void *arg, uv_stream_t *stream, rn_peer_reason reason) {
    ctl_sock *s = arg;
    rn_ctl *ctl = s->ctl;
    s->hs = NULL;
    if (stream == NULL || s->closing) { /* the handshake closed and freed the handle */
        assert(stream == NULL);
        if (reason != RN_PEER_MISSING)
            rn_log_throttled(&ctl->refusal_log[reason], 10000, RN_LOG_WARN, "cluster_peer_refusal",
                             "node %llu refused this node's control connection (%s): %s",
                             (unsigned long long)s->peer, rn_peer_reason_name(reason),
                             rn_peer_reason_text(reason));
        sock_unlink(s, ctl->o.connect_retry_ms);
        rn_list_remove(&ctl->socks, &s->node);
        free(s);
        assert(ctl->open_handles > 0);
        ctl->open_handles--;
        ctl_maybe_done(ctl);
        return;
    }
    stream->data = s;
    ctl_link *l = s->link;
    assert(l != NULL && l->pending.len > 0);
    s->connected = true;
    bool written = sock_write(s, l->pending.data, l->pending.len);
    l->pending.len = 0;
    if (!written || uv_read_start(s->stream, alloc_in, read_in) != 0)
        sock_fail(s);
}

static void on_connected(uv_connect_t *req, int status) {
    ctl_sock *s = req->data;
    if (s->closing)
        return;
    if (status < 0) {
        sock_fail(s);
        return;
    }
    rn_ctl *ctl = s->ctl;
    rn_mux_tune_socket(s->tcp, ctl->o.tcp_nodelay, ctl->o.peer_timeout_ms);
    static const rn_secret none = {0};
    const rn_secret *key = ctl->o.key ? ctl->o.key : &none;
    rn_wire_auth auth = ctl->o.tls ? RN_WIRE_AUTH_CERT
                        : key->len ? RN_WIRE_AUTH_KEY
                                   : RN_WIRE_AUTH_NONE;
    if (ctl->o.tls) {
        s->stream = rn_peer_link_open(ctl->o.tls, s->tcp, s->peer);
        if (s->stream == NULL) { /* the link closed the socket */
            s->closing = true;
            sock_authenticated(s, NULL, RN_PEER_MISSING);
            return;
        }
        s->stream->data = s;
    }
    rn_buf hello = {0};
    if (rn_wire_hello_encode(&hello, RN_WIRE_CONTROL_GROUP, ctl->o.self_id, ctl->o.cluster_tag,
                             ctl->self_address, auth) != 0)
        abort(); /* rn_ctl_open checked the address */
    s->hs = rn_handshake_connect(s->stream, auth, key, hello.data, hello.len, s->peer,
                                 sock_authenticated, s);
    rn_buf_free(&hello);
}

/* Starts connecting l with its pending bytes; false when that failed at
 * once (l is then down until its retry time). */
static bool link_connect(rn_ctl *ctl, ctl_link *l) {
    assert(l->sock == NULL && l->pending.len > 0);
    struct sockaddr_storage addr;
    if (rn_wire_parse_address(l->address, &addr) != 0) {
        l->retry_at = uv_now(ctl->o.loop) + ctl->o.connect_retry_ms;
        l->pending.len = 0;
        return false;
    }
    ctl_sock *s = sock_new(ctl, NULL);
    s->peer = l->peer;
    s->link = l;
    l->sock = s;
    s->connect.data = s;
    if (uv_tcp_connect(&s->connect, s->tcp, (struct sockaddr *)&addr, on_connected) != 0) {
        sock_fail(s);
        return false;
    }
    return true;
}

static ctl_link *link_of(const rn_ctl *ctl, uint64_t peer) {
    for (rn_list_node *n = ctl->links.first; n; n = n->next) {
        ctl_link *l = rn_list_entry(n, ctl_link, node);
        if (l->peer == peer)
            return l;
    }
    return NULL;
}

static ctl_link *find_link(rn_ctl *ctl, uint64_t peer, const char *address) {
    ctl_link *l = link_of(ctl, peer);
    if (l == NULL) {
        l = rn_xcalloc(1, sizeof *l);
        l->peer = peer;
        rn_list_push_front(&ctl->links, &l->node);
    } else if (strcmp(l->address, address) == 0) {
        return l;
    } else if (l->sock) {
        sock_close(l->sock, 0); /* the peer moved: a new connection, at once */
    }
    snprintf(l->address, sizeof l->address, "%s", address);
    l->retry_at = 0;
    return l;
}

int rn_ctl_ask(rn_ctl *ctl, uint64_t peer, const char *address, const rn_wire_confirm *ask) {
    assert(ctl != NULL && peer != 0 && address != NULL && ask != NULL);
    assert(ask->kind == RN_WIRE_CONFIRM_ASK);
    if (ctl->closing || strlen(address) > RN_WIRE_MAX_ADDRESS)
        return -1;
    uint8_t msg[RN_WIRE_CONFIRM_BYTES];
    rn_wire_confirm_encode(ask, msg);
    ctl_link *l = find_link(ctl, peer, address);
    if (l->sock == NULL) {
        if (uv_now(ctl->o.loop) < l->retry_at)
            return -1;
        l->pending.len = 0;
        rn_buf_append(&l->pending, msg, sizeof msg);
        return link_connect(ctl, l) ? 0 : -1;
    }
    if (!l->sock->connected) {
        if (l->pending.len >= CTL_MAX_PENDING)
            return -1;
        rn_buf_append(&l->pending, msg, sizeof msg);
        return 0;
    }
    return sock_write(l->sock, msg, sizeof msg) ? 0 : -1;
}

/* Drops outgoing connections still not established after the timeout. */
static void on_sweep(uv_timer_t *t) {
    rn_ctl *ctl = t->data;
    uint64_t now = uv_now(ctl->o.loop);
    for (rn_list_node *n = ctl->socks.first; n; n = n->next) {
        ctl_sock *s = rn_list_entry(n, ctl_sock, node);
        if (!s->incoming && !s->connected && !s->closing &&
            now - s->started_ms >= ctl->o.connect_timeout_ms)
            sock_fail(s);
    }
}

/* --- accepted ------------------------------------------------------------ */

void rn_ctl_accept(void *arg, uint64_t sender, uv_stream_t *stream) {
    rn_ctl *ctl = arg;
    assert(ctl != NULL && stream != NULL);
    ctl_sock *s = sock_new(ctl, stream);
    s->incoming = true;
    s->peer = sender;
    if (ctl->closing) {
        sock_close(s, 0);
        return;
    }
    if (uv_read_start(stream, alloc_in, read_in) != 0)
        sock_close(s, 0);
}

/* --- the channel --------------------------------------------------------- */

rn_ctl *rn_ctl_open(const rn_ctl_options *o) {
    assert(o != NULL && o->loop != NULL && o->self_id != 0 && o->self_address != NULL);
    assert(o->on_ask != NULL && o->on_answer != NULL && o->connect_timeout_ms > 0);
    assert(strlen(o->self_address) > 0 && strlen(o->self_address) <= RN_WIRE_MAX_ADDRESS);
    rn_ctl *ctl = rn_xcalloc(1, sizeof *ctl);
    ctl->o = *o;
    snprintf(ctl->self_address, sizeof ctl->self_address, "%s", o->self_address);
    ctl->o.self_address = ctl->self_address;
    uv_timer_init(o->loop, &ctl->sweep);
    ctl->sweep.data = ctl;
    uint64_t every = o->connect_timeout_ms / 2 ? o->connect_timeout_ms / 2 : 1;
    uv_timer_start(&ctl->sweep, on_sweep, every, every);
    ctl->open_handles = 1;
    return ctl;
}

static void sweep_closed(uv_handle_t *h) {
    rn_ctl *ctl = h->data;
    assert(ctl->open_handles > 0);
    ctl->open_handles--;
    ctl_maybe_done(ctl);
}

void rn_ctl_close(rn_ctl *ctl, void (*done)(void *arg), void *arg) {
    assert(ctl != NULL && !ctl->closing);
    ctl->closing = true;
    ctl->done = done;
    ctl->done_arg = arg;
    for (rn_list_node *n = ctl->socks.first; n; n = n->next)
        sock_close(rn_list_entry(n, ctl_sock, node), 0);
    while (!rn_list_empty(&ctl->links)) {
        ctl_link *l = rn_list_entry(ctl->links.first, ctl_link, node);
        rn_list_remove(&ctl->links, &l->node);
        rn_buf_free(&l->pending);
        free(l);
    }
    uv_close((uv_handle_t *)&ctl->sweep, sweep_closed);
}
