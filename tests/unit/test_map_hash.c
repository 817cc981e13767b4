/*
 * test_map_hash.c - unit tests for src/util/siphash.{h,c} and the hash of
 * src/util/map.c: SipHash-2-4 against its authors' published test vectors,
 * and names chosen to collide under the map's former hash no longer
 * sharing a probe run.
 *
 * How: the 64 vectors of the SipHash reference implementation (key 00..0f,
 * messages 00, 00 01, ... of lengths 0 to 63), bytes at every alignment;
 * then 1,500 stream names that all hash to one home slot of a 4,096-slot
 * map under the unkeyed FNV-1a-based hash the map used before (found by
 * trying names, as an attacker would), put into a map: with that hash they
 * formed one probe run 1,500 long; under the keyed hash the longest
 * distance of an entry from its home slot stays small.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "consensus/wire.h"
#include "util/map.h"
#include "util/siphash.h"

/* SipHash-2-4 output for key 00 01 .. 0f and message 00 01 .. (i-1), from
 * the reference implementation's vectors (the paper's Appendix A example
 * is entry 15). */
static const uint64_t VECTORS[64] = {
    0x726fdb47dd0e0e31ull, 0x74f839c593dc67fdull, 0x0d6c8009d9a94f5aull, 0x85676696d7fb7e2dull,
    0xcf2794e0277187b7ull, 0x18765564cd99a68dull, 0xcbc9466e58fee3ceull, 0xab0200f58b01d137ull,
    0x93f5f5799a932462ull, 0x9e0082df0ba9e4b0ull, 0x7a5dbbc594ddb9f3ull, 0xf4b32f46226bada7ull,
    0x751e8fbc860ee5fbull, 0x14ea5627c0843d90ull, 0xf723ca908e7af2eeull, 0xa129ca6149be45e5ull,
    0x3f2acc7f57c29bdbull, 0x699ae9f52cbe4794ull, 0x4bc1b3f0968dd39cull, 0xbb6dc91da77961bdull,
    0xbed65cf21aa2ee98ull, 0xd0f2cbb02e3b67c7ull, 0x93536795e3a33e88ull, 0xa80c038ccd5ccec8ull,
    0xb8ad50c6f649af94ull, 0xbce192de8a85b8eaull, 0x17d835b85bbb15f3ull, 0x2f2e6163076bcfadull,
    0xde4daaaca71dc9a5ull, 0xa6a2506687956571ull, 0xad87a3535c49ef28ull, 0x32d892fad841c342ull,
    0x7127512f72f27cceull, 0xa7f32346f95978e3ull, 0x12e0b01abb051238ull, 0x15e034d40fa197aeull,
    0x314dffbe0815a3b4ull, 0x027990f029623981ull, 0xcadcd4e59ef40c4dull, 0x9abfd8766a33735cull,
    0x0e3ea96b5304a7d0ull, 0xad0c42d6fc585992ull, 0x187306c89bc215a9ull, 0xd4a60abcf3792b95ull,
    0xf935451de4f21df2ull, 0xa9538f0419755787ull, 0xdb9acddff56ca510ull, 0xd06c98cd5c0975ebull,
    0xe612a3cb9ecba951ull, 0xc766e62cfcadaf96ull, 0xee64435a9752fe72ull, 0xa192d576b245165aull,
    0x0a8787bf8ecb74b2ull, 0x81b3e73d20b49b6full, 0x7fa8220ba3b2eceaull, 0x245731c13ca42499ull,
    0xb78dbfaf3a8d83bdull, 0xea1ad565322a1a0bull, 0x60e61c23a3795013ull, 0x6606d7e446282b93ull,
    0x6ca4ecb15c5f91e1ull, 0x9f626da15c9625f3ull, 0xe51b38608ef25f57ull, 0x958a324ceb064572ull,
};

static void test_siphash_published_vectors(void **state) {
    (void)state;
    uint8_t key[16], msg[64 + 8];
    for (int i = 0; i < 16; i++)
        key[i] = (uint8_t)i;
    for (int shift = 0; shift < 8; shift++) { /* every alignment of the message */
        for (int i = 0; i < 64; i++)
            msg[shift + i] = (uint8_t)i;
        for (size_t len = 0; len < 64; len++)
            if (rn_siphash24(key, msg + shift, len) != VECTORS[len])
                fail_msg("length %zu at alignment %d: %016llx, want %016llx", len, shift,
                         (unsigned long long)rn_siphash24(key, msg + shift, len),
                         (unsigned long long)VECTORS[len]);
    }
}

/* The map's hash before it was keyed (FNV-1a over 8-byte words and a
 * splitmix64 avalanche, the same in every process, so an attacker can
 * compute it offline) is the one the cluster hello keeps for its tag. */
static uint64_t former_hash(const char *name) {
    return rn_wire_cluster_tag(name);
}

enum { NAMES = 1500, SLOTS = 4096, NAME_CAP = 32 };

/* The longest distance of an entry from its home slot. */
static size_t longest_probe(const rn_map *m) {
    size_t mask = m->cap - 1, longest = 0;
    for (size_t i = 0; i < m->cap; i++) {
        if (!m->slots[i].hash)
            continue;
        size_t distance = (i - (m->slots[i].hash & mask)) & mask;
        if (distance > longest)
            longest = distance;
    }
    return longest;
}

static void test_chosen_collisions_spread(void **state) {
    (void)state;
    char(*names)[NAME_CAP] = calloc(NAMES, NAME_CAP);
    assert_non_null(names);
    size_t found = 0;
    /* names whose former hash is 0 modulo 4096: one home slot in any map
     * of up to 4,096 slots */
    for (uint64_t i = 0; found < NAMES; i++) {
        int n = snprintf(names[found], NAME_CAP, "tenant-a/stream-%llu", (unsigned long long)i);
        if (n > 0 && (former_hash(names[found]) & (SLOTS - 1)) == 0)
            found++;
    }
    rn_map m = {0};
    for (size_t k = 0; k < NAMES; k++)
        assert_null(rn_map_put(&m, names[k], strlen(names[k]), names[k]));
    assert_int_equal(m.cap, SLOTS);
    size_t longest = longest_probe(&m);
    /* 1,500 entries in 4,096 slots at random: a run of 64 is far past what
     * chance gives (the longest distance is typically under 15) */
    if (longest >= 64)
        fail_msg("an entry sits %zu slots past its home slot: the names collide", longest);
    for (size_t k = 0; k < NAMES; k++)
        assert_ptr_equal(rn_map_get(&m, names[k], strlen(names[k])), names[k]);
    rn_map_free(&m);
    free(names);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_siphash_published_vectors),
        cmocka_unit_test(test_chosen_collisions_spread),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
