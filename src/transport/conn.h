/*
 * conn.h — a client connection and the server that accepts it (private to
 * src/transport/).
 *
 * Layers, bottom up: the connection (conn.c: the socket, its life, timers,
 * limits, the send watch) moves bytes through its byte transport
 * (rn_byte_transport: plain TCP in tcp.c, TLS in tls.c) and carries the bytes of one
 * protocol (rn_protocol: HTTP/1.1 in http1.c), whose requests (request.h)
 * are answered through the answer calls of http.h (response.c). Bytes go
 * out through the write path (write.h), which every protocol shares and
 * which reaches the socket only through the byte transport. Everything here
 * runs on the loop thread, except what write.c's batches hand to the
 * fan-out threads. docs/ARCHITECTURE.md ("Transport layers") tells how TLS
 * and HTTP/2 plug in.
 */
#ifndef RN_TRANSPORT_CONN_H
#define RN_TRANSPORT_CONN_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "transport/fanout.h"
#include "transport/http.h"
#include "transport/listen.h"
#include "transport/tls.h"
#include "util/buf.h"
#include "util/list.h"
#include "util/map.h"

typedef struct rn_exchange rn_exchange;
typedef struct batch_entry batch_entry;
typedef struct conn_peer conn_peer;

/* The byte transport under a connection's protocol: the layer the
 * protocol's bytes pass through to the socket, and the client's bytes
 * through to c->input. Set at accept, before the protocol (which a TLS
 * connection attaches only once its handshake has chosen it). */
typedef struct {
    /* Starts (stops) delivering the client's bytes: each read is appended
     * to c->input and reported with conn_received. read_start returns 0 or
     * a libuv error. */
    int (*read_start)(rn_conn *c);
    void (*read_stop)(rn_conn *c);
    /* Sends what the socket takes at once of bufs[0..n), leaving nothing
     * behind in the transport, and returns how many bytes that was (0 when
     * none, or on an error: the write of the rest reports it). A transport
     * that cannot send part of a write at once returns 0; one that
     * transforms the bytes (TLS) may then keep what it made of them, and
     * the caller must give the same bufs to `write` next, before any
     * other call of the transport. */
    size_t (*try_write)(rn_conn *c, const uv_buf_t *bufs, unsigned n);
    /* Queues bufs[0..n) behind everything written before; cb(w, status)
     * runs once they are on the socket, or the connection failed. The
     * bytes stay valid until then. Returns 0, or a libuv error (cb will not
     * run). */
    int (*write)(rn_conn *c, uv_write_t *w, const uv_buf_t *bufs, unsigned n, uv_write_cb cb);
    /* Bytes given to write that the kernel has not taken yet. */
    size_t (*queued)(const rn_conn *c);
    /* Shuts the sending side once what was written is out; as uv_shutdown. */
    int (*shutdown)(rn_conn *c, uv_shutdown_t *sr, uv_shutdown_cb cb);
    /* Frees c->bytes_state once the connection's handles closed (NULL:
     * the transport keeps none). */
    void (*free)(rn_conn *c);
    /* The protocol's bytes are the socket's bytes: a write batch may send
     * them with sendmsg on the descriptor from the fan-out threads. A
     * transport that transforms them (TLS) leaves it 0, and its
     * connections' writes are never collected by a batch. */
    int direct_sends;
} rn_byte_transport;

/* Plain TCP (tcp.c). */
extern const rn_byte_transport rn_tcp_bytes;

/* TLS (tls.c): memory BIOs between OpenSSL and the socket. */
extern const rn_byte_transport rn_tls_bytes;

/* Makes c, accepted and not closed, a TLS connection of ctx's current
 * certificate: sets c->bytes and c->bytes_state. Its protocol is attached
 * by conn_attach_protocol once the handshake completes. Returns 0, or -1
 * when OpenSSL could not make the connection's state. */
int tls_accept(rn_conn *c, rn_tls_context *ctx);

/* The certificate the client of c (a TLS connection) presented, or NULL;
 * *verify_result: whether it verified against the context's client CA
 * (X509_V_OK, or OpenSSL's reason). Valid while c is open. */
struct x509_st *tls_client_certificate(const rn_conn *c, long *verify_result);

/* The length given to rn_protocol.send_head for an answer without a body
 * (204, 304, an answer to HEAD), and for a streamed one. */
#define RN_ANSWER_NO_BODY UINT64_MAX
#define RN_ANSWER_STREAMED (UINT64_MAX - 1)

/* Body bytes given to rn_protocol.send_body. */
typedef enum {
    RN_BODY_CHUNK, /* a chunk of a streamed answer: the protocol frames it */
    RN_BODY_BYTES, /* bytes of a sized body */
    RN_BODY_PIECE, /* a piece of a sized body sent piece by piece: once it is
                    * written, the protocol calls answer_pump */
} rn_body_kind;

/* The protocol spoken on a connection: what the connection code calls when
 * something happens on it, and how an answer to one of its requests goes
 * out. Every call is on the loop thread. */
typedef struct {
    /* Bytes arrived: c->input holds them past c->input_off. */
    void (*received)(rn_conn *c);
    /* The client shut its sending side; reading has stopped. Not called on
     * an ending connection. */
    void (*input_end)(rn_conn *c);
    /* The connection's timer ran out while no answer bytes wait and the
     * connection is not ending. */
    void (*timeout)(rn_conn *c);
    /* A write queued with the byte transport completed (body_piece: it carried a
     * piece of a body sent piece by piece). */
    void (*written)(rn_conn *c, int body_piece);
    /* The connection closes (once): requests still held are aborted. */
    void (*closing)(rn_conn *c);
    /* True between requests (stopping the server closes such a connection). */
    int (*idle)(const rn_conn *c);
    /* True while a request is received or answered. */
    int (*busy)(const rn_conn *c);
    /* Frees the protocol's state, once the connection's handles closed. */
    void (*free)(rn_conn *c);

    /* Answers: x is a request of the connection (x->conn set) whose answer
     * was started by the answer functions, which record its status, count
     * its bytes and take care of gone connections; any of these calls may
     * close the connection (x->conn is then NULL). */
    /* Sends the head of x's answer: status, the handler's header lines
     * (head: lines ending in CRLF), and the framing of a body of `length`
     * bytes, or RN_ANSWER_NO_BODY, or RN_ANSWER_STREAMED; then body (may be
     * NULL). Takes head and body over. */
    void (*send_head)(rn_exchange *x, int status, rn_buf *head, uint64_t length, rn_buf *body);
    /* Sends body bytes (taken over, not empty). */
    void (*send_body)(rn_exchange *x, rn_buf *bytes, rn_body_kind kind);
    /* Sends a shared chunk of a streamed answer (the caller keeps its
     * reference). */
    void (*send_chunk)(rn_exchange *x, rn_http_chunk *ch);
    /* Ends a streamed answer. */
    void (*end_stream)(rn_exchange *x);
    /* x's answer is complete (all of it was handed to send_*): the request
     * is done, and the protocol goes on with the connection. */
    void (*finished)(rn_exchange *x);
    /* x's answer cannot be completed (a piece of its body could not be
     * made: a file ended short, a stream's bytes changed). */
    void (*fail)(rn_exchange *x);
    /* Answer bytes of x still queued for its client. */
    size_t (*queued)(const rn_exchange *x);

    /* x's body goes to x->sink, just set (rn_request_stream_body; from the
     * on_headers hook). */
    void (*stream_body)(rn_exchange *x);
    /* x's sink resumes deliveries it paused. */
    void (*body_resume)(rn_exchange *x);
    /* A streamed body reaches its sink as it arrives (HTTP/1.1), not
     * whole once received (HTTP/2). */
    int streams_as_it_arrives;
} rn_protocol;

struct rn_http_server {
    uv_loop_t *loop;
    rn_listeners listeners;
    rn_listeners peer_listeners; /* cfg.peer_host's (none: count 0) */
    rn_http_config cfg;
    rn_request_fn on_request;
    void *arg;
    rn_list conns; /* open connections (rn_conn.link) */
    size_t conn_count;
    int stopping;
    /* write batches (rn_http_batch_begin/flush) */
    rn_fanout *fanout; /* helper threads; NULL: batches are off */
    int batch_depth;   /* begin calls not yet flushed */
    int flushing;      /* writes made meanwhile are not collected */
    batch_entry *batch;
    size_t batch_len, batch_cap;
    uint64_t answer_bytes_held; /* owned bytes of queued writes (max_answer_bytes_in_flight) */
    rn_map peers;               /* client address -> conn_peer (max_connections_per_ip) */
};

struct rn_conn {
    uv_tcp_t tcp;
    uv_timer_t timer;
    rn_http_server *srv;
    rn_list_node link; /* in srv->conns */
    int peer_listener; /* accepted on the peer listener (cfg.peer_host) */
    const rn_byte_transport *bytes;
    void *bytes_state;        /* the byte transport's (TLS: its SSL), or NULL */
    const rn_protocol *proto; /* NULL until attached (a TLS handshake ends before) */
    void *proto_state;        /* the protocol's (rn_http1) */
    int reading;              /* the byte transport delivers reads */
    int closed;               /* uv_close called */
    int ending;               /* no more input is served: finishes once pending writes are out */
    int lingering;            /* response sent, write side shut: dropping input */
    int input_ended;          /* EOF read: the client sends nothing more */
    int handles_open;
    rn_buf input;          /* received bytes the protocol has not consumed */
    size_t input_off;      /* how many of them it consumed */
    size_t pending_writes; /* transport writes and batch entries not yet settled */
    size_t batch_slot;     /* 1 + index of its entry in the server's batch; 0: none */
    conn_peer *peer;       /* its client address's count, when max_connections_per_ip */
    /* the send watch (see conn.c) */
    uint64_t writes_done;  /* transport writes completed */
    int watching;          /* the watch_* fields hold a reading */
    uint64_t watch_writes; /* writes_done, */
    size_t watch_queued;   /* bytes in the transport's write queue, */
    int watch_unsent;      /* bytes the kernel holds unacknowledged, when last read */
};

/* The protocols a connection can speak, chosen by name: the wire format
 * of the TLS ALPN list (length-prefixed names), the server's preference
 * first, with its length in *len. A protocol is added by one line in
 * conn.c's table (its ALPN name and its attach function, which sets
 * c->proto and c->proto_state on a connection between requests); tls.c
 * offers whatever the table holds. */
const unsigned char *conn_alpn_protocols(size_t *len);

/* Attaches to c, not closed and without a protocol, the protocol named
 * alpn[0..len) (an ALPN name), or the default (HTTP/1.1) when len is 0 or
 * the name is not in the table: at accept for a cleartext connection,
 * after the handshake for a TLS one. Its timer then runs for an idle
 * period (until then it bounds the whole TLS handshake). */
void conn_attach_protocol(rn_conn *c, const unsigned char *alpn, size_t len);

/* Closes c at once (idempotent): its protocol is told (closing), its
 * handles close, and it is freed once they have. */
void conn_close(rn_conn *c);

/* No more input is served on c: reading stops, and once its pending writes
 * are out it finishes: its write side is shut and what the client still
 * sends is dropped for a while (a lingering close), or it closes at once
 * when the client's input ended. No-op on a closed connection. */
void conn_end(rn_conn *c);

/* Finishes c when it is ending and no write is pending; called whenever a
 * write settles. */
void conn_finish_when_written(rn_conn *c);

/* Runs the connection's one timer: ms from now (0: stops it). When it runs
 * out with answer bytes pending it is the send watch; otherwise the
 * protocol's timeout (or the end of a lingering close). */
void conn_arm_timer(rn_conn *c, uint64_t ms);

/* Answer bytes were queued on c: the send watch starts (takes a first
 * reading and, when the timer is not running, arms it for an idle
 * period). */
void conn_watch_output(rn_conn *c);

/* What the byte transport read: n > 0 bytes were appended to c->input,
 * UV_EOF: the client shut its sending side, another negative: the
 * connection failed (0: nothing). */
void conn_received(rn_conn *c, ssize_t n);

/* Starts reading c (when it is not already); stops reading it. */
void conn_read_start(rn_conn *c);
void conn_read_stop(rn_conn *c);

#endif
