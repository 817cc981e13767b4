/*
 * http_client.h — keep-alive HTTP/1.1 client connections on one libuv loop,
 * responses parsed with llhttp.
 *
 * A bn_conn carries at most one request at a time (closed loop). It connects
 * lazily on its first request, reconnects after the server closed it, and
 * retries a request once when a reused connection dies before any byte of
 * the answer arrived (the keep-alive race every HTTP client has; all the
 * benchmark's requests are safe to repeat: appends carry producer headers).
 * Connects are gated (at most 128 in progress) so thousands of connections
 * can be opened without overflowing the server's listen backlog.
 *
 * Of the response only the status, the headers the scenarios follow
 * (Stream-Next-Offset, Stream-Up-To-Date, Stream-Closed,
 * Stream-Snapshot-Offset, Content-Type) and the body length are kept; body
 * bytes can be streamed to a callback (SSE, bootstrap). The answer to a HEAD
 * request is read without a body, whatever its framing headers say.
 * Every connection shares one read buffer, so an idle connection costs only
 * its libuv handle and parser.
 */
#ifndef BN_HTTP_CLIENT_H
#define BN_HTTP_CLIENT_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "target.h"

/* on_done error for a response llhttp refused or bytes nobody asked for. */
#define BN_EHTTP (-100001)

typedef struct bn_client bn_client;
typedef struct bn_conn bn_conn;

typedef struct {
    int status;
    char next_offset[96];     /* Stream-Next-Offset, "" when absent */
    int up_to_date;           /* Stream-Up-To-Date: true */
    int closed;               /* Stream-Closed: true */
    char snapshot_offset[96]; /* Stream-Snapshot-Offset, "" when absent */
    char content_type[160];   /* Content-Type, "" when absent (truncated) */
    char location[160];       /* Location, "" when absent (truncated) */
    uint64_t body_bytes;
    uint64_t t_start_ns; /* uv_hrtime() when the request was issued */
} bn_resp;

typedef struct {
    /* Optional: the response's status line and headers have arrived. */
    void (*on_headers)(bn_conn *c);
    /* Optional: a piece of the (de-chunked) body. */
    void (*on_body)(bn_conn *c, const char *at, size_t n);
    /* Required: the request finished. err 0: a complete response is in
     * bn_conn_resp(c); otherwise a negative libuv error or BN_EHTTP. The
     * callback may issue the next request on c or close it. */
    void (*on_done)(bn_conn *c, int err);
} bn_handlers;

/* A client for one target; conns are created from it. */
bn_client *bn_client_new(uv_loop_t *loop, const bn_target *target);

/* A new, unconnected connection. `h` must outlive it. */
bn_conn *bn_conn_new(bn_client *cl, const bn_handlers *h, void *user);
/* Sends c's requests to addr instead of the client's target (a cluster
 * node); a connection to another address is closed first. c must not be
 * busy. */
void bn_conn_set_addr(bn_conn *c, const struct sockaddr_storage *addr);
void *bn_conn_user(const bn_conn *c);
/* Gives an idle connection other handlers and user pointer. */
void bn_conn_rebind(bn_conn *c, const bn_handlers *h, void *user);
const bn_resp *bn_conn_resp(const bn_conn *c);
/* True from bn_conn_request until on_done. */
int bn_conn_busy(const bn_conn *c);

/* Issues a request; c must not be busy. `headers` are extra header lines,
 * each ending in CRLF (or NULL). POST and PUT always send Content-Length.
 * on_headers and on_body must neither close c nor issue a request on it. */
void bn_conn_request(bn_conn *c, const char *method, const char *path, const char *headers,
                     const void *body, size_t body_len);

/* Abandons any request in flight (its on_done never runs) and frees c once
 * libuv released the socket. */
void bn_conn_close(bn_conn *c);

/* Closes every connection of cl (as bn_conn_close); the client itself is
 * freed when the last one is gone, after which the loop can end. */
void bn_client_close(bn_client *cl);

#endif
