/*
 * client.c — the runnel_client handle (options, the pool's lock, libcurl's one
 * global initialisation), stream URLs and percent-encoding, result names,
 * and the mapping of an answer to a call's result.
 */
#include "client/internal.h"
#include "util/blake3.h"
#include "util/text.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_code;

/* libcurl's global state is the one global the library touches: it is
 * initialised once per process, never cleaned up by the library. */
static void curl_init_once(void) {
    curl_init_code = curl_global_init(CURL_GLOBAL_DEFAULT);
}

runnel_client *runnel_client_new(const runnel_client_options *o) {
    if (!o || !o->base_url)
        return NULL;
    size_t n = strlen(o->base_url);
    while (n && o->base_url[n - 1] == '/')
        n--;
    char origin[512], path[RNC_URL_MAX];
    char base[RNC_URL_MAX];
    if (n >= sizeof base)
        return NULL;
    memcpy(base, o->base_url, n);
    base[n] = 0;
    if (rn_url_split(base, origin, sizeof origin, path, sizeof path))
        return NULL;
    pthread_once(&curl_once, curl_init_once);
    if (curl_init_code != CURLE_OK)
        return NULL;
    runnel_client *c = calloc(1, sizeof *c);
    if (!c)
        abort();
    c->o = *o;
    memcpy(c->base_url, base, n + 1);
    c->o.base_url = c->base_url;
    snprintf(c->user_agent, sizeof c->user_agent, "%s",
             o->user_agent ? o->user_agent : "librunnel/" RUNNEL_CLIENT_VERSION);
    c->o.user_agent = c->user_agent;
    if (o->token) {
        c->token = strdup(o->token);
        if (!c->token)
            abort();
    }
    c->o.token = c->token;
    if (o->ca_file) {
        c->ca_file = strdup(o->ca_file);
        if (!c->ca_file)
            abort();
    }
    c->o.ca_file = c->ca_file;
    c->max_request_bytes = RUNNEL_REQUEST_LIMIT;
    pthread_mutex_init(&c->lock, NULL);
    c->routes = rn_routes_new(RNC_ROUTES);
    return c;
}

int64_t runnel_client_max_request_bytes(runnel_client *c) {
    pthread_mutex_lock(&c->lock);
    int64_t n = c->max_request_bytes;
    pthread_mutex_unlock(&c->lock);
    return n;
}

void rnc_learn_limits(runnel_client *c, const runnel_answer *a) {
    if (a->max_request_bytes < 0)
        return;
    pthread_mutex_lock(&c->lock);
    c->max_request_bytes =
        a->max_request_bytes < RUNNEL_REQUEST_LIMIT ? a->max_request_bytes : RUNNEL_REQUEST_LIMIT;
    pthread_mutex_unlock(&c->lock);
}

void runnel_client_free(runnel_client *c) {
    if (!c)
        return;
    for (int i = 0; i < c->nidle; i++)
        curl_easy_cleanup(c->idle[i]);
    pthread_mutex_destroy(&c->lock);
    rn_routes_free(c->routes);
    if (c->token)
        memset(c->token, 0, strlen(c->token));
    free(c->token);
    free(c->ca_file);
    free(c);
}

static int unreserved(unsigned char ch) {
    return (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
           ch == '-' || ch == '.' || ch == '_' || ch == '~';
}

/* Percent-encodes len bytes of s at out + *pos. */
static int encode_into(const char *s, size_t len, char *out, size_t cap, size_t *pos) {
    static const char HEX[] = "0123456789ABCDEF";
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (*pos + 4 > cap)
            return -1;
        if (unreserved(ch)) {
            out[(*pos)++] = (char)ch;
        } else {
            out[(*pos)++] = '%';
            out[(*pos)++] = HEX[ch >> 4];
            out[(*pos)++] = HEX[ch & 15];
        }
    }
    out[*pos] = 0;
    return 0;
}

int runnel_url_encode(const char *s, char *out, size_t cap) {
    size_t pos = 0;
    if (!cap)
        return -1;
    out[0] = 0;
    return encode_into(s, strlen(s), out, cap, &pos);
}

int rnc_url_append_segment(char *url, const char *s) {
    size_t pos = strlen(url);
    if (pos + 2 > RNC_URL_MAX)
        return -1;
    url[pos++] = '/';
    url[pos] = 0;
    return encode_into(s, strlen(s), url, RNC_URL_MAX, &pos);
}

int runnel_stream_url(const runnel_client *c, const char *name, int bucket_surface, char *out,
                      size_t cap) {
    size_t pos = 0, n = strlen(name);
    const char *prefix = bucket_surface ? "" : "/v1/stream";
    int w = snprintf(out, cap, "%s%s", c->base_url, prefix);
    if (n == 0 || w < 0 || (size_t)w >= cap)
        return -1;
    pos = (size_t)w;
    const char *slash = strchr(name, '/');
    if (bucket_surface && (!slash || slash == name || !slash[1] || strchr(slash + 1, '/')))
        return -1; /* "bucket/stream", the stream id without a slash */
    for (const char *seg = name;;) {
        const char *end = strchr(seg, '/');
        size_t len = end ? (size_t)(end - seg) : strlen(seg);
        if (len == 0 || pos + 2 > cap)
            return -1;
        out[pos++] = '/';
        if (encode_into(seg, len, out, cap, &pos))
            return -1;
        if (!end)
            return 0;
        seg = end + 1;
    }
}

const char *runnel_result_name(runnel_result r) {
    switch (r) {
    case RUNNEL_OK:
        return "ok";
    case RUNNEL_E_USAGE:
        return "bad argument";
    case RUNNEL_E_TRANSPORT:
        return "no answer (connection failed)";
    case RUNNEL_E_STATUS:
        return "the server refused the call";
    case RUNNEL_E_PROTOCOL:
        return "the answer breaks the protocol";
    case RUNNEL_E_IO:
        return "local file error";
    case RUNNEL_E_STATE:
        return "producer state mismatch or in use";
    case RUNNEL_E_INCARNATION:
        return "the stream is another incarnation";
    case RUNNEL_E_STOPPED:
        return "stopped";
    case RUNNEL_E_UNKNOWN:
        return "outcome unknown";
    case RUNNEL_E_REFUSED:
        return "refused";
    }
    return "?";
}

runnel_result rnc_write_result(runnel_write_kind kind, runnel_result transport,
                               runnel_answer *ans) {
    if (transport == RUNNEL_E_USAGE || transport == RUNNEL_E_STOPPED) {
        ans->outcome = RUNNEL_REFUSED; /* nothing was sent */
        return transport;
    }
    ans->outcome = runnel_classify(kind, ans);
    switch (ans->outcome) {
    case RUNNEL_APPLIED:
    case RUNNEL_REPEAT:
        return RUNNEL_OK;
    case RUNNEL_REFUSED:
        return RUNNEL_E_REFUSED;
    case RUNNEL_REDIRECTED:
        return RUNNEL_E_STATUS;
    case RUNNEL_UNKNOWN:
        break;
    }
    return transport == RUNNEL_E_TRANSPORT ? RUNNEL_E_TRANSPORT : RUNNEL_E_UNKNOWN;
}

runnel_result rnc_run_write(runnel_client *c, rnc_request *req, runnel_write_kind kind,
                            runnel_answer *ans) {
    runnel_result r = rnc_perform(c, req, ans);
    rnc_request_free(req);
    return rnc_write_result(kind, r, ans);
}

runnel_result rnc_run_read(runnel_client *c, rnc_request *req, runnel_answer *ans) {
    runnel_result r = rnc_perform(c, req, ans);
    rnc_request_free(req);
    return rnc_read_result(r, ans);
}

runnel_result rnc_usage(runnel_answer *ans, const char *why) {
    rnc_answer_reset(ans);
    rnc_fmt(ans->transport_message, sizeof ans->transport_message, "%s", why);
    ans->outcome = RUNNEL_REFUSED;
    return RUNNEL_E_USAGE;
}

runnel_result rnc_read_result(runnel_result transport, const runnel_answer *ans) {
    if (transport != RUNNEL_OK)
        return transport;
    return ans->status >= 200 && ans->status <= 299 ? RUNNEL_OK : RUNNEL_E_STATUS;
}

int rnc_body_digest(const runnel_body *b, char out[65]) {
    uint8_t d[32];
    if (!b || b->data || !b->source) {
        rn_blake3_hash(b ? b->data : NULL, b ? b->len : 0, d);
        rn_blake3_hex(d, out);
        return 0;
    }
    if (!b->rewind)
        return -1;
    rn_blake3 h;
    rn_blake3_init(&h);
    char *buf = malloc(65536);
    if (!buf)
        abort();
    long got;
    while ((got = b->source(b->arg, buf, 65536)) > 0)
        rn_blake3_update(&h, buf, (size_t)got);
    free(buf);
    if (got < 0 || b->rewind(b->arg))
        return -1;
    rn_blake3_final(&h, d);
    rn_blake3_hex(d, out);
    return 0;
}

int64_t rnc_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

long rnc_retry_delay_ms(const runnel_answer *ans, int attempt) {
    long ms = 200L << (attempt < 5 ? attempt : 5);
    if (ms > 5000)
        ms = 5000;
    if (ans->retry_after_s >= 0)
        ms = ans->retry_after_s > 10 ? 10000 : (long)ans->retry_after_s * 1000;
    return ms;
}

void rnc_retry_pause(const runnel_answer *ans, int attempt) {
    long ms = rnc_retry_delay_ms(ans, attempt);
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

int rnc_repeatable(const runnel_answer *ans) {
    return ans->outcome == RUNNEL_UNKNOWN ||
           (ans->outcome == RUNNEL_REFUSED && ans->retry_after_s >= 0 && ans->status >= 429);
}

void rnc_fmt(char *dst, size_t cap, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(dst, cap, fmt, ap);
    va_end(ap);
}
