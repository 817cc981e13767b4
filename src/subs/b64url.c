/*
 * b64url.c — base64url without padding. See b64url.h.
 *
 * Encoding reuses the project's standard base64 encoder and rewrites the
 * two alphabet differences and the padding in place; decoding is strict
 * (canonical text only), since every decoded value here is security
 * relevant (signatures, token parts).
 */
#include "subs/b64url.h"
#include "util/text.h"

void rn_b64url_append(rn_buf *out, const uint8_t *data, size_t len) {
    size_t start = out->len;
    rn_base64_append(out, data, len);
    while (out->len > start && out->data[out->len - 1] == '=')
        out->len--;
    for (size_t i = start; i < out->len; i++) {
        if (out->data[i] == '+')
            out->data[i] = '-';
        else if (out->data[i] == '/')
            out->data[i] = '_';
    }
}

static int sextet(char c) {
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '-')
        return 62;
    if (c == '_')
        return 63;
    return -1;
}

long rn_b64url_decode(const char *s, size_t len, uint8_t *out) {
    if (len % 4 == 1)
        return -1;
    uint32_t acc = 0;
    int bits = 0;
    long n = 0;
    for (size_t i = 0; i < len; i++) {
        int v = sextet(s[i]);
        if (v < 0)
            return -1;
        acc = acc << 6 | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[n++] = (uint8_t)(acc >> bits);
            acc &= (1u << bits) - 1;
        }
    }
    return acc == 0 ? n : -1;
}
