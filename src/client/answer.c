/*
 * answer.c — reads an answer into runnel_answer: its typed headers (each kept
 * once, in its form, or dropped and named in `malformed`) and the error
 * body of extensions §11 (code and message; a producer code in a 403 is
 * believed only with the producer headers it needs, §11.1).
 */
#include "client/internal.h"
#include "util/text.h"

#include <jansson.h>
#include <string.h>

#define MAX_SAFE_INTEGER 9007199254740991ull /* 2^53 - 1: the producer headers' bound */

void rnc_answer_reset(runnel_answer *a) {
    char url[sizeof a->url];
    memcpy(url, a->url, sizeof url);
    memset(a, 0, sizeof *a);
    memcpy(a->url, url, sizeof url);
    a->outcome = RUNNEL_UNKNOWN;
    a->producer_epoch = a->producer_seq = a->closed_epoch = a->closed_seq = -1;
    a->expected_seq = a->received_seq = a->retry_after_s = -1;
    a->max_request_bytes = a->max_snapshot_bytes = a->content_length = a->raft_term = -1;
}

int rnc_copy(char *dst, size_t cap, const char *s, size_t len) {
    if (len >= cap) {
        dst[0] = 0;
        return -1;
    }
    memcpy(dst, s, len);
    dst[len] = 0;
    return 0;
}

static void mark_malformed(runnel_answer *a, const char *name) {
    if (!a->malformed[0])
        rnc_copy(a->malformed, sizeof a->malformed, name, strlen(name));
}

/* The kinds of typed header values. */
typedef enum { TEXT, FLAG_TRUE, SAFE_INT, DECIMAL, BASE64_FLAG } value_kind;

typedef struct {
    const char *name;
    value_kind kind;
    size_t field; /* offset in runnel_answer */
    size_t cap;   /* TEXT: the field's capacity */
} header_def;

#define T(name, member)                                                                            \
    { name, TEXT, offsetof(runnel_answer, member), sizeof(((runnel_answer *)0)->member) }
#define F(name, member)                                                                            \
    { name, FLAG_TRUE, offsetof(runnel_answer, member), 0 }
#define I(name, member)                                                                            \
    { name, SAFE_INT, offsetof(runnel_answer, member), 0 }
#define D(name, member)                                                                            \
    { name, DECIMAL, offsetof(runnel_answer, member), 0 }

static const header_def HEADERS[] = {
    T("Content-Type", content_type),
    T("Stream-Offset", offset),
    T("Stream-Next-Offset", next_offset),
    T("Stream-Incarnation", incarnation),
    T("Stream-Previous-Incarnation", previous_incarnation),
    T("Stream-Inherited-Offset", inherited_offset),
    T("Stream-Cursor", cursor),
    F("Stream-Closed", closed),
    F("Stream-Up-To-Date", up_to_date),
    F("Stream-Immutable", immutable),
    {"Stream-SSE-Data-Encoding", BASE64_FLAG, offsetof(runnel_answer, sse_base64), 0},
    T("Stream-Data-Content-Type", data_content_type),
    T("Stream-TTL", ttl),
    T("Stream-Expires-At", expires_at),
    T("Stream-Retained-Offset", retained_offset),
    T("Stream-Snapshot-Offset", snapshot_offset),
    T("Stream-Snapshot-Digest", snapshot_digest),
    T("Stream-Snapshot-Part", snapshot_part),
    T("Stream-Last-Seq", last_seq),
    T("Producer-Outcome", producer_outcome),
    I("Producer-Epoch", producer_epoch),
    I("Producer-Seq", producer_seq),
    I("Producer-Closed-Epoch", closed_epoch),
    I("Producer-Closed-Seq", closed_seq),
    I("Producer-Expected-Seq", expected_seq),
    I("Producer-Received-Seq", received_seq),
    D("Retry-After", retry_after_s),
    D("Ursula-Max-Request-Bytes", max_request_bytes),
    D("Ursula-Max-Snapshot-Bytes", max_snapshot_bytes),
    D("Content-Length", content_length),
    D("x-ursula-raft-term", raft_term),
    T("Ursula-Cluster-Id", cluster_id),
    T("x-ursula-raft-leader-id", raft_leader_id),
    T("x-ursula-raft-group", raft_group),
    T("Content-Range", content_range),
    T("ETag", etag),
};
#define NHEADERS (sizeof HEADERS / sizeof HEADERS[0])
_Static_assert(NHEADERS <= 64, "the seen bits are one uint64_t");

static void set_value(runnel_answer *a, const header_def *h, const char *v, size_t n) {
    char *base = (char *)a;
    uint64_t num;
    switch (h->kind) {
    case TEXT:
        if (n == 0 || rnc_copy(base + h->field, h->cap, v, n))
            mark_malformed(a, h->name);
        break;
    case FLAG_TRUE: /* only "true" (any case) counts; other values are ignored */
        *(int *)(base + h->field) = rn_ieq(v, n, "true");
        break;
    case BASE64_FLAG:
        *(int *)(base + h->field) = rn_ieq(v, n, "base64");
        break;
    case SAFE_INT:
    case DECIMAL:
        if (rn_parse_strict_u64(v, n, h->kind == SAFE_INT ? MAX_SAFE_INTEGER : INT64_MAX, &num))
            mark_malformed(a, h->name);
        else
            *(int64_t *)(base + h->field) = (int64_t)num;
        break;
    }
}

static void clear_value(runnel_answer *a, const header_def *h) {
    char *base = (char *)a;
    if (h->kind == TEXT)
        base[h->field] = 0;
    else if (h->kind == FLAG_TRUE || h->kind == BASE64_FLAG)
        *(int *)(base + h->field) = 0;
    else
        *(int64_t *)(base + h->field) = -1;
}

/* Resolves a Location against the answering URL (an absolute URL, or a
 * path-absolute reference). */
static void set_location(runnel_answer *a, const char *v, size_t n) {
    if (rn_iprefix(v, n, "http://") || rn_iprefix(v, n, "https://")) {
        if (rnc_copy(a->location, sizeof a->location, v, n))
            mark_malformed(a, "Location");
        return;
    }
    char origin[512], path[RNC_URL_MAX];
    size_t o;
    if (n == 0 || v[0] != '/' ||
        rn_url_split(a->url, origin, sizeof origin, path, sizeof path) == -1 ||
        (o = strlen(origin)) + n >= sizeof a->location) {
        mark_malformed(a, "Location");
        return;
    }
    memcpy(a->location, origin, o);
    memcpy(a->location + o, v, n);
    a->location[o + n] = 0;
}

static void status_line(runnel_answer *a, uint64_t *seen, const char *line, size_t len) {
    /* "HTTP/1.1 200 OK" or "HTTP/2 200" */
    const char *sp = memchr(line, ' ', len);
    int status = 0;
    if (sp) {
        const char *p = sp + 1, *end = line + len;
        for (int i = 0; i < 3 && p < end && *p >= '0' && *p <= '9'; i++, p++)
            status = status * 10 + (*p - '0');
    }
    /* A new header block: the previous one (a 1xx) says nothing more. */
    rnc_answer_reset(a);
    *seen = 0;
    a->status = status;
}

void rnc_answer_header(runnel_answer *a, uint64_t *seen, const char *line, size_t len) {
    while (len && (line[len - 1] == '\r' || line[len - 1] == '\n'))
        len--;
    if (len >= 5 && memcmp(line, "HTTP/", 5) == 0) {
        status_line(a, seen, line, len);
        return;
    }
    const char *colon = memchr(line, ':', len);
    if (!colon)
        return;
    size_t nlen = (size_t)(colon - line);
    const char *v = colon + 1, *end = line + len;
    while (v < end && (*v == ' ' || *v == '\t'))
        v++;
    while (end > v && (end[-1] == ' ' || end[-1] == '\t'))
        end--;
    size_t vlen = (size_t)(end - v);
    if (nlen == 8 && rn_ieq(line, nlen, "Location")) {
        set_location(a, v, vlen);
        return;
    }
    if (nlen == 15 && rn_ieq(line, nlen, "Ursula-Protocol")) {
        uint64_t p;
        if (!rn_parse_strict_u64(v, vlen, 1000000, &p))
            a->protocol = (int)p;
        return;
    }
    for (size_t i = 0; i < NHEADERS; i++) {
        const header_def *h = &HEADERS[i];
        if (strlen(h->name) != nlen || !rn_ieq(line, nlen, h->name))
            continue;
        if (*seen & (1ull << i)) { /* repeated: ambiguous, so dropped */
            clear_value(a, h);
            mark_malformed(a, h->name);
            return;
        }
        *seen |= 1ull << i;
        set_value(a, h, v, vlen);
        return;
    }
}

/* The Producer-Outcome token (before any ';' parameter). */
static int outcome_is(const runnel_answer *a, const char *token) {
    const char *v = a->producer_outcome;
    size_t n = strcspn(v, ";");
    while (n && (v[n - 1] == ' ' || v[n - 1] == '\t'))
        n--;
    return n == strlen(token) && memcmp(v, token, n) == 0;
}

/* A 403 from the producer rules: Producer-Epoch and a Producer-Outcome the
 * document defines, with the headers that outcome needs (§5.3). */
static int producer_refusal(const runnel_answer *a) {
    if (a->status != 403 || a->producer_epoch < 0 || !a->producer_outcome[0])
        return 0;
    if (outcome_is(a, "epoch-closed"))
        return a->closed_epoch >= 0 && a->closed_seq >= 0;
    return outcome_is(a, "stale-epoch") || outcome_is(a, "key-conflict") ||
           outcome_is(a, "producer-expired");
}

/* The Producer-Outcome a producer code needs. */
static const char *outcome_of_code(const char *code) {
    static const char *const MAP[][2] = {
        {"PRODUCER_KEY_CONFLICT", "key-conflict"},
        {"PRODUCER_EPOCH_CLOSED", "epoch-closed"},
        {"PRODUCER_EPOCH_STALE", "stale-epoch"},
        {"PRODUCER_EXPIRED", "producer-expired"},
    };
    for (size_t i = 0; i < sizeof MAP / sizeof MAP[0]; i++)
        if (strcmp(code, MAP[i][0]) == 0)
            return MAP[i][1];
    return NULL;
}

static int code_form(const char *s, size_t n) {
    if (n == 0)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'A' && s[i] <= 'Z') || s[i] == '_'))
            return 0;
    return 1;
}

void rnc_answer_error_body(runnel_answer *a, const char *body, size_t len) {
    a->producer_answer = producer_refusal(a);
    if (len) {
        json_t *root = json_loadb(body, len, 0, NULL);
        json_t *err = root ? json_object_get(root, "error") : NULL;
        json_t *code = err ? json_object_get(err, "code") : NULL;
        json_t *msg = err ? json_object_get(err, "message") : NULL;
        if (json_is_string(code) && code_form(json_string_value(code), json_string_length(code)))
            rnc_copy(a->error_code, sizeof a->error_code, json_string_value(code),
                     json_string_length(code));
        if (json_is_string(msg)) { /* informative: a long one is cut */
            size_t n = json_string_length(msg);
            if (n >= sizeof a->error_message)
                n = sizeof a->error_message - 1;
            memcpy(a->error_message, json_string_value(msg), n);
            a->error_message[n] = 0;
        }
        json_decref(root);
    }
    /* §11.1: a producer code in a 403 is believed only with the producer
     * headers it needs; without them the 403 is an access layer's. */
    const char *needs = outcome_of_code(a->error_code);
    if (a->status == 403 && needs && !(a->producer_answer && outcome_is(a, needs)))
        a->error_code[0] = 0;
}
