/*
 * read_query.h — the query of a stream read (GET) on both surfaces: the
 * offset, the live mode, the cursor echo and the read path's parameters of
 * extensions §9 (timeout_ms, max_bytes, consistency), each under the one
 * rule of params.h (at most once; an empty value is malformed). What the
 * protocols say to ignore is ignored: a cursor, timeout_ms or max_bytes
 * that is not canonical decimal, and every parameter not named here.
 */
#ifndef RN_READ_QUERY_H
#define RN_READ_QUERY_H

#include <stddef.h>
#include <stdint.h>

#include "protocol/offset.h"
#include "protocol/params.h"

typedef enum { RN_READ_CATCHUP, RN_READ_LONG_POLL, RN_READ_SSE } rn_read_mode;

/* The longest wait a read's timeout_ms asks for (extensions §9). */
#define RN_READ_TIMEOUT_MAX_MS 60000
/* The least max_bytes of an SSE read: room for one UTF-8 character in a
 * text event. */
#define RN_READ_SSE_MIN_BYTES 4

typedef struct {
    rn_offset_kind offset_kind; /* RN_OFFSET_START when no offset was given */
    uint64_t offset;            /* of RN_OFFSET_POSITION */
    rn_read_mode mode;          /* live=long-poll or live=sse; else catch-up */
    int has_cursor;             /* a cursor this server could have sent */
    uint64_t cursor;
    /* In: the surface's defaults. Out: this read's. timeout_ms=N waits N
     * ms, within 1..RN_READ_TIMEOUT_MAX_MS; max_bytes=N lowers max_bytes
     * to N (at least 1), never raises it. */
    uint64_t timeout_ms;
    size_t max_bytes;
} rn_read_query;

/* Parses the raw query string of a read into q (timeout_ms and max_bytes
 * set to the defaults by the caller). Returns 0, or -1 with *fault set:
 * RN_E_QUERY_REPEATED naming the parameter, RN_E_INVALID_OFFSET for an
 * offset that is not "-1", "now" or a token, RN_E_INVALID_QUERY_LIVE for
 * a live other than long-poll or sse, RN_E_INVALID_QUERY_CONSISTENCY for a
 * consistency other than local or leader, or leader on a live read, and
 * RN_E_INVALID_QUERY_OFFSET_REQUIRED for a live read without an offset
 * (checked in that order). q's other fields are unspecified then. */
int rn_read_query_parse(const char *query, size_t len, rn_read_query *q, rn_param_fault *fault);

#endif
