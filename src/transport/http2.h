/*
 * http2.h — HTTP/2 on a connection (private to src/transport/): the second
 * rn_protocol, over libnghttp2. Attached in cleartext when a connection's
 * first bytes are the connection preface (h2c by prior knowledge, detected
 * by http1.c), or after a TLS handshake that chose ALPN "h2".
 */
#ifndef RN_TRANSPORT_HTTP2_H
#define RN_TRANSPORT_HTTP2_H

#include <stddef.h>
#include <stdint.h>

#include "transport/conn.h"

/* The client connection preface (RFC 9113 §3.4) and its length. */
#define HTTP2_PREFACE "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
#define HTTP2_PREFACE_LEN 24

/* How the len bytes a connection began with compare with the preface: 1
 * they start with all of it, 0 they cannot be it, -1 they are a shorter
 * beginning of it (wait for more). */
int http2_preface_match(const uint8_t *bytes, size_t len);

/* Starts HTTP/2 on c, which is not closed and has no protocol (c->proto
 * NULL): sets c->proto and c->proto_state, and queues the server's
 * SETTINGS. Input already in c->input (the client's preface onwards) is
 * processed at once. The connection's timer is the protocol's from now. */
void http2_attach(rn_conn *c);

#endif
