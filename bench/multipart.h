/*
 * multipart.h — a strict reader of the multipart/mixed answers of
 * GET {stream}/bootstrap (extensions.txt §3.2, RFC 2046 §5.1), enough to
 * check them in the benchmark: the boundary from the Content-Type, then
 * every part's Content-Type and body.
 *
 * The body must start with the first delimiter ("--" boundary, no preamble:
 * Runnel sends none) and end with the close delimiter, optionally followed
 * by CRLF. Parts are referenced in place (pointers into the body).
 */
#ifndef BN_MULTIPART_H
#define BN_MULTIPART_H

#include <stddef.h>

#define BN_MP_MAX_PARTS 4096

typedef struct {
    const char *ctype; /* the part's Content-Type value (not NUL-terminated) */
    size_t ctype_len;
    const char *body;
    size_t len;
} bn_mp_part;

typedef struct {
    size_t n;
    bn_mp_part part[BN_MP_MAX_PARTS];
} bn_multipart;

/* Parses body[0..n) as multipart/mixed with the boundary of the header
 * value content_type. Returns 0, or -1 with a reason in err[errcap]. */
int bn_multipart_parse(const char *content_type, const char *body, size_t n, bn_multipart *out,
                       char *err, size_t errcap);

#endif
