/*
 * test_gw_rights.c - unit tests for src/gateway/rights.h: the rights
 * patterns of docs/GATEWAY.md, the target a request's path names, and the
 * rights a rule set grants on it.
 *
 * How: written from the header and the doc's pattern table, not from the
 * code. Every pattern form and letter set through rn_rights_add and
 * rn_rights_parse_spec, each refusal leaving the set unchanged; every
 * target kind from a hand-built rn_request; rn_rights_on over rule sets
 * whose answers differ for each rule of the table (union, prefixes that
 * cover streams but not the bucket, a bucket that only starts with a
 * pattern's name, admin implying read and write, v1 prefixes, "*").
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "gateway/rights.h"

enum { R = RN_RIGHT_READ, W = RN_RIGHT_WRITE, A = RN_RIGHT_ADMIN };

static void target_over(const char *path, rn_target *t, int fill) {
    rn_request req;
    memset(&req, 0, sizeof req);
    req.method = RN_HTTP_GET;
    req.method_name = "GET";
    req.target = path;
    req.target_len = strlen(path);
    memset(t, fill, sizeof *t);
    t->buf[sizeof t->buf - 1] = '\0'; /* so that a read past the name stays in t */
    rn_target_of(&req, t);
}

/* The target of path; t is an output, so what it held before must not
 * matter: the path is read into a zeroed one and into one full of 'x',
 * and both must agree. */
static void target(const char *path, rn_target *t) {
    rn_target other;
    target_over(path, &other, 'x');
    target_over(path, t, 0);
    if (t->kind != other.kind)
        fail_msg("%s: kind %d over a zeroed target, %d over one full of 'x'", path, (int)t->kind,
                 (int)other.kind);
    assert_int_equal(t->bucket_len, other.bucket_len);
    assert_int_equal(t->stream_len, other.stream_len);
    if (t->bucket_len)
        assert_memory_equal(t->bucket, other.bucket, t->bucket_len);
    if (t->stream_len)
        assert_memory_equal(t->stream, other.stream, t->stream_len);
}

static void assert_bytes(const char *got, size_t len, const char *want) {
    assert_int_equal(len, strlen(want));
    assert_memory_equal(got, want, len);
}

static void test_each_pattern_form(void **state) {
    (void)state;
    rn_rights r = {0};
    char err[256];
    assert_int_equal(rn_rights_add(&r, "orders", "rw", err, sizeof err), 0);
    assert_int_equal(rn_rights_add(&r, "logs/eu-", "r", err, sizeof err), 0);
    assert_int_equal(rn_rights_add(&r, "v1:chat/", "w", err, sizeof err), 0);
    assert_int_equal(rn_rights_add(&r, "v1:", "r", err, sizeof err), 0);
    assert_int_equal(rn_rights_add(&r, "*", "a", err, sizeof err), 0);
    assert_int_equal(r.n, 5);

    const rn_rights_rule *o = &r.rules[0];
    assert_false(o->all);
    assert_false(o->v1);
    assert_bytes(o->space, o->space_len, "orders");
    assert_int_equal(o->prefix_len, 0);
    assert_int_equal(o->rights, R | W);

    const rn_rights_rule *p = &r.rules[1];
    assert_false(p->all || p->v1);
    assert_bytes(p->space, p->space_len, "logs");
    assert_bytes(p->prefix, p->prefix_len, "eu-");
    assert_int_equal(p->rights, R);

    const rn_rights_rule *v = &r.rules[2];
    assert_true(v->v1);
    assert_false(v->all);
    assert_null(v->space);
    assert_bytes(v->prefix, v->prefix_len, "chat/");
    assert_int_equal(v->rights, W);

    const rn_rights_rule *va = &r.rules[3];
    assert_true(va->v1);
    assert_null(va->space);
    assert_int_equal(va->prefix_len, 0);

    const rn_rights_rule *all = &r.rules[4];
    assert_true(all->all);
    assert_null(all->space);
    assert_int_equal(all->rights, A);
    rn_rights_free(&r);
}

static void test_letters(void **state) {
    (void)state;
    static const struct {
        const char *letters;
        unsigned want;
    } ok[] = {{"r", R},      {"w", W},           {"a", A},           {"rw", R | W},
              {"wr", R | W}, {"rwa", R | W | A}, {"awr", R | W | A}, {"ra", R | A}};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        rn_rights r = {0};
        char err[256];
        assert_int_equal(rn_rights_add(&r, "orders", ok[i].letters, err, sizeof err), 0);
        assert_int_equal(r.n, 1);
        assert_int_equal(r.rules[0].rights, ok[i].want);
        rn_rights_free(&r);
    }
}

/* Each refused add leaves the set as it was, with a reason. */
static void refuse_add(const char *pattern, const char *letters) {
    rn_rights r = {0};
    char err[256] = "";
    assert_int_equal(rn_rights_add(&r, "audit", "r", err, sizeof err), 0);
    if (rn_rights_add(&r, pattern, letters, err, sizeof err) != -1)
        fail_msg("pattern \"%s\" letters \"%s\" accepted", pattern, letters);
    assert_true(err[0] != '\0');
    assert_int_equal(r.n, 1);
    assert_bytes(r.rules[0].space, r.rules[0].space_len, "audit");
    assert_int_equal(r.rules[0].rights, R);
    rn_rights_free(&r);
}

static void test_letter_refusals(void **state) {
    (void)state;
    static const char *const bad[] = {"", "rr", "rwr", "aa", "x", "R", "rW", "r ", "rwx"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        refuse_add("orders", bad[i]);
    refuse_add("*", "");
    refuse_add("v1:", "ww");
}

static void test_bucket_id_refusals(void **state) {
    (void)state;
    char long_id[66];
    memset(long_id, 'a', 65);
    long_id[65] = '\0';
    static const char *const bad[] = {
        "",        "abc", "Orders", "ord!rs", "ord ers",    "orders.x", "/eu-",
        "abc/eu-", "v1",  "*x",     "**",     "ORDERS/eu-", "ordérs",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        refuse_add(bad[i], "r");
    refuse_add(long_id, "r");
    long_id[64] = '\0'; /* 64 characters: the longest bucket id */
    rn_rights r = {0};
    char err[256];
    assert_int_equal(rn_rights_add(&r, long_id, "r", err, sizeof err), 0);
    assert_int_equal(rn_rights_add(&r, "a_b-", "r", err, sizeof err), 0);
    assert_int_equal(rn_rights_add(&r, "0123/x", "r", err, sizeof err), 0);
    assert_int_equal(r.n, 3);
    rn_rights_free(&r);
}

static void test_spec(void **state) {
    (void)state;
    rn_rights r = {0};
    char err[256];
    assert_int_equal(rn_rights_parse_spec(&r, "orders:rw,audit:r,logs/eu-:rw,v1:chat/:rw,v1::r,*:a",
                                          err, sizeof err),
                     0);
    assert_int_equal(r.n, 6);
    assert_bytes(r.rules[0].space, r.rules[0].space_len, "orders");
    assert_int_equal(r.rules[0].rights, R | W);
    assert_bytes(r.rules[1].space, r.rules[1].space_len, "audit");
    assert_int_equal(r.rules[1].rights, R);
    assert_bytes(r.rules[2].prefix, r.rules[2].prefix_len, "eu-");
    assert_true(r.rules[3].v1);
    assert_bytes(r.rules[3].prefix, r.rules[3].prefix_len, "chat/");
    assert_true(r.rules[4].v1);
    assert_int_equal(r.rules[4].prefix_len, 0);
    assert_int_equal(r.rules[4].rights, R);
    assert_true(r.rules[5].all);
    assert_int_equal(r.rules[5].rights, A);
    rn_rights_free(&r);
}

static void test_spec_refusals(void **state) {
    (void)state;
    static const char *const bad[] = {
        "v1:",       /* a v1 pattern without letters */
        "v1:rw",     /* "v1" is no bucket id, and not "v1:" */
        "orders",    /* no letters */
        "orders:",   /* empty letters */
        ":rw",       /* empty pattern */
        "orders:rx", /* unknown letter */
        "orders:rr", /* a repeated letter */
        "abc:r",     /* a bucket id too short */
        "Orders:r",  /* upper case */
        "orders:rw,abc:r",
        "orders:rw,audit:rwa,v1:",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        rn_rights r = {0};
        char err[256] = "";
        if (rn_rights_parse_spec(&r, bad[i], err, sizeof err) != -1)
            fail_msg("spec \"%s\" accepted", bad[i]);
        assert_true(err[0] != '\0');
        rn_rights_free(&r);
    }
}

/* path's target has kind, and (when not NULL) that bucket and stream
 * ("": none). */
static void expect(const char *path, rn_target_kind kind, const char *bucket, const char *stream) {
    rn_target t;
    target(path, &t);
    if (t.kind != kind)
        fail_msg("%s: kind %d, not %d", path, (int)t.kind, (int)kind);
    if (bucket)
        assert_bytes(t.bucket, t.bucket_len, bucket);
    if (stream)
        assert_bytes(t.stream, t.stream_len, stream);
}

static void test_targets_operator_routes(void **state) {
    (void)state;
    expect("/__runnel/livez", RN_TARGET_OPEN, NULL, NULL);
    expect("/__runnel/readyz", RN_TARGET_OPEN, NULL, NULL);
    expect("/__runnel/readyz?verbose=1", RN_TARGET_OPEN, NULL, NULL);
    expect("/__runnel/console", RN_TARGET_OPEN, NULL, NULL);
    expect("/__runnel/console/app.js", RN_TARGET_OPEN, NULL, NULL);
    static const char *const ops[] = {
        "/__runnel/metrics",  "/__runnel/cluster",         "/__runnel/livezz",
        "/__runnel/readyz/x", "/__runnel/gateway/metrics", "/__runnel/buckets/orders/purge",
        "/__runnel/consoles", "/__runnel/admin/buckets",   "/__runnel/admin/buckets/b/purge",
    };
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
        expect(ops[i], RN_TARGET_OPS, NULL, NULL);
}

static void test_targets_v1_and_subscriptions(void **state) {
    (void)state;
    static const char *const subs[] = {
        "/v1/stream/__ds/subscriptions/s1",     "/v1/stream/__ds/jwks.json",
        "/v1/stream/%5F%5Fds/subscriptions/s1", "/v1/stream/%5f%5fds/subscriptions/s1/claim",
        "/v1/stream/_%5Fds/jwks.json",
    };
    for (size_t i = 0; i < sizeof subs / sizeof subs[0]; i++)
        expect(subs[i], RN_TARGET_SUBS, NULL, NULL);
    expect("/v1/stream/chat/room-1", RN_TARGET_V1, NULL, "chat/room-1");
    expect("/v1/stream/a%2Fb", RN_TARGET_V1, NULL, "a/b");
    expect("/v1/stream/chat%2Froom%20one?offset=-1&live=sse", RN_TARGET_V1, NULL, "chat/room one");
    expect("/v1/stream/__dsx", RN_TARGET_V1, NULL, "__dsx"); /* not the reserved segment */
}

/* The v1 name that is the reserved segment alone: the header leaves its
 * kind open, but it must be a function of the path, not of whatever bytes
 * the caller's rn_target held past the decoded name. */
static void test_target_of_the_reserved_segment_alone(void **state) {
    (void)state;
    rn_target t;
    target("/v1/stream/__ds", &t);
    target("/v1/stream/%5F%5Fds", &t);
}

static void test_targets_buckets(void **state) {
    (void)state;
    expect("/orders", RN_TARGET_BUCKET, "orders", "");
    expect("/orders/o-1", RN_TARGET_BUCKET, "orders", "o-1");
    expect("/orders/o-1?offset=-1&live=long-poll", RN_TARGET_BUCKET, "orders", "o-1");
    expect("/orders/o-1/snapshot/0000000000000005", RN_TARGET_BUCKET, "orders", "o-1");
    expect("/orders/o%201", RN_TARGET_BUCKET, "orders", "o 1");
    expect("/%6Frders/x", RN_TARGET_BUCKET, "orders", "x");
}

static void test_targets_nothing_to_guard(void **state) {
    (void)state;
    static const char *const none[] = {
        "/", "/orders/o%zz", "/orders/%", "/orders/o-1%4", "/v1/stream/%zz", "/%zzrders/x",
    };
    for (size_t i = 0; i < sizeof none / sizeof none[0]; i++)
        expect(none[i], RN_TARGET_NONE, NULL, NULL);
}

static unsigned on(const rn_rights *r, const char *path) {
    rn_target t;
    target(path, &t);
    return rn_rights_on(r, &t);
}

static void test_rights_on_buckets(void **state) {
    (void)state;
    rn_rights r = {0};
    char err[256];
    assert_int_equal(
        rn_rights_parse_spec(&r, "orders:r,orders/eu-:w,audit:rw,logs/eu-:r", err, sizeof err), 0);
    assert_int_equal(on(&r, "/orders"), R);          /* the prefix rule is not the bucket's */
    assert_int_equal(on(&r, "/orders/eu-1"), R | W); /* the union */
    assert_int_equal(on(&r, "/orders/eu%2D1"), R | W);
    assert_int_equal(on(&r, "/orders/us-1"), R);
    assert_int_equal(on(&r, "/orders/eu"), R);
    assert_int_equal(on(&r, "/orders/eu-1/snapshot/5"), R | W);
    assert_int_equal(on(&r, "/audit"), R | W);
    assert_int_equal(on(&r, "/audit/x"), R | W);
    assert_int_equal(on(&r, "/logs"), 0); /* a prefix rule only covers streams */
    assert_int_equal(on(&r, "/logs/eu-a"), R);
    assert_int_equal(on(&r, "/logs/us-a"), 0);
    assert_int_equal(on(&r, "/orders-x/eu-1"), 0); /* bucket names match whole */
    assert_int_equal(on(&r, "/order/eu-1"), 0);
    assert_int_equal(on(&r, "/other/x"), 0);
    assert_int_equal(on(&r, "/v1/stream/orders/eu-1"), 0); /* buckets are not v1 names */
    assert_int_equal(on(&r, "/v1/stream/__ds/subscriptions/s"), 0);
    assert_false(rn_rights_admin(&r));
    rn_rights_free(&r);
}

static void test_admin_implies_read_and_write(void **state) {
    (void)state;
    rn_rights r = {0};
    char err[256];
    assert_int_equal(rn_rights_parse_spec(&r, "orders:a,v1:chat/:a", err, sizeof err), 0);
    assert_int_equal(on(&r, "/orders/x"), R | W | A);
    assert_int_equal(on(&r, "/orders"), R | W | A);
    assert_int_equal(on(&r, "/v1/stream/chat/x"), R | W | A);
    assert_int_equal(on(&r, "/audit/x"), 0);
    assert_false(rn_rights_admin(&r)); /* admin on a bucket is not on "*" */
    rn_rights_free(&r);
}

static void test_rights_on_v1_and_subscriptions(void **state) {
    (void)state;
    rn_rights r = {0};
    char err[256];
    assert_int_equal(rn_rights_parse_spec(&r, "v1:chat/:rw,v1:__ds/:rw,v1:logs:r", err, sizeof err),
                     0);
    assert_int_equal(on(&r, "/v1/stream/chat/a"), R | W);
    assert_int_equal(on(&r, "/v1/stream/chat%2Fa"), R | W);
    assert_int_equal(on(&r, "/v1/stream/chatter"), 0);
    assert_int_equal(on(&r, "/v1/stream/a%2Fb"), 0);
    assert_int_equal(on(&r, "/v1/stream/logs/x"), R);
    assert_int_equal(on(&r, "/v1/stream/logsx"), R);
    /* subscriptions need "v1:" itself: no v1 prefix covers them */
    assert_int_equal(on(&r, "/v1/stream/__ds/subscriptions/s1") & (R | W), 0);
    assert_int_equal(on(&r, "/orders/chat"), 0);
    rn_rights_free(&r);

    rn_rights all_v1 = {0};
    assert_int_equal(rn_rights_parse_spec(&all_v1, "v1::rw", err, sizeof err), 0);
    assert_int_equal(on(&all_v1, "/v1/stream/anything/at/all"), R | W);
    assert_int_equal(on(&all_v1, "/v1/stream/__ds/subscriptions/s1"), R | W);
    assert_int_equal(on(&all_v1, "/v1/stream/%5F%5Fds/subscriptions/s1"), R | W);
    assert_int_equal(on(&all_v1, "/orders/x"), 0);
    assert_false(rn_rights_admin(&all_v1));
    rn_rights_free(&all_v1);
}

static void test_star(void **state) {
    (void)state;
    rn_rights r = {0};
    char err[256];
    assert_int_equal(rn_rights_parse_spec(&r, "*:rw", err, sizeof err), 0);
    assert_int_equal(on(&r, "/orders"), R | W);
    assert_int_equal(on(&r, "/orders/x"), R | W);
    assert_int_equal(on(&r, "/v1/stream/a"), R | W);
    assert_int_equal(on(&r, "/v1/stream/__ds/subscriptions/s1"), R | W);
    assert_false(rn_rights_admin(&r)); /* rw on "*" is not admin */
    rn_rights_free(&r);

    rn_rights admin = {0};
    assert_int_equal(rn_rights_parse_spec(&admin, "*:a", err, sizeof err), 0);
    assert_true(rn_rights_admin(&admin));
    assert_int_equal(on(&admin, "/orders/x"), R | W | A);
    rn_rights_free(&admin);

    rn_rights none = {0};
    assert_false(rn_rights_admin(&none));
    assert_int_equal(on(&none, "/orders/x"), 0);
    assert_int_equal(on(&none, "/v1/stream/x"), 0);
    rn_rights_free(&none);

    rn_rights v1_admin = {0};
    assert_int_equal(rn_rights_parse_spec(&v1_admin, "v1::a,orders:a", err, sizeof err), 0);
    assert_false(rn_rights_admin(&v1_admin));
    rn_rights_free(&v1_admin);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_each_pattern_form),
        cmocka_unit_test(test_letters),
        cmocka_unit_test(test_letter_refusals),
        cmocka_unit_test(test_bucket_id_refusals),
        cmocka_unit_test(test_spec),
        cmocka_unit_test(test_spec_refusals),
        cmocka_unit_test(test_targets_operator_routes),
        cmocka_unit_test(test_targets_v1_and_subscriptions),
        cmocka_unit_test(test_target_of_the_reserved_segment_alone),
        cmocka_unit_test(test_targets_buckets),
        cmocka_unit_test(test_targets_nothing_to_guard),
        cmocka_unit_test(test_rights_on_buckets),
        cmocka_unit_test(test_admin_implies_read_and_write),
        cmocka_unit_test(test_rights_on_v1_and_subscriptions),
        cmocka_unit_test(test_star),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
