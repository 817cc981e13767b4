/*
 * request_head.h — the rules on a request head (RFC 9112, RFC 9110) that
 * llhttp leaves to the server. llhttp is built in its strict mode with no
 * lenient flag set (see CMakeLists.txt): it refuses bad tokens and
 * characters, a header name with a space before its colon, and two
 * Content-Length headers or Content-Length with Transfer-Encoding. It
 * accepts, and these checks refuse: a version other than HTTP/1.0 or
 * HTTP/1.1 (HTTP/2.0, or none: the HTTP/0.9 form), an empty header name,
 * line folding (obs-fold, which its callbacks do not show: see
 * rn_fold_scan), a transfer coding other than chunked (501), Transfer-Encoding
 * in an HTTP/1.0 request, and a missing, repeated or malformed Host. The
 * transfer codings are checked here whole (chunked once and last, else
 * 400), since llhttp's own check of them runs only after the head is
 * handed over.
 */
#ifndef RN_REQUEST_HEAD_H
#define RN_REQUEST_HEAD_H

#include <stddef.h>

#include "transport/http.h"

/* Finds obs-fold: a header line that begins with a space or a tab. llhttp
 * folds such a line into the value before it without saying so, so the
 * transport feeds this scan the head bytes that lie between the spans
 * llhttp reports (target, field names, values), plus the first byte of each
 * span (where a fold shows when llhttp keeps its whitespace in the value),
 * in order, across reads. Bytes inside spans never hold a line feed, so
 * leaving them out loses nothing. A fold made only of whitespace at the end
 * of the last header is not seen; it changes no value. */
typedef struct {
    int after_lf; /* the last byte fed was a line feed */
    int folded;   /* a line began with a space or a tab */
} rn_fold_scan;

/* Feeds the bytes [from, to) to the scan. */
void rn_fold_scan_feed(rn_fold_scan *scan, const char *from, const char *to);

/* Checks the head of req (its headers parsed; http_major.http_minor the
 * version llhttp read; folded from its rn_fold_scan). Returns 0 when the
 * request may be served, else the status to refuse it with: 501 for a
 * transfer coding other than chunked, 400 for anything else. */
int rn_request_head_check(const rn_request *req, unsigned http_major, unsigned http_minor,
                          int folded);

#endif
