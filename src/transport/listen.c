/*
 * listen.c — the listening sockets: resolving --listen's host, binding
 * every address it names, describing them. See listen.h.
 */
#include "transport/listen.h"

#include <assert.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

/* The length of the address part of a resolved sockaddr. */
static socklen_t addr_len(const struct sockaddr_storage *a) {
    return a->ss_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
}

static int already_listed(const struct sockaddr_storage *list, int n,
                          const struct sockaddr_storage *a) {
    for (int i = 0; i < n; i++)
        if (list[i].ss_family == a->ss_family && memcmp(&list[i], a, addr_len(a)) == 0)
            return 1;
    return 0;
}

/* Resolves host into out[RN_LISTEN_MAX] (with port), without repeats.
 * Returns how many, or -1 with err filled. */
static int resolve(struct sockaddr_storage *out, const char *host, int port, char *err,
                   size_t errcap) {
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
    struct addrinfo *res = NULL;
    int rc = getaddrinfo(host, NULL, &hints, &res);
    if (rc != 0) {
        snprintf(err, errcap, "bad listen address %s:%d: %s", host, port, gai_strerror(rc));
        return -1;
    }
    int n = 0;
    for (struct addrinfo *ai = res; ai && n < RN_LISTEN_MAX; ai = ai->ai_next) {
        if ((ai->ai_family != AF_INET && ai->ai_family != AF_INET6) ||
            ai->ai_addrlen > sizeof out[n])
            continue;
        struct sockaddr_storage a = {0};
        memcpy(&a, ai->ai_addr, ai->ai_addrlen);
        if (a.ss_family == AF_INET)
            ((struct sockaddr_in *)&a)->sin_port = htons((uint16_t)port);
        else
            ((struct sockaddr_in6 *)&a)->sin6_port = htons((uint16_t)port);
        if (!already_listed(out, n, &a))
            out[n++] = a;
    }
    freeaddrinfo(res);
    if (n == 0)
        snprintf(err, errcap, "bad listen address %s:%d: no IPv4 or IPv6 address", host, port);
    return n > 0 ? n : -1;
}

/* "a.b.c.d:port" or "[v6]:port". */
static void format_addr(const struct sockaddr_storage *a, char *out, size_t cap) {
    char ip[INET6_ADDRSTRLEN] = "?";
    if (a->ss_family == AF_INET6) {
        const struct sockaddr_in6 *a6 = (const struct sockaddr_in6 *)a;
        uv_ip6_name(a6, ip, sizeof ip);
        snprintf(out, cap, "[%s]:%d", ip, ntohs(a6->sin6_port));
    } else {
        const struct sockaddr_in *a4 = (const struct sockaddr_in *)a;
        uv_ip4_name(a4, ip, sizeof ip);
        snprintf(out, cap, "%s:%d", ip, ntohs(a4->sin_port));
    }
}

int rn_listeners_open(rn_listeners *ls, uv_loop_t *loop, const char *host, int port,
                      uv_connection_cb on_connection, void *data, char *err, size_t errcap) {
    memset(ls, 0, sizeof *ls);
    ls->count = resolve(ls->addr, host, port, err, errcap);
    if (ls->count < 0) {
        ls->count = 0;
        return -1;
    }
    int listening = 0;
    for (int i = 0; i < ls->count; i++) {
        uv_tcp_t *t = &ls->tcp[i];
        int rc = uv_tcp_init(loop, t);
        if (rc == 0) {
            t->data = data;
            rc = uv_tcp_bind(t, (const struct sockaddr *)&ls->addr[i], 0);
            if (rc == 0)
                rc = uv_listen((uv_stream_t *)t, 1024, on_connection);
            if (rc != 0)
                uv_close((uv_handle_t *)t, NULL);
        }
        if (rc == 0) {
            int len = sizeof ls->addr[i]; /* the port the system chose for port 0 */
            uv_tcp_getsockname(t, (struct sockaddr *)&ls->addr[i], &len);
            ls->listening[i] = 1;
            listening++;
            continue;
        }
        if (rc == UV_EADDRNOTAVAIL && (listening > 0 || i + 1 < ls->count))
            continue; /* not an address of this machine: the others may do */
        char where[64];
        format_addr(&ls->addr[i], where, sizeof where);
        snprintf(err, errcap, "cannot listen on %s (%s:%d): %s", where, host, port,
                 uv_strerror(rc));
        rn_listeners_close(ls);
        return -1;
    }
    return 0;
}

void rn_listeners_close(rn_listeners *ls) {
    for (int i = 0; i < ls->count; i++) {
        if (ls->listening[i])
            uv_close((uv_handle_t *)&ls->tcp[i], NULL);
        ls->listening[i] = 0;
    }
}

/* Loopback: 127.0.0.0/8, ::1, and 127.0.0.0/8 mapped into IPv6. */
static int is_loopback(const struct sockaddr_storage *a) {
    if (a->ss_family == AF_INET)
        return (ntohl(((const struct sockaddr_in *)a)->sin_addr.s_addr) >> 24) == 127;
    const struct in6_addr *v6 = &((const struct sockaddr_in6 *)a)->sin6_addr;
    return IN6_IS_ADDR_LOOPBACK(v6) || (IN6_IS_ADDR_V4MAPPED(v6) && v6->s6_addr[12] == 127);
}

int rn_listeners_describe(const rn_listeners *ls, char *out, size_t cap) {
    assert(cap > 0);
    int reachable = 0;
    size_t len = 0;
    out[0] = 0;
    for (int i = 0; i < ls->count; i++) {
        if (!ls->listening[i])
            continue;
        char one[64];
        format_addr(&ls->addr[i], one, sizeof one);
        if (len < cap)
            len += (size_t)snprintf(out + len, cap - len, "%s%s", len ? ", " : "", one);
        reachable += !is_loopback(&ls->addr[i]);
    }
    return reachable;
}
