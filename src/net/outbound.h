/*
 * outbound.h — outbound HTTP requests on the loop: webhook deliveries and
 * object-store calls share this one client.
 *
 * libcurl's multi interface is driven by libuv: curl tells us which
 * sockets to watch (one uv_poll_t each) and when to call it back (one
 * uv_timer_t), and we feed readiness back through curl_multi_socket_action,
 * so no transfer ever blocks the loop. Every transfer has a total timeout;
 * redirects are not followed; only http and https are spoken; proxies from
 * the environment are ignored; and, when the client has a connect policy,
 * every address curl is about to connect to is checked against it, so a
 * host name that resolves to a refused address is refused at connect time.
 *
 * At most `max_running` transfers run at once; later ones wait in a FIFO
 * queue of at most `max_queued` (their timeout starts when they start).
 *
 * A request body comes from memory (borrowed or taken over) or from a range
 * of a file descriptor (pread as curl asks, on the loop thread). A 2xx
 * answer's body goes to the request's sink: memory (bounded), the caller's
 * buffer, or a file descriptor at an offset (pwrite, page cache only: the
 * caller syncs). Any other answer's body is kept in memory, at most
 * RN_FETCH_MAX_BODY bytes, so an error document never lands in a caller's
 * buffer or file.
 *
 * Everything runs on the loop thread.
 */
#ifndef RN_NET_OUTBOUND_H
#define RN_NET_OUTBOUND_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <uv.h>

#include "util/buf.h"

#define RN_FETCH_MAX_BODY 65536 /* error-answer bytes kept; the rest is discarded */

typedef struct rn_outbound rn_outbound;
typedef struct rn_fetch rn_fetch;

/* Why a transfer got no complete answer. */
typedef enum {
    RN_FETCH_ANSWERED = 0, /* a whole answer came: see status */
    RN_FETCH_POLICY,       /* the connect policy refused every address */
    RN_FETCH_CONNECT,      /* name not resolved, connection refused or unreachable */
    RN_FETCH_TIMEOUT,      /* the total timeout ran out */
    RN_FETCH_CUT,          /* the connection broke or the answer ended early */
    RN_FETCH_TOO_LARGE,    /* a 2xx answer had more bytes than its sink holds */
    RN_FETCH_LOCAL_IO,     /* reading the body's or writing the sink's fd failed */
    RN_FETCH_TLS,          /* the server's certificate failed verification */
    RN_FETCH_OTHER,        /* anything else (TLS handshake, protocol errors) */
} rn_fetch_failure;

typedef struct {
    rn_fetch_failure failure;
    long status;       /* HTTP status when the answer's head came, else 0 */
    const char *error; /* why, when failure != RN_FETCH_ANSWERED */
    /* The answer's body: for a 2xx answer with a memory sink, its bytes; for
     * any other answer, at most RN_FETCH_MAX_BODY bytes of it. */
    const uint8_t *body;
    size_t body_len;
    uint64_t received; /* body bytes that reached the 2xx sink */
    /* The final answer's header lines ("Name: value\r\n"), at most 16 KiB. */
    const char *headers;
    size_t headers_len;
} rn_fetch_result;

/* Finds header `name` (case-insensitive) in r's headers; returns its value
 * trimmed of surrounding spaces with its length in *len, or NULL. */
const char *rn_fetch_header(const rn_fetch_result *r, const char *name, size_t *len);

typedef void (*rn_fetch_fn)(void *arg, const rn_fetch_result *r);

/* Adds header lines to a request as it starts (rn_outbound_config.sign). */
typedef void (*rn_outbound_sign_fn)(void *arg, const char *method, const char *url,
                                    const uint8_t *body, size_t body_len, rn_buf *lines);

/* Decides whether a connection to addr may be made. */
typedef int (*rn_connect_policy_fn)(void *arg, const struct sockaddr *addr);

typedef struct {
    const char *user_agent;
    rn_connect_policy_fn policy; /* NULL: any address */
    void *policy_arg;
    const char *policy_refusal; /* the error text when the policy refused */
    size_t max_running;         /* transfers at once (>= 1) */
    size_t max_queued;          /* transfers waiting; beyond it a start fails */
    const char *ca_file;        /* CA certificates for https (NULL: the system's) */
    /* A client certificate (PEM chain) and its key (PEM) that https
     * requests present when the server asks for one (NULL: none). */
    const char *client_cert;
    const char *client_key;
    /* Optional: called as each request starts with its method, URL and
     * body (a memory body: signed requests never send a descriptor's
     * bytes); appends header lines ("Name: value\r\n" each) that the
     * request carries too (a signature). */
    rn_outbound_sign_fn sign;
    void *sign_arg;
} rn_outbound_config;

typedef struct {
    const char *method; /* "GET", "HEAD", "PUT", "POST", "DELETE" */
    const char *url;
    const char *const *headers; /* "Name: value" lines, copied */
    size_t nheaders;
    /* Request body: `body` taken over (then emptied); else `data`/`len`
     * borrowed until fn runs or the fetch is cancelled; else, when
     * body_fd >= 0, body_len bytes of body_fd from body_offset. With none
     * of them the request has no body. */
    rn_buf *body;
    const uint8_t *data;
    size_t len;
    int body_fd; /* -1 when unused (set it: 0 is a valid descriptor) */
    uint64_t body_offset, body_len;
    /* Sink of a 2xx answer's body: `into` if set, else sink_fd at
     * sink_offset if sink_fd >= 0, else memory; each holds at most sink_cap
     * bytes. More bytes than that: with strict_size the transfer fails with
     * RN_FETCH_TOO_LARGE, without it the excess is dropped. */
    uint8_t *into;
    int sink_fd; /* -1 when unused */
    uint64_t sink_offset;
    uint64_t sink_cap;
    int strict_size;
    uint64_t timeout_ms;
    int path_as_is; /* send the URL path exactly as given (no dot-segment removal) */
} rn_fetch_request;

/* Creates the client; the configuration's strings are copied. */
rn_outbound *rn_outbound_new(uv_loop_t *loop, const rn_outbound_config *cfg);

/* Starts (or queues) the request. fn runs exactly once, later, on the loop
 * thread, unless the fetch is cancelled first. Returns the fetch handle, or
 * NULL (fn will not run; a taken-over body is freed) when the queue is
 * full or the client is stopped. */
rn_fetch *rn_outbound_start(rn_outbound *o, const rn_fetch_request *req, rn_fetch_fn fn, void *arg);

/* Abandons a fetch whose fn has not run; fn will not run. */
void rn_fetch_cancel(rn_fetch *f);

/* Cancels every fetch and closes the client's handles (shutdown; run the
 * loop afterwards so they finish closing). */
void rn_outbound_stop(rn_outbound *o);
/* Frees the client after its handles closed. */
void rn_outbound_free(rn_outbound *o);

#endif
