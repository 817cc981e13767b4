/*
 * read_query.c — the query of a stream read: offset, live, cursor and the
 * parameters of extensions §9. See read_query.h.
 */
#include "protocol/read_query.h"
#include "util/text.h"

#include <assert.h>
#include <string.h>

/* Looks up the value of a parameter the protocols let a server ignore when
 * it is not canonical decimal (up to max). Returns 0 with *present and *v,
 * or -1 with *fault set (a repeat). */
static int lenient_u64(const char *query, size_t len, const char *name, uint64_t max, int *present,
                       uint64_t *v, rn_param_fault *fault) {
    char val[256]; /* room for a number written with percent escapes */
    long n;
    if (rn_param_query(query, len, name, RN_PARAM_LENIENT, val, sizeof val, &n, fault))
        return -1;
    *present = n > 0 && rn_parse_strict_u64(val, (size_t)n, max, v) == 0;
    return 0;
}

/* True when the value [val, val+n) (n -1: absent) is word. */
static int value_is(const char *val, long n, const char *word) {
    return n == (long)strlen(word) && memcmp(val, word, (size_t)n) == 0;
}

int rn_read_query_parse(const char *query, size_t len, rn_read_query *q, rn_param_fault *fault) {
    assert(q->timeout_ms >= 1 && q->max_bytes >= 1);
    char val[256];
    long n;
    q->offset_kind = RN_OFFSET_START;
    q->offset = 0;
    if (rn_param_query(query, len, "offset", RN_E_INVALID_OFFSET, val, sizeof val, &n, fault))
        return -1;
    int has_offset = n >= 0;
    if (has_offset && rn_offset_parse(val, (size_t)n, &q->offset_kind, &q->offset))
        return rn_param_refuse(fault, RN_E_INVALID_OFFSET);
    if (rn_param_query(query, len, "live", RN_E_INVALID_QUERY_LIVE, val, sizeof val, &n, fault))
        return -1;
    if (value_is(val, n, "long-poll"))
        q->mode = RN_READ_LONG_POLL;
    else if (value_is(val, n, "sse"))
        q->mode = RN_READ_SSE;
    else if (n >= 0)
        return rn_param_refuse(fault, RN_E_INVALID_QUERY_LIVE);
    else
        q->mode = RN_READ_CATCHUP;
    int present;
    uint64_t v;
    /* a cursor is one this server could have sent (live/cursor.h); the
     * other two are clamped, so any number that fits 64 bits is one */
    if (lenient_u64(query, len, "cursor", UINT64_MAX / 2, &q->has_cursor, &q->cursor, fault) ||
        lenient_u64(query, len, "timeout_ms", UINT64_MAX, &present, &v, fault))
        return -1;
    if (present)
        q->timeout_ms = v < 1 ? 1 : v > RN_READ_TIMEOUT_MAX_MS ? RN_READ_TIMEOUT_MAX_MS : v;
    if (lenient_u64(query, len, "max_bytes", UINT64_MAX, &present, &v, fault))
        return -1;
    if (present && v < q->max_bytes)
        q->max_bytes = v ? (size_t)v : 1;
    if (rn_param_query(query, len, "consistency", RN_E_INVALID_QUERY_CONSISTENCY, val, sizeof val,
                       &n, fault))
        return -1;
    /* one node: every read is linearizable, so leader reads as local; in a
     * cluster the router confirmed a leader read before it comes here */
    int leader = value_is(val, n, "leader");
    if (n >= 0 && !leader && !value_is(val, n, "local"))
        return rn_param_refuse(fault, RN_E_INVALID_QUERY_CONSISTENCY);
    if (leader && q->mode != RN_READ_CATCHUP)
        return rn_param_refuse(fault, RN_E_INVALID_QUERY_CONSISTENCY);
    if (q->mode != RN_READ_CATCHUP && !has_offset)
        return rn_param_refuse(fault, RN_E_INVALID_QUERY_OFFSET_REQUIRED);
    if (q->mode == RN_READ_SSE && q->max_bytes < RN_READ_SSE_MIN_BYTES)
        q->max_bytes = RN_READ_SSE_MIN_BYTES;
    return 0;
}
