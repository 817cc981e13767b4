/*
 * listen.h — the listening sockets of the HTTP server: the host of --listen
 * resolved (an IP literal, or a name such as localhost), one socket per
 * address it names, and which of those addresses other hosts can reach.
 */
#ifndef RN_LISTEN_H
#define RN_LISTEN_H

#include <stddef.h>
#include <sys/socket.h>
#include <uv.h>

#define RN_LISTEN_MAX 8 /* addresses of one name listened on at most */

typedef struct {
    struct sockaddr_storage addr[RN_LISTEN_MAX]; /* the addresses resolved */
    uv_tcp_t tcp[RN_LISTEN_MAX];                 /* the listener of each */
    int listening[RN_LISTEN_MAX];                /* which listen (not closed) */
    int count;                                   /* addresses resolved */
} rn_listeners;

/* Resolves host (blocking: for the start) and listens on port at every
 * address it names, the first RN_LISTEN_MAX of them, each listener's data
 * set to data. An address this machine does not have (a name's IPv6
 * address on a host without IPv6) is skipped while another one listens.
 * Returns 0, or -1 with err filled and nothing left open (run the loop to
 * finish closing). */
int rn_listeners_open(rn_listeners *ls, uv_loop_t *loop, const char *host, int port,
                      uv_connection_cb on_connection, void *data, char *err, size_t errcap);

/* Closes every listener (run the loop to finish closing). */
void rn_listeners_close(rn_listeners *ls);

/* Writes the addresses listened on, as "127.0.0.1:4437, [::1]:4437", to
 * out. Returns how many of them other hosts can reach: every address but
 * loopback ones (a wildcard such as 0.0.0.0 included). */
int rn_listeners_describe(const rn_listeners *ls, char *out, size_t cap);

#endif
