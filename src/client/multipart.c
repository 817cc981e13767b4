/*
 * multipart.c — the streaming multipart/mixed parser. See multipart.h.
 *
 * The input is matched against the delimiter CRLF "--" boundary; the
 * first boundary has no CRLF before it, so the parser starts with a CRLF
 * of its own in its window. Body bytes are handed on as soon as they
 * cannot be the start of a delimiter (the last dlen - 1 bytes of the
 * window wait for more input).
 */
#define _GNU_SOURCE /* memmem */
#include "client/multipart.h"
#include "util/text.h"

#include <stdio.h>
#include <string.h>

enum { PREAMBLE, AFTER_DELIM, HEADERS, BODY, END };

int rnc_multipart_init(rnc_multipart *p, const char *content_type,
                       const runnel_bootstrap_handler *h) {
    memset(p, 0, sizeof *p);
    p->h = h;
    const char *b = content_type ? strstr(content_type, "boundary=") : NULL;
    if (!content_type || !rn_iprefix(content_type, strlen(content_type), "multipart/") || !b)
        return -1;
    b += 9;
    size_t n;
    if (*b == '"') {
        b++;
        const char *q = strchr(b, '"');
        if (!q)
            return -1;
        n = (size_t)(q - b);
    } else {
        n = strcspn(b, "; \t");
    }
    if (n == 0 || n > 70) /* RFC 2046: 1 to 70 characters */
        return -1;
    memcpy(p->delim, "\r\n--", 4);
    memcpy(p->delim + 4, b, n);
    p->dlen = n + 4;
    memcpy(p->work, "\r\n", 2); /* the first delimiter may open the body */
    p->wlen = 2;
    p->state = PREAMBLE;
    return 0;
}

static void consume(rnc_multipart *p, size_t n) {
    memmove(p->work, p->work + n, p->wlen - n);
    p->wlen -= n;
}

static int emit(rnc_multipart *p, const uint8_t *d, size_t n) {
    if (!n || !p->in_part || !p->h->on_part_data)
        return 0;
    if (p->h->on_part_data(p->h->arg, p->index - 1, d, n)) {
        p->stopped = 1;
        return -1;
    }
    return 0;
}

static int end_part(rnc_multipart *p) {
    if (!p->in_part)
        return 0;
    p->in_part = 0;
    if (p->h->on_part_end && p->h->on_part_end(p->h->arg, p->index - 1)) {
        p->stopped = 1;
        return -1;
    }
    return 0;
}

/* The part's Content-Type (default text/plain, RFC 2046 §5.1). */
static void part_type(const rnc_multipart *p, char *out, size_t cap) {
    snprintf(out, cap, "text/plain");
    for (size_t i = 0; i < p->head_len;) {
        const char *line = p->head + i;
        const char *eol = memchr(line, '\n', p->head_len - i);
        size_t len = eol ? (size_t)(eol - line) : p->head_len - i;
        i += len + 1;
        if (len && line[len - 1] == '\r')
            len--;
        if (len > 13 && rn_iprefix(line, len, "content-type:")) {
            const char *v = line + 13;
            size_t vl = len - 13;
            while (vl && (*v == ' ' || *v == '\t'))
                v++, vl--;
            snprintf(out, cap, "%.*s", (int)vl, v);
        }
    }
}

/* Works through the window; returns 0, or -1 on a fault or a stop. */
static int step(rnc_multipart *p) {
    for (;;) {
        switch (p->state) {
        case PREAMBLE:
        case BODY: {
            uint8_t *at = memmem(p->work, p->wlen, p->delim, p->dlen);
            if (!at) {
                size_t keep = p->dlen - 1 < p->wlen ? p->dlen - 1 : p->wlen;
                size_t out = p->wlen - keep;
                if (p->state == BODY && emit(p, p->work, out))
                    return -1;
                consume(p, out);
                return 0;
            }
            size_t before = (size_t)(at - p->work);
            if (p->state == BODY && (emit(p, p->work, before) || end_part(p)))
                return -1;
            consume(p, before + p->dlen);
            p->state = AFTER_DELIM;
            break;
        }
        case AFTER_DELIM: {
            size_t i = 0;
            while (i < p->wlen && (p->work[i] == ' ' || p->work[i] == '\t'))
                i++; /* transport padding */
            if (p->wlen - i < 2)
                return 0;
            if (p->work[i] == '-' && p->work[i + 1] == '-') {
                p->state = END;
                p->wlen = 0;
                return 0;
            }
            if (p->work[i] != '\r' || p->work[i + 1] != '\n') {
                p->failed = 1;
                return -1;
            }
            consume(p, i + 2);
            p->head_len = 0;
            p->state = HEADERS;
            break;
        }
        case HEADERS: {
            /* headers end at an empty line: CRLF at their start, or CRLFCRLF */
            size_t i = 0;
            int done = 0;
            for (; i < p->wlen; i++) {
                if (p->head_len >= sizeof p->head) {
                    p->failed = 1;
                    return -1;
                }
                p->head[p->head_len++] = (char)p->work[i];
                size_t h = p->head_len;
                if ((h == 2 && memcmp(p->head, "\r\n", 2) == 0) ||
                    (h >= 4 && memcmp(p->head + h - 4, "\r\n\r\n", 4) == 0)) {
                    done = 1;
                    i++;
                    break;
                }
            }
            consume(p, i);
            if (!done)
                return 0;
            char type[128];
            part_type(p, type, sizeof type);
            p->index++;
            p->in_part = 1;
            if (p->h->on_part_begin && p->h->on_part_begin(p->h->arg, p->index - 1, type)) {
                p->stopped = 1;
                return -1;
            }
            p->state = BODY;
            break;
        }
        case END:
            p->wlen = 0; /* the epilogue is ignored */
            return 0;
        }
    }
}

int rnc_multipart_feed(rnc_multipart *p, const void *data, size_t len) {
    const uint8_t *d = data;
    if (p->failed || p->stopped)
        return -1;
    while (len) {
        size_t room = sizeof p->work - p->wlen;
        size_t take = len < room ? len : room;
        memcpy(p->work + p->wlen, d, take);
        p->wlen += take;
        d += take;
        len -= take;
        if (step(p))
            return -1;
    }
    return 0;
}

int rnc_multipart_finish(rnc_multipart *p) {
    if (p->failed || p->stopped || p->state != END)
        return -1;
    return 0;
}
