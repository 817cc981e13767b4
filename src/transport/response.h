/*
 * response.h — what a protocol calls back into the answer code (private
 * to src/transport/; the answer calls themselves are in http.h).
 */
#ifndef RN_TRANSPORT_RESPONSE_H
#define RN_TRANSPORT_RESPONSE_H

#include "transport/conn.h"

/* Sends the next piece of x's body (rn_http_respond_pieces) now that the
 * one before it is written, or its suffix and the end of the answer once
 * the body is sent; cuts the connection when a piece cannot be made. One
 * piece is in flight at a time; its bytes go to the protocol's send_body as
 * RN_BODY_PIECE. No-op when x is NULL or has no body sent in pieces. */
void answer_pump(rn_exchange *x);

/* Releases x's body source, if it has one, and what follows it. */
void answer_pieces_release(rn_exchange *x);

#endif
