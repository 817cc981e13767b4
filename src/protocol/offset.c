/*
 * offset.c — formatting and strict parsing of offset tokens. See offset.h.
 */
#include "protocol/offset.h"
#include "engine/engine.h"
#include "util/text.h"

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

/* Percent-decodes a segment that must decode to at most `cap` bytes into
 * out (which holds 3 * cap: every decoded byte may be escaped). Returns the
 * decoded length or -1. */
static long decode_segment(const char *seg, size_t len, char *out, size_t cap) {
    return len <= 3 * cap ? rn_percent_decode(seg, len, out) : -1;
}

int rn_offset_parse_segment(const char *seg, size_t len, uint64_t *position) {
    char buf[3 * RN_OFFSET_LEN];
    long n = decode_segment(seg, len, buf, RN_OFFSET_LEN);
    rn_offset_kind kind;
    if (n < 0 || rn_offset_parse(buf, (size_t)n, &kind, position) || kind != RN_OFFSET_POSITION)
        return -1;
    return 0;
}

int rn_token_parse_segment(const char *seg, size_t len, uint64_t *token) {
    enum { TOKEN_DIGITS = 16 }; /* 2^53 - 1 has 16 decimal digits */
    char buf[3 * TOKEN_DIGITS];
    long n = decode_segment(seg, len, buf, TOKEN_DIGITS);
    if (n <= 0 || rn_parse_strict_u64(buf, (size_t)n, RN_INCARNATION_MAX, token) ||
        *token < RN_INCARNATION_MIN)
        return -1;
    return 0;
}
