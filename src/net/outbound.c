/*
 * outbound.c — libcurl multi on libuv. See outbound.h.
 *
 * Socket contexts (one uv_poll_t per socket curl asks us to watch) and
 * fetches are kept on lists so shutdown can close what curl still holds.
 * A poll handle is stopped before it is closed, which frees its fd slot in
 * the loop at once: curl may open a new socket with the same number before
 * the close callback ran. Fetches beyond max_running wait on a FIFO list and
 * are handed to curl as running ones finish.
 */
#include "net/outbound.h"
#include "util/list.h"

#include <assert.h>
#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#define MAX_HEADER_BYTES 16384
#define TRANSFER_BUFFER 131072 /* curl's receive and upload buffers */

typedef struct sock_ctx {
    uv_poll_t poll;
    rn_outbound *o;
    curl_socket_t fd;
    rn_list_node link; /* on o->socks */
} sock_ctx;

struct rn_fetch {
    rn_outbound *o;
    CURL *easy;
    struct curl_slist *headers;
    int running; /* handed to curl (else queued) */
    /* request body */
    rn_buf owned;
    const uint8_t *data;
    int body_fd;
    uint64_t body_offset, body_len, body_pos;
    /* sinks */
    uint8_t *into;
    int sink_fd;
    uint64_t sink_offset, sink_cap, received;
    int strict_size;
    rn_buf answer; /* memory sink of a 2xx answer, or another answer's body */
    rn_buf head;   /* the final answer's header lines */
    long status;
    rn_fetch_failure local; /* set by a callback that stopped the transfer */
    char local_error[128];
    rn_fetch_fn fn;
    void *arg;
    int refused; /* the connect policy refused an address */
    char error[CURL_ERROR_SIZE];
    rn_list_node link; /* on o->fetches when running, else on o->queue */
};

struct rn_outbound {
    uv_loop_t *loop;
    CURLM *multi;
    uv_timer_t timer;
    rn_connect_policy_fn policy;
    void *policy_arg;
    char *policy_refusal;
    char *ca_file;
    char *client_cert, *client_key;
    rn_outbound_sign_fn sign;
    void *sign_arg;
    size_t max_running, max_queued, nrunning, nqueued;
    int stopped;
    char *user_agent;
    rn_list fetches; /* running */
    rn_list queue;   /* waiting, oldest first */
    rn_list socks;
};

static void on_sock_closed(uv_handle_t *h) {
    free(h->data);
}

static void sock_close(rn_outbound *o, sock_ctx *c) {
    rn_list_remove(&o->socks, &c->link);
    uv_poll_stop(&c->poll);
    uv_close((uv_handle_t *)&c->poll, on_sock_closed);
}

static void fetch_free(rn_fetch *f) {
    curl_easy_cleanup(f->easy);
    curl_slist_free_all(f->headers);
    rn_buf_free(&f->owned);
    rn_buf_free(&f->answer);
    rn_buf_free(&f->head);
    free(f);
}

/* Takes a fetch out of the multi handle (or the queue) and off its list. */
static void fetch_detach(rn_fetch *f) {
    rn_outbound *o = f->o;
    if (f->running) {
        curl_multi_remove_handle(o->multi, f->easy);
        rn_list_remove(&o->fetches, &f->link);
        o->nrunning--;
    } else {
        rn_list_remove(&o->queue, &f->link);
        o->nqueued--;
    }
}

static void fetch_run(rn_fetch *f) {
    rn_outbound *o = f->o;
    f->running = 1;
    o->nrunning++;
    rn_list_push_front(&o->fetches, &f->link);
    curl_multi_add_handle(o->multi, f->easy);
}

/* Hands waiting fetches to curl while there is room. */
static void start_queued(rn_outbound *o) {
    while (!o->stopped && !rn_list_empty(&o->queue) && o->nrunning < o->max_running) {
        rn_fetch *f = rn_list_entry(o->queue.first, rn_fetch, link);
        fetch_detach(f);
        fetch_run(f);
    }
}

static rn_fetch_failure failure_of(const rn_fetch *f, CURLcode res) {
    if (res == CURLE_OK)
        return RN_FETCH_ANSWERED;
    if (f->local != RN_FETCH_ANSWERED)
        return f->local;
    if (f->refused)
        return RN_FETCH_POLICY;
    switch (res) {
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_CONNECT:
        return RN_FETCH_CONNECT;
    case CURLE_OPERATION_TIMEDOUT:
        return RN_FETCH_TIMEOUT;
    case CURLE_PARTIAL_FILE:
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
    case CURLE_GOT_NOTHING:
        return RN_FETCH_CUT;
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CACERT_BADFILE:
        return RN_FETCH_TLS;
    default:
        return RN_FETCH_OTHER;
    }
}

static int status_ok(long status) {
    return status >= 200 && status < 300;
}

/* Answers every finished transfer. */
static void drain(rn_outbound *o) {
    CURLMsg *m;
    int left;
    while ((m = curl_multi_info_read(o->multi, &left))) {
        if (m->msg != CURLMSG_DONE)
            continue;
        CURL *easy = m->easy_handle;
        CURLcode res = m->data.result;
        rn_fetch *f = NULL;
        curl_easy_getinfo(easy, CURLINFO_PRIVATE, (char **)&f);
        rn_fetch_result r = {.failure = failure_of(f, res),
                             .status = f->status,
                             .received = f->received,
                             .headers = (const char *)f->head.data,
                             .headers_len = f->head.len};
        if (!status_ok(f->status) || (!f->into && f->sink_fd < 0)) {
            r.body = f->answer.data;
            r.body_len = f->answer.len;
        }
        if (r.failure == RN_FETCH_POLICY)
            r.error = o->policy_refusal;
        else if (f->local != RN_FETCH_ANSWERED)
            r.error = f->local_error;
        else if (r.failure != RN_FETCH_ANSWERED)
            r.error = f->error[0] ? f->error : curl_easy_strerror(res);
        fetch_detach(f);
        f->fn(f->arg, &r);
        fetch_free(f);
    }
    start_queued(o);
}

static void on_poll(uv_poll_t *h, int status, int events) {
    sock_ctx *c = h->data;
    rn_outbound *o = c->o;
    int flags = status < 0 ? CURL_CSELECT_ERR
                           : ((events & UV_READABLE) ? CURL_CSELECT_IN : 0) |
                                 ((events & UV_WRITABLE) ? CURL_CSELECT_OUT : 0);
    int running;
    curl_multi_socket_action(o->multi, c->fd, flags, &running);
    drain(o);
}

static int on_socket(CURL *easy, curl_socket_t fd, int what, void *userp, void *socketp) {
    rn_outbound *o = userp;
    sock_ctx *c = socketp;
    (void)easy;
    if (what == CURL_POLL_REMOVE) {
        if (c) {
            curl_multi_assign(o->multi, fd, NULL);
            sock_close(o, c);
        }
        return 0;
    }
    if (!c) {
        c = rn_xcalloc(1, sizeof *c);
        c->o = o;
        c->fd = fd;
        if (uv_poll_init_socket(o->loop, &c->poll, fd) != 0) {
            free(c);
            return -1;
        }
        c->poll.data = c;
        rn_list_push_front(&o->socks, &c->link);
        curl_multi_assign(o->multi, fd, c);
    }
    int events =
        ((what & CURL_POLL_IN) ? UV_READABLE : 0) | ((what & CURL_POLL_OUT) ? UV_WRITABLE : 0);
    uv_poll_start(&c->poll, events, on_poll);
    return 0;
}

static void on_timer(uv_timer_t *t) {
    rn_outbound *o = t->data;
    int running;
    curl_multi_socket_action(o->multi, CURL_SOCKET_TIMEOUT, 0, &running);
    drain(o);
}

static int on_curl_timer(CURLM *multi, long timeout_ms, void *userp) {
    rn_outbound *o = userp;
    (void)multi;
    if (timeout_ms < 0)
        uv_timer_stop(&o->timer);
    else
        uv_timer_start(&o->timer, on_timer, (uint64_t)timeout_ms, 0);
    return 0;
}

/* Stops the transfer from a callback for a reason of ours. */
static size_t stop_local(rn_fetch *f, rn_fetch_failure why, const char *what, int err) {
    f->local = why;
    if (err)
        snprintf(f->local_error, sizeof f->local_error, "%s: %s", what, strerror(err));
    else
        snprintf(f->local_error, sizeof f->local_error, "%s", what);
    return 0;
}

static size_t on_write(char *data, size_t size, size_t nmemb, void *userdata) {
    rn_fetch *f = userdata;
    size_t n = size * nmemb;
    if (!status_ok(f->status)) {
        size_t room = RN_FETCH_MAX_BODY - f->answer.len;
        rn_buf_append(&f->answer, data, n < room ? n : room);
        return n;
    }
    size_t take = n;
    if (f->received + n > f->sink_cap) {
        if (f->strict_size)
            return stop_local(f, RN_FETCH_TOO_LARGE, "the answer is larger than expected", 0);
        take = (size_t)(f->sink_cap - f->received);
    }
    if (f->into) {
        memcpy(f->into + f->received, data, take);
    } else if (f->sink_fd >= 0) {
        for (size_t done = 0; done < take;) {
            ssize_t w = pwrite(f->sink_fd, data + done, take - done,
                               (off_t)(f->sink_offset + f->received + done));
            if (w < 0 && errno == EINTR)
                continue;
            if (w <= 0)
                return stop_local(f, RN_FETCH_LOCAL_IO, "writing the answer", w < 0 ? errno : EIO);
            done += (size_t)w;
        }
    } else {
        rn_buf_append(&f->answer, data, take);
    }
    f->received += take;
    return n;
}

static size_t on_header(char *data, size_t size, size_t nmemb, void *userdata) {
    rn_fetch *f = userdata;
    size_t n = size * nmemb;
    if (n > 5 && memcmp(data, "HTTP/", 5) == 0) {
        /* a new answer begins (after a 100 Continue, say): keep the last */
        f->head.len = 0;
        f->answer.len = 0;
        f->received = 0;
        const char *sp = memchr(data, ' ', n);
        f->status = sp ? strtol(sp + 1, NULL, 10) : 0;
        return n;
    }
    if (f->head.len + n <= MAX_HEADER_BYTES)
        rn_buf_append(&f->head, data, n);
    return n;
}

static size_t on_read(char *buffer, size_t size, size_t nitems, void *userdata) {
    rn_fetch *f = userdata;
    size_t room = size * nitems;
    uint64_t left = f->body_len - f->body_pos;
    size_t n = left < room ? (size_t)left : room;
    if (n == 0)
        return 0;
    if (f->body_fd < 0) {
        memcpy(buffer, f->data + f->body_pos, n);
    } else {
        ssize_t r;
        do
            r = pread(f->body_fd, buffer, n, (off_t)(f->body_offset + f->body_pos));
        while (r < 0 && errno == EINTR);
        if (r <= 0) {
            stop_local(f, RN_FETCH_LOCAL_IO, "reading the request body", r < 0 ? errno : EIO);
            return CURL_READFUNC_ABORT;
        }
        n = (size_t)r;
    }
    f->body_pos += n;
    return n;
}

/* curl rewinds the body when it must send the request again (a reused
 * connection that turned out closed). */
static int on_seek(void *userdata, curl_off_t offset, int origin) {
    rn_fetch *f = userdata;
    if (origin != SEEK_SET || offset < 0 || (uint64_t)offset > f->body_len)
        return CURL_SEEKFUNC_CANTSEEK;
    f->body_pos = (uint64_t)offset;
    return CURL_SEEKFUNC_OK;
}

static curl_socket_t on_open_socket(void *clientp, curlsocktype purpose,
                                    struct curl_sockaddr *addr) {
    rn_fetch *f = clientp;
    rn_outbound *o = f->o;
    if (purpose != CURLSOCKTYPE_IPCXN || (o->policy && !o->policy(o->policy_arg, &addr->addr))) {
        f->refused = 1;
        return CURL_SOCKET_BAD;
    }
    return socket(addr->family, addr->socktype | SOCK_CLOEXEC, addr->protocol);
}

rn_outbound *rn_outbound_new(uv_loop_t *loop, const rn_outbound_config *cfg) {
    assert(cfg->max_running >= 1);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    rn_outbound *o = rn_xcalloc(1, sizeof *o);
    o->loop = loop;
    o->policy = cfg->policy;
    o->policy_arg = cfg->policy_arg;
    o->policy_refusal =
        rn_xstrdup(cfg->policy_refusal ? cfg->policy_refusal : "the connect policy refused");
    o->max_running = cfg->max_running;
    o->max_queued = cfg->max_queued;
    o->user_agent = rn_xstrdup(cfg->user_agent);
    o->ca_file = cfg->ca_file ? rn_xstrdup(cfg->ca_file) : NULL;
    o->client_cert = cfg->client_cert ? rn_xstrdup(cfg->client_cert) : NULL;
    o->client_key = cfg->client_key ? rn_xstrdup(cfg->client_key) : NULL;
    o->sign = cfg->sign;
    o->sign_arg = cfg->sign_arg;
    o->multi = curl_multi_init();
    uv_timer_init(loop, &o->timer);
    o->timer.data = o;
    curl_multi_setopt(o->multi, CURLMOPT_SOCKETFUNCTION, on_socket);
    curl_multi_setopt(o->multi, CURLMOPT_SOCKETDATA, o);
    curl_multi_setopt(o->multi, CURLMOPT_TIMERFUNCTION, on_curl_timer);
    curl_multi_setopt(o->multi, CURLMOPT_TIMERDATA, o);
    return o;
}

static void set_method(rn_fetch *f, const char *method) {
    CURL *e = f->easy;
    if (strcmp(method, "GET") == 0) {
        curl_easy_setopt(e, CURLOPT_HTTPGET, 1L);
    } else if (strcmp(method, "HEAD") == 0) {
        curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
    } else if (strcmp(method, "PUT") == 0) {
        curl_easy_setopt(e, CURLOPT_UPLOAD, 1L);
        curl_easy_setopt(e, CURLOPT_INFILESIZE_LARGE, (curl_off_t)f->body_len);
    } else if (strcmp(method, "POST") == 0) {
        curl_easy_setopt(e, CURLOPT_POST, 1L);
        curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)f->body_len);
    } else {
        assert(f->body_len == 0); /* DELETE and the like carry no body here */
        curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, method);
    }
}

/* Appends the signer's header lines to f's headers. */
static void add_signature(rn_outbound *o, rn_fetch *f, const rn_fetch_request *req) {
    assert(f->body_fd < 0); /* a signed request's body is in memory */
    rn_buf lines = {0};
    o->sign(o->sign_arg, req->method, req->url, f->data, f->body_len, &lines);
    rn_buf_append_byte(&lines, '\0');
    char *line = (char *)lines.data;
    for (char *end; (end = strstr(line, "\r\n")) != NULL; line = end + 2) {
        *end = '\0';
        f->headers = curl_slist_append(f->headers, line);
    }
    rn_buf_free(&lines);
}

rn_fetch *rn_outbound_start(rn_outbound *o, const rn_fetch_request *req, rn_fetch_fn fn,
                            void *arg) {
    assert(req->method && req->url && fn);
    assert(!req->into || req->sink_cap <= SIZE_MAX);
    if (o->stopped || (o->nrunning >= o->max_running && o->nqueued >= o->max_queued)) {
        if (req->body)
            rn_buf_free(req->body);
        return NULL;
    }
    rn_fetch *f = rn_xcalloc(1, sizeof *f);
    f->o = o;
    f->fn = fn;
    f->arg = arg;
    f->body_fd = -1;
    if (req->body) {
        f->owned = *req->body;
        *req->body = (rn_buf){0};
        f->data = f->owned.data;
        f->body_len = f->owned.len;
    } else if (req->data) {
        f->data = req->data;
        f->body_len = req->len;
    } else if (req->body_fd >= 0) {
        f->body_fd = req->body_fd;
        f->body_offset = req->body_offset;
        f->body_len = req->body_len;
    }
    f->into = req->into;
    f->sink_fd = req->into ? -1 : req->sink_fd;
    f->sink_offset = req->sink_offset;
    f->sink_cap = req->sink_cap;
    f->strict_size = req->strict_size;
    for (size_t i = 0; i < req->nheaders; i++)
        f->headers = curl_slist_append(f->headers, req->headers[i]);
    if (o->sign)
        add_signature(o, f, req);
    f->headers = curl_slist_append(f->headers, "Expect:"); /* no 100-continue round trip */
    CURL *e = f->easy = curl_easy_init();
    set_method(f, req->method);
    curl_easy_setopt(e, CURLOPT_URL, req->url);
    curl_easy_setopt(e, CURLOPT_PRIVATE, f);
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, f->headers);
    curl_easy_setopt(e, CURLOPT_USERAGENT, o->user_agent);
    curl_easy_setopt(e, CURLOPT_READFUNCTION, on_read);
    curl_easy_setopt(e, CURLOPT_READDATA, f);
    curl_easy_setopt(e, CURLOPT_SEEKFUNCTION, on_seek);
    curl_easy_setopt(e, CURLOPT_SEEKDATA, f);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_write);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, f);
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, f);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, f->error);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)req->timeout_ms);
    curl_easy_setopt(e, CURLOPT_BUFFERSIZE, (long)TRANSFER_BUFFER);
    curl_easy_setopt(e, CURLOPT_UPLOAD_BUFFERSIZE, (long)TRANSFER_BUFFER);
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(e, CURLOPT_PROXY, "");
    curl_easy_setopt(e, CURLOPT_PATH_AS_IS, req->path_as_is ? 1L : 0L);
    if (o->ca_file)
        curl_easy_setopt(e, CURLOPT_CAINFO, o->ca_file);
    if (o->client_cert) {
        curl_easy_setopt(e, CURLOPT_SSLCERT, o->client_cert);
        curl_easy_setopt(e, CURLOPT_SSLKEY, o->client_key);
    }
    curl_easy_setopt(e, CURLOPT_OPENSOCKETFUNCTION, on_open_socket);
    curl_easy_setopt(e, CURLOPT_OPENSOCKETDATA, f);
    if (o->nrunning < o->max_running) {
        fetch_run(f);
    } else {
        rn_list_push_back(&o->queue, &f->link);
        o->nqueued++;
    }
    return f;
}

const char *rn_fetch_header(const rn_fetch_result *r, const char *name, size_t *len) {
    size_t nlen = strlen(name);
    const char *p = r->headers, *end = r->headers + r->headers_len;
    while (p && p < end) {
        const char *eol = memchr(p, '\n', (size_t)(end - p));
        const char *line_end = eol ? eol : end;
        if ((size_t)(line_end - p) > nlen && p[nlen] == ':' && strncasecmp(p, name, nlen) == 0) {
            const char *v = p + nlen + 1, *ve = line_end;
            while (v < ve && (*v == ' ' || *v == '\t'))
                v++;
            while (ve > v && (ve[-1] == '\r' || ve[-1] == ' ' || ve[-1] == '\t'))
                ve--;
            *len = (size_t)(ve - v);
            return v;
        }
        p = eol ? eol + 1 : end;
    }
    return NULL;
}

void rn_fetch_cancel(rn_fetch *f) {
    rn_outbound *o = f->o;
    fetch_detach(f);
    fetch_free(f);
    start_queued(o);
}

void rn_outbound_stop(rn_outbound *o) {
    if (o->stopped)
        return;
    o->stopped = 1;
    while (!rn_list_empty(&o->queue))
        rn_fetch_cancel(rn_list_entry(o->queue.first, rn_fetch, link));
    while (!rn_list_empty(&o->fetches))
        rn_fetch_cancel(rn_list_entry(o->fetches.first, rn_fetch, link));
    while (!rn_list_empty(&o->socks))
        sock_close(o, rn_list_entry(o->socks.first, sock_ctx, link));
    curl_multi_setopt(o->multi, CURLMOPT_SOCKETFUNCTION, NULL);
    curl_multi_setopt(o->multi, CURLMOPT_TIMERFUNCTION, NULL);
    curl_multi_cleanup(o->multi);
    o->multi = NULL;
    uv_close((uv_handle_t *)&o->timer, NULL);
}

void rn_outbound_free(rn_outbound *o) {
    if (!o)
        return;
    free(o->user_agent);
    free(o->policy_refusal);
    free(o->ca_file);
    free(o->client_cert);
    free(o->client_key);
    free(o);
    curl_global_cleanup();
}
