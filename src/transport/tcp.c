/*
 * tcp.c — the plain TCP byte transport (rn_byte_transport): the protocol's
 * bytes are the socket's bytes. Reads land straight in the connection's
 * input, writes are libuv's on the connection's stream, and a write batch
 * may send from the fan-out threads on the descriptor.
 */
#include "transport/conn.h"

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
    rn_conn *c = h->data;
    (void)suggested;
    rn_buf_reserve(&c->input, 65536);
    *buf =
        uv_buf_init((char *)c->input.data + c->input.len, (unsigned)(c->input.cap - c->input.len));
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf) {
    (void)buf;
    conn_received(s->data, n);
}

static int tcp_read_start(rn_conn *c) {
    return uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
}

static void tcp_read_stop(rn_conn *c) {
    uv_read_stop((uv_stream_t *)&c->tcp);
}

static size_t tcp_try_write(rn_conn *c, const uv_buf_t *bufs, unsigned n) {
    int w = uv_try_write((uv_stream_t *)&c->tcp, bufs, n);
    return w > 0 ? (size_t)w : 0;
}

static int tcp_write(rn_conn *c, uv_write_t *w, const uv_buf_t *bufs, unsigned n, uv_write_cb cb) {
    return uv_write(w, (uv_stream_t *)&c->tcp, bufs, n, cb);
}

static size_t tcp_queued(const rn_conn *c) {
    return uv_stream_get_write_queue_size((const uv_stream_t *)&c->tcp);
}

static int tcp_shutdown(rn_conn *c, uv_shutdown_t *sr, uv_shutdown_cb cb) {
    return uv_shutdown(sr, (uv_stream_t *)&c->tcp, cb);
}

const rn_byte_transport rn_tcp_bytes = {
    .read_start = tcp_read_start,
    .read_stop = tcp_read_stop,
    .try_write = tcp_try_write,
    .write = tcp_write,
    .queued = tcp_queued,
    .shutdown = tcp_shutdown,
    .direct_sends = 1,
};
