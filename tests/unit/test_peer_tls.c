/*
 * test_peer_tls.c — the node id a peer certificate binds
 * (src/consensus/peer_tls.c, rn_peer_cert_node_id): exactly one URI subject
 * alternative name runnel-node:ID with ID a node id, other names ignored,
 * anything ambiguous or malformed refused. The certificates are made here
 * (a key and the names only; nothing verifies them).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <openssl/evp.h>
#include <openssl/x509v3.h>
#include <string.h>

#include "consensus/peer_tls.h"

static EVP_PKEY *key;

static int setup(void **state) {
    (void)state;
    key = EVP_EC_gen("P-256");
    return key ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    EVP_PKEY_free(key);
    return 0;
}

/* A certificate whose subject alternative names are san (openssl's
 * syntax: "URI:runnel-node:2,DNS:localhost"), or none when NULL. */
static X509 *cert_with(const char *san) {
    X509 *c = X509_new();
    assert_non_null(c);
    X509_set_version(c, 2);
    X509_gmtime_adj(X509_getm_notBefore(c), 0);
    X509_gmtime_adj(X509_getm_notAfter(c), 3600);
    X509_set_pubkey(c, key);
    if (san) {
        X509V3_CTX ctx;
        X509V3_set_ctx(&ctx, c, c, NULL, NULL, 0);
        X509_EXTENSION *ext = X509V3_EXT_conf_nid(NULL, &ctx, NID_subject_alt_name, san);
        assert_non_null(ext);
        X509_add_ext(c, ext, -1);
        X509_EXTENSION_free(ext);
    }
    assert_true(X509_sign(c, key, EVP_sha256()) > 0);
    return c;
}

/* rn_peer_cert_node_id of a certificate with san; *id when it names one. */
static int named(const char *san, uint64_t *id) {
    X509 *c = cert_with(san);
    *id = 0;
    int r = rn_peer_cert_node_id(c, id);
    X509_free(c);
    return r;
}

static void test_one_node(void **state) {
    (void)state;
    uint64_t id;
    assert_int_equal(named("URI:runnel-node:2", &id), 1);
    assert_int_equal(id, 2);
    assert_int_equal(named("DNS:localhost,URI:https://x/y,URI:runnel-node:255,IP:127.0.0.1", &id),
                     1);
    assert_int_equal(id, 255);
    assert_int_equal(named("URI:runnel-node:1", &id), 1);
    assert_int_equal(id, 1);
}

static void test_none(void **state) {
    (void)state;
    uint64_t id;
    assert_int_equal(named(NULL, &id), 0);
    assert_int_equal(named("DNS:localhost,IP:127.0.0.1", &id), 0);
    assert_int_equal(named("URI:runnel-nodes:2,URI:https://runnel-node:2", &id), 0);
}

static void test_refused(void **state) {
    (void)state;
    uint64_t id;
    static const char *const bad[] = {
        "URI:runnel-node:1,URI:runnel-node:2", /* two ids */
        "URI:runnel-node:2,URI:runnel-node:2", /* the same one twice */
        "URI:runnel-node:0",
        "URI:runnel-node:256",
        "URI:runnel-node:012",
        "URI:runnel-node:",
        "URI:runnel-node:1x",
        "URI:runnel-node:-1",
        "URI:runnel-node:1000",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_equal(named(bad[i], &id), -1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_node),
        cmocka_unit_test(test_none),
        cmocka_unit_test(test_refused),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
