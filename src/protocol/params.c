/*
 * params.c — the one rule for protocol headers and query parameters. See
 * params.h.
 */
#include "protocol/params.h"
#include "protocol/reply.h"
#include "util/text.h"

#include <assert.h>
#include <string.h>

void rn_reply_param_fault(rn_request *req, const rn_param_fault *fault) {
    rn_reply_error_detail(req, fault->error, NULL, fault->detail,
                          fault->detail ? strlen(fault->detail) : 0);
}

int rn_param_refuse(rn_param_fault *fault, rn_error e) {
    fault->error = e;
    fault->detail = NULL;
    return -1;
}

static int refuse_repeat(rn_param_fault *fault, rn_error e, const char *name) {
    fault->error = e;
    fault->detail = name;
    return -1;
}

int rn_param_header(const rn_request *req, const char *name, rn_error malformed,
                    const rn_header **h, rn_param_fault *fault) {
    size_t count;
    *h = rn_request_header(req, name, &count);
    if (count > 1)
        return refuse_repeat(fault, RN_E_HEADER_REPEATED, name);
    if (*h && (*h)->value_len == 0 && malformed != RN_PARAM_LENIENT)
        return rn_param_refuse(fault, malformed);
    return 0;
}

int rn_param_header_u64(const rn_request *req, const char *name, uint64_t max, rn_error malformed,
                        int *present, uint64_t *value, rn_param_fault *fault) {
    assert(malformed != RN_PARAM_LENIENT);
    const rn_header *h;
    if (rn_param_header(req, name, malformed, &h, fault))
        return -1;
    *present = h != NULL;
    if (h && rn_parse_strict_u64(h->value, h->value_len, max, value))
        return rn_param_refuse(fault, malformed);
    return 0;
}

/* True when the raw parameter name [p, p+n) percent-decodes to name. */
static int name_is(const char *p, size_t n, const char *name) {
    size_t len = strlen(name);
    char decoded[32];
    if (n > 3 * len || n >= sizeof decoded)
        return 0;
    long d = rn_percent_decode(p, n, decoded);
    return d == (long)len && memcmp(decoded, name, len) == 0;
}

int rn_param_query(const char *query, size_t query_len, const char *name, rn_error malformed,
                   char *val, size_t cap, long *val_len, rn_param_fault *fault) {
    *val_len = -1;
    const char *raw = NULL;
    size_t raw_len = 0;
    for (const char *p = query, *end = query + query_len; p < end;) {
        const char *amp = memchr(p, '&', (size_t)(end - p));
        const char *pe = amp ? amp : end;
        const char *eq = memchr(p, '=', (size_t)(pe - p));
        if (name_is(p, (size_t)((eq ? eq : pe) - p), name)) {
            if (raw)
                return refuse_repeat(fault, RN_E_QUERY_REPEATED, name);
            raw = eq ? eq + 1 : pe;
            raw_len = (size_t)(pe - raw);
        }
        p = pe + 1;
    }
    if (!raw)
        return 0;
    long n = raw_len < cap ? rn_percent_decode(raw, raw_len, val) : -1;
    if (n > 0 || malformed == RN_PARAM_LENIENT) {
        *val_len = n > 0 ? n : 0;
        return 0;
    }
    return rn_param_refuse(fault, malformed);
}
