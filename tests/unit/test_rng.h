/*
 * test_rng.h - the seeded pseudo-random sequence the unit tests share
 * (xorshift64*), so that a failure reproduces from its seed.
 */
#ifndef RN_TEST_RNG_H
#define RN_TEST_RNG_H

#include <stdint.h>

static uint64_t test_rng_state = 0x9E3779B97F4A7C15ull;

/* Starts the sequence at seed (0 is taken as 1: the state must not be 0). */
static inline void test_rng_seed(uint64_t seed) {
    test_rng_state = seed ? seed : 1;
}

/* The next 64 bits of the sequence. */
static inline uint64_t test_rng_next(void) {
    test_rng_state ^= test_rng_state >> 12;
    test_rng_state ^= test_rng_state << 25;
    test_rng_state ^= test_rng_state >> 27;
    return test_rng_state * 0x2545F4914F6CDD1Dull;
}

/* A value below n (0 when n is 0). */
static inline uint64_t test_rng_below(uint64_t n) {
    return n ? test_rng_next() % n : 0;
}

#endif
