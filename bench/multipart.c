/*
 * multipart.c — multipart/mixed reading for the bootstrap check (see
 * multipart.h).
 */
#define _GNU_SOURCE /* memmem */
#include "multipart.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

static int fail(char *err, size_t cap, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, cap, fmt, ap);
    va_end(ap);
    return -1;
}

/* Copies the boundary parameter of a multipart/mixed Content-Type into
 * b[cap]. Returns its length, or -1. */
static int boundary_of(const char *ct, char *b, size_t cap) {
    if (strncasecmp(ct, "multipart/mixed", 15) != 0)
        return -1;
    const char *p = strcasestr(ct, "boundary=");
    if (!p)
        return -1;
    p += 9;
    size_t n;
    if (*p == '"') {
        const char *q = strchr(++p, '"');
        if (!q)
            return -1;
        n = (size_t)(q - p);
    } else {
        n = strcspn(p, "; \t");
    }
    if (n < 1 || n > 70 || n >= cap)
        return -1;
    memcpy(b, p, n);
    b[n] = 0;
    return (int)n;
}

/* The Content-Type value among the part headers h[0..n) (CRLF-separated). */
static void part_ctype(const char *h, size_t n, bn_mp_part *pt) {
    pt->ctype = "";
    pt->ctype_len = 0;
    const char *end = h + n;
    while (h < end) {
        const char *eol = memmem(h, (size_t)(end - h), "\r\n", 2);
        if (!eol)
            eol = end;
        if ((size_t)(eol - h) > 13 && strncasecmp(h, "content-type:", 13) == 0) {
            const char *v = h + 13;
            while (v < eol && (*v == ' ' || *v == '\t'))
                v++;
            const char *ve = eol;
            while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t'))
                ve--;
            pt->ctype = v;
            pt->ctype_len = (size_t)(ve - v);
        }
        h = eol + 2;
    }
}

int bn_multipart_parse(const char *content_type, const char *body, size_t n, bn_multipart *out,
                       char *err, size_t errcap) {
    char b[80];
    int blen = boundary_of(content_type, b, sizeof b);
    if (blen < 0)
        return fail(err, errcap, "Content-Type is not multipart/mixed with a boundary: '%s'",
                    content_type);
    char delim[84]; /* CRLF "--" boundary */
    int dlen = snprintf(delim, sizeof delim, "\r\n--%s", b);
    out->n = 0;
    /* The first delimiter has no leading CRLF. */
    if (n < (size_t)dlen - 2 || memcmp(body, delim + 2, (size_t)dlen - 2) != 0)
        return fail(err, errcap, "body does not start with the boundary");
    const char *p = body + dlen - 2, *end = body + n;
    for (;;) {
        if (end - p >= 2 && p[0] == '-' && p[1] == '-') { /* close delimiter */
            p += 2;
            if (p == end || (end - p == 2 && p[0] == '\r' && p[1] == '\n'))
                return 0;
            return fail(err, errcap, "%zu bytes after the close delimiter", (size_t)(end - p));
        }
        if (end - p < 2 || p[0] != '\r' || p[1] != '\n')
            return fail(err, errcap, "no CRLF after a delimiter");
        p += 2;
        if (out->n == BN_MP_MAX_PARTS)
            return fail(err, errcap, "more than %d parts", BN_MP_MAX_PARTS);
        bn_mp_part *pt = &out->part[out->n++];
        const char *content;
        if (end - p >= 2 && p[0] == '\r' && p[1] == '\n') { /* no headers */
            part_ctype(p, 0, pt);
            content = p + 2;
        } else {
            const char *he = memmem(p, (size_t)(end - p), "\r\n\r\n", 4);
            if (!he)
                return fail(err, errcap, "part %zu: headers do not end", out->n);
            part_ctype(p, (size_t)(he - p), pt);
            content = he + 4;
        }
        const char *next = memmem(content, (size_t)(end - content), delim, (size_t)dlen);
        if (!next)
            return fail(err, errcap, "part %zu: no delimiter after it", out->n);
        pt->body = content;
        pt->len = (size_t)(next - content);
        p = next + dlen;
    }
}
