/*
 * fake_server.h — a scripted HTTP/1.1 server for the client tests: it
 * accepts connections on a loopback port, collects requests (head and
 * Content-Length body; Expect: 100-continue is honoured), and hands the
 * pending ones to a script that answers any of them, in any order, with
 * raw response bytes. It stands in for what one Runnel node cannot be made
 * to do on demand: redirect, answer as a cluster or a proxy would, or
 * answer two in-flight requests in a chosen order.
 */
#ifndef RN_FAKE_SERVER_H
#define RN_FAKE_SERVER_H

#include <pthread.h>
#include <stddef.h>

#define FAKE_MAX_CONN 16

typedef struct fake_server fake_server;

/* A request waiting for its answer. */
typedef struct {
    int pending; /* a complete request not answered yet */
    int conn;    /* its connection's index */
    char method[16];
    char path[1024];
    char head[8192]; /* all header lines */
    char *body;
    size_t body_len;
    unsigned seq; /* arrival order, from 1 */
} fake_request;

/* Called on the server thread whenever requests are pending (after each
 * arrival, and every 20 ms). Answers with fake_answer. */
typedef void (*fake_script)(fake_server *f, fake_request *reqs, int n, void *arg);

fake_server *fake_start(fake_script script, void *arg);
void fake_stop(fake_server *f);
/* "http://127.0.0.1:PORT" */
const char *fake_url(const fake_server *f);
/* Sends raw response bytes (status line, headers, blank line, body) for
 * the request; it is no longer pending. */
void fake_answer(fake_server *f, fake_request *r, const char *raw);
/* The value of a request header (case-insensitive name), or "" . */
const char *fake_header(const fake_request *r, const char *name, char *out, size_t cap);
/* Requests received so far. */
unsigned fake_count(fake_server *f);

#endif
