/*
 * request.c — the request object: its life (references, detaching from
 * its connection), header lookup, and the bound on request body bytes held
 * at once. See request.h.
 */
#include "transport/request.h"
#include "transport/response.h"
#include "util/text.h"

#include <assert.h>
#include <stdlib.h>

/* Request body bytes held, counted against max_body_bytes_in_flight. A
 * request can outlive its connection (a handler holds it until the log
 * answers), so the count belongs to the module; only the loop thread
 * touches it. */
static uint64_t body_bytes_held;

rn_exchange *exchange_new(rn_conn *c) {
    rn_exchange *x = rn_xcalloc(1, sizeof *x);
    x->conn = c;
    x->req.tls = c->bytes == &rn_tls_bytes;
    x->req.target = ""; /* until the head is parsed */
    if (c->peer_listener)
        x->req.route_flags |= RN_REQUEST_PEER_LISTENER;
    x->refs = 1;
    return x;
}

void rn_request_hold(rn_request *req) {
    exchange_of(req)->refs++;
}

void rn_request_release(rn_request *req) {
    rn_exchange *x = exchange_of(req);
    assert(x->refs > 0);
    if (--x->refs > 0)
        return;
    if (req->gate_done)
        req->gate_done(req);
    exchange_uncharge_body(x);
    rn_buf_free(&x->held_head);
    rn_buf_free(&x->held_body);
    rn_buf_free(&req->body);
    rn_buf_free(&x->raw);
    answer_pieces_release(x);
    free(req->headers);
    free(x);
}

struct x509_st *rn_request_client_certificate(const rn_request *req, long *verify_result) {
    const rn_conn *c = exchange_of(req)->conn;
    *verify_result = 0; /* X509_V_OK */
    return c && c->bytes == &rn_tls_bytes ? tls_client_certificate(c, verify_result) : NULL;
}

void rn_request_stream_body(rn_request *req, const rn_body_sink *sink) {
    rn_exchange *x = exchange_of(req);
    assert(sink->data && sink->end && !x->sink.data && !x->responding);
    if (!x->conn)
        return;
    x->sink = *sink;
    x->conn->proto->stream_body(x);
}

int rn_request_charge_body(rn_request *req, uint64_t n) {
    rn_exchange *x = exchange_of(req);
    return x->conn ? exchange_charge_body(x, n) : -1;
}

void rn_request_hold_answer(rn_request *req) {
    rn_exchange *x = exchange_of(req);
    assert(x->sink.data && !x->responding && !x->holding);
    x->holding = 1;
}

void rn_request_send_held(rn_request *req) {
    rn_exchange *x = exchange_of(req);
    assert(x->holding && x->held_status);
    x->holding = 0;
    rn_http_respond(req, x->held_status, &x->held_head, &x->held_body);
}

int rn_request_answer_held(const rn_request *req) {
    return exchange_of(req)->held_status != 0;
}

int rn_request_body_streams_as_it_arrives(const rn_request *req) {
    const rn_conn *c = exchange_of(req)->conn;
    return c && c->proto->streams_as_it_arrives;
}

void rn_request_body_resume(rn_request *req) {
    rn_exchange *x = exchange_of(req);
    if (x->conn && x->sink.data)
        x->conn->proto->body_resume(x);
}

int rn_request_gone(const rn_request *req) {
    return exchange_of(req)->conn == NULL;
}

const rn_header *rn_request_header(const rn_request *req, const char *name, size_t *count) {
    const rn_header *first = NULL;
    size_t n = 0;
    for (size_t i = 0; i < req->header_count; i++) {
        if (rn_ieq(req->headers[i].name, req->headers[i].name_len, name)) {
            if (!first)
                first = &req->headers[i];
            n++;
        }
    }
    if (count)
        *count = n;
    return first;
}

void exchange_detach(rn_exchange *x, int aborted) {
    assert(x->conn);
    x->conn = NULL;
    rn_request *r = &x->req;
    if (aborted && r->on_abort) {
        void (*fn)(rn_request *) = r->on_abort;
        r->on_abort = NULL;
        fn(r);
    }
    rn_request_release(r);
}

int exchange_charge_body(rn_exchange *x, uint64_t n) {
    assert(x->conn);
    uint64_t cap = x->conn->srv->cfg.max_body_bytes_in_flight;
    if (cap && x->body_charged + n < RN_HTTP_EARLY_BODY_BYTES)
        cap += cap / 8;
    if (cap && (n > cap || body_bytes_held > cap - n))
        return -1;
    body_bytes_held += n;
    x->body_charged += n;
    return 0;
}

void exchange_uncharge_body(rn_exchange *x) {
    body_bytes_held -= x->body_charged;
    x->body_charged = 0;
}
