/*
 * internal.h — what librunnel's files share and the public header does not
 * show: the client handle, one HTTP exchange (http.c), answer parsing
 * (answer.c), the leader cache of the cluster-aware mode (route.c) and URL
 * helpers (client.c).
 */
#ifndef RN_CLIENT_INTERNAL_H
#define RN_CLIENT_INTERNAL_H

#include "runnel/client.h"
#include "util/routes.h"

#include <curl/curl.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#define RNC_URL_MAX 2048
#define RNC_IDLE_HANDLES 8 /* easy handles (with their connections) kept for reuse */
#define RNC_ROUTES 64      /* streams whose leader the cluster-aware mode remembers */

struct runnel_client {
    runnel_client_options o;
    char base_url[RNC_URL_MAX];
    char user_agent[64];
    char *token;               /* o.token's copy, or NULL */
    char *ca_file;             /* the options' ca_file, copied; NULL: the system's CAs */
    pthread_mutex_t lock;      /* guards idle[], routes and max_request_bytes */
    int64_t max_request_bytes; /* the last Ursula-Max-Request-Bytes read */
    CURL *idle[RNC_IDLE_HANDLES];
    int nidle;
    struct rn_routes *routes; /* util/routes.h */
};

/* Request headers: a bounded list of "Name: value" lines. */
typedef struct {
    struct curl_slist *list;
    int bad; /* a value held CR or LF: the request is not sent */
} rnc_headers;

/* Adds "name: value" (value NULL: nothing added). */
void rnc_header(rnc_headers *h, const char *name, const char *value);
void rnc_header_u64(rnc_headers *h, const char *name, uint64_t value);
void rnc_headers_free(rnc_headers *h);

/* Receives the body of a 2xx answer (an error answer's body is kept in the
 * answer instead). Returns 0 to go on, nonzero to stop. */
typedef int (*rnc_sink_fn)(void *arg, const void *data, size_t len);

/* One HTTP exchange. */
typedef struct {
    const char *method; /* GET, HEAD, PUT, POST, DELETE */
    char url[RNC_URL_MAX];
    rnc_headers headers;
    const runnel_body *body; /* PUT/POST: NULL sends an empty body */
    int expect_continue;
    int live;         /* a live read: no whole-request timeout */
    rnc_sink_fn sink; /* 2xx body; NULL: discarded */
    void *sink_arg;
    /* internal state of one try */
    runnel_answer *ans;
    uint64_t seen;   /* typed headers of the current header block */
    size_t body_pos; /* bytes of an in-memory body sent */
    uint64_t body_sent;
    int stopped;       /* the sink asked to stop */
    int source_failed; /* the body source failed */
    char errbuf[CURL_ERROR_SIZE];
    char *err_body; /* an error answer's body (bounded) */
    size_t err_len, err_cap;
} rnc_request;

/* Prepares req for method and target (a full URL or a path joined to the
 * base URL, followed by `suffix`, which may be NULL). Returns 0, or -1 when
 * the URL does not fit. */
int rnc_request_init(rnc_request *req, const runnel_client *c, const char *method,
                     const char *target, const char *suffix);
void rnc_request_free(rnc_request *req);

/* Sets up an easy handle for one try of req (its answer is reset). */
void rnc_easy_setup(runnel_client *c, CURL *e, rnc_request *req, runnel_answer *ans);
/* Completes the answer of a try that ended with code (status, transport
 * error, error body). */
void rnc_easy_finish(CURL *e, rnc_request *req, CURLcode code);

/* Performs req (blocking), following 307/308 as the client allows and
 * learning routes in the cluster-aware mode. Fills *ans. Returns RUNNEL_OK when
 * an answer came (whatever its status), RUNNEL_E_TRANSPORT when none did,
 * RUNNEL_E_USAGE for a bad header value, RUNNEL_E_STOPPED when the sink stopped. */
runnel_result rnc_perform(runnel_client *c, rnc_request *req, runnel_answer *ans);

/* Keeps the answer's Ursula-Max-Request-Bytes (when it carries one, at
 * most RUNNEL_REQUEST_LIMIT) as the client's body limit. Thread-safe. */
void rnc_learn_limits(runnel_client *c, const runnel_answer *a);

/* Takes an easy handle from the client's pool (or a new one) / gives it
 * back. Thread-safe. */
CURL *rnc_easy_get(runnel_client *c);
void rnc_easy_put(runnel_client *c, CURL *e);

/* Answers (answer.c). */
void rnc_answer_reset(runnel_answer *a);
/* Parses one header line into a. *seen holds which typed headers this
 * header block sent (a repeated one is dropped); a status line starts a
 * new block (resets a and *seen). */
void rnc_answer_header(runnel_answer *a, uint64_t *seen, const char *line, size_t len);
/* Reads the {"error":{"code","message"}} body, and decides whether a 403's
 * producer code is believed (producer_answer). */
void rnc_answer_error_body(runnel_answer *a, const char *body, size_t len);
/* Copies s into a field of capacity cap; -1 (and an empty field) when it
 * does not fit. */
int rnc_copy(char *dst, size_t cap, const char *s, size_t len);

/* Routes (route.c): in the cluster-aware mode, rewrites req->url to the
 * leader learned for its path; learns from a 307 with x-ursula-raft-*
 * headers; forgets a group's leader on 503 NO_LEADER. Thread-safe. */
void rnc_route_apply(runnel_client *c, rnc_request *req);
void rnc_route_learn(runnel_client *c, const char *request_url, const runnel_answer *a);

/* Runs req and releases it: a write's answer classified as `kind`
 * (rnc_write_result), a read's judged by its status (rnc_read_result). */
runnel_result rnc_run_write(runnel_client *c, rnc_request *req, runnel_write_kind kind,
                            runnel_answer *ans);
runnel_result rnc_run_read(runnel_client *c, rnc_request *req, runnel_answer *ans);

/* A call refused before anything was sent: the answer says why. */
runnel_result rnc_usage(runnel_answer *ans, const char *why);

/* Status helpers for calls. */
runnel_result rnc_write_result(runnel_write_kind kind, runnel_result transport, runnel_answer *ans);
runnel_result rnc_read_result(runnel_result transport, const runnel_answer *ans);

/* snprintf for text that may be cut to fit (messages, copies into fixed
 * fields); always terminates dst. */
void rnc_fmt(char *dst, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Monotonic milliseconds. */
int64_t rnc_now_ms(void);
/* The pause before repeating a write: Retry-After when the answer gave one
 * (at most 10 s), else 200 ms doubling with the attempt up to 5 s. */
long rnc_retry_delay_ms(const runnel_answer *ans, int attempt);
void rnc_retry_pause(const runnel_answer *ans, int attempt);
/* Whether a classified write answer may be repeated as it is: unknown, or
 * a refusal that a short wait can lift (429 or 5xx with Retry-After). */
int rnc_repeatable(const runnel_answer *ans);

/* Appends a read's query to url (capacity RNC_URL_MAX): offset
 * (percent-encoded; NULL is -1), then live, cursor, max_bytes (> 0),
 * timeout_ms (> 0) and consistency when given. Returns 0, or -1 when too
 * long. */
int rnc_read_query(char *url, const char *offset, long max_bytes, const char *consistency,
                   const char *live, const char *cursor, long timeout_ms);

/* Appends "/" and the percent-encoded s to url (capacity RNC_URL_MAX). */
int rnc_url_append_segment(char *url, const char *s);

/* The BLAKE3-256 hex digest of a body (memory or source; a source is
 * rewound after). Returns 0, or -1 when the source failed. */
int rnc_body_digest(const runnel_body *b, char out[65]);

#endif
