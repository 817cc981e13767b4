/*
 * write.h — the write path every protocol shares (private to
 * src/transport/): bytes tried on the socket at once when nothing is
 * queued, the rest queued with the byte transport's write; inside a write batch, collected
 * and sent by the loop thread and the fan-out threads together; shared
 * chunks written from their own bytes; the answer budget. See write.c.
 */
#ifndef RN_TRANSPORT_WRITE_H
#define RN_TRANSPORT_WRITE_H

#include <stddef.h>
#include <stdint.h>

#include "transport/conn.h"
#include "util/buf.h"

/* A shared chunk (http.h): an HTTP/1.1 chunk framing len bytes, immutable
 * once built. The payload is at bytes + len - payload_len - 2 (after the
 * size line, before the CRLF), for a protocol that frames it otherwise. */
struct rn_http_chunk {
    int refs; /* touched on the loop thread only */
    size_t payload_len;
    size_t len;      /* of bytes: size line, payload, CRLF */
    uint8_t bytes[]; /* flexible */
};

/* The longest size line of a chunk (chunk_size_line). */
#define CHUNK_LINE_MAX (2 * sizeof(size_t) + 2)

/* Writes the size line of a chunk of n bytes ("<hex>\r\n") to out, which
 * has room for CHUNK_LINE_MAX bytes; returns its length. */
size_t chunk_size_line(char *out, size_t n);

/* Sends head then body (may be NULL) on c; takes both over. The bytes are
 * collected by an open batch, or tried at once, and whatever remains is
 * queued; the protocol's `written` runs when a queued write completes. A
 * body piece is always queued, so that its completion pumps the next one.
 * Returns -1 when the connection failed (it is closed), else 0. */
int conn_write(rn_conn *c, rn_buf *head, rn_buf *body, int body_piece);

/* Sends a shared chunk's bytes on c: collected by an open batch, or tried
 * at once from the chunk itself; only when the socket does not take them
 * whole is a write queued, holding a reference. Returns as conn_write. */
int conn_write_chunk(rn_conn *c, rn_http_chunk *ch);

/* The most bytes a new answer to req's server should hold so that answers
 * stay within max_answer_bytes_in_flight: what is left of it, but at least
 * RN_HTTP_SMALL_PIECE_BYTES (every reader keeps making progress), and
 * SIZE_MAX without a bound (rn_http_piece_bytes follows it). */
size_t answer_room(const rn_request *req);

/* Bytes queued on c's socket and not yet taken by the kernel. */
size_t conn_queued(const rn_conn *c);

#endif
