/*
 * test_crc_map.c - unit tests for CRC-32C (src/util/crc32c.c) and the hash
 * map (src/util/map.c).
 *
 * How: the CRC-32C check value, a bitwise CRC-32C reference written here
 * compared over seeded random data and random splits, and a seeded random
 * sequence of map operations checked step by step against a plain array
 * model.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/crc32c.h"
#include "util/map.h"

#include "test_rng.h"

/* ------------------------------------------------------------------------ */
/* CRC-32C                                                                   */

/* Bitwise reference: reflected Castagnoli polynomial, one bit at a time. */
static uint32_t crc32c_ref(uint32_t crc, const uint8_t *p, size_t len) {
    crc = ~crc;
    for (size_t i = 0; i < len; i++) {
        crc ^= p[i];
        for (int k = 0; k < 8; k++)
            crc = (crc >> 1) ^ (0x82f63b78u & (0u - (crc & 1)));
    }
    return ~crc;
}

static void test_crc32c_check_value(void **state) {
    (void)state;
    assert_int_equal(rn_crc32c(0, "123456789", 9), 0xE3069283u);
    assert_int_equal(rn_crc32c(0, "", 0), 0);
    /* RFC 3720 (iSCSI) B.4 vectors. */
    uint8_t zeros[32] = {0}, ones[32], inc[32];
    memset(ones, 0xff, sizeof ones);
    for (int i = 0; i < 32; i++)
        inc[i] = (uint8_t)i;
    assert_int_equal(rn_crc32c(0, zeros, 32), 0x8A9136AAu);
    assert_int_equal(rn_crc32c(0, ones, 32), 0x62A8AB43u);
    assert_int_equal(rn_crc32c(0, inc, 32), 0x46DD794Eu);
}

static void test_crc32c_matches_bitwise_reference_on_random_data(void **state) {
    (void)state;
    enum { MAX = 4096 };
    uint8_t *buf = malloc(MAX + 16);
    assert_non_null(buf);
    test_rng_seed(2024);
    for (size_t i = 0; i < MAX + 16; i++)
        buf[i] = (uint8_t)test_rng_next();
    for (int round = 0; round < 3000; round++) {
        size_t start = test_rng_below(16); /* unaligned starts */
        size_t len = round < 64 ? (size_t)round : test_rng_below(MAX);
        uint32_t want = crc32c_ref(0, buf + start, len);
        assert_int_equal(rn_crc32c(0, buf + start, len), want);
        /* the table path too, which a CPU with SSE4.2 never takes */
        assert_int_equal(rn_crc32c_portable(0, buf + start, len), want);
    }
    free(buf);
}

static void test_crc32c_incremental_equals_one_shot_over_random_splits(void **state) {
    (void)state;
    enum { MAX = 3000 };
    uint8_t *buf = malloc(MAX);
    assert_non_null(buf);
    test_rng_seed(77);
    for (size_t i = 0; i < MAX; i++)
        buf[i] = (uint8_t)test_rng_next();
    for (int round = 0; round < 2000; round++) {
        size_t len = test_rng_below(MAX + 1);
        uint32_t whole = rn_crc32c(0, buf, len);
        uint32_t inc = 0;
        size_t pos = 0;
        while (pos < len) {
            /* Pieces of 0..40 bytes, sometimes empty, often unaligned. */
            size_t n = test_rng_below(41);
            if (n > len - pos)
                n = len - pos;
            inc = rn_crc32c(inc, buf + pos, n);
            pos += n;
        }
        assert_int_equal(inc, whole);
    }
    free(buf);
}

/* ------------------------------------------------------------------------ */
/* Hash map                                                                  */

enum { KEYS = 1500 };

typedef struct {
    char key[KEYS][24];
    size_t key_len[KEYS];
    void *model[KEYS]; /* value stored under key i in the model, or NULL */
} map_world;

static map_world *world_new(void) {
    map_world *w = calloc(1, sizeof *w);
    assert_non_null(w);
    for (int i = 0; i < KEYS; i++) {
        /* Varied lengths, shared prefixes, an empty key and binary keys. */
        if (i == 0) {
            w->key_len[i] = 0;
        } else if (i % 7 == 0) {
            for (int k = 0; k < 9; k++)
                w->key[i][k] = (char)((i >> k) & 1 ? 0 : 0xff);
            w->key_len[i] = 9 + (size_t)(i % 5);
            memcpy(w->key[i] + 9, &i, sizeof i);
        } else {
            w->key_len[i] = (size_t)snprintf(w->key[i], sizeof w->key[i], "stream/%d", i);
        }
    }
    return w;
}

static void *value_for(int key, int version) {
    /* Distinct non-NULL pointers that encode (key, version). */
    return (void *)(uintptr_t)(((uintptr_t)key << 20) | (uintptr_t)(version & 0xfffff) | 1u << 31);
}

static void check_map_against_model(const rn_map *m, map_world *w) {
    size_t present = 0;
    for (int i = 0; i < KEYS; i++) {
        void *got = rn_map_get(m, w->key[i], w->key_len[i]);
        if (got != w->model[i])
            fail_msg("key %d: got %p, want %p", i, got, w->model[i]);
        present += w->model[i] != NULL;
    }
    assert_int_equal(m->count, present);
    /* Iteration visits each present value exactly once. */
    char *seen = calloc(KEYS, 1);
    assert_non_null(seen);
    size_t cursor = 0, visited = 0;
    void *v;
    while (rn_map_next(m, &cursor, &v)) {
        int key = (int)(((uintptr_t)v & 0x7fffffff) >> 20);
        assert_true(key >= 0 && key < KEYS);
        assert_ptr_equal(v, w->model[key]);
        assert_int_equal(seen[key], 0);
        seen[key] = 1;
        visited++;
    }
    assert_int_equal(visited, present);
    free(seen);
}

static void test_map_put_get_remove_match_array_model(void **state) {
    (void)state;
    map_world *w = world_new();
    rn_map m = {0};
    assert_null(rn_map_get(&m, "x", 1));
    assert_null(rn_map_remove(&m, "x", 1));
    test_rng_seed(31337);
    int version = 0;
    for (int step = 0; step < 60000; step++) {
        int key = (int)test_rng_below(KEYS);
        uint64_t op = test_rng_below(10);
        if (op < 5) {
            void *nv = value_for(key, ++version);
            void *old = rn_map_put(&m, w->key[key], w->key_len[key], nv);
            assert_ptr_equal(old, w->model[key]);
            w->model[key] = nv;
        } else if (op < 9) {
            void *old = rn_map_remove(&m, w->key[key], w->key_len[key]);
            assert_ptr_equal(old, w->model[key]);
            w->model[key] = NULL;
        } else {
            assert_ptr_equal(rn_map_get(&m, w->key[key], w->key_len[key]), w->model[key]);
        }
        if (step % 5000 == 0)
            check_map_against_model(&m, w);
    }
    check_map_against_model(&m, w);
    rn_map_free(&m);
    assert_int_equal(m.count, 0);
    assert_null(rn_map_get(&m, w->key[1], w->key_len[1]));
    free(w);
}

static void test_map_survives_removal_heavy_patterns(void **state) {
    (void)state;
    map_world *w = world_new();
    rn_map m = {0};
    int version = 0;
    test_rng_seed(4242);
    for (int round = 0; round < 12; round++) {
        /* Fill everything, then remove most keys in a pattern, checking all
         * survivors after each pattern: backward-shift deletion must keep
         * every probe run reachable. */
        for (int i = 0; i < KEYS; i++) {
            void *nv = value_for(i, ++version);
            assert_ptr_equal(rn_map_put(&m, w->key[i], w->key_len[i], nv), w->model[i]);
            w->model[i] = nv;
        }
        check_map_against_model(&m, w);
        for (int i = 0; i < KEYS; i++) {
            int remove;
            switch (round % 4) {
            case 0:
                remove = i % 10 != 0; /* keep every tenth */
                break;
            case 1:
                remove = i >= KEYS / 20; /* keep a prefix */
                break;
            case 2:
                remove = test_rng_below(100) < 95; /* random */
                break;
            default:
                remove = 1; /* everything */
                break;
            }
            if (remove) {
                assert_ptr_equal(rn_map_remove(&m, w->key[i], w->key_len[i]), w->model[i]);
                w->model[i] = NULL;
                /* A second removal finds nothing. */
                assert_null(rn_map_remove(&m, w->key[i], w->key_len[i]));
            }
        }
        check_map_against_model(&m, w);
        /* Reverse-order removal of the remaining keys, checking as we go. */
        if (round % 3 == 2) {
            for (int i = KEYS - 1; i >= 0; i--) {
                if (w->model[i]) {
                    assert_ptr_equal(rn_map_remove(&m, w->key[i], w->key_len[i]), w->model[i]);
                    w->model[i] = NULL;
                }
                if (i % 97 == 0)
                    check_map_against_model(&m, w);
            }
            assert_int_equal(m.count, 0);
        }
    }
    /* Interleaved churn on a small live set inside a large table. */
    for (int step = 0; step < 30000; step++) {
        int key = (int)test_rng_below(64);
        if (w->model[key]) {
            assert_ptr_equal(rn_map_remove(&m, w->key[key], w->key_len[key]), w->model[key]);
            w->model[key] = NULL;
        } else {
            void *nv = value_for(key, ++version);
            assert_null(rn_map_put(&m, w->key[key], w->key_len[key], nv));
            w->model[key] = nv;
        }
    }
    check_map_against_model(&m, w);
    rn_map_free(&m);
    free(w);
}

static void test_map_keys_compare_by_bytes_not_pointer(void **state) {
    (void)state;
    rn_map m = {0};
    char a[] = "same-key", b[] = "same-key";
    int v1, v2;
    assert_null(rn_map_put(&m, a, 8, &v1));
    assert_ptr_equal(rn_map_get(&m, b, 8), &v1);
    assert_ptr_equal(rn_map_put(&m, b, 8, &v2), &v1);
    assert_int_equal(m.count, 1);
    /* A prefix is a different key. */
    assert_null(rn_map_get(&m, a, 7));
    assert_ptr_equal(rn_map_remove(&m, a, 8), &v2);
    assert_int_equal(m.count, 0);
    rn_map_free(&m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_crc32c_check_value),
        cmocka_unit_test(test_crc32c_matches_bitwise_reference_on_random_data),
        cmocka_unit_test(test_crc32c_incremental_equals_one_shot_over_random_splits),
        cmocka_unit_test(test_map_put_get_remove_match_array_model),
        cmocka_unit_test(test_map_survives_removal_heavy_patterns),
        cmocka_unit_test(test_map_keys_compare_by_bytes_not_pointer),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
