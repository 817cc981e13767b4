/*
 * http.h — the HTTP/1.1 transport: accept, parse (llhttp), hand complete
 * requests to a handler, write responses, enforce limits and timeouts.
 *
 * It knows nothing of streams. A connection parses one request at a time:
 * once a request is complete the parser pauses, later pipelined bytes wait
 * in the connection's input buffer, and the socket keeps being read so that
 * a client that disconnects while its request is parked (long-poll, SSE,
 * waiting for a log sync) is noticed at once. When the response finishes,
 * parsing resumes with the buffered bytes.
 *
 * A client may shut its sending side once its requests are sent (a
 * half-close): every complete request received before it is still served,
 * in order, and the connection closes after the last answer; a request the
 * half-close cut short is answered 400 and applies nothing.
 *
 * Requests are reference counted: the connection holds one reference while
 * the request is current; a handler that answers later (after a log sync or
 * a live wake) takes its own with rn_request_hold() and drops it with
 * rn_request_release(). Answering a request whose connection is gone is a
 * harmless no-op, so handlers need no special path for vanished clients.
 */
#ifndef RN_HTTP_H
#define RN_HTTP_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "util/buf.h"

typedef struct rn_http_server rn_http_server;
typedef struct rn_conn rn_conn;
typedef struct rn_request rn_request;

typedef enum {
    RN_HTTP_OTHER,
    RN_HTTP_GET,
    RN_HTTP_HEAD,
    RN_HTTP_POST,
    RN_HTTP_PUT,
    RN_HTTP_DELETE,
    RN_HTTP_OPTIONS,
} rn_http_method;

typedef struct {
    const char *name;
    size_t name_len;
    const char *value;
    size_t value_len;
} rn_header;

/* rn_request.route_flags: the request was authorized as an operator by a
 * gate embedded in the server (the gateway's tenants with admin rights):
 * the operator routes under /__runnel/ let it through without the admin
 * token. Never set from anything the request carries. The bits below it
 * are protocol/routing.c's. */
#define RN_REQUEST_ADMIN_GRANTED 0x100u
/* rn_request.route_flags: the request came in on the server's peer
 * listener (rn_http_config.peer_host), set by the transport. */
#define RN_REQUEST_PEER_LISTENER 0x200u

struct rn_request {
    rn_http_method method;
    const char *method_name; /* as sent, for logs */
    const char *target;      /* request-target as sent: path and query */
    size_t target_len;
    rn_header *headers;
    size_t header_count;
    rn_buf body;
    /* Set when the declared or received body exceeded the limit: the body was
     * not read, and the connection closes after the response. */
    int body_too_large;
    /* Set when accepting the body would pass max_body_bytes_in_flight: the
     * body was not read (or not all of it), and the connection closes
     * after the response (503, retry later). */
    int body_over_budget;
    /* Set when the request (its body, or its head: then only the fields
     * already parsed are set, and target is "") did not arrive within
     * request_timeout_ms: nothing of it was handed on before, and it is
     * handed to on_request only to be refused (408); the HTTP/1.1
     * connection closes after the response. */
    int timed_out;
    /* Called once if the connection goes away while the request is held. */
    void (*on_abort)(rn_request *req);
    /* Called when a streamed response's socket queue has emptied. */
    void (*on_drain)(rn_request *req);
    /* Called once if the client shuts its sending side while the request is
     * held (NULL: the request goes on and is answered as usual). Until the
     * server writes, a half-close looks the same as a client that went
     * away, so a request parked with no end in sight (a live read) should
     * answer now as its time limit would; the connection stays up for the
     * answer and closes after it. */
    void (*on_input_end)(rn_request *req);
    int route; /* rn_route, set by the router (metrics and logs) */
    /* The router's marks on a request it runs again (protocol/routing.c:
     * a linearizable read whose confirmation passed; its low bits), and
     * the public marks below. */
    unsigned route_flags;
    void *handler_data;
    /* Set by the transport while the on_headers hook runs: the body is still
     * to come (a handler may take it as it arrives: rn_request_stream_body). */
    int body_pending;
    /* Set by the on_headers hook: the body bytes per second this request's
     * body must keep to extend its request timeout (0: the server's
     * min_body_rate). */
    uint64_t min_body_rate;
    /* Set with it to make the rate a floor: the body must have arrived by
     * the request's start + body_grace_ms + received bytes / rate, or the
     * request times out (408); 0: the request timeout is that base, and
     * the rate only extends it. */
    uint64_t body_grace_ms;
    /* The layer in front of the handlers (the gateway's gate): its state
     * of the request, and what frees it, called once when the request is
     * freed (NULL: nothing). */
    void *gate_ticket;
    void (*gate_done)(rn_request *req);
    /* Called with the header lines of the request's answer just before they
     * go out (any answer call, any status), to change them in place (NULL:
     * none): the gate's CORS and request limit. */
    void (*rewrite_head)(rn_request *req, int status, rn_buf *head);
    /* Set by the gate: the wall-clock time (ms) the request's credential
     * expires at (0: never). A live read ends then: a long-poll as at its
     * timeout, an SSE response with an event saying so. */
    int64_t credential_expires_ms;

    /* Set by the transport: the request came over TLS (its URLs are https). */
    int tls;
    /* Set by the transport, for the access log (read only). */
    uint64_t start_ns;  /* when its first byte arrived */
    int status;         /* of the response, once started */
    uint64_t bytes_out; /* body bytes queued */
};

typedef struct {
    const char *host; /* an IP literal or a name; every address it names is listened on */
    int port;
    size_t max_body_bytes;       /* larger bodies are refused (413) unread */
    size_t max_header_bytes;     /* request line + headers */
    size_t max_headers;          /* header count */
    uint64_t request_timeout_ms; /* to receive a whole request, plus: */
    uint64_t min_body_rate;      /* each body byte adds 1/rate s (0: nothing) */
    uint64_t idle_timeout_ms;    /* between keep-alive requests */
    int max_connections;
    /* Open connections from one client address (IPv4, or IPv6); more are
     * closed at accept like those past max_connections. 0: no bound. */
    int max_connections_per_ip;
    /* HTTP/2 (http2.c): concurrent streams of a connection, the decoded
     * header list of a request (431 beyond), the HPACK table the server
     * keeps, and PING, SETTINGS and RST_STREAM frames a connection may send
     * per second (more close it with GOAWAY ENHANCE_YOUR_CALM). 0 (a config
     * struct that does not set them): 100, 16 KiB, 4096, 200. */
    uint32_t http2_max_streams;
    uint32_t http2_max_header_list_bytes;
    uint32_t http2_header_table_bytes;
    uint32_t http2_max_control_frames;
    /* Request body bytes held at once, over all requests: a body's declared
     * Content-Length from its headers (or its bytes as they arrive, when
     * chunked) until the request is released. Bodies under
     * RN_HTTP_EARLY_BODY_BYTES may go an eighth past it (a reserve for
     * small writes). 0: no bound. */
    uint64_t max_body_bytes_in_flight;
    /* Answer bytes held at once for clients that have not taken them yet,
     * over all connections (owned buffers of queued writes; shared SSE
     * chunks are bounded per reader instead). Past it, bodies sent piece
     * by piece (rn_http_respond_pieces) go out in RN_HTTP_SMALL_PIECE_BYTES
     * pieces (rn_http_piece_bytes). 0: no bound. */
    uint64_t max_answer_bytes_in_flight;
    /* Called when a response is complete (access log); may be NULL. */
    void (*on_complete)(const rn_request *req);
    /* Called, with the on_request arg, with a request whose body is not
     * read yet when its client waits for 100 Continue or declared a body of
     * at least RN_HTTP_EARLY_BODY_BYTES. It may answer at once from the
     * headers (rn_http_respond; the request must not be kept): no 100
     * Continue is sent, and the transport closes the connection (after
     * Expect) or reads and drops the body within bounds. When it does not
     * answer, the body is read (after a 100 Continue when asked for) and
     * the request goes to on_request as usual. May be NULL. */
    void (*on_headers)(rn_request *req, void *arg);
    /* Show every request whose body is still to come to on_headers, not
     * only those above (cluster mode: a write is routed before any of its
     * body is read, extensions §5.7). */
    int on_headers_every_body;
    /* Helper threads that send large write batches with the loop thread
     * (rn_http_batch_flush); 0: batches are off. */
    int fanout_threads;
    /* Connections speak TLS with this context's certificate (tls.h); it
     * outlives the server. NULL: cleartext. */
    struct rn_tls_context *tls;
    /* A second listener (NULL: none), the peer listener: every address
     * peer_host names, on peer_port; its connections speak TLS with
     * peer_tls (NULL: cleartext) and its requests carry
     * RN_REQUEST_PEER_LISTENER. Everything else (limits, handlers) is
     * shared with the first. */
    const char *peer_host;
    int peer_port;
    struct rn_tls_context *peer_tls;
} rn_http_config;

#define RN_HTTP_EARLY_BODY_BYTES (64 * 1024)
#define RN_HTTP_SMALL_PIECE_BYTES (64 * 1024)

typedef void (*rn_request_fn)(rn_request *req, void *arg);

/* Starts listening. Returns NULL and fills err on failure. */
rn_http_server *rn_http_listen(uv_loop_t *loop, const rn_http_config *cfg, rn_request_fn on_request,
                               void *arg, char *err, size_t errcap);

/* Writes the addresses listened on ("127.0.0.1:4437, [::1]:4437") to out;
 * returns how many of them other hosts can reach (all but loopback). */
int rn_http_listen_addresses(const rn_http_server *srv, char *out, size_t cap);

/* Stops accepting and closes idle connections; active requests finish. */
void rn_http_stop_accepting(rn_http_server *srv);
/* Answer bytes queued for clients that have not taken them yet (the
 * count max_answer_bytes_in_flight bounds). */
uint64_t rn_http_answer_bytes_held(const rn_http_server *srv);
/* Connections still open (idle ones excluded once stopping). */
size_t rn_http_active_connections(const rn_http_server *srv);
/* Closes every connection and the listener (run the loop afterwards so the
 * handles finish closing). */
void rn_http_close(rn_http_server *srv);
/* Frees the server once the loop has finished closing its handles. */
void rn_http_free(rn_http_server *srv);

/* First header with this name (case-insensitive), or NULL. *count (if not
 * NULL) receives how many headers have the name. */
const rn_header *rn_request_header(const rn_request *req, const char *name, size_t *count);

/* The certificate the client presented on a TLS connection whose context
 * asks for client certificates (tls.h), or NULL (cleartext, none asked
 * for, none sent, or the connection is gone); *verify_result is
 * X509_V_OK when it verified against the context's client CA, else
 * OpenSSL's reason (X509_verify_cert_error_string). Valid during the
 * handler's call. */
struct x509_st *rn_request_client_certificate(const rn_request *req, long *verify_result);

void rn_request_hold(rn_request *req);
void rn_request_release(rn_request *req);

/* ---- request bodies taken as they arrive (the gateway) ----
 * From the on_headers hook, a handler may take a request's body as it
 * arrives instead of having the transport read it whole: the request is
 * then the handler's (on_request never sees it), and its body's bytes go to
 * the sink. The request's limits still apply (max_body_bytes, the request
 * timeout with its body rate); the body is not counted against
 * max_body_bytes_in_flight, since the transport holds none of it. Over
 * HTTP/1.1 the bytes are delivered as they are read, at most
 * RN_HTTP_BODY_SLICE_BYTES at a time, and a paused sink stops the reading;
 * over HTTP/2 the body is received whole first (within the usual bounds)
 * and delivered in one call. */
typedef enum {
    RN_BODY_END,         /* the body is complete */
    RN_BODY_SLOW,        /* it came slower than the request timeout allows */
    RN_BODY_CUT,         /* the client ended its input before the body's end */
    RN_BODY_TOO_LARGE,   /* it passed max_body_bytes */
    RN_BODY_OVER_BUDGET, /* HTTP/2: holding it passed max_body_bytes_in_flight */
} rn_body_event;

typedef struct {
    /* len > 0 body bytes, valid during the call. Returns 0 for more, or 1
     * to pause: deliveries stop until rn_request_body_resume (bytes already
     * read may still come, at most RN_HTTP_BODY_SLICE_BYTES). */
    int (*data)(rn_request *req, const uint8_t *bytes, size_t len);
    /* The body is over (called once, never after an answer finished):
     * RN_BODY_END, the request then waits for its answer; any other event
     * leaves the body unfinished, and the connection closes after the
     * answer the handler now owes. A connection that fails instead runs
     * on_abort. */
    void (*end)(rn_request *req, rn_body_event ev);
} rn_body_sink;

#define RN_HTTP_BODY_SLICE_BYTES (64 * 1024)

/* Takes req's body as it arrives (see above). Only from the on_headers
 * hook, for a request whose body follows, and at most once. */
void rn_request_stream_body(rn_request *req, const rn_body_sink *sink);
/* An answer given while a body taken by rn_request_stream_body still
 * arrives would come before the body, which a server may do only for the
 * answers the protocol allows there (ext §5.5). After
 * rn_request_hold_answer (from the sink's owner, before its answer), the
 * next rn_http_respond is kept instead of sent, and the sink goes on
 * taking the body; rn_request_send_held sends it (once the body ended:
 * from the sink's end). rn_request_answer_held says whether one was kept.
 * A connection that goes away drops it. */
void rn_request_hold_answer(rn_request *req);
void rn_request_send_held(rn_request *req);
int rn_request_answer_held(const rn_request *req);
/* Counts n bytes against max_body_bytes_in_flight for req, whose body its
 * handler takes as it arrives and holds some of (the transport counts none
 * of such a body); the count is returned when req is freed. Returns -1
 * (nothing counted) when that would pass the bound, or the connection is
 * gone. From the on_headers hook. */
int rn_request_charge_body(rn_request *req, uint64_t n);
/* True when a body taken by rn_request_stream_body would reach its sink as
 * it arrives (HTTP/1.1); false when it would come whole once received
 * (HTTP/2), or the connection is gone. */
int rn_request_body_streams_as_it_arrives(const rn_request *req);
/* Resumes deliveries a sink paused (no-op when not paused). */
void rn_request_body_resume(rn_request *req);

/* Sends a whole response. `head` holds the header lines after the status
 * line (each ending in CRLF, without the final blank line). Content-Length
 * is added from the body except on answers to HEAD and on statuses without a
 * body (204, 304). Both buffers are taken over (left empty). */
void rn_http_respond(rn_request *req, int status, rn_buf *head, rn_buf *body);

/* A sized body made a piece at a time (rn_http_respond_pieces). fill
 * appends to out (empty) the body's bytes [pos, pos + len): len > 0, within
 * the body, asked for in order; it returns 0, or -1 when it cannot make
 * exactly those bytes (a file ended short, or the bytes are no longer the
 * ones the answer promised): the connection is then cut, the only honest
 * end of an answer whose Content-Length was sent. release frees ctx: it
 * runs exactly once, when the answer is done, its connection is gone, or
 * it was never sent (HEAD). fill runs on the loop thread, only while the
 * answer's connection is open. fill may also return RN_HTTP_PIECE_LATER,
 * out left empty, when the bytes are not at hand yet (a disk read on a
 * worker): nothing is sent until the source calls rn_http_pieces_resume,
 * which asks it again for the same bytes. */
#define RN_HTTP_PIECE_LATER 1
typedef struct {
    int (*fill)(void *ctx, uint64_t pos, size_t len, rn_buf *out);
    void (*release)(void *ctx);
    void *ctx;
} rn_http_pieces;

/* Sends a response whose body is prefix, then the len bytes `pieces`
 * makes, then suffix (prefix and suffix may be empty). The body is made
 * and sent one piece at a time as the socket drains (rn_http_piece_bytes
 * each, one in flight), so a large body costs no more than one piece of
 * memory, and making it blocks the loop for no longer than one piece at a
 * time. Takes over head, prefix, suffix and the source (see
 * rn_http_pieces). */
void rn_http_respond_pieces(rn_request *req, int status, rn_buf *head, rn_buf *prefix,
                            const rn_http_pieces *pieces, uint64_t len, rn_buf *suffix);

/* Asks the source of req's answer in pieces, whose fill answered
 * RN_HTTP_PIECE_LATER, for that piece again. Only while the source is not
 * released (the request is then still there). */
void rn_http_pieces_resume(rn_request *req);

/* How many body bytes rn_http_respond_pieces makes at a time for req now:
 * 512 KiB, or RN_HTTP_SMALL_PIECE_BYTES while less than that is left of
 * the answer budget. A body no longer than this
 * costs no more memory built whole and sent with rn_http_respond. */
size_t rn_http_piece_bytes(const rn_request *req);

/* rn_http_respond_pieces with the body read from len bytes of fd from off
 * (pread). Takes over head, prefix, suffix and fd (closed when done or
 * when the connection goes away). */
void rn_http_respond_file(rn_request *req, int status, rn_buf *head, rn_buf *prefix, int fd,
                          uint64_t off, uint64_t len, rn_buf *suffix);

/* Starts a chunked streaming response (SSE). */
void rn_http_stream_start(rn_request *req, int status, rn_buf *head);
/* Starts a streamed response whose body has exactly `length` bytes
 * (Content-Length), sent with rn_http_stream_write as they come, and ended
 * with rn_http_stream_end: an end before `length` bytes cuts the
 * connection (the length was promised). A body of 0 bytes, a status
 * without one (204, 304) and an answer to HEAD are complete at once. */
void rn_http_stream_start_sized(rn_request *req, int status, rn_buf *head, uint64_t length);
/* Sends one chunk (taken over). Returns bytes still queued on the socket. */
size_t rn_http_stream_write(rn_request *req, rn_buf *chunk);
/* A chunk of a chunked response built once and sent on many streamed
 * responses (SSE fan-out: every reader parked at the same position gets the
 * same bytes). It holds the complete framing: the size line, the payload and
 * the closing CRLF. Immutable once built and reference counted; the count is
 * touched only on the loop thread. */
typedef struct rn_http_chunk rn_http_chunk;
/* Builds a chunk framing a copy of len > 0 payload bytes; the caller holds
 * the one reference. */
rn_http_chunk *rn_http_chunk_new(const void *payload, size_t len);
/* Drops a reference; the last one frees the chunk. */
void rn_http_chunk_release(rn_http_chunk *ch);
/* Sends ch on a streamed response. Its bytes are written from the chunk
 * itself: nothing is copied or formatted per response. When the socket does
 * not take them whole at once, the rest is queued and the queue holds a
 * reference to ch until it is written. The caller keeps its own reference.
 * Returns bytes still queued on the socket, as rn_http_stream_write. */
size_t rn_http_stream_write_chunk(rn_request *req, rn_http_chunk *ch);
/* Ends the streamed response. */
void rn_http_stream_end(rn_request *req);
/* Cuts a streamed response short: its connection (HTTP/1.1) or stream
 * (HTTP/2) is reset, so the client cannot take what it got for the whole
 * answer. */
void rn_http_stream_abort(rn_request *req);
/* Write batches, for fan-out: between rn_http_batch_begin() and
 * rn_http_batch_flush(), a write to a connection with nothing queued (a
 * response, a chunk; not a file piece) is collected instead of written: the
 * transport takes its bytes over (or a reference to a chunk) as it would
 * for a queued write, and the call returns as if the socket had taken them
 * (rn_http_stream_write reports nothing queued). A later write to the same
 * connection first sends what was collected for it, so bytes keep their
 * order. The flush sends every collected write with one non-blocking
 * send each, split between the loop thread and the helper threads when the
 * batch is large, and blocks until all are sent; then, on the loop thread,
 * a write taken whole is done (a closing connection ends), the rest of a
 * partial one, or a whole one the socket refused, is queued as by any
 * write (its failure closes the connection), and a write to a connection
 * that closed meanwhile is dropped. Begin/flush pairs nest; only the
 * outermost flush sends. Without fan-out threads both are no-ops. Writes
 * made while the flush settles the batch are written at once. */
void rn_http_batch_begin(rn_http_server *srv);
void rn_http_batch_flush(rn_http_server *srv);
/* Open client connections. */
size_t rn_http_connections(const rn_http_server *srv);
/* True when the request's connection is gone. */
int rn_request_gone(const rn_request *req);

#endif
