/*
 * sse.c — SSE line reassembly and event dispatch (see sse.h). A blank line
 * ends an event: it is counted as data or control by its `event:` field.
 */
#include "sse.h"

#include <string.h>

void bn_sse_init(bn_sse *s, bn_sse_data_fn on_data, void *arg) {
    memset(s, 0, sizeof *s);
    s->on_data = on_data;
    s->arg = arg;
}

static void line(bn_sse *s, const char *l, size_t n) {
    if (n > 0 && l[n - 1] == '\r')
        n--;
    if (n == 0) {
        if (s->in_data)
            s->data_events++;
        else if (s->is_control)
            s->control_events++;
        s->in_data = s->is_control = 0;
        return;
    }
    if (n >= 6 && memcmp(l, "event:", 6) == 0) {
        const char *v = l + 6;
        size_t vn = n - 6;
        if (vn && *v == ' ') {
            v++;
            vn--;
        }
        s->in_data = vn == 4 && memcmp(v, "data", 4) == 0;
        s->is_control = vn == 7 && memcmp(v, "control", 7) == 0;
    } else if (s->in_data && n >= 5 && memcmp(l, "data:", 5) == 0) {
        const char *v = l + 5;
        size_t vn = n - 5;
        if (vn && *v == ' ') {
            v++;
            vn--;
        }
        s->on_data(s->arg, v, vn);
    }
}

void bn_sse_feed(bn_sse *s, const char *at, size_t n) {
    while (n > 0) {
        const char *lf = memchr(at, '\n', n);
        if (!lf) {
            rn_buf_append(&s->line, at, n);
            return;
        }
        size_t k = (size_t)(lf - at);
        if (s->line.len) {
            rn_buf_append(&s->line, at, k);
            line(s, (const char *)s->line.data, s->line.len);
            s->line.len = 0;
        } else {
            line(s, at, k);
        }
        at += k + 1;
        n -= k + 1;
    }
}

void bn_sse_free(bn_sse *s) {
    rn_buf_free(&s->line);
}
