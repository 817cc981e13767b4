/*
 * test_shoulds.c — the client SHOULDs of extensions §10 and §3 that the
 * library keeps (issue 25, item 9):
 *   - the request limit: no body larger than the last
 *     Ursula-Max-Request-Bytes read (32 MiB before one, and never more),
 *     refused before anything is sent, by a call and by a producer
 *     (scripted servers, fake_server.c);
 *   - the deployment: a producer keeps the Ursula-Cluster-Id with its state
 *     and treats another id as another deployment: a state file recorded
 *     with one is refused against the other, and an answer from another
 *     ends the producer (a scripted server whose id changes);
 *   - retention: a tail whose offset the stream retained away stops with
 *     RUNNEL_TAIL_RETAINED and the retained offset (so that the caller can
 *     bootstrap), not as a deleted stream; a deleted one is still
 *     RUNNEL_TAIL_GONE (a live server).
 */
#include "fake_server.h"
#include "support.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

/* A scripted deployment: HEAD names its limit and cluster id, a producer
 * write gets its receipt, any other write a 204. */
typedef struct {
    long long limit;     /* Ursula-Max-Request-Bytes; 0: none sent */
    char cluster_id[32]; /* Ursula-Cluster-Id */
    unsigned writes;     /* POSTs received */
} deployment;

static void deployment_script(fake_server *f, fake_request *reqs, int n, void *arg) {
    deployment *d = arg;
    for (int i = 0; i < n; i++) {
        fake_request *r = &reqs[i];
        if (!r->pending)
            continue;
        char limit[64] = "", seq[32], out[1024];
        if (d->limit)
            snprintf(limit, sizeof limit, "Ursula-Max-Request-Bytes: %lld\r\n", d->limit);
        if (strcmp(r->method, "HEAD") == 0) {
            snprintf(out, sizeof out,
                     "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nStream-Next-Offset: "
                     "00000000000000000000\r\nStream-Incarnation: 4503599627370497\r\n"
                     "Ursula-Protocol: 2\r\nUrsula-Cluster-Id: %s\r\n%sContent-Length: 0\r\n\r\n",
                     d->cluster_id, limit);
        } else if (fake_header(r, "Producer-Seq", seq, sizeof seq)[0]) {
            d->writes++;
            unsigned s = (unsigned)atoi(seq);
            snprintf(out, sizeof out,
                     "HTTP/1.1 200 OK\r\nStream-Offset: %020u\r\nStream-Next-Offset: %020u\r\n"
                     "Producer-Epoch: 0\r\nProducer-Seq: %u\r\nUrsula-Protocol: 2\r\n"
                     "Ursula-Cluster-Id: %s\r\n%sContent-Length: 0\r\n\r\n",
                     s, s + 1, s, d->cluster_id, limit);
        } else {
            d->writes++;
            snprintf(out, sizeof out,
                     "HTTP/1.1 204 No Content\r\nStream-Next-Offset: 00000000000000000009\r\n"
                     "Ursula-Protocol: 2\r\nUrsula-Cluster-Id: %s\r\n%s\r\n",
                     d->cluster_id, limit);
        }
        fake_answer(f, r, out);
    }
}

static char *filled(size_t n) {
    char *b = malloc(n);
    assert_non_null(b);
    memset(b, 'x', n);
    return b;
}

/* --- §10 the request limit --- */

static void request_limit(void **state) {
    deployment d = {.limit = 1000, .cluster_id = "dep-a"};
    fake_server *f = fake_start(deployment_script, &d);
    runnel_client_options o = {.base_url = fake_url(f)};
    runnel_client *c = runnel_client_new(&o);
    assert_int_equal(runnel_client_max_request_bytes(c), 33554432); /* none read yet */
    runnel_answer a;
    assert_int_equal(runnel_head(c, "/v1/stream/s", NULL, &a), RUNNEL_OK);
    assert_int_equal(runnel_client_max_request_bytes(c), 1000);

    char *big = filled(1001);
    runnel_append_options ao = {.content_type = "text/plain"};
    runnel_body b = {.data = big, .len = 1001};
    unsigned before = fake_count(f);
    assert_int_equal(runnel_append(c, "/v1/stream/s", &b, &ao, &a), RUNNEL_E_USAGE);
    assert_non_null(strstr(a.transport_message, "Ursula-Max-Request-Bytes"));
    assert_int_equal(fake_count(f), before); /* nothing was sent */
    assert_int_equal(d.writes, 0);
    b.len = 1000;
    assert_int_equal(runnel_append(c, "/v1/stream/s", &b, &ao, &a), RUNNEL_OK);
    assert_int_equal(d.writes, 1);

    /* a producer learns it from its HEAD and refuses a longer write */
    runnel_producer_options po = {.id = "p"};
    runnel_producer *p;
    char err[256];
    assert_int_equal(runnel_producer_open(c, "/v1/stream/s", &po, &p, err, sizeof err), RUNNEL_OK);
    assert_int_equal(runnel_producer_send(p, big, 1001, 1), RUNNEL_E_USAGE);
    assert_int_equal(runnel_producer_send(p, big, 1000, 1), RUNNEL_OK);
    assert_int_equal(runnel_producer_flush(p), RUNNEL_OK);
    assert_int_equal(d.writes, 2);
    runnel_producer_free(p);

    /* a limit above the protocol's is never believed */
    d.limit = 40000000;
    assert_int_equal(runnel_head(c, "/v1/stream/s", NULL, &a), RUNNEL_OK);
    assert_int_equal(runnel_client_max_request_bytes(c), 33554432);
    free(big);
    runnel_client_free(c);
    fake_stop(f);
}

/* --- §10 the deployment kept with a producer's state --- */

static void cluster_id_with_state(void **state) {
    deployment d = {.cluster_id = "dep-a"};
    fake_server *f = fake_start(deployment_script, &d);
    runnel_client_options o = {.base_url = fake_url(f)};
    runnel_client *c = runnel_client_new(&o);
    char path[] = "/tmp/runnel-shoulds-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    unlink(path);
    runnel_producer_options po = {.id = "p", .state_path = path};
    runnel_producer *p;
    char err[512];
    assert_int_equal(runnel_producer_open(c, "/v1/stream/s", &po, &p, err, sizeof err), RUNNEL_OK);
    assert_int_equal(runnel_producer_send(p, "a", 1, 1), RUNNEL_OK);
    assert_int_equal(runnel_producer_flush(p), RUNNEL_OK);
    runnel_producer_free(p);
    /* the state names the deployment */
    FILE *sf = fopen(path, "r");
    assert_non_null(sf);
    char text[4096] = "";
    size_t n = fread(text, 1, sizeof text - 1, sf);
    text[n] = 0;
    fclose(sf);
    assert_non_null(strstr(text, "\ncluster_id dep-a\n"));

    /* the same URL now served by another deployment: the state is refused */
    snprintf(d.cluster_id, sizeof d.cluster_id, "dep-b");
    assert_int_equal(runnel_producer_open(c, "/v1/stream/s", &po, &p, err, sizeof err),
                     RUNNEL_E_STATE);
    assert_non_null(strstr(err, "dep-a"));
    assert_non_null(strstr(err, "dep-b"));
    assert_null(p);

    /* back to its own deployment it resumes; an answer from another ends it */
    snprintf(d.cluster_id, sizeof d.cluster_id, "dep-a");
    assert_int_equal(runnel_producer_open(c, "/v1/stream/s", &po, &p, err, sizeof err), RUNNEL_OK);
    snprintf(d.cluster_id, sizeof d.cluster_id, "dep-b");
    runnel_producer_send(p, "b", 1, 2);
    assert_int_equal(runnel_producer_flush(p), RUNNEL_E_STATE);
    char why[320];
    assert_non_null(runnel_producer_failure(p, NULL, NULL, why, sizeof why));
    assert_non_null(strstr(why, "deployment dep-b"));
    runnel_producer_free(p);
    unlink(path);
    char lock[64];
    snprintf(lock, sizeof lock, "%s.lock", path);
    unlink(lock);
    runnel_client_free(c);
    fake_stop(f);
}

/* --- §3 a tail below the retained offset --- */

typedef struct {
    int events[8];
    char retained[RUNNEL_VALUE_MAX];
} tail_seen;

static int on_event(void *arg, runnel_tail_event ev, const char *next, const runnel_answer *a) {
    tail_seen *t = arg;
    t->events[ev]++;
    if (ev == RUNNEL_TAIL_RETAINED)
        snprintf(t->retained, sizeof t->retained, "%s", a->retained_offset);
    return 0;
}

static void tail_below_retention(void **state) {
    char url[128], inc[32];
    snprintf(url, sizeof url, "/shoulds/%s", ts_name("r"));
    ts_create(C, url, "text/plain", inc);
    runnel_answer a;
    runnel_append_options ao = {.content_type = "text/plain"};
    runnel_body b = {.data = "abcdef", .len = 6};
    assert_int_equal(runnel_append(C, url, &b, &ao, &a), RUNNEL_OK);
    char tail[RUNNEL_VALUE_MAX];
    snprintf(tail, sizeof tail, "%s", a.next_offset);
    runnel_body snap = {.data = "state", .len = 5};
    assert_int_equal(runnel_snapshot_publish(C, url, tail, "text/plain", &snap, NULL, &a),
                     RUNNEL_OK);
    assert_int_equal(runnel_retention(C, url, tail, NULL, &a), RUNNEL_OK);

    tail_seen t = {0};
    runnel_tail_options o = {.offset = "0000000000000000_0000000000000000",
                             .mode = RUNNEL_TAIL_LONG_POLL,
                             .on_event = on_event,
                             .arg = &t};
    assert_int_equal(runnel_tail(C, url, &o, NULL, &a), RUNNEL_E_STATUS);
    assert_int_equal(a.status, 410);
    assert_int_equal(t.events[RUNNEL_TAIL_RETAINED], 1);
    assert_int_equal(t.events[RUNNEL_TAIL_GONE], 0);
    assert_string_equal(t.retained, tail);

    /* a deleted stream is still gone */
    assert_int_equal(runnel_delete(C, url, NULL, &a), RUNNEL_OK);
    tail_seen g = {0};
    o.arg = &g;
    assert_int_equal(runnel_tail(C, url, &o, NULL, &a), RUNNEL_E_STATUS);
    assert_int_equal(g.events[RUNNEL_TAIL_RETAINED], 0);
    assert_int_equal(g.events[RUNNEL_TAIL_GONE], 1);
}

int main(void) {
    const struct CMUnitTest scripted[] = {
        cmocka_unit_test(request_limit),
        cmocka_unit_test(cluster_id_with_state),
    };
    const struct CMUnitTest live[] = {
        cmocka_unit_test(tail_below_retention),
    };
    int failed = cmocka_run_group_tests_name("scripted servers", scripted, NULL, NULL);
    failed += cmocka_run_group_tests_name("a live server", live, ts_group_setup, ts_group_teardown);
    return failed;
}
