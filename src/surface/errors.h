/*
 * errors.h — the one table of refusals: every 4xx/5xx a surface sends is an
 * rn_error, which fixes its status, its stable code (extensions.txt §11) and
 * its fixed message. Bodies are {"error":{"code":"...","message":"..."}}.
 */
#ifndef RN_ERRORS_H
#define RN_ERRORS_H

#include "util/buf.h"

typedef enum {
    RN_E_INVALID_REQUEST,
    RN_E_INVALID_HEADER_TTL,
    RN_E_INVALID_HEADER_EXPIRES,
    RN_E_INVALID_HEADER_TTL_AND_EXPIRES,
    RN_E_INVALID_OFFSET,
    RN_E_INVALID_INCARNATION,
    RN_E_INVALID_QUERY_CONSISTENCY,
    RN_E_INVALID_BUCKET_ID,
    RN_E_INVALID_STREAM_ID,
    RN_E_INVALID_QUERY_LIVE,
    RN_E_INVALID_QUERY_OFFSET_REQUIRED,
    RN_E_INVALID_PRODUCER,
    RN_E_PRODUCER_EPOCH_SEQ,
    RN_E_MISSING_CONTENT_TYPE,
    RN_E_EMPTY_APPEND,
    RN_E_INVALID_JSON,
    RN_E_JSON_EMPTY_ARRAY,
    RN_E_JSON_TOO_DEEP,
    RN_E_INVALID_FORK_OFFSET,
    RN_E_INVALID_SUB_OFFSET,
    RN_E_FORK_TOO_DEEP,
    RN_E_PRODUCER_EPOCH_STALE,
    RN_E_STREAM_NOT_FOUND,
    RN_E_FORK_SOURCE_NOT_FOUND,
    RN_E_NOT_FOUND,
    RN_E_METHOD_NOT_ALLOWED,
    RN_E_REQUEST_TIMEOUT,
    RN_E_STREAM_CLOSED,
    RN_E_FORK_SOURCE_GONE,
    RN_E_STREAM_GONE,
    RN_E_INCARNATION_MISMATCH,
    RN_E_OFFSET_OUT_OF_RANGE,
    RN_E_STREAM_SEQ_CONFLICT,
    RN_E_CONTENT_TYPE_MISMATCH,
    RN_E_STREAM_EXISTS_CONFLICT,
    RN_E_PRODUCER_SEQ_CONFLICT,
    RN_E_REQUEST_TOO_LARGE,
    RN_E_WAL_DISK_PRESSURE,
    RN_E_OUTCOME_UNKNOWN,
    RN_E_INTERNAL,
    RN_E_COUNT
} rn_error;

int rn_error_status(rn_error e);
const char *rn_error_code(rn_error e);
/* Appends the JSON error body. */
void rn_error_body(rn_error e, rn_buf *out);

#endif
