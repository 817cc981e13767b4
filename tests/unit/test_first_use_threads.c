/*
 * test_first_use_threads.c - the process-wide state that src/util/ sets up
 * on first use (CRC-32C's table and choice of path, the hash map's random
 * key) is set up once and safely when several threads are first at once.
 *
 * How: built with ThreadSanitizer from the sources themselves (not the
 * instrumented library of the other tests), eight threads released by a
 * barrier each make their first call at the same moment: CRC-32C on both
 * paths against the standard check value, and a map of their own. A setup
 * without synchronization (a flag tested and set by whoever comes first)
 * is a data race that ThreadSanitizer reports, and a report fails the test
 * (its exit status is 66). The ASan build does not build it: the two
 * sanitizers do not mix.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "util/crc32c.h"
#include "util/map.h"

enum { THREADS = 8, KEYS = 200 };

static pthread_barrier_t start;

typedef struct {
    uint32_t crc, crc_portable;
    size_t found;
} outcome;

static void *first_calls(void *arg) {
    outcome *o = arg;
    pthread_barrier_wait(&start);
    o->crc = rn_crc32c(0, "123456789", 9);
    o->crc_portable = rn_crc32c_portable(0, "123456789", 9);
    rn_map m = {0};
    char keys[KEYS][16];
    for (int i = 0; i < KEYS; i++) {
        snprintf(keys[i], sizeof keys[i], "k%d", i);
        rn_map_put(&m, keys[i], strlen(keys[i]), keys[i]);
    }
    for (int i = 0; i < KEYS; i++)
        o->found += rn_map_get(&m, keys[i], strlen(keys[i])) == keys[i];
    rn_map_free(&m);
    return NULL;
}

static void test_first_calls_at_once(void **state) {
    (void)state;
    pthread_t t[THREADS];
    outcome out[THREADS];
    memset(out, 0, sizeof out);
    assert_int_equal(pthread_barrier_init(&start, NULL, THREADS), 0);
    for (int i = 0; i < THREADS; i++)
        assert_int_equal(pthread_create(&t[i], NULL, first_calls, &out[i]), 0);
    for (int i = 0; i < THREADS; i++) {
        assert_int_equal(pthread_join(t[i], NULL), 0);
        assert_int_equal(out[i].crc, 0xE3069283u);
        assert_int_equal(out[i].crc_portable, 0xE3069283u);
        assert_int_equal(out[i].found, KEYS);
    }
    pthread_barrier_destroy(&start);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_first_calls_at_once),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
