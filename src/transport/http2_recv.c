/*
 * http2_recv.c — what arrives on an HTTP/2 connection (see http2_state.h):
 * nghttp2's callbacks, which build each stream's request from its header
 * fields (:authority as Host) and DATA frames, bound the head (431) and the
 * body (413, 503 over the body budget), count PING/SETTINGS/RST_STREAM
 * floods, and queue complete requests to be handed to the handler once
 * nghttp2_session_mem_recv has returned (h2_dispatch_ready): no nghttp2
 * call from inside a callback but frame submissions.
 *
 * Early answers: a request whose head arrived with a body to follow may be
 * answered at once by the server's on_headers hook (ext §5.5), or refused
 * unread; such an answer resets the stream with NO_ERROR once its last
 * frame is sent (RFC 9113 §8.1), so the body is never read. Unless the
 * rest of a declared body fits in the stream's receive window and no 100
 * Continue is awaited: the client then sends it without waiting for us,
 * and it is dropped as it comes until the client ends the stream (or the
 * request timeout resets it: http2.c). Clients that fail an upload whose
 * stream is reset under them (curl 7.88, Debian 12's, fails about a third
 * of the writes a cluster follower redirects) then see an ordinary end.
 */
#include "transport/http2_state.h"
#include "util/metrics.h"
#include "util/text.h"

#include <stdlib.h>
#include <string.h>

/* A header's position in the exchange's raw bytes while the head arrives. */
struct h2_span {
    size_t name_off, name_len, value_off, value_len;
};

/* ---- requests ---- */

static rn_http_method method_of(const char *m, size_t len) {
    static const struct {
        const char *name;
        rn_http_method method;
    } methods[] = {{"GET", RN_HTTP_GET}, {"HEAD", RN_HTTP_HEAD},     {"POST", RN_HTTP_POST},
                   {"PUT", RN_HTTP_PUT}, {"DELETE", RN_HTTP_DELETE}, {"OPTIONS", RN_HTTP_OPTIONS}};
    for (size_t i = 0; i < sizeof methods / sizeof methods[0]; i++)
        if (strlen(methods[i].name) == len && memcmp(methods[i].name, m, len) == 0)
            return methods[i].method;
    return RN_HTTP_OTHER;
}

/* Fills s's rn_request from the head received: method, target, headers
 * (:authority as Host when the request has none). */
static void build_request(h2_stream *s) {
    rn_exchange *x = s->x;
    rn_request *r = &x->req;
    const char *raw = (const char *)x->raw.data;
    r->method_name = s->has_method ? raw + s->method_off : "-";
    r->method = s->has_method ? method_of(r->method_name, strlen(r->method_name)) : RN_HTTP_OTHER;
    r->target = s->has_path ? raw + s->path_off : "";
    r->target_len = s->has_path ? s->path_len : 0;
    r->headers = rn_xcalloc(s->span_count + 1, sizeof *r->headers);
    size_t n = 0;
    for (size_t i = 0; i < s->span_count; i++)
        r->headers[n++] = (rn_header){raw + s->spans[i].name_off, s->spans[i].name_len,
                                      raw + s->spans[i].value_off, s->spans[i].value_len};
    if (s->has_authority && !rn_request_header(r, "host", NULL))
        r->headers[n++] = (rn_header){"host", 4, raw + s->authority_off, s->authority_len};
    r->header_count = n;
}

/* Queues s to be handed to the handler once nghttp2 returns. */
static void make_ready(h2_stream *s, int early) {
    if (s->ready || !s->x)
        return;
    s->ready = 1;
    s->early = early;
    rn_http2 *h = s->h;
    if (h->ready_tail)
        h->ready_tail->ready_next = s;
    else
        h->ready = s;
    h->ready_tail = s;
}

/* A body taken by a sink (rn_request_stream_body) arrived whole, or
 * failed: the sink gets it in one call, then its end. */
static void deliver_body(rn_exchange *x) {
    rn_request *r = &x->req;
    if (r->body_too_large || r->body_over_budget) {
        x->sink.end(r, r->body_too_large ? RN_BODY_TOO_LARGE : RN_BODY_OVER_BUDGET);
        return;
    }
    rn_request_hold(r);
    if (r->body.len)
        x->sink.data(r, r->body.data, r->body.len);
    if (!x->responding && x->conn)
        x->sink.end(r, RN_BODY_END);
    rn_request_release(r);
}

void h2_dispatch_ready(rn_http2 *h) {
    while (h->ready && !h->conn->closed) {
        h2_stream *s = h->ready;
        h->ready = s->ready_next;
        if (!h->ready)
            h->ready_tail = NULL;
        if (!s->x)
            continue; /* reset meanwhile */
        rn_http_server *srv = h->conn->srv;
        if (s->refusal) {
            rn_buf head = {0}, body = {0};
            rn_http_respond(&s->x->req, s->refusal, &head, &body);
        } else if (s->x->sink.data) {
            deliver_body(s->x);
        } else {
            srv->on_request(&s->x->req, srv->arg);
        }
    }
}

/* The head of s's request arrived and its body follows: the on_headers
 * hook may answer now (ext §5.5), a declared body past the limits is
 * refused unread, else the body is read. Returns 1 when s was handed over. */
static int head_with_body(h2_stream *s) {
    rn_exchange *x = s->x;
    rn_request *r = &x->req;
    rn_http_server *srv = s->h->conn->srv;
    const rn_header *cl = rn_request_header(r, "content-length", NULL);
    uint64_t declared = 0;
    s->declared = cl && rn_parse_strict_u64(cl->value, cl->value_len, UINT64_MAX, &declared) == 0;
    s->body_declared = declared;
    if (s->declared && declared > srv->cfg.max_body_bytes) {
        r->body_too_large = 1;
        make_ready(s, 1);
        return 1;
    }
    const rn_header *expect = rn_request_header(r, "expect", NULL);
    int wants_continue = expect && rn_ieq(expect->value, expect->value_len, "100-continue");
    s->awaits_continue = wants_continue;
    if (srv->cfg.on_headers && (wants_continue || srv->cfg.on_headers_every_body ||
                                (s->declared && declared >= RN_HTTP_EARLY_BODY_BYTES))) {
        s->ready = 1; /* a hook's answer is the whole answer: never dispatched */
        s->early = 1;
        r->body_pending = 1;
        rn_request_hold(r); /* an answer that finishes the stream detaches it meanwhile */
        srv->cfg.on_headers(r, srv->arg);
        r->body_pending = 0;
        int answered = !s->x || x->responding; /* (and finished: x left the stream) */
        rn_request_release(r);
        if (answered)
            return 1;
        s->ready = 0;
        s->early = 0;
    }
    if (s->declared && declared > 0 && exchange_charge_body(x, declared)) {
        r->body_over_budget = 1;
        make_ready(s, 1);
        return 1;
    }
    if (s->declared)
        rn_buf_reserve(&r->body, (size_t)declared);
    if (wants_continue) {
        s->awaits_continue = 0;
        const nghttp2_nv nv = {(uint8_t *)":status", (uint8_t *)"100", 7, 3, NGHTTP2_NV_FLAG_NONE};
        nghttp2_submit_headers(s->h->session, NGHTTP2_FLAG_NONE, s->id, NULL, &nv, 1, NULL);
    }
    return 0;
}

/* ---- nghttp2 callbacks (no call back into nghttp2's session from here,
 * except submissions) ---- */

static int on_begin_headers(nghttp2_session *session, const nghttp2_frame *frame, void *user) {
    rn_http2 *h = user;
    if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST)
        return 0;
    h2_stream *s = h2_stream_new(h, frame->hd.stream_id);
    nghttp2_session_set_stream_user_data(session, s->id, s);
    return 0;
}

static void append_cstr(rn_buf *b, const uint8_t *v, size_t len) {
    rn_buf_append(b, v, len);
    rn_buf_append(b, "", 1);
}

static int on_header(nghttp2_session *session, const nghttp2_frame *frame, const uint8_t *name,
                     size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags,
                     void *user) {
    (void)flags;
    rn_http2 *h = user;
    h2_stream *s = nghttp2_session_get_stream_user_data(session, frame->hd.stream_id);
    if (!s || !s->x || s->headers_done || s->refusal)
        return 0; /* trailers are ignored */
    rn_exchange *x = s->x;
    const rn_http_config *cfg = &h->conn->srv->cfg;
    if (x->raw.len + namelen + valuelen + 2 > cfg->http2_max_header_list_bytes ||
        s->span_count >= cfg->max_headers) {
        s->refusal = 431;
        return 0;
    }
    if (namelen > 0 && name[0] == ':') {
        size_t off = x->raw.len;
        if (namelen == 7 && memcmp(name, ":method", 7) == 0) {
            s->has_method = 1;
            s->method_off = off;
        } else if (namelen == 5 && memcmp(name, ":path", 5) == 0) {
            s->has_path = 1;
            s->path_off = off;
            s->path_len = valuelen;
        } else if (namelen == 10 && memcmp(name, ":authority", 10) == 0) {
            s->has_authority = 1;
            s->authority_off = off;
            s->authority_len = valuelen;
        } else {
            return 0; /* :scheme */
        }
        append_cstr(&x->raw, value, valuelen);
        return 0;
    }
    if (s->span_count == s->span_cap) {
        s->span_cap = s->span_cap ? s->span_cap * 2 : 16;
        s->spans = rn_xrealloc(s->spans, s->span_cap * sizeof *s->spans);
    }
    h2_span *sp = &s->spans[s->span_count++];
    sp->name_off = x->raw.len;
    sp->name_len = namelen;
    append_cstr(&x->raw, name, namelen);
    sp->value_off = x->raw.len;
    sp->value_len = valuelen;
    append_cstr(&x->raw, value, valuelen);
    return 0;
}

static int on_data_chunk(nghttp2_session *session, uint8_t flags, int32_t id, const uint8_t *data,
                         size_t len, void *user) {
    (void)flags, (void)user;
    h2_stream *s = nghttp2_session_get_stream_user_data(session, id);
    if (s)
        s->body_received += len;
    if (!s || !s->x || s->ready)
        return 0; /* answered already: the body is dropped */
    rn_request *r = &s->x->req;
    rn_http_server *srv = s->h->conn->srv;
    if (r->body.len + len > srv->cfg.max_body_bytes) {
        r->body_too_large = 1;
    } else if (!s->declared && exchange_charge_body(s->x, len)) {
        r->body_over_budget = 1;
    } else {
        rn_buf_append(&r->body, data, len);
        return 0;
    }
    rn_buf_free(&r->body);
    exchange_uncharge_body(s->x);
    make_ready(s, 1);
    return 0;
}

/* Counts a PING, SETTINGS or RST_STREAM frame against the connection's
 * bound per second; past it the connection ends (GOAWAY
 * ENHANCE_YOUR_CALM). Only a reset that cancels a request whose answer is
 * not all queued counts (the rapid reset): clients such as curl 7.88 reset
 * each stream whose answer had no DATA frame once they have it, which
 * cancels nothing. */
static void control_frame(rn_http2 *h) {
    uint64_t now = uv_now(h->conn->srv->loop);
    if (now - h->window_start >= 1000) {
        h->window_start = now;
        h->window_frames = 0;
    }
    if (++h->window_frames == h->conn->srv->cfg.http2_max_control_frames + 1) {
        rn_metric.h2_flood_closes++;
        nghttp2_session_terminate_session(h->session, NGHTTP2_ENHANCE_YOUR_CALM);
    }
}

static int on_frame_recv(nghttp2_session *session, const nghttp2_frame *frame, void *user) {
    rn_http2 *h = user;
    switch (frame->hd.type) {
    case NGHTTP2_PING:
        if (!(frame->hd.flags & NGHTTP2_FLAG_ACK)) {
            rn_metric.h2_ping_frames++;
            control_frame(h);
        }
        return 0;
    case NGHTTP2_SETTINGS:
        if (!(frame->hd.flags & NGHTTP2_FLAG_ACK)) {
            rn_metric.h2_settings_frames++;
            control_frame(h);
        }
        return 0;
    case NGHTTP2_RST_STREAM: {
        rn_metric.h2_rst_frames++;
        const h2_stream *s = nghttp2_session_get_stream_user_data(session, frame->hd.stream_id);
        if (s && s->x && !s->eof)
            control_frame(h);
        return 0;
    }
    case NGHTTP2_HEADERS:
    case NGHTTP2_DATA:
        break;
    default:
        return 0;
    }
    h2_stream *s = nghttp2_session_get_stream_user_data(session, frame->hd.stream_id);
    if (!s || !s->x)
        return 0;
    int end = (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0;
    if (frame->hd.type == NGHTTP2_HEADERS && !s->headers_done) {
        s->headers_done = 1;
        build_request(s);
        if (s->refusal) {
            make_ready(s, !end);
            return 0;
        }
        if (!end && head_with_body(s))
            return 0;
    }
    if (end)
        make_ready(s, 0);
    return 0;
}

/* True when the client sends the rest of s's declared body without
 * waiting for us: it fits in the stream's receive window and no 100
 * Continue is awaited. */
static int body_rest_in_flight(nghttp2_session *session, const h2_stream *s) {
    if (!s->declared || s->awaits_continue)
        return 0;
    uint64_t rest = s->body_declared > s->body_received ? s->body_declared - s->body_received : 0;
    int32_t window = nghttp2_session_get_stream_local_window_size(session, s->id);
    return window >= 0 && rest <= (uint64_t)window;
}

/* The last frame of an answer left while the client still sends its
 * request: the stream is reset with NO_ERROR (RFC 9113 §8.1), or drained
 * when the rest of its body is in flight anyway (see the top comment). */
static int on_frame_send(nghttp2_session *session, const nghttp2_frame *frame, void *user) {
    rn_http2 *h = user;
    if ((frame->hd.type != NGHTTP2_HEADERS && frame->hd.type != NGHTTP2_DATA) ||
        !(frame->hd.flags & NGHTTP2_FLAG_END_STREAM) ||
        nghttp2_session_get_stream_remote_close(session, frame->hd.stream_id))
        return 0;
    h2_stream *s = nghttp2_session_get_stream_user_data(session, frame->hd.stream_id);
    if (s && !h->conn->input_ended && body_rest_in_flight(session, s)) {
        s->draining = 1;
        s->answered_at = uv_now(h->conn->srv->loop);
        return 0;
    }
    nghttp2_submit_rst_stream(session, NGHTTP2_FLAG_NONE, frame->hd.stream_id, NGHTTP2_NO_ERROR);
    return 0;
}

static int on_stream_close(nghttp2_session *session, int32_t id, uint32_t error, void *user) {
    (void)error, (void)user;
    h2_stream *s = nghttp2_session_get_stream_user_data(session, id);
    if (s)
        h2_stream_closed(s);
    return 0;
}

nghttp2_session_callbacks *h2_session_callbacks(void) {
    static nghttp2_session_callbacks *cbs;
    if (!cbs) {
        if (nghttp2_session_callbacks_new(&cbs) != 0)
            abort();
        nghttp2_session_callbacks_set_on_begin_headers_callback(cbs, on_begin_headers);
        nghttp2_session_callbacks_set_on_header_callback(cbs, on_header);
        nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, on_data_chunk);
        nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, on_frame_recv);
        nghttp2_session_callbacks_set_on_frame_send_callback(cbs, on_frame_send);
        nghttp2_session_callbacks_set_on_stream_close_callback(cbs, on_stream_close);
    }
    return cbs;
}
