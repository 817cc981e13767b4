/*
 * outbound.c — libcurl multi on libuv. See outbound.h.
 *
 * Socket contexts (one uv_poll_t per socket curl asks us to watch) and
 * fetches are kept on lists so shutdown can close what curl still holds.
 * A poll handle is stopped before it is closed, which frees its fd slot in
 * the loop at once: curl may open a new socket with the same number before
 * the close callback ran.
 */
#include "subs/outbound.h"
#include "subs/url.h"

#include <curl/curl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

typedef struct sock_ctx {
    uv_poll_t poll;
    rn_outbound *o;
    curl_socket_t fd;
    struct sock_ctx *prev, *next;
} sock_ctx;

struct rn_fetch {
    rn_outbound *o;
    CURL *easy;
    struct curl_slist *headers;
    rn_buf body, answer;
    rn_fetch_fn fn;
    void *arg;
    int refused; /* the connect policy refused an address */
    char error[CURL_ERROR_SIZE];
    rn_fetch *prev, *next;
};

struct rn_outbound {
    uv_loop_t *loop;
    CURLM *multi;
    uv_timer_t timer;
    int allow_loopback;
    int stopped;
    char *user_agent;
    rn_fetch *fetches;
    sock_ctx *socks;
};

#define LIST_ADD(head, x)                                                                          \
    do {                                                                                           \
        (x)->prev = NULL;                                                                          \
        (x)->next = (head);                                                                        \
        if (head)                                                                                  \
            (head)->prev = (x);                                                                    \
        (head) = (x);                                                                              \
    } while (0)

#define LIST_DEL(head, x)                                                                          \
    do {                                                                                           \
        if ((x)->prev)                                                                             \
            (x)->prev->next = (x)->next;                                                           \
        else                                                                                       \
            (head) = (x)->next;                                                                    \
        if ((x)->next)                                                                             \
            (x)->next->prev = (x)->prev;                                                           \
    } while (0)

static void on_sock_closed(uv_handle_t *h) {
    free(h->data);
}

static void sock_close(rn_outbound *o, sock_ctx *c) {
    LIST_DEL(o->socks, c);
    uv_poll_stop(&c->poll);
    uv_close((uv_handle_t *)&c->poll, on_sock_closed);
}

static void fetch_free(rn_fetch *f) {
    curl_easy_cleanup(f->easy);
    curl_slist_free_all(f->headers);
    rn_buf_free(&f->body);
    rn_buf_free(&f->answer);
    free(f);
}

/* Takes a fetch out of the multi handle and off the list. */
static void fetch_detach(rn_fetch *f) {
    curl_multi_remove_handle(f->o->multi, f->easy);
    LIST_DEL(f->o->fetches, f);
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
        rn_fetch_result r = {.body = f->answer.data, .body_len = f->answer.len};
        if (res == CURLE_OK)
            curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &r.status);
        else if (f->refused)
            r.error = "the host resolved only to addresses the webhook policy refuses";
        else
            r.error = f->error[0] ? f->error : curl_easy_strerror(res);
        fetch_detach(f);
        f->fn(f->arg, &r);
        fetch_free(f);
    }
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
        LIST_ADD(o->socks, c);
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

static size_t on_write(char *data, size_t size, size_t nmemb, void *userdata) {
    rn_fetch *f = userdata;
    size_t n = size * nmemb;
    size_t room = RN_FETCH_MAX_BODY - f->answer.len;
    rn_buf_append(&f->answer, data, n < room ? n : room);
    return n;
}

static curl_socket_t on_open_socket(void *clientp, curlsocktype purpose,
                                    struct curl_sockaddr *addr) {
    rn_fetch *f = clientp;
    if (purpose != CURLSOCKTYPE_IPCXN ||
        !rn_webhook_addr_allowed(&addr->addr, f->o->allow_loopback)) {
        f->refused = 1;
        return CURL_SOCKET_BAD;
    }
    return socket(addr->family, addr->socktype | SOCK_CLOEXEC, addr->protocol);
}

rn_outbound *rn_outbound_new(uv_loop_t *loop, int allow_loopback, const char *user_agent) {
    curl_global_init(CURL_GLOBAL_DEFAULT);
    rn_outbound *o = rn_xcalloc(1, sizeof *o);
    o->loop = loop;
    o->allow_loopback = allow_loopback;
    o->user_agent = rn_xstrdup(user_agent);
    o->multi = curl_multi_init();
    uv_timer_init(loop, &o->timer);
    o->timer.data = o;
    curl_multi_setopt(o->multi, CURLMOPT_SOCKETFUNCTION, on_socket);
    curl_multi_setopt(o->multi, CURLMOPT_SOCKETDATA, o);
    curl_multi_setopt(o->multi, CURLMOPT_TIMERFUNCTION, on_curl_timer);
    curl_multi_setopt(o->multi, CURLMOPT_TIMERDATA, o);
    curl_multi_setopt(o->multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, 256L);
    return o;
}

rn_fetch *rn_outbound_post(rn_outbound *o, const char *url, const char *const *headers,
                           size_t nheaders, rn_buf *body, uint64_t timeout_ms, rn_fetch_fn fn,
                           void *arg) {
    rn_fetch *f = rn_xcalloc(1, sizeof *f);
    f->o = o;
    f->fn = fn;
    f->arg = arg;
    f->body = *body;
    *body = (rn_buf){0};
    for (size_t i = 0; i < nheaders; i++)
        f->headers = curl_slist_append(f->headers, headers[i]);
    f->headers = curl_slist_append(f->headers, "Expect:"); /* no 100-continue round trip */
    CURL *e = f->easy = curl_easy_init();
    curl_easy_setopt(e, CURLOPT_URL, url);
    curl_easy_setopt(e, CURLOPT_PRIVATE, f);
    curl_easy_setopt(e, CURLOPT_POST, 1L);
    curl_easy_setopt(e, CURLOPT_POSTFIELDS, f->body.data ? (char *)f->body.data : "");
    curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)f->body.len);
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, f->headers);
    curl_easy_setopt(e, CURLOPT_USERAGENT, o->user_agent);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_write);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, f);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, f->error);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)timeout_ms);
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(e, CURLOPT_PROXY, "");
    curl_easy_setopt(e, CURLOPT_OPENSOCKETFUNCTION, on_open_socket);
    curl_easy_setopt(e, CURLOPT_OPENSOCKETDATA, f);
    LIST_ADD(o->fetches, f);
    curl_multi_add_handle(o->multi, e);
    return f;
}

void rn_fetch_cancel(rn_fetch *f) {
    fetch_detach(f);
    fetch_free(f);
}

void rn_outbound_stop(rn_outbound *o) {
    if (o->stopped)
        return;
    o->stopped = 1;
    while (o->fetches)
        rn_fetch_cancel(o->fetches);
    while (o->socks)
        sock_close(o, o->socks);
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
    free(o);
    curl_global_cleanup();
}
