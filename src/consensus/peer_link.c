/*
 * peer_link.c — a Raft port connection's TLS between its socket and a
 * local socketpair. See peer_link.h.
 *
 * Ownership: a link owns its TCP handle (raft_malloc'd, as the mux's
 * sockets), its end of the socketpair and its SSL, and frees itself once
 * both handles are closed. The other end of the socketpair is the caller's
 * from rn_peer_link_open on.
 */
#include "consensus/peer_link.h"

#include <assert.h>
#include <openssl/err.h>
#include <raft.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "consensus/handshake.h"
#include "consensus/peer_auth.h"
#include "transport/tls.h"
#include "util/buf.h"
#include "util/log.h"

#define READ_BYTES 65536          /* bytes read from either side at once */
#define RECORD_BYTES 16384        /* the most plaintext one TLS record carries */
#define QUEUE_BYTES (1u << 20)    /* queued on one side: the other is not read */
#define TLS_HANDSHAKE_RECORD 0x16 /* the first byte of a TLS client's first record */

typedef struct {
    uv_tcp_t *tcp;   /* ciphertext */
    uv_pipe_t inner; /* plaintext: this link's end of the socketpair */
    SSL *ssl;
    BIO *rbio, *wbio;   /* ciphertext in and out (owned by ssl) */
    uint64_t peer;      /* connecting: the node asked for; accepting: 0 */
    bool started;       /* accepting: the first byte was a handshake record */
    bool established;   /* the handshake completed and the identity was checked */
    bool received;      /* plaintext came from the peer */
    bool inner_reading; /* the plaintext side is read */
    bool tcp_paused;    /* the socket is not read: the plaintext side holds too much */
    bool ending;        /* finishing: closed once the socket's writes are out */
    bool closing;
    unsigned cipher_writes; /* writes on the socket not yet completed */
    int handles;            /* open handles (2, until both closed) */
} link;

typedef struct {
    uv_write_t req;
    link *l;
    char bytes[];
} link_write;

static _Thread_local char read_buf[READ_BYTES];
/* Log throttles: [accepting][reason]; RN_PEER_OK's slot is for failures of
 * the peer's making (it refused this node, the connection broke). */
static rn_log_throttle throttles[2][RN_PEER_REASON_COUNT];

/* ---- ending ---- */

static void handle_closed(uv_handle_t *h) {
    link *l = h->data;
    if (--l->handles > 0)
        return;
    SSL_free(l->ssl);
    raft_free(l->tcp);
    free(l);
}

static void link_close(link *l) {
    if (l->closing)
        return;
    l->closing = true;
    uv_close((uv_handle_t *)l->tcp, handle_closed);
    uv_close((uv_handle_t *)&l->inner, handle_closed);
}

/* Stops reading both sides and closes once what is queued on the socket
 * (an alert, a refusal, close_notify) is out. */
static void link_end(link *l) {
    if (l->closing || l->ending)
        return;
    l->ending = true;
    uv_read_stop((uv_stream_t *)l->tcp);
    uv_read_stop((uv_stream_t *)&l->inner);
    if (l->cipher_writes == 0)
        link_close(l);
}

/* The reason of OpenSSL's last error, for a message. */
static const char *ssl_reason(void) {
    return ERR_peek_last_error() ? rn_tls_error_reason() : "the connection ended";
}

/* Logs (throttled) why the handshake or the connection failed, counting it
 * as a refusal when this node refused the peer (reason != RN_PEER_OK). */
static void report(const link *l, rn_peer_reason reason, const char *detail) {
    bool accepting = l->peer == 0;
    rn_log_throttle *t = &throttles[accepting][reason];
    if (reason != RN_PEER_OK) {
        rn_peer_refused(RN_PEER_CHANNEL_RAFT, reason);
        if (accepting)
            rn_log_throttled(t, 10000, RN_LOG_WARN, "cluster_peer_refused",
                             "raft connection refused (%s): %s: %s", rn_peer_reason_name(reason),
                             rn_peer_reason_text(reason), detail);
        else
            rn_log_throttled(t, 10000, RN_LOG_WARN, "cluster_peer_refused",
                             "raft connection to node %llu refused (%s): %s: %s",
                             (unsigned long long)l->peer, rn_peer_reason_name(reason),
                             rn_peer_reason_text(reason), detail);
    } else if (accepting) {
        rn_log_throttled(t, 10000, RN_LOG_WARN, "cluster_peer_refusal",
                         "a peer ended its raft connection during TLS (%s): does it use peer "
                         "certificates of the same CA, and does it trust this node's?",
                         detail);
    } else {
        rn_log_throttled(t, 10000, RN_LOG_WARN, "cluster_peer_refusal",
                         "node %llu ended this node's raft connection during TLS (%s): does it "
                         "use peer certificates of the same CA, and does it trust this node's?",
                         (unsigned long long)l->peer, detail);
    }
}

/* ---- writing ---- */

static void start_inner(link *l);
static void start_tcp(link *l);

static void cipher_written(uv_write_t *req, int status) {
    link_write *w = (link_write *)req;
    link *l = w->l;
    free(w);
    l->cipher_writes--;
    if (l->closing)
        return;
    if (status < 0 || (l->ending && l->cipher_writes == 0)) {
        link_close(l);
        return;
    }
    if (l->established && !l->inner_reading &&
        uv_stream_get_write_queue_size((uv_stream_t *)l->tcp) < QUEUE_BYTES / 2)
        start_inner(l);
}

static void plain_written(uv_write_t *req, int status) {
    link_write *w = (link_write *)req;
    link *l = w->l;
    free(w);
    if (l->closing)
        return;
    if (status < 0) {
        link_close(l);
        return;
    }
    if (l->tcp_paused &&
        uv_stream_get_write_queue_size((uv_stream_t *)&l->inner) < QUEUE_BYTES / 2) {
        l->tcp_paused = false;
        if (!l->ending)
            start_tcp(l);
    }
}

/* Queues len bytes on stream s (copied). Returns false (closed) on failure. */
static bool queue_bytes(link *l, uv_stream_t *s, const void *bytes, size_t len, uv_write_cb cb) {
    link_write *w = rn_xmalloc(sizeof *w + len);
    w->l = l;
    memcpy(w->bytes, bytes, len);
    uv_buf_t b = uv_buf_init(w->bytes, (unsigned)len);
    if (uv_write(&w->req, s, &b, 1, cb) != 0) {
        free(w);
        link_close(l);
        return false;
    }
    return true;
}

/* Sends what OpenSSL wrote (handshake, records, alerts); past the bound,
 * the plaintext side is not read until the socket drains. */
static bool flush_cipher(link *l) {
    size_t len = BIO_ctrl_pending(l->wbio);
    if (len == 0)
        return true;
    link_write *w = rn_xmalloc(sizeof *w + len);
    w->l = l;
    int got = BIO_read(l->wbio, w->bytes, (int)len);
    assert(got == (int)len);
    (void)got;
    uv_buf_t b = uv_buf_init(w->bytes, (unsigned)len);
    if (uv_write(&w->req, (uv_stream_t *)l->tcp, &b, 1, cipher_written) != 0) {
        free(w);
        link_close(l);
        return false;
    }
    l->cipher_writes++;
    if (l->inner_reading && uv_stream_get_write_queue_size((uv_stream_t *)l->tcp) >= QUEUE_BYTES) {
        uv_read_stop((uv_stream_t *)&l->inner);
        l->inner_reading = false;
    }
    return true;
}

/* ---- the socket's side: handshake and decryption ---- */

/* The peer sent plain text where a TLS handshake should start: a node
 * without peer certificates (or a stranger). It gets handshake.h's refusal
 * naming the mode, in plain text, so that a node with a cluster key can
 * log why. */
static void refuse_plain(link *l) {
    report(l, RN_PEER_MODE, "the peer does not speak TLS");
    uint8_t msg[RN_HANDSHAKE_MESSAGE_BYTES];
    rn_handshake_refusal(msg, RN_PEER_MODE);
    link_write *w = rn_xmalloc(sizeof *w + sizeof msg);
    w->l = l;
    memcpy(w->bytes, msg, sizeof msg);
    uv_buf_t b = uv_buf_init(w->bytes, sizeof msg);
    if (uv_write(&w->req, (uv_stream_t *)l->tcp, &b, 1, cipher_written) != 0) {
        free(w);
        link_close(l);
        return;
    }
    l->cipher_writes++;
    link_end(l);
}

/* Why a handshake failed, once OpenSSL gave up (or the peer went away:
 * eof). */
static void handshake_failed(link *l, bool eof) {
    bool accepting = l->peer == 0;
    long verify = SSL_get_verify_result(l->ssl);
    unsigned long e = ERR_peek_last_error();
    int reason = e ? ERR_GET_REASON(e) : 0;
    if (verify != X509_V_OK)
        report(l, RN_PEER_UNTRUSTED, X509_verify_cert_error_string(verify));
    else if (accepting && reason == SSL_R_PEER_DID_NOT_RETURN_A_CERTIFICATE)
        report(l, RN_PEER_MISSING, "no client certificate");
    else if (eof || reason >= SSL_AD_REASON_OFFSET) /* an alert from the peer */
        report(l, RN_PEER_OK, eof ? "the connection ended" : ssl_reason());
    else
        report(l, RN_PEER_MALFORMED, ssl_reason());
    ERR_clear_error();
}

/* The handshake completed: checks whom it was with, then opens the
 * plaintext side (the accepting side's first bytes there: the client's
 * node id). Returns false when the link ends. */
static bool established(link *l) {
    X509 *cert = SSL_get0_peer_certificate(l->ssl); /* verified: FAIL_IF_NO_PEER_CERT */
    uint64_t id = 0;
    int named = cert ? rn_peer_cert_node_id(cert, &id) : 0;
    l->established = true;
    if (l->peer != 0 && (named != 1 || id != l->peer)) {
        char detail[96];
        if (named == 1)
            snprintf(detail, sizeof detail, "its certificate is node %llu's",
                     (unsigned long long)id);
        else
            snprintf(detail, sizeof detail, "its certificate names no node id");
        report(l, RN_PEER_CERT_ID, detail);
        link_end(l);
        return false;
    }
    if (l->peer == 0) {
        uint8_t prefix[RN_PEER_LINK_ID_BYTES];
        uint64_t v = named == 1 ? id : 0;
        for (unsigned i = 0; i < sizeof prefix; i++)
            prefix[i] = (uint8_t)(v >> (8 * i));
        if (!queue_bytes(l, (uv_stream_t *)&l->inner, prefix, sizeof prefix, plain_written))
            return false;
    }
    start_inner(l);
    return !l->closing;
}

/* Advances the handshake. Returns 1 when established, 0 while it needs
 * more bytes, -1 when the link ends. */
static int handshake(link *l) {
    int r = SSL_do_handshake(l->ssl);
    int e = r == 1 ? SSL_ERROR_NONE : SSL_get_error(l->ssl, r);
    if (!flush_cipher(l)) /* the next flight, or an alert */
        return -1;
    if (e == SSL_ERROR_WANT_READ)
        return 0;
    if (e != SSL_ERROR_NONE) {
        handshake_failed(l, false);
        link_end(l);
        return -1;
    }
    return established(l) ? 1 : -1;
}

/* Decrypts what the read BIO holds and queues it on the plaintext side. */
static void decrypt(link *l) {
    rn_buf out = {0};
    int e = SSL_ERROR_NONE;
    for (;;) {
        rn_buf_reserve(&out, RECORD_BYTES);
        int r = SSL_read(l->ssl, out.data + out.len, RECORD_BYTES);
        if (r <= 0) {
            e = SSL_get_error(l->ssl, r);
            break;
        }
        out.len += (size_t)r;
    }
    bool ok = flush_cipher(l); /* post-handshake messages */
    if (ok && out.len) {
        l->received = true;
        ok = queue_bytes(l, (uv_stream_t *)&l->inner, out.data, out.len, plain_written);
    }
    rn_buf_free(&out);
    if (!ok)
        return;
    if (e != SSL_ERROR_WANT_READ) {                     /* close_notify, or an error */
        if (e != SSL_ERROR_ZERO_RETURN && !l->received) /* e.g. its refusal of this node */
            report(l, RN_PEER_OK, ssl_reason());
        ERR_clear_error();
        link_end(l);
        return;
    }
    if (uv_stream_get_write_queue_size((uv_stream_t *)&l->inner) >= QUEUE_BYTES) {
        uv_read_stop((uv_stream_t *)l->tcp);
        l->tcp_paused = true;
    }
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
    (void)h;
    (void)suggested;
    *buf = uv_buf_init(read_buf, sizeof read_buf);
}

static void tcp_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf) {
    link *l = s->data;
    if (n == 0 || l->closing || l->ending)
        return;
    if (n < 0) {
        if (!l->established)
            handshake_failed(l, true);
        link_close(l);
        return;
    }
    if (l->peer == 0 && !l->started) {
        if ((unsigned char)buf->base[0] != TLS_HANDSHAKE_RECORD) {
            refuse_plain(l);
            return;
        }
        l->started = true;
    }
    BIO_write(l->rbio, buf->base, (int)n);
    if (!l->established && handshake(l) <= 0)
        return;
    decrypt(l);
}

static void start_tcp(link *l) {
    if (uv_read_start((uv_stream_t *)l->tcp, on_alloc, tcp_read) != 0)
        link_close(l);
}

/* ---- the plaintext side: encryption ---- */

static void inner_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf) {
    link *l = s->data;
    if (n == 0 || l->closing || l->ending)
        return;
    if (n < 0) { /* the stream's owner closed it: so does the connection */
        SSL_shutdown(l->ssl);
        ERR_clear_error();
        if (flush_cipher(l))
            link_end(l);
        return;
    }
    if (SSL_write(l->ssl, buf->base, (int)n) <= 0) {
        ERR_clear_error();
        link_close(l);
        return;
    }
    flush_cipher(l);
}

static void start_inner(link *l) {
    l->inner_reading = true;
    if (uv_read_start((uv_stream_t *)&l->inner, on_alloc, inner_read) != 0)
        link_close(l);
}

/* ---- opening ---- */

static void free_raft_handle(uv_handle_t *h) {
    raft_free(h);
}

uv_stream_t *rn_peer_link_open(const rn_peer_tls *t, uv_tcp_t *tcp, uint64_t peer) {
    assert(t != NULL && tcp != NULL);
    uv_loop_t *loop = tcp->loop;
    SSL *ssl = SSL_new(rn_peer_tls_ctx(t));
    BIO *rbio = BIO_new(BIO_s_mem()), *wbio = BIO_new(BIO_s_mem());
    uv_os_sock_t fds[2];
    if (!ssl || !rbio || !wbio || uv_socketpair(SOCK_STREAM, 0, fds, 0, 0) != 0) {
        SSL_free(ssl);
        BIO_free(rbio);
        BIO_free(wbio);
        ERR_clear_error();
        rn_log(RN_LOG_WARN, "cluster_peer_link",
               "no TLS link for a raft connection (descriptors?)");
        uv_close((uv_handle_t *)tcp, free_raft_handle);
        return NULL;
    }
    BIO_set_mem_eof_return(rbio, -1); /* empty: "retry", not EOF */
    SSL_set_bio(ssl, rbio, wbio);
    link *l = rn_xcalloc(1, sizeof *l);
    *l = (link){.tcp = tcp, .ssl = ssl, .rbio = rbio, .wbio = wbio, .peer = peer, .handles = 2};
    tcp->data = l;
    uv_pipe_init(loop, &l->inner, 0);
    l->inner.data = l;
    uv_pipe_t *outer = raft_malloc(sizeof *outer);
    if (outer == NULL)
        abort();
    uv_pipe_init(loop, outer, 0);
    if (uv_pipe_open(&l->inner, fds[0]) != 0 || uv_pipe_open(outer, fds[1]) != 0)
        abort(); /* fresh descriptors of a socketpair: cannot fail */
    if (peer != 0) {
        SSL_set_connect_state(ssl);
        handshake(l); /* the client's first flight */
    } else {
        SSL_set_accept_state(ssl);
    }
    if (!l->closing && !l->ending)
        start_tcp(l);
    return (uv_stream_t *)outer;
}
