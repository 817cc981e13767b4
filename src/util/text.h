/*
 * text.h — small, strict text helpers shared by the HTTP surfaces: decimal
 * integers in the protocol's strict form, case-insensitive comparison,
 * RFC 3339 timestamps, hex, standard base64 and unpadded base64url, and
 * percent-decoding.
 */
#ifndef RN_TEXT_H
#define RN_TEXT_H

#include <stddef.h>
#include <stdint.h>

#include "util/buf.h"

/* Parses a non-negative decimal integer with no sign, no leading zeros (except
 * "0" itself), no spaces, and value <= max. Returns 0, or -1 when s is
 * not such a number. */
int rn_parse_strict_u64(const char *s, size_t len, uint64_t max, uint64_t *out);

/* ASCII case-insensitive equality of a (s, len) slice and a C string. */
int rn_ieq(const char *s, size_t len, const char *lit);
/* ASCII case-insensitive prefix test. */
int rn_iprefix(const char *s, size_t len, const char *lit);

/* Parses an RFC 3339 date-time ("2025-01-01T00:00:00Z", fractional seconds
 * and numeric offsets allowed) into Unix milliseconds. Returns 0, or -1
 * when s is not such a date. */
int rn_parse_rfc3339(const char *s, size_t len, int64_t *out_ms);
/* Formats Unix milliseconds as RFC 3339 UTC with milliseconds
 * ("2025-01-01T00:00:00.000Z"); out must hold 48 bytes. */
void rn_format_rfc3339(int64_t ms, char out[48]);
/* Formats Unix milliseconds as an HTTP-date (IMF-fixdate); out 40 bytes. */
void rn_format_http_date(int64_t ms, char out[40]);

/* Writes data as 2n lowercase hex digits plus a terminating NUL. */
void rn_hex_encode(const uint8_t *data, size_t n, char *out);

/* Appends standard (RFC 4648, padded) base64 of data to b. */
void rn_base64_append(rn_buf *b, const uint8_t *data, size_t len);
/* Appends the unpadded base64url text (RFC 4648 §5) of data to out: the
 * encoding of JWS/JWT parts, JWK members and webhook signatures. */
void rn_b64url_append(rn_buf *out, const uint8_t *data, size_t len);
/* Decodes standard padded base64 (RFC 4648 §4) into out, skipping CR and
 * LF (SSE data lines); out must hold len * 3 / 4 bytes and may be s itself
 * (the output never overtakes the input). Returns the decoded length, or
 * -1 for a character outside the alphabet, anything after padding, or a
 * length (line breaks aside) that is not a multiple of 4. */
long rn_base64_decode(const char *s, size_t len, uint8_t *out);
/* Decodes unpadded base64url text into out, which must hold len * 3 / 4
 * bytes; reads exactly len bytes of s. Returns the decoded length, or -1
 * for a character outside the alphabet, padding, an impossible length
 * (len % 4 == 1), or non-zero trailing bits (so every byte string has
 * exactly one accepted text: every decoded value is security relevant). */
long rn_b64url_decode(const char *s, size_t len, uint8_t *out);

/* True when s is well-formed UTF-8 (no overlongs, surrogates or code points
 * past U+10FFFF). */
int rn_utf8_valid(const uint8_t *s, size_t len);

/* Parses len (even) lowercase hex digits into len / 2 bytes of out.
 * Returns 0, or -1 for any other character. */
int rn_parse_lower_hex(const char *s, size_t len, uint8_t *out);
/* Parses the 16 lowercase hex digits at s (most significant first) into
 * *out, as file and object names spell ids. Returns 0, or -1 for any other
 * character. */
int rn_parse_hex_u64(const char *s, uint64_t *out);

/* Percent-decodes s into out (capacity >= len). Returns the decoded length, or
 * -1 for a malformed escape. */
long rn_percent_decode(const char *s, size_t len, char *out);

#endif
