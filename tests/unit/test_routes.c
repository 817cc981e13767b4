/*
 * test_routes.c - unit tests for src/util/routes.h: the table of Raft
 * group leaders learned from a cluster's redirects, which the gateway and
 * the client library share, and rn_url_split.
 *
 * How: written from the header's rules, not from the code, one test per
 * rule: a redirect carrying group, leader and term teaches the Location's
 * origin for the path's group (so every path learned in that group follows
 * a new leader); a newer term wins, an older one is ignored; a 307 naming
 * only the group and answers that are no redirects teach nothing; 503
 * NO_LEADER naming the group forgets its leader; no answer forgets the
 * leader only when the request went to it. Eviction is tested where it is
 * deterministic: the table never holds more than max_paths paths, and the
 * path just learned is always held.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "util/routes.h"

#define N1 "http://10.0.0.1:4437"
#define N2 "http://10.0.0.2:4437"
#define N3 "https://node-3.example:4437"

/* What lookup says of path: the origin, or "" when none is known. */
static const char *lookup(rn_routes *r, const char *path) {
    static char origin[RN_ROUTES_ORIGIN_MAX];
    if (!rn_routes_lookup(r, path, strlen(path), origin, sizeof origin))
        origin[0] = '\0';
    return origin;
}

/* A redirect of path, sent to `to`, naming group, leader and term and
 * pointing at leader_origin. */
static void redirect(rn_routes *r, int status, const char *to, const char *path, const char *group,
                     const char *leader_id, int64_t term, const char *leader_origin) {
    char location[1024];
    snprintf(location, sizeof location, "%s%s", leader_origin, path);
    const rn_route_answer a = {.status = status,
                               .error_code = "",
                               .group = group,
                               .leader_id = leader_id,
                               .term = term,
                               .location = location};
    rn_routes_learn(r, to, path, strlen(path), &a);
}

static void answer(rn_routes *r, const char *to, const char *path, int status, const char *code,
                   const char *group) {
    const rn_route_answer a = {.status = status,
                               .error_code = code,
                               .group = group,
                               .leader_id = "",
                               .term = -1,
                               .location = ""};
    rn_routes_learn(r, to, path, strlen(path), &a);
}

/* /orders/a and /orders/b in group 7, /audit/c in group 8, all led by N2
 * at term 3. */
static void learn_two_groups(rn_routes *r) {
    redirect(r, 307, N1, "/orders/a", "7", "2", 3, N2);
    redirect(r, 307, N1, "/orders/b", "7", "2", 3, N2);
    redirect(r, 307, N1, "/audit/c", "8", "2", 3, N2);
}

static void test_a_redirect_teaches_the_locations_origin(void **state) {
    (void)state;
    rn_routes *r = rn_routes_new(16);
    assert_string_equal(lookup(r, "/orders/o-1"), "");
    redirect(r, 307, N1, "/orders/o-1", "7", "2", 3, N2);
    assert_string_equal(lookup(r, "/orders/o-1"), N2);
    assert_string_equal(lookup(r, "/orders/o-2"), ""); /* a path's group is learned per path */
    redirect(r, 308, N1, "/v1/stream/chat/a", "9", "3", 1, N3);
    assert_string_equal(lookup(r, "/v1/stream/chat/a"), N3);
    assert_string_equal(lookup(r, "/orders/o-1"), N2);
    rn_routes_free(r);
}

static void test_a_groups_leader_is_shared_by_its_paths(void **state) {
    (void)state;
    rn_routes *r = rn_routes_new(16);
    learn_two_groups(r);
    /* a new leader of group 7 at a newer term, learned through one path */
    redirect(r, 307, N2, "/orders/b", "7", "3", 4, N3);
    assert_string_equal(lookup(r, "/orders/a"), N3);
    assert_string_equal(lookup(r, "/orders/b"), N3);
    assert_string_equal(lookup(r, "/audit/c"), N2); /* another group */
    rn_routes_free(r);
}

static void test_an_older_term_is_ignored(void **state) {
    (void)state;
    rn_routes *r = rn_routes_new(16);
    redirect(r, 307, N1, "/orders/a", "7", "2", 5, N2);
    redirect(r, 307, N2, "/orders/a", "7", "1", 4, N1);
    assert_string_equal(lookup(r, "/orders/a"), N2);
    /* also through another path of the group */
    redirect(r, 307, N2, "/orders/b", "7", "1", 2, N1);
    assert_string_equal(lookup(r, "/orders/a"), N2);
    /* a newer one wins */
    redirect(r, 308, N2, "/orders/a", "7", "3", 6, N3);
    assert_string_equal(lookup(r, "/orders/a"), N3);
    redirect(r, 307, N3, "/orders/a", "7", "2", 5, N2);
    assert_string_equal(lookup(r, "/orders/a"), N3);
    rn_routes_free(r);
}

static void test_a_group_only_redirect_teaches_nothing(void **state) {
    (void)state;
    rn_routes *r = rn_routes_new(16);
    redirect(r, 307, N1, "/orders/a", "7", "", -1, N2);
    assert_string_equal(lookup(r, "/orders/a"), "");
    redirect(r, 307, N1, "/orders/a", "7", "2", 3, N2);
    redirect(r, 307, N2, "/orders/a", "7", "", -1, N3); /* changes nothing learned */
    assert_string_equal(lookup(r, "/orders/a"), N2);
    /* a redirect without the group, or without a Location, teaches nothing */
    redirect(r, 307, N1, "/orders/b", "", "2", 3, N2);
    assert_string_equal(lookup(r, "/orders/b"), "");
    const rn_route_answer no_location = {
        .status = 307, .error_code = "", .group = "8", .leader_id = "2", .term = 3, .location = ""};
    rn_routes_learn(r, N1, "/orders/c", 9, &no_location);
    assert_string_equal(lookup(r, "/orders/c"), "");
    rn_routes_free(r);
}

static void test_answers_that_are_no_redirects_teach_nothing(void **state) {
    (void)state;
    rn_routes *r = rn_routes_new(16);
    redirect(r, 200, N1, "/orders/a", "7", "2", 3, N2);
    redirect(r, 201, N1, "/orders/a", "7", "2", 3, N2);
    redirect(r, 302, N1, "/orders/a", "7", "2", 3, N2);
    redirect(r, 404, N1, "/orders/a", "7", "2", 3, N2);
    assert_string_equal(lookup(r, "/orders/a"), "");
    /* and they forget nothing */
    redirect(r, 307, N1, "/orders/a", "7", "2", 3, N2);
    answer(r, N2, "/orders/a", 200, "", "7");
    answer(r, N2, "/orders/a", 503, "OUTCOME_UNKNOWN", "7");
    answer(r, N2, "/orders/a", 404, "BUCKET_NOT_FOUND", "");
    assert_string_equal(lookup(r, "/orders/a"), N2);
    rn_routes_free(r);
}

static void test_no_leader_forgets_the_groups_leader(void **state) {
    (void)state;
    rn_routes *r = rn_routes_new(16);
    learn_two_groups(r);
    answer(r, N3, "/orders/x", 503, "NO_LEADER", "9"); /* another group */
    assert_string_equal(lookup(r, "/orders/a"), N2);
    answer(r, N2, "/orders/a", 503, "NO_LEADER", ""); /* no group named */
    assert_string_equal(lookup(r, "/orders/a"), N2);
    answer(r, N1, "/orders/b", 503, "NO_LEADER", "7");
    assert_string_equal(lookup(r, "/orders/a"), "");
    assert_string_equal(lookup(r, "/orders/b"), "");
    assert_string_equal(lookup(r, "/audit/c"), N2);
    /* the group is learned again by the next redirect */
    redirect(r, 307, N1, "/orders/a", "7", "3", 4, N3);
    assert_string_equal(lookup(r, "/orders/a"), N3);
    assert_string_equal(lookup(r, "/orders/b"), N3);
    rn_routes_free(r);
}

static void test_no_answer_forgets_only_the_leader_it_was_sent_to(void **state) {
    (void)state;
    rn_routes *r = rn_routes_new(16);
    learn_two_groups(r);
    answer(r, N1, "/orders/a", 0, "", ""); /* sent elsewhere */
    answer(r, N3, "/orders/a", 0, "", "");
    assert_string_equal(lookup(r, "/orders/a"), N2);
    answer(r, N2, "/orders/a", 0, "", "");
    assert_string_equal(lookup(r, "/orders/a"), "");
    assert_string_equal(lookup(r, "/orders/b"), "");
    rn_routes_free(r);
}

static int held(rn_routes *r, char paths[][32], size_t n) {
    int count = 0;
    for (size_t i = 0; i < n; i++)
        count += lookup(r, paths[i])[0] != '\0';
    return count;
}

static void eviction(size_t max_paths) {
    rn_routes *r = rn_routes_new(max_paths);
    static char paths[200][32];
    const size_t n = sizeof paths / sizeof paths[0];
    for (size_t i = 0; i < n; i++) {
        snprintf(paths[i], sizeof paths[i], "/bucket-%zu/s", i);
        /* each path in a group of its own, so no path is learned twice */
        char group[16];
        snprintf(group, sizeof group, "%zu", i);
        redirect(r, 307, N1, paths[i], group, "2", 1, N2);
        if (strcmp(lookup(r, paths[i]), N2) != 0)
            fail_msg("max %zu: path %zu not held right after it was learned", max_paths, i);
        int count = held(r, paths, i + 1);
        if ((size_t)count > max_paths)
            fail_msg("max %zu: %d paths held after %zu learned", max_paths, count, i + 1);
        if (i < max_paths && (size_t)count != i + 1)
            fail_msg("max %zu: %d paths held of the first %zu", max_paths, count, i + 1);
    }
    rn_routes_free(r);
}

static void test_the_table_never_holds_more_than_max_paths(void **state) {
    (void)state;
    eviction(1);
    eviction(2);
    eviction(7);
    eviction(64);
}

static void test_many_groups(void **state) {
    (void)state;
    /* more groups than are remembered: lookups stay right or say none */
    rn_routes *r = rn_routes_new(4096);
    static char paths[RN_ROUTES_GROUPS + 100][32];
    const size_t n = sizeof paths / sizeof paths[0];
    for (size_t i = 0; i < n; i++) {
        snprintf(paths[i], sizeof paths[i], "/bucket-%zu/s", i);
        char group[16];
        snprintf(group, sizeof group, "%zu", i);
        redirect(r, 307, N1, paths[i], group, "2", 1, i % 2 ? N2 : N3);
    }
    for (size_t i = 0; i < n; i++) {
        const char *o = lookup(r, paths[i]);
        if (o[0] && strcmp(o, i % 2 ? N2 : N3) != 0)
            fail_msg("path %zu led by %s", i, o);
    }
    rn_routes_free(r);
}

static void split_ok(const char *url, const char *origin, const char *path) {
    char o[64], p[64];
    if (rn_url_split(url, o, sizeof o, p, sizeof p) != 0)
        fail_msg("%s refused", url);
    assert_string_equal(o, origin);
    assert_string_equal(p, path);
}

static void test_url_split(void **state) {
    (void)state;
    split_ok("http://10.0.0.1:4437/orders/o-1", "http://10.0.0.1:4437", "/orders/o-1");
    split_ok("https://node.example/v1/stream/a%2Fb?offset=-1", "https://node.example",
             "/v1/stream/a%2Fb");
    split_ok("http://[::1]:4437/x#frag", "http://[::1]:4437", "/x");
    split_ok("http://h:1", "http://h:1", "/");
    static const char *const bad[] = {
        "/orders/o-1", "orders/o-1", "ftp://h/x", "ws://h/x", "http:/h/x", "", "h:4437/x",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char o[64], p[64];
        if (rn_url_split(bad[i], o, sizeof o, p, sizeof p) != -1)
            fail_msg("%s split", bad[i]);
    }
    /* parts that do not fit */
    char o[16], p[8];
    assert_int_equal(rn_url_split("http://a-long-host-name:4437/x", o, sizeof o, p, sizeof p), -1);
    assert_int_equal(rn_url_split("http://h/a-long-path", o, sizeof o, p, sizeof p), -1);
    assert_int_equal(rn_url_split("http://h/123456", o, sizeof o, p, sizeof p), 0);
    assert_string_equal(p, "/123456"); /* 7 bytes and the NUL */
    assert_int_equal(rn_url_split("http://h/1234567", o, sizeof o, p, sizeof p), -1);
    assert_int_equal(rn_url_split("http://h-234567/", o, sizeof o, p, sizeof p), 0);
    assert_string_equal(o, "http://h-234567"); /* 15 bytes and the NUL */
    assert_int_equal(rn_url_split("http://h-2345678/", o, sizeof o, p, sizeof p), -1);
}

/* RFC 3986 §3.2: the authority ends at the first "/", "?" or "#"; the
 * header's origin is "scheme://authority" and the path has no query. */
static void test_url_split_query_without_a_path(void **state) {
    (void)state;
    split_ok("http://h:1?live=sse", "http://h:1", "/");
    split_ok("https://h#f", "https://h", "/");
    split_ok("http://h?next=/x", "http://h", "/");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_redirect_teaches_the_locations_origin),
        cmocka_unit_test(test_a_groups_leader_is_shared_by_its_paths),
        cmocka_unit_test(test_an_older_term_is_ignored),
        cmocka_unit_test(test_a_group_only_redirect_teaches_nothing),
        cmocka_unit_test(test_answers_that_are_no_redirects_teach_nothing),
        cmocka_unit_test(test_no_leader_forgets_the_groups_leader),
        cmocka_unit_test(test_no_answer_forgets_only_the_leader_it_was_sent_to),
        cmocka_unit_test(test_the_table_never_holds_more_than_max_paths),
        cmocka_unit_test(test_many_groups),
        cmocka_unit_test(test_url_split),
        cmocka_unit_test(test_url_split_query_without_a_path),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
