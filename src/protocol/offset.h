/*
 * offset.h — the offset token: "<16 digits>_<16 digits>", the high part
 * reserved (always 0 today) and the low part the byte position in the
 * stream. Fixed width keeps byte-wise order equal to stream order, and
 * "0000000000000000_0000000000000000" is the start of every stream.
 * Also the path segments that carry an offset or an incarnation token
 * (extensions §2, §4.1), which are percent-decoded first (§8).
 */
#ifndef RN_OFFSET_H
#define RN_OFFSET_H

#include <stddef.h>
#include <stdint.h>

#define RN_OFFSET_LEN 33

typedef enum { RN_OFFSET_POSITION, RN_OFFSET_START, RN_OFFSET_NOW } rn_offset_kind;

/* Writes the token for a byte position; out holds RN_OFFSET_LEN + 1 bytes. */
void rn_offset_format(uint64_t position, char out[RN_OFFSET_LEN + 1]);

/* Parses "-1", "now" or a token. Returns 0 and sets kind/position, or -1 for
 * anything else (including tokens with a non-zero high part). */
int rn_offset_parse(const char *s, size_t len, rn_offset_kind *kind, uint64_t *position);

/* Parses a path segment that names a position (snapshot, retention, part
 * and chunk offsets): percent-decoded (ext §8: every character or only some
 * may be escaped, in either case), then a token. Returns 0, or -1 for a
 * malformed escape, "-1", "now" or anything but a token. */
int rn_offset_parse_segment(const char *seg, size_t len, uint64_t *position);

/* Parses a path segment that names a Stream-Incarnation token (ext §4.1):
 * percent-decoded, then a canonical decimal in [2^52, 2^53). Returns 0 or
 * -1. */
int rn_token_parse_segment(const char *seg, size_t len, uint64_t *token);

#endif
