/*
 * http2_check.c — fuzz_http2's check of what the server sends (included by
 * fuzz_http.c with FUZZ_HTTP2, in place of the HTTP/1.1 checker): the
 * client's preface is sent first (client_begin); then every frame the
 * server sends must be complete by the end, of a type a server sends (no
 * PUSH_PROMISE, no unknown type), its header blocks (HEADERS and their
 * CONTINUATIONs) must decode with HPACK, and no :status may be 500.
 */
#include <nghttp2/nghttp2.h>

#define H2_PREFACE "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

typedef struct {
    uint8_t *frame; /* bytes received and not yet framed */
    size_t frame_len, frame_cap;
    uint8_t block[1 << 16]; /* a header block across CONTINUATIONs */
    size_t block_len;
    nghttp2_hd_inflater *inflater;
    size_t received, frames;
} checker;

static void checker_setup(void) {}

static void client_begin(int fd) {
    if (send(fd, H2_PREFACE, sizeof H2_PREFACE - 1, MSG_NOSIGNAL) != sizeof H2_PREFACE - 1)
        FAIL("cannot send the connection preface");
}

static void checker_init(checker *c, const uint8_t *data, size_t size) {
    (void)data, (void)size;
    if (c->inflater)
        nghttp2_hd_inflate_del(c->inflater);
    free(c->frame);
    memset(c, 0, sizeof *c);
    if (nghttp2_hd_inflate_new(&c->inflater) != 0)
        FAIL("nghttp2_hd_inflate_new");
}

/* Decodes a complete header block and checks its :status. */
static void check_block(checker *c) {
    const uint8_t *in = c->block;
    size_t left = c->block_len;
    for (;;) {
        nghttp2_nv nv;
        int flags = 0;
        ssize_t n = nghttp2_hd_inflate_hd2(c->inflater, &nv, &flags, in, left, 1);
        if (n < 0)
            FAIL("a header block that does not decode (frame %zu): %s", c->frames,
                 nghttp2_strerror((int)n));
        in += n;
        left -= (size_t)n;
        if ((flags & NGHTTP2_HD_INFLATE_EMIT) && nv.namelen == 7 &&
            memcmp(nv.name, ":status", 7) == 0 && nv.valuelen == 3 &&
            memcmp(nv.value, "500", 3) == 0)
            FAIL("the server answered 500 (frame %zu)", c->frames);
        if (flags & NGHTTP2_HD_INFLATE_FINAL) {
            nghttp2_hd_inflate_end_headers(c->inflater);
            break;
        }
        if (n == 0 && !(flags & NGHTTP2_HD_INFLATE_EMIT))
            FAIL("a header block cut short (frame %zu)", c->frames);
    }
    c->block_len = 0;
}

static void block_add(checker *c, const uint8_t *p, size_t n) {
    if (c->block_len + n > sizeof c->block)
        FAIL("a header block over %zu bytes", sizeof c->block);
    memcpy(c->block + c->block_len, p, n);
    c->block_len += n;
}

/* Checks one whole frame (9-byte header and payload). */
static void check_frame(checker *c, const uint8_t *f, size_t len) {
    uint8_t type = f[3], flags = f[4];
    const uint8_t *payload = f + 9;
    c->frames++;
    switch (type) {
    case NGHTTP2_HEADERS:
        if (flags & (NGHTTP2_FLAG_PADDED | NGHTTP2_FLAG_PRIORITY))
            FAIL("HEADERS with padding or priority from the server");
        block_add(c, payload, len);
        if (flags & NGHTTP2_FLAG_END_HEADERS)
            check_block(c);
        return;
    case NGHTTP2_CONTINUATION:
        block_add(c, payload, len);
        if (flags & NGHTTP2_FLAG_END_HEADERS)
            check_block(c);
        return;
    case NGHTTP2_DATA:
    case NGHTTP2_RST_STREAM:
    case NGHTTP2_SETTINGS:
    case NGHTTP2_PING:
    case NGHTTP2_GOAWAY:
    case NGHTTP2_WINDOW_UPDATE:
        return;
    default:
        FAIL("a frame of type %u from the server (frame %zu)", type, c->frames);
    }
}

static void checker_feed(checker *c, const char *p, size_t n) {
    if (trace)
        fprintf(stderr, "[%zu bytes from the server]\n", n);
    c->received += n;
    /* Everything not yet framed is kept in c->frame (grown as needed). */
    if (c->frame_len + n > c->frame_cap) {
        c->frame_cap = (c->frame_len + n) * 2;
        c->frame = realloc(c->frame, c->frame_cap);
        if (!c->frame)
            FAIL("out of memory");
    }
    memcpy(c->frame + c->frame_len, p, n);
    c->frame_len += n;
    size_t off = 0;
    while (c->frame_len - off >= 9) {
        const uint8_t *f = c->frame + off;
        size_t len = (size_t)f[0] << 16 | (size_t)f[1] << 8 | f[2];
        if (c->frame_len - off < 9 + len)
            break;
        check_frame(c, f, len);
        off += 9 + len;
    }
    memmove(c->frame, c->frame + off, c->frame_len - off);
    c->frame_len -= off;
}
