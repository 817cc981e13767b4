/*
 * buf.h — growable byte buffers and checked allocation.
 *
 * rn_buf is a plain (data, len, cap) triple that doubles its capacity when it
 * runs out. Allocation failure is treated as fatal (rn_xmalloc aborts with a
 * message): the server bounds its memory by configuration, so running out of
 * memory means a configuration error, not a condition to limp through.
 */
#ifndef RN_BUF_H
#define RN_BUF_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
    uint8_t *data;
    size_t len;
    size_t cap;
} rn_buf;

/* Allocation wrappers: never return NULL (abort on exhaustion). */
void *rn_xmalloc(size_t n);
void *rn_xcalloc(size_t n, size_t size);
void *rn_xrealloc(void *p, size_t n);
char *rn_xstrndup(const char *s, size_t n);
char *rn_xstrdup(const char *s);

/* Ensures room for `extra` more bytes after len. */
void rn_buf_reserve(rn_buf *b, size_t extra);
void rn_buf_append(rn_buf *b, const void *data, size_t n);
void rn_buf_append_str(rn_buf *b, const char *s);
void rn_buf_append_byte(rn_buf *b, uint8_t c);
/* printf-style append. */
void rn_buf_appendf(rn_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Little-endian fixed-width integer appends (used by on-disk encodings). */
void rn_buf_append_u8(rn_buf *b, uint8_t v);
void rn_buf_append_u32(rn_buf *b, uint32_t v);
void rn_buf_append_u64(rn_buf *b, uint64_t v);
/* A u32 length followed by the bytes. */
void rn_buf_append_lstr(rn_buf *b, const void *s, size_t n);
/* Releases memory and resets to empty. */
void rn_buf_free(rn_buf *b);
/* Gives up ownership of the data to the caller; b becomes empty. */
uint8_t *rn_buf_steal(rn_buf *b, size_t *len);

/* True when the n bytes at p are all zero (n 0: true). */
int rn_bytes_zero(const void *p, size_t n);

/* Bounds-checked little-endian reader over a byte range (decoding records). */
typedef struct {
    const uint8_t *p;
    const uint8_t *end;
    int failed; /* set once any read ran past end; later reads return zeros */
} rn_reader;

void rn_reader_init(rn_reader *r, const void *data, size_t len);
uint8_t rn_read_u8(rn_reader *r);
uint32_t rn_read_u32(rn_reader *r);
uint64_t rn_read_u64(rn_reader *r);
/* Reads a u32-length-prefixed byte string; returns a pointer into the input. */
const uint8_t *rn_read_lstr(rn_reader *r, size_t *len);
/* Reads n raw bytes; returns a pointer into the input. */
const uint8_t *rn_read_bytes(rn_reader *r, size_t n);

#endif
