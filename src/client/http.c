/*
 * http.c — one HTTP exchange over a libcurl easy handle: the request's
 * method, headers and body (from memory or a source), the answer's headers
 * parsed as they arrive, a 2xx body handed to a sink and an error body kept
 * (bounded) for its code; redirects (307/308 only, §5.7 and §9.2) are
 * followed here, never by libcurl, so that every hop is seen and the
 * cluster-aware mode can learn from it. Also the pool of idle easy handles
 * (each keeps its connection) that makes an runnel_client usable from several
 * threads.
 */
#include "client/internal.h"
#include "util/routes.h"
#include "util/text.h"

#include <stdlib.h>
#include <string.h>

void rnc_header(rnc_headers *h, const char *name, const char *value) {
    if (!value)
        return;
    if (strpbrk(value, "\r\n")) {
        h->bad = 1;
        return;
    }
    char line[RUNNEL_VALUE_MAX + 128];
    int n = snprintf(line, sizeof line, "%s: %s", name, value);
    if (n < 0 || (size_t)n >= sizeof line) {
        h->bad = 1;
        return;
    }
    struct curl_slist *l = curl_slist_append(h->list, line);
    if (!l)
        abort(); /* out of memory: the library's rule */
    h->list = l;
}

void rnc_header_u64(rnc_headers *h, const char *name, uint64_t value) {
    char v[24];
    rnc_fmt(v, sizeof v, "%llu", (unsigned long long)value);
    rnc_header(h, name, v);
}

void rnc_headers_free(rnc_headers *h) {
    curl_slist_free_all(h->list);
    h->list = NULL;
}

int rnc_request_init(rnc_request *req, const runnel_client *c, const char *method,
                     const char *target, const char *suffix) {
    memset(req, 0, sizeof *req);
    req->method = method;
    int full = rn_iprefix(target, strlen(target), "http://") ||
               rn_iprefix(target, strlen(target), "https://");
    int n = snprintf(req->url, sizeof req->url, "%s%s%s", full ? "" : c->base_url, target,
                     suffix ? suffix : "");
    if (c->o.cluster_aware) /* a follower's 307 teaches the leader; its forwarding would not */
        rnc_header(&req->headers, RN_NO_FORWARD_HEADER, "client");
    return n < 0 || (size_t)n >= sizeof req->url ? -1 : 0;
}

void rnc_request_free(rnc_request *req) {
    rnc_headers_free(&req->headers);
    free(req->err_body);
    req->err_body = NULL;
}

static size_t on_header(char *data, size_t size, size_t n, void *arg) {
    rnc_request *req = arg;
    rnc_answer_header(req->ans, &req->seen, data, size * n);
    return size * n;
}

static size_t on_body(char *data, size_t size, size_t n, void *arg) {
    rnc_request *req = arg;
    size_t len = size * n;
    runnel_answer *a = req->ans;
    if (a->status >= 200 && a->status <= 299) {
        if (req->sink && req->sink(req->sink_arg, data, len)) {
            req->stopped = 1;
            return 0; /* CURLE_WRITE_ERROR ends the transfer */
        }
        a->body_bytes += len;
        return len;
    }
    size_t room = req->err_cap - req->err_len;
    size_t take = len < room ? len : room; /* the rest of a long error body is dropped */
    if (take) {
        memcpy(req->err_body + req->err_len, data, take);
        req->err_len += take;
    }
    return len;
}

static size_t on_upload(char *buf, size_t size, size_t n, void *arg) {
    rnc_request *req = arg;
    const runnel_body *b = req->body;
    size_t cap = size * n;
    if (!b)
        return 0;
    if (b->data) {
        size_t left = b->len - req->body_pos;
        size_t take = left < cap ? left : cap;
        memcpy(buf, (const char *)b->data + req->body_pos, take);
        req->body_pos += take;
        req->body_sent += take;
        return take;
    }
    long got = b->source ? b->source(b->arg, buf, cap) : 0;
    if (got < 0) {
        req->source_failed = 1;
        return CURL_READFUNC_ABORT;
    }
    req->body_sent += (uint64_t)got;
    return (size_t)got;
}

static int on_progress(void *arg, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                       curl_off_t ulnow) {
    rnc_request *req = arg;
    if (req->body && req->body->progress && ultotal > 0)
        req->body->progress(req->body->arg, (uint64_t)ulnow, (uint64_t)ultotal);
    return 0;
}

void rnc_easy_setup(runnel_client *c, CURL *e, rnc_request *req, runnel_answer *ans) {
    curl_easy_reset(e);
    req->ans = ans;
    rnc_copy(ans->url, sizeof ans->url, req->url, strlen(req->url));
    rnc_answer_reset(ans);
    req->seen = 0;
    req->body_pos = 0;
    req->body_sent = 0;
    req->stopped = req->source_failed = 0;
    req->errbuf[0] = 0;
    req->err_len = 0;
    if (!req->err_body) {
        req->err_cap = c->o.max_error_body ? c->o.max_error_body : 16384;
        req->err_body = malloc(req->err_cap);
        if (!req->err_body)
            abort();
    }
    curl_easy_setopt(e, CURLOPT_URL, req->url);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(e, CURLOPT_USERAGENT, c->user_agent);
    if (c->token) {
        curl_easy_setopt(e, CURLOPT_HTTPAUTH, CURLAUTH_BEARER);
        curl_easy_setopt(e, CURLOPT_XOAUTH2_BEARER, c->token);
    }
    if (c->ca_file)
        curl_easy_setopt(e, CURLOPT_CAINFO, c->ca_file);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS,
                     c->o.connect_timeout_ms ? c->o.connect_timeout_ms : 10000L);
    if (!req->live)
        curl_easy_setopt(e, CURLOPT_TIMEOUT_MS,
                         c->o.request_timeout_ms ? c->o.request_timeout_ms : 60000L);
    curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, req->errbuf);
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, req);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, req);
    /* libcurl must not decode or ask for encodings: bytes arrive as sent */
    curl_easy_setopt(e, CURLOPT_HTTP_CONTENT_DECODING, 0L);

    int upload = strcmp(req->method, "PUT") == 0 || strcmp(req->method, "POST") == 0;
    if (strcmp(req->method, "HEAD") == 0) {
        curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
    } else if (upload) {
        const runnel_body *b = req->body;
        uint64_t size = b ? b->len : 0;
        curl_easy_setopt(e, CURLOPT_UPLOAD, 1L);
        curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, req->method);
        curl_easy_setopt(e, CURLOPT_READFUNCTION, on_upload);
        curl_easy_setopt(e, CURLOPT_READDATA, req);
        curl_easy_setopt(e, CURLOPT_INFILESIZE_LARGE, (curl_off_t)size);
        if (b && b->progress) {
            curl_easy_setopt(e, CURLOPT_NOPROGRESS, 0L);
            curl_easy_setopt(e, CURLOPT_XFERINFOFUNCTION, on_progress);
            curl_easy_setopt(e, CURLOPT_XFERINFODATA, req);
        }
    } else if (strcmp(req->method, "GET") != 0) {
        curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, req->method);
    }
    /* Expect: 100-continue only when asked (a repeat's early answer, §5.5);
     * libcurl would otherwise add it to uploads and wait for it. */
    struct curl_slist *l = curl_slist_append(
        req->headers.list, req->expect_continue ? "Expect: 100-continue" : "Expect:");
    if (!l)
        abort();
    req->headers.list = l;
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, req->headers.list);
}

/* Removes the Expect line rnc_easy_setup appended last, so that a try can
 * be set up again. */
static void drop_expect(rnc_request *req) {
    struct curl_slist **p = &req->headers.list;
    while (*p && (*p)->next)
        p = &(*p)->next;
    if (*p && strncmp((*p)->data, "Expect:", 7) == 0) {
        curl_slist_free_all(*p);
        *p = NULL;
    }
}

void rnc_easy_finish(CURL *e, rnc_request *req, CURLcode code) {
    runnel_answer *a = req->ans;
    drop_expect(req);
    if (code != CURLE_OK && !(req->stopped && a->status)) {
        /* No complete answer: a status seen before the cut says nothing
         * certain (§11.1: a request that got no answer is unknown). */
        if (!req->stopped) {
            rnc_answer_reset(a);
            a->transport_error = (int)code;
            rnc_fmt(a->transport_message, sizeof a->transport_message, "%s%s%s",
                    curl_easy_strerror(code), req->errbuf[0] ? ": " : "", req->errbuf);
        }
        return;
    }
    if (a->status >= 300)
        rnc_answer_error_body(a, req->err_body, req->err_len);
}

CURL *rnc_easy_get(runnel_client *c) {
    CURL *e = NULL;
    pthread_mutex_lock(&c->lock);
    if (c->nidle)
        e = c->idle[--c->nidle];
    pthread_mutex_unlock(&c->lock);
    if (!e && !(e = curl_easy_init()))
        abort();
    return e;
}

void rnc_easy_put(runnel_client *c, CURL *e) {
    pthread_mutex_lock(&c->lock);
    if (c->nidle < RNC_IDLE_HANDLES) {
        c->idle[c->nidle++] = e;
        e = NULL;
    }
    pthread_mutex_unlock(&c->lock);
    if (e)
        curl_easy_cleanup(e);
}

/* Whether a body can be sent again (for a redirect). */
static int body_rewind(const runnel_body *b) {
    if (!b || b->data || !b->source)
        return 0;
    return b->rewind ? b->rewind(b->arg) : -1;
}

runnel_result rnc_perform(runnel_client *c, rnc_request *req, runnel_answer *ans) {
    if (req->headers.bad) {
        rnc_answer_reset(ans);
        rnc_fmt(ans->transport_message, sizeof ans->transport_message,
                "a header value holds CR or LF, or is too long");
        return RUNNEL_E_USAGE;
    }
    int64_t limit = runnel_client_max_request_bytes(c);
    if (req->body && req->body->len > (uint64_t)limit) {
        rnc_answer_reset(ans);
        rnc_fmt(ans->transport_message, sizeof ans->transport_message,
                "the body of %llu bytes is larger than the server's Ursula-Max-Request-Bytes "
                "(%lld): nothing was sent",
                (unsigned long long)req->body->len, (long long)limit);
        return RUNNEL_E_USAGE;
    }
    int hops = c->o.max_redirects ? c->o.max_redirects : 5;
    if (hops < 0)
        hops = 0;
    if (c->o.cluster_aware)
        rnc_route_apply(c, req);
    CURL *e = rnc_easy_get(c);
    runnel_result r;
    for (;;) {
        char sent_to[RNC_URL_MAX];
        memcpy(sent_to, req->url, sizeof sent_to);
        rnc_easy_setup(c, e, req, ans);
        CURLcode code = curl_easy_perform(e);
        rnc_easy_finish(e, req, code);
        if (req->stopped) {
            r = RUNNEL_E_STOPPED;
            break;
        }
        if (!ans->status) {
            r = RUNNEL_E_TRANSPORT;
            break;
        }
        r = RUNNEL_OK;
        rnc_learn_limits(c, ans);
        if (c->o.cluster_aware)
            rnc_route_learn(c, sent_to, ans);
        if ((ans->status != 307 && ans->status != 308) || !ans->location[0] || hops-- <= 0 ||
            body_rewind(req->body))
            break;
        memcpy(req->url, ans->location, sizeof ans->location); /* the shorter buffer */
    }
    rnc_easy_put(c, e);
    return r;
}
