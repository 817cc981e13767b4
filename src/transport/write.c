/*
 * write.c — the write path every protocol shares: bytes out of the
 * connections, and the answer budget. See write.h.
 *
 * Writes are tried at once when nothing is queued (try_now), the rest
 * queued with the byte transport's write (conn.h). Inside a write batch (rn_http_batch_begin) such
 * writes are collected as batch entries instead, and the flush sends them
 * from the loop thread and the fan-out threads (fanout.c), which touch only
 * the entries: descriptor, bytes, result. Everything else is loop-thread
 * only. Owned bytes of queued writes count in the server's
 * answer_bytes_held (max_answer_bytes_in_flight); a shared chunk's bytes
 * are referenced, never copied.
 */
#include "transport/write.h"
#include "transport/fanout.h"
#include "transport/request.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>

#define FANOUT_MIN_BATCH 64 /* smaller write batches are sent by the loop thread */

/* Bytes queued with the transport's write, and what keeps them alive: owned buffers, or
 * a reference to a shared chunk. */
struct write_req {
    uv_write_t w;
    rn_conn *conn;
    rn_buf head, body;
    rn_http_chunk *chunk;
    int body_piece; /* a piece of rn_http_respond_pieces: send the next one when done */
    size_t held;    /* head and body bytes counted in answer_bytes_held */
};
typedef struct write_req write_req;

/* A write collected by a batch: its bytes (owned head and body, or a
 * referenced chunk), the socket, and what sending them did. Helper threads
 * touch only fd, the bytes, sent and tried. */
struct batch_entry {
    rn_conn *conn; /* NULL once settled */
    int fd;
    rn_buf head, body;
    rn_http_chunk *chunk;
    size_t sent; /* bytes the socket took */
    int tried;   /* the send was made */
};

static void write_req_free(write_req *wr) {
    if (wr->held)
        wr->conn->srv->answer_bytes_held -= wr->held;
    rn_buf_free(&wr->head);
    rn_buf_free(&wr->body);
    if (wr->chunk)
        rn_http_chunk_release(wr->chunk);
    free(wr);
}

static void on_written(uv_write_t *w, int status) {
    write_req *wr = (write_req *)w;
    rn_conn *c = wr->conn;
    int body_piece = wr->body_piece;
    write_req_free(wr);
    c->pending_writes--;
    c->writes_done++;
    if (status < 0) {
        conn_close(c);
        return;
    }
    c->proto->written(c, body_piece);
}

/* Writes bufs at once (the transport's try_write) when nothing is queued:
 * a write the socket takes whole needs no request, no callback and no
 * change to the poll set. Returns the bytes the socket took; 0 when
 * something is queued, the connection is closed or the write failed
 * (errors surface through the queued write of the rest). */
static size_t try_now(rn_conn *c, const uv_buf_t *bufs, unsigned n) {
    if (c->pending_writes || c->closed)
        return 0;
    return c->bytes->try_write(c, bufs, n);
}

/* Bookkeeping of a write the socket took whole at once (or a batch entry
 * it took whole): an ending connection with nothing else pending finishes. */
static void written_at_once(rn_conn *c) {
    conn_finish_when_written(c);
}

/* Queues the bytes of bufs[0..n) (n <= 3) past the first `sent` with the
 * byte transport's write. wr owns those bytes (its head, body or chunk) and
 * is freed once they are written or the connection fails. Returns -1 when
 * the connection failed, else 0. */
static int queue_rest(rn_conn *c, write_req *wr, const uv_buf_t *bufs, unsigned n, size_t sent) {
    uv_buf_t rest[3];
    unsigned m = 0;
    for (unsigned i = 0; i < n; i++) {
        size_t skip = sent < bufs[i].len ? sent : bufs[i].len;
        sent -= skip;
        if (skip < bufs[i].len)
            rest[m++] = uv_buf_init(bufs[i].base + skip, (unsigned)(bufs[i].len - skip));
    }
    wr->conn = c;
    c->pending_writes++;
    if (c->bytes->write(c, &wr->w, rest, m, on_written) < 0) {
        c->pending_writes--;
        write_req_free(wr);
        conn_close(c);
        return -1;
    }
    wr->held = wr->head.len + wr->body.len;
    c->srv->answer_bytes_held += wr->held;
    conn_watch_output(c);
    return 0;
}

/* ---- write batches ---- */

/* True when a write to c is to be collected by the open batch: one is
 * open, not being flushed, nothing is queued on c (a write behind queued
 * bytes joins their queue), and c's byte transport lets the fan-out
 * threads send on its descriptor. */
static int batch_takes(const rn_conn *c) {
    return c->srv->batch_depth > 0 && !c->srv->flushing && c->pending_writes == 0 && !c->closed &&
           c->bytes->direct_sends;
}

/* Collects a write to c: takes over head and body (either may be NULL),
 * or takes a reference to ch. The entry counts as a pending write until it
 * is settled, so that a closing connection waits for it. */
static void batch_add(rn_conn *c, rn_buf *head, rn_buf *body, rn_http_chunk *ch) {
    rn_http_server *srv = c->srv;
    if (srv->batch_len == srv->batch_cap) {
        srv->batch_cap = srv->batch_cap ? srv->batch_cap * 2 : 256;
        srv->batch = rn_xrealloc(srv->batch, srv->batch_cap * sizeof *srv->batch);
    }
    batch_entry *e = &srv->batch[srv->batch_len++];
    *e = (batch_entry){.conn = c, .fd = -1, .chunk = ch};
    uv_fileno((const uv_handle_t *)&c->tcp, &e->fd);
    if (head) {
        e->head = *head;
        *head = (rn_buf){0};
    }
    if (body) {
        e->body = *body;
        *body = (rn_buf){0};
    }
    if (ch)
        ch->refs++;
    c->batch_slot = srv->batch_len;
    c->pending_writes++;
}

/* The entry's bytes in order (head, body, chunk; empty ones left out) into
 * bufs[3]; returns their count and their total in *total. */
static unsigned entry_bufs(const batch_entry *e, uv_buf_t *bufs, size_t *total) {
    unsigned n = 0;
    if (e->head.len)
        bufs[n++] = uv_buf_init((char *)e->head.data, (unsigned)e->head.len);
    if (e->body.len)
        bufs[n++] = uv_buf_init((char *)e->body.data, (unsigned)e->body.len);
    if (e->chunk)
        bufs[n++] = uv_buf_init((char *)e->chunk->bytes, (unsigned)e->chunk->len);
    *total = 0;
    for (unsigned i = 0; i < n; i++)
        *total += bufs[i].len;
    return n;
}

/* Sends an entry's bytes with one non-blocking sendmsg and records how many
 * the socket took (0 on any error: the queued write surfaces it). Runs on
 * the loop thread or a helper; touches only the entry. */
static void entry_send(void *item) {
    batch_entry *e = item;
    uv_buf_t bufs[3];
    size_t total;
    unsigned n = entry_bufs(e, bufs, &total);
    struct iovec iov[3];
    for (unsigned i = 0; i < n; i++)
        iov[i] = (struct iovec){.iov_base = bufs[i].base, .iov_len = bufs[i].len};
    struct msghdr m = {.msg_iov = iov, .msg_iovlen = n};
    ssize_t w;
    do
        w = sendmsg(e->fd, &m, MSG_DONTWAIT | MSG_NOSIGNAL);
    while (w < 0 && errno == EINTR);
    e->sent = w > 0 ? (size_t)w : 0;
    e->tried = 1;
}

/* Settles an entry on the loop thread, sending it first unless that was
 * done: written whole, it is done like a write taken at once; otherwise
 * what remains is queued with the transport's write (which surfaces a
 * failed socket as conn_write does). The bytes of a closed connection are
 * dropped. */
static void entry_settle(batch_entry *e) {
    rn_conn *c = e->conn;
    e->conn = NULL;
    c->batch_slot = 0;
    c->pending_writes--;
    if (!e->tried && !c->closed)
        entry_send(e);
    uv_buf_t bufs[3];
    size_t total;
    unsigned n = entry_bufs(e, bufs, &total);
    if (c->closed || e->sent == total) {
        rn_buf_free(&e->head);
        rn_buf_free(&e->body);
        if (e->chunk)
            rn_http_chunk_release(e->chunk);
        if (!c->closed)
            written_at_once(c);
        return;
    }
    write_req *wr = rn_xcalloc(1, sizeof *wr); /* takes the bytes bufs point at */
    wr->head = e->head;
    wr->body = e->body;
    wr->chunk = e->chunk;
    queue_rest(c, wr, bufs, n, e->sent);
}

/* Settles c's entry before anything else is written to c, so that its
 * bytes keep their order. */
static void batch_settle(rn_conn *c) {
    if (c->batch_slot)
        entry_settle(&c->srv->batch[c->batch_slot - 1]);
}

void rn_http_batch_begin(rn_http_server *srv) {
    if (srv->fanout)
        srv->batch_depth++;
}

void rn_http_batch_flush(rn_http_server *srv) {
    if (!srv->fanout || --srv->batch_depth > 0 || srv->flushing)
        return;
    srv->flushing = 1;
    size_t n = 0;
    for (size_t i = 0; i < srv->batch_len; i++) {
        batch_entry *e = &srv->batch[i];
        if (!e->conn)
            continue; /* settled already */
        if (e->conn->closed) {
            entry_settle(e); /* its descriptor is closed: no thread may use it */
            continue;
        }
        srv->batch[n] = *e;
        srv->batch[n].conn->batch_slot = n + 1;
        n++;
    }
    if (n >= FANOUT_MIN_BATCH) {
        rn_fanout_run(srv->fanout, entry_send, srv->batch, sizeof *srv->batch, n);
    } else {
        for (size_t i = 0; i < n; i++)
            entry_send(&srv->batch[i]);
    }
    for (size_t i = 0; i < n; i++)
        if (srv->batch[i].conn) /* settling one may settle others (their writes) */
            entry_settle(&srv->batch[i]);
    srv->batch_len = 0;
    srv->flushing = 0;
}

/* ---- writes ---- */

int conn_write(rn_conn *c, rn_buf *head, rn_buf *body, int body_piece) {
    batch_settle(c);
    if (!body_piece && batch_takes(c)) {
        batch_add(c, head, body, NULL);
        return 0;
    }
    uv_buf_t bufs[2] = {
        uv_buf_init((char *)head->data, (unsigned)head->len),
        uv_buf_init(body ? (char *)body->data : NULL, body ? (unsigned)body->len : 0)};
    unsigned n = bufs[1].len ? 2 : 1;
    size_t sent = body_piece ? 0 : try_now(c, bufs, n);
    if (sent == bufs[0].len + bufs[1].len) {
        rn_buf_free(head);
        if (body)
            rn_buf_free(body);
        written_at_once(c);
        return 0;
    }
    write_req *wr = rn_xcalloc(1, sizeof *wr); /* takes the bytes bufs point at */
    wr->body_piece = body_piece;
    wr->head = *head;
    *head = (rn_buf){0};
    if (body) {
        wr->body = *body;
        *body = (rn_buf){0};
    }
    return queue_rest(c, wr, bufs, n, sent);
}

int conn_write_chunk(rn_conn *c, rn_http_chunk *ch) {
    batch_settle(c);
    if (batch_takes(c)) {
        batch_add(c, NULL, NULL, ch);
        return 0;
    }
    uv_buf_t buf = uv_buf_init((char *)ch->bytes, (unsigned)ch->len);
    size_t sent = try_now(c, &buf, 1);
    if (sent == ch->len) {
        written_at_once(c);
        return 0;
    }
    write_req *wr = rn_xcalloc(1, sizeof *wr);
    wr->chunk = ch;
    ch->refs++;
    return queue_rest(c, wr, &buf, 1, sent);
}

/* ---- shared chunks ---- */

size_t chunk_size_line(char *out, size_t n) {
    static const char hex[] = "0123456789abcdef";
    char digits[2 * sizeof(size_t)];
    size_t k = 0;
    do {
        digits[k++] = hex[n & 15];
        n >>= 4;
    } while (n);
    for (size_t i = 0; i < k; i++)
        out[i] = digits[k - 1 - i];
    out[k] = '\r';
    out[k + 1] = '\n';
    return k + 2;
}

rn_http_chunk *rn_http_chunk_new(const void *payload, size_t len) {
    rn_http_chunk *ch = rn_xmalloc(sizeof *ch + CHUNK_LINE_MAX + len + 2);
    ch->refs = 1;
    ch->payload_len = len;
    size_t n = chunk_size_line((char *)ch->bytes, len);
    memcpy(ch->bytes + n, payload, len);
    memcpy(ch->bytes + n + len, "\r\n", 2);
    ch->len = n + len + 2;
    return ch;
}

void rn_http_chunk_release(rn_http_chunk *ch) {
    if (--ch->refs == 0)
        free(ch);
}

/* ---- the answer budget ---- */

uint64_t rn_http_answer_bytes_held(const rn_http_server *srv) {
    return srv->answer_bytes_held;
}

size_t conn_queued(const rn_conn *c) {
    return c->bytes->queued(c);
}

size_t answer_room(const rn_request *req) {
    const rn_conn *c = exchange_of(req)->conn;
    const rn_http_server *srv = c ? c->srv : NULL;
    if (!srv || !srv->cfg.max_answer_bytes_in_flight)
        return SIZE_MAX;
    uint64_t held = srv->answer_bytes_held, bound = srv->cfg.max_answer_bytes_in_flight;
    uint64_t room = held < bound ? bound - held : 0;
    return room > RN_HTTP_SMALL_PIECE_BYTES ? (size_t)room : RN_HTTP_SMALL_PIECE_BYTES;
}
