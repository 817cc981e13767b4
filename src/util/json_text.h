/*
 * json_text.h - JSON request-body validation and "JSON message text" encoding.
 *
 * Owns: turning an HTTP request body that claims to be application/json into
 * the stored message-text form, counting messages in that stored form, and
 * writing it back as one JSON array (how v1 reads render it).
 *
 * Stored message text is a sequence of messages, each the compact original
 * text of one JSON value (insignificant whitespace removed, nothing else
 * rewritten) followed by exactly one LF (0x0A). A compact JSON value never
 * contains a raw LF, so LF is an unambiguous message terminator.
 *
 * If the body's top-level value is an array, exactly one level is flattened:
 * each element becomes one message. Otherwise the whole value is one message.
 *
 * Validation is RFC 8259 JSON with strict UTF-8 (no overlongs, no encoded
 * surrogates, nothing above U+10FFFF, no truncated sequences, no stray
 * continuation bytes, no BOM). Escaped lone surrogates ("\ud800") are accepted
 * because the RFC grammar allows them. Validation and encoding happen in one
 * pass without recursion (an explicit fixed-size stack bounds nesting).
 */
#ifndef RUNNEL_UTIL_JSON_TEXT_H
#define RUNNEL_UTIL_JSON_TEXT_H

#include <stddef.h>
#include <stdint.h>

#include "util/buf.h"

typedef enum {
    RN_JSON_OK = 0,      /* valid; out holds >= 1 message */
    RN_JSON_EMPTY_ARRAY, /* valid, top-level `[]` (after whitespace): zero messages, out_len 0 */
    RN_JSON_INVALID,     /* not RFC 8259 JSON or not UTF-8 */
    RN_JSON_TOO_DEEP,    /* a message nests deeper than RN_JSON_MAX_DEPTH */
} rn_json_status;

/* Maximum nesting of arrays/objects inside one message. A scalar has depth 0,
 * `[]` and `{}` depth 1. A flattened top-level array does not count toward its
 * elements' depth; any other top-level container counts as level 1. */
#define RN_JSON_MAX_DEPTH 127

/*
 * Validates `in[0..len)` as one JSON text and writes its messages to `out`.
 *
 *   in         request body; may be NULL only when len == 0. Not NUL-terminated.
 *   out        capacity must be >= len + 1 bytes; must not overlap `in`.
 *              (The bound is proven at the definition in json_text.c.)
 *   out_len    required; receives the number of bytes written.
 *   msg_count  optional (may be NULL); receives the number of messages
 *              (= number of LFs written).
 *   err_pos    optional (may be NULL). On INVALID / TOO_DEEP it receives the
 *              byte index of the first byte at which the input stops being a
 *              valid prefix of an acceptable body (== len when the input is
 *              merely truncated, e.g. empty or ends inside a string). For
 *              TOO_DEEP it is the index of the bracket/brace that opens the
 *              level beyond RN_JSON_MAX_DEPTH. On OK / EMPTY_ARRAY it is len.
 *
 * Errors are reported in input order: the status reflects the first problem
 * met scanning left to right. On any status other than OK / EMPTY_ARRAY the
 * contents of `out` are unspecified and *out_len / *msg_count are 0.
 */
rn_json_status rn_json_to_messages(const uint8_t *in, size_t len, uint8_t *out, size_t *out_len,
                                   size_t *msg_count, size_t *err_pos);

/* Human-readable, static, never NULL: "ok", "empty array", "invalid JSON",
 * "JSON nested too deeply", or "unknown JSON status" for out-of-range values. */
const char *rn_json_status_name(rn_json_status s);

/*
 * Counts messages in stored message text (LF-terminated lines): returns the
 * number of LF bytes in text[0..len). A trailing fragment without its LF is
 * not counted, which makes the function usable on a prefix of a stream being
 * read incrementally (sum the counts of consecutive chunks). text may be NULL
 * only when len == 0.
 */
size_t rn_json_count_messages(const uint8_t *text, size_t len);

/*
 * Appends stored message text ("m1\nm2\n", whole messages: empty or ending
 * in LF) to out as one JSON array ("[m1,m2]", "[]" when empty). text may be
 * NULL only when len == 0.
 */
void rn_json_append_array(rn_buf *out, const uint8_t *text, size_t len);

#endif /* RUNNEL_UTIL_JSON_TEXT_H */
