/*
 * upstream.h — HTTP/1.1 to the gateway's nodes: a pool of keep-alive
 * connections per node origin ("http://host:port"), one exchange at a time
 * on a connection, the request written as it comes (its head at once, its
 * body in pieces), the answer parsed (llhttp) and handed on as it arrives,
 * with backpressure both ways. A connection returns to its pool only after
 * a whole answer to a whole request; every other end closes it.
 *
 * Everything runs on the loop thread.
 */
#ifndef RN_GATEWAY_UPSTREAM_H
#define RN_GATEWAY_UPSTREAM_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "transport/http.h"
#include "util/buf.h"

typedef struct rn_upstreams rn_upstreams;
typedef struct rn_up_call rn_up_call;

#define RN_UP_CHUNKED UINT64_MAX       /* the answer's body runs to its end (chunked, or close) */
#define RN_UP_NO_BODY (UINT64_MAX - 1) /* no body (HEAD, 204, 304) */

typedef enum {
    RN_UP_DONE,    /* the whole answer came */
    RN_UP_CONNECT, /* no connection could be made: nothing was sent */
    RN_UP_BROKEN,  /* the connection failed or the answer was malformed */
    RN_UP_TIMEOUT, /* no answer head within the call's timeout */
} rn_up_end;

typedef struct {
    /* The answer's head (the final one, not a 1xx): headers valid during
     * the call; length is the body's (Content-Length), RN_UP_CHUNKED or
     * RN_UP_NO_BODY. */
    void (*head)(void *arg, int status, const rn_header *headers, size_t n, uint64_t length);
    /* Body bytes of the answer (valid during the call). Returns 1 to pause
     * reading (rn_up_call_resume_read); bytes already read may still come. */
    int (*data)(void *arg, const uint8_t *bytes, size_t len);
    /* 100 Continue came (or the wait for it ran out): send the body. */
    void (*go_on)(void *arg);
    /* The request bytes queued were all written: more may be sent. */
    void (*drained)(void *arg);
    /* The exchange ended (once; the call is freed right after): how, and
     * whether any byte of the request was handed to the connection. */
    void (*end)(void *arg, rn_up_end how, int sent_any);
} rn_up_callbacks;

/* max_idle: idle connections kept per origin; idle_ms: how long one may
 * stay idle (keep it under the nodes' --idle-timeout-ms, so that a node
 * never closes a connection as the gateway reuses it). */
rn_upstreams *rn_upstreams_new(uv_loop_t *loop, size_t max_idle, uint64_t idle_ms);
/* Closes every connection (the calls end RN_UP_BROKEN first); run the
 * loop afterwards so the handles close, then free. */
void rn_upstreams_stop(rn_upstreams *u);
void rn_upstreams_free(rn_upstreams *u);

/* Starts an exchange with origin: head is the request's head (request
 * line, header lines, blank line; taken over), which may go on with body
 * bytes when no 100 Continue is asked (one write for both). expect_continue: the head
 * asks for 100 Continue, and go_on runs when it comes (or after a second
 * without it). head_timeout_ms bounds the wait for the answer's head from
 * now (0: none). The callbacks run later, never from inside this call.
 * Returns NULL when origin is not http://host:port. */
rn_up_call *rn_up_call_start(rn_upstreams *u, const char *origin, rn_buf *head, int expect_continue,
                             uint64_t head_timeout_ms, const rn_up_callbacks *cb, void *arg);
/* Sends body bytes (taken over); returns the bytes queued and not yet
 * written. */
size_t rn_up_call_send(rn_up_call *c, rn_buf *bytes);
/* Says the request is complete (all its body was sent). */
void rn_up_call_sent(rn_up_call *c);
/* Whether any byte of the request was handed to the connection. */
int rn_up_call_sent_any(const rn_up_call *c);
/* Resumes reading a paused answer. */
void rn_up_call_resume_read(rn_up_call *c);
/* Abandons the exchange: its connection closes (never reused), and no
 * callback runs any more. */
void rn_up_call_cancel(rn_up_call *c);

#endif
