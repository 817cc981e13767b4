/*
 * forward.c — one request's way through the gateway to a node and back.
 * See forward.h.
 *
 * A forward (fwd) lives from the gate's admission until both its exchange
 * with a node and its answer to the client ended. Its attempts:
 *   - the node: the leader the routes name for the stream, else a usable
 *     node (round robin);
 *   - a connection that could not be made sent nothing, so another node is
 *     tried (at most once per node), then 503 UPSTREAM_UNREACHABLE;
 *   - a redirect (307/308) is learnt and followed (at most MAX_HOPS) while
 *     the whole body is still in hand; else 503 NO_LEADER, which the
 *     redirect proved (nothing applied);
 *   - a connection that broke after some of the request went answers 502
 *     UPSTREAM_FAILED (a read is tried again once: it changes nothing);
 *   - no answer head in time: 504 UPSTREAM_TIMEOUT.
 * Once the answer's head went to the client, a failure can only cut the
 * client's answer (rn_http_stream_abort).
 *
 * A streamed body's bytes wait in `pending` until the node asked for them
 * (100 Continue) and are sent from there; the client's body is paused
 * while more than HIGH_BYTES wait for the node's socket, and an answer is
 * paused while more than HIGH_BYTES wait for the client's.
 */
#include "gateway/forward.h"
#include "gateway/gate.h"
#include "gateway/nodes.h"
#include "gateway/upstream.h"
#include "protocol/errors.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/routes.h"
#include "util/text.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#define MAX_HOPS 3
#define MAX_IDLE_PER_NODE 4096 /* idle connections kept per node (a few hundred bytes each) */
#define HIGH_BYTES (256 * 1024)
#define TARGET_MAX 8192 /* the longest target forwarded, its NUL included */
#define ROUTES 65536
#define LONG_POLL_EXTRA_MS 65000 /* a long-poll's wait (at most 60 s) on top of the timeout */
struct rn_forwarder {
    uv_loop_t *loop;
    rn_forward_config cfg;
    char *admin_token;
    rn_upstreams *up;
    rn_nodes *nodes;
    rn_routes *routes;
    uint64_t failures[RN_FWD_FAILURES];
    uint64_t redirects_followed;
};

typedef struct {
    rn_forwarder *f;
    rn_request *req;
    rn_up_call *call;
    char origin[RN_ROUTES_ORIGIN_MAX];
    char *target; /* what is asked of the node: path and query (below TARGET_MAX bytes) */
    char route[RN_ROUTES_PATH_MAX];
    size_t route_len;
    int hops, tries, read_only;
    int pinned; /* rn_forward_to: its one origin, no other node */
    /* the body */
    int streamed;      /* taken as it arrives */
    int body_complete; /* all of it is in hand (or went) */
    int continued;     /* the node may get it now */
    int body_sent;     /* some of it went to the node */
    int chunked_up;    /* it goes chunked: its length is not known */
    int client_paused;
    rn_buf pending; /* streamed body bytes not yet sent */
    /* the answer */
    int answering; /* the client's answer started */
    int streaming; /* ... as a streamed one */
    int sse, at_boundary, expire_pending;
    uv_timer_t expiry;
    int timer_open;
    int call_open, req_held;
} fwd;

static void fwd_try_free(fwd *fw);
static void attempt(fwd *fw);

/* ---- the forwarder ---- */

rn_forwarder *rn_forwarder_new(uv_loop_t *loop, const rn_forward_config *cfg) {
    assert(cfg->refuse);
    rn_forwarder *f = rn_xcalloc(1, sizeof *f);
    f->loop = loop;
    f->cfg = *cfg;
    f->cfg.upstreams = NULL;
    if (cfg->admin_token) {
        f->admin_token = strdup(cfg->admin_token);
        if (!f->admin_token)
            abort();
    }
    f->up = rn_upstreams_new(loop, MAX_IDLE_PER_NODE, cfg->idle_ms);
    f->nodes = rn_nodes_new(loop, f->up, cfg->upstreams, cfg->nupstreams, cfg->max_request_bytes);
    f->routes = rn_routes_new(ROUTES);
    return f;
}

void rn_forwarder_probe(rn_forwarder *f, void (*done)(void *arg, size_t usable, const char *why),
                        void *arg) {
    rn_nodes_probe(f->nodes, done, arg);
}

int rn_forwarder_ready(const rn_forwarder *f) {
    return rn_nodes_usable(f->nodes);
}

void rn_forwarder_stop(rn_forwarder *f) {
    rn_nodes_stop(f->nodes);
    rn_upstreams_stop(f->up);
}

void rn_forwarder_free(rn_forwarder *f) {
    if (!f)
        return;
    rn_nodes_free(f->nodes);
    rn_upstreams_free(f->up);
    rn_routes_free(f->routes);
    if (f->admin_token)
        memset(f->admin_token, 0, strlen(f->admin_token));
    free(f->admin_token);
    free(f);
}

void rn_forwarder_metrics(const rn_forwarder *f, rn_buf *out) {
    static const char *const why[RN_FWD_FAILURES] = {"no_node",    "unreachable", "not_led",
                                                     "failed",     "timeout",     "body_slow",
                                                     "body_large", "body_cut",    "body_stalled"};
    rn_buf_append_str(out, "# TYPE runnel_gateway_upstream_failures_total counter\n");
    for (int i = 0; i < RN_FWD_FAILURES; i++)
        rn_buf_appendf(out, "runnel_gateway_upstream_failures_total{why=\"%s\"} %llu\n", why[i],
                       (unsigned long long)f->failures[i]);
    rn_buf_appendf(out,
                   "# TYPE runnel_gateway_redirects_followed_total counter\n"
                   "runnel_gateway_redirects_followed_total %llu\n",
                   (unsigned long long)f->redirects_followed);
    rn_nodes_metrics(f->nodes, out);
}

int rn_forward_streams_body(const rn_forwarder *f, const rn_request *req) {
    const rn_header *cl = rn_request_header(req, "content-length", NULL);
    uint64_t n;
    if (!cl || rn_parse_strict_u64(cl->value, cl->value_len, UINT64_MAX, &n))
        return 1; /* chunked: its length is not known */
    return n > f->cfg.hold_body_bytes;
}

/* ---- answers of the forwarder's own ---- */

/* Answers fw's request for why, as the forwarder's user does; counted. */
static void refuse(fwd *fw, rn_forward_failure why) {
    fw->f->failures[why]++;
    fw->answering = 1;
    fw->f->cfg.refuse(fw->req, why);
}

/* ---- the request to a node ---- */

/* Whether a client's header of req goes on to the node: hop-by-hop fields
 * and the framing the forwarder sets itself stay behind, and so does the
 * credential unless the forwarder keeps it (or it is the server's own
 * token, which the gate let through). */
static int forwarded_header(const rn_forwarder *f, const rn_request *req, const rn_header *h) {
#define NAMED(lit)                                                                                 \
    { lit, sizeof lit - 1 }
    static const struct {
        const char *name;
        size_t len;
    } dropped[] = {NAMED("connection"),
                   NAMED("keep-alive"),
                   NAMED("proxy-connection"),
                   NAMED("te"),
                   NAMED("trailer"),
                   NAMED("transfer-encoding"),
                   NAMED("upgrade"),
                   NAMED("host"),
                   NAMED("expect"),
                   NAMED("content-length"),
                   NAMED("proxy-authorization")};
#undef NAMED
    for (size_t i = 0; i < sizeof dropped / sizeof dropped[0]; i++)
        if (h->name_len == dropped[i].len && rn_ieq(h->name, h->name_len, dropped[i].name))
            return 0; /* lengths first: most headers are compared with none */
    return f->cfg.keep_credentials || rn_gate_passes_authorization(req) ||
           !rn_ieq(h->name, h->name_len, "authorization");
}

/* The request's head for a node: fw->target at origin, the client's
 * headers, the body's framing, Expect when the body waits for it. */
static void build_head(fwd *fw, rn_buf *head, int expect) {
    rn_request *req = fw->req;
    rn_buf_appendf(head, "%s %s HTTP/1.1\r\nHost: %s\r\n", req->method_name, fw->target,
                   fw->origin + 7);
    for (size_t i = 0; i < req->header_count; i++) {
        const rn_header *h = &req->headers[i];
        if (!forwarded_header(fw->f, fw->req, h))
            continue;
        rn_buf_append(head, h->name, h->name_len);
        rn_buf_append_str(head, ": ");
        rn_buf_append(head, h->value, h->value_len);
        rn_buf_append_str(head, "\r\n");
    }
    const rn_header *cl = rn_request_header(req, "content-length", NULL);
    if (fw->chunked_up)
        rn_buf_append_str(head, "Transfer-Encoding: chunked\r\n");
    else if (cl)
        rn_buf_appendf(head, "Content-Length: %.*s\r\n", (int)cl->value_len, cl->value);
    if (expect)
        rn_buf_append_str(head, "Expect: 100-continue\r\n");
    if (fw->f->admin_token && strncmp(fw->target, "/__runnel/", 10) == 0)
        rn_buf_appendf(head, "Authorization: Bearer %s\r\n", fw->f->admin_token);
    if (fw->f->cfg.mark)
        rn_buf_append_str(head, fw->f->cfg.mark);
    rn_buf_append_str(head, "\r\n");
}

/* Sends the streamed body's pending bytes (framed when chunked), and its
 * end once the client's body ended; pauses the client's body while the
 * node's socket holds too much. */
static void flush_body(fwd *fw) {
    if (!fw->call || !fw->continued)
        return;
    size_t queued = 0;
    if (fw->pending.len) {
        rn_buf out = {0};
        if (fw->chunked_up) {
            rn_buf_appendf(&out, "%zx\r\n", fw->pending.len);
            rn_buf_append(&out, fw->pending.data, fw->pending.len);
            rn_buf_append_str(&out, "\r\n");
            rn_buf_free(&fw->pending);
        } else {
            out = fw->pending;
            fw->pending = (rn_buf){0};
        }
        fw->body_sent = 1;
        queued = rn_up_call_send(fw->call, &out);
    }
    if (fw->body_complete && fw->call) {
        if (fw->chunked_up) {
            rn_buf end = {0};
            rn_buf_append_str(&end, "0\r\n\r\n");
            rn_up_call_send(fw->call, &end);
        }
        rn_up_call_sent(fw->call);
        return;
    }
    if (queued <= HIGH_BYTES && fw->client_paused) {
        fw->client_paused = 0;
        rn_request_body_resume(fw->req);
    }
}

/* ---- the answer from a node ---- */

static void header_value(const rn_header *h, size_t n, const char *name, char *out, size_t cap) {
    out[0] = 0;
    for (size_t i = 0; i < n; i++)
        if (rn_ieq(h[i].name, h[i].name_len, name) && h[i].value_len < cap) {
            memcpy(out, h[i].value, h[i].value_len);
            out[h[i].value_len] = 0;
            return;
        }
}

/* Learns where the stream's group is led from a node's answer. */
static void learn(fwd *fw, int status, const rn_header *h, size_t n, char *location, size_t cap) {
    char group[64], leader[64], term[24];
    header_value(h, n, "x-ursula-raft-group", group, sizeof group);
    header_value(h, n, "x-ursula-raft-leader-id", leader, sizeof leader);
    header_value(h, n, "x-ursula-raft-term", term, sizeof term);
    header_value(h, n, "location", location, cap);
    uint64_t t;
    rn_route_answer a = {
        .status = status,
        /* a 503 naming the group is routing's NO_LEADER (ext §5.7) */
        .error_code = status == 503 && group[0] ? "NO_LEADER" : "",
        .group = group,
        .leader_id = leader,
        .term = rn_parse_strict_u64(term, strlen(term), INT64_MAX, &t) ? -1 : (int64_t)t,
        .location = location};
    if (fw->route_len)
        rn_routes_learn(fw->f->routes, fw->origin, fw->route, fw->route_len, &a);
}

static int body_resendable(const fwd *fw) {
    return !fw->body_sent && (!fw->streamed || fw->pending.len || !fw->body_complete);
}

static void on_expiry(uv_timer_t *t);

/* Appends the origin the client reached the gateway at (its scheme and
 * Host); returns 0 when the request names no host. */
static int client_origin(const rn_request *req, rn_buf *out) {
    const rn_header *host = rn_request_header(req, "host", NULL);
    if (!host || !host->value_len)
        return 0;
    rn_buf_append_str(out, req->tls ? "https://" : "http://");
    rn_buf_append(out, host->value, host->value_len);
    return 1;
}

/* Starts the client's answer from the node's head. */
static void answer_head(fwd *fw, int status, const rn_header *h, size_t n, uint64_t length) {
    rn_buf head = {0};
    for (size_t i = 0; i < n; i++) {
        static const char *const dropped[] = {
            "connection", "keep-alive", "transfer-encoding", "content-length", "proxy-connection",
            "trailer",    "upgrade"};
        int drop = 0;
        for (size_t k = 0; k < sizeof dropped / sizeof dropped[0] && !drop; k++)
            drop = rn_ieq(h[i].name, h[i].name_len, dropped[k]);
        if (drop)
            continue;
        if (rn_ieq(h[i].name, h[i].name_len, "content-type") &&
            rn_iprefix(h[i].value, h[i].value_len, "text/event-stream"))
            fw->sse = 1;
        rn_buf_append(&head, h[i].name, h[i].name_len);
        rn_buf_append_str(&head, ": ");
        size_t olen = strlen(fw->origin);
        if (rn_ieq(h[i].name, h[i].name_len, "location") && h[i].value_len >= olen &&
            memcmp(h[i].value, fw->origin, olen) == 0 && client_origin(fw->req, &head)) {
            /* the node's URL of a stream becomes the gateway's */
            rn_buf_append(&head, h[i].value + olen, h[i].value_len - olen);
        } else {
            rn_buf_append(&head, h[i].value, h[i].value_len);
        }
        rn_buf_append_str(&head, "\r\n");
    }
    fw->answering = 1;
    if (length == RN_UP_NO_BODY) {
        rn_buf body = {0};
        rn_http_respond(fw->req, status, &head, &body);
    } else if (length == RN_UP_CHUNKED) {
        rn_http_stream_start(fw->req, status, &head);
        fw->streaming = 1;
    } else {
        rn_http_stream_start_sized(fw->req, status, &head, length);
        fw->streaming = 1;
    }

    int64_t exp = rn_gate_expires_ms(fw->req);
    if (fw->sse && exp > 0 && length == RN_UP_CHUNKED) {
        fw->at_boundary = 1;
        uv_timer_init(fw->f->loop, &fw->expiry);
        fw->expiry.data = fw;
        fw->timer_open = 1;
        int64_t now = rn_now_ms();
        uv_timer_start(&fw->expiry, on_expiry, exp > now ? (uint64_t)(exp - now) : 0, 0);
    }
}

static void up_head(void *arg, int status, const rn_header *h, size_t n, uint64_t length) {
    fwd *fw = arg;
    char location[1024];
    learn(fw, status, h, n, location, sizeof location);
    if (status == 307 || status == 308) {
        char lorigin[RN_ROUTES_ORIGIN_MAX], lpath[RN_ROUTES_PATH_MAX];
        int ok = !rn_url_split(location, lorigin, sizeof lorigin, lpath, sizeof lpath) &&
                 rn_iprefix(lorigin, strlen(lorigin), "http://");
        const char *rest = ok ? location + strlen(lorigin) : NULL;
        rn_up_call_cancel(fw->call); /* its connection closes: never reused mid-request */
        fw->call = NULL;
        fw->call_open = 0;
        if (ok && fw->hops < MAX_HOPS && body_resendable(fw) && strlen(rest) < TARGET_MAX) {
            fw->hops++;
            fw->f->redirects_followed++;
            snprintf(fw->origin, sizeof fw->origin, "%s", lorigin);
            free(fw->target);
            fw->target = rn_xstrdup(rest[0] ? rest : "/");
            fw->continued = 0;
            attempt(fw);
            return;
        }
        /* the redirect proves nothing applied, and an intermediary sends no
         * redirect of its own (ext §11.1) */
        refuse(fw, RN_FWD_NOT_LED);
        fwd_try_free(fw);
        return;
    }
    answer_head(fw, status, h, n, length);
}

/* Forwards what an SSE answer's bytes hold up to the end of an event when
 * the credential expired, then the expiry event, and ends the answer.
 * Returns 1 when it ended it. */
static int sse_until_expiry(fwd *fw, const uint8_t *p, size_t len) {
    const uint8_t *end = NULL;
    for (size_t i = 0; i + 1 < len && !end; i++)
        if (p[i] == '\n' && p[i + 1] == '\n')
            end = p + i + 2;
    if (!end && !(fw->at_boundary && len == 0))
        return 0;
    rn_buf out = {0};
    if (end)
        rn_buf_append(&out, p, (size_t)(end - p));
    rn_buf_append_str(&out, "event: credential-expired\ndata:"); /* as a node's gate ends it */
    rn_error_body(RN_E_GW_CREDENTIAL_EXPIRED, NULL, 0, &out);
    rn_buf_append_str(&out, "\n\n");
    rn_http_stream_write(fw->req, &out);
    rn_http_stream_end(fw->req);
    return 1;
}

static void end_expired(fwd *fw) {
    if (fw->call) {
        rn_up_call_cancel(fw->call);
        fw->call = NULL;
        fw->call_open = 0;
    }
    fwd_try_free(fw);
}

static void on_expiry(uv_timer_t *t) {
    fwd *fw = t->data;
    fw->expire_pending = 1;
    if (fw->at_boundary && sse_until_expiry(fw, NULL, 0))
        end_expired(fw);
}

static int up_data(void *arg, const uint8_t *p, size_t len) {
    fwd *fw = arg;
    if (fw->expire_pending && sse_until_expiry(fw, p, len)) {
        end_expired(fw);
        return 1;
    }
    if (fw->sse)
        fw->at_boundary = len >= 2 && p[len - 2] == '\n' && p[len - 1] == '\n';
    rn_buf chunk = {0};
    rn_buf_append(&chunk, p, len);
    size_t queued = rn_http_stream_write(fw->req, &chunk);
    return queued > HIGH_BYTES;
}

static void up_go_on(void *arg) {
    fwd *fw = arg;
    fw->continued = 1;
    flush_body(fw);
}

static void up_drained(void *arg) {
    flush_body(arg);
}

static void up_end(void *arg, rn_up_end how, int sent_any) {
    fwd *fw = arg;
    fw->call = NULL;
    fw->call_open = 0;
    if (how == RN_UP_DONE) {
        if (fw->answering)
            rn_http_stream_end(fw->req); /* no-op for an answer sent whole */
    } else if (fw->answering) {
        rn_http_stream_abort(fw->req); /* the client must not take a part for the whole */
    } else if (fw->pinned && (how == RN_UP_CONNECT || (how == RN_UP_BROKEN && !sent_any))) {
        refuse(fw, RN_FWD_UNREACHABLE);
    } else if (how == RN_UP_CONNECT || (how == RN_UP_BROKEN && !sent_any)) {
        rn_nodes_failed(fw->f->nodes, fw->origin);
        rn_routes_learn(fw->f->routes, fw->origin, fw->route, fw->route_len,
                        &(rn_route_answer){.status = 0});
        fw->origin[0] = 0; /* another node */
        attempt(fw);
        return;
    } else if (how == RN_UP_TIMEOUT) {
        refuse(fw, RN_FWD_TIMEOUT);
    } else if (fw->read_only && fw->tries < 2 && body_resendable(fw)) {
        fw->origin[0] = 0; /* a read changes nothing: once more */
        attempt(fw);
        return;
    } else {
        refuse(fw, RN_FWD_FAILED);
    }
    fwd_try_free(fw);
}

static const rn_up_callbacks up_callbacks = {
    .head = up_head, .data = up_data, .go_on = up_go_on, .drained = up_drained, .end = up_end};

/* ---- attempts ---- */

/* The time an answer's head may take: a long-poll's wait on top. */
static uint64_t head_timeout(const fwd *fw) {
    const char *q = memchr(fw->target, '?', strlen(fw->target));
    uint64_t t = fw->f->cfg.upstream_timeout_ms;
    return q && strstr(q, "live=long-poll") ? t + LONG_POLL_EXTRA_MS : t;
}

/* Sends fw's request to fw->origin, or to a node of the routes' or the
 * round's choosing when it is empty. */
static void attempt(fwd *fw) {
    rn_forwarder *f = fw->f;
    if (!fw->origin[0] &&
        !(fw->route_len && !fw->tries &&
          rn_routes_lookup(f->routes, fw->route, fw->route_len, fw->origin, sizeof fw->origin)) &&
        !rn_nodes_pick(f->nodes, NULL, fw->origin, sizeof fw->origin)) {
        refuse(fw, fw->tries ? RN_FWD_UNREACHABLE : RN_FWD_NO_NODE);
        fwd_try_free(fw);
        return;
    }
    fw->tries++;
    rn_buf head = {0};
    int expect = fw->streamed && !fw->body_complete;
    build_head(fw, &head, expect);
    int whole = !fw->streamed;
    if (whole && fw->req->body.len) /* the body is in hand: head and body in one write */
        rn_buf_append(&head, fw->req->body.data, fw->req->body.len);
    if (whole)
        fw->body_sent = 0; /* the request keeps its body: always resendable */
    fw->call =
        rn_up_call_start(f->up, fw->origin, &head, expect, head_timeout(fw), &up_callbacks, fw);
    if (!fw->call) { /* an origin the gateway cannot speak to (a redirect's) */
        refuse(fw, RN_FWD_UNREACHABLE);
        fwd_try_free(fw);
        return;
    }
    fw->call_open = 1;
    if (whole) {
        rn_up_call_sent(fw->call);
        return;
    }
    fw->continued = !expect;
    flush_body(fw);
}

/* ---- the client's side ---- */

static void fwd_try_free(fwd *fw) {
    if (fw->call_open || fw->timer_open || !fw->req_held)
        return;
    fw->req_held = 0;
    rn_request *req = fw->req;
    req->handler_data = NULL;
    req->on_abort = NULL;
    req->on_drain = NULL;
    req->on_input_end = NULL;
    rn_buf_free(&fw->pending);
    free(fw->target);
    free(fw);
    rn_request_release(req);
}

static void on_timer_closed(uv_handle_t *h) {
    fwd *fw = h->data;
    fw->timer_open = 0;
    fwd_try_free(fw);
}

static void close_timer(fwd *fw) {
    if (fw->timer_open && !uv_is_closing((uv_handle_t *)&fw->expiry))
        uv_close((uv_handle_t *)&fw->expiry, on_timer_closed);
}

static void on_abort(rn_request *req) {
    fwd *fw = req->handler_data;
    if (!fw)
        return;
    if (fw->call) {
        rn_up_call_cancel(fw->call);
        fw->call = NULL;
        fw->call_open = 0;
    }
    close_timer(fw);
    fwd_try_free(fw);
}

static void end_for_gone_client(fwd *fw) {
    if (fw->call) {
        rn_up_call_cancel(fw->call);
        fw->call = NULL;
        fw->call_open = 0;
    }
    close_timer(fw);
    fw->req->on_abort = NULL; /* ended here */
    rn_http_stream_abort(fw->req);
    fwd_try_free(fw);
}

/* A read's client shut its sending side: gone, as far as a streamed
 * answer (an SSE read, a long body) can tell, which would otherwise hold
 * the node's stream and the tenant's live-read slot until the node ends
 * it. An answer not streamed yet still comes (the client may read it). */
static void on_input_end(rn_request *req) {
    fwd *fw = req->handler_data;
    if (!fw)
        return;
    if (fw->streaming)
        end_for_gone_client(fw);
}

static void on_drain(rn_request *req) {
    fwd *fw = req->handler_data;
    if (fw && fw->call)
        rn_up_call_resume_read(fw->call);
}

static int sink_data(rn_request *req, const uint8_t *p, size_t len) {
    fwd *fw = req->handler_data;
    if (!fw)
        return 0; /* answered already */
    rn_gate_count_bytes_in(req, len);
    rn_buf_append(&fw->pending, p, len);
    if (!fw->call || !fw->continued)
        return fw->client_paused = 1;
    flush_body(fw);
    return fw->client_paused;
}

static void sink_end(rn_request *req, rn_body_event ev) {
    fwd *fw = req->handler_data;
    if (!fw)
        return;
    if (ev == RN_BODY_END) {
        fw->body_complete = 1;
        flush_body(fw);
        return;
    }
    /* the body failed: the node's request is cut, so nothing of it applies */
    int forwarded = fw->body_sent || (fw->call && rn_up_call_sent_any(fw->call));
    if (fw->call) {
        rn_up_call_cancel(fw->call);
        fw->call = NULL;
        fw->call_open = 0;
    }
    if (!fw->answering) {
        refuse(fw, forwarded                 ? RN_FWD_BODY_STALLED
                   : ev == RN_BODY_TOO_LARGE ? RN_FWD_BODY_TOO_LARGE
                   : ev == RN_BODY_SLOW      ? RN_FWD_BODY_SLOW
                                             : RN_FWD_BODY_CUT);
    } else {
        rn_http_stream_abort(req);
    }
    close_timer(fw);
    fwd_try_free(fw);
}

/* The route key of the request: its stream's path (a subresource's is its
 * stream's), or none for what has no stream. */
static void route_of(fwd *fw) {
    const char *t = fw->target;
    size_t n = strcspn(t, "?");
    fw->route_len = 0;
    if (strncmp(t, "/__runnel/", 10) == 0 || n < 2)
        return;
    size_t end = n;
    if (strncmp(t, "/v1/stream/", 11) != 0) { /* /bucket/stream[/sub...] */
        const char *s1 = memchr(t + 1, '/', n - 1);
        const char *s2 = s1 ? memchr(s1 + 1, '/', n - (size_t)(s1 + 1 - t)) : NULL;
        if (!s1)
            return;
        end = s2 ? (size_t)(s2 - t) : n;
    }
    if (end < sizeof fw->route) {
        memcpy(fw->route, t, end);
        fw->route[end] = 0;
        fw->route_len = end;
    }
}

static fwd *fwd_new(rn_forwarder *f, rn_request *req, int streamed) {
    fwd *fw = rn_xcalloc(1, sizeof *fw);
    fw->f = f;
    fw->req = req;
    fw->streamed = streamed;
    fw->read_only = req->method == RN_HTTP_GET || req->method == RN_HTTP_HEAD;
    /* the gate, when there is one, took a credential out of the target */
    fw->target =
        rn_xstrndup(req->target, req->target_len < TARGET_MAX ? req->target_len : TARGET_MAX - 1);
    route_of(fw);
    rn_request_hold(req);
    fw->req_held = 1;
    req->handler_data = fw;
    req->on_abort = on_abort;
    req->on_drain = on_drain;
    if (fw->read_only)
        req->on_input_end = on_input_end;
    return fw;
}

void rn_forward(rn_forwarder *f, rn_request *req) {
    fwd *fw = fwd_new(f, req, 0);
    fw->body_complete = 1;
    attempt(fw);
}

/* Takes fw's body as it arrives (from the on_headers hook). */
static void take_body(fwd *fw) {
    fw->chunked_up = rn_request_header(fw->req, "content-length", NULL) == NULL;
    static const rn_body_sink sink = {.data = sink_data, .end = sink_end};
    rn_request_stream_body(fw->req, &sink);
}

void rn_forward_streamed(rn_forwarder *f, rn_request *req) {
    fwd *fw = fwd_new(f, req, 1);
    take_body(fw);
    attempt(fw);
}

void rn_forward_to(rn_forwarder *f, rn_request *req, const char *origin, int streamed) {
    fwd *fw = fwd_new(f, req, streamed);
    fw->pinned = 1;
    snprintf(fw->origin, sizeof fw->origin, "%s", origin);
    if (streamed)
        take_body(fw);
    else
        fw->body_complete = 1;
    attempt(fw);
}
