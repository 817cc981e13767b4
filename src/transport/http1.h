/*
 * http1.h — HTTP/1.1 on a connection (private to src/transport/): the
 * protocol a connection speaks from accept (see conn.h, rn_protocol).
 */
#ifndef RN_TRANSPORT_HTTP1_H
#define RN_TRANSPORT_HTTP1_H

#include "transport/conn.h"

/* Starts HTTP/1.1 on c, newly accepted and not closed: sets c->proto and
 * c->proto_state, between requests (idle). */
void http1_attach(rn_conn *c);

#endif
