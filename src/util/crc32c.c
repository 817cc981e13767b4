/*
 * crc32c.c — CRC-32C with a hardware path (SSE4.2, chosen at run time) and a
 * portable slicing-by-8 table path. Both compute the same function; the unit
 * tests check the standard check value and agreement on random data.
 *
 * The table and the choice of path are made once, by the first call of any
 * thread, under pthread_once: callers on several threads (the log's writer,
 * workers writing checkpoints, the loop) may be first at once.
 */
#include "util/crc32c.h"

#include <pthread.h>
#include <string.h>

#define POLY 0x82f63b78u

static uint32_t table[8][256];
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void build_table(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = (c >> 1) ^ (POLY & (0u - (c & 1)));
        table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++)
            table[t][i] = (table[t - 1][i] >> 8) ^ table[0][table[t - 1][i] & 0xff];
}

static uint32_t crc_soft(uint32_t crc, const uint8_t *p, size_t len) {
    while (len >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        w ^= crc;
        crc = table[7][w & 0xff] ^ table[6][(w >> 8) & 0xff] ^ table[5][(w >> 16) & 0xff] ^
              table[4][(w >> 24) & 0xff] ^ table[3][(w >> 32) & 0xff] ^ table[2][(w >> 40) & 0xff] ^
              table[1][(w >> 48) & 0xff] ^ table[0][w >> 56];
        p += 8;
        len -= 8;
    }
    while (len--)
        crc = (crc >> 8) ^ table[0][(crc ^ *p++) & 0xff];
    return crc;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) static uint32_t crc_hw(uint32_t crc, const uint8_t *p,
                                                         size_t len) {
    uint64_t c = crc;
    while (len >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        c = __builtin_ia32_crc32di(c, w);
        p += 8;
        len -= 8;
    }
    uint32_t c32 = (uint32_t)c;
    while (len--)
        c32 = __builtin_ia32_crc32qi(c32, *p++);
    return c32;
}
#endif

/* The path this CPU takes: hardware when it has SSE4.2. */
static uint32_t (*path)(uint32_t crc, const uint8_t *p, size_t len) = crc_soft;

static void init(void) {
    build_table();
#if defined(__x86_64__)
    if (__builtin_cpu_supports("sse4.2"))
        path = crc_hw;
#endif
}

uint32_t rn_crc32c(uint32_t crc, const void *data, size_t len) {
    pthread_once(&once, init);
    return ~path(~crc, data, len);
}

uint32_t rn_crc32c_portable(uint32_t crc, const void *data, size_t len) {
    pthread_once(&once, init);
    return ~crc_soft(~crc, data, len);
}
