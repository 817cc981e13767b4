/*
 * s3.c — the S3 client's core: configuration, the life of a call (hash,
 * sign, send, type the answer, deliver), cancel and shutdown. The calls
 * themselves and their answer readers are in s3_calls.c; see s3_int.h.
 */
#include "tiers/s3/s3_int.h"
#include "tiers/s3/sigv4.h"
#include "tiers/s3/xml.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/text.h"

#include <assert.h>
#include <errno.h>
#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define INLINE_HASH_MAX 65536    /* bodies up to this are hashed at once */
#define HASH_SLICE (1024 * 1024) /* bytes hashed per loop turn */
#define ERROR_TEXT_MAX 200       /* an error message's bytes kept */

void rn_s3_config_defaults(rn_s3_config *cfg) {
    *cfg = (rn_s3_config){.timeout_ms = 30000,
                          .min_rate = 1 << 20,
                          .max_running = 16,
                          .max_queued = 1024,
                          .max_response_bytes = 4 << 20,
                          .user_agent = "runnel"};
}

const char *rn_s3_outcome_name(rn_s3_outcome o) {
    static const char *const names[] = {"ok", "not found", "retryable failure",
                                        "permanent failure"};
    return names[o];
}

int rn_s3_key_valid(const char *key) {
    size_t n = strlen(key);
    if (n == 0 || n > 1024 || !rn_utf8_valid((const uint8_t *)key, n))
        return 0;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)key[i] < 0x20 || key[i] == 0x7f)
            return 0;
    return 1;
}

/* ---- configuration ---- */

static int text_ok(const char *s, const char *allowed_extra) {
    if (!s || !*s)
        return 0;
    for (const char *c = s; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
              strchr(allowed_extra, *c)))
            return 0;
    return 1;
}

/* A bucket name that can be a DNS label chain: 3-63 of [a-z0-9.-],
 * starting and ending with a letter or digit. */
static int dns_bucket(const char *b) {
    size_t n = strlen(b);
    if (n < 3 || n > 63 || !text_ok(b, ".-") || strstr(b, ".."))
        return 0;
    for (const char *c = b; *c; c++)
        if (*c >= 'A' && *c <= 'Z')
            return 0;
    return b[0] != '.' && b[0] != '-' && b[n - 1] != '.' && b[n - 1] != '-';
}

/* An IPv4 address (with or without a port). */
static int numeric_host(const char *hostport) {
    for (const char *c = hostport; *c && *c != ':'; c++)
        if (!((*c >= '0' && *c <= '9') || *c == '.'))
            return 0;
    return 1;
}

static int config_error(char *err, size_t errcap, const char *what) {
    snprintf(err, errcap, "S3: %s", what);
    return -1;
}

static int set_endpoint(rn_s3 *s3, const rn_s3_config *cfg, char *err, size_t errcap) {
    rn_buf ep = {0}, url = {0};
    if (cfg->endpoint)
        rn_buf_append_str(&ep, cfg->endpoint);
    else
        rn_buf_appendf(&ep, "https://s3.%s.amazonaws.com", cfg->region);
    rn_buf_append_byte(&ep, 0);
    char *s = (char *)ep.data;
    size_t len = strlen(s);
    if (len && s[len - 1] == '/')
        s[--len] = '\0';
    const char *scheme = strncmp(s, "https://", 8) == 0  ? "https"
                         : strncmp(s, "http://", 7) == 0 ? "http"
                                                         : NULL;
    const char *hostport = scheme ? s + strlen(scheme) + 3 : NULL;
    int rc = 0;
    if (!scheme || !text_ok(hostport, ".-:[]"))
        rc = config_error(err, errcap, "the endpoint must be http(s)://host[:port]");
    else if (cfg->unsigned_payload && strcmp(scheme, "https") != 0)
        rc = config_error(err, errcap, "UNSIGNED-PAYLOAD is allowed over https only");
    else if (cfg->virtual_host && (hostport[0] == '[' || numeric_host(hostport)))
        rc = config_error(err, errcap, "virtual-host addressing needs a host name, not an address");
    else if (cfg->virtual_host && !dns_bucket(cfg->bucket))
        rc =
            config_error(err, errcap, "virtual-host addressing needs a DNS-compatible bucket name");
    if (rc == 0) {
        if (cfg->virtual_host)
            rn_buf_appendf(&url, "%s://%s.%s", scheme, cfg->bucket, hostport);
        else
            rn_buf_appendf(&url, "%s://%s", scheme, hostport);
        rn_buf_append_byte(&url, 0);
        s3->base_url = (char *)url.data;
        s3->host = rn_xstrdup(s3->base_url + strlen(scheme) + 3);
    }
    rn_buf_free(&ep);
    return rc;
}

/* Credentials go into header lines: no line breaks, nothing empty. */
static int credential_ok(const char *s) {
    return s && *s && !strpbrk(s, "\r\n");
}

rn_s3 *rn_s3_new(uv_loop_t *loop, const rn_s3_config *cfg, char *err, size_t errcap) {
    if (!cfg->bucket || !text_ok(cfg->bucket, "._-") || strlen(cfg->bucket) > 63) {
        config_error(err, errcap, "the bucket name must be 1-63 of [A-Za-z0-9._-]");
        return NULL;
    }
    if (!text_ok(cfg->region, "-")) {
        config_error(err, errcap, "a region ([a-z0-9-]) is required");
        return NULL;
    }
    if (!credential_ok(cfg->access_key) || !credential_ok(cfg->secret_key) ||
        (cfg->session_token && !credential_ok(cfg->session_token))) {
        config_error(err, errcap, "credentials are missing or hold a line break");
        return NULL;
    }
    if (cfg->max_running < 1 || cfg->min_rate < 1 || cfg->timeout_ms < 1 ||
        cfg->max_response_bytes < 1024) {
        config_error(err, errcap, "limits must be positive (max_response_bytes >= 1024)");
        return NULL;
    }
    rn_s3 *s3 = rn_xcalloc(1, sizeof *s3);
    if (set_endpoint(s3, cfg, err, errcap) < 0) {
        free(s3);
        return NULL;
    }
    s3->loop = loop;
    s3->bucket = rn_xstrdup(cfg->bucket);
    s3->virtual_host = cfg->virtual_host;
    s3->region = rn_xstrdup(cfg->region);
    s3->access_key = rn_xstrdup(cfg->access_key);
    s3->secret_key = rn_xstrdup(cfg->secret_key);
    s3->session_token = cfg->session_token ? rn_xstrdup(cfg->session_token) : NULL;
    s3->unsigned_payload = cfg->unsigned_payload;
    s3->timeout_ms = cfg->timeout_ms;
    s3->min_rate = cfg->min_rate;
    s3->max_response_bytes = cfg->max_response_bytes;
    s3->max_calls = cfg->max_running + cfg->max_queued;
    rn_outbound_config oc = {.user_agent = cfg->user_agent ? cfg->user_agent : "runnel",
                             .max_running = cfg->max_running,
                             .max_queued = cfg->max_queued,
                             .ca_file = cfg->ca_file};
    s3->out = rn_outbound_new(loop, &oc);
    uv_idle_init(loop, &s3->hasher);
    s3->hasher.data = s3;
    return s3;
}

/* ---- calls ---- */

rn_s3_call *s3_call_new(rn_s3 *s3, const char *op, const char *method, const char *key,
                        s3_reader read, rn_s3_fn fn, void *arg) {
    assert(fn && (!key || rn_s3_key_valid(key)));
    if (s3->stopped || s3->ncalls >= s3->max_calls)
        return NULL;
    rn_s3_call *c = rn_xcalloc(1, sizeof *c);
    c->s3 = s3;
    c->op = op;
    c->method = method;
    c->key = key ? rn_xstrdup(key) : NULL;
    c->body = rn_s3_mem(NULL, 0);
    c->sink.fd = -1;
    c->read = read;
    c->fn = fn;
    c->arg = arg;
    rn_list_push_front(&s3->calls, &c->link);
    s3->ncalls++;
    return c;
}

static void add_pair(s3_pair *pairs, size_t *n, size_t max, const char *name, const char *value) {
    assert(*n < max);
    (void)max;
    pairs[*n].name = rn_xstrdup(name);
    pairs[*n].value = value ? rn_xstrdup(value) : NULL;
    (*n)++;
}

void s3_add_query(rn_s3_call *c, const char *name, const char *value) {
    add_pair(c->query, &c->nquery, S3_MAX_QUERY, name, value);
}

void s3_add_header(rn_s3_call *c, const char *name, const char *value) {
    add_pair(c->headers, &c->nheaders, S3_MAX_HEADERS, name, value);
}

static void hash_queue_remove(rn_s3 *s3, rn_s3_call *c) {
    rn_s3_call **p = &s3->hash_head, *prev = NULL;
    while (*p && *p != c) {
        prev = *p;
        p = &(*p)->hash_next;
    }
    if (!*p)
        return;
    *p = c->hash_next;
    if (s3->hash_tail == c)
        s3->hash_tail = prev;
    if (!s3->hash_head)
        uv_idle_stop(&s3->hasher);
}

/* Takes a call off the client's lists (before its callback runs, so that a
 * callback that stops the client does not cancel it again). */
static void call_unlink(rn_s3_call *c) {
    rn_s3 *s3 = c->s3;
    hash_queue_remove(s3, c);
    rn_list_remove(&s3->calls, &c->link);
    s3->ncalls--;
}

static void call_destroy(rn_s3_call *c) {
    for (size_t i = 0; i < c->nquery; i++) {
        free(c->query[i].name);
        free(c->query[i].value);
    }
    for (size_t i = 0; i < c->nheaders; i++) {
        free(c->headers[i].name);
        free(c->headers[i].value);
    }
    EVP_MD_CTX_free(c->hash);
    rn_buf_free(&c->doc);
    free(c->key);
    free(c);
}

static void call_free(rn_s3_call *c) {
    call_unlink(c);
    call_destroy(c);
}

void s3_fail(rn_s3_result *r, rn_s3_outcome outcome, const char *code, const char *message) {
    r->outcome = outcome;
    r->code = code;
    r->message = message;
}

void s3_deliver(rn_s3_call *c, const rn_s3_result *r) {
    if (r->outcome == RN_S3_RETRY || r->outcome == RN_S3_FAILED)
        rn_log(RN_LOG_WARN, "s3_request_failed", "%s %s/%s: %s, %s (HTTP %ld): %s", c->op,
               c->s3->bucket, c->key ? c->key : "", rn_s3_outcome_name(r->outcome), r->code,
               r->status, r->message);
    c->fn(c->arg, r);
}

rn_s3_outcome s3_outcome_of_code(const char *code) {
    static const char *const retryable[] = {"InternalError", "SlowDown", "ServiceUnavailable",
                                            "RequestTimeout"};
    for (size_t i = 0; i < sizeof retryable / sizeof retryable[0]; i++)
        if (strcmp(code, retryable[i]) == 0)
            return RN_S3_RETRY;
    return RN_S3_FAILED;
}

static void on_error_text(void *arg, const char *path, const char *text, size_t len) {
    rn_s3_call *c = arg;
    if (strcmp(path, "Error/Code") == 0)
        snprintf(c->code, sizeof c->code, "%.*s", (int)len, text);
    else if (strcmp(path, "Error/Message") == 0)
        snprintf(c->message, sizeof c->message, "%.*s",
                 (int)(len < ERROR_TEXT_MAX ? len : ERROR_TEXT_MAX), text);
}

/* Types an answer: outcome, code and message. */
static void type_answer(rn_s3_call *c, const rn_fetch_result *fr, rn_s3_result *r) {
    static const char *const transport_codes[] = {[RN_FETCH_POLICY] = "TransportError",
                                                  [RN_FETCH_CONNECT] = "ConnectFailed",
                                                  [RN_FETCH_TIMEOUT] = "Timeout",
                                                  [RN_FETCH_CUT] = "ResponseCut",
                                                  [RN_FETCH_TOO_LARGE] = "ResponseTooLarge",
                                                  [RN_FETCH_LOCAL_IO] = "LocalIO",
                                                  [RN_FETCH_TLS] = "TLSVerifyFailed",
                                                  [RN_FETCH_OTHER] = "TransportError"};
    if (fr->failure != RN_FETCH_ANSWERED) {
        int permanent = fr->failure == RN_FETCH_TOO_LARGE || fr->failure == RN_FETCH_LOCAL_IO ||
                        fr->failure == RN_FETCH_TLS;
        snprintf(c->message, sizeof c->message, "%s", fr->error ? fr->error : "");
        return s3_fail(r, permanent ? RN_S3_FAILED : RN_S3_RETRY, transport_codes[fr->failure],
                       c->message);
    }
    if (fr->status >= 200 && fr->status < 300)
        return;
    rn_s3_xml_handler h = {.text = on_error_text, .arg = c};
    if (fr->body_len)
        rn_s3_xml_parse(fr->body, fr->body_len, &h);
    if (!c->code[0])
        snprintf(c->code, sizeof c->code, fr->status == 404 ? "NotFound" : "HTTP%ld", fr->status);
    rn_s3_outcome o = RN_S3_FAILED;
    if (fr->status == 404)
        o = RN_S3_NOT_FOUND;
    else if ((fr->status >= 500 && fr->status != 501) || fr->status == 408 || fr->status == 429)
        o = RN_S3_RETRY;
    else
        o = s3_outcome_of_code(c->code);
    s3_fail(r, o, c->code, c->message);
}

static void on_answer(void *arg, const rn_fetch_result *fr) {
    rn_s3_call *c = arg;
    c->fetch = NULL;
    rn_s3_result r = {.outcome = RN_S3_OK,
                      .status = fr->status,
                      .code = "",
                      .message = "",
                      .etag = "",
                      .upload_id = "",
                      .next_token = ""};
    type_answer(c, fr, &r);
    call_unlink(c);
    c->read(c, fr, &r);
    call_destroy(c);
}

static void append_path(const rn_s3_call *c, rn_buf *path) {
    rn_s3 *s3 = c->s3;
    if (!s3->virtual_host)
        rn_buf_appendf(path, "/%s", s3->bucket);
    if (c->key || s3->virtual_host)
        rn_buf_appendf(path, "/%s", c->key ? c->key : "");
    rn_buf_append_byte(path, 0);
}

/* Signs the call and hands it to the outbound client. */
static void send_call(rn_s3_call *c) {
    rn_s3 *s3 = c->s3;
    char date[17];
    rn_sigv4_amz_date(rn_now_ms(), date);
    rn_buf path = {0}, url = {0}, auth = {0}, lines = {0};
    append_path(c, &path);
    rn_sigv4_param query[S3_MAX_QUERY], headers[S3_MAX_HEADERS + 4];
    for (size_t i = 0; i < c->nquery; i++)
        query[i] = (rn_sigv4_param){c->query[i].name, c->query[i].value};
    size_t nh = 0;
    headers[nh++] = (rn_sigv4_param){"Host", s3->host};
    headers[nh++] = (rn_sigv4_param){"x-amz-date", date};
    headers[nh++] = (rn_sigv4_param){"x-amz-content-sha256", c->payload_hash};
    if (s3->session_token)
        headers[nh++] = (rn_sigv4_param){"x-amz-security-token", s3->session_token};
    for (size_t i = 0; i < c->nheaders; i++)
        headers[nh++] = (rn_sigv4_param){c->headers[i].name, c->headers[i].value};
    rn_sigv4_request req = {.method = c->method,
                            .path = (const char *)path.data,
                            .query = query,
                            .nquery = c->nquery,
                            .headers = headers,
                            .nheaders = nh,
                            .payload_hash = c->payload_hash,
                            .amz_date = date};
    rn_sigv4_identity id = {s3->access_key, s3->secret_key, s3->region, "s3"};
    rn_sigv4_authorization(&req, &id, &auth);
    rn_buf_append_str(&url, s3->base_url);
    rn_sigv4_encode(&url, (const char *)path.data, strlen((const char *)path.data), 1);
    if (c->nquery) {
        rn_buf_append_byte(&url, '?');
        rn_sigv4_query(&url, query, c->nquery);
    }
    rn_buf_append_byte(&url, 0);
    /* header lines, NUL-separated, then pointers to them */
    const char *line_ptrs[S3_MAX_HEADERS + 5];
    size_t offsets[S3_MAX_HEADERS + 5];
    for (size_t i = 0; i < nh; i++) {
        offsets[i] = lines.len;
        rn_buf_appendf(&lines, "%s: %s", headers[i].name, headers[i].value);
        rn_buf_append_byte(&lines, 0);
    }
    offsets[nh] = lines.len;
    rn_buf_appendf(&lines, "Authorization: %.*s", (int)auth.len, (const char *)auth.data);
    rn_buf_append_byte(&lines, 0);
    for (size_t i = 0; i <= nh; i++)
        line_ptrs[i] = (const char *)lines.data + offsets[i];
    rn_fetch_request fr = {.method = c->method,
                           .url = (const char *)url.data,
                           .headers = line_ptrs,
                           .nheaders = nh + 1,
                           .data = c->body.data,
                           .len = c->body.data ? c->body.len : 0,
                           .body_fd = c->body.data ? -1 : c->body.fd,
                           .body_offset = c->body.offset,
                           .body_len = c->body.len,
                           .into = c->sink.into,
                           .sink_fd = c->sink.fd,
                           .sink_offset = c->sink.offset,
                           .sink_cap = c->sink_len ? c->sink_len : s3->max_response_bytes,
                           .strict_size = 1,
                           .timeout_ms = rn_s3_call_budget_ms(c),
                           .path_as_is = 1};
    c->fetch = rn_outbound_start(s3->out, &fr, on_answer, c);
    assert(c->fetch); /* the client admits no more calls than the outbound client holds */
    rn_buf_free(&path);
    rn_buf_free(&url);
    rn_buf_free(&auth);
    rn_buf_free(&lines);
}

static void finish_hash(rn_s3_call *c) {
    uint8_t digest[32];
    unsigned int n = 0;
    EVP_DigestFinal_ex(c->hash, digest, &n);
    rn_hex_encode(digest, 32, c->payload_hash);
}

/* Hashes one slice of the first queued body; sends it when done. */
static void on_hash_turn(uv_idle_t *h) {
    rn_s3 *s3 = h->data;
    rn_s3_call *c = s3->hash_head;
    uint64_t left = c->body.len - c->hashed;
    size_t n = left < HASH_SLICE ? (size_t)left : HASH_SLICE;
    if (c->body.data) {
        EVP_DigestUpdate(c->hash, c->body.data + c->hashed, n);
    } else {
        ssize_t got;
        do
            got = pread(c->body.fd, s3->hash_buf, n, (off_t)(c->body.offset + c->hashed));
        while (got < 0 && errno == EINTR);
        if (got <= 0) {
            snprintf(c->message, sizeof c->message, "reading the body: %s",
                     got < 0 ? strerror(errno) : "the file is shorter than the body");
            rn_s3_result r = {.code = "LocalIO", .etag = "", .upload_id = "", .next_token = ""};
            s3_fail(&r, RN_S3_FAILED, "LocalIO", c->message);
            call_unlink(c);
            s3_deliver(c, &r);
            call_destroy(c);
            return;
        }
        n = (size_t)got;
        EVP_DigestUpdate(c->hash, s3->hash_buf, n);
    }
    c->hashed += n;
    if (c->hashed < c->body.len)
        return;
    hash_queue_remove(s3, c);
    finish_hash(c);
    send_call(c);
}

void s3_submit(rn_s3_call *c) {
    rn_s3 *s3 = c->s3;
    if (c->doc.len)
        c->body = rn_s3_mem(c->doc.data, c->doc.len);
    if (s3->unsigned_payload && c->body.len) {
        snprintf(c->payload_hash, sizeof c->payload_hash, "%s", RN_SIGV4_UNSIGNED_PAYLOAD);
        return send_call(c);
    }
    if (c->body.len == 0 || (c->body.data && c->body.len <= INLINE_HASH_MAX)) {
        rn_sha256_hex(c->body.data ? (const void *)c->body.data : "", c->body.len, c->payload_hash);
        return send_call(c);
    }
    if (!c->body.data && !s3->hash_buf)
        s3->hash_buf = rn_xmalloc(HASH_SLICE);
    c->hash = EVP_MD_CTX_new();
    EVP_DigestInit_ex(c->hash, EVP_sha256(), NULL);
    if (s3->hash_tail)
        s3->hash_tail->hash_next = c;
    else
        s3->hash_head = c;
    s3->hash_tail = c;
    uv_idle_start(&s3->hasher, on_hash_turn);
}

void rn_s3_cancel(rn_s3_call *c) {
    if (c->fetch)
        rn_fetch_cancel(c->fetch);
    call_free(c);
}

uint64_t rn_s3_call_budget_ms(const rn_s3_call *c) {
    uint64_t payload = c->body.len + c->sink_len + c->copy_len;
    return c->s3->timeout_ms + payload * 1000 / c->s3->min_rate;
}

size_t rn_s3_in_flight(const rn_s3 *s3) {
    return s3->ncalls;
}

void rn_s3_stop(rn_s3 *s3) {
    if (s3->stopped)
        return;
    s3->stopped = 1;
    while (!rn_list_empty(&s3->calls))
        rn_s3_cancel(rn_list_entry(s3->calls.first, rn_s3_call, link));
    uv_idle_stop(&s3->hasher);
    uv_close((uv_handle_t *)&s3->hasher, NULL);
    rn_outbound_stop(s3->out);
}

static void wipe(char *s) {
    if (s) {
        OPENSSL_cleanse(s, strlen(s));
        free(s);
    }
}

void rn_s3_free(rn_s3 *s3) {
    if (!s3)
        return;
    rn_outbound_free(s3->out);
    free(s3->hash_buf);
    free(s3->base_url);
    free(s3->host);
    free(s3->bucket);
    free(s3->region);
    wipe(s3->access_key);
    wipe(s3->secret_key);
    wipe(s3->session_token);
    free(s3);
}
