/*
 * request.h — a request as the transport keeps it (private to
 * src/transport/): the rn_request a handler sees, its connection, its
 * references and the state of its answer, whatever the protocol; and the
 * bound on request body bytes held at once (max_body_bytes_in_flight).
 *
 * A protocol creates an exchange when a request begins (one per HTTP/1.1
 * request; one per HTTP/2 stream), fills the public fields and hands
 * &x->req to the handler. The connection holds one reference until it lets
 * go of the request (exchange_detach); a handler may hold more.
 */
#ifndef RN_TRANSPORT_REQUEST_H
#define RN_TRANSPORT_REQUEST_H

#include <stdint.h>

#include "transport/conn.h"
#include "transport/http.h"
#include "util/buf.h"

struct rn_exchange {
    rn_request req; /* the first member: see exchange_of */
    rn_conn *conn;  /* NULL once the connection let go of it */
    int refs;
    int responding; /* an answer (or stream) was started */
    int streaming;  /* a streamed answer is in progress */
    int sized;      /* it is sized (rn_http_stream_start_sized): sized_left bytes to come */
    uint64_t sized_left;
    /* rn_request_stream_body: the body's sink (data NULL: none) */
    rn_body_sink sink;
    /* rn_request_hold_answer: the next answer is kept here (held_status
     * > 0 once it came) until rn_request_send_held */
    int holding;
    int held_status;
    rn_buf held_head, held_body;
    /* rn_http_respond_pieces: the body's source (fill NULL: none), the
     * position of its next piece, the bytes left, and what follows them */
    rn_http_pieces pieces;
    uint64_t pieces_pos, pieces_left;
    rn_buf pieces_suffix;
    rn_buf raw;            /* storage for target and header bytes */
    uint64_t body_charged; /* bytes counted against max_body_bytes_in_flight */
    void *stream;          /* the protocol's state of the request (HTTP/2: its stream) */
};

/* The exchange of a request the transport made. */
static inline rn_exchange *exchange_of(const rn_request *req) {
    return (rn_exchange *)req;
}

/* A new request on c, with the connection's one reference. */
rn_exchange *exchange_new(rn_conn *c);

/* The connection lets go of x (it closes, or x's answer is done): x is
 * gone for its handler (answers become no-ops), its on_abort hook runs when
 * `aborted`, and the connection's reference is dropped. */
void exchange_detach(rn_exchange *x, int aborted);

/* Counts n more body bytes of x (which is on its connection). Returns -1
 * (nothing counted) when that would pass the server's bound. Bodies under
 * RN_HTTP_EARLY_BODY_BYTES may use a reserve of an eighth more, so that
 * clients stalling large uploads cannot starve small writes. */
int exchange_charge_body(rn_exchange *x, uint64_t n);

/* Uncounts every body byte of x (its body was dropped). */
void exchange_uncharge_body(rn_exchange *x);

#endif
