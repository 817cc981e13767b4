/*
 * sse.c — the streaming SSE parser (binary data's base64 is util/text.c's).
 * See sse.h.
 */
#include "client/sse.h"

#include <string.h>

void rnc_sse_init(rnc_sse *p, size_t max_event, rnc_sse_event_fn on_event, void *arg) {
    memset(p, 0, sizeof *p);
    p->max_event = max_event;
    p->on_event = on_event;
    p->arg = arg;
}

void rnc_sse_reset(rnc_sse *p) {
    p->line.len = 0;
    p->data.len = 0;
    p->type[0] = 0;
    p->has_data = 0;
    p->after_cr = 0;
    p->failed = 0;
}

void rnc_sse_free(rnc_sse *p) {
    rn_buf_free(&p->line);
    rn_buf_free(&p->data);
}

/* Handles one complete line; returns -1 to stop. */
static int on_line(rnc_sse *p) {
    const char *l = (const char *)p->line.data;
    size_t n = p->line.len;
    if (n == 0) { /* dispatch */
        int stop = 0;
        if (p->has_data) {
            rn_buf_append_byte(&p->data, 0); /* a terminator for the callback's ease */
            stop = p->on_event(p->arg, p->type[0] ? p->type : "message", (const char *)p->data.data,
                               p->data.len - 1);
        }
        p->data.len = 0;
        p->type[0] = 0;
        p->has_data = 0;
        return stop ? -1 : 0;
    }
    if (l[0] == ':')
        return 0; /* a comment */
    const char *colon = memchr(l, ':', n);
    size_t fl = colon ? (size_t)(colon - l) : n;
    const char *v = colon ? colon + 1 : l + n;
    size_t vl = colon ? n - fl - 1 : 0;
    if (vl && *v == ' ')
        v++, vl--;
    if (fl == 4 && memcmp(l, "data", 4) == 0) {
        if (p->has_data)
            rn_buf_append_byte(&p->data, '\n');
        rn_buf_append(&p->data, v, vl);
        p->has_data = 1;
    } else if (fl == 5 && memcmp(l, "event", 5) == 0) {
        size_t k = vl < sizeof p->type - 1 ? vl : sizeof p->type - 1;
        memcpy(p->type, v, k);
        p->type[k] = 0;
    }
    return 0; /* id, retry and unknown fields: nothing a tail uses */
}

int rnc_sse_feed(rnc_sse *p, const char *d, size_t n) {
    if (p->failed)
        return -1;
    for (size_t i = 0; i < n;) {
        if (p->after_cr && d[i] == '\n') { /* the LF of a CRLF */
            p->after_cr = 0;
            i++;
            continue;
        }
        p->after_cr = 0;
        const char *end = memchr(d + i, '\n', n - i);
        const char *cr = memchr(d + i, '\r', (end ? (size_t)(end - d) : n) - i);
        if (cr)
            end = cr;
        size_t take = (end ? (size_t)(end - d) : n) - i;
        if (p->line.len + take + p->data.len > p->max_event) {
            p->failed = 1;
            return -1;
        }
        rn_buf_append(&p->line, d + i, take);
        i += take;
        if (!end)
            break;
        p->after_cr = *end == '\r';
        i++;
        int stop = on_line(p);
        p->line.len = 0;
        if (stop)
            return -1;
    }
    return 0;
}
