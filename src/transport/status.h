/*
 * status.h — the reason phrase of an HTTP status code, for HTTP/1.1 status
 * lines (HTTP/2 has none).
 */
#ifndef RN_TRANSPORT_STATUS_H
#define RN_TRANSPORT_STATUS_H

/* The reason phrase RFC 9110 §15 (and RFC 6585 for 428, 429, 431 and 511)
 * registers for status (100..599), or "" for a code no registry names: the
 * reason phrase may be empty (RFC 9112 §4), and a status line never carries
 * a made-up one. */
const char *rn_http_reason(int status);

#endif
