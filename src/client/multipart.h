/*
 * multipart.h — a streaming multipart/mixed parser (RFC 2046) for the
 * bootstrap answer (extensions §3): bytes go in as they arrive, each part
 * comes out through the handler's callbacks (its Content-Type, its body in
 * pieces, its end), in order. Memory is fixed: the boundary, one part's
 * headers (at most RNC_MP_HEADER_MAX bytes) and a window of one slice.
 */
#ifndef RN_CLIENT_MULTIPART_H
#define RN_CLIENT_MULTIPART_H

#include "runnel/client.h"

#include <stddef.h>
#include <stdint.h>

#define RNC_MP_HEADER_MAX 8192
#define RNC_MP_SLICE 65536

typedef struct {
    char delim[80]; /* CRLF "--" boundary */
    size_t dlen;
    int state;
    unsigned index; /* parts begun so far */
    int in_part;    /* a part's body is being delivered */
    const runnel_bootstrap_handler *h;
    char head[RNC_MP_HEADER_MAX];
    size_t head_len;
    uint8_t work[80 + RNC_MP_SLICE];
    size_t wlen;
    int stopped; /* a callback asked to stop */
    int failed;  /* the input is not multipart as announced */
} rnc_multipart;

/* Prepares p for the body of an answer whose Content-Type is
 * content_type ("multipart/mixed; boundary=..."). Returns 0, or -1 when it
 * names no usable boundary. */
int rnc_multipart_init(rnc_multipart *p, const char *content_type,
                       const runnel_bootstrap_handler *h);

/* Feeds bytes. Returns 0, or -1 when the input is malformed or a callback
 * stopped (p->stopped tells which). */
int rnc_multipart_feed(rnc_multipart *p, const void *data, size_t len);

/* The input ended: 0 when the closing delimiter was seen, else -1. */
int rnc_multipart_finish(rnc_multipart *p);

#endif
