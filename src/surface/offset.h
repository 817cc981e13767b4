/*
 * offset.h — the offset token: "<16 digits>_<16 digits>", the high part
 * reserved (always 0 today) and the low part the byte position in the
 * stream. Fixed width keeps byte-wise order equal to stream order, and
 * "0000000000000000_0000000000000000" is the start of every stream.
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

#endif
