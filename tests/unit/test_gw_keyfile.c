/*
 * test_gw_keyfile.c - unit tests for src/gateway/keyfile.h, `runnel
 * gateway key new`: a new API key added to a tenants file.
 *
 * How: written from the header and docs/GATEWAY.md, not from the code. A
 * key added to a missing file and to an existing one: the key has its
 * documented shape, the file holds its SHA-256 and not the key, the file
 * loads with rn_tenants_load and the key names its tenant with the rights
 * given (replacing the tenant's rights), the tenant's other keys and
 * members and the other tenants stay, nothing but the file is left in its
 * directory; each refusal (a bad rights spec, a bad expiry, a bad tenant
 * name, a file that does not load) leaves the file byte for byte as it
 * was, or absent when it was.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <ctype.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "gateway/keyfile.h"
#include "gateway/tenants.h"
#include "gw_fixture.h"

/* SHA-256 of "test" */
#define HASH_TEST "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
#define HASH_OTHER "d9298a10d1b0735837dc4bd85dac641b0f3cef27a47e5d53a54f2f3f5b2fcffa"
#define SECRET "VE9QU0VDUkVULXRvcHNlY3JldC1UT1BTRUNSRVQtdG8"

#define EXISTING                                                                                   \
    "{\"tenants\": {"                                                                              \
    "\"acme\": {\"keys\": [{\"id\": \"k1\", \"sha256\": \"" HASH_TEST "\"}], "                     \
    "\"rights\": {\"orders\": \"rw\"}, \"cors\": [\"https://app.example.com\"], "                  \
    "\"status\": \"unpaid\", \"limits\": {\"uploads\": 3}},"                                       \
    "\"beta\": {\"keys\": [{\"id\": \"b1\", \"sha256\": \"" HASH_OTHER "\"}], "                    \
    "\"rights\": {\"beta\": \"r\"}}},"                                                             \
    "\"issuers\": [{\"issuer\": \"https://id.example.com/\", \"audience\": \"runnel\", "           \
    "\"keys\": [{\"kid\": \"h1\", \"secret_base64url\": \"" SECRET "\"}]}],"                       \
    "\"authorizer\": {\"url\": \"http://127.0.0.1:9100/authorize\", \"timeout_ms\": 500}}"

/* A fresh subdirectory of gw_dir for one test, its tenants file's path in
 * path. */
static void fresh(const char *name, char *sub, size_t cap, char *path, size_t pcap) {
    snprintf(sub, cap, "%s/%s", gw_dir, name);
    assert_int_equal(mkdir(sub, 0700), 0);
    snprintf(path, pcap, "%s/tenants.json", sub);
}

static void assert_key_shape(const char *key) {
    assert_int_equal(strlen(key), RN_API_KEY_LEN);
    assert_memory_equal(key, "rnk_", 4);
    for (int i = 4; i < RN_API_KEY_LEN; i++)
        if (!isxdigit((unsigned char)key[i]))
            fail_msg("key character %d is not a hex digit", i);
}

/* The file holds the key's SHA-256 and no part of the key past "rnk_". */
static void assert_file_keeps_only_the_hash(const char *path, const char *key) {
    char *text = gw_read(path);
    assert_non_null(text);
    char hex[65];
    gw_sha256_hex(key, hex);
    if (!strstr(text, hex))
        fail_msg("the file does not hold the key's SHA-256 %s", hex);
    char part[17];
    for (int at = 4; at + 16 <= RN_API_KEY_LEN; at += 8) {
        memcpy(part, key + at, 16);
        part[16] = '\0';
        if (strstr(text, part))
            fail_msg("the file holds part of the key: %s", part);
    }
    free(text);
}

static rn_tenants *load(const char *path) {
    char err[512] = "";
    int missing = -1;
    rn_tenants *t = rn_tenants_load(path, &missing, err, sizeof err);
    if (!t)
        fail_msg("the file does not load: %s", err);
    assert_int_equal(missing, 0);
    return t;
}

static const rn_tenant *by_key(const rn_tenants *t, const char *key, const rn_api_key **k) {
    unsigned char hash[32];
    gw_sha256(key, hash);
    return rn_tenants_by_key(t, hash, k);
}

static unsigned on(const rn_tenant *tenant, const char *path) {
    rn_request req;
    memset(&req, 0, sizeof req);
    req.method = RN_HTTP_GET;
    req.target = path;
    req.target_len = strlen(path);
    rn_target tg;
    memset(&tg, 0, sizeof tg);
    rn_target_of(&req, &tg);
    return rn_rights_on(&tenant->rights, &tg);
}

/* Only tenants.json is left in sub (no temporary file of the rewrite). */
static void assert_only_the_file(const char *sub) {
    DIR *d = opendir(sub);
    assert_non_null(d);
    struct dirent *e;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && strcmp(e->d_name, "tenants.json"))
            fail_msg("%s left in the directory", e->d_name);
    closedir(d);
}

/* Adds a key for tenant to the file at path in sub, checks what every
 * add must leave, and loads the file: the loaded set (unref it), with the
 * key's tenant and key in *tenant and *k. */
static rn_tenants *add_and_load(const char *sub, const char *path, const char *tenant,
                                const char *rights, const char *expires,
                                char key[RN_API_KEY_LEN + 1], const rn_tenant **added,
                                const rn_api_key **k) {
    char err[512] = "";
    if (rn_keyfile_add(path, tenant, rights, expires, key, err, sizeof err))
        fail_msg("refused: %s", err);
    assert_key_shape(key);
    assert_file_keeps_only_the_hash(path, key);
    assert_only_the_file(sub);
    rn_tenants *t = load(path);
    *added = by_key(t, key, k);
    assert_non_null(*added);
    assert_string_equal((*added)->name, tenant);
    assert_ptr_equal(rn_tenants_by_name(t, tenant), *added);
    return t;
}

static void test_new_file(void **state) {
    (void)state;
    char sub[600], path[700], key[RN_API_KEY_LEN + 1], err[512] = "";
    fresh("new", sub, sizeof sub, path, sizeof path);
    const rn_tenant *acme;
    const rn_api_key *k;
    rn_tenants *t =
        add_and_load(sub, path, "acme", "orders:rw,audit:r,v1:chat/:rw", NULL, key, &acme, &k);
    assert_int_equal(t->ntenants, 1);
    assert_int_equal(k->expires_ms, 0);
    assert_int_equal(acme->status, RN_TENANT_ACTIVE);
    assert_int_equal(on(acme, "/orders/o-1"), RN_RIGHT_READ | RN_RIGHT_WRITE);
    assert_int_equal(on(acme, "/audit/a-1"), RN_RIGHT_READ);
    assert_int_equal(on(acme, "/v1/stream/chat/x"), RN_RIGHT_READ | RN_RIGHT_WRITE);
    assert_int_equal(on(acme, "/other/x"), 0);
    rn_tenants_unref(t);

    /* a second key is another key */
    char key2[RN_API_KEY_LEN + 1];
    assert_int_equal(rn_keyfile_add(path, "acme", "orders:r", NULL, key2, err, sizeof err), 0);
    assert_key_shape(key2);
    assert_string_not_equal(key, key2);
}

static void test_existing_file(void **state) {
    (void)state;
    char sub[600], path[700], key[RN_API_KEY_LEN + 1], unused[700];
    fresh("existing", sub, sizeof sub, path, sizeof path);
    gw_write(sub, "tenants.json", EXISTING, unused, sizeof unused);
    const rn_tenant *acme;
    const rn_api_key *k;
    rn_tenants *t =
        add_and_load(sub, path, "acme", "logs:r", "2027-06-01T00:00:00Z", key, &acme, &k);
    assert_int_equal(t->ntenants, 2);
    assert_int_equal(k->expires_ms, INT64_C(1811808000000));
    /* its other key stays, with it */
    assert_int_equal(acme->nkeys, 2);
    assert_ptr_equal(by_key(t, "test", &k), acme);
    assert_string_equal(k->id, "k1");
    assert_int_equal(k->expires_ms, 0);
    /* its rights are replaced */
    assert_int_equal(on(acme, "/orders/o-1"), 0);
    assert_int_equal(on(acme, "/logs/l-1"), RN_RIGHT_READ);
    /* its other members, the other tenant, the issuers and the authorizer stay */
    assert_int_equal(acme->ncors, 1);
    assert_string_equal(acme->cors[0], "https://app.example.com");
    assert_int_equal(acme->status, RN_TENANT_UNPAID);
    assert_int_equal(acme->limits.uploads, 3);
    const rn_tenant *beta = rn_tenants_by_name(t, "beta");
    assert_non_null(beta);
    assert_ptr_equal(by_key(t, "other", &k), beta);
    assert_int_equal(on(beta, "/beta/x"), RN_RIGHT_READ);
    assert_int_equal(t->nissuers, 1);
    assert_int_equal(rn_jwt_keys_count(t->issuers[0].keys), 1);
    assert_non_null(t->authorizer.url);
    assert_int_equal(t->authorizer.timeout_ms, 500);
    rn_tenants_unref(t);

    /* a new tenant in an existing file */
    char key3[RN_API_KEY_LEN + 1];
    const rn_tenant *gamma;
    t = add_and_load(sub, path, "gamma", "*:a", NULL, key3, &gamma, &k);
    assert_int_equal(t->ntenants, 3);
    assert_true(rn_rights_admin(&gamma->rights));
    assert_ptr_equal(by_key(t, key, &k), rn_tenants_by_name(t, "acme"));
    assert_ptr_equal(by_key(t, "test", &k), rn_tenants_by_name(t, "acme"));
    rn_tenants_unref(t);
}

static void refuse(const char *path, const char *tenant, const char *rights, const char *expires,
                   const char *before) {
    char key[RN_API_KEY_LEN + 1], err[512] = "";
    if (rn_keyfile_add(path, tenant, rights, expires, key, err, sizeof err) != -1)
        fail_msg("tenant \"%s\" rights \"%s\" expires \"%s\" accepted", tenant, rights,
                 expires ? expires : "(none)");
    assert_true(err[0] != '\0');
    char *after = gw_read(path);
    if (!before) {
        if (after)
            fail_msg("rights \"%s\": the file was made", rights);
        return;
    }
    assert_non_null(after);
    assert_string_equal(after, before);
    free(after);
}

static void test_refusals_change_nothing(void **state) {
    (void)state;
    char sub[600], path[700], unused[700];
    fresh("refusals", sub, sizeof sub, path, sizeof path);
    static const char *const bad_rights[] = {"orders",          "orders:", "orders:rx", "abc:r",
                                             "orders:rw,abc:r", "v1:",     "orders:rr"};
    static const char *const bad_expires[] = {"", "soon", "2027-13-01T00:00:00Z", "2027-06-01"};
    /* a missing file stays missing */
    for (size_t i = 0; i < sizeof bad_rights / sizeof bad_rights[0]; i++)
        refuse(path, "acme", bad_rights[i], NULL, NULL);
    for (size_t i = 0; i < sizeof bad_expires / sizeof bad_expires[0]; i++)
        refuse(path, "acme", "orders:rw", bad_expires[i], NULL);
    /* an existing one is unchanged, byte for byte */
    gw_write(sub, "tenants.json", EXISTING, unused, sizeof unused);
    for (size_t i = 0; i < sizeof bad_rights / sizeof bad_rights[0]; i++)
        refuse(path, "acme", bad_rights[i], NULL, EXISTING);
    for (size_t i = 0; i < sizeof bad_expires / sizeof bad_expires[0]; i++)
        refuse(path, "beta", "orders:rw", bad_expires[i], EXISTING);
    refuse(path, "", "orders:rw", NULL, EXISTING);
    refuse(path, "-", "orders:rw", NULL, EXISTING);
    assert_only_the_file(sub);
}

static void test_a_file_that_does_not_load_is_kept(void **state) {
    (void)state;
    char sub[600], path[700], unused[700];
    fresh("broken", sub, sizeof sub, path, sizeof path);
    static const char *const broken[] = {
        "{\"tenants\": {\"acme\": {}},",
        "{\"tenants\": {\"acme\": {\"limts\": {}}}}",
        "[]",
    };
    for (size_t i = 0; i < sizeof broken / sizeof broken[0]; i++) {
        gw_write(sub, "tenants.json", broken[i], unused, sizeof unused);
        refuse(path, "acme", "orders:rw", NULL, broken[i]);
    }
}

/* A pattern named twice: the spec's rights are the union of its entries
 * (rights.h), so the key gets both letters, or the spec is refused; never
 * one entry silently dropped. */
static void test_a_pattern_named_twice(void **state) {
    (void)state;
    char sub[600], path[700], key[RN_API_KEY_LEN + 1], err[512] = "";
    fresh("twice", sub, sizeof sub, path, sizeof path);
    rn_rights spec = {0};
    assert_int_equal(rn_rights_parse_spec(&spec, "orders:r,orders:w", err, sizeof err), 0);
    rn_rights_free(&spec);
    if (rn_keyfile_add(path, "acme", "orders:r,orders:w", NULL, key, err, sizeof err) != 0) {
        assert_null(gw_read(path)); /* refused: nothing written */
        return;
    }
    rn_tenants *t = load(path);
    const rn_api_key *k = NULL;
    const rn_tenant *acme = by_key(t, key, &k);
    assert_non_null(acme);
    unsigned got = on(acme, "/orders/o-1");
    rn_tenants_unref(t);
    if (got != (RN_RIGHT_READ | RN_RIGHT_WRITE))
        fail_msg("\"orders:r,orders:w\" gave rights %u on /orders/o-1, not read and write (3)",
                 got);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_new_file),
        cmocka_unit_test(test_existing_file),
        cmocka_unit_test(test_refusals_change_nothing),
        cmocka_unit_test(test_a_file_that_does_not_load_is_kept),
        cmocka_unit_test(test_a_pattern_named_twice),
    };
    return cmocka_run_group_tests(tests, gw_make_dir, gw_remove_dir);
}
