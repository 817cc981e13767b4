/*
 * json_fixture.h - what the unit tests of src/util/json_text.{h,c} share
 * (test_json_corpus.c: hand-written cases, test_json_limits.c: limits and
 * block boundaries, test_json_random.c: generated bodies): checked calls of
 * rn_json_to_messages, a growable byte buffer, and an independent reference
 * parser the module is compared with.
 *
 * The reference parser is written here from the contract in json_text.h
 * (recursive, byte at a time, slow), not taken from the module's code.
 */
#ifndef RN_TEST_JSON_FIXTURE_H
#define RN_TEST_JSON_FIXTURE_H

#include <stddef.h>
#include <stdint.h>

#include "util/json_text.h"

/* A string literal as the two arguments (bytes, length), NULs inside
 * counted, the terminating one not. */
#define S(lit) (lit), (sizeof(lit) - 1)

/* ---- checked calls of rn_json_to_messages ---- */

/* Each runs rn_json_to_messages on an exact-size copy of in[0..len) (so ASan
 * sees over-reads) into an output of exactly len + 1 bytes followed by a
 * canary, asserts the invariants every result must satisfy (lengths, count,
 * error position, the optional outputs changing nothing), then the
 * expectation; on a mismatch it prints the input and what came out. */

/* Asserts that the body becomes exactly exp[0..exp_len) holding exp_count
 * messages (exp_count 0: the status is RN_JSON_EMPTY_ARRAY, otherwise
 * RN_JSON_OK). */
void expect_output(const void *in, size_t len, const void *exp, size_t exp_len, size_t exp_count);
/* Asserts that the body is refused with status exp_st at error position
 * exp_err. */
void expect_error(const void *in, size_t len, rn_json_status exp_st, size_t exp_err);

/* ---- growable byte buffer ---- */

/* Starts zeroed ({0}); bput and friends append (asserting on allocation
 * failure); bfree releases it and leaves it zeroed, ready for reuse. */
typedef struct {
    uint8_t *b;
    size_t n, cap;
} buf;

void bput(buf *w, const void *s, size_t n);
void bputc(buf *w, uint8_t c);
void bputs(buf *w, const char *s);
void bfree(buf *w);

/* ---- the reference parser ---- */

/* A reference run: the input, the position reached, the message text made
 * so far, and the outcome. */
typedef struct {
    const uint8_t *s;
    size_t n, i;
    buf out;
    rn_json_status st;
    size_t err;
} ref;

/* Parses the body s[0..n) into r with rn_json_to_messages' contract: r->st
 * the status, r->err the error position (the first byte at which the input
 * stops being a valid prefix, n if merely truncated; n on OK and
 * EMPTY_ARRAY), r->out the message text (meaningful on OK), *count the
 * messages. The caller frees with bfree(&r->out). */
void ref_run(ref *r, const uint8_t *s, size_t n, size_t *count);
/* Asserts that the module and the reference agree on s[0..n): status and
 * error position, and on OK the message count and text. */
void check_against_ref(const uint8_t *s, size_t n);

#endif
