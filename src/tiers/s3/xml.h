/*
 * xml.h — the little XML the S3 client reads and writes: answers parsed
 * with expat into (element path, text) events, and request documents
 * (DeleteObjects, CompleteMultipartUpload) with escaped text.
 *
 * A path is the element names from the root joined by '/', e.g.
 * "ListBucketResult/Contents/Key" (namespaces are not interpreted, so S3's
 * default namespace does not show). Depth is at most 16, a path at most
 * 255 bytes, an element's text at most 64 KiB; a document past any of
 * these is malformed.
 */
#ifndef RN_S3_XML_H
#define RN_S3_XML_H

#include <stddef.h>
#include <stdint.h>

#include "util/buf.h"

typedef struct {
    /* An element opens (may be NULL). */
    void (*open)(void *arg, const char *path);
    /* An element closes with its text (character data directly inside it). */
    void (*text)(void *arg, const char *path, const char *text, size_t len);
    void *arg;
} rn_s3_xml_handler;

/* Parses doc; returns 0, or -1 when it is not well-formed or too deep. */
int rn_s3_xml_parse(const uint8_t *doc, size_t len, const rn_s3_xml_handler *h);

/* Appends s with &, <, >, " and ' escaped. */
void rn_s3_xml_escape(rn_buf *out, const char *s);

#endif
