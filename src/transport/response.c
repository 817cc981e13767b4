/*
 * response.c — what a handler calls to answer a request (http.h:
 * rn_http_respond, rn_http_respond_pieces and rn_http_respond_file,
 * rn_http_stream_*), whatever the
 * protocol: the answer's state (started, streamed, a body sent in pieces),
 * its status and metrics, the body bytes counted for the access log,
 * answers to gone requests dropped, and bodies made and sent piece by piece
 * from a source (a file's, or any rn_http_pieces). The bytes go out
 * through the request's protocol (rn_protocol's send calls).
 */
#include "transport/response.h"
#include "transport/request.h"
#include "transport/write.h"
#include "util/metrics.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#define PIECE_BYTES (512 * 1024) /* rn_http_respond_pieces makes this much at a time */

/* Records the status of req's answer, and counts it in the metrics. */
static void answer_status(rn_request *req, int status) {
    req->status = status;
    if (status > 0 && status < RN_STATUS_SLOTS && req->route >= 0 && req->route < RN_ROUTE_COUNT)
        rn_metric.http_requests[req->route][req->method][status]++;
}

/* Lets the request's rewrite hook change an answer's header lines. */
static void rewrite(rn_request *req, int status, rn_buf *head) {
    if (req->rewrite_head)
        req->rewrite_head(req, status, head);
}

/* Answer bytes of x still queued (0 once its connection is gone). */
static size_t answer_queued(const rn_exchange *x) {
    return x->conn ? x->conn->proto->queued(x) : 0;
}

void rn_http_respond(rn_request *req, int status, rn_buf *head, rn_buf *body) {
    rn_exchange *x = exchange_of(req);
    rn_conn *c = x->conn;
    if (x->holding && !x->held_status && c) { /* kept until the body is in */
        assert(status > 0);
        x->held_status = status;
        x->held_head = *head;
        x->held_body = *body;
        *head = (rn_buf){0};
        *body = (rn_buf){0};
        return;
    }
    if (!c || x->responding) {
        rn_buf_free(head);
        rn_buf_free(body);
        return;
    }
    x->responding = 1;
    answer_status(req, status);
    rewrite(req, status, head);
    const rn_protocol *proto = c->proto;
    if (status == 204 || status == 304 || req->method == RN_HTTP_HEAD) {
        rn_buf_free(body);
        proto->send_head(x, status, head, RN_ANSWER_NO_BODY, NULL);
    } else {
        req->bytes_out = body->len;
        proto->send_head(x, status, head, body->len, body);
    }
    if (x->conn)
        proto->finished(x);
}

size_t rn_http_piece_bytes(const rn_request *req) {
    return answer_room(req) < PIECE_BYTES ? RN_HTTP_SMALL_PIECE_BYTES : PIECE_BYTES;
}

void answer_pieces_release(rn_exchange *x) {
    rn_buf_free(&x->pieces_suffix);
    if (!x->pieces.fill)
        return;
    rn_http_pieces p = x->pieces;
    x->pieces = (rn_http_pieces){0};
    p.release(p.ctx);
}

void answer_pump(rn_exchange *x) {
    if (!x || !x->pieces.fill)
        return;
    assert(x->conn);
    const rn_protocol *proto = x->conn->proto;
    if (x->pieces_left == 0) {
        rn_buf suffix = x->pieces_suffix;
        x->pieces_suffix = (rn_buf){0};
        answer_pieces_release(x);
        if (suffix.len)
            proto->send_body(x, &suffix, RN_BODY_BYTES);
        rn_buf_free(&suffix);
        if (x->conn)
            proto->finished(x);
        return;
    }
    size_t max = rn_http_piece_bytes(&x->req);
    size_t n = x->pieces_left < max ? (size_t)x->pieces_left : max;
    rn_buf piece = {0};
    int rc = x->pieces.fill(x->pieces.ctx, x->pieces_pos, n, &piece);
    if (rc == RN_HTTP_PIECE_LATER) { /* rn_http_pieces_resume comes back here */
        assert(piece.len == 0);
        rn_buf_free(&piece);
        return;
    }
    if (rc < 0) {
        rn_buf_free(&piece);
        proto->fail(x);
        return;
    }
    assert(piece.len == n);
    x->pieces_pos += n;
    x->pieces_left -= n;
    proto->send_body(x, &piece, RN_BODY_PIECE);
}

void rn_http_pieces_resume(rn_request *req) {
    rn_exchange *x = exchange_of(req);
    assert(x->pieces.fill); /* the source is not released */
    if (x->conn)
        answer_pump(x);
}

void rn_http_respond_pieces(rn_request *req, int status, rn_buf *head, rn_buf *prefix,
                            const rn_http_pieces *pieces, uint64_t len, rn_buf *suffix) {
    assert(pieces->fill && pieces->release);
    rn_exchange *x = exchange_of(req);
    rn_conn *c = x->conn;
    if (!c || x->responding || req->method == RN_HTTP_HEAD) {
        pieces->release(pieces->ctx);
        rn_buf_free(prefix);
        rn_buf_free(suffix);
        if (c && !x->responding) {
            /* HEAD: the headers of the whole answer, no body. */
            rn_buf empty = {0};
            rn_http_respond(req, status, head, &empty);
            return;
        }
        rn_buf_free(head);
        return;
    }
    x->responding = 1;
    answer_status(req, status);
    req->bytes_out = prefix->len + len + suffix->len;
    x->pieces = *pieces;
    x->pieces_pos = 0;
    x->pieces_left = len;
    x->pieces_suffix = *suffix;
    *suffix = (rn_buf){0};
    rewrite(req, status, head);
    c->proto->send_head(x, status, head, req->bytes_out, prefix);
    if (x->conn)
        answer_pump(x);
}

/* ---- file bodies: a source that preads a range of a file ---- */

typedef struct {
    int fd;
    uint64_t off; /* of the body's first byte in the file */
} file_source;

static int file_fill(void *ctx, uint64_t pos, size_t len, rn_buf *out) {
    const file_source *f = ctx;
    rn_buf_reserve(out, len);
    while (out->len < len) {
        ssize_t got =
            pread(f->fd, out->data + out->len, len - out->len, (off_t)(f->off + pos + out->len));
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            return -1; /* a short file */
        out->len += (size_t)got;
    }
    return 0;
}

static void file_release(void *ctx) {
    file_source *f = ctx;
    close(f->fd);
    free(f);
}

void rn_http_respond_file(rn_request *req, int status, rn_buf *head, rn_buf *prefix, int fd,
                          uint64_t off, uint64_t len, rn_buf *suffix) {
    file_source *f = rn_xmalloc(sizeof *f);
    *f = (file_source){.fd = fd, .off = off};
    rn_http_pieces pieces = {.fill = file_fill, .release = file_release, .ctx = f};
    rn_http_respond_pieces(req, status, head, prefix, &pieces, len, suffix);
}

void rn_http_stream_start(rn_request *req, int status, rn_buf *head) {
    rn_exchange *x = exchange_of(req);
    rn_conn *c = x->conn;
    if (!c || x->responding) {
        rn_buf_free(head);
        return;
    }
    x->responding = 1;
    x->streaming = 1;
    answer_status(req, status);
    rewrite(req, status, head);
    c->proto->send_head(x, status, head, RN_ANSWER_STREAMED, NULL);
}

void rn_http_stream_start_sized(rn_request *req, int status, rn_buf *head, uint64_t length) {
    rn_exchange *x = exchange_of(req);
    if (length == 0 || status == 204 || status == 304 || req->method == RN_HTTP_HEAD) {
        rn_buf empty = {0};
        rn_http_respond(req, status, head, &empty); /* HEAD: the head of the whole answer */
        return;
    }
    rn_conn *c = x->conn;
    if (!c || x->responding) {
        rn_buf_free(head);
        return;
    }
    x->responding = 1;
    x->streaming = 1;
    x->sized = 1;
    x->sized_left = length;
    answer_status(req, status);
    rewrite(req, status, head);
    c->proto->send_head(x, status, head, length, NULL);
}

size_t rn_http_stream_write(rn_request *req, rn_buf *chunk) {
    rn_exchange *x = exchange_of(req);
    rn_conn *c = x->conn;
    if (!c || !x->streaming || chunk->len == 0) {
        rn_buf_free(chunk);
        return 0;
    }
    if (x->sized && chunk->len > x->sized_left) { /* more than promised: the answer is broken */
        rn_buf_free(chunk);
        x->streaming = 0;
        c->proto->fail(x);
        return 0;
    }
    req->bytes_out += chunk->len;
    if (x->sized)
        x->sized_left -= chunk->len;
    c->proto->send_body(x, chunk, x->sized ? RN_BODY_BYTES : RN_BODY_CHUNK);
    return answer_queued(x);
}

size_t rn_http_stream_write_chunk(rn_request *req, rn_http_chunk *ch) {
    rn_exchange *x = exchange_of(req);
    rn_conn *c = x->conn;
    if (!c || !x->streaming)
        return 0;
    assert(!x->sized);
    req->bytes_out += ch->payload_len;
    c->proto->send_chunk(x, ch);
    return answer_queued(x);
}

void rn_http_stream_end(rn_request *req) {
    rn_exchange *x = exchange_of(req);
    rn_conn *c = x->conn;
    if (!c || !x->streaming)
        return;
    x->streaming = 0;
    const rn_protocol *proto = c->proto;
    if (x->sized && x->sized_left > 0) {
        proto->fail(x); /* ended short of the length it promised */
        return;
    }
    if (!x->sized)
        proto->end_stream(x);
    if (x->conn)
        proto->finished(x);
}

void rn_http_stream_abort(rn_request *req) {
    rn_exchange *x = exchange_of(req);
    if (!x->conn || !x->streaming)
        return;
    x->streaming = 0;
    x->conn->proto->fail(x);
}
