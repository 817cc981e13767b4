/*
 * test_routing.c — the library through its whole HTTP stack against
 * scripted servers (fake_server.c), for what one Runnel node cannot be
 * made to do on demand: a redirect to the leader with x-ursula-raft-*
 * headers (followed, and remembered by the cluster-aware mode until a
 * NO_LEADER), a redirected producer write, a proxy's 2xx without a typed
 * answer and its 408 (unknown), and two in-flight producer writes answered
 * in an order that makes the later one look like a gap after the earlier
 * one held.
 */
#include "fake_server.h"
#include "support.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#define HEAD_OK                                                                                    \
    "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nStream-Next-Offset: "                          \
    "00000000000000000000\r\nStream-Incarnation: 4503599627370497\r\nContent-Length: 0\r\n\r\n"

/* A receipt for seq (offsets are the seq, zero-padded). */
static void receipt(char *out, size_t cap, int status, unsigned seq) {
    snprintf(out, cap,
             "HTTP/1.1 %d %s\r\nStream-Offset: %020u\r\nStream-Next-Offset: %020u\r\n"
             "Producer-Epoch: 0\r\nProducer-Seq: %u\r\nContent-Length: 0\r\n\r\n",
             status, status == 200 ? "OK" : "No Content", seq, seq + 1, seq);
}

/* --- the leader and the node that redirects to it --- */

typedef struct {
    fake_server *leader;
    int no_leader_once; /* the next write gets 503 NO_LEADER */
    unsigned writes;
} cluster;

static void leader_script(fake_server *f, fake_request *reqs, int n, void *arg) {
    cluster *c = arg;
    for (int i = 0; i < n; i++) {
        fake_request *r = &reqs[i];
        if (!r->pending)
            continue;
        char seq[32], out[512];
        if (strcmp(r->method, "HEAD") == 0) {
            fake_answer(f, r, HEAD_OK);
        } else if (c->no_leader_once) {
            c->no_leader_once = 0;
            fake_answer(
                f, r,
                "HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\nx-ursula-raft-group: "
                "g7\r\nContent-Type: application/json\r\nContent-Length: 52\r\n\r\n"
                "{\"error\":{\"code\":\"NO_LEADER\",\"message\":\"no leader\"}}");
        } else if (fake_header(r, "Producer-Seq", seq, sizeof seq)[0]) {
            c->writes++;
            receipt(out, sizeof out, 200, (unsigned)atoi(seq));
            fake_answer(f, r, out);
        } else {
            c->writes++;
            fake_answer(f, r,
                        "HTTP/1.1 204 No Content\r\nStream-Next-Offset: 00000000000000000009\r\n"
                        "\r\n");
        }
    }
}

static void redirect_script(fake_server *f, fake_request *reqs, int n, void *arg) {
    cluster *c = arg;
    for (int i = 0; i < n; i++) {
        fake_request *r = &reqs[i];
        if (!r->pending)
            continue;
        char out[1024];
        snprintf(
            out, sizeof out,
            "HTTP/1.1 307 Temporary Redirect\r\nLocation: %s%s\r\nx-ursula-raft-leader-id: "
            "2\r\nx-ursula-raft-group: g7\r\nx-ursula-raft-term: 3\r\nContent-Length: 0\r\n\r\n",
            fake_url(c->leader), r->path);
        fake_answer(f, r, out);
    }
}

static void cluster_aware(void **state) {
    cluster c = {0};
    c.leader = fake_start(leader_script, &c);
    fake_server *node = fake_start(redirect_script, &c);
    runnel_client_options o = {.base_url = fake_url(node), .cluster_aware = 1};
    runnel_client *cl = runnel_client_new(&o);
    runnel_answer a;
    runnel_body b = {.data = "x", .len = 1};
    runnel_append_options ao = {.content_type = "text/plain"};
    /* redirected (nothing applied there), followed, applied at the leader */
    assert_int_equal(runnel_append(cl, "/orders/eu-1", &b, &ao, &a), RUNNEL_OK);
    assert_int_equal(a.outcome, RUNNEL_APPLIED);
    assert_int_equal(fake_count(node), 1);
    assert_true(strncmp(a.url, fake_url(c.leader), strlen(fake_url(c.leader))) == 0);
    /* remembered: the next write goes to the leader directly */
    assert_int_equal(runnel_append(cl, "/orders/eu-1", &b, &ao, &a), RUNNEL_OK);
    assert_int_equal(fake_count(node), 1);
    assert_int_equal(c.writes, 2);
    /* NO_LEADER proves a refusal and forgets the leader */
    c.no_leader_once = 1;
    assert_int_equal(runnel_append(cl, "/orders/eu-1", &b, &ao, &a), RUNNEL_E_REFUSED);
    assert_string_equal(a.error_code, "NO_LEADER");
    assert_int_equal(runnel_append(cl, "/orders/eu-1", &b, &ao, &a), RUNNEL_OK);
    assert_int_equal(fake_count(node), 2); /* back to the node it was given */
    /* without following, a redirect is the outcome */
    runnel_client_options plain = {.base_url = fake_url(node), .max_redirects = -1};
    runnel_client *nofollow = runnel_client_new(&plain);
    assert_int_equal(runnel_append(nofollow, "/orders/eu-1", &b, &ao, &a), RUNNEL_E_STATUS);
    assert_int_equal(a.outcome, RUNNEL_REDIRECTED);
    assert_string_equal(a.raft_group, "g7");
    /* a producer's writes are redirected too (nothing applied at the node) */
    runnel_producer_options po = {.id = "p"};
    runnel_producer *p;
    char err[256];
    assert_int_equal(runnel_producer_open(cl, "/orders/eu-2", &po, &p, err, sizeof err), RUNNEL_OK);
    for (int i = 0; i < 5; i++)
        assert_int_equal(runnel_producer_send(p, "y", 1, (uint64_t)i + 1), RUNNEL_OK);
    assert_int_equal(runnel_producer_flush(p), RUNNEL_OK);
    runnel_producer_free(p);
    runnel_client_free(nofollow);
    runnel_client_free(cl);
    fake_stop(node);
    fake_stop(c.leader);
}

/* --- a proxy in front --- */

typedef struct {
    int step;
} proxy;

static void proxy_script(fake_server *f, fake_request *reqs, int n, void *arg) {
    proxy *x = arg;
    for (int i = 0; i < n; i++) {
        fake_request *r = &reqs[i];
        if (!r->pending)
            continue;
        char seq[32], out[512];
        if (strcmp(r->method, "HEAD") == 0) {
            fake_answer(f, r, HEAD_OK);
        } else if (x->step++ == 0) { /* a 200 from a layer that is not the server */
            fake_answer(f, r, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
        } else if (x->step == 2) {
            fake_answer(f, r, "HTTP/1.1 408 Request Timeout\r\nContent-Length: 0\r\n\r\n");
        } else if (fake_header(r, "Producer-Seq", seq, sizeof seq)[0]) {
            receipt(out, sizeof out, 200, (unsigned)atoi(seq));
            fake_answer(f, r, out);
        } else {
            fake_answer(f, r, "HTTP/1.1 204 No Content\r\nStream-Next-Offset: 1\r\n\r\n");
        }
    }
}

static void proxy_answers(void **state) {
    proxy x = {0};
    fake_server *f = fake_start(proxy_script, &x);
    runnel_client_options o = {.base_url = fake_url(f)};
    runnel_client *c = runnel_client_new(&o);
    runnel_answer a;
    runnel_body b = {.data = "x", .len = 1};
    runnel_append_options ao = {.content_type = "text/plain"};
    assert_int_equal(runnel_append(c, "/v1/stream/s", &b, &ao, &a), RUNNEL_E_UNKNOWN);
    assert_int_equal(a.status, 200);
    assert_int_equal(a.outcome, RUNNEL_UNKNOWN); /* no Stream-Next-Offset: proves nothing */
    assert_int_equal(runnel_append(c, "/v1/stream/s", &b, &ao, &a), RUNNEL_E_UNKNOWN);
    assert_int_equal(a.status, 408);
    /* a producer repeats such answers under the same key until one proves */
    x.step = 0;
    runnel_producer_options po = {.id = "p"};
    runnel_producer *p;
    char err[256];
    assert_int_equal(runnel_producer_open(c, "/v1/stream/s", &po, &p, err, sizeof err), RUNNEL_OK);
    assert_int_equal(runnel_producer_send(p, "z", 1, 1), RUNNEL_OK);
    assert_int_equal(runnel_producer_flush(p), RUNNEL_OK);
    runnel_producer_stats st;
    runnel_producer_get_stats(p, &st);
    assert_int_equal(st.retries, 2);
    runnel_producer_free(p);
    runnel_client_free(c);
    fake_stop(f);
}

/* --- two writes in flight, answered out of order --- */

typedef struct {
    int phase;     /* 0: waiting for seq 1 and 2; 1: seq 1 answered; 2: seq 2 refused */
    int64_t since; /* when seq 1 was answered */
} crossing;

static void crossing_script(fake_server *f, fake_request *reqs, int n, void *arg) {
    crossing *x = arg;
    fake_request *one = NULL, *two = NULL;
    char seq[32], out[512];
    for (int i = 0; i < n; i++) {
        fake_request *r = &reqs[i];
        if (!r->pending)
            continue;
        if (strcmp(r->method, "HEAD") == 0) {
            fake_answer(f, r, HEAD_OK);
            continue;
        }
        unsigned s = (unsigned)atoi(fake_header(r, "Producer-Seq", seq, sizeof seq));
        if (s == 1)
            one = r;
        else if (s == 2)
            two = r;
        else {
            receipt(out, sizeof out, 200, s);
            fake_answer(f, r, out);
        }
    }
    if (x->phase == 0 && one && two) {
        /* seq 2 "arrived first": seq 1 applies, and seq 2's gap answer goes
         * out once the client has read seq 1's */
        receipt(out, sizeof out, 200, 1);
        fake_answer(f, one, out);
        x->phase = 1;
        x->since = rnc_now_ms();
    } else if (x->phase == 1 && two && rnc_now_ms() - x->since >= 200) {
        fake_answer(
            f, two,
            "HTTP/1.1 409 Conflict\r\nProducer-Expected-Seq: 1\r\nProducer-Received-Seq: "
            "2\r\nContent-Type: application/json\r\nContent-Length: 69\r\n\r\n"
            "{\"error\":{\"code\":\"PRODUCER_SEQ_CONFLICT\",\"message\":\"expected seq 1\"}}");
        x->phase = 2;
    } else if (x->phase == 2 && two) { /* sent again, in order */
        receipt(out, sizeof out, 200, 2);
        fake_answer(f, two, out);
    }
}

static void crossed_gap(void **state) {
    crossing x = {0};
    fake_server *f = fake_start(crossing_script, &x);
    runnel_client_options o = {.base_url = fake_url(f)};
    runnel_client *c = runnel_client_new(&o);
    runnel_producer_options po = {.id = "p", .window = 4};
    runnel_producer *p;
    char err[256];
    assert_int_equal(runnel_producer_open(c, "/v1/stream/s", &po, &p, err, sizeof err), RUNNEL_OK);
    for (int i = 0; i < 4; i++)
        assert_int_equal(runnel_producer_send(p, "w", 1, (uint64_t)i + 1), RUNNEL_OK);
    assert_int_equal(runnel_producer_flush(p), RUNNEL_OK);
    runnel_producer_stats st;
    runnel_producer_get_stats(p, &st);
    assert_int_equal(st.gaps, 1);
    assert_int_equal(st.acked, 4);
    runnel_producer_free(p);
    runnel_client_free(c);
    fake_stop(f);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(cluster_aware),
        cmocka_unit_test(proxy_answers),
        cmocka_unit_test(crossed_gap),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
