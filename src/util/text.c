/*
 * text.c — strict integers, case-insensitive comparison, RFC 3339 and HTTP
 * dates, base64 and base64url, and percent-decoding. See text.h.
 */
#include "util/text.h"

#include <assert.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

int rn_parse_strict_u64(const char *s, size_t len, uint64_t max, uint64_t *out) {
    if (len == 0 || len > 20 || (len > 1 && s[0] == '0'))
        return -1;
    uint64_t v = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        uint64_t d = (uint64_t)(s[i] - '0');
        if (v > (UINT64_MAX - d) / 10)
            return -1;
        v = v * 10 + d;
    }
    if (v > max)
        return -1;
    *out = v;
    return 0;
}

static char lower(char c) {
    return (c >= 'A' && c <= 'Z') ? (char)(c + 32) : c;
}

int rn_ieq(const char *s, size_t len, const char *lit) {
    size_t n = strlen(lit);
    if (n != len)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (lower(s[i]) != lower(lit[i]))
            return 0;
    return 1;
}

int rn_iprefix(const char *s, size_t len, const char *lit) {
    size_t n = strlen(lit);
    if (len < n)
        return 0;
    return rn_ieq(s, n, lit);
}

static int digits(const char *s, int n, int *out) {
    int v = 0;
    for (int i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (s[i] - '0');
    }
    *out = v;
    return 0;
}

/* Days from 1970-01-01 to the given civil date (proleptic Gregorian). */
static int64_t days_from_civil(int64_t y, int m, int d) {
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

int rn_parse_rfc3339(const char *s, size_t len, int64_t *out_ms) {
    int Y, M, D, h, mi, sec;
    if (len < 20 || s[4] != '-' || s[7] != '-' || (s[10] != 'T' && s[10] != 't') || s[13] != ':' ||
        s[16] != ':')
        return -1;
    if (digits(s, 4, &Y) || digits(s + 5, 2, &M) || digits(s + 8, 2, &D) || digits(s + 11, 2, &h) ||
        digits(s + 14, 2, &mi) || digits(s + 17, 2, &sec))
        return -1;
    static const int mdays[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    int leap = (Y % 4 == 0 && Y % 100 != 0) || Y % 400 == 0;
    if (M < 1 || M > 12 || D < 1 || D > mdays[M - 1] || (M == 2 && D == 29 && !leap) || h > 23 ||
        mi > 59 || sec > 60)
        return -1;
    size_t i = 19;
    int64_t frac_ms = 0;
    if (i < len && s[i] == '.') {
        i++;
        size_t start = i;
        int64_t scale = 100;
        while (i < len && s[i] >= '0' && s[i] <= '9') {
            frac_ms += (s[i] - '0') * scale;
            scale /= 10;
            i++;
        }
        if (i == start)
            return -1;
    }
    int64_t offset_min = 0;
    if (i < len && (s[i] == 'Z' || s[i] == 'z')) {
        i++;
    } else if (i + 6 == len && (s[i] == '+' || s[i] == '-') && s[i + 3] == ':') {
        int oh, om;
        if (digits(s + i + 1, 2, &oh) || digits(s + i + 4, 2, &om) || oh > 23 || om > 59)
            return -1;
        offset_min = (oh * 60 + om) * (s[i] == '+' ? 1 : -1);
        i += 6;
    } else {
        return -1;
    }
    if (i != len)
        return -1;
    int64_t days = days_from_civil(Y, M, D);
    int64_t secs = days * 86400 + h * 3600 + mi * 60 + (sec > 59 ? 59 : sec) - offset_min * 60;
    *out_ms = secs * 1000 + frac_ms;
    return 0;
}

void rn_format_rfc3339(int64_t ms, char out[48]) {
    time_t t = (time_t)(ms >= 0 ? ms / 1000 : (ms - 999) / 1000);
    int millis = (int)(ms - (int64_t)t * 1000);
    struct tm tm;
    gmtime_r(&t, &tm);
    snprintf(out, 48, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1,
             tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, millis);
}

void rn_format_http_date(int64_t ms, char out[40]) {
    time_t t = (time_t)(ms / 1000);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(out, 40, "%a, %d %b %Y %H:%M:%S GMT", &tm);
}

void rn_hex_encode(const uint8_t *data, size_t n, char *out) {
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[data[i] >> 4];
        out[2 * i + 1] = digits[data[i] & 15];
    }
    out[2 * n] = '\0';
}

void rn_base64_append(rn_buf *b, const uint8_t *data, size_t len) {
    static const char alphabet[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    rn_buf_reserve(b, (len + 2) / 3 * 4);
    char *o = (char *)b->data + b->len;
    size_t i = 0;
    for (; i + 3 <= len; i += 3) {
        uint32_t v = (uint32_t)data[i] << 16 | (uint32_t)data[i + 1] << 8 | data[i + 2];
        *o++ = alphabet[v >> 18];
        *o++ = alphabet[(v >> 12) & 63];
        *o++ = alphabet[(v >> 6) & 63];
        *o++ = alphabet[v & 63];
    }
    if (i < len) {
        uint32_t v = (uint32_t)data[i] << 16 | (i + 1 < len ? (uint32_t)data[i + 1] << 8 : 0);
        *o++ = alphabet[v >> 18];
        *o++ = alphabet[(v >> 12) & 63];
        *o++ = i + 1 < len ? alphabet[(v >> 6) & 63] : '=';
        *o++ = '=';
    }
    b->len = (size_t)((uint8_t *)o - b->data);
}

/* base64url: the standard encoder's output with the two alphabet differences
 * rewritten and the padding dropped. */
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

/* The value of base64 character c in the standard alphabet (url 0) or the
 * URL-safe one (url 1), or -1. */
static int sextet(char c, int url) {
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == (url ? '-' : '+'))
        return 62;
    if (c == (url ? '_' : '/'))
        return 63;
    return -1;
}

long rn_base64_decode(const char *s, size_t len, uint8_t *out) {
    size_t n = 0, quad = 0, pad = 0;
    uint32_t acc = 0;
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        if (c == '\n' || c == '\r')
            continue;
        int v = c == '=' ? 0 : sextet(c, 0);
        if (v < 0 || (pad && c != '='))
            return -1; /* outside the alphabet, or data after padding */
        pad += c == '=';
        acc = acc << 6 | (uint32_t)v;
        if (++quad < 4)
            continue;
        if (pad > 2)
            return -1;
        out[n++] = (uint8_t)(acc >> 16);
        if (pad < 2)
            out[n++] = (uint8_t)(acc >> 8);
        if (pad < 1)
            out[n++] = (uint8_t)acc;
        quad = 0;
        acc = 0;
        if (pad)
            pad = 3; /* nothing may follow a padded quad */
    }
    return quad == 0 ? (long)n : -1;
}

long rn_b64url_decode(const char *s, size_t len, uint8_t *out) {
    if (len % 4 == 1)
        return -1;
    uint32_t acc = 0;
    int bits = 0;
    long n = 0;
    for (size_t i = 0; i < len; i++) {
        int v = sextet(s[i], 1);
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

static int hexval(char c) {
    if (c >= '0' && c <= '9')
        return c - '0';
    c = lower(c);
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

int rn_parse_lower_hex(const char *s, size_t len, uint8_t *out) {
    assert(len % 2 == 0);
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
            return -1;
        int v = hexval(c);
        out[i / 2] = (uint8_t)(i % 2 ? out[i / 2] | v : v << 4);
    }
    return 0;
}

int rn_parse_hex_u64(const char *s, uint64_t *out) {
    uint8_t b[8];
    if (rn_parse_lower_hex(s, 16, b) != 0)
        return -1;
    uint64_t v = 0;
    for (size_t i = 0; i < sizeof b; i++)
        v = v << 8 | b[i];
    *out = v;
    return 0;
}

long rn_percent_decode(const char *s, size_t len, char *out) {
    size_t o = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] == '%') {
            if (i + 2 >= len)
                return -1;
            int hi = hexval(s[i + 1]), lo = hexval(s[i + 2]);
            if (hi < 0 || lo < 0)
                return -1;
            out[o++] = (char)(hi * 16 + lo);
            i += 2;
        } else {
            out[o++] = s[i];
        }
    }
    return (long)o;
}

int rn_utf8_valid(const uint8_t *s, size_t len) {
    size_t i = 0;
    while (i < len) {
        uint8_t c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t n;
        uint8_t lo = 0x80, hi = 0xbf;
        if (c >= 0xc2 && c <= 0xdf) {
            n = 1;
        } else if (c >= 0xe0 && c <= 0xef) {
            n = 2;
            if (c == 0xe0)
                lo = 0xa0; /* no overlongs */
            if (c == 0xed)
                hi = 0x9f; /* no surrogates */
        } else if (c >= 0xf0 && c <= 0xf4) {
            n = 3;
            if (c == 0xf0)
                lo = 0x90;
            if (c == 0xf4)
                hi = 0x8f; /* nothing past U+10FFFF */
        } else {
            return 0;
        }
        if (i + n >= len)
            return 0;
        if (s[i + 1] < lo || s[i + 1] > hi)
            return 0;
        for (size_t k = 2; k <= n; k++)
            if (s[i + k] < 0x80 || s[i + k] > 0xbf)
                return 0;
        i += n + 1;
    }
    return 1;
}
