/*
 * test_subs_config.c - unit tests for src/subs/sub_config.{h,c}: parsing
 * and normalizing subscription create bodies, and the configuration hash
 * that decides 200 (re-confirm) against 409 (conflict).
 *
 * How: valid bodies and their normal form; a table of invalid bodies with
 * the refusal each must get; equivalence classes of bodies that must hash
 * the same (ordering, duplicates, slashes, explicit defaults, nulls,
 * member order); one-field changes that must each change the hash; and
 * the rendering round trip (config -> JSON -> config keeps the hash), which
 * is what the state file relies on.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "subs/sub_config.h"

static int parse(const char *text, rn_sub_config *c, rn_error *e) {
    json_error_t jerr;
    json_t *j = json_loads(text, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &jerr);
    if (!j)
        fail_msg("test body does not parse: %s: %s", text, jerr.text);
    int rc = rn_sub_config_parse(j, c, e);
    json_decref(j);
    return rc;
}

static void hash_of(const char *text, uint8_t out[32]) {
    rn_sub_config c;
    rn_error e;
    if (parse(text, &c, &e) < 0)
        fail_msg("refused (%d): %s", e, text);
    rn_sub_config_hash(&c, out);
    rn_sub_config_free(&c);
}

static void test_valid_and_normalized(void **state) {
    (void)state;
    rn_sub_config c;
    rn_error e;
    assert_int_equal(parse("{\"type\":\"webhook\",\"pattern\":\"/events/*/\","
                           "\"streams\":[\"b/\",\"/a\",\"b\",\"a\"],"
                           "\"webhook\":{\"url\":\"https://h.example/x\"},"
                           "\"lease_ttl_ms\":1000,\"description\":\"d\",\"extra\":1}",
                           &c, &e),
                     0);
    assert_int_equal(c.type, RN_SUB_WEBHOOK);
    assert_string_equal(c.pattern, "events/*");
    assert_int_equal(c.nstreams, 2);
    assert_string_equal(c.streams[0], "a");
    assert_string_equal(c.streams[1], "b");
    assert_string_equal(c.webhook_url, "https://h.example/x");
    assert_null(c.wake_stream);
    assert_int_equal(c.lease_ttl_ms, 1000);
    assert_string_equal(c.description, "d");
    rn_sub_config_free(&c);

    assert_int_equal(parse("{\"type\":\"pull-wake\",\"streams\":[\"x\"],\"wake_stream\":\"/w/p/\","
                           "\"webhook\":null,\"pattern\":null,\"description\":null}",
                           &c, &e),
                     0);
    assert_int_equal(c.type, RN_SUB_PULL_WAKE);
    assert_null(c.pattern);
    assert_string_equal(c.wake_stream, "w/p");
    assert_int_equal(c.lease_ttl_ms, RN_SUB_LEASE_DEFAULT_MS);
    assert_null(c.description);
    assert_null(c.webhook_url);
    rn_sub_config_free(&c);

    assert_int_equal(parse("{\"type\":\"webhook\",\"pattern\":\"**\",\"lease_ttl_ms\":600000,"
                           "\"webhook\":{\"url\":\"https://h.example\"}}",
                           &c, &e),
                     0);
    assert_int_equal(c.lease_ttl_ms, 600000);
    rn_sub_config_free(&c);
}

static void test_invalid(void **state) {
    (void)state;
    static const struct {
        const char *body;
        rn_error want;
    } cases[] = {
        {"[]", RN_E_SUB_INVALID_JSON},
        {"\"webhook\"", RN_E_SUB_INVALID_JSON},
        {"{}", RN_E_SUB_INVALID_TYPE},
        {"{\"type\":\"push\",\"pattern\":\"a\"}", RN_E_SUB_INVALID_TYPE},
        {"{\"type\":1,\"pattern\":\"a\"}", RN_E_SUB_INVALID_TYPE},
        {"{\"type\":\"webhook\",\"webhook\":{\"url\":\"https://h\"}}", RN_E_SUB_NO_TARGET},
        {"{\"type\":\"webhook\",\"streams\":[],\"webhook\":{\"url\":\"https://h\"}}",
         RN_E_SUB_NO_TARGET},
        {"{\"type\":\"webhook\",\"pattern\":\"\",\"webhook\":{\"url\":\"https://h\"}}",
         RN_E_SUB_INVALID_PATTERN},
        {"{\"type\":\"webhook\",\"pattern\":\"///\",\"webhook\":{\"url\":\"https://h\"}}",
         RN_E_SUB_INVALID_PATTERN},
        {"{\"type\":\"webhook\",\"pattern\":7,\"webhook\":{\"url\":\"https://h\"}}",
         RN_E_SUB_INVALID_PATTERN},
        {"{\"type\":\"webhook\",\"streams\":\"a\",\"webhook\":{\"url\":\"https://h\"}}",
         RN_E_SUB_INVALID_STREAMS},
        {"{\"type\":\"webhook\",\"streams\":[\"a\",2],\"webhook\":{\"url\":\"https://h\"}}",
         RN_E_SUB_INVALID_STREAMS},
        {"{\"type\":\"webhook\",\"streams\":[\"a\",\"/\"],\"webhook\":{\"url\":\"https://h\"}}",
         RN_E_SUB_INVALID_STREAMS},
        {"{\"type\":\"webhook\",\"pattern\":\"a\"}", RN_E_SUB_INVALID_WEBHOOK},
        {"{\"type\":\"webhook\",\"pattern\":\"a\",\"webhook\":\"https://h\"}",
         RN_E_SUB_INVALID_WEBHOOK},
        {"{\"type\":\"webhook\",\"pattern\":\"a\",\"webhook\":{\"url\":\"\"}}",
         RN_E_SUB_INVALID_WEBHOOK},
        {"{\"type\":\"pull-wake\",\"pattern\":\"a\",\"wake_stream\":\"w\","
         "\"webhook\":{\"url\":\"https://h\"}}",
         RN_E_SUB_INVALID_WEBHOOK},
        {"{\"type\":\"pull-wake\",\"pattern\":\"a\"}", RN_E_SUB_INVALID_WAKE_STREAM},
        {"{\"type\":\"pull-wake\",\"pattern\":\"a\",\"wake_stream\":\"\"}",
         RN_E_SUB_INVALID_WAKE_STREAM},
        {"{\"type\":\"webhook\",\"pattern\":\"a\",\"webhook\":{\"url\":\"https://h\"},"
         "\"wake_stream\":\"w\"}",
         RN_E_SUB_INVALID_WAKE_STREAM},
        {"{\"type\":\"webhook\",\"pattern\":\"a\",\"webhook\":{\"url\":\"https://h\"},"
         "\"lease_ttl_ms\":999}",
         RN_E_SUB_INVALID_LEASE},
        {"{\"type\":\"webhook\",\"pattern\":\"a\",\"webhook\":{\"url\":\"https://h\"},"
         "\"lease_ttl_ms\":600001}",
         RN_E_SUB_INVALID_LEASE},
        {"{\"type\":\"webhook\",\"pattern\":\"a\",\"webhook\":{\"url\":\"https://h\"},"
         "\"lease_ttl_ms\":1000.5}",
         RN_E_SUB_INVALID_LEASE},
        {"{\"type\":\"webhook\",\"pattern\":\"a\",\"webhook\":{\"url\":\"https://h\"},"
         "\"lease_ttl_ms\":\"1000\"}",
         RN_E_SUB_INVALID_LEASE},
        {"{\"type\":\"webhook\",\"pattern\":\"a\",\"webhook\":{\"url\":\"https://h\"},"
         "\"description\":5}",
         RN_E_SUB_INVALID_DESCRIPTION},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        rn_sub_config c;
        rn_error e = RN_E_COUNT;
        if (parse(cases[i].body, &c, &e) == 0) {
            rn_sub_config_free(&c);
            fail_msg("accepted: %s", cases[i].body);
        }
        if (e != cases[i].want)
            fail_msg("%s: refusal %d, want %d", cases[i].body, e, cases[i].want);
    }
    /* an over-long path */
    char body[4096];
    int n = snprintf(body, sizeof body,
                     "{\"type\":\"webhook\",\"webhook\":{\"url\":\"https://h\"},"
                     "\"streams\":[\"");
    memset(body + n, 'a', RN_SUB_MAX_PATH + 1);
    snprintf(body + n + RN_SUB_MAX_PATH + 1, sizeof body - (size_t)n - RN_SUB_MAX_PATH - 1, "\"]}");
    rn_sub_config c;
    rn_error e;
    assert_int_equal(parse(body, &c, &e), -1);
    assert_int_equal(e, RN_E_SUB_INVALID_STREAMS);
}

static void test_hash_equivalence(void **state) {
    (void)state;
    static const char *same[] = {
        "{\"type\":\"webhook\",\"pattern\":\"events/*\",\"streams\":[\"a\",\"b\"],"
        "\"webhook\":{\"url\":\"https://h.example/x\"},\"lease_ttl_ms\":30000}",
        "{\"streams\":[\"b\",\"a\",\"a\"],\"type\":\"webhook\","
        "\"webhook\":{\"url\":\"https://h.example/x\"},\"pattern\":\"/events/*/\"}",
        "{\"type\":\"webhook\",\"pattern\":\"events/*\",\"streams\":[\"/a/\",\"b\"],"
        "\"webhook\":{\"url\":\"https://h.example/x\",\"secret\":\"ignored\"},"
        "\"description\":null,\"wake_stream\":null}",
    };
    uint8_t first[32], h[32];
    hash_of(same[0], first);
    for (size_t i = 1; i < sizeof same / sizeof same[0]; i++) {
        hash_of(same[i], h);
        if (memcmp(first, h, 32) != 0)
            fail_msg("hash differs: %s", same[i]);
    }
}

static void test_hash_sensitivity(void **state) {
    (void)state;
    static const char *base = "{\"type\":\"webhook\",\"pattern\":\"events/*\",\"streams\":[\"a\"],"
                              "\"webhook\":{\"url\":\"https://h.example/x\"},"
                              "\"lease_ttl_ms\":30000,\"description\":\"d\"}";
    static const char *different[] = {
        "{\"type\":\"webhook\",\"pattern\":\"events/**\",\"streams\":[\"a\"],"
        "\"webhook\":{\"url\":\"https://h.example/x\"},\"description\":\"d\"}",
        "{\"type\":\"webhook\",\"streams\":[\"a\"],"
        "\"webhook\":{\"url\":\"https://h.example/x\"},\"description\":\"d\"}",
        "{\"type\":\"webhook\",\"pattern\":\"events/*\",\"streams\":[\"a\",\"b\"],"
        "\"webhook\":{\"url\":\"https://h.example/x\"},\"description\":\"d\"}",
        "{\"type\":\"webhook\",\"pattern\":\"events/*\","
        "\"webhook\":{\"url\":\"https://h.example/x\"},\"description\":\"d\"}",
        "{\"type\":\"webhook\",\"pattern\":\"events/*\",\"streams\":[\"a\"],"
        "\"webhook\":{\"url\":\"https://h.example/y\"},\"description\":\"d\"}",
        "{\"type\":\"webhook\",\"pattern\":\"events/*\",\"streams\":[\"a\"],"
        "\"webhook\":{\"url\":\"https://h.example/x\"},\"lease_ttl_ms\":30001,"
        "\"description\":\"d\"}",
        "{\"type\":\"webhook\",\"pattern\":\"events/*\",\"streams\":[\"a\"],"
        "\"webhook\":{\"url\":\"https://h.example/x\"},\"description\":\"e\"}",
        "{\"type\":\"webhook\",\"pattern\":\"events/*\",\"streams\":[\"a\"],"
        "\"webhook\":{\"url\":\"https://h.example/x\"}}",
        "{\"type\":\"webhook\",\"pattern\":\"events/*\",\"streams\":[\"a\"],"
        "\"webhook\":{\"url\":\"https://h.example/x\"},\"description\":\"\"}",
        "{\"type\":\"pull-wake\",\"pattern\":\"events/*\",\"streams\":[\"a\"],"
        "\"wake_stream\":\"https://h.example/x\",\"description\":\"d\"}",
        /* field boundaries: moving a byte between neighbours changes it */
        "{\"type\":\"webhook\",\"pattern\":\"events/*\",\"streams\":[\"ad\"],"
        "\"webhook\":{\"url\":\"https://h.example/x\"}}",
    };
    uint8_t b[32], h[32];
    hash_of(base, b);
    for (size_t i = 0; i < sizeof different / sizeof different[0]; i++) {
        hash_of(different[i], h);
        if (memcmp(b, h, 32) == 0)
            fail_msg("same hash as the base: %s", different[i]);
        for (size_t k = 0; k < i; k++) {
            uint8_t o[32];
            hash_of(different[k], o);
            if (memcmp(o, h, 32) == 0)
                fail_msg("collision: %s / %s", different[k], different[i]);
        }
    }
}

static void test_json_round_trip(void **state) {
    (void)state;
    static const char *bodies[] = {
        "{\"type\":\"webhook\",\"pattern\":\"events/*\",\"streams\":[\"b\",\"a\"],"
        "\"webhook\":{\"url\":\"https://h.example/x\"},\"lease_ttl_ms\":1234,"
        "\"description\":\"caf\\u00e9\"}",
        "{\"type\":\"pull-wake\",\"streams\":[\"x/y\"],\"wake_stream\":\"w\"}",
        "{\"type\":\"pull-wake\",\"pattern\":\"**\",\"wake_stream\":\"w\",\"description\":\"\"}",
    };
    for (size_t i = 0; i < sizeof bodies / sizeof bodies[0]; i++) {
        rn_sub_config c, again;
        rn_error e;
        assert_int_equal(parse(bodies[i], &c, &e), 0);
        json_t *j = rn_sub_config_json(&c);
        assert_int_equal(rn_sub_config_parse(j, &again, &e), 0);
        json_decref(j);
        uint8_t h1[32], h2[32];
        rn_sub_config_hash(&c, h1);
        rn_sub_config_hash(&again, h2);
        assert_memory_equal(h1, h2, 32);
        rn_sub_config_free(&c);
        rn_sub_config_free(&again);
    }
}

static void test_path_normalize(void **state) {
    (void)state;
    const char *start;
    assert_int_equal(rn_sub_path_normalize("//a/b//", 7, &start), 3);
    assert_memory_equal(start, "a/b", 3);
    assert_int_equal(rn_sub_path_normalize("a", 1, &start), 1);
    assert_int_equal(rn_sub_path_normalize("", 0, &start), -1);
    assert_int_equal(rn_sub_path_normalize("///", 3, &start), -1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid_and_normalized), cmocka_unit_test(test_invalid),
        cmocka_unit_test(test_hash_equivalence),     cmocka_unit_test(test_hash_sensitivity),
        cmocka_unit_test(test_json_round_trip),      cmocka_unit_test(test_path_normalize),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
