/*
 * test_placement.c - unit tests for where a stream lives in a cluster
 * (src/cluster/placement.h): a key's group is FNV-1a (64-bit) of its bytes
 * modulo the group count, fixed forever; an id carries its serial, the
 * issuing node and the group, stays below 2^52, and a node never issues
 * one twice, also across restarts (the serial blocks reserved in
 * <dir>/cluster-ids).
 *
 * How: the published FNV-1a test vectors (the hash of "", "a" and
 * "foobar") reduced modulo several group counts; the same keys asked many
 * times and over many counts; issuers opened, used past a block and
 * reopened on a temporary directory; a damaged reservation file.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "cluster/placement.h"
#include "engine/state.h"
#include "gw_fixture.h"

/* FNV-1a 64 of a few keys: as its authors publish them, and (bytes above
 * 127 and a NUL) as an independent implementation computes it. */
static const struct {
    const char *key;
    size_t len;
    uint64_t hash;
} VECTORS[] = {
    {"", 0, 0xcbf29ce484222325ull},
    {"a", 1, 0xaf63dc4c8601ec8cull},
    {"foobar", 6, 0x85944171f73967e8ull},
    {"\xff\x00", 2, 0x0a99a607b6f60beaull},
};

static void test_the_group_is_fnv1a_modulo_the_group_count(void **state) {
    (void)state;
    const unsigned counts[] = {1, 2, 3, 7, 16, 100, 255, 256};
    for (size_t v = 0; v < sizeof VECTORS / sizeof VECTORS[0]; v++)
        for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++)
            assert_int_equal(rn_placement_group(VECTORS[v].key, VECTORS[v].len, counts[c]),
                             VECTORS[v].hash % counts[c]);
}

static void test_the_group_depends_on_every_byte_and_only_on_them(void **state) {
    (void)state;
    /* the bytes given, not a C string: a NUL inside counts, what follows
     * the length does not */
    unsigned with_nul = rn_placement_group("ab\0c", 4, 256);
    unsigned short_key = rn_placement_group("ab\0c", 2, 256);
    assert_int_equal(short_key, rn_placement_group("ab", 2, 256));
    assert_int_not_equal(with_nul, short_key);
    /* the same key always lands in the same group */
    char key[32];
    for (int i = 0; i < 1000; i++) {
        int n = snprintf(key, sizeof key, "orders/eu-%d", i);
        unsigned g = rn_placement_group(key, (size_t)n, 16);
        assert_true(g < 16);
        for (int again = 0; again < 3; again++)
            assert_int_equal(rn_placement_group(key, (size_t)n, 16), g);
    }
}

static void test_keys_spread_over_every_group(void **state) {
    (void)state;
    const unsigned groups = 16;
    unsigned hits[16] = {0};
    char key[32];
    for (int i = 0; i < 1600; i++) {
        int n = snprintf(key, sizeof key, "bucket-%d/stream", i);
        hits[rn_placement_group(key, (size_t)n, groups)]++;
    }
    for (unsigned g = 0; g < groups; g++)
        assert_in_range(hits[g], 50, 150); /* 100 each on average */
}

static void test_ids_carry_serial_node_and_group(void **state) {
    (void)state;
    rn_id_issuer is;
    char err[512];
    assert_int_equal(rn_id_issuer_open(&is, gw_dir, 7, err, sizeof err), 0);
    uint64_t a = rn_id_issue(&is, 3), b = rn_id_issue(&is, 255), c = rn_id_issue(&is, 0);
    for (int i = 0; i < 3; i++) {
        uint64_t id = i == 0 ? a : i == 1 ? b : c;
        assert_true(id != 0 && id < (1ull << 52));
        assert_int_equal((id >> 8) & 0xff, 7);
    }
    assert_int_equal(rn_placement_id_group(a), 3);
    assert_int_equal(rn_placement_id_group(b), 255);
    assert_int_equal(rn_placement_id_group(c), 0);
    assert_true(a >> 16 < b >> 16 && b >> 16 < c >> 16); /* serials increase */
    rn_stream s = {.id = b};
    unsigned g = 255, other = 3;
    assert_true(rn_placement_stream_in_group(&s, &g));
    assert_false(rn_placement_stream_in_group(&s, &other));
    rn_id_issuer_close(&is);
}

static void test_a_node_never_issues_an_id_twice_across_restarts(void **state) {
    (void)state;
    char dir[600], err[512];
    snprintf(dir, sizeof dir, "%s/restarts", gw_dir);
    assert_int_equal(mkdir(dir, 0755), 0);
    rn_id_issuer is;
    assert_int_equal(rn_id_issuer_open(&is, dir, 1, err, sizeof err), 0);
    /* past the first block: the next one is reserved on the way */
    uint64_t last = 0;
    for (uint64_t i = 0; i < RN_ID_BLOCK + 10; i++) {
        uint64_t id = rn_id_issue(&is, 0);
        assert_true(id > last);
        last = id;
    }
    rn_id_issuer_close(&is);
    /* a restart continues after every block reserved before it */
    assert_int_equal(rn_id_issuer_open(&is, dir, 1, err, sizeof err), 0);
    uint64_t first = rn_id_issue(&is, 0);
    assert_true(first > last);
    rn_id_issuer_close(&is);
    /* and without having issued anything, the next start still moves on */
    assert_int_equal(rn_id_issuer_open(&is, dir, 1, err, sizeof err), 0);
    assert_true(rn_id_issue(&is, 0) > first);
    rn_id_issuer_close(&is);
}

static void test_a_damaged_reservation_file_is_refused(void **state) {
    (void)state;
    char dir[600], path[700], err[512];
    const char *damaged[] = {"x\n", "", "01\n", "-1\n", "68719476736\n"};
    for (size_t i = 0; i < sizeof damaged / sizeof damaged[0]; i++) {
        snprintf(dir, sizeof dir, "%s/damaged-%zu", gw_dir, i);
        assert_int_equal(mkdir(dir, 0755), 0);
        gw_write(dir, "cluster-ids", damaged[i], path, sizeof path);
        rn_id_issuer is;
        assert_int_equal(rn_id_issuer_open(&is, dir, 1, err, sizeof err), -1);
        assert_non_null(strstr(err, "cluster-ids"));
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_the_group_is_fnv1a_modulo_the_group_count),
        cmocka_unit_test(test_the_group_depends_on_every_byte_and_only_on_them),
        cmocka_unit_test(test_keys_spread_over_every_group),
        cmocka_unit_test(test_ids_carry_serial_node_and_group),
        cmocka_unit_test(test_a_node_never_issues_an_id_twice_across_restarts),
        cmocka_unit_test(test_a_damaged_reservation_file_is_refused),
    };
    return cmocka_run_group_tests(tests, gw_make_dir, gw_remove_dir);
}
