/*
 * response.c — what a handler calls to answer a request (http.h:
 * rn_http_respond, rn_http_respond_file, rn_http_stream_*), whatever the
 * protocol: the answer's state (started, streamed, a file body), its status
 * and metrics, the body bytes counted for the access log, answers to gone
 * requests dropped, and file bodies read piece by piece. The bytes go out
 * through the request's protocol (rn_protocol's send calls).
 */
#include "transport/response.h"
#include "transport/request.h"
#include "transport/write.h"
#include "util/metrics.h"

#include <assert.h>
#include <unistd.h>

#define FILE_PIECE_BYTES (256 * 1024) /* rn_http_respond_file reads this much at a time */

/* Records the status of req's answer, and counts it in the metrics. */
static void answer_status(rn_request *req, int status) {
    req->status = status;
    if (status > 0 && status < RN_STATUS_SLOTS && req->route >= 0 && req->route < RN_ROUTE_COUNT)
        rn_metric.http_requests[req->route][req->method][status]++;
}

/* Answer bytes of x still queued (0 once its connection is gone). */
static size_t answer_queued(const rn_exchange *x) {
    return x->conn ? x->conn->proto->queued(x) : 0;
}

void rn_http_respond(rn_request *req, int status, rn_buf *head, rn_buf *body) {
    rn_exchange *x = exchange_of(req);
    rn_conn *c = x->conn;
    if (!c || x->responding) {
        rn_buf_free(head);
        rn_buf_free(body);
        return;
    }
    x->responding = 1;
    answer_status(req, status);
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

void answer_file_pump(rn_exchange *x) {
    if (!x || x->file_fd < 0)
        return;
    assert(x->conn);
    const rn_protocol *proto = x->conn->proto;
    if (x->file_left == 0) {
        close(x->file_fd);
        x->file_fd = -1;
        if (x->file_suffix.len)
            proto->send_body(x, &x->file_suffix, RN_BODY_BYTES);
        if (x->conn)
            proto->finished(x);
        return;
    }
    size_t piece_max = rn_http_answer_room(&x->req) < FILE_PIECE_BYTES ? RN_HTTP_SMALL_PIECE_BYTES
                                                                       : FILE_PIECE_BYTES;
    size_t n = x->file_left < piece_max ? (size_t)x->file_left : piece_max;
    rn_buf piece = {0};
    rn_buf_reserve(&piece, n);
    ssize_t got = pread(x->file_fd, piece.data, n, (off_t)x->file_off);
    if (got <= 0) {
        rn_buf_free(&piece); /* a short file */
        proto->fail(x);
        return;
    }
    piece.len = (size_t)got;
    x->file_off += (uint64_t)got;
    x->file_left -= (uint64_t)got;
    proto->send_body(x, &piece, RN_BODY_FILE_PIECE);
}

void rn_http_respond_file(rn_request *req, int status, rn_buf *head, rn_buf *prefix, int fd,
                          uint64_t off, uint64_t len, rn_buf *suffix) {
    rn_exchange *x = exchange_of(req);
    rn_conn *c = x->conn;
    if (!c || x->responding || req->method == RN_HTTP_HEAD) {
        if (c && !x->responding) {
            /* HEAD: the headers of the whole answer, no body. */
            close(fd);
            rn_buf_free(prefix);
            rn_buf_free(suffix);
            rn_buf empty = {0};
            rn_http_respond(req, status, head, &empty);
            return;
        }
        close(fd);
        rn_buf_free(head);
        rn_buf_free(prefix);
        rn_buf_free(suffix);
        return;
    }
    x->responding = 1;
    answer_status(req, status);
    req->bytes_out = prefix->len + len + suffix->len;
    x->file_fd = fd;
    x->file_off = off;
    x->file_left = len;
    x->file_suffix = *suffix;
    *suffix = (rn_buf){0};
    c->proto->send_head(x, status, head, req->bytes_out, prefix);
    if (x->conn)
        answer_file_pump(x);
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
    c->proto->send_head(x, status, head, RN_ANSWER_STREAMED, NULL);
}

size_t rn_http_stream_write(rn_request *req, rn_buf *chunk) {
    rn_exchange *x = exchange_of(req);
    rn_conn *c = x->conn;
    if (!c || !x->streaming || chunk->len == 0) {
        rn_buf_free(chunk);
        return 0;
    }
    req->bytes_out += chunk->len;
    c->proto->send_body(x, chunk, RN_BODY_CHUNK);
    return answer_queued(x);
}

size_t rn_http_stream_write_chunk(rn_request *req, rn_http_chunk *ch) {
    rn_exchange *x = exchange_of(req);
    rn_conn *c = x->conn;
    if (!c || !x->streaming)
        return 0;
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
    proto->end_stream(x);
    if (x->conn)
        proto->finished(x);
}
