/*
 * params.h — the one rule for the protocol's request headers and query
 * parameters (docs/HTTP.md "Names, headers and query parameters"), applied by
 * every surface through these helpers rather than per call site:
 *   - each is sent at most once: a second one answers 400 INVALID_HEADER
 *     or INVALID_QUERY naming it, whatever the values;
 *   - an empty value is malformed (the field's own 400);
 *   - an integer is canonical decimal: digits only, no sign, no leading
 *     zero (rn_parse_strict_u64).
 * Values the protocols say to ignore rather than refuse (Stream-Closed
 * other than true, a timeout_ms, max_bytes or cursor that does not parse)
 * are returned as they are for the caller to ignore; their repeats are
 * refused all the same.
 */
#ifndef RN_PARAMS_H
#define RN_PARAMS_H

#include <stddef.h>
#include <stdint.h>

#include "protocol/errors.h"
#include "transport/http.h"

/* Why a header or parameter was refused. `detail` is the field's name when
 * the error's message is generic (a repeat), else NULL: a malformed value's
 * own message names its field. */
typedef struct {
    rn_error error;
    const char *detail;
} rn_param_fault;

/* A `malformed` argument for a value the protocol ignores when malformed:
 * an empty value is returned (as length 0), not refused. */
#define RN_PARAM_LENIENT RN_E_COUNT

/* Answers the refusal in *fault (its detail after the message). */
void rn_reply_param_fault(rn_request *req, const rn_param_fault *fault);

/* Sets *fault to e, a refusal the caller decided (no detail). Returns -1. */
int rn_param_refuse(rn_param_fault *fault, rn_error e);

/* Finds header `name` (its canonical spelling, "Stream-Seq"; matched
 * case-insensitively). Returns 0 with *h NULL when absent or *h the header
 * when sent once; -1 with *fault set when sent more than once
 * (RN_E_HEADER_REPEATED) or with an empty value (`malformed`, unless
 * RN_PARAM_LENIENT). */
int rn_param_header(const rn_request *req, const char *name, rn_error malformed,
                    const rn_header **h, rn_param_fault *fault);

/* The same for a header whose value is an integer up to max: *present, and
 * *value when present; `malformed` for a value that is not canonical
 * decimal or exceeds max. */
int rn_param_header_u64(const rn_request *req, const char *name, uint64_t max, rn_error malformed,
                        int *present, uint64_t *value, rn_param_fault *fault);

/* Finds query parameter `name` in the raw query string (names and values
 * percent-decoded; "a" alone is "a" with an empty value). Returns 0 with
 * *val_len -1 when absent, or the decoded value in val (capacity cap) and
 * its length; -1 with *fault set when given more than once
 * (RN_E_QUERY_REPEATED), or `malformed` when the value is empty, does not
 * decode or does not fit cap (RN_PARAM_LENIENT: such a value is returned
 * as empty). */
int rn_param_query(const char *query, size_t query_len, const char *name, rn_error malformed,
                   char *val, size_t cap, long *val_len, rn_param_fault *fault);

#endif
