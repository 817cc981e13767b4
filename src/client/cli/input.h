/*
 * input.h — the input of `runnel append` cut into write bodies: whole
 * lines for text and JSON streams (a JSON stream's lines, one JSON value
 * each, become one array per write, so each line stays one message), runs
 * of bytes for other types. A batch takes what is available without
 * waiting, up to a size bound, so a fast input makes large writes and a
 * slow one small, prompt ones. Positions are input bytes: a producer tags
 * each write with the position after it, and a resumed producer re-cuts
 * the same writes from the same positions.
 */
#ifndef RN_CLI_INPUT_H
#define RN_CLI_INPUT_H

#include "util/buf.h"

#include <stddef.h>
#include <stdint.h>

#define CLI_MAX_LINE (32u << 20) /* a line longer than a request may be is refused */

typedef enum { CLI_BYTES, CLI_TEXT_LINES, CLI_JSON_LINES } cli_input_kind;

typedef struct {
    int fd; /* -1: the input is all in buf already */
    cli_input_kind kind;
    size_t max_batch; /* bytes of input per write (a longer line goes alone) */
    uint8_t *buf;
    size_t cap, start, end; /* unread input is buf[start, end) */
    uint64_t pos;           /* input bytes taken so far */
    uint64_t line;          /* lines taken so far (for messages) */
    int eof;
    rn_buf scratch; /* JSON validation */
} cli_input;

/* From a file descriptor, or (fd -1) from the bytes data[0, len). */
void cli_input_init(cli_input *in, int fd, const void *data, size_t len, cli_input_kind kind,
                    size_t max_batch);
void cli_input_free(cli_input *in);

/* Discards the first n bytes (what a resumed producer already wrote).
 * Returns 0, or -1 when the input ends first. */
int cli_input_skip(cli_input *in, uint64_t n);

/* Cuts the next write's body into out (emptied first). until = 0: as much
 * as is available now, at least one unit, at most max_batch; else exactly
 * the input up to position until. Returns 1 with a body, 0 at the end of
 * the input, -1 with a message in err (a read error, a bad JSON line, a
 * line too long, or an input that does not reach until at a unit's end). */
int cli_input_batch(cli_input *in, rn_buf *out, uint64_t until, char *err, size_t errcap);

/* 1 when input is available without waiting (or the input ended). */
int cli_input_ready(cli_input *in);

#endif
