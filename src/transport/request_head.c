/*
 * request_head.c — the rules on a request head that llhttp leaves to the
 * server: version, empty names, obs-fold, transfer codings, Host. See
 * request_head.h.
 */
#include "transport/request_head.h"
#include "util/text.h"

#include <assert.h>
#include <string.h>

void rn_fold_scan_feed(rn_fold_scan *scan, const char *from, const char *to) {
    assert(from <= to);
    for (const char *p = from; p < to; p++) {
        if (scan->after_lf && (*p == ' ' || *p == '\t'))
            scan->folded = 1;
        scan->after_lf = *p == '\n';
    }
}

static int is_ows(char ch) {
    return ch == ' ' || ch == '\t';
}

/* The transfer codings of a request, over all its Transfer-Encoding lines
 * in order. */
typedef struct {
    int present;      /* a Transfer-Encoding line was sent */
    int chunked;      /* how many codings are chunked */
    int last_chunked; /* the last coding is chunked */
    int other;        /* a coding other than chunked */
} codings;

/* Adds the codings of one value (a comma-separated list; empty elements
 * are allowed and skipped). */
static void add_codings(codings *cd, const char *v, size_t len) {
    cd->present = 1;
    size_t i = 0;
    while (i < len) {
        size_t start = i;
        while (i < len && v[i] != ',')
            i++;
        size_t end = i;
        while (start < end && is_ows(v[start]))
            start++;
        while (end > start && is_ows(v[end - 1]))
            end--;
        if (end > start) {
            cd->last_chunked = rn_ieq(v + start, end - start, "chunked");
            cd->chunked += cd->last_chunked;
            cd->other |= !cd->last_chunked;
        }
        i++; /* past the comma */
    }
}

/* RFC 9112 §6.1, §6.3, §7: the body length is known only when chunked is
 * applied once, last (else 400); a coding the server does not implement
 * answers 501. */
static int codings_check(const codings *cd) {
    if (!cd->present)
        return 0;
    if (!cd->last_chunked || cd->chunked > 1)
        return 400;
    return cd->other ? 501 : 0;
}

/* A Host value is uri-host [ ":" port ] (RFC 9110 §7.2; RFC 3986 §3.2.2):
 * reg-name characters (unreserved, pct-encoded, sub-delims), an IP literal
 * in brackets, digits and colons. Its parts are not checked further: the
 * server serves every host name alike. */
static int host_value_ok(const char *v, size_t len) {
    static const char allowed[] = "-._~%!$&'()*+,;=:[]";
    for (size_t i = 0; i < len; i++) {
        char ch = v[i];
        int alnum =
            (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9');
        if (!alnum && (ch == '\0' || !strchr(allowed, ch)))
            return 0;
    }
    return 1;
}

int rn_request_head_check(const rn_request *req, unsigned http_major, unsigned http_minor,
                          int folded) {
    if (http_major != 1 || http_minor > 1 || folded)
        return 400;
    size_t hosts = 0;
    codings cd = {0};
    for (size_t i = 0; i < req->header_count; i++) {
        const rn_header *h = &req->headers[i];
        if (h->name_len == 0)
            return 400;
        if (rn_ieq(h->name, h->name_len, "host")) {
            if (++hosts > 1 || !host_value_ok(h->value, h->value_len))
                return 400;
        } else if (rn_ieq(h->name, h->name_len, "transfer-encoding")) {
            /* RFC 9112 §6.1: HTTP/1.0 framing with it is faulty. */
            if (http_minor == 0)
                return 400;
            add_codings(&cd, h->value, h->value_len);
        }
    }
    if (http_minor == 1 && hosts == 0) /* RFC 9112 §3.2 */
        return 400;
    return codings_check(&cd);
}
