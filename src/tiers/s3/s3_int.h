/*
 * s3_int.h — what the S3 client's two files share: the client and call
 * structures, the request builder (s3.c) and the per-call answer readers
 * (s3_calls.c).
 *
 * A call is built (method, key, query, headers, body, sink, answer reader),
 * then submitted: a signed body is hashed first (on the loop, 1 MiB per
 * loop turn, so neither a large body nor a cancel ever waits on another
 * thread), then signed and handed to the outbound client. When the answer
 * comes, s3.c types it (outcome, code, message from an Error document) and
 * hands it to the call's reader, which parses what the call returns and
 * delivers the result.
 */
#ifndef RN_S3_INT_H
#define RN_S3_INT_H

#include "net/outbound.h"
#include "tiers/s3/s3.h"
#include "util/list.h"

#include <openssl/evp.h>

#define S3_MAX_QUERY 4
#define S3_MAX_HEADERS 4

typedef struct {
    char *name, *value;
} s3_pair;

/* Reads a typed answer (r already holds outcome, status, code, message),
 * completes r and calls s3_deliver exactly once. */
typedef void (*s3_reader)(rn_s3_call *c, const rn_fetch_result *fr, rn_s3_result *r);

struct rn_s3_call {
    rn_s3 *s3;
    rn_list_node link;     /* on rn_s3.calls: every call of the client */
    rn_s3_call *hash_next; /* hash queue */
    const char *op;        /* S3's name of the call, for logs */
    const char *method;
    char *key; /* NULL for bucket calls */
    s3_pair query[S3_MAX_QUERY];
    size_t nquery;
    s3_pair headers[S3_MAX_HEADERS]; /* signed, besides host and x-amz-* */
    size_t nheaders;
    rn_s3_source body;
    rn_buf doc; /* an owned XML body (body then points at it) */
    EVP_MD_CTX *hash;
    uint64_t hashed;
    char payload_hash[65];
    rn_s3_sink sink;   /* GET only */
    uint64_t sink_len; /* GET: the range's length */
    uint64_t range_offset;
    uint64_t copy_len; /* UploadPartCopy: bytes the store copies (for the timeout) */
    rn_fetch *fetch;
    s3_reader read;
    char code[64], message[256];
    rn_s3_fn fn;
    void *arg;
};

struct rn_s3 {
    uv_loop_t *loop;
    rn_outbound *out;
    uv_idle_t hasher; /* active while the hash queue is not empty */
    rn_s3_call *hash_head, *hash_tail;
    uint8_t *hash_buf; /* file bodies are read through it to be hashed */
    rn_list calls;     /* rn_s3_call.link */
    size_t ncalls, max_calls;
    char *base_url; /* "scheme://host[:port]" requests go to */
    char *host;     /* its host[:port]: the Host header */
    char *bucket;
    int virtual_host;
    char *region, *access_key, *secret_key, *session_token;
    int unsigned_payload;
    uint64_t timeout_ms, min_rate;
    size_t max_response_bytes;
    int stopped;
};

/* A new call of the client, or NULL when it is saturated or stopped. key
 * (copied) is NULL for a bucket call. */
rn_s3_call *s3_call_new(rn_s3 *s3, const char *op, const char *method, const char *key,
                        s3_reader read, rn_s3_fn fn, void *arg);
/* Adds a query parameter (value NULL: none) or a signed header; copied. */
void s3_add_query(rn_s3_call *c, const char *name, const char *value);
void s3_add_header(rn_s3_call *c, const char *name, const char *value);
/* Hashes (if signed), signs and sends the call. */
void s3_submit(rn_s3_call *c);
/* Gives r to the caller (logging a failure first). Readers call it once. */
void s3_deliver(rn_s3_call *c, const rn_s3_result *r);
/* Makes r a failure with a code and message of the client's own. */
void s3_fail(rn_s3_result *r, rn_s3_outcome outcome, const char *code, const char *message);
/* The outcome S3's error code means (for errors inside a 200 answer). */
rn_s3_outcome s3_outcome_of_code(const char *code);

#endif
