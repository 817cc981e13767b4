/*
 * test_outcomes.c — the classification table test: every answer
 * docs/WRITE_OUTCOMES.md lists that one Runnel node can be driven to give
 * is provoked on a real server (with --test-hooks for injected log and
 * disk failures, and servers with small limits for the answers before any
 * route), and runnel_classify must put it in the outcome the page names.
 * The answers a single node cannot give (redirects, NO_LEADER, an
 * intermediary's codes, GROUP_RESTARTING mid-recovery, INTERNAL, a cold
 * store failure, limits of 8192 parts or 1 GiB) are in test_classify.c as
 * synthetic answers.
 */
#define _GNU_SOURCE /* memmem */
#include "support.h"
#include "util/blake3.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

static int rows, failures;

/* Checks one row: status, code and outcome. */
static void row(runnel_write_kind k, const runnel_answer *a, int status, const char *code,
                runnel_outcome want, const char *what) {
    runnel_outcome got = runnel_classify(k, a);
    int ok = a->status == status && strcmp(a->error_code, code ? code : "") == 0 && got == want;
    rows++;
    printf("  %-4s %-66s %3d %-34s %s\n", ok ? "ok" : "FAIL", what, a->status, a->error_code,
           runnel_outcome_name(got));
    if (!ok) {
        failures++;
        printf("       expected %d %s %s (%s)\n", status, code ? code : "",
               runnel_outcome_name(want), a->error_message);
    }
}

/* Header lines built with printf formats. */
typedef struct {
    const char *h[20];
    char buf[20][400];
    int n;
} hdrs;

static void H(hdrs *h, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(h->buf[h->n], sizeof h->buf[0], fmt, ap);
    va_end(ap);
    h->h[h->n] = h->buf[h->n];
    h->h[++h->n] = NULL;
}

static void digest_of(const char *body, char out[65]) {
    uint8_t d[32];
    rn_blake3_hash(body, strlen(body), d);
    rn_blake3_hex(d, out);
}

/* A producer write. */
typedef struct {
    const char *id;
    unsigned epoch, seq;
    const char *body;
    const char *type;   /* NULL: text/plain; "" : none */
    const char *digest; /* NULL: the body's */
    const char *inc;
    const char *extra;
    int close;
} pw_args;

static int pw(runnel_client *c, const char *path, pw_args w, runnel_answer *a) {
    hdrs h = {0};
    char d[65];
    if (!w.type)
        H(&h, "Content-Type: text/plain");
    else if (w.type[0])
        H(&h, "Content-Type: %s", w.type);
    H(&h, "Producer-Id: %s", w.id ? w.id : "p");
    H(&h, "Producer-Epoch: %u", w.epoch);
    H(&h, "Producer-Seq: %u", w.seq);
    if (w.digest) {
        if (w.digest[0])
            H(&h, "Producer-Digest: %s", w.digest);
    } else {
        digest_of(w.body ? w.body : "", d);
        H(&h, "Producer-Digest: %s", d);
    }
    if (w.inc)
        H(&h, "Stream-Incarnation: %s", w.inc);
    if (w.close)
        H(&h, "Stream-Closed: true");
    if (w.extra)
        H(&h, "%s", w.extra);
    const char *b = w.body ? w.body : "";
    return ts_req(c, "POST", path, h.h, b, strlen(b), a);
}

/* A plain append (type "" sends none). */
static int ap(runnel_client *c, const char *path, const char *type, const char *body,
              const char *extra, runnel_answer *a) {
    hdrs h = {0};
    if (type[0])
        H(&h, "Content-Type: %s", type);
    if (extra)
        H(&h, "%s", extra);
    return ts_req(c, "POST", path, h.h, body, strlen(body), a);
}

static const char *v1(const char *name) {
    static char buf[4][256];
    static int i;
    char *out = buf[i++ % 4];
    snprintf(out, 256, "/v1/stream/outcomes/%s", name);
    return out;
}

static void fresh(char *path, const char *type, char *inc) {
    snprintf(path, 256, "%s", v1(ts_name("s")));
    ts_create(C, path, type, inc);
}

static void hook(const char *what) {
    assert_int_equal(ts_hook(C, what), 204);
}

static int teardown(void **state) {
    printf("%d rows checked, %d failed\n", rows, failures);
    return ts_group_teardown(state);
}

static void producer_rows(void **state) {
    char p[256], inc[32], other_inc[32], other[256];
    runnel_answer a;
    int before = failures;
    fresh(p, "text/plain", inc);
    fresh(other, "text/plain", other_inc);

    ts_req(C, "POST", p, (const char *[]){"Content-Type: text/plain", "Producer-Id: p", NULL}, "x",
           1, &a);
    row(RUNNEL_WRITE_PRODUCER, &a, 400, "INVALID_PRODUCER", RUNNEL_REFUSED,
        "producer: partial producer headers");
    pw(C, p, (pw_args){.epoch = 0, .seq = 0, .body = "x", .inc = "1"}, &a);
    row(RUNNEL_WRITE_PRODUCER, &a, 400, "INVALID_HEADER", RUNNEL_REFUSED,
        "producer: malformed Stream-Incarnation");
    pw(C, v1("missing"), (pw_args){.body = "x"}, &a);
    row(RUNNEL_WRITE_PRODUCER, &a, 404, "STREAM_NOT_FOUND", RUNNEL_REFUSED,
        "producer: stream not found");
    pw(C, "/nobucket/x", (pw_args){.body = "x"}, &a);
    row(RUNNEL_WRITE_PRODUCER, &a, 404, "BUCKET_NOT_FOUND", RUNNEL_REFUSED,
        "producer: bucket surface, empty bucket");
    pw(C, p, (pw_args){.body = "x", .inc = other_inc}, &a);
    row(RUNNEL_WRITE_PRODUCER, &a, 412, "INCARNATION_MISMATCH", RUNNEL_REFUSED,
        "producer: another incarnation");

    pw(C, p, (pw_args){.epoch = 0, .seq = 0, .body = "a"}, &a);
    row(RUNNEL_WRITE_PRODUCER, &a, 200, NULL, RUNNEL_APPLIED, "producer: a body applied (200)");
    pw(C, p, (pw_args){.epoch = 0, .seq = 0, .body = "a"}, &a);
    row(RUNNEL_WRITE_PRODUCER, &a, 204, NULL, RUNNEL_REPEAT,
        "producer: repeat of the newest write");
    pw(C, p, (pw_args){.epoch = 0, .seq = 1, .body = "b"}, &a);
    pw(C, p, (pw_args){.epoch = 0, .seq = 0, .body = "a"}, &a);
    row(RUNNEL_WRITE_PRODUCER, &a, 204, NULL, RUNNEL_REPEAT,
        "producer: repeat of an older write (receipt-evicted)");
    assert_string_equal(a.producer_outcome, "receipt-evicted");
    pw(C, p, (pw_args){.epoch = 0, .seq = 1, .body = "B"}, &a);
    row(RUNNEL_WRITE_PRODUCER, &a, 403, "PRODUCER_KEY_CONFLICT", RUNNEL_REFUSED,
        "producer: key-conflict");
    pw(C, p, (pw_args){.epoch = 1, .seq = 0, .body = "c"}, &a); /* claim of epoch 1 */
    pw(C, p, (pw_args){.epoch = 0, .seq = 2, .body = "d"}, &a);
    row(RUNNEL_WRITE_PRODUCER, &a, 403, "PRODUCER_EPOCH_CLOSED", RUNNEL_REFUSED,
        "producer: epoch-closed;by=claim");
    assert_string_equal(a.producer_outcome, "epoch-closed;by=claim");
    assert_int_equal(a.closed_seq, 1);
    pw(C, p, (pw_args){.epoch = 2, .seq = 0, .body = "e"}, &a);
    pw(C, p, (pw_args){.epoch = 0, .seq = 3, .body = "f"}, &a);
    row(RUNNEL_WRITE_PRODUCER, &a, 403, "PRODUCER_EPOCH_STALE", RUNNEL_REFUSED,
        "producer: stale-epoch");
    pw(C, p, (pw_args){.epoch = 3, .seq = 1, .body = "g"}, &a);
    row(RUNNEL_WRITE_PRODUCER, &a, 400, "INVALID_PRODUCER", RUNNEL_REFUSED,
        "producer: seq > 0 of a new epoch (Producer-Expected-Seq: 0)");
    assert_int_equal(a.expected_seq, 0);
    pw(C, p, (pw_args){.epoch = 2, .seq = 5, .body = "h"}, &a);
    row(RUNNEL_WRITE_PRODUCER, &a, 409, "PRODUCER_SEQ_CONFLICT", RUNNEL_REFUSED,
        "producer: a gap (Producer-Expected-Seq)");
    assert_int_equal(a.expected_seq, 1);
    pw(C, p, (pw_args){.epoch = 2, .seq = 1, .body = "i", .type = "application/json"}, &a);
    row(RUNNEL_WRITE_PRODUCER, &a, 409, "CONTENT_TYPE_MISMATCH", RUNNEL_REFUSED,
        "producer: content type mismatch");
    pw(C, p, (pw_args){.epoch = 2, .seq = 1, .body = "i", .type = ""}, &a);
    row(RUNNEL_WRITE_PRODUCER, &a, 400, "MISSING_CONTENT_TYPE", RUNNEL_REFUSED,
        "producer: missing Content-Type");
    pw(C, p, (pw_args){.epoch = 2, .seq = 1, .body = ""}, &a);
    row(RUNNEL_WRITE_PRODUCER, &a, 400, "EMPTY_APPEND", RUNNEL_REFUSED, "producer: empty append");
    pw(C, p, (pw_args){.epoch = 2, .seq = 1, .body = "i", .digest = "00"}, &a);
    row(RUNNEL_WRITE_PRODUCER, &a, 400, "INVALID_PRODUCER", RUNNEL_REFUSED,
        "producer: malformed Producer-Digest");
    char zero[65];
    memset(zero, '0', 64);
    zero[64] = 0;
    pw(C, p, (pw_args){.epoch = 2, .seq = 1, .body = "i", .digest = zero}, &a);
    row(RUNNEL_WRITE_PRODUCER, &a, 400, "PRODUCER_DIGEST_MISMATCH", RUNNEL_REFUSED,
        "producer: digest mismatch (checked last)");
    pw(C, p, (pw_args){.epoch = 2, .seq = 1, .body = "j", .extra = "Stream-Seq: b"}, &a);
    pw(C, p, (pw_args){.epoch = 2, .seq = 2, .body = "k", .extra = "Stream-Seq: a"}, &a);
    row(RUNNEL_WRITE_PRODUCER, &a, 409, "STREAM_SEQ_CONFLICT", RUNNEL_REFUSED,
        "producer: Stream-Seq not above the last");
    assert_string_equal(a.last_seq, "b");

    hook("fail?point=log-reserve&n=1&errno=ENOSPC");
    pw(C, p, (pw_args){.epoch = 2, .seq = 2, .body = "l"}, &a);
    row(RUNNEL_WRITE_PRODUCER, &a, 503, "WAL_DISK_PRESSURE", RUNNEL_REFUSED,
        "producer: no space to log (WAL_DISK_PRESSURE)");
    hook("fail-syncs?n=1");
    pw(C, p, (pw_args){.epoch = 2, .seq = 2, .body = "l"}, &a);
    row(RUNNEL_WRITE_PRODUCER, &a, 503, "OUTCOME_UNKNOWN", RUNNEL_UNKNOWN,
        "producer: the log sync failed (OUTCOME_UNKNOWN)");
    pw(C, p, (pw_args){.epoch = 2, .seq = 2, .body = "l"}, &a);
    assert_true(a.status == 200 || a.status == 204); /* the repeat settles it */

    pw(C, p, (pw_args){.epoch = 2, .seq = 3, .body = "", .type = "", .close = 1}, &a);
    row(RUNNEL_WRITE_PRODUCER, &a, 204, NULL, RUNNEL_REPEAT,
        "producer: close-only applied now (204 reads as a repeat)");
    assert_true(a.closed);
    pw(C, p, (pw_args){.epoch = 2, .seq = 4, .body = "m"}, &a);
    row(RUNNEL_WRITE_PRODUCER, &a, 409, "STREAM_CLOSED", RUNNEL_REFUSED,
        "producer: the stream is closed");

    char j[256];
    fresh(j, "application/json", NULL);
    pw(C, j, (pw_args){.body = "{bad", .type = "application/json"}, &a);
    row(RUNNEL_WRITE_PRODUCER, &a, 400, "INVALID_REQUEST", RUNNEL_REFUSED,
        "producer: malformed JSON");

    /* a soft-deleted stream (a fork still reads it) answers 410 */
    char src[256], fork[256];
    fresh(src, "text/plain", NULL);
    snprintf(fork, sizeof fork, "%s", v1(ts_name("fork")));
    hdrs h = {0};
    H(&h, "Content-Type: text/plain");
    H(&h, "Stream-Forked-From: %s", src);
    assert_int_equal(ts_req(C, "PUT", fork, h.h, NULL, 0, &a), 201);
    assert_int_equal(ts_req(C, "DELETE", src, NULL, NULL, 0, &a), 204);
    pw(C, src, (pw_args){.body = "x"}, &a);
    row(RUNNEL_WRITE_PRODUCER, &a, 410, "STREAM_GONE", RUNNEL_REFUSED,
        "producer: soft-deleted stream");

    /* a history rewrite closes the current epoch above its surviving seq */
    char r[256], rinc[32], key[300];
    fresh(r, "text/plain", rinc);
    pw(C, r, (pw_args){.id = "h", .epoch = 0, .seq = 0, .body = "a"}, &a);
    char keep[RUNNEL_VALUE_MAX];
    snprintf(keep, sizeof keep, "%s", a.next_offset);
    pw(C, r, (pw_args){.id = "h", .epoch = 0, .seq = 1, .body = "b"}, &a);
    snprintf(key, sizeof key, "rewrite/%s?keep=%s", r + strlen("/v1/stream/"), keep);
    char *slash = strchr(key + 8, '/'); /* the key is one path segment: encode its slash */
    memmove(slash + 3, slash + 1, strlen(slash + 1) + 1);
    memcpy(slash, "%2F", 3);
    hook(key);
    pw(C, r, (pw_args){.id = "h", .epoch = 0, .seq = 2, .body = "c"}, &a);
    row(RUNNEL_WRITE_PRODUCER, &a, 403, "PRODUCER_EPOCH_CLOSED", RUNNEL_REFUSED,
        "producer: epoch-closed;by=history");
    assert_string_equal(a.producer_outcome, "epoch-closed;by=history");
    assert_int_equal(failures, before);
}

static void producer_limit_rows(void **state) {
    const char *cap[] = {"--producer-cap", "1", NULL};
    ts_server *s = ts_start(cap);
    runnel_client *c = ts_client(s);
    runnel_answer a;
    int before = failures;
    ts_create(c, "/v1/stream/cap", "text/plain", NULL);
    pw(c, "/v1/stream/cap", (pw_args){.id = "one", .body = "a"}, &a);
    assert_int_equal(a.status, 200);
    pw(c, "/v1/stream/cap", (pw_args){.id = "two", .body = "b"}, &a);
    row(RUNNEL_WRITE_PRODUCER, &a, 429, "PRODUCER_LIMIT", RUNNEL_REFUSED,
        "producer: a new producer past --producer-cap");
    assert_true(a.retry_after_s >= 0);
    runnel_client_free(c);
    assert_int_equal(ts_free(s), 0);

    const char *ttl[] = {"--producer-ttl-ms", "500", "--expiry-sweep-ms", "100", NULL};
    s = ts_start(ttl);
    c = ts_client(s);
    char inc[32];
    ts_create(c, "/v1/stream/ttl", "text/plain", inc);
    pw(c, "/v1/stream/ttl", (pw_args){.id = "old", .epoch = 3, .body = "a"}, &a);
    assert_int_equal(a.status, 200);
    ts_sleep_ms(1200); /* the idle state is discarded: the floor rises to 3 */
    pw(c, "/v1/stream/ttl", (pw_args){.id = "new", .epoch = 2, .body = "b", .inc = inc}, &a);
    row(RUNNEL_WRITE_PRODUCER, &a, 403, "PRODUCER_EXPIRED", RUNNEL_REFUSED,
        "producer: producer-expired (at or below the epoch floor)");
    runnel_client_free(c);
    assert_int_equal(ts_free(s), 0);
    assert_int_equal(failures, before);
}

static void plain_rows(void **state) {
    char p[256], inc[32], other_inc[32], other[256];
    runnel_answer a;
    int before = failures;
    fresh(p, "text/plain", inc);
    fresh(other, "text/plain", other_inc);
    ap(C, p, "text/plain", "", NULL, &a);
    row(RUNNEL_WRITE_APPEND, &a, 400, "EMPTY_APPEND", RUNNEL_REFUSED, "append: empty body");
    ap(C, p, "", "x", NULL, &a);
    row(RUNNEL_WRITE_APPEND, &a, 400, "MISSING_CONTENT_TYPE", RUNNEL_REFUSED,
        "append: missing Content-Type");
    ap(C, p, "text/plain", "x", "Stream-Incarnation: 12", &a);
    row(RUNNEL_WRITE_APPEND, &a, 400, "INVALID_HEADER", RUNNEL_REFUSED,
        "append: malformed Stream-Incarnation");
    ap(C, v1("missing"), "text/plain", "x", NULL, &a);
    row(RUNNEL_WRITE_APPEND, &a, 404, "STREAM_NOT_FOUND", RUNNEL_REFUSED, "append: not found");
    char ih[64];
    snprintf(ih, sizeof ih, "Stream-Incarnation: %s", other_inc);
    ap(C, p, "text/plain", "x", ih, &a);
    row(RUNNEL_WRITE_APPEND, &a, 412, "INCARNATION_MISMATCH", RUNNEL_REFUSED,
        "append: another incarnation");
    assert_string_equal(a.incarnation, inc);
    ap(C, p, "application/json", "[1]", NULL, &a);
    row(RUNNEL_WRITE_APPEND, &a, 409, "CONTENT_TYPE_MISMATCH", RUNNEL_REFUSED,
        "append: content type mismatch");
    ap(C, p, "text/plain", "x", "Stream-Seq: 5", &a);
    row(RUNNEL_WRITE_APPEND, &a, 204, NULL, RUNNEL_APPLIED, "append: applied (204)");
    ap(C, p, "text/plain", "x", "Stream-Seq: 4", &a);
    row(RUNNEL_WRITE_APPEND, &a, 409, "STREAM_SEQ_CONFLICT", RUNNEL_REFUSED,
        "append: Stream-Seq not above the last");
    hook("fail?point=log-reserve&n=1&errno=ENOSPC");
    ap(C, p, "text/plain", "y", NULL, &a);
    row(RUNNEL_WRITE_APPEND, &a, 503, "WAL_DISK_PRESSURE", RUNNEL_REFUSED,
        "append: WAL_DISK_PRESSURE");
    hook("fail-syncs?n=1");
    ap(C, p, "text/plain", "y", NULL, &a);
    row(RUNNEL_WRITE_APPEND, &a, 503, "OUTCOME_UNKNOWN", RUNNEL_UNKNOWN, "append: OUTCOME_UNKNOWN");
    ap(C, p, "", "", "Stream-Closed: true", &a);
    row(RUNNEL_WRITE_APPEND, &a, 204, NULL, RUNNEL_APPLIED, "close: applied");
    ap(C, p, "", "", "Stream-Closed: true", &a);
    row(RUNNEL_WRITE_APPEND, &a, 204, NULL, RUNNEL_APPLIED,
        "close: close-only on a closed stream (idempotent)");
    ap(C, p, "text/plain", "z", NULL, &a);
    row(RUNNEL_WRITE_APPEND, &a, 409, "STREAM_CLOSED", RUNNEL_REFUSED, "append: stream closed");
    assert_true(a.closed && a.next_offset[0]);
    char j[256];
    fresh(j, "application/json", NULL);
    ap(C, j, "application/json", "[1,", NULL, &a);
    row(RUNNEL_WRITE_APPEND, &a, 400, "INVALID_REQUEST", RUNNEL_REFUSED, "append: malformed JSON");
    ap(C, j, "application/json", "[]", NULL, &a);
    row(RUNNEL_WRITE_APPEND, &a, 400, "EMPTY_APPEND", RUNNEL_REFUSED, "append: JSON []");
    assert_int_equal(failures, before);
}

static void create_delete_rows(void **state) {
    runnel_answer a;
    int before = failures;
    const char *name = v1(ts_name("c"));
    char path[256];
    snprintf(path, sizeof path, "%s", name);
    const char *text[] = {"Content-Type: text/plain", NULL};
    ts_req(C, "PUT", path, text, NULL, 0, &a);
    row(RUNNEL_WRITE_CREATE, &a, 201, NULL, RUNNEL_APPLIED, "create: new (201)");
    ts_req(C, "PUT", path, text, NULL, 0, &a);
    row(RUNNEL_WRITE_CREATE, &a, 200, NULL, RUNNEL_APPLIED, "create: same configuration (200)");
    ts_req(C, "PUT", path, (const char *[]){"Content-Type: application/json", NULL}, NULL, 0, &a);
    row(RUNNEL_WRITE_CREATE, &a, 409, "STREAM_ALREADY_EXISTS_CONFLICT", RUNNEL_REFUSED,
        "create: another configuration");
    ts_req(C, "PUT", v1(ts_name("c")),
           (const char *[]){"Content-Type: text/plain", "Producer-Id: p", "Producer-Epoch: 0",
                            "Producer-Seq: 0", NULL},
           NULL, 0, &a);
    row(RUNNEL_WRITE_CREATE, &a, 400, "INVALID_PRODUCER", RUNNEL_REFUSED,
        "create: producer headers");
    ts_req(C, "PUT", v1(ts_name("c")),
           (const char *[]){"Content-Type: text/plain", "Stream-TTL: 01", NULL}, NULL, 0, &a);
    row(RUNNEL_WRITE_CREATE, &a, 400, "INVALID_HEADER", RUNNEL_REFUSED, "create: Stream-TTL: 01");
    ts_req(C, "PUT", v1(ts_name("c")), (const char *[]){"Content-Type: application/json", NULL},
           "{x", 2, &a);
    row(RUNNEL_WRITE_CREATE, &a, 400, "INVALID_REQUEST", RUNNEL_REFUSED, "create: malformed JSON");
    hdrs h = {0};
    H(&h, "Stream-Forked-From: %s", path);
    H(&h, "Stream-Fork-Offset: zzz");
    ts_req(C, "PUT", v1(ts_name("f")), h.h, NULL, 0, &a);
    row(RUNNEL_WRITE_CREATE, &a, 400, "INVALID_OFFSET", RUNNEL_REFUSED,
        "create: malformed Stream-Fork-Offset");
    ts_req(C, "PUT", v1(ts_name("f")),
           (const char *[]){"Stream-Forked-From: /v1/stream/outcomes/none", NULL}, NULL, 0, &a);
    row(RUNNEL_WRITE_CREATE, &a, 404, "STREAM_NOT_FOUND", RUNNEL_REFUSED,
        "create: fork source missing");
    h = (hdrs){0};
    H(&h, "Stream-Forked-From: %s", path);
    H(&h, "Content-Type: application/json");
    ts_req(C, "PUT", v1(ts_name("f")), h.h, NULL, 0, &a);
    row(RUNNEL_WRITE_CREATE, &a, 409, "CONTENT_TYPE_MISMATCH", RUNNEL_REFUSED,
        "create: fork with another content type");
    ts_req(
        C, "PUT", v1(ts_name("c")),
        (const char *[]){"Content-Type: text/plain", "Stream-Incarnation: 4503599627370497", NULL},
        NULL, 0, &a);
    row(RUNNEL_WRITE_CREATE, &a, 412, "INCARNATION_MISMATCH", RUNNEL_REFUSED,
        "create: with Stream-Incarnation, creates nothing");
    hook("fail?point=log-reserve&n=1&errno=ENOSPC");
    ts_req(C, "PUT", v1(ts_name("c")), text, NULL, 0, &a);
    row(RUNNEL_WRITE_CREATE, &a, 503, "WAL_DISK_PRESSURE", RUNNEL_REFUSED,
        "create: WAL_DISK_PRESSURE");
    hook("fail-syncs?n=1");
    ts_req(C, "PUT", v1(ts_name("c")), text, NULL, 0, &a);
    row(RUNNEL_WRITE_CREATE, &a, 503, "OUTCOME_UNKNOWN", RUNNEL_UNKNOWN, "create: OUTCOME_UNKNOWN");

    /* a fork of a JSON stream whose boundary byte cannot be read */
    char j[256];
    fresh(j, "application/json", NULL);
    ap(C, j, "application/json", "{\"m\":1}", NULL, &a);
    char mid[RUNNEL_VALUE_MAX];
    snprintf(mid, sizeof mid, "%s", a.next_offset);
    ap(C, j, "application/json", "{\"m\":2}", NULL, &a);
    h = (hdrs){0};
    H(&h, "Stream-Forked-From: %s", j);
    H(&h, "Stream-Fork-Offset: %s", mid);
    H(&h, "Content-Type: application/json");
    hook("fail?point=boundary-read&n=1");
    ts_req(C, "PUT", v1(ts_name("f")), h.h, NULL, 0, &a);
    row(RUNNEL_WRITE_CREATE, &a, 503, "JSON_BOUNDARY_UNVERIFIED", RUNNEL_REFUSED,
        "create: fork at an unverifiable JSON boundary");

    /* deletes */
    char d[256], dinc[32], oinc[32], o[256];
    fresh(d, "text/plain", dinc);
    fresh(o, "text/plain", oinc);
    hdrs ih = {0};
    H(&ih, "Stream-Incarnation: %s", oinc);
    ts_req(C, "DELETE", d, ih.h, NULL, 0, &a);
    row(RUNNEL_WRITE_DELETE, &a, 412, "INCARNATION_MISMATCH", RUNNEL_REFUSED,
        "delete: another incarnation");
    hook("fail-syncs?n=1");
    ts_req(C, "DELETE", d, NULL, NULL, 0, &a);
    row(RUNNEL_WRITE_DELETE, &a, 503, "OUTCOME_UNKNOWN", RUNNEL_UNKNOWN, "delete: OUTCOME_UNKNOWN");
    ts_req(C, "DELETE", d, NULL, NULL, 0, &a);
    row(RUNNEL_WRITE_DELETE, &a, 204, NULL, RUNNEL_APPLIED, "delete: applied (204)");
    ts_req(C, "DELETE", d, NULL, NULL, 0, &a);
    row(RUNNEL_WRITE_DELETE, &a, 404, "STREAM_NOT_FOUND", RUNNEL_REFUSED, "delete: not found");
    char src[256];
    fresh(src, "text/plain", NULL);
    h = (hdrs){0};
    H(&h, "Stream-Forked-From: %s", src);
    assert_int_equal(ts_req(C, "PUT", v1(ts_name("f")), h.h, NULL, 0, &a), 201);
    ts_req(C, "DELETE", src, NULL, NULL, 0, &a);
    ts_req(C, "DELETE", src, NULL, NULL, 0, &a);
    row(RUNNEL_WRITE_DELETE, &a, 410, "STREAM_GONE", RUNNEL_REFUSED, "delete: soft-deleted stream");
    h = (hdrs){0};
    H(&h, "Stream-Forked-From: %s", src);
    ts_req(C, "PUT", v1(ts_name("f")), h.h, NULL, 0, &a);
    row(RUNNEL_WRITE_CREATE, &a, 409, "FORK_SOURCE_GONE", RUNNEL_REFUSED,
        "create: fork of a soft-deleted stream");

    ts_req(C, "PUT", "/good-bucket", NULL, NULL, 0, &a);
    row(RUNNEL_WRITE_BUCKET_CREATE, &a, 201, NULL, RUNNEL_APPLIED, "bucket create: 201");
    ts_req(C, "PUT", "/Bad_Bucket", NULL, NULL, 0, &a);
    row(RUNNEL_WRITE_BUCKET_CREATE, &a, 400, "INVALID_BUCKET_ID", RUNNEL_REFUSED,
        "bucket create: invalid id");
    assert_int_equal(failures, before);
}

/* path + suffix + "/" + encoded offset */
static const char *sub(const char *path, const char *what, const char *offset, const char *tail) {
    static char buf[4][1024];
    static int i;
    char *out = buf[i++ % 4];
    char enc[3 * RUNNEL_VALUE_MAX];
    runnel_url_encode(offset, enc, sizeof enc);
    snprintf(out, 1024, "%s/%s/%s%s", path, what, enc, tail ? tail : "");
    return out;
}

static void snapshot_rows(void **state) {
    runnel_answer a;
    int before = failures;
    char p[256], inc[32], oinc[32], o[256];
    snprintf(p, sizeof p, "/snapb/%s", ts_name("s"));
    ts_create(C, p, "application/octet-stream", inc);
    fresh(o, "text/plain", oinc);
    ap(C, p, "application/octet-stream", "0123456789", NULL, &a);
    char tail[RUNNEL_VALUE_MAX];
    snprintf(tail, sizeof tail, "%s", a.next_offset);
    const char *oct[] = {"Content-Type: application/octet-stream", NULL};
    hdrs wrong = {0};
    H(&wrong, "Content-Type: application/octet-stream");
    H(&wrong, "Stream-Incarnation: %s", oinc);

    ts_req(C, "PUT", sub(p, "snapshot", tail, NULL), oct, "state", 5, &a);
    row(RUNNEL_WRITE_PUBLISH, &a, 204, NULL, RUNNEL_APPLIED, "publish: applied (204)");
    ts_req(C, "PUT", sub(p, "snapshot", tail, NULL), oct, "other", 5, &a);
    row(RUNNEL_WRITE_PUBLISH, &a, 409, "SNAPSHOT_CONFLICT", RUNNEL_REFUSED,
        "publish: another body at the latest's offset");
    ts_req(C, "PUT", sub(p, "snapshot", "zz", NULL), oct, "s", 1, &a);
    row(RUNNEL_WRITE_PUBLISH, &a, 400, "INVALID_OFFSET", RUNNEL_REFUSED, "publish: bad offset");
    ts_req(C, "PUT", sub("/snapb/none", "snapshot", tail, NULL), oct, "s", 1, &a);
    row(RUNNEL_WRITE_PUBLISH, &a, 404, "STREAM_NOT_FOUND", RUNNEL_REFUSED, "publish: not found");
    ts_req(C, "PUT", sub(p, "snapshot", tail, NULL), wrong.h, "state", 5, &a);
    row(RUNNEL_WRITE_PUBLISH, &a, 412, "INCARNATION_MISMATCH", RUNNEL_REFUSED,
        "publish: another incarnation");
    ap(C, p, "application/octet-stream", "abc", NULL, &a);
    char tail2[RUNNEL_VALUE_MAX];
    snprintf(tail2, sizeof tail2, "%s", a.next_offset);
    hook("fail-syncs?n=1");
    ts_req(C, "PUT", sub(p, "snapshot", tail2, NULL), oct, "s2", 2, &a);
    row(RUNNEL_WRITE_PUBLISH, &a, 503, "OUTCOME_UNKNOWN", RUNNEL_UNKNOWN,
        "publish: OUTCOME_UNKNOWN");
    hook("fail?point=log-reserve&n=1&errno=ENOSPC");
    ts_req(C, "PUT", sub(p, "snapshot", tail2, NULL), oct, "s2", 2, &a);
    row(RUNNEL_WRITE_PUBLISH, &a, 503, "WAL_DISK_PRESSURE", RUNNEL_REFUSED,
        "publish: WAL_DISK_PRESSURE");
    ts_req(C, "PUT", sub(p, "snapshot", tail2, NULL), oct, "s2", 2, &a);
    assert_int_equal(a.status, 204);

    /* retention */
    ts_req(C, "PUT", sub(p, "retention", tail, NULL), NULL, NULL, 0, &a);
    row(RUNNEL_WRITE_RETENTION, &a, 204, NULL, RUNNEL_APPLIED, "retention: applied (204)");
    ts_req(C, "PUT", sub(p, "retention", "zz", NULL), NULL, NULL, 0, &a);
    row(RUNNEL_WRITE_RETENTION, &a, 400, "INVALID_OFFSET", RUNNEL_REFUSED, "retention: bad offset");
    ap(C, p, "application/octet-stream", "def", NULL, &a);
    ts_req(C, "PUT", sub(p, "retention", a.next_offset, NULL), NULL, NULL, 0, &a);
    row(RUNNEL_WRITE_RETENTION, &a, 400, "INVALID_RETENTION", RUNNEL_REFUSED,
        "retention: above the latest snapshot");
    ts_req(C, "PUT", sub(p, "retention", tail, NULL), wrong.h, NULL, 0, &a);
    row(RUNNEL_WRITE_RETENTION, &a, 412, "INCARNATION_MISMATCH", RUNNEL_REFUSED,
        "retention: another incarnation");
    ts_req(C, "PUT", sub("/snapb/none", "retention", tail, NULL), NULL, NULL, 0, &a);
    row(RUNNEL_WRITE_RETENTION, &a, 404, "STREAM_NOT_FOUND", RUNNEL_REFUSED,
        "retention: not found");
    hook("fail-syncs?n=1");
    ts_req(C, "PUT", sub(p, "retention", tail2, NULL), NULL, NULL, 0, &a);
    row(RUNNEL_WRITE_RETENTION, &a, 503, "OUTCOME_UNKNOWN", RUNNEL_UNKNOWN,
        "retention: OUTCOME_UNKNOWN");
    /* a publish below the retained offset: the snapshot there is superseded */
    ts_req(C, "PUT", sub(p, "retention", tail2, NULL), NULL, NULL, 0, &a);
    assert_int_equal(a.status, 204);

    /* JSON boundaries */
    char j[256];
    snprintf(j, sizeof j, "/snapb/%s", ts_name("j"));
    ts_create(C, j, "application/json", NULL);
    ap(C, j, "application/json", "{\"m\":1}", NULL, &a);
    char mid[RUNNEL_VALUE_MAX];
    snprintf(mid, sizeof mid, "%s", a.next_offset);
    ap(C, j, "application/json", "{\"m\":2}", NULL, &a);
    char jtail[RUNNEL_VALUE_MAX];
    snprintf(jtail, sizeof jtail, "%s", a.next_offset);
    hook("fail?point=boundary-read&n=1");
    ts_req(C, "PUT", sub(j, "snapshot", mid, NULL), oct, "st", 2, &a);
    row(RUNNEL_WRITE_PUBLISH, &a, 503, "JSON_BOUNDARY_UNVERIFIED", RUNNEL_REFUSED,
        "publish: unverifiable JSON boundary");
    ts_req(C, "PUT", sub(j, "snapshot", jtail, NULL), oct, "st", 2, &a);
    assert_int_equal(a.status, 204);
    hook("fail?point=boundary-read&n=1");
    ts_req(C, "PUT", sub(j, "retention", mid, NULL), NULL, NULL, 0, &a);
    row(RUNNEL_WRITE_RETENTION, &a, 503, "JSON_BOUNDARY_UNVERIFIED", RUNNEL_REFUSED,
        "retention: unverifiable JSON boundary");

    /* parts */
    char q[256], qinc[32];
    snprintf(q, sizeof q, "/snapb/%s", ts_name("q"));
    ts_create(C, q, "application/octet-stream", qinc);
    ap(C, q, "application/octet-stream", "xyz", NULL, &a);
    char qt[RUNNEL_VALUE_MAX];
    snprintf(qt, sizeof qt, "%s", a.next_offset);
    ts_req(C, "POST", sub(q, "snapshot", qt, "/parts"), oct, "part-one", 8, &a);
    row(RUNNEL_WRITE_PART, &a, 201, NULL, RUNNEL_APPLIED, "part: staged (201)");
    char id[80];
    snprintf(id, sizeof id, "%s", a.snapshot_part);
    ts_req(C, "POST", sub(q, "snapshot", "zz", "/parts"), oct, "x", 1, &a);
    row(RUNNEL_WRITE_PART, &a, 400, "INVALID_OFFSET", RUNNEL_REFUSED, "part: bad offset");
    ts_req(C, "POST", sub("/snapb/none", "snapshot", qt, "/parts"), oct, "x", 1, &a);
    row(RUNNEL_WRITE_PART, &a, 404, "STREAM_NOT_FOUND", RUNNEL_REFUSED, "part: not found");
    ts_req(C, "POST", sub(q, "snapshot", qt, "/parts"), wrong.h, "x", 1, &a);
    row(RUNNEL_WRITE_PART, &a, 412, "INCARNATION_MISMATCH", RUNNEL_REFUSED,
        "part: another incarnation");

    runnel_snapshot_hasher hs;
    char dg[65], body[128];
    runnel_snapshot_digest_init(&hs, "application/octet-stream");
    runnel_snapshot_digest_update(&hs, "part-one", 8);
    runnel_snapshot_digest_final(&hs, dg);
    hdrs ch = {0};
    H(&ch, "Content-Type: application/octet-stream");
    H(&ch, "Stream-Snapshot-Parts: 2");
    H(&ch, "Stream-Snapshot-Digest: %s", dg);
    snprintf(body, sizeof body, "%s\n", id);
    ts_req(C, "PUT", sub(q, "snapshot", qt, NULL), ch.h, body, strlen(body), &a);
    row(RUNNEL_WRITE_PUBLISH, &a, 400, "INVALID_PARTS_COMMIT", RUNNEL_REFUSED,
        "commit: a count the list does not match");
    ch = (hdrs){0};
    H(&ch, "Content-Type: application/octet-stream");
    H(&ch, "Stream-Snapshot-Parts: 1");
    H(&ch, "Stream-Snapshot-Digest: %s", dg);
    ts_req(C, "PUT", sub(q, "snapshot", qt, NULL), ch.h, "nosuchpart\n", 11, &a);
    row(RUNNEL_WRITE_PUBLISH, &a, 400, "UNKNOWN_PART", RUNNEL_REFUSED, "commit: an unknown part");
    hook("fail-syncs?n=1");
    ts_req(C, "PUT", sub(q, "snapshot", qt, NULL), ch.h, body, strlen(body), &a);
    row(RUNNEL_WRITE_PUBLISH, &a, 503, "OUTCOME_UNKNOWN", RUNNEL_UNKNOWN,
        "commit: OUTCOME_UNKNOWN");
    ts_req(C, "PUT", sub(q, "snapshot", qt, NULL), ch.h, body, strlen(body), &a);
    row(RUNNEL_WRITE_PUBLISH, &a, 204, NULL, RUNNEL_APPLIED, "commit: applied (the repeat)");
    ts_req(C, "POST", sub(q, "snapshot", qt, "/parts"), oct, "p2", 2, &a);
    snprintf(id, sizeof id, "%s", a.snapshot_part);
    snprintf(body, sizeof body, "%s\n", id);
    ap(C, q, "application/octet-stream", "more", NULL, &a);
    char qt2[RUNNEL_VALUE_MAX];
    snprintf(qt2, sizeof qt2, "%s", a.next_offset);
    ts_req(C, "PUT", sub(q, "snapshot", qt2, NULL), ch.h, body, strlen(body), &a);
    row(RUNNEL_WRITE_PUBLISH, &a, 400, "SNAPSHOT_DIGEST_MISMATCH", RUNNEL_REFUSED,
        "commit: digest mismatch");
    hdrs dh = {0};
    H(&dh, "Stream-Incarnation: %s", oinc);
    char dpath[300];
    snprintf(dpath, sizeof dpath, "%s/snapshot/parts", q);
    ts_req(C, "DELETE", dpath, dh.h, NULL, 0, &a);
    row(RUNNEL_WRITE_DISCARD, &a, 412, "INCARNATION_MISMATCH", RUNNEL_REFUSED,
        "discard: another incarnation");
    /* the digest mismatch's commit may still be cleaning up: a discard then
     * answers 503 SNAPSHOT_COMMIT_IN_PROGRESS (unknown); it is repeated */
    for (int i = 0; i < 100; i++) {
        ts_req(C, "DELETE", dpath, NULL, NULL, 0, &a);
        if (a.status != 503)
            break;
        row(RUNNEL_WRITE_DISCARD, &a, 503, "SNAPSHOT_COMMIT_IN_PROGRESS", RUNNEL_UNKNOWN,
            "discard: a commit of the stream still runs (seen by chance)");
        ts_sleep_ms(50);
    }
    row(RUNNEL_WRITE_DISCARD, &a, 204, NULL, RUNNEL_APPLIED, "discard: applied (204)");
    ts_req(C, "DELETE", "/snapb/none/snapshot/parts", NULL, NULL, 0, &a);
    row(RUNNEL_WRITE_DISCARD, &a, 404, "STREAM_NOT_FOUND", RUNNEL_REFUSED, "discard: not found");
    assert_int_equal(failures, before);

    const char *nocold[] = {"--cold-store=false", NULL};
    ts_server *s = ts_start(nocold);
    runnel_client *c = ts_client(s);
    ts_create(c, "/nocold/s", "application/octet-stream", NULL);
    ap(c, "/nocold/s", "application/octet-stream", "x", NULL, &a);
    snprintf(qt, sizeof qt, "%s", a.next_offset);
    ts_req(c, "POST", sub("/nocold/s", "snapshot", qt, "/parts"), oct, "x", 1, &a);
    row(RUNNEL_WRITE_PART, &a, 501, "NO_COLD_STORE", RUNNEL_REFUSED, "part: no cold store (501)");
    ts_req(c, "PUT", sub("/nocold/s", "snapshot", qt, NULL), ch.h, body, strlen(body), &a);
    row(RUNNEL_WRITE_PUBLISH, &a, 501, "NO_COLD_STORE", RUNNEL_REFUSED,
        "commit: no cold store (501)");
    ts_req(c, "DELETE", "/nocold/s/snapshot/parts", NULL, NULL, 0, &a);
    row(RUNNEL_WRITE_DISCARD, &a, 501, "NO_COLD_STORE", RUNNEL_REFUSED,
        "discard: no cold store (501)");
    runnel_client_free(c);
    assert_int_equal(ts_free(s), 0);
    assert_int_equal(failures, before);
}

/* Sends raw bytes on a new connection and reads the answer (at most
 * wait_ms) into a. */
static void raw(const ts_server *s, const char *bytes, long wait_ms, runnel_answer *a) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_port = htons((uint16_t)s->port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    assert_true(write(fd, bytes, strlen(bytes)) == (ssize_t)strlen(bytes));
    char buf[65536];
    size_t n = 0;
    struct pollfd p = {.fd = fd, .events = POLLIN};
    while (n < sizeof buf - 1 && poll(&p, 1, (int)wait_ms) > 0) {
        ssize_t got = read(fd, buf + n, sizeof buf - 1 - n);
        if (got <= 0)
            break;
        n += (size_t)got;
        if (memmem(buf, n, "\r\n\r\n", 4))
            wait_ms = 300; /* the head is here: a body follows at once or never */
    }
    close(fd);
    buf[n] = 0;
    memset(a, 0, sizeof *a);
    rnc_answer_reset(a);
    uint64_t seen = 0;
    char *end = strstr(buf, "\r\n\r\n");
    for (char *line = buf; end && line < end;) {
        char *eol = strstr(line, "\r\n");
        rnc_answer_header(a, &seen, line, (size_t)(eol - line));
        line = eol + 2;
    }
    if (end)
        rnc_answer_error_body(a, end + 4, n - (size_t)(end + 4 - buf));
}

static void before_route_rows(void **state) {
    const char *small[] = {"--test-hooks", /* a body limit below 32 MiB is a test setting */
                           "--max-body-bytes",
                           "4194304",
                           "--max-body-bytes-in-flight",
                           "1048576",
                           "--max-headers",
                           "8",
                           "--max-header-bytes",
                           "1024",
                           "--request-timeout-ms",
                           "400",
                           "--min-body-rate",
                           "0",
                           NULL};
    ts_server *s = ts_start(small);
    runnel_client *c = ts_client(s);
    runnel_answer a;
    int before = failures;
    ts_create(c, "/v1/stream/small", "application/octet-stream", NULL);
    size_t big = 5u << 20;
    char *body = calloc(1, big);
    const char *expect[] = {"Content-Type: application/octet-stream", "Expect: 100-continue", NULL};
    ts_req(c, "POST", "/v1/stream/small", expect, body, big, &a);
    row(RUNNEL_WRITE_APPEND, &a, 413, "REQUEST_TOO_LARGE", RUNNEL_REFUSED,
        "before route: body above --max-body-bytes (413)");
    assert_int_equal(a.max_request_bytes, 4194304);
    ts_req(c, "POST", "/v1/stream/small", expect, body, 2u << 20, &a);
    row(RUNNEL_WRITE_APPEND, &a, 503, "INGRESS_BODY_BYTES_LIMIT_REACHED", RUNNEL_REFUSED,
        "before route: bodies in flight past the bound (503)");
    free(body);
    ts_req(c, "POST", "/v1/stream/small",
           (const char *[]){"Content-Type: text/plain", "A: 1", "B: 1", "C: 1", "D: 1", "E: 1",
                            "F: 1", "G: 1", "H: 1", NULL},
           "x", 1, &a);
    row(RUNNEL_WRITE_APPEND, &a, 431, NULL, RUNNEL_REFUSED, "before route: too many headers (431)");
    char longpath[1400] = "/v1/stream/";
    memset(longpath + 11, 'a', 1300);
    longpath[1311] = 0;
    ts_req(c, "POST", longpath, (const char *[]){"Content-Type: text/plain", NULL}, "x", 1, &a);
    row(RUNNEL_WRITE_APPEND, &a, 414, NULL, RUNNEL_REFUSED,
        "before route: request line too long (414)");
    raw(s,
        "POST /v1/stream/small HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: "
        "chunked\r\n\r\n0\r\n\r\n",
        2000, &a);
    row(RUNNEL_WRITE_APPEND, &a, 400, NULL, RUNNEL_REFUSED,
        "before route: Content-Length with Transfer-Encoding (400)");
    raw(s, "POST /v1/stream/small HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc", 3000, &a);
    row(RUNNEL_WRITE_APPEND, &a, 408, "BODY_TOO_SLOW", RUNNEL_REFUSED,
        "before route: the body did not arrive in time (408)");
    runnel_client_free(c);
    assert_int_equal(ts_free(s), 0);
    assert_int_equal(failures, before);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(producer_rows), cmocka_unit_test(producer_limit_rows),
        cmocka_unit_test(plain_rows),    cmocka_unit_test(create_delete_rows),
        cmocka_unit_test(snapshot_rows), cmocka_unit_test(before_route_rows),
    };
    return cmocka_run_group_tests(tests, ts_group_setup, teardown);
}
