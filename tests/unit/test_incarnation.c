/*
 * test_incarnation.c - unit tests of Stream-Incarnation tokens under the
 * deployment's key (src/engine/state.c rn_incarnation_for, the engine's
 * creates and rewrites, the REWRITE record of src/engine/command.c).
 *
 * How: the token function directly (key 0 gives the former tokens, the
 * first stream's included; two keys give other tokens for every serial;
 * one key never repeats a token), then an engine (engine_fixture.h) with a
 * key: its creates and rewrites carry tokens of that key, which the log
 * and the checkpoint give back as they were written even when the engine
 * reopens with another key; and a REWRITE record of a build before the key
 * (no token in it) decodes to the token that build gave it.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "engine/command.h"
#include "engine/state.h"
#include "engine_fixture.h"

static const uint64_t KEY_A = 0x8f3c1d2e5a6b7c90ull, KEY_B = 0x0123456789abcdefull;

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void test_key_zero_gives_the_former_tokens(void **state) {
    (void)state;
    /* what every fresh server of the builds before the key answered for
     * its first stream (id 1) */
    assert_int_equal(rn_incarnation_for(0, 1), 4519808308187955ull);
}

static void test_keys_give_other_tokens_and_never_repeat_one(void **state) {
    (void)state;
    enum { N = 200000 };
    uint64_t *t = malloc(N * sizeof *t);
    assert_non_null(t);
    for (uint64_t key = 0; key < 3; key++) {
        uint64_t k = key == 0 ? 0 : key == 1 ? KEY_A : KEY_B;
        for (uint64_t n = 0; n < N; n++) {
            t[n] = rn_incarnation_for(k, n + 1);
            assert_true(t[n] >= RN_INCARNATION_MIN && t[n] < 2 * RN_INCARNATION_MIN);
        }
        qsort(t, N, sizeof *t, cmp_u64);
        for (uint64_t n = 1; n < N; n++)
            assert_true(t[n] != t[n - 1]);
    }
    for (uint64_t n = 1; n <= 100000; n++) {
        assert_true(rn_incarnation_for(KEY_A, n) != rn_incarnation_for(KEY_B, n));
        assert_true(rn_incarnation_for(KEY_A, n) != rn_incarnation_for(0, n));
    }
    free(t);
}

static void test_engine_tokens_come_from_its_key_and_stay(void **state) {
    fx *f = *state;
    close_engine(f, f->e);
    f->incarnation_key = KEY_A;
    f->e = open_at(f, f->dir);
    create(f, "/a", NULL, "0123456789");
    rn_stream *s = find(f, "/a");
    uint64_t created = s->incarnation;
    assert_int_equal(created, rn_incarnation_for(KEY_A, s->id));
    assert_int_equal(rewrite_to(f, "/a", 4).result, RN_OK_REWRITTEN);
    uint64_t rewritten = find(f, "/a")->incarnation;
    assert_true(rewritten != created);
    create(f, "/b", NULL, "x");
    /* the rewrite's serial is an id never issued again: the next id is past
     * it, and the token is that serial's under the key */
    uint64_t serial = find(f, "/b")->id - 1;
    assert_int_equal(rewritten, rn_incarnation_for(KEY_A, serial));
    /* another key reopens the directory (as a node of another key replays
     * a leader's records): the tokens are the records', from the log ... */
    f->incarnation_key = KEY_B;
    restart_crash(f, "crash", NULL);
    assert_int_equal(find(f, "/a")->incarnation, rewritten);
    assert_int_equal(find(f, "/a")->previous_incarnation, created);
    /* ... and from the checkpoint */
    restart_clean(f);
    assert_int_equal(find(f, "/a")->incarnation, rewritten);
    create(f, "/c", NULL, "y");
    assert_int_equal(find(f, "/c")->incarnation, rn_incarnation_for(KEY_B, find(f, "/c")->id));
}

static void test_rewrite_record_of_a_build_before_the_key(void **state) {
    (void)state;
    rn_cmd c = {.type = RN_CMD_REWRITE,
                .stream_id = 7,
                .time_ms = 1000,
                .serial = 42,
                .offset = 5,
                .incarnation = rn_incarnation_for(KEY_A, 42)};
    rn_buf b = {0};
    rn_cmd_encode_head(&c, &b);
    rn_cmd got;
    assert_int_equal(rn_cmd_decode(b.data, b.len, &got), 0);
    assert_int_equal(got.incarnation, rn_incarnation_for(KEY_A, 42));
    assert_int_equal(got.offset, 5);
    /* the former record ends after the kept offset */
    assert_int_equal(rn_cmd_decode(b.data, b.len - 8, &got), 0);
    assert_int_equal(got.serial, 42);
    assert_int_equal(got.incarnation, rn_incarnation_for(0, 42));
    assert_int_equal(rn_cmd_decode(b.data, b.len - 4, &got), -1); /* a torn one */
    rn_buf_free(&b);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_key_zero_gives_the_former_tokens),
        cmocka_unit_test(test_keys_give_other_tokens_and_never_repeat_one),
        T(test_engine_tokens_come_from_its_key_and_stay),
        cmocka_unit_test(test_rewrite_record_of_a_build_before_the_key),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
