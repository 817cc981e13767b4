/*
 * offset.c — formatting and strict parsing of offset tokens. See offset.h.
 */
#include "surface/offset.h"

#include <stdio.h>
#include <string.h>

#define MAX_POSITION 9999999999999999ull

void rn_offset_format(uint64_t position, char out[RN_OFFSET_LEN + 1]) {
    snprintf(out, RN_OFFSET_LEN + 1, "%016llu_%016llu", 0ull, (unsigned long long)position);
}

int rn_offset_parse(const char *s, size_t len, rn_offset_kind *kind, uint64_t *position) {
    if (len == 2 && memcmp(s, "-1", 2) == 0) {
        *kind = RN_OFFSET_START;
        *position = 0;
        return 0;
    }
    if (len == 3 && memcmp(s, "now", 3) == 0) {
        *kind = RN_OFFSET_NOW;
        *position = 0;
        return 0;
    }
    if (len != RN_OFFSET_LEN || s[16] != '_')
        return -1;
    uint64_t high = 0, low = 0;
    for (size_t i = 0; i < RN_OFFSET_LEN; i++) {
        if (i == 16)
            continue;
        if (s[i] < '0' || s[i] > '9')
            return -1;
        if (i < 16)
            high = high * 10 + (uint64_t)(s[i] - '0');
        else
            low = low * 10 + (uint64_t)(s[i] - '0');
    }
    if (high != 0 || low > MAX_POSITION)
        return -1;
    *kind = RN_OFFSET_POSITION;
    *position = low;
    return 0;
}
