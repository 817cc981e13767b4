/*
 * subs.h — subscriptions (PROTOCOL.md §6–7): durable cursors over sets of
 * streams that wake workers by webhook or through a pull-wake stream, and
 * their HTTP API under /v1/stream/__ds/.
 *
 * The module observes the engine (stream created / changed / removed),
 * keeps every subscription in memory, persists the whole set with atomic
 * file rewrites in <data>/subs/ (durable.h) or, in cluster mode, as
 * commands of one group's replicated log, delivers webhooks through
 * libcurl on the loop (outbound.h) and writes pull-wake events to wake
 * streams through ordinary engine appends. Everything runs on the loop
 * thread.
 */
#ifndef RN_SUBS_H
#define RN_SUBS_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "engine/engine.h"
#include "transport/http.h"

typedef struct rn_subs rn_subs;

typedef struct {
    const char *data_dir;
    /* Scheme, host and port under which clients reach this server, without
     * a trailing '/' (e.g. "http://127.0.0.1:4437"): callback and JWKS
     * URLs are built from it. */
    const char *public_url;
    int allow_loopback;          /* --webhook-allow-loopback */
    uint64_t webhook_timeout_ms; /* one delivery attempt */
    /* --max-subscriptions, --max-subscription-streams: a create past the
     * first, or explicit streams past the second (all subscriptions'
     * together), answer 429 and change nothing. What is loaded is kept. */
    uint64_t max_subs, max_explicit_links;
    /* Cluster mode: the state lives in the replicated log, not in a file,
     * and the leader of its group delivers (replica.c in src/subs/). */
    int replicated;
    /* Cluster mode: the CA file for https to other nodes (--tls-ca; NULL
     * or empty: the system's). */
    const char *tls_ca;
    const char *user_agent;
} rn_subs_config;

/* Loads keys and state from <data_dir>/subs (creating them on first
 * start), reconciles links with the engine's streams, registers the engine
 * observer and resumes pending deliveries. Returns NULL with a message in
 * err on failure. */
rn_subs *rn_subs_open(uv_loop_t *loop, rn_engine *engine, const rn_subs_config *cfg, char *err,
                      size_t errcap);

/* Handles a request whose path is /v1/stream/__ds followed by `rest`
 * ("" or "/..."); the query is ignored. */
void rn_subs_handle(rn_subs *s, rn_request *req, const char *rest, size_t rest_len);

/* ---- the operator's view (operator.c; docs/ADMIN.md) ---- */

/* Appends to `out` (a JSON array) the subscriptions whose id is above
 * `after` (after_len bytes; NULL: from the first), in id order, at most
 * limit (>= 1): each as the protocol renders it plus links, pending_links,
 * wake, attempts and lease_expires_at. Returns 1 when more follow. */
int rn_subs_admin_page(rn_subs *s, const char *after, size_t after_len, size_t limit, json_t *out);
/* Appends to out {"id","type","link_type","acked_offset"} for every
 * subscription that links the stream at path. */
void rn_subs_admin_links(rn_subs *s, const char *path, size_t len, json_t *out);

/* Shutdown, first step (on SIGTERM): stops deliveries and wake events;
 * in-flight webhook requests are abandoned (retried after restart). API
 * requests are still answered. */
void rn_subs_quiesce(rn_subs *s);
/* Shutdown, second step (when the server closes its handles): closes the
 * module's handles; run the loop afterwards. */
void rn_subs_stop(rn_subs *s);
/* After the loop ended and before the engine closes: final state write,
 * then frees everything. */
void rn_subs_close(rn_subs *s);

#endif
