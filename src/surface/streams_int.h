/*
 * streams_int.h — what streams.c (dispatch, ctx lifetime, mutations),
 * reads.c (HEAD, catch-up and live reads) and arriving.c (appends taken
 * while their body arrives) share: the state of one request for a stream,
 * the surface, and the answers they give. Private to those files.
 */
#ifndef RN_STREAMS_INT_H
#define RN_STREAMS_INT_H

#include "live/live.h"
#include "protocol/errors.h"
#include "protocol/offset.h"
#include "protocol/params.h"
#include "protocol/read_query.h"
#include "surface/streams.h"

typedef struct stream_ctx {
    rn_surface *sf;
    const rn_profile *prof;
    rn_request *req;
    char *path; /* percent-decoded stream path */
    size_t path_len;
    char *fork_source; /* percent-decoded Stream-Forked-From, or NULL */
    rn_op op;
    /* reads: the position, the cap on a response or an SSE event and the
     * cursor echo are kept in the reader that live reads hand to live/ */
    rn_read_mode mode;
    rn_offset_kind offset_kind;
    uint64_t poll_timeout_ms; /* this request's long-poll wait */
    /* a read that waits for cold bytes runs again with its query */
    const char *query;
    size_t query_len;
    int cold_waits;
    int cold_waiting; /* a fetch's or a disk read's callback holds the ctx */
    int disk_read;    /* runs again after its bytes were read into the page cache */
    rn_live_reader read;
    /* an append whose body the engine takes as it arrives (arriving.c) */
    int arriving;        /* its body is being fed (until its end or abort) */
    uint64_t arrived;    /* body bytes fed */
    rn_error body_fault; /* the body ended incomplete: the answer owed */
    int body_failed;
} stream_ctx;

struct rn_surface {
    uv_loop_t *loop;
    rn_engine *engine;
    rn_live *live;
    rn_surface_config cfg;
};

/* A ctx for req, a request for the stream at path (its hold on req taken,
 * its abort handler set). */
stream_ctx *rn_streams_ctx_new(rn_surface *sf, rn_request *req, const char *path, size_t path_len);
/* Reads an append's or close's headers into c->op (kind APPEND, body_len;
 * the body itself is the caller's). Shape errors are refused; without
 * producer headers the content faults are too (ext §5.3 lets them come
 * before the stream); with them, every other check is the engine's, in
 * §5.3's order. The Content-Type of a POST without a body is ignored
 * (PROTOCOL §5.2). Returns 0; -1 with *f set (a header's fault); or 1 with
 * *e set. Answers nothing. */
int rn_streams_read_append(stream_ctx *c, size_t body_len, rn_param_fault *f, rn_error *e);
/* The engine's answer to c's op (op->arg): answers the request and ends c. */
void rn_streams_op_done(rn_op *op);
/* rn_streams_answer_early's second part: takes a large append whose body
 * is to be written as it arrives, when the surface and the engine allow it
 * (arriving.c). Returns 1 when it took req. */
int rn_streams_take_arriving(rn_surface *sf, rn_request *req, const rn_profile *prof,
                             const char *key, size_t key_len);
/* Frees c: its buffers, its path and its hold on the request. */
void rn_streams_ctx_free(stream_ctx *c);
/* Ends c, which live/ does not hold: it was answered, or its client went
 * away. */
void rn_streams_ctx_finish(stream_ctx *c);
/* Answers c with the error e (extra: more header lines, taken over, or
 * NULL) and ends it. */
void rn_streams_reply(stream_ctx *c, rn_error e, rn_buf *extra);
/* Answers c as its headers or query were refused (params.h) and ends it. */
void rn_streams_reply_fault(stream_ctx *c, const rn_param_fault *f);
/* The answer for a stream the engine did not find: 410 when soft-deleted,
 * else 404 (on the bucket surface, BUCKET_NOT_FOUND for an empty bucket). */
rn_error rn_streams_missing_error(const stream_ctx *c);
/* Appends "Content-Type: <the stream's content type>\r\n". */
void rn_streams_append_content_type(rn_buf *h, const rn_stream *s);

/* reads.c: answers (or hands to live/) a GET with this raw query. */
void rn_streams_get(stream_ctx *c, const char *query, size_t query_len);
/* reads.c: answers a HEAD. */
void rn_streams_head(stream_ctx *c);

#endif
