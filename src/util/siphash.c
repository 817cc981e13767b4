/*
 * siphash.c — SipHash-2-4, written from the paper ("SipHash: a fast
 * short-input PRF", section 2): two compression rounds per 8-byte word,
 * the length in the last word's top byte, four finalization rounds. See
 * siphash.h.
 */
#include "util/siphash.h"

static uint64_t load_le64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

static uint64_t rotl(uint64_t x, int b) {
    return (x << b) | (x >> (64 - b));
}

typedef struct {
    uint64_t v0, v1, v2, v3;
} sip_state;

static void sip_rounds(sip_state *s, int n) {
    for (int i = 0; i < n; i++) {
        s->v0 += s->v1;
        s->v1 = rotl(s->v1, 13) ^ s->v0;
        s->v0 = rotl(s->v0, 32);
        s->v2 += s->v3;
        s->v3 = rotl(s->v3, 16) ^ s->v2;
        s->v0 += s->v3;
        s->v3 = rotl(s->v3, 21) ^ s->v0;
        s->v2 += s->v1;
        s->v1 = rotl(s->v1, 17) ^ s->v2;
        s->v2 = rotl(s->v2, 32);
    }
}

static void sip_word(sip_state *s, uint64_t m) {
    s->v3 ^= m;
    sip_rounds(s, 2);
    s->v0 ^= m;
}

uint64_t rn_siphash24(const uint8_t key[16], const void *data, size_t len) {
    const uint8_t *p = data;
    uint64_t k0 = load_le64(key), k1 = load_le64(key + 8);
    sip_state s = {k0 ^ 0x736f6d6570736575ull, k1 ^ 0x646f72616e646f6dull,
                   k0 ^ 0x6c7967656e657261ull, k1 ^ 0x7465646279746573ull};
    size_t whole = len - len % 8;
    for (size_t i = 0; i < whole; i += 8)
        sip_word(&s, load_le64(p + i));
    uint64_t last = (uint64_t)(len & 0xff) << 56;
    for (size_t i = whole; i < len; i++)
        last |= (uint64_t)p[i] << (8 * (i - whole));
    sip_word(&s, last);
    s.v2 ^= 0xff;
    sip_rounds(&s, 4);
    return s.v0 ^ s.v1 ^ s.v2 ^ s.v3;
}
