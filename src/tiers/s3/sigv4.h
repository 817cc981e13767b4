/*
 * sigv4.h — AWS Signature Version 4 for S3 requests (Authorization header
 * form), over OpenSSL's SHA-256 and HMAC-SHA256.
 *
 * The canonical request is, one item per line: the method; the URI-encoded
 * path (S3 rules: every byte but A-Z a-z 0-9 - _ . ~ and '/' as %XX, never
 * encoded twice, no dot-segment removal); the query string (names and
 * values encoded like the path but '/' too, sorted by name then value,
 * "name=" for an empty value); the signed headers as "name:value" lines
 * (names lowercased and sorted, values trimmed with inner runs of spaces
 * and tabs collapsed to one space, repeated headers joined by ','); an
 * empty line; the signed header names joined by ';'; the payload hash (hex
 * SHA-256 of the body, or UNSIGNED-PAYLOAD). The string to sign is
 * "AWS4-HMAC-SHA256", the request time, the scope
 * (date/region/service/aws4_request) and the hex SHA-256 of the canonical
 * request; the signing key is HMAC chained over "AWS4"+secret, date,
 * region, service and "aws4_request".
 *
 * The caller lists every header it signs (host, x-amz-date,
 * x-amz-content-sha256, x-amz-security-token when it has a session token,
 * range, x-amz-copy-source…) and sends exactly those values; the query it
 * sends should be rn_sigv4_query's output.
 */
#ifndef RN_S3_SIGV4_H
#define RN_S3_SIGV4_H

#include <stddef.h>
#include <stdint.h>

#include "util/buf.h"

#define RN_SIGV4_UNSIGNED_PAYLOAD "UNSIGNED-PAYLOAD"

typedef struct {
    const char *name;
    const char *value;
} rn_sigv4_param;

typedef struct {
    const char *method;
    const char *path; /* raw, not encoded, starting with '/' */
    const rn_sigv4_param *query;
    size_t nquery; /* raw names and values; a NULL value is an empty one */
    const rn_sigv4_param *headers;
    size_t nheaders;          /* every header signed, names in any case */
    const char *payload_hash; /* 64 hex digits or RN_SIGV4_UNSIGNED_PAYLOAD */
    const char *amz_date;     /* "YYYYMMDDTHHMMSSZ", also sent as x-amz-date */
} rn_sigv4_request;

typedef struct {
    const char *access_key;
    const char *secret_key;
    const char *region;
    const char *service; /* "s3" */
} rn_sigv4_identity;

/* Appends s[0..n) URI-encoded; '/' is kept when keep_slash. */
void rn_sigv4_encode(rn_buf *out, const char *s, size_t n, int keep_slash);

/* Appends the canonical query string of the parameters (no leading '?'). */
void rn_sigv4_query(rn_buf *out, const rn_sigv4_param *query, size_t n);

/* Appends the canonical request. */
void rn_sigv4_canonical_request(const rn_sigv4_request *r, rn_buf *out);

/* Appends the string to sign for a canonical request. */
void rn_sigv4_string_to_sign(const rn_sigv4_request *r, const rn_sigv4_identity *id,
                             const rn_buf *canonical, rn_buf *out);

/* The signing key for a date ("YYYYMMDD"), region and service. */
void rn_sigv4_signing_key(const char *secret_key, const char *date, const char *region,
                          const char *service, uint8_t key[32]);

/* Appends the Authorization header value:
 * "AWS4-HMAC-SHA256 Credential=<key>/<scope>, SignedHeaders=<names>,
 * Signature=<hex>". */
void rn_sigv4_authorization(const rn_sigv4_request *r, const rn_sigv4_identity *id, rn_buf *out);

/* Writes the hex SHA-256 of data (64 digits and a NUL). */
void rn_sha256_hex(const void *data, size_t n, char out[65]);

/* Formats Unix milliseconds as the request time "YYYYMMDDTHHMMSSZ" (UTC). */
void rn_sigv4_amz_date(int64_t unix_ms, char out[17]);

#endif
