/*
 * s3.h — an asynchronous S3 client on the event loop: the object calls
 * the cold tier needs, signed with our own SigV4 (sigv4.h) and carried by
 * the shared libcurl-on-libuv client (net/outbound.h).
 *
 * Addressing: path style (endpoint/bucket/key) or virtual host
 * (bucket.endpoint/key), any http or https endpoint, any region. Bodies are
 * signed with their SHA-256 (computed on the libuv thread pool when larger
 * than 64 KiB), or UNSIGNED-PAYLOAD when configured over https.
 *
 * Every call has a timeout (timeout_ms plus the time its payload needs at
 * min_rate bytes/s), a bounded answer (a GET's range, or at most
 * max_response_bytes of XML) and one typed result:
 *   RN_S3_OK         done;
 *   RN_S3_NOT_FOUND  404 (NoSuchKey, NoSuchUpload, NoSuchBucket…);
 *   RN_S3_RETRY      may succeed later: connection refused or unreachable,
 *                    timeout, a cut answer, 5xx but 501 (500 InternalError,
 *                    503 SlowDown…), 408/429, RequestTimeout;
 *   RN_S3_FAILED     will not succeed as asked: any other 4xx (403
 *                    SignatureDoesNotMatch, 400 InvalidArgument, 416
 *                    InvalidRange…), 501 NotImplemented, an answer larger
 *                    than its bound, a malformed answer, a local file
 *                    error;
 * with the S3 error code parsed from the answer's XML (or a transport code:
 * ConnectFailed, Timeout, ResponseCut, ResponseTooLarge, LocalIO,
 * TLSVerifyFailed (permanent), TransportError, BadResponse). Retrying is the caller's: see
 * util/backoff.h. Failures are logged (event s3_request_failed) without
 * credentials, signatures or bodies.
 *
 * Memory is bounded by the configuration: at most max_running requests run
 * and max_queued wait; a call beyond that is refused at once (NULL).
 *
 * Object keys are UTF-8, 1 to 1024 bytes, without control characters
 * (rn_s3_key_valid); the calls assert it. Everything runs on the loop
 * thread; a result and everything it points to live only during its
 * callback.
 */
#ifndef RN_S3_H
#define RN_S3_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

typedef struct rn_s3 rn_s3;
typedef struct rn_s3_call rn_s3_call;

typedef struct {
    const char *endpoint; /* "http(s)://host[:port]"; NULL: https://s3.<region>.amazonaws.com */
    const char *bucket;
    const char *region;
    int virtual_host; /* bucket in the host name (needs a DNS name and bucket) */
    const char *access_key, *secret_key, *session_token; /* token may be NULL */
    int unsigned_payload; /* sign UNSIGNED-PAYLOAD instead of the body (https only) */
    uint64_t timeout_ms;  /* every call, plus payload bytes at min_rate */
    uint64_t min_rate;    /* bytes/s */
    size_t max_running, max_queued;
    size_t max_response_bytes; /* XML answers (listings) */
    const char *user_agent;
    const char *ca_file; /* CA certificates for an https endpoint (NULL: the system's) */
} rn_s3_config;

/* Defaults: 30 s, 1 MiB/s, 16 running, 1024 queued, 4 MiB answers. */
void rn_s3_config_defaults(rn_s3_config *cfg);

typedef enum { RN_S3_OK, RN_S3_NOT_FOUND, RN_S3_RETRY, RN_S3_FAILED } rn_s3_outcome;

const char *rn_s3_outcome_name(rn_s3_outcome o);

typedef struct {
    const char *key;
    uint64_t size;
    const char *etag;
    int64_t last_modified_ms; /* Unix ms; -1 when the listing gave none */
} rn_s3_entry;

typedef struct {
    const char *key;
    const char *code;
    const char *message;
} rn_s3_key_error;

typedef struct {
    rn_s3_outcome outcome;
    long status;           /* HTTP status, 0 without an answer */
    const char *code;      /* S3 or transport error code; "" when OK */
    const char *message;   /* why, for people; "" when OK */
    const char *etag;      /* put, head, upload part (copy), complete; else "" */
    uint64_t length;       /* get: bytes received; head: the object's size */
    uint64_t object_size;  /* get (from Content-Range) and head */
    const char *upload_id; /* create multipart upload */
    /* list */
    const rn_s3_entry *entries;
    size_t nentries;
    int truncated;
    const char *next_token; /* continuation token when truncated */
    /* delete many: keys S3 could not delete (outcome then RETRY or FAILED) */
    const rn_s3_key_error *key_errors;
    size_t nkey_errors;
} rn_s3_result;

typedef void (*rn_s3_fn)(void *arg, const rn_s3_result *r);

/* Where a request body comes from: memory (borrowed until the callback or
 * cancel), or len bytes of fd from offset (fd kept open as long). */
typedef struct {
    const uint8_t *data;
    int fd;
    uint64_t offset;
    uint64_t len;
} rn_s3_source;

static inline rn_s3_source rn_s3_mem(const void *data, size_t len) {
    return (rn_s3_source){.data = (const uint8_t *)data, .fd = -1, .len = len};
}
static inline rn_s3_source rn_s3_file(int fd, uint64_t offset, uint64_t len) {
    return (rn_s3_source){.fd = fd, .offset = offset, .len = len};
}

/* Where a GET's bytes go: the caller's buffer (room for the range), or an
 * fd at offset (pwrite, not synced). */
typedef struct {
    uint8_t *into;
    int fd;
    uint64_t offset;
} rn_s3_sink;

static inline rn_s3_sink rn_s3_into(void *buf) {
    return (rn_s3_sink){.into = (uint8_t *)buf, .fd = -1};
}
static inline rn_s3_sink rn_s3_to_file(int fd, uint64_t offset) {
    return (rn_s3_sink){.fd = fd, .offset = offset};
}

typedef struct {
    uint32_t number; /* 1..10000 */
    const char *etag;
} rn_s3_part;

/* Creates the client; NULL with the reason in err for a bad configuration
 * (endpoint, bucket, region, credentials, unsigned payload over http). The
 * strings are copied. */
rn_s3 *rn_s3_new(uv_loop_t *loop, const rn_s3_config *cfg, char *err, size_t errcap);

/* Every call: fn runs exactly once, later, on the loop thread, unless the
 * call is cancelled first. NULL when max_running + max_queued calls are
 * already in flight or the client is stopped (then fn never runs). */

rn_s3_call *rn_s3_put(rn_s3 *s3, const char *key, rn_s3_source body, rn_s3_fn fn, void *arg);
/* GET bytes [offset, offset+len) (len >= 1). A range past the object's end
 * yields fewer bytes (result length); one starting past it is FAILED
 * InvalidRange. */
rn_s3_call *rn_s3_get(rn_s3 *s3, const char *key, uint64_t offset, uint64_t len, rn_s3_sink sink,
                      rn_s3_fn fn, void *arg);
rn_s3_call *rn_s3_head(rn_s3 *s3, const char *key, rn_s3_fn fn, void *arg);
/* DELETE (OK also when the key did not exist: S3 does not tell). */
rn_s3_call *rn_s3_delete(rn_s3 *s3, const char *key, rn_s3_fn fn, void *arg);
/* DeleteObjects of 1..1000 keys (quiet: only failures come back). */
rn_s3_call *rn_s3_delete_many(rn_s3 *s3, const char *const *keys, size_t n, rn_s3_fn fn, void *arg);
/* ListObjectsV2 of keys under prefix ("" for all), from a continuation
 * token (NULL for the start), at most max_keys (1..1000) per page. */
rn_s3_call *rn_s3_list(rn_s3 *s3, const char *prefix, const char *token, unsigned max_keys,
                       rn_s3_fn fn, void *arg);

rn_s3_call *rn_s3_mpu_create(rn_s3 *s3, const char *key, rn_s3_fn fn, void *arg);
rn_s3_call *rn_s3_mpu_part(rn_s3 *s3, const char *key, const char *upload_id, uint32_t number,
                           rn_s3_source body, rn_s3_fn fn, void *arg);
/* UploadPartCopy of bytes [offset, offset+len) of src_key (same bucket). */
rn_s3_call *rn_s3_mpu_part_copy(rn_s3 *s3, const char *key, const char *upload_id, uint32_t number,
                                const char *src_key, uint64_t offset, uint64_t len, rn_s3_fn fn,
                                void *arg);
rn_s3_call *rn_s3_mpu_complete(rn_s3 *s3, const char *key, const char *upload_id,
                               const rn_s3_part *parts, size_t n, rn_s3_fn fn, void *arg);
rn_s3_call *rn_s3_mpu_abort(rn_s3 *s3, const char *key, const char *upload_id, rn_s3_fn fn,
                            void *arg);

/* The time call c may take from when it is sent to its answer: timeout_ms
 * plus its payload (body, GET range or copied bytes) at min_rate. */
uint64_t rn_s3_call_budget_ms(const rn_s3_call *c);

/* Abandons a call whose fn has not run; fn will not run. */
void rn_s3_cancel(rn_s3_call *c);

/* Calls in flight (running, hashing or queued). */
size_t rn_s3_in_flight(const rn_s3 *s3);

/* True for a key the calls accept. */
int rn_s3_key_valid(const char *key);

/* Cancels every call and closes the client's handles (allowed inside a
 * call's callback); run the loop afterwards until they closed, then free
 * the client with rn_s3_free (outside any callback). */
void rn_s3_stop(rn_s3 *s3);
void rn_s3_free(rn_s3 *s3);

#endif
