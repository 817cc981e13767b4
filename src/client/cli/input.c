/*
 * input.c — cutting append's input into write bodies. See input.h.
 */
#include "client/cli/input.h"
#include "util/json_text.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define READ_CHUNK 65536

void cli_input_init(cli_input *in, int fd, const void *data, size_t len, cli_input_kind kind,
                    size_t max_batch) {
    memset(in, 0, sizeof *in);
    in->fd = fd;
    in->kind = kind;
    in->max_batch = max_batch;
    in->cap = fd < 0 ? len + 1 : 4 * READ_CHUNK;
    in->buf = malloc(in->cap);
    if (!in->buf)
        abort();
    if (fd < 0) {
        memcpy(in->buf, data, len);
        in->end = len;
        in->eof = 1;
    }
}

void cli_input_free(cli_input *in) {
    free(in->buf);
    rn_buf_free(&in->scratch);
}

/* Reads more input (blocking). Returns 0, or -1 with errno. */
static int fill(cli_input *in) {
    if (in->fd < 0) {
        in->eof = 1;
        return 0;
    }
    if (in->start) {
        memmove(in->buf, in->buf + in->start, in->end - in->start);
        in->end -= in->start;
        in->start = 0;
    }
    if (in->end == in->cap) {
        if (in->cap >= CLI_MAX_LINE + READ_CHUNK) {
            errno = E2BIG;
            return -1;
        }
        in->cap *= 2;
        in->buf = realloc(in->buf, in->cap);
        if (!in->buf)
            abort();
    }
    for (;;) {
        ssize_t n = read(in->fd, in->buf + in->end, in->cap - in->end);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -1;
        if (n == 0)
            in->eof = 1;
        in->end += (size_t)n;
        return 0;
    }
}

int cli_input_ready(cli_input *in) {
    if (in->fd < 0 || in->eof)
        return 1;
    struct pollfd p = {.fd = in->fd, .events = POLLIN};
    return poll(&p, 1, 0) > 0;
}

int cli_input_skip(cli_input *in, uint64_t n) {
    while (in->pos < n) {
        size_t avail = in->end - in->start;
        if (!avail) {
            if (in->eof || fill(in))
                return -1;
            continue;
        }
        uint64_t want = n - in->pos;
        size_t take = avail < want ? avail : (size_t)want;
        for (size_t i = 0; i < take; i++)
            in->line += in->buf[in->start + i] == '\n';
        in->start += take;
        in->pos += take;
    }
    return 0;
}

/* The length of the next unit in the buffer, or 0 when none is complete. */
static size_t next_unit(const cli_input *in, size_t room) {
    size_t avail = in->end - in->start;
    if (!avail)
        return 0;
    if (in->kind == CLI_BYTES)
        return avail < room ? avail : room;
    const uint8_t *lf = memchr(in->buf + in->start, '\n', avail);
    if (lf)
        return (size_t)(lf - (in->buf + in->start)) + 1;
    return in->eof ? avail : 0; /* the last line may lack its LF */
}

/* Adds one JSON line as an element; returns 0 (a blank line adds
 * nothing), 1 when added, -1 when it is not JSON. */
static int add_json_line(cli_input *in, rn_buf *out, const uint8_t *l, size_t n, int first) {
    while (n && (l[n - 1] == '\n' || l[n - 1] == '\r'))
        n--;
    size_t i = 0;
    while (i < n && (l[i] == ' ' || l[i] == '\t' || l[i] == '\r'))
        i++;
    if (i == n)
        return 0;
    in->scratch.len = 0;
    rn_buf_reserve(&in->scratch, n + 1);
    size_t out_len;
    rn_json_status st = rn_json_to_messages(l, n, in->scratch.data, &out_len, NULL, NULL);
    if (st != RN_JSON_OK && st != RN_JSON_EMPTY_ARRAY)
        return -1;
    if (!first)
        rn_buf_append_byte(out, ',');
    rn_buf_append(out, l, n);
    return 1;
}

int cli_input_batch(cli_input *in, rn_buf *out, uint64_t until, char *err, size_t errcap) {
    for (;;) {
        out->len = 0;
        size_t units = 0, taken = 0, messages = 0;
        if (in->kind == CLI_JSON_LINES)
            rn_buf_append_byte(out, '[');
        for (;;) {
            if (until && in->pos == until)
                break;
            size_t room = in->max_batch > taken ? in->max_batch - taken : 0;
            if (until && until - in->pos < room)
                room = (size_t)(until - in->pos);
            size_t unit = next_unit(in, room);
            if (!unit) {
                if (in->eof && in->start == in->end)
                    break;
                if (in->kind == CLI_BYTES && units && !room)
                    break;
                if (units && !until && !cli_input_ready(in))
                    break; /* send what is here; more may take long to come */
                if (fill(in)) {
                    snprintf(err, errcap, "%s",
                             errno == E2BIG ? "a line is longer than 32 MiB"
                                            : "reading the input failed");
                    return -1;
                }
                continue;
            }
            if (!until && units && taken + unit > in->max_batch)
                break;
            if (until && in->pos + unit > until) {
                snprintf(err, errcap,
                         "the input differs from the one the producer state recorded (a write "
                         "ended at byte %llu, inside a line)",
                         (unsigned long long)until);
                return -1;
            }
            const uint8_t *u = in->buf + in->start;
            if (in->kind == CLI_JSON_LINES) {
                int added = add_json_line(in, out, u, unit, messages == 0);
                if (added < 0) {
                    snprintf(err, errcap, "line %llu is not JSON",
                             (unsigned long long)in->line + 1);
                    return -1;
                }
                messages += (size_t)added;
            } else {
                rn_buf_append(out, u, unit);
                messages++;
            }
            if (in->kind != CLI_BYTES)
                in->line++;
            units++;
            taken += unit;
            in->pos += unit;
            in->start += unit;
        }
        if (in->kind == CLI_JSON_LINES)
            rn_buf_append_byte(out, ']');
        if (messages)
            return 1;
        if (until) {
            snprintf(err, errcap,
                     "the input differs from the one the producer state recorded (no write "
                     "ends at byte %llu)",
                     (unsigned long long)until);
            return -1;
        }
        if (in->eof && in->start == in->end)
            return 0;
        /* only blank JSON lines: nothing to send yet */
    }
}
