/*
 * response.h — what a protocol calls back into the answer code (private
 * to src/transport/; the answer calls themselves are in http.h).
 */
#ifndef RN_TRANSPORT_RESPONSE_H
#define RN_TRANSPORT_RESPONSE_H

#include "transport/conn.h"

/* Sends the next piece of x's file body (rn_http_respond_file) now that
 * the one before it is written, or its suffix and the end of the answer
 * once the file is sent. One piece is in flight at a time; its bytes go to
 * the protocol's send_body as RN_BODY_FILE_PIECE. No-op when x is NULL or
 * has no file body. */
void answer_file_pump(rn_exchange *x);

#endif
