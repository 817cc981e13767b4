/*
 * test_jwt.c - unit tests for the gateway's credential verifier
 * (src/gateway/: jwt.c, jws.c, jwt_keys.c, jwks.c).
 *
 * How: the published examples (RFC 7515 A.1 HS256 and A.3 ES256, RFC 8037
 * A.4 Ed25519), whose keys are given as JWKs, verify through the signature
 * layer (jws.h) with their payloads; they carry no RFC 9068 type or claims,
 * so the full verifier refuses them, which is checked too. Then the corpus
 * tests/unit/jwt_corpus.json, made by Node.js crypto (jwt_corpus.mjs): each
 * token must get its status against two sets holding the same keys (an
 * HS256 secret and PEM public keys; the JWK Set), and the alg-swapped ones
 * against a set of public keys only; valid tokens expose their claims. The
 * time rules are checked at their boundaries by moving the policy's clock;
 * every prefix (in a buffer of exactly that length, so ASan sees any read
 * past it) and every one-character change of a valid token of each
 * algorithm is refused. Key sets: a JWK Set with all three kinds and
 * skipped keys, JWK Sets refused (unknown kty only, bad members, limits)
 * leaving the set unchanged and naming no secret, PEM and secret refusals,
 * key selection without kid, and OpenSSL's error queue left empty.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <math.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/jws.h"
#include "gateway/jwt.h"
#include "util/buf.h"
#include "util/text.h"

static json_t *corpus;
static rn_jwt_keys *pem_set, *jwks_set, *public_set;
static rn_jwt_policy policy;

static const char *corpus_str(const char *name) {
    const char *s = json_string_value(json_object_get(corpus, name));
    assert_non_null(s);
    return s;
}

static int load_corpus(void **state) {
    (void)state;
    json_error_t je;
    corpus = json_load_file(JWT_CORPUS, JSON_REJECT_DUPLICATES, &je);
    if (!corpus) {
        fprintf(stderr, "%s: %s\n", JWT_CORPUS, je.text);
        return -1;
    }
    policy.issuer = corpus_str("issuer");
    policy.audience = corpus_str("audience");
    policy.now_s = (uint64_t)json_integer_value(json_object_get(corpus, "now"));
    policy.leeway_s = 30;
    const char *k = corpus_str("secret");
    uint8_t secret[64];
    long n = rn_b64url_decode(k, strlen(k), secret);
    char err[200];
    pem_set = rn_jwt_keys_new();
    public_set = rn_jwt_keys_new();
    jwks_set = rn_jwt_keys_new();
    const char *ec = corpus_str("ec_pem"), *ed = corpus_str("ed_pem");
    if (n != 32 || rn_jwt_keys_add_secret(pem_set, "hs", secret, 32, err, sizeof err) != 0 ||
        rn_jwt_keys_add_pem(pem_set, "ec", ec, strlen(ec), err, sizeof err) != 0 ||
        rn_jwt_keys_add_pem(pem_set, "ed", ed, strlen(ed), err, sizeof err) != 0 ||
        rn_jwt_keys_add_pem(public_set, "ec", ec, strlen(ec), err, sizeof err) != 0 ||
        rn_jwt_keys_add_pem(public_set, "ed", ed, strlen(ed), err, sizeof err) != 0)
        return -1;
    char *doc = json_dumps(json_object_get(corpus, "jwks"), 0);
    int rc = rn_jwt_keys_add_jwks(jwks_set, doc, strlen(doc), NULL, err, sizeof err);
    free(doc);
    return rc;
}

static int free_corpus(void **state) {
    (void)state;
    rn_jwt_keys_free(pem_set);
    rn_jwt_keys_free(jwks_set);
    rn_jwt_keys_free(public_set);
    json_decref(corpus);
    return 0;
}

static rn_jwt_status status_named(const char *name) {
    static const char *names[] = {
        "OK",         "MALFORMED",    "ALG_REFUSED",    "UNKNOWN_KEY",   "BAD_SIGNATURE",
        "WRONG_TYPE", "WRONG_ISSUER", "WRONG_AUDIENCE", "MISSING_CLAIM", "NOT_YET_VALID",
        "EXPIRED"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(name, names[i]) == 0)
            return (rn_jwt_status)i;
    fail_msg("unknown status %s in the corpus", name);
    return RN_JWT_OK;
}

/* Verifies a copy of the first n bytes of t in a buffer of exactly n bytes. */
static rn_jwt_status verify_n(const rn_jwt_keys *k, const rn_jwt_policy *p, const char *t, size_t n,
                              rn_jwt_claims **c) {
    char *copy = rn_xmalloc(n ? n : 1);
    memcpy(copy, t, n);
    rn_jwt_status st = rn_jwt_verify(k, p, copy, n, c);
    free(copy);
    return st;
}

static const char *token_named(const char *name) {
    size_t i;
    json_t *t;
    json_array_foreach(json_object_get(corpus, "tokens"), i, t) {
        if (strcmp(json_string_value(json_object_get(t, "name")), name) == 0)
            return json_string_value(json_object_get(t, "token"));
    }
    fail_msg("no token %s in the corpus", name);
    return NULL;
}

/* ---- the published examples, at the signature layer ---- */

static void test_rfc_examples_verify_at_the_signature_layer(void **state) {
    (void)state;
    static const struct {
        const char *jwk, *token, *payload;
    } ex[] = {
        {/* RFC 7515 A.1 */
         "{\"kty\":\"oct\",\"k\":\"AyM1SysPpbyDfgZld3umj1qzKObwVMkoqQ-EstJQLr_T-"
         "1qS0gZH75aKtMN3Yj0iPS4hcgUuTwjAzZr1Z9CAow\"}",
         "eyJ0eXAiOiJKV1QiLA0KICJhbGciOiJIUzI1NiJ9.eyJpc3MiOiJqb2UiLA0KICJleHAiOjEzMDA4MTkzODAsDQo"
         "gImh0dHA6Ly9leGFtcGxlLmNvbS9pc19yb290Ijp0cnVlfQ.dBjftJeZ4CVP-mB92K27uhbUJU1p1r_"
         "wW1gFWFOEjXk",
         "{\"iss\":\"joe\",\r\n \"exp\":1300819380,\r\n \"http://example.com/is_root\":true}"},
        {/* RFC 7515 A.3 (its JWK, private member d included: ignored) */
         "{\"kty\":\"EC\",\"crv\":\"P-256\",\"x\":\"f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU\","
         "\"y\":\"x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0\","
         "\"d\":\"jpsQnnGQmL-YBIffH1136cLyQo3ju0Fh_VLkEbTmS-4\"}",
         "eyJhbGciOiJFUzI1NiJ9.eyJpc3MiOiJqb2UiLA0KICJleHAiOjEzMDA4MTkzODAsDQogImh0dHA6Ly9leGFtcG"
         "xlLmNvbS9pc19yb290Ijp0cnVlfQ.DtEhU3ljbEg8L38VWAfUAqOyKAM6-Xx-F4GawxaepmXFCgfTjDxw5djxLa8I"
         "SlSApmWQxfKTUJqPP3-Kg6NU1Q",
         "{\"iss\":\"joe\",\r\n \"exp\":1300819380,\r\n \"http://example.com/is_root\":true}"},
        {/* RFC 8037 A.4 (A.1's key) */
         "{\"kty\":\"OKP\",\"crv\":\"Ed25519\","
         "\"d\":\"nWGxne_9WmC6hEr0kuwsxERJxWl7MmkZcDusAxyuf2A\","
         "\"x\":\"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo\"}",
         "eyJhbGciOiJFZERTQSJ9.RXhhbXBsZSBvZiBFZDI1NTE5IHNpZ25pbmc.hgyY0il_MGCjP0JzlnLWG1PPOt7-"
         "09PGcvMg3AIbQR6dWbhijcNR4ki4iylGjg5BhVsPt9g7sVvpAr_MuM0KAg",
         "Example of Ed25519 signing"},
    };
    for (size_t i = 0; i < sizeof ex / sizeof ex[0]; i++) {
        rn_jwt_keys *k = rn_jwt_keys_new();
        char doc[512], err[200];
        snprintf(doc, sizeof doc, "{\"keys\":[%s]}", ex[i].jwk);
        assert_int_equal(rn_jwt_keys_add_jwks(k, doc, strlen(doc), NULL, err, sizeof err), 0);
        uint8_t buf[RN_JWS_DECODED_MAX];
        rn_jws jws;
        size_t n = strlen(ex[i].token);
        assert_int_equal(rn_jws_verify(k, ex[i].token, n, buf, &jws), RN_JWT_OK);
        assert_int_equal(jws.payload_len, strlen(ex[i].payload));
        assert_memory_equal(jws.payload, ex[i].payload, jws.payload_len);
        rn_jws_release(&jws);
        /* production is strict: no at+jwt type */
        assert_int_equal(verify_n(k, &policy, ex[i].token, n, NULL), RN_JWT_WRONG_TYPE);
        /* the last signature character changed */
        char *bad = rn_xstrdup(ex[i].token);
        bad[n - 2] = bad[n - 2] == 'A' ? 'B' : 'A';
        assert_int_equal(rn_jws_verify(k, bad, n, buf, &jws), RN_JWT_BAD_SIGNATURE);
        free(bad);
        rn_jwt_keys_free(k);
    }
}

/* ---- the Node.js corpus ---- */

static void test_signature_layer_refuses_a_signed_bad_payload(void **state) {
    (void)state;
    static const char *names[] = {"HS256 bad base64url in signed claims",
                                  "ES256 bad base64url in signed claims",
                                  "EdDSA bad base64url in signed claims"};
    for (size_t i = 0; i < 3; i++) {
        const char *tok = token_named(names[i]);
        uint8_t buf[RN_JWS_DECODED_MAX];
        rn_jws jws;
        assert_int_equal(rn_jws_verify(pem_set, tok, strlen(tok), buf, &jws), RN_JWT_MALFORMED);
        assert_null(jws.header);
    }
}

static void test_corpus_tokens_get_their_status(void **state) {
    (void)state;
    size_t i, checked = 0;
    json_t *t;
    json_array_foreach(json_object_get(corpus, "tokens"), i, t) {
        const char *name = json_string_value(json_object_get(t, "name"));
        const char *tok = json_string_value(json_object_get(t, "token"));
        rn_jwt_status want = status_named(json_string_value(json_object_get(t, "expect")));
        const rn_jwt_keys *sets[] = {pem_set, jwks_set};
        for (size_t s = 0; s < 2; s++) {
            static char sentinel;
            rn_jwt_claims *c = (rn_jwt_claims *)&sentinel; /* must be overwritten */
            rn_jwt_status st = verify_n(sets[s], &policy, tok, strlen(tok), &c);
            if (st != want)
                fail_msg("%s (%s set): %s, want %s", name, s ? "JWKS" : "PEM",
                         rn_jwt_status_text(st), rn_jwt_status_text(want));
            assert_true(st == RN_JWT_OK ? c != NULL : c == NULL);
            rn_jwt_claims_free(c);
            checked++;
        }
        const char *pub = json_string_value(json_object_get(t, "public_only"));
        if (pub)
            assert_int_equal(verify_n(public_set, &policy, tok, strlen(tok), NULL),
                             status_named(pub));
    }
    assert_true(checked >= 200);
    /* no failed check left anything in this thread's OpenSSL error queue */
    assert_int_equal(ERR_peek_error(), 0);
}

static void test_valid_tokens_expose_their_claims(void **state) {
    (void)state;
    size_t i, seen = 0;
    json_t *t;
    json_array_foreach(json_object_get(corpus, "tokens"), i, t) {
        const json_t *want = json_object_get(t, "claims");
        if (!want)
            continue;
        const char *tok = json_string_value(json_object_get(t, "token"));
        rn_jwt_claims *c = NULL;
        assert_int_equal(verify_n(jwks_set, &policy, tok, strlen(tok), &c), RN_JWT_OK);
        /* exp rounded down, nbf and iat up */
        assert_int_equal(rn_jwt_claims_exp(c),
                         (uint64_t)floor(json_number_value(json_object_get(want, "exp"))));
        uint64_t v = 0;
        assert_int_equal(rn_jwt_claims_nbf(c, &v), 0);
        assert_int_equal(v, (uint64_t)ceil(json_number_value(json_object_get(want, "nbf"))));
        assert_int_equal(rn_jwt_claims_iat(c, &v), 0);
        assert_int_equal(v, (uint64_t)ceil(json_number_value(json_object_get(want, "iat"))));
        static const char *names[] = {"client_id", "tenant", "scope", "sub", "jti", "iss"};
        for (size_t n = 0; n < sizeof names / sizeof names[0]; n++)
            assert_string_equal(rn_jwt_claims_string(c, names[n]),
                                json_string_value(json_object_get(want, names[n])));
        assert_null(rn_jwt_claims_string(c, "exp")); /* a number */
        assert_null(rn_jwt_claims_string(c, "absent"));
        /* scope "read write admin:x": whole space-separated tokens only */
        assert_true(rn_jwt_claims_has_scope(c, "read"));
        assert_true(rn_jwt_claims_has_scope(c, "write"));
        assert_true(rn_jwt_claims_has_scope(c, "admin:x"));
        assert_false(rn_jwt_claims_has_scope(c, "rea"));
        assert_false(rn_jwt_claims_has_scope(c, "admin"));
        assert_false(rn_jwt_claims_has_scope(c, "read write"));
        assert_false(rn_jwt_claims_has_scope(c, ""));
        rn_jwt_claims_free(c);
        seen++;
    }
    assert_int_equal(seen, 18); /* 6 valid tokens for each of 3 algorithms */
}

static void test_time_rules_hold_at_their_boundaries(void **state) {
    (void)state;
    const char *tok = token_named("ES256 valid"); /* exp now+3600, nbf and iat now-10 */
    size_t n = strlen(tok);
    uint64_t now = policy.now_s;
    static const struct {
        int64_t at, leeway;
        rn_jwt_status want;
    } cases[] = {
        {3600 + 30 - 1, 30, RN_JWT_OK},
        {3600 + 30, 30, RN_JWT_EXPIRED},
        {3600 - 1, 0, RN_JWT_OK},
        {3600, 0, RN_JWT_EXPIRED},
        {-10 - 30, 30, RN_JWT_OK},
        {-10 - 31, 30, RN_JWT_NOT_YET_VALID},
        {-10, 0, RN_JWT_OK},
        {-11, 0, RN_JWT_NOT_YET_VALID},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        rn_jwt_policy p = policy;
        p.now_s = now + (uint64_t)cases[i].at;
        p.leeway_s = (uint64_t)cases[i].leeway;
        if (verify_n(pem_set, &p, tok, n, NULL) != cases[i].want)
            fail_msg("case %zu: want %s", i, rn_jwt_status_text(cases[i].want));
    }
    /* exp + leeway past the top of the range saturates instead of wrapping
     * to 0 (which would make the token expired) */
    rn_jwt_policy p = policy;
    p.leeway_s = UINT64_MAX - (now + 3600) + 1;
    assert_int_equal(verify_n(pem_set, &p, tok, n, NULL), RN_JWT_OK);
    p.now_s = UINT64_MAX;
    assert_int_equal(verify_n(pem_set, &p, tok, n, NULL), RN_JWT_EXPIRED);
    /* ... and so does now + leeway (which would wrap to before nbf) */
    p.leeway_s = UINT64_MAX;
    p.now_s = now - 15;
    assert_int_equal(verify_n(pem_set, &p, tok, n, NULL), RN_JWT_OK);
}

static void test_every_prefix_and_change_is_refused(void **state) {
    (void)state;
    static const char *names[] = {"HS256 valid", "ES256 valid", "EdDSA valid"};
    static const char subst[] = "AQgw-_.Z+=";
    for (size_t a = 0; a < 3; a++) {
        const char *tok = token_named(names[a]);
        size_t n = strlen(tok);
        assert_int_equal(verify_n(pem_set, &policy, tok, n, NULL), RN_JWT_OK);
        for (size_t cut = 0; cut < n; cut++)
            if (verify_n(pem_set, &policy, tok, cut, NULL) == RN_JWT_OK)
                fail_msg("%s: the first %zu bytes were accepted", names[a], cut);
        char *copy = rn_xmalloc(n);
        for (size_t i = 0; i < n; i++) {
            for (const char *c = subst; *c; c++) {
                if (*c == tok[i])
                    continue;
                memcpy(copy, tok, n);
                copy[i] = *c;
                if (rn_jwt_verify(pem_set, &policy, copy, n, NULL) == RN_JWT_OK)
                    fail_msg("%s: byte %zu changed to '%c' was accepted", names[a], i, *c);
            }
        }
        free(copy);
    }
    /* over the bound: refused before anything is decoded */
    char big[RN_JWT_MAX_TOKEN + 1];
    memset(big, 'A', sizeof big);
    assert_int_equal(rn_jwt_verify(pem_set, &policy, big, sizeof big, NULL), RN_JWT_MALFORMED);
    assert_int_equal(rn_jwt_verify(pem_set, &policy, "", 0, NULL), RN_JWT_MALFORMED);
}

/* ---- key sets ---- */

static void test_jwks_with_every_kind_and_skipped_keys(void **state) {
    (void)state;
    rn_jwt_keys *k = rn_jwt_keys_new();
    char *doc = json_dumps(json_object_get(corpus, "jwks"), 0);
    size_t skipped = 99;
    char err[200];
    assert_int_equal(rn_jwt_keys_add_jwks(k, doc, strlen(doc), &skipped, err, sizeof err), 0);
    assert_int_equal(rn_jwt_keys_count(k), 3);
    assert_int_equal(skipped, json_integer_value(json_object_get(corpus, "jwks_skipped")));
    /* a second document adds to the set */
    assert_int_equal(rn_jwt_keys_add_jwks(k, doc, strlen(doc), NULL, NULL, 0), 0);
    assert_int_equal(rn_jwt_keys_count(k), 6);
    free(doc);
    rn_jwt_keys_free(k);
}

static void test_jwks_refusals_change_nothing(void **state) {
    (void)state;
    const char *k32 = corpus_str("secret");
    const char *ec_x = "f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU";
    const char *ec_y = "x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0";
    /* y + 1: canonical base64url (the last character's low bits zero), not on the curve */
    const char *ec_y_off = "x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a4";
    const char *zeros = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA";
    struct {
        const char *why; /* in the reason */
        char text[512];
    } docs[24];
    size_t n = 0;
#define DOC(w, ...) (docs[n].why = w, snprintf(docs[n++].text, sizeof docs[0].text, __VA_ARGS__))
    DOC("not JSON", "not json {\"kty\":\"oct\",\"k\":\"%s\"", k32);
    /* a bad escape inside the secret: jansson's own message would quote what
     * comes before it (up to 20 characters) */
    DOC("not JSON", "{\"keys\":[{\"kty\":\"oct\",\"k\":\"%.12s\\q%s\"}]}", k32, k32 + 12);
    DOC("no \"keys\"", "[]");
    DOC("no \"keys\"", "{}");
    DOC("no \"keys\"", "{\"keys\":{}}");
    DOC("no usable key (0", "{\"keys\":[]}");
    DOC("no usable key (2",
        "{\"keys\":[{\"kty\":\"RSA\",\"n\":\"AQAB\",\"e\":\"AQAB\"},{\"kty\":\"EC\",\"crv\":"
        "\"P-384\",\"x\":\"AA\",\"y\":\"AA\"}]}"); /* unknown kinds only */
    DOC("not an object", "{\"keys\":[1]}");
    DOC("kty is not", "{\"keys\":[{\"kty\":7}]}");
    DOC("kty missing", "{\"keys\":[{\"k\":\"%s\"}]}", k32);
    DOC("kid is not", "{\"keys\":[{\"kty\":\"oct\",\"k\":\"%s\",\"kid\":7}]}", k32);
    DOC("at least 32", "{\"keys\":[{\"kty\":\"oct\",\"k\":\"%.42s\"}]}", zeros); /* 31 bytes */
    DOC("k missing", "{\"keys\":[{\"kty\":\"oct\"}]}");
    DOC("k missing", "{\"keys\":[{\"kty\":\"oct\",\"k\":\"%s=\"}]}", k32);
    DOC("x and y must",
        "{\"keys\":[{\"kty\":\"EC\",\"crv\":\"P-256\",\"x\":\"%sA\",\"y\":\"%s\"}]}", ec_x, ec_y);
    DOC("x and y must", "{\"keys\":[{\"kty\":\"EC\",\"crv\":\"P-256\",\"x\":\"%s\"}]}", ec_x);
    DOC("crv missing", "{\"keys\":[{\"kty\":\"EC\",\"x\":\"%s\",\"y\":\"%s\"}]}", ec_x, ec_y);
    DOC("not a valid public key",
        "{\"keys\":[{\"kty\":\"EC\",\"crv\":\"P-256\",\"x\":\"%s\",\"y\":\"%s\"}]}", ec_x,
        ec_y_off);
    DOC("x must be", "{\"keys\":[{\"kty\":\"OKP\",\"crv\":\"Ed25519\",\"x\":\"%sA\"}]}", ec_x);
    DOC("use is not", "{\"keys\":[{\"kty\":\"OKP\",\"crv\":\"Ed25519\",\"x\":\"%s\",\"use\":1}]}",
        ec_x);
    /* a good key first: the document is refused whole */
    DOC("keys[1]: x and y",
        "{\"keys\":[{\"kty\":\"oct\",\"k\":\"%s\"},{\"kty\":\"EC\",\"crv\":\"P-256\"}]}", k32);
    DOC("not JSON", "{\"keys\":[{\"kty\":\"oct\",\"k\":\"%s\",\"kty\":\"oct\"}]}", k32);
#undef DOC
    char prefix[9];
    snprintf(prefix, sizeof prefix, "%s", k32);
    rn_jwt_keys *k = rn_jwt_keys_new();
    assert_int_equal(
        rn_jwt_keys_add_pem(k, "ec", corpus_str("ec_pem"), strlen(corpus_str("ec_pem")), NULL, 0),
        0);
    for (size_t i = 0; i < n; i++) {
        char err[200] = "";
        size_t skipped = 99;
        const char *doc = docs[i].text;
        if (rn_jwt_keys_add_jwks(k, doc, strlen(doc), &skipped, err, sizeof err) != -1)
            fail_msg("document %zu was accepted: %s", i, doc);
        assert_int_equal(rn_jwt_keys_count(k), 1);
        assert_int_equal(skipped, 99);
        if (!strstr(err, docs[i].why))
            fail_msg("document %zu: \"%s\", want \"%s\"", i, err, docs[i].why);
        if (strstr(err, prefix))
            fail_msg("document %zu: the reason quotes the secret: %s", i, err);
    }
    /* the same EC key, well formed, is accepted: the refusals were the members */
    char good[256];
    snprintf(good, sizeof good,
             "{\"keys\":[{\"kty\":\"EC\",\"crv\":\"P-256\",\"x\":\"%s\",\"y\":\"%s\"}]}", ec_x,
             ec_y);
    assert_int_equal(rn_jwt_keys_add_jwks(k, good, strlen(good), NULL, NULL, 0), 0);
    assert_int_equal(rn_jwt_keys_count(k), 2);
    /* the set's bound: 61 more keys make 63, and a document of two does not fit */
    uint8_t secret[32] = {1};
    for (int i = 0; i < RN_JWT_MAX_KEYS - 3; i++)
        assert_int_equal(rn_jwt_keys_add_secret(k, NULL, secret, 32, NULL, 0), 0);
    char two[256];
    snprintf(two, sizeof two,
             "{\"keys\":[{\"kty\":\"oct\",\"k\":\"%s\"},{\"kty\":\"oct\",\"k\":\"%s\"}]}", k32,
             k32);
    char err[200];
    assert_int_equal(rn_jwt_keys_add_jwks(k, two, strlen(two), NULL, err, sizeof err), -1);
    assert_non_null(strstr(err, "more than 64"));
    assert_int_equal(rn_jwt_keys_count(k), RN_JWT_MAX_KEYS - 1);
    rn_jwt_keys_free(k);
}

static void test_pem_and_secret_refusals(void **state) {
    (void)state;
    rn_jwt_keys *k = rn_jwt_keys_new();
    char err[200];
    const char *ec = corpus_str("ec_pem");
    /* another curve, RSA, a cut PEM, nonsense, a private key */
    const char *p384 = corpus_str("p384_pem"), *rsa = corpus_str("rsa_pem");
    assert_int_equal(rn_jwt_keys_add_pem(k, NULL, p384, strlen(p384), err, sizeof err), -1);
    assert_int_equal(rn_jwt_keys_add_pem(k, NULL, rsa, strlen(rsa), err, sizeof err), -1);
    assert_int_equal(rn_jwt_keys_add_pem(k, NULL, ec, strlen(ec) - 30, err, sizeof err), -1);
    assert_int_equal(rn_jwt_keys_add_pem(k, NULL, "hello", 5, err, sizeof err), -1);
    EVP_PKEY *priv = EVP_PKEY_Q_keygen(NULL, NULL, "ED25519");
    BIO *bio = BIO_new(BIO_s_mem());
    assert_int_equal(PEM_write_bio_PrivateKey(bio, priv, NULL, NULL, 0, NULL, NULL), 1);
    char *text = NULL;
    long tlen = BIO_get_mem_data(bio, &text);
    assert_int_equal(rn_jwt_keys_add_pem(k, NULL, text, (size_t)tlen, err, sizeof err), -1);
    BIO_free(bio);
    EVP_PKEY_free(priv);
    /* secrets: at least 32 bytes; kids: 1..256 bytes */
    uint8_t secret[40] = {7};
    assert_int_equal(rn_jwt_keys_add_secret(k, NULL, secret, 31, err, sizeof err), -1);
    char kid[RN_JWT_MAX_KID + 2];
    memset(kid, 'k', sizeof kid - 1);
    kid[sizeof kid - 1] = '\0';
    assert_int_equal(rn_jwt_keys_add_secret(k, kid, secret, 32, err, sizeof err), -1);
    assert_int_equal(rn_jwt_keys_add_secret(k, "", secret, 32, err, sizeof err), -1);
    assert_int_equal(rn_jwt_keys_count(k), 0);
    kid[RN_JWT_MAX_KID] = '\0';
    assert_int_equal(rn_jwt_keys_add_secret(k, kid, secret, 32, err, sizeof err), 0);
    assert_int_equal(rn_jwt_keys_add_pem(k, NULL, ec, strlen(ec), err, sizeof err), 0);
    while (rn_jwt_keys_count(k) < RN_JWT_MAX_KEYS)
        assert_int_equal(rn_jwt_keys_add_secret(k, NULL, secret, 32, err, sizeof err), 0);
    assert_int_equal(rn_jwt_keys_add_secret(k, NULL, secret, 32, err, sizeof err), -1);
    assert_int_equal(rn_jwt_keys_add_pem(k, NULL, ec, strlen(ec), err, sizeof err), -1);
    assert_int_equal(rn_jwt_keys_count(k), RN_JWT_MAX_KEYS);
    rn_jwt_keys_free(k);
    assert_int_equal(ERR_peek_error(), 0);
}

static void test_keys_without_kid_verify_only_tokens_without_kid(void **state) {
    (void)state;
    const char *k = corpus_str("secret");
    uint8_t secret[32];
    assert_int_equal(rn_b64url_decode(k, strlen(k), secret), 32);
    rn_jwt_keys *set = rn_jwt_keys_new();
    uint8_t other[32] = {9};
    /* a wrong key first: a token without kid is tried against each */
    assert_int_equal(rn_jwt_keys_add_secret(set, NULL, other, 32, NULL, 0), 0);
    assert_int_equal(rn_jwt_keys_add_secret(set, NULL, secret, 32, NULL, 0), 0);
    const char *with_kid = token_named("HS256 valid");
    const char *no_kid = token_named("HS256 valid without kid");
    assert_int_equal(verify_n(set, &policy, no_kid, strlen(no_kid), NULL), RN_JWT_OK);
    assert_int_equal(verify_n(set, &policy, with_kid, strlen(with_kid), NULL), RN_JWT_UNKNOWN_KEY);
    rn_jwt_keys_free(set);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rfc_examples_verify_at_the_signature_layer),
        cmocka_unit_test(test_signature_layer_refuses_a_signed_bad_payload),
        cmocka_unit_test(test_corpus_tokens_get_their_status),
        cmocka_unit_test(test_valid_tokens_expose_their_claims),
        cmocka_unit_test(test_time_rules_hold_at_their_boundaries),
        cmocka_unit_test(test_every_prefix_and_change_is_refused),
        cmocka_unit_test(test_jwks_with_every_kind_and_skipped_keys),
        cmocka_unit_test(test_jwks_refusals_change_nothing),
        cmocka_unit_test(test_pem_and_secret_refusals),
        cmocka_unit_test(test_keys_without_kid_verify_only_tokens_without_kid),
    };
    return cmocka_run_group_tests(tests, load_corpus, free_corpus);
}
