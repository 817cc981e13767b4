/*
 * outbound.h — outbound HTTP POSTs (webhook deliveries) on the loop.
 *
 * libcurl's multi interface is driven by libuv: curl tells us which
 * sockets to watch (one uv_poll_t each) and when to call it back (one
 * uv_timer_t), and we feed readiness back through curl_multi_socket_action,
 * so no transfer ever blocks the loop. Every transfer has a total timeout;
 * redirects are not followed; only http and https are spoken; proxies from
 * the environment are ignored; and every address curl is about to connect
 * to is checked against the webhook address policy (url.h), so a host name
 * that resolves to a local address is refused at connect time.
 *
 * Everything runs on the loop thread.
 */
#ifndef RN_SUBS_OUTBOUND_H
#define RN_SUBS_OUTBOUND_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "util/buf.h"

#define RN_FETCH_MAX_BODY 65536 /* answer bytes kept; the rest is discarded */

typedef struct rn_outbound rn_outbound;
typedef struct rn_fetch rn_fetch;

typedef struct {
    long status;       /* HTTP status, or 0 when no answer came */
    const char *error; /* why, when status is 0 */
    const uint8_t *body;
    size_t body_len; /* at most RN_FETCH_MAX_BODY */
} rn_fetch_result;

typedef void (*rn_fetch_fn)(void *arg, const rn_fetch_result *r);

/* Creates the client. allow_loopback extends the connect policy to the
 * development loopback addresses (127.0.0.x, ::1). */
rn_outbound *rn_outbound_new(uv_loop_t *loop, int allow_loopback, const char *user_agent);

/* Starts POST url with the given header lines ("Name: value") and body
 * (taken over). fn runs exactly once, later, on the loop thread, unless the
 * fetch is cancelled first. Returns the fetch handle. */
rn_fetch *rn_outbound_post(rn_outbound *o, const char *url, const char *const *headers,
                           size_t nheaders, rn_buf *body, uint64_t timeout_ms, rn_fetch_fn fn,
                           void *arg);

/* Abandons a fetch whose fn has not run; fn will not run. */
void rn_fetch_cancel(rn_fetch *f);

/* Cancels every fetch and closes the client's handles (shutdown; run the
 * loop afterwards so they finish closing). */
void rn_outbound_stop(rn_outbound *o);
/* Frees the client after its handles closed. */
void rn_outbound_free(rn_outbound *o);

#endif
