/*
 * test_classify.c — unit tests of librunnel's pieces on synthetic input:
 * runnel_classify on the answers a single Runnel node cannot be driven to
 * give (redirects, NO_LEADER, an intermediary's own refusals, a 2xx
 * without its write's typed answer, codes of cluster and cold-store
 * failures, GROUP_RESTARTING, INTERNAL), the answer parser (typed headers,
 * repeated and malformed ones, 1xx blocks, Location), the producer-403
 * rule of §11.1, the multipart, SSE and base64 parsers, and the leader
 * cache of the cluster-aware mode.
 */
#include "client/internal.h"
#include "client/multipart.h"
#include "client/sse.h"
#include "util/text.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

/* An answer built from header lines ("HTTP/1.1 503 ...", "Name: value")
 * and an error body, read as the library reads a real one. The lines end
 * with END_LINES: a bare NULL after the last typed argument of a variadic
 * function is undefined behaviour where NULL is a plain 0. */
#define END_LINES ((const char *)NULL)
static runnel_answer answer(const char *body, ...) {
    runnel_answer a;
    memset(&a, 0, sizeof a);
    snprintf(a.url, sizeof a.url, "http://127.0.0.1:9/v1/stream/s");
    rnc_answer_reset(&a);
    uint64_t seen = 0;
    va_list ap;
    va_start(ap, body);
    for (const char *line; (line = va_arg(ap, const char *));)
        rnc_answer_header(&a, &seen, line, strlen(line));
    va_end(ap);
    if (a.status >= 300)
        rnc_answer_error_body(&a, body ? body : "", body ? strlen(body) : 0);
    return a;
}

static const char *err(const char *code) {
    static char buf[8][160];
    static int i;
    char *out = buf[i++ % 8];
    snprintf(out, 160, "{\"error\":{\"code\":\"%s\",\"message\":\"m\"}}", code);
    return out;
}

typedef struct {
    int status;
    const char *code;
    runnel_outcome want;
    const char *why;
} code_row;

static void check_codes(const code_row *rows, size_t n) {
    static const runnel_write_kind KINDS[] = {
        RUNNEL_WRITE_APPEND,    RUNNEL_WRITE_PRODUCER, RUNNEL_WRITE_CREATE,
        RUNNEL_WRITE_PUBLISH,   RUNNEL_WRITE_PART,     RUNNEL_WRITE_DISCARD,
        RUNNEL_WRITE_RETENTION, RUNNEL_WRITE_DELETE,   RUNNEL_WRITE_BUCKET_CREATE};
    for (size_t i = 0; i < n; i++) {
        char status[48];
        snprintf(status, sizeof status, "HTTP/1.1 %d X", rows[i].status);
        runnel_answer a = answer(rows[i].code ? err(rows[i].code) : NULL, status,
                                 "Content-Type: application/json", END_LINES);
        for (size_t k = 0; k < sizeof KINDS / sizeof KINDS[0]; k++) {
            runnel_outcome got = runnel_classify(KINDS[k], &a);
            if (got != rows[i].want)
                fail_msg("%d %s (%s), kind %zu: %s, expected %s", rows[i].status,
                         rows[i].code ? rows[i].code : "-", rows[i].why, k,
                         runnel_outcome_name(got), runnel_outcome_name(rows[i].want));
        }
        printf("  ok   %3d %-34s %-10s %s\n", rows[i].status, rows[i].code ? rows[i].code : "",
               runnel_outcome_name(rows[i].want), rows[i].why);
    }
}

/* Answers no single node gives: every kind of write classifies them alike. */
static void synthetic_codes(void **state) {
    static const code_row rows[] = {
        {307, NULL, RUNNEL_REDIRECTED, "a redirect to the leader"},
        {308, NULL, RUNNEL_REDIRECTED, "a permanent redirect"},
        {503, "NO_LEADER", RUNNEL_REFUSED, "no leader known: nothing applied"},
        {503, "RAFT_LOG_PRESSURE", RUNNEL_REFUSED, "cluster admission"},
        {503, "COLD_BACKPRESSURE", RUNNEL_REFUSED, "cluster admission"},
        {503, "RAFT_UNCOMMITTED_BACKPRESSURE", RUNNEL_REFUSED, "cluster admission"},
        {503, "APPLY_STOPPED", RUNNEL_REFUSED, "checks before the proposal"},
        {503, "HISTORY_PENDING", RUNNEL_REFUSED, "refused before or at apply"},
        {503, "GROUP_RESTARTING", RUNNEL_REFUSED, "no engine runs yet (recovery)"},
        {503, "SNAPSHOT_COMMITS_BUSY", RUNNEL_REFUSED, "refused before the copy"},
        {503, "SNAPSHOT_COMMIT_IN_PROGRESS", RUNNEL_UNKNOWN, "an earlier attempt still runs"},
        {503, "LIVE_READ_BACKPRESSURE", RUNNEL_UNKNOWN, "a read's code: proves nothing"},
        {503, "OUTCOME_UNKNOWN", RUNNEL_UNKNOWN, "the apply was not observed"},
        {503, "SOME_FUTURE_CODE", RUNNEL_UNKNOWN, "a code the client does not know"},
        {503, NULL, RUNNEL_UNKNOWN, "a 503 without a body (a proxy)"},
        {500, "INTERNAL", RUNNEL_UNKNOWN, "a server fault"},
        {500, "CREATED_AT_OUT_OF_RANGE", RUNNEL_UNKNOWN, "500"},
        {500, "HISTORY_MISMATCH", RUNNEL_UNKNOWN, "500"},
        {500, "NO_LEADER", RUNNEL_UNKNOWN, "a proving code under another status"},
        {502, "COLD_STORE_FAILED", RUNNEL_UNKNOWN, "the cold store failed"},
        {413, "SNAPSHOT_TOO_LARGE", RUNNEL_REFUSED, "parts past 1 GiB"},
        {429, "STAGED_PARTS_LIMIT", RUNNEL_REFUSED, "8192 staged parts"},
        /* an intermediary's own answers */
        {401, "INVALID_CREDENTIAL", RUNNEL_REFUSED, "intermediary"},
        {401, "CREDENTIAL_EXPIRED", RUNNEL_REFUSED, "intermediary"},
        {402, "PAYMENT_REQUIRED", RUNNEL_REFUSED, "intermediary"},
        {403, "FORBIDDEN", RUNNEL_REFUSED, "an access layer"},
        {403, "ACCOUNT_REVOKED", RUNNEL_REFUSED, "an access layer"},
        {408, "BODY_TOO_SLOW", RUNNEL_REFUSED, "cut before forwarding"},
        {408, NULL, RUNNEL_UNKNOWN, "a 408 without a code"},
        {429, "RATE_LIMITED", RUNNEL_REFUSED, "intermediary"},
        {429, "LIVE_READS_EXHAUSTED", RUNNEL_REFUSED, "intermediary"},
        {502, "UPSTREAM_FAILED", RUNNEL_UNKNOWN, "intermediary: forwarded"},
        {504, "UPSTREAM_TIMEOUT", RUNNEL_UNKNOWN, "intermediary: forwarded"},
        {503, "AUTHENTICATION_UNAVAILABLE", RUNNEL_REFUSED, "intermediary: forwarded nothing"},
        {503, "AUTHORIZATION_UNAVAILABLE", RUNNEL_REFUSED, "intermediary: forwarded nothing"},
        {503, "NO_UPSTREAM", RUNNEL_REFUSED, "intermediary: forwarded nothing"},
        {503, "UPSTREAM_UNREACHABLE", RUNNEL_REFUSED, "intermediary: forwarded nothing"},
        {503, "UPLOAD_BUDGET_EXHAUSTED", RUNNEL_REFUSED, "intermediary: forwarded nothing"},
        {400, NULL, RUNNEL_REFUSED, "a 4xx without a body (a proxy)"},
        {413, NULL, RUNNEL_REFUSED, "a proxy's own size limit"},
        {100, NULL, RUNNEL_UNKNOWN, "a 1xx alone"},
        {301, NULL, RUNNEL_UNKNOWN, "a 3xx other than 307/308"},
        {302, NULL, RUNNEL_UNKNOWN, "a 3xx other than 307/308"},
        {304, NULL, RUNNEL_UNKNOWN, "a 3xx other than 307/308"},
    };
    check_codes(rows, sizeof rows / sizeof rows[0]);
    runnel_answer none;
    memset(&none, 0, sizeof none);
    rnc_answer_reset(&none);
    assert_int_equal(runnel_classify(RUNNEL_WRITE_PRODUCER, &none), RUNNEL_UNKNOWN);
    assert_int_equal(runnel_classify(RUNNEL_WRITE_DELETE, &none), RUNNEL_UNKNOWN);
}

/* A 2xx proves an apply only with its kind's typed answer. */
static void typed_answers(void **state) {
    runnel_answer bare = answer(NULL, "HTTP/1.1 200 OK", END_LINES);
    runnel_answer bare204 = answer(NULL, "HTTP/1.1 204 No Content", END_LINES);
    runnel_answer bare201 = answer(NULL, "HTTP/1.1 201 Created", END_LINES);
    for (runnel_write_kind k = RUNNEL_WRITE_APPEND; k <= RUNNEL_WRITE_RETENTION; k++) {
        assert_int_equal(runnel_classify(k, &bare), RUNNEL_UNKNOWN);
        assert_int_equal(runnel_classify(k, &bare204), RUNNEL_UNKNOWN);
        assert_int_equal(runnel_classify(k, &bare201), RUNNEL_UNKNOWN);
    }
    assert_int_equal(runnel_classify(RUNNEL_WRITE_DELETE, &bare204), RUNNEL_APPLIED);
    assert_int_equal(runnel_classify(RUNNEL_WRITE_BUCKET_CREATE, &bare201), RUNNEL_APPLIED);

    runnel_answer r =
        answer(NULL, "HTTP/1.1 200 OK", "Stream-Offset: 0_0", "Stream-Next-Offset: 0_5", END_LINES);
    assert_int_equal(runnel_classify(RUNNEL_WRITE_PRODUCER, &r), RUNNEL_APPLIED);
    r = answer(NULL, "HTTP/1.1 204 No Content", "stream-offset: 0_0", "STREAM-NEXT-OFFSET: 0_5",
               END_LINES);
    assert_int_equal(runnel_classify(RUNNEL_WRITE_PRODUCER, &r), RUNNEL_REPEAT);
    r = answer(NULL, "HTTP/1.1 204 No Content", "Stream-Next-Offset: 0_5", END_LINES);
    assert_int_equal(runnel_classify(RUNNEL_WRITE_PRODUCER, &r),
                     RUNNEL_UNKNOWN); /* half a receipt */
    assert_int_equal(runnel_classify(RUNNEL_WRITE_APPEND, &r), RUNNEL_APPLIED);
    r = answer(NULL, "HTTP/1.1 204 No Content", "Producer-Outcome: receipt-evicted",
               "Producer-Epoch: 1", "Producer-Seq: 4", END_LINES);
    assert_int_equal(runnel_classify(RUNNEL_WRITE_PRODUCER, &r), RUNNEL_REPEAT);
    r = answer(NULL, "HTTP/1.1 201 Created", "Stream-Incarnation: 4503599627370497", END_LINES);
    assert_int_equal(runnel_classify(RUNNEL_WRITE_CREATE, &r), RUNNEL_APPLIED);
    r = answer(NULL, "HTTP/1.1 204 No Content", "Stream-Incarnation: 4503599627370497", END_LINES);
    assert_int_equal(runnel_classify(RUNNEL_WRITE_DISCARD, &r), RUNNEL_APPLIED);
    assert_int_equal(runnel_classify(RUNNEL_WRITE_RETENTION, &r), RUNNEL_UNKNOWN);
    r = answer(NULL, "HTTP/1.1 204 No Content", "Stream-Retained-Offset: 0_1",
               "Stream-Incarnation: 4503599627370497", END_LINES);
    assert_int_equal(runnel_classify(RUNNEL_WRITE_RETENTION, &r), RUNNEL_APPLIED);
    r = answer(NULL, "HTTP/1.1 204 No Content", "Stream-Snapshot-Offset: 0_1", END_LINES);
    assert_int_equal(runnel_classify(RUNNEL_WRITE_PUBLISH, &r), RUNNEL_UNKNOWN);
    r = answer(NULL, "HTTP/1.1 204 No Content", "Stream-Snapshot-Offset: 0_1",
               "Stream-Snapshot-Digest: ab", END_LINES);
    assert_int_equal(runnel_classify(RUNNEL_WRITE_PUBLISH, &r), RUNNEL_APPLIED);
    r = answer(NULL, "HTTP/1.1 201 Created", "Stream-Snapshot-Part: p1", END_LINES);
    assert_int_equal(runnel_classify(RUNNEL_WRITE_PART, &r), RUNNEL_APPLIED);
    /* a repeated typed header is dropped: the answer proves nothing */
    r = answer(NULL, "HTTP/1.1 204 No Content", "Stream-Next-Offset: 0_5",
               "Stream-Next-Offset: 0_6", END_LINES);
    assert_string_equal(r.malformed, "Stream-Next-Offset");
    assert_int_equal(runnel_classify(RUNNEL_WRITE_APPEND, &r), RUNNEL_UNKNOWN);
}

/* §11.1: a producer code in a 403 is believed only with its headers. */
static void producer_403(void **state) {
    runnel_answer a = answer(err("PRODUCER_EPOCH_CLOSED"), "HTTP/1.1 403 Forbidden",
                             "Producer-Epoch: 4", "Producer-Outcome: epoch-closed;by=claim",
                             "Producer-Closed-Epoch: 3", "Producer-Closed-Seq: 45", END_LINES);
    assert_true(a.producer_answer);
    assert_string_equal(a.error_code, "PRODUCER_EPOCH_CLOSED");
    assert_int_equal(a.closed_seq, 45);
    assert_int_equal(runnel_classify(RUNNEL_WRITE_PRODUCER, &a), RUNNEL_REFUSED);
    /* the same body without the headers: an access layer's 403 */
    a = answer(err("PRODUCER_EPOCH_CLOSED"), "HTTP/1.1 403 Forbidden", END_LINES);
    assert_false(a.producer_answer);
    assert_string_equal(a.error_code, "");
    assert_int_equal(runnel_classify(RUNNEL_WRITE_PRODUCER, &a), RUNNEL_REFUSED);
    /* epoch-closed without Producer-Closed-Seq is not a producer answer */
    a = answer(err("PRODUCER_EPOCH_CLOSED"), "HTTP/1.1 403 Forbidden", "Producer-Epoch: 4",
               "Producer-Outcome: epoch-closed;by=claim", END_LINES);
    assert_false(a.producer_answer);
    assert_string_equal(a.error_code, "");
    /* a code that does not match the outcome is not believed */
    a = answer(err("PRODUCER_KEY_CONFLICT"), "HTTP/1.1 403 Forbidden", "Producer-Epoch: 4",
               "Producer-Outcome: stale-epoch", END_LINES);
    assert_true(a.producer_answer);
    assert_string_equal(a.error_code, "");
    a = answer(err("FORBIDDEN"), "HTTP/1.1 403 Forbidden", END_LINES);
    assert_false(a.producer_answer);
    assert_string_equal(a.error_code, "FORBIDDEN");
}

static void answer_parsing(void **state) {
    /* a 100 Continue block is forgotten when the final one starts */
    runnel_answer a = answer(
        NULL, "HTTP/1.1 100 Continue", "Stream-Next-Offset: 0_1", "HTTP/1.1 204 No Content",
        "Stream-Closed: TRUE", "Stream-Up-To-Date: yes", "Producer-Epoch: 01", "Retry-After: 3",
        "Ursula-Protocol: 2", "Location: /elsewhere", "x-ursula-raft-term: 7", END_LINES);
    assert_int_equal(a.status, 204);
    assert_string_equal(a.next_offset, "");
    assert_true(a.closed);
    assert_false(a.up_to_date); /* only "true" counts */
    assert_int_equal(a.producer_epoch, -1);
    assert_string_equal(a.malformed, "Producer-Epoch");
    assert_int_equal(a.retry_after_s, 3);
    assert_int_equal(a.protocol, 2);
    assert_string_equal(a.location, "http://127.0.0.1:9/elsewhere");
    assert_int_equal(a.raft_term, 7);
    char long_offset[400] = "Stream-Next-Offset: ";
    memset(long_offset + 20, '7', 300);
    long_offset[320] = 0;
    a = answer(NULL, "HTTP/1.1 204 No Content", long_offset, END_LINES);
    assert_string_equal(a.next_offset, "");
    assert_string_equal(a.malformed, "Stream-Next-Offset");
    a = answer("not json", "HTTP/1.1 500 Internal", END_LINES);
    assert_string_equal(a.error_code, "");
    a = answer("{\"error\":{\"code\":\"lower_case\"}}", "HTTP/1.1 400 Bad", END_LINES);
    assert_string_equal(a.error_code, ""); /* not a code's form */
    a = answer("{\"error\":{\"code\":\"NO_MESSAGE\"}}", "HTTP/1.1 400 Bad", END_LINES);
    assert_string_equal(a.error_code, "NO_MESSAGE");
}

/* multipart: parts come out whole however the input is split */
typedef struct {
    char out[4096];
    size_t len;
    unsigned parts;
    char types[8][64];
} mp_sink;

static int mp_begin(void *arg, unsigned i, const char *type) {
    mp_sink *s = arg;
    snprintf(s->types[i % 8], 64, "%s", type);
    s->len += (size_t)snprintf(s->out + s->len, sizeof s->out - s->len, "<%u>", i);
    return 0;
}
static int mp_data(void *arg, unsigned i, const void *d, size_t n) {
    mp_sink *s = arg;
    memcpy(s->out + s->len, d, n);
    s->len += n;
    return 0;
}
static int mp_end(void *arg, unsigned i) {
    mp_sink *s = arg;
    s->parts++;
    s->len += (size_t)snprintf(s->out + s->len, sizeof s->out - s->len, "</%u>", i);
    return 0;
}

static void multipart(void **state) {
    const char *body =
        "preamble\r\n--b-1\r\nContent-Type: application/x-snap\r\n\r\nSNAP\r\n--b-1\r\n"
        "content-type: application/json\r\n\r\n{\"a\":1}\n\r\n--b-1\r\n\r\n--b-1 is "
        "not a boundary here\r\n--b-1--\r\nepilogue";
    const char *want = "<0>SNAP</0><1>{\"a\":1}\n</1><2>--b-1 is not a boundary here</2>";
    rnc_multipart *p = malloc(sizeof *p);
    for (size_t step = 1; step <= strlen(body); step++) {
        mp_sink s = {0};
        runnel_bootstrap_handler h = {mp_begin, mp_data, mp_end, &s};
        assert_int_equal(rnc_multipart_init(p, "multipart/mixed; boundary=\"b-1\"", &h), 0);
        for (size_t i = 0; i < strlen(body); i += step) {
            size_t n = strlen(body) - i < step ? strlen(body) - i : step;
            assert_int_equal(rnc_multipart_feed(p, body + i, n), 0);
        }
        assert_int_equal(rnc_multipart_finish(p), 0);
        s.out[s.len] = 0;
        assert_string_equal(s.out, want);
        assert_int_equal(s.parts, 3);
        assert_string_equal(s.types[0], "application/x-snap");
        assert_string_equal(s.types[1], "application/json");
        assert_string_equal(s.types[2], "text/plain"); /* RFC 2046's default */
    }
    mp_sink s = {0};
    runnel_bootstrap_handler h = {mp_begin, mp_data, mp_end, &s};
    assert_int_equal(rnc_multipart_init(p, "multipart/mixed; boundary=b-1", &h), 0);
    assert_int_equal(rnc_multipart_feed(p, body, 60), 0);
    assert_int_equal(rnc_multipart_finish(p), -1); /* cut before the closing delimiter */
    assert_int_equal(rnc_multipart_init(p, "text/plain", &h), -1);
    assert_int_equal(rnc_multipart_init(p, "multipart/mixed", &h), -1);
    free(p);
}

typedef struct {
    char log[2048];
    size_t len;
} sse_log;

static int sse_event(void *arg, const char *type, const char *data, size_t n) {
    sse_log *l = arg;
    l->len +=
        (size_t)snprintf(l->log + l->len, sizeof l->log - l->len, "[%s|%.*s]", type, (int)n, data);
    return 0;
}

static void sse(void **state) {
    const char *in = ": comment\nevent: data\ndata:line one\ndata: line two\r\n\r\nevent:control\r"
                     "data:{\"x\":1}\r\rdata\ndata:\n\n";
    const char *want = "[data|line one\nline two][control|{\"x\":1}][message|\n]";
    for (size_t step = 1; step <= strlen(in); step++) {
        sse_log l = {0};
        rnc_sse p;
        rnc_sse_init(&p, 1024, sse_event, &l);
        for (size_t i = 0; i < strlen(in); i += step)
            assert_int_equal(
                rnc_sse_feed(&p, in + i, strlen(in) - i < step ? strlen(in) - i : step), 0);
        assert_string_equal(l.log, want);
        rnc_sse_free(&p);
    }
    sse_log l = {0};
    rnc_sse p;
    rnc_sse_init(&p, 16, sse_event, &l);
    assert_int_equal(rnc_sse_feed(&p, "data: 0123456789abcdefghij\n\n", 28), -1);
    assert_true(p.failed);
    rnc_sse_free(&p);
}

static void base64(void **state) {
    char a[] = "AQID\nBAUG\r\nBwgJCg==";
    assert_int_equal(rn_base64_decode(a, strlen(a), (uint8_t *)a), 10);
    assert_memory_equal(a, "\1\2\3\4\5\6\7\10\11\12", 10);
    char b[] = "aGk=";
    assert_int_equal(rn_base64_decode(b, 4, (uint8_t *)b), 2);
    char c[] = "aGk";
    assert_int_equal(rn_base64_decode(c, 3, (uint8_t *)c), -1);
    char d[] = "aG=k";
    assert_int_equal(rn_base64_decode(d, 4, (uint8_t *)d), -1);
    char e[] = "";
    assert_int_equal(rn_base64_decode(e, 0, (uint8_t *)e), 0);
}

/* The cluster-aware mode's leader cache, from synthetic answers. */
static void routes(void **state) {
    runnel_client_options o = {.base_url = "http://127.0.0.1:9", .cluster_aware = 1};
    runnel_client *c = runnel_client_new(&o);
    rnc_request req;
    const char *url = "http://127.0.0.1:9/orders/eu-1";
    runnel_answer r =
        answer(NULL, "HTTP/1.1 307 Temporary Redirect", "Location: http://127.0.0.2:7/orders/eu-1",
               "x-ursula-raft-leader-id: 2", "x-ursula-raft-group: g1", "x-ursula-raft-term: 5",
               END_LINES);
    rnc_route_learn(c, url, &r);
    rnc_request_init(&req, c, "POST", "/orders/eu-1", "?offset=1");
    /* the mode asks followers for the 307 it learns from, not for forwarding */
    assert_non_null(req.headers.list);
    assert_string_equal(req.headers.list->data, "Runnel-No-Forward: client");
    rnc_route_apply(c, &req);
    assert_string_equal(req.url, "http://127.0.0.2:7/orders/eu-1?offset=1");
    /* an older term's hint is ignored */
    r = answer(NULL, "HTTP/1.1 307 Temporary Redirect", "Location: http://127.0.0.3:7/orders/eu-1",
               "x-ursula-raft-leader-id: 3", "x-ursula-raft-group: g1", "x-ursula-raft-term: 4",
               END_LINES);
    rnc_route_learn(c, url, &r);
    rnc_request_free(&req);
    rnc_request_init(&req, c, "POST", "/orders/eu-1", NULL);
    rnc_route_apply(c, &req);
    assert_string_equal(req.url, "http://127.0.0.2:7/orders/eu-1");
    /* a redirect that names only the group teaches no leader */
    r = answer(NULL, "HTTP/1.1 307 Temporary Redirect", "Location: http://127.0.0.4:7/other",
               "x-ursula-raft-group: g2", END_LINES);
    rnc_route_learn(c, "http://127.0.0.1:9/other", &r);
    rnc_request_free(&req);
    rnc_request_init(&req, c, "POST", "/other", NULL);
    rnc_route_apply(c, &req);
    assert_string_equal(req.url, "http://127.0.0.1:9/other");
    /* NO_LEADER for the group forgets its leader */
    r = answer(err("NO_LEADER"), "HTTP/1.1 503 Service Unavailable", "x-ursula-raft-group: g1",
               "Retry-After: 1", END_LINES);
    assert_int_equal(runnel_classify(RUNNEL_WRITE_APPEND, &r), RUNNEL_REFUSED);
    rnc_route_learn(c, "http://127.0.0.2:7/orders/eu-1", &r);
    rnc_request_free(&req);
    rnc_request_init(&req, c, "POST", "/orders/eu-1", NULL);
    rnc_route_apply(c, &req);
    assert_string_equal(req.url, "http://127.0.0.1:9/orders/eu-1");
    /* a newer term teaches again; a leader that does not answer is forgotten */
    r = answer(NULL, "HTTP/1.1 308 Permanent Redirect", "Location: http://127.0.0.5:7/orders/eu-1",
               "x-ursula-raft-leader-id: 5", "x-ursula-raft-group: g1", "x-ursula-raft-term: 6",
               END_LINES);
    rnc_route_learn(c, url, &r);
    rnc_request_free(&req);
    rnc_request_init(&req, c, "POST", "/orders/eu-1", NULL);
    rnc_route_apply(c, &req);
    assert_string_equal(req.url, "http://127.0.0.5:7/orders/eu-1");
    runnel_answer none;
    memset(&none, 0, sizeof none);
    rnc_answer_reset(&none);
    rnc_route_learn(c, "http://127.0.0.5:7/orders/eu-1", &none);
    rnc_request_free(&req);
    rnc_request_init(&req, c, "POST", "/orders/eu-1", NULL);
    rnc_route_apply(c, &req);
    assert_string_equal(req.url, "http://127.0.0.1:9/orders/eu-1");
    rnc_request_free(&req);
    runnel_client_free(c);
}

static void stream_urls(void **state) {
    runnel_client_options o = {.base_url = "http://127.0.0.1:4437/"};
    runnel_client *c = runnel_client_new(&o);
    char u[256];
    assert_int_equal(runnel_stream_url(c, "chat/room 1", 0, u, sizeof u), 0);
    assert_string_equal(u, "http://127.0.0.1:4437/v1/stream/chat/room%201");
    assert_int_equal(runnel_stream_url(c, "orders/eu-1", 1, u, sizeof u), 0);
    assert_string_equal(u, "http://127.0.0.1:4437/orders/eu-1");
    assert_int_equal(runnel_stream_url(c, "a/b/c", 1, u, sizeof u), -1);
    assert_int_equal(runnel_stream_url(c, "a//b", 0, u, sizeof u), -1);
    assert_int_equal(runnel_url_encode("0_1/?&=", u, sizeof u), 0);
    assert_string_equal(u, "0_1%2F%3F%26%3D");
    runnel_client_free(c);
    o.base_url = "ftp://x";
    assert_null(runnel_client_new(&o));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(synthetic_codes), cmocka_unit_test(typed_answers),
        cmocka_unit_test(producer_403),    cmocka_unit_test(answer_parsing),
        cmocka_unit_test(multipart),       cmocka_unit_test(sse),
        cmocka_unit_test(base64),          cmocka_unit_test(routes),
        cmocka_unit_test(stream_urls),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
