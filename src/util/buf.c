/*
 * buf.c — growable byte buffers, checked allocation and a bounds-checked
 * little-endian reader. See buf.h.
 */
#include "util/buf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void out_of_memory(size_t n) {
    fprintf(stderr, "runnel: out of memory allocating %zu bytes\n", n);
    abort();
}

void *rn_xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p)
        out_of_memory(n);
    return p;
}

void *rn_xcalloc(size_t n, size_t size) {
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p)
        out_of_memory(n * size);
    return p;
}

void *rn_xrealloc(void *p, size_t n) {
    void *q = realloc(p, n ? n : 1);
    if (!q)
        out_of_memory(n);
    return q;
}

char *rn_xstrndup(const char *s, size_t n) {
    char *d = rn_xmalloc(n + 1);
    memcpy(d, s, n);
    d[n] = 0;
    return d;
}

char *rn_xstrdup(const char *s) {
    return rn_xstrndup(s, strlen(s));
}

void rn_buf_reserve(rn_buf *b, size_t extra) {
    if (b->cap - b->len >= extra)
        return;
    size_t cap = b->cap ? b->cap : 64;
    while (cap - b->len < extra)
        cap *= 2;
    b->data = rn_xrealloc(b->data, cap);
    b->cap = cap;
}

void rn_buf_append(rn_buf *b, const void *data, size_t n) {
    if (n == 0)
        return;
    rn_buf_reserve(b, n);
    memcpy(b->data + b->len, data, n);
    b->len += n;
}

void rn_buf_append_str(rn_buf *b, const char *s) {
    rn_buf_append(b, s, strlen(s));
}

void rn_buf_append_byte(rn_buf *b, uint8_t c) {
    rn_buf_reserve(b, 1);
    b->data[b->len++] = c;
}

void rn_buf_appendf(rn_buf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    va_list ap2;
    va_copy(ap2, ap);
    char small[256];
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0) {
        va_end(ap2);
        return;
    }
    if ((size_t)n < sizeof small) {
        rn_buf_append(b, small, (size_t)n);
    } else {
        rn_buf_reserve(b, (size_t)n + 1);
        vsnprintf((char *)b->data + b->len, (size_t)n + 1, fmt, ap2);
        b->len += (size_t)n;
    }
    va_end(ap2);
}

void rn_buf_append_u8(rn_buf *b, uint8_t v) {
    rn_buf_append_byte(b, v);
}

void rn_buf_append_u32(rn_buf *b, uint32_t v) {
    uint8_t t[4];
    for (int i = 0; i < 4; i++)
        t[i] = (uint8_t)(v >> (8 * i));
    rn_buf_append(b, t, 4);
}

void rn_buf_append_u64(rn_buf *b, uint64_t v) {
    uint8_t t[8];
    for (int i = 0; i < 8; i++)
        t[i] = (uint8_t)(v >> (8 * i));
    rn_buf_append(b, t, 8);
}

void rn_buf_append_lstr(rn_buf *b, const void *s, size_t n) {
    rn_buf_append_u32(b, (uint32_t)n);
    rn_buf_append(b, s, n);
}

void rn_buf_free(rn_buf *b) {
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

uint8_t *rn_buf_steal(rn_buf *b, size_t *len) {
    uint8_t *d = b->data;
    if (len)
        *len = b->len;
    b->data = NULL;
    b->len = b->cap = 0;
    return d;
}

void rn_reader_init(rn_reader *r, const void *data, size_t len) {
    r->p = data;
    r->end = r->p + len;
    r->failed = 0;
}

const uint8_t *rn_read_bytes(rn_reader *r, size_t n) {
    if (r->failed || (size_t)(r->end - r->p) < n) {
        r->failed = 1;
        return NULL;
    }
    const uint8_t *s = r->p;
    r->p += n;
    return s;
}

uint8_t rn_read_u8(rn_reader *r) {
    const uint8_t *s = rn_read_bytes(r, 1);
    return s ? s[0] : 0;
}

uint32_t rn_read_u32(rn_reader *r) {
    const uint8_t *s = rn_read_bytes(r, 4);
    uint32_t v = 0;
    for (int i = 0; s && i < 4; i++)
        v |= (uint32_t)s[i] << (8 * i);
    return v;
}

uint64_t rn_read_u64(rn_reader *r) {
    const uint8_t *s = rn_read_bytes(r, 8);
    uint64_t v = 0;
    for (int i = 0; s && i < 8; i++)
        v |= (uint64_t)s[i] << (8 * i);
    return v;
}

const uint8_t *rn_read_lstr(rn_reader *r, size_t *len) {
    uint32_t n = rn_read_u32(r);
    const uint8_t *s = rn_read_bytes(r, n);
    *len = s ? n : 0;
    return s;
}

int rn_bytes_zero(const void *p, size_t n) {
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++)
        if (b[i])
            return 0;
    return 1;
}
