/*
 * test_gw_tenants.c - unit tests for src/gateway/tenants.h: loading the
 * tenants file of docs/GATEWAY.md and looking tenants up.
 *
 * How: written from the header and the doc, not from the code. A file with
 * every member of the doc's example (and a second issuer and tenants that
 * take the defaults) loads with each value where the header says; a
 * missing file is an empty set; then one cmocka test per refusal, each a
 * file that differs from a valid one in one place: not JSON, duplicate and
 * unknown members at every level, bad names, hashes, expiries, origins,
 * statuses, limits and rights, issuers without keys or with bad ones, and
 * a key hash two tenants share. Every refused file holds a recognizable
 * HS256 secret, and no error may quote it.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/tenants.h"
#include "gw_fixture.h"

/* base64url of the 32 bytes "TOPSECRET-topsecret-TOPSECRET-to" */
#define SECRET "VE9QU0VDUkVULXRvcHNlY3JldC1UT1BTRUNSRVQtdG8"
/* base64url of the 15 bytes "TOPSECRET-short" */
#define SHORT_SECRET "VE9QU0VDUkVULXNob3J0"
/* base64url of 32 bytes, for the JWK Set file */
#define JWKS_SECRET "andrcy1maWxlLXNlY3JldC1vZi0zMi1ieXRlcy1hYmM"
/* SHA-256 of "test" and of "other" */
#define HASH_TEST "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
#define HASH_OTHER "d9298a10d1b0735837dc4bd85dac641b0f3cef27a47e5d53a54f2f3f5b2fcffa"

#define EC_PEM                                                                                     \
    "-----BEGIN PUBLIC KEY-----\\n"                                                                \
    "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE/+o3CcHNDdSCp/xCsS/W2HprS/vF\\n"                          \
    "4aeAHp/7DgVPI1fuNn5w1Yp6/fI8zS8pg2b0MDgeU84G3fDgMlVl2k+ZCw==\\n"                              \
    "-----END PUBLIC KEY-----\\n"

#define KEY_TEST "{\"id\": \"k1\", \"sha256\": \"" HASH_TEST "\"}"
#define ACME "\"acme\": {\"keys\": [" KEY_TEST "], \"rights\": {\"orders\": \"rw\"}}"
#define ISSUER_KEY "{\"kid\": \"h1\", \"secret_base64url\": \"" SECRET "\"}"
#define ISSUER                                                                                     \
    "{\"issuer\": \"https://id.example.com/\", \"audience\": \"runnel\", \"keys\": [" ISSUER_KEY   \
    "]}"
#define AUTHORIZER ", \"authorizer\": {\"url\": \"http://127.0.0.1:9100/authorize\"}"

/* A file of tenants, issuers and further top-level members. */
#define FILE_OF(tenants, issuers, more)                                                            \
    "{\"tenants\": {" tenants "}, \"issuers\": [" issuers "]" more "}"
/* The valid file with acme's object replaced. */
#define WITH_ACME(body) FILE_OF("\"acme\": " body, ISSUER, "")
#define WITH_LIMITS(limits) WITH_ACME("{\"keys\": [" KEY_TEST "], \"limits\": " limits "}")
#define WITH_KEY(key) WITH_ACME("{\"keys\": [" key "]}")
#define WITH_ISSUER(issuer) FILE_OF(ACME, issuer, "")

static rn_tenants *load_text(const char *text, int *missing, char *err, size_t cap) {
    char path[1024];
    int ignored;
    gw_write(gw_dir, "tenants.json", text, path, sizeof path);
    return rn_tenants_load(path, missing ? missing : &ignored, err, cap);
}

static void test_valid_file_with_every_member(void **state) {
    (void)state;
    char jwks[1024], err[512] = "";
    gw_write(gw_dir, "jwks.json",
             "{\"keys\": [{\"kty\": \"oct\", \"kid\": \"j1\", \"k\": \"" JWKS_SECRET "\"}]}", jwks,
             sizeof jwks);
    char text[8192];
    snprintf(text, sizeof text,
             "{\"tenants\": {"
             "\"acme\": {"
             "\"keys\": [{\"id\": \"k1\", \"sha256\": \"" HASH_TEST "\", "
             "\"expires\": \"2027-06-01T00:00:00Z\"}],"
             "\"rights\": {\"orders\": \"rw\", \"audit\": \"r\", \"logs/eu-\": \"rw\", "
             "\"v1:chat/\": \"rw\"},"
             "\"cors\": [\"https://app.example.com\"],"
             "\"status\": \"active\","
             "\"limits\": {\"requests_per_second\": 200, \"burst\": 400, "
             "\"bytes_in_per_second\": 10485760, \"bytes_out_per_second\": 104857600, "
             "\"live_reads\": 1000, \"uploads\": 16, \"upload_bytes\": 268435456, "
             "\"max_request_bytes\": 8388608, \"min_body_bytes_per_second\": 4096}},"
             "\"beta\": {\"keys\": [{\"id\": \"b1\", \"sha256\": \"" HASH_OTHER "\"}], "
             "\"status\": \"unpaid\", \"cors\": [\"http://localhost:3000\"]},"
             "\"gamma\": {\"status\": \"revoked\"},"
             "\"delta\": {}"
             "},"
             "\"issuers\": [{\"issuer\": \"https://id.example.com/\", \"audience\": \"runnel\", "
             "\"tenant_claim\": \"client_id\", \"scope_rights\": true, \"leeway_seconds\": 30, "
             "\"keys\": [{\"kid\": \"h1\", \"secret_base64url\": \"" SECRET "\"}, "
             "{\"kid\": \"e1\", \"pem\": \"" EC_PEM "\"}], "
             "\"jwks_file\": \"%s\", "
             "\"jwks_url\": \"https://id.example.com/.well-known/jwks.json\"},"
             "{\"issuer\": \"https://other.example.com/\", \"audience\": \"api\", "
             "\"jwks_url\": \"https://other.example.com/jwks.json\"}],"
             "\"authorizer\": {\"url\": \"http://127.0.0.1:9100/authorize\", \"timeout_ms\": 500, "
             "\"cache_ms\": 2000}}",
             jwks);
    int missing = -1;
    rn_tenants *t = load_text(text, &missing, err, sizeof err);
    if (!t)
        fail_msg("refused: %s", err);
    assert_int_equal(missing, 0);
    assert_int_equal(t->ntenants, 4);

    const rn_tenant *acme = rn_tenants_by_name(t, "acme");
    assert_non_null(acme);
    assert_string_equal(acme->name, "acme");
    assert_int_equal(acme->status, RN_TENANT_ACTIVE);
    assert_int_equal(acme->nkeys, 1);
    assert_string_equal(acme->keys[0].id, "k1");
    unsigned char hash[32];
    gw_sha256("test", hash);
    assert_memory_equal(acme->keys[0].sha256, hash, 32);
    assert_int_equal(acme->keys[0].expires_ms, INT64_C(1811808000000));
    assert_int_equal(acme->rights.n, 4);
    assert_int_equal(acme->ncors, 1);
    assert_string_equal(acme->cors[0], "https://app.example.com");
    const rn_tenant_limits *l = &acme->limits;
    assert_int_equal(l->requests_per_second, 200);
    assert_int_equal(l->burst, 400);
    assert_int_equal(l->bytes_in_per_second, 10485760);
    assert_int_equal(l->bytes_out_per_second, 104857600);
    assert_int_equal(l->live_reads, 1000);
    assert_int_equal(l->uploads, 16);
    assert_int_equal(l->upload_bytes, 268435456);
    assert_int_equal(l->max_request_bytes, 8388608);
    assert_int_equal(l->min_body_bytes_per_second, 4096);

    const rn_api_key *key = NULL;
    assert_ptr_equal(rn_tenants_by_key(t, hash, &key), acme);
    assert_ptr_equal(key, &acme->keys[0]);

    const rn_tenant *beta = rn_tenants_by_name(t, "beta");
    assert_non_null(beta);
    assert_int_equal(beta->status, RN_TENANT_UNPAID);
    assert_int_equal(beta->keys[0].expires_ms, 0); /* never */
    gw_sha256("other", hash);
    assert_ptr_equal(rn_tenants_by_key(t, hash, &key), beta);
    assert_string_equal(key->id, "b1");
    static const rn_tenant_limits unbounded = {0};
    assert_memory_equal(&beta->limits, &unbounded, sizeof unbounded);
    assert_int_equal(beta->rights.n, 0);

    const rn_tenant *gamma = rn_tenants_by_name(t, "gamma");
    assert_non_null(gamma);
    assert_int_equal(gamma->status, RN_TENANT_REVOKED);
    assert_int_equal(gamma->nkeys, 0);
    const rn_tenant *delta = rn_tenants_by_name(t, "delta");
    assert_non_null(delta);
    assert_int_equal(delta->status, RN_TENANT_ACTIVE); /* the default */
    assert_int_equal(delta->ncors, 0);
    assert_null(rn_tenants_by_name(t, "nobody"));
    assert_null(rn_tenants_by_name(t, "acm"));
    gw_sha256("nobody's key", hash);
    key = &acme->keys[0];
    assert_null(rn_tenants_by_key(t, hash, &key));

    assert_int_equal(t->nissuers, 2);
    const rn_issuer *is = &t->issuers[0];
    assert_string_equal(is->issuer, "https://id.example.com/");
    assert_string_equal(is->audience, "runnel");
    assert_string_equal(is->tenant_claim, "client_id");
    assert_true(is->scope_rights);
    assert_int_equal(is->leeway_s, 30);
    assert_int_equal(rn_jwt_keys_count(is->keys), 3); /* h1, e1 and the file's j1 */
    assert_string_equal(is->jwks_url, "https://id.example.com/.well-known/jwks.json");
    const rn_issuer *other = &t->issuers[1];
    assert_string_equal(other->issuer, "https://other.example.com/");
    assert_string_equal(other->tenant_claim, "client_id"); /* the default */
    assert_false(other->scope_rights);
    assert_int_equal(rn_jwt_keys_count(other->keys), 0);
    assert_string_equal(other->jwks_url, "https://other.example.com/jwks.json");

    assert_string_equal(t->authorizer.url, "http://127.0.0.1:9100/authorize");
    assert_int_equal(t->authorizer.timeout_ms, 500);
    assert_int_equal(t->authorizer.cache_ms, 2000);
    rn_tenants_unref(t);
}

static void test_cors_lookups(void **state) {
    (void)state;
    char err[512];
    rn_tenants *t = load_text(
        FILE_OF("\"acme\": {\"cors\": [\"https://app.example.com\", \"http://localhost:3000\"]},"
                "\"beta\": {\"cors\": [\"https://beta.example.org\"]}, \"gamma\": {}",
                "", ""),
        NULL, err, sizeof err);
    if (!t)
        fail_msg("refused: %s", err);
    const rn_tenant *acme = rn_tenants_by_name(t, "acme");
    const rn_tenant *beta = rn_tenants_by_name(t, "beta");
    const rn_tenant *gamma = rn_tenants_by_name(t, "gamma");
    const char *app = "https://app.example.comX"; /* the length bounds the origin */
    assert_true(rn_tenant_cors(acme, app, 23));
    assert_false(rn_tenant_cors(acme, app, 24));
    assert_false(rn_tenant_cors(acme, app, 22));
    assert_true(rn_tenant_cors(acme, "http://localhost:3000", 21));
    assert_false(rn_tenant_cors(acme, "http://localhost:3001", 21));
    assert_false(rn_tenant_cors(acme, "http://app.example.com", 22));
    assert_false(rn_tenant_cors(acme, "https://beta.example.org", 24));
    assert_false(rn_tenant_cors(acme, "*", 1));
    assert_false(rn_tenant_cors(gamma, "https://app.example.com", 23));
    assert_true(rn_tenant_cors(beta, "https://beta.example.org", 24));
    assert_true(rn_tenants_any_cors(t, "https://beta.example.org", 24));
    assert_true(rn_tenants_any_cors(t, app, 23));
    assert_false(rn_tenants_any_cors(t, app, 24));
    assert_false(rn_tenants_any_cors(t, "https://evil.example", 20));
    assert_false(rn_tenants_any_cors(t, "", 0));
    rn_tenants_unref(t);
}

static void test_missing_and_empty_files(void **state) {
    (void)state;
    char path[1024], err[512] = "";
    snprintf(path, sizeof path, "%s/no-such-file.json", gw_dir);
    int missing = 0;
    rn_tenants *t = rn_tenants_load(path, &missing, err, sizeof err);
    assert_non_null(t);
    assert_int_equal(missing, 1);
    assert_int_equal(t->ntenants, 0);
    assert_int_equal(t->nissuers, 0);
    assert_null(t->authorizer.url);
    unsigned char hash[32];
    gw_sha256("test", hash);
    const rn_api_key *key = NULL;
    assert_null(rn_tenants_by_key(t, hash, &key));
    assert_null(rn_tenants_by_name(t, "acme"));
    assert_false(rn_tenants_any_cors(t, "https://app.example.com", 23));
    rn_tenants_ref(t);
    rn_tenants_unref(t);
    rn_tenants_unref(t);

    missing = -1;
    t = load_text("{}", &missing, err, sizeof err);
    assert_non_null(t);
    assert_int_equal(missing, 0);
    assert_int_equal(t->ntenants, 0);
    rn_tenants_unref(t);
}

/* A refused file: its name, its text, and a word its error must name
 * (NULL: any reason). */
typedef struct {
    const char *name;
    const char *text;
    const char *names;
} refusal;

static const refusal refusals[] = {
    {"not JSON", "{\"tenants\": {" ACME "}, \"issuers\": [" ISSUER ",]", NULL},
    {"not JSON at the secret",
     "{\"issuers\": [{\"issuer\": \"https://id.example.com/\", \"audience\": \"runnel\", "
     "\"keys\": [{\"kid\": \"h1\", \"secret_base64url\": " SECRET "}]}]}",
     NULL},
    {"not JSON inside the secret",
     "{\"issuers\": [{\"issuer\": \"https://id.example.com/\", \"audience\": \"runnel\", "
     "\"keys\": [{\"kid\": \"h1\", \"secret_base64url\": "
     "\"VE9QU0VDUkVU\\qLXRvcHNlY3JldC1UT1BTRUNSRVQtdG8\"}]}]}",
     NULL},
    {"not an object", "[" ISSUER "]", NULL},
    {"tenants not an object", "{\"tenants\": [], \"issuers\": [" ISSUER "]}", NULL},
    {"duplicate top member",
     "{\"tenants\": {" ACME "}, \"issuers\": [" ISSUER "], \"tenants\": {}}", NULL},
    {"duplicate tenant", FILE_OF(ACME ", " ACME, ISSUER, ""), NULL},
    {"duplicate tenant member",
     WITH_ACME("{\"keys\": [" KEY_TEST "], \"status\": \"active\", \"status\": \"revoked\"}"),
     NULL},
    {"duplicate limit", WITH_LIMITS("{\"uploads\": 1, \"uploads\": 100}"), NULL},
    {"duplicate key member",
     WITH_KEY("{\"id\": \"k1\", \"id\": \"k2\", \"sha256\": \"" HASH_TEST "\"}"), NULL},
    {"unknown top member", FILE_OF(ACME, ISSUER, ", \"bogus_top\": 1"), "bogus_top"},
    {"unknown tenant member", WITH_ACME("{\"keys\": [" KEY_TEST "], \"bogus_tenant\": 1}"),
     "bogus_tenant"},
    {"unknown limit", WITH_LIMITS("{\"requests_per_secnd\": 10}"), "requests_per_secnd"},
    {"unknown key member",
     WITH_KEY("{\"id\": \"k1\", \"sha256\": \"" HASH_TEST "\", \"bogus_key\": 1}"), "bogus_key"},
    {"unknown issuer member",
     WITH_ISSUER("{\"issuer\": \"https://id.example.com/\", \"audience\": \"runnel\", "
                 "\"bogus_issuer\": 1, \"keys\": [" ISSUER_KEY "]}"),
     "bogus_issuer"},
    {"unknown issuer key member",
     WITH_ISSUER("{\"issuer\": \"https://id.example.com/\", \"audience\": \"runnel\", \"keys\": "
                 "[{\"kid\": \"h1\", \"secret_base64url\": \"" SECRET "\", \"bogus_ikey\": 1}]}"),
     "bogus_ikey"},
    {"unknown authorizer member",
     FILE_OF(ACME, ISSUER,
             ", \"authorizer\": {\"url\": \"http://127.0.0.1:9100/authorize\", "
             "\"bogus_authorizer\": 1}"),
     "bogus_authorizer"},
    {"empty tenant name", FILE_OF("\"\": {}", ISSUER, AUTHORIZER), NULL},
    {"tenant named -", FILE_OF("\"-\": {}", ISSUER, ""), NULL},
    {"tenant name with a newline", FILE_OF("\"ac\\nme\": {}", ISSUER, ""), NULL},
    {"tenant name with a quote", FILE_OF("\"ac\\\"me\": {}", ISSUER, ""), NULL},
    {"sha256 too short",
     WITH_KEY("{\"id\": \"k1\", \"sha256\": "
              "\"9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a0\"}"),
     NULL},
    {"sha256 not hex",
     WITH_KEY("{\"id\": \"k1\", \"sha256\": "
              "\"9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a0g\"}"),
     NULL},
    {"sha256 not a string", WITH_KEY("{\"id\": \"k1\", \"sha256\": 12}"), NULL},
    {"key without sha256", WITH_KEY("{\"id\": \"k1\"}"), NULL},
    {"expires not a date",
     WITH_KEY("{\"id\": \"k1\", \"sha256\": \"" HASH_TEST "\", \"expires\": \"soon\"}"), NULL},
    {"expires month 13",
     WITH_KEY("{\"id\": \"k1\", \"sha256\": \"" HASH_TEST "\", \"expires\": "
              "\"2027-13-01T00:00:00Z\"}"),
     NULL},
    {"expires a number",
     WITH_KEY("{\"id\": \"k1\", \"sha256\": \"" HASH_TEST "\", \"expires\": 1811808000}"), NULL},
    {"cors *", WITH_ACME("{\"cors\": [\"*\"]}"), NULL},
    {"cors empty origin", WITH_ACME("{\"cors\": [\"\"]}"), NULL},
    {"cors without scheme", WITH_ACME("{\"cors\": [\"app.example.com\"]}"), NULL},
    {"cors with a path", WITH_ACME("{\"cors\": [\"https://app.example.com/\"]}"), NULL},
    {"cors not a list", WITH_ACME("{\"cors\": \"https://app.example.com\"}"), NULL},
    {"status unknown", WITH_ACME("{\"status\": \"suspended\"}"), NULL},
    {"status upper case", WITH_ACME("{\"status\": \"Active\"}"), NULL},
    {"status a number", WITH_ACME("{\"status\": 1}"), NULL},
    {"burst without requests_per_second", WITH_LIMITS("{\"burst\": 10}"), "burst"},
    {"limit negative", WITH_LIMITS("{\"uploads\": -1}"), NULL},
    {"limit fractional", WITH_LIMITS("{\"live_reads\": 1.5}"), NULL},
    {"limit a string", WITH_LIMITS("{\"upload_bytes\": \"10\"}"), NULL},
    {"rights letter", WITH_ACME("{\"rights\": {\"orders\": \"rx\"}}"), NULL},
    {"rights bucket id", WITH_ACME("{\"rights\": {\"abc\": \"r\"}}"), NULL},
    {"rights not letters", WITH_ACME("{\"rights\": {\"orders\": 1}}"), NULL},
    {"issuer without keys",
     WITH_ISSUER("{\"issuer\": \"https://id.example.com/\", \"audience\": \"runnel\"}"), NULL},
    {"issuer with no key in keys",
     WITH_ISSUER("{\"issuer\": \"https://id.example.com/\", \"audience\": \"runnel\", "
                 "\"keys\": []}"),
     NULL},
    {"issuer without audience",
     WITH_ISSUER("{\"issuer\": \"https://id.example.com/\", \"keys\": [" ISSUER_KEY "]}"), NULL},
    {"issuer without issuer", WITH_ISSUER("{\"audience\": \"runnel\", \"keys\": [" ISSUER_KEY "]}"),
     NULL},
    {"bad PEM",
     WITH_ISSUER("{\"issuer\": \"https://id.example.com/\", \"audience\": \"runnel\", \"keys\": "
                 "[" ISSUER_KEY ", {\"kid\": \"e1\", \"pem\": \"-----BEGIN PUBLIC KEY-----\\n"
                 "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE" SECRET "\\n"
                 "-----END PUBLIC KEY-----\\n\"}]}"),
     NULL},
    {"short HS256 secret",
     WITH_ISSUER("{\"issuer\": \"https://id.example.com/\", \"audience\": \"runnel\", \"keys\": "
                 "[{\"kid\": \"h1\", \"secret_base64url\": \"" SHORT_SECRET "\"}]}"),
     NULL},
    {"secret not base64url",
     WITH_ISSUER("{\"issuer\": \"https://id.example.com/\", \"audience\": \"runnel\", \"keys\": "
                 "[{\"kid\": \"h1\", \"secret_base64url\": \"" SECRET "+/==\"}]}"),
     NULL},
    {"jwks_file missing",
     WITH_ISSUER("{\"issuer\": \"https://id.example.com/\", \"audience\": \"runnel\", \"keys\": "
                 "[" ISSUER_KEY "], \"jwks_file\": \"/nonexistent/runnel-gw-jwks.json\"}"),
     NULL},
    {"two tenants with one key",
     FILE_OF(ACME ", \"beta\": {\"keys\": [{\"id\": \"b1\", \"sha256\": \"" HASH_TEST "\"}]}",
             ISSUER, ""),
     NULL},
};

/* Whether err quotes any 12 characters of the secret, or its bytes. */
static int quotes_secret(const char *err) {
    static const char *const secrets[] = {SECRET, SHORT_SECRET, "TOPSECRET", "topsecret"};
    for (size_t i = 0; i < sizeof secrets / sizeof secrets[0]; i++) {
        size_t n = strlen(secrets[i]);
        size_t w = n < 12 ? n : 12;
        for (size_t at = 0; at + w <= n; at++) {
            char window[16];
            memcpy(window, secrets[i] + at, w);
            window[w] = '\0';
            if (strstr(err, window))
                return 1;
        }
    }
    return 0;
}

static void test_refusal(void **state) {
    const refusal *c = *state;
    char err[1024];
    memset(err, 0, sizeof err);
    int missing = -1;
    rn_tenants *t = load_text(c->text, &missing, err, sizeof err);
    if (t) {
        rn_tenants_unref(t);
        fail_msg("%s: the file loaded", c->name);
    }
    if (!err[0])
        fail_msg("%s: refused without a reason", c->name);
    if (quotes_secret(err))
        fail_msg("%s: the error quotes the secret: %s", c->name, err);
    if (c->names && !strstr(err, c->names))
        fail_msg("%s: the error does not name %s: %s", c->name, c->names, err);
}

/* The refused files' texts are valid but for their one fault. */
static void test_the_refusals_base_loads(void **state) {
    (void)state;
    char err[512];
    static const char *const valid[] = {
        FILE_OF(ACME, ISSUER, AUTHORIZER),
        WITH_LIMITS("{\"requests_per_second\": 10, \"burst\": 10, \"uploads\": 1}"),
        WITH_KEY("{\"id\": \"k1\", \"sha256\": \"" HASH_TEST "\", \"expires\": "
                 "\"2027-12-01T00:00:00Z\"}"),
        WITH_ACME("{\"cors\": [\"https://app.example.com\"], \"status\": \"revoked\", "
                  "\"rights\": {\"orders\": \"r\"}}"),
        FILE_OF(ACME ", \"beta\": {\"keys\": [{\"id\": \"b1\", \"sha256\": \"" HASH_OTHER "\"}]}",
                ISSUER, ""),
    };
    for (size_t i = 0; i < sizeof valid / sizeof valid[0]; i++) {
        rn_tenants *t = load_text(valid[i], NULL, err, sizeof err);
        if (!t)
            fail_msg("valid file %zu refused: %s", i, err);
        rn_tenants_unref(t);
    }
}

#define NREFUSALS (sizeof refusals / sizeof refusals[0])

int main(void) {
    static const struct CMUnitTest fixed[] = {
        cmocka_unit_test(test_valid_file_with_every_member),
        cmocka_unit_test(test_cors_lookups),
        cmocka_unit_test(test_missing_and_empty_files),
        cmocka_unit_test(test_the_refusals_base_loads),
    };
    size_t nfixed = sizeof fixed / sizeof fixed[0];
    struct CMUnitTest tests[sizeof fixed / sizeof fixed[0] + NREFUSALS];
    memcpy(tests, fixed, sizeof fixed);
    for (size_t i = 0; i < NREFUSALS; i++) {
        struct CMUnitTest one = {refusals[i].name, test_refusal, NULL, NULL, (void *)&refusals[i]};
        tests[nfixed + i] = one;
    }
    return _cmocka_run_group_tests("test_gw_tenants", tests, nfixed + NREFUSALS, gw_make_dir,
                                   gw_remove_dir);
}
