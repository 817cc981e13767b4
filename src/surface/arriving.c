/*
 * arriving.c — large appends taken while their body arrives. From the
 * request's head (rn_streams_answer_early, the transport's on_headers
 * hook), a POST over HTTP/1.1 whose declared body is large enough for the
 * engine to write once (rn_engine_arriving_possible), not JSON and without
 * Producer-Digest, is submitted to the engine at once, and its body is fed
 * to it as the transport reads it (rn_request_stream_body): the engine
 * writes it to the stream's file while the rest is still on its way, where
 * a body read whole first would be written only after its last byte. The
 * engine asks for pauses (a piece of it waiting), which stop the reading.
 *
 * An arrival holds at most ARRIVAL_HOLD_BYTES (the engine's two pieces and
 * what the transport delivers after a pause, with the buffers' slack). It
 * counts its body's length up to that against --max-body-bytes-in-flight,
 * as the transport counts a body it reads whole (rn_request_charge_body);
 * past the bound it takes the transport's path, which refuses it (503).
 *
 * An answer the engine gives while the body still arrives (a refusal from
 * the head: 404, 409, a producer's answer) is rendered at once and kept
 * by the transport until the body is in (rn_request_hold_answer): ext
 * §5.5 allows only its own early answers, routing and size before the
 * body, and clients (fetch among them) may fail an upload answered early.
 * The rest of the body is read and dropped meanwhile. A body that ends
 * incomplete (too slow, cut, more bytes than declared) leaves nothing
 * appended and is answered as the normal path answers such a body, once
 * the engine let go of it.
 */
#include "surface/streams_int.h"
#include "protocol/reply.h"
#include "util/text.h"

#include <assert.h>

#define ARRIVAL_HOLD_BYTES (4u << 20)

/* What an arrival of body_len bytes counts against the bound. */
static uint64_t hold_for(uint64_t body_len) {
    return body_len < ARRIVAL_HOLD_BYTES ? body_len : ARRIVAL_HOLD_BYTES;
}

/* The error owed for a body that ended before its declared end. */
static rn_error body_event_error(rn_body_event ev) {
    switch (ev) {
    case RN_BODY_SLOW:
        return RN_E_REQUEST_TIMEOUT;
    case RN_BODY_TOO_LARGE:
        return RN_E_REQUEST_TOO_LARGE;
    case RN_BODY_OVER_BUDGET:
        return RN_E_INGRESS_BODY_BYTES;
    case RN_BODY_END: /* with fewer bytes than declared (see on_body_data) */
    case RN_BODY_CUT:
        break;
    }
    return RN_E_INVALID_REQUEST;
}

/* Ends the engine's feed: complete, or not with the error to answer. */
static void end_feed(stream_ctx *c, int complete, rn_error fault) {
    assert(c->arriving);
    c->arriving = 0;
    if (!complete) {
        c->body_failed = 1;
        c->body_fault = fault;
    }
    rn_engine_arriving_end(c->sf->engine, &c->op, complete);
}

static int on_body_data(rn_request *req, const uint8_t *bytes, size_t len) {
    stream_ctx *c = req->handler_data;
    /* answered (the answer kept until the end), or ended: dropped */
    if (!c || !c->arriving)
        return 0;
    /* HTTP/1.1's framing forbids more than declared; checked so that no
     * client input can reach the engine's assertion */
    if (c->arrived + len > c->op.in.body_len) {
        end_feed(c, 0, RN_E_INVALID_REQUEST);
        return 0;
    }
    c->arrived += len;
    return rn_engine_arriving_data(c->sf->engine, &c->op, bytes, len);
}

static void on_body_end(rn_request *req, rn_body_event ev) {
    stream_ctx *c = req->handler_data;
    if (!c) { /* answered while the body arrived: the answer goes now */
        if (rn_request_answer_held(req))
            rn_request_send_held(req);
        return;
    }
    if (!c->arriving)
        return;
    int complete = ev == RN_BODY_END && c->arrived == c->op.in.body_len;
    end_feed(c, complete, body_event_error(ev));
}

/* The connection went away with the op in the engine: a body still
 * arriving will not come; the op's answer then ends the ctx. */
static void on_abort(rn_request *req) {
    stream_ctx *c = req->handler_data;
    if (c->arriving)
        end_feed(c, 0, RN_E_INVALID_REQUEST);
}

static void resume_body(rn_op *op) {
    stream_ctx *c = op->arg;
    rn_request_body_resume(c->req);
}

static void arriving_done(rn_op *op) {
    stream_ctx *c = op->arg;
    rn_request *req = c->req;
    /* answered from the head: the answer waits for the body's end, and a
     * pause the engine asked for ends (below: the transport may feed the
     * sink, which then drops the bytes, inside the call) */
    int early = c->arriving;
    if (early)
        rn_request_hold_answer(req);
    c->arriving = 0;
    req->handler_data = NULL; /* c ends with this answer */
    rn_request_hold(req);
    if (!c->body_failed) {
        rn_streams_op_done(op);
    } else {
        rn_buf extra = {0};
        if (c->body_fault == RN_E_REQUEST_TOO_LARGE)
            rn_buf_appendf(&extra, "Ursula-Max-Request-Bytes: %zu\r\n", c->sf->cfg.max_body_bytes);
        else if (c->body_fault == RN_E_INGRESS_BODY_BYTES)
            rn_buf_append_str(&extra, "Retry-After: 1\r\n");
        c->op.done = NULL;
        rn_streams_reply(c, c->body_fault, &extra);
    }
    if (early)
        rn_request_body_resume(req);
    rn_request_release(req);
}

/* The declared length of req's body (Content-Length), or 0 when it has
 * none or it does not parse. */
static uint64_t declared_length(const rn_request *req) {
    size_t n;
    const rn_header *h = rn_request_header(req, "content-length", &n);
    uint64_t v;
    if (!h || n != 1 || rn_parse_strict_u64(h->value, h->value_len, UINT64_MAX, &v))
        return 0;
    return v;
}

int rn_streams_take_arriving(rn_surface *sf, rn_request *req, const rn_profile *prof,
                             const char *key, size_t key_len) {
    uint64_t body_len = declared_length(req);
    const rn_header *ct = rn_request_header(req, "content-type", NULL);
    if (!sf->cfg.bodies_arrive || !req->body_pending || !body_len ||
        !rn_request_body_streams_as_it_arrives(req) || /* HTTP/2 would hand it over whole */
        !rn_engine_arriving_possible(sf->engine, body_len) || !ct ||
        rn_content_type_is_json(ct->value, ct->value_len) ||
        rn_request_header(req, "producer-digest", NULL))
        return 0;
    stream_ctx *c = rn_streams_ctx_new(sf, req, key, key_len);
    c->prof = prof;
    rn_param_fault f;
    rn_error e;
    /* a fault is answered with the body, as without this path; past the
     * bound the transport refuses the body */
    if (rn_request_incarnation(req, &c->op.in.has_incarnation, &c->op.in.incarnation) ||
        rn_streams_read_append(c, (size_t)body_len, &f, &e) ||
        rn_request_charge_body(req, hold_for(body_len)) < 0) {
        req->handler_data = NULL;
        req->on_abort = NULL;
        rn_streams_ctx_free(c);
        return 0;
    }
    assert(c->op.in.content_type && !c->op.in.has_producer_digest);
    c->op.in.arriving = 1;
    c->op.in.arriving_resume = resume_body;
    c->op.done = arriving_done;
    c->arriving = 1;
    req->on_abort = on_abort;
    rn_request_stream_body(req, &(rn_body_sink){.data = on_body_data, .end = on_body_end});
    rn_engine_submit(sf->engine, &c->op);
    return 1;
}
