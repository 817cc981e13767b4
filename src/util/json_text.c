/*
 * json_text.c - one-pass RFC 8259 + strict UTF-8 validator that emits the
 * stored "JSON message text" form (see json_text.h).
 *
 * How it works: a single forward scan over the body with a hand-written state
 * machine (labels + goto, no recursion). Container nesting is tracked in a
 * fixed array of RN_JSON_MAX_DEPTH bytes, so hostile nesting costs no C stack.
 * Every significant byte is copied to `out` as it is validated; whitespace
 * between tokens is skipped. A top-level array is handled by the driver
 * (rn_json_to_messages): its '[' is dropped, each ',' and the final ']' become
 * the LF terminating an element's message, and each element is parsed as a
 * fresh value with depth 0. Any other top-level value is one message + LF.
 *
 * Speed: byte classes come from one 256-entry table; string bodies (the bulk
 * of typical JSON) are scanned 16 bytes at a time with SSE2 (8 at a time with
 * a portable word trick otherwise), copying whole blocks with one store and
 * dropping to per-byte work only at quotes, backslashes, control bytes and
 * non-ASCII bytes. Non-ASCII runs are validated sequence by sequence against
 * the RFC 3629 lead-byte/second-byte ranges.
 */
#include "util/json_text.h"

#include <assert.h>
#include <string.h>

#if defined(__SSE2__) && (defined(__GNUC__) || defined(__clang__)) && !defined(RN_JSON_NO_SIMD)
#define RN_JSON_USE_SSE2 1
#include <emmintrin.h>
#else
#define RN_JSON_USE_SSE2 0
#endif

/* Byte classes. */
enum {
    C_WS = 1,    /* insignificant whitespace: space, tab, LF, CR */
    C_PLAIN = 2, /* string byte copied verbatim: 0x20..0x7F except '"' and '\\' */
    C_HEX = 4,   /* hex digit */
    C_DIGIT = 8, /* decimal digit */
    C_ESC = 16,  /* valid character after a backslash (\" \\ \/ \b \f \n \r \t \u) */
};

static const uint8_t cls[256] = {
    0,  0,  0,  0,  0,  0,  0,  0,  0,  1,  1, 0, 0,  1, 0,  0,  /* 00 */
    0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0, 0, 0,  0, 0,  0,  /* 10 */
    3,  2,  16, 2,  2,  2,  2,  2,  2,  2,  2, 2, 2,  2, 2,  18, /* 20 */
    14, 14, 14, 14, 14, 14, 14, 14, 14, 14, 2, 2, 2,  2, 2,  2,  /* 30 */
    2,  6,  6,  6,  6,  6,  6,  2,  2,  2,  2, 2, 2,  2, 2,  2,  /* 40 */
    2,  2,  2,  2,  2,  2,  2,  2,  2,  2,  2, 2, 16, 2, 2,  2,  /* 50 */
    2,  6,  22, 6,  6,  6,  22, 2,  2,  2,  2, 2, 2,  2, 18, 2,  /* 60 */
    2,  2,  18, 2,  18, 18, 2,  2,  2,  2,  2, 2, 2,  2, 2,  2,  /* 70 */
    0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0, 0, 0,  0, 0,  0,  /* 80 */
    0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0, 0, 0,  0, 0,  0,  /* 90 */
    0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0, 0, 0,  0, 0,  0,  /* A0 */
    0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0, 0, 0,  0, 0,  0,  /* B0 */
    0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0, 0, 0,  0, 0,  0,  /* C0 */
    0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0, 0, 0,  0, 0,  0,  /* D0 */
    0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0, 0, 0,  0, 0,  0,  /* E0 */
    0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0, 0, 0,  0, 0,  0,  /* F0 */
};

#if defined(__GNUC__) || defined(__clang__)
#define RN_LIKELY(x) __builtin_expect(!!(x), 1)
#define RN_UNLIKELY(x) __builtin_expect(!!(x), 0)
#else
#define RN_LIKELY(x) (x)
#define RN_UNLIKELY(x) (x)
#endif

/* Returns the first byte at or after p that is not insignificant whitespace. */
static inline const uint8_t *skip_ws(const uint8_t *p, const uint8_t *end) {
    while (p < end && (cls[*p] & C_WS))
        p++;
    return p;
}

#if !RN_JSON_USE_SSE2
/* Nonzero iff some byte of w is '"', '\\', < 0x20 or >= 0x80. Each term is the
 * classic "has a zero/less-than byte" test, exact as a boolean. */
static inline uint64_t word_has_special(uint64_t w) {
    const uint64_t ones = 0x0101010101010101u, highs = 0x8080808080808080u;
    uint64_t q = w ^ (ones * '"');
    uint64_t b = w ^ (ones * '\\');
    return ((w - ones * 0x20) & ~w & highs) | ((q - ones) & ~q & highs) |
           ((b - ones) & ~b & highs) | (w & highs);
}
#endif

/*
 * Validates and copies one raw UTF-8 sequence whose lead byte is p[0] >= 0x80.
 * Returns the pointer past the sequence, or NULL with *errp at the first byte
 * that cannot continue a valid sequence (end if the sequence is truncated).
 * Accepted ranges (RFC 3629): C2..DF 80..BF | E0 A0..BF 80..BF |
 * E1..EC,EE..EF 80..BF 80..BF | ED 80..9F 80..BF | F0 90..BF 80..BF 80..BF |
 * F1..F3 80..BF x3 | F4 80..8F 80..BF 80..BF.
 */
static inline const uint8_t *copy_utf8_seq(const uint8_t *p, const uint8_t *end, uint8_t **op,
                                           const uint8_t **errp) {
    uint8_t c = p[0], lo = 0x80, hi = 0xBF;
    unsigned n;
    if (c < 0xC2) { /* stray continuation byte or overlong 2-byte lead */
        *errp = p;
        return NULL;
    } else if (c < 0xE0) {
        n = 2;
    } else if (c < 0xF0) {
        n = 3;
        if (c == 0xE0)
            lo = 0xA0; /* overlong */
        else if (c == 0xED)
            hi = 0x9F; /* UTF-16 surrogates */
    } else if (c < 0xF5) {
        n = 4;
        if (c == 0xF0)
            lo = 0x90; /* overlong */
        else if (c == 0xF4)
            hi = 0x8F; /* above U+10FFFF */
    } else {
        *errp = p;
        return NULL;
    }
    if (RN_LIKELY((size_t)(end - p) >= 4)) {
        /* Common case: all bytes present. Copy 4 bytes up front (in bounds by
         * the o - out <= p - in invariant) and validate branch-light. */
        memcpy(*op, p, 4);
        if (p[1] < lo || p[1] > hi) {
            *errp = p + 1;
            return NULL;
        }
        if (n > 2 && (p[2] & 0xC0) != 0x80) {
            *errp = p + 2;
            return NULL;
        }
        if (n > 3 && (p[3] & 0xC0) != 0x80) {
            *errp = p + 3;
            return NULL;
        }
        *op += n;
        return p + n;
    }
    if ((size_t)(end - p) < 2) {
        *errp = end;
        return NULL;
    }
    if (p[1] < lo || p[1] > hi) {
        *errp = p + 1;
        return NULL;
    }
    for (unsigned i = 2; i < n; i++) {
        if (p + i == end) {
            *errp = end;
            return NULL;
        }
        if ((p[i] & 0xC0) != 0x80) {
            *errp = p + i;
            return NULL;
        }
    }
    uint8_t *o = *op;
    o[0] = c;
    o[1] = p[1];
    if (n > 2) {
        o[2] = p[2];
        if (n > 3)
            o[3] = p[3];
    }
    *op = o + n;
    return p + n;
}

/*
 * Validates and copies a string body. p points just past the opening quote
 * (which the caller already copied). Returns the pointer past the closing
 * quote (also copied), or NULL with *errp set.
 *
 * Block stores may write up to 16 bytes at *op even when fewer are kept; this
 * stays within `out` because of the invariant o - out <= p - in (see
 * rn_json_to_messages) and because a block is only loaded when p + 16 <= end.
 */
static inline const uint8_t *copy_string(const uint8_t *p, const uint8_t *end, uint8_t **op,
                                         const uint8_t **errp) {
    uint8_t *o = *op;
    for (;;) {
#if RN_JSON_USE_SSE2
        const __m128i quote = _mm_set1_epi8('"');
        const __m128i bslash = _mm_set1_epi8('\\');
        const __m128i space = _mm_set1_epi8(0x20);
        while ((size_t)(end - p) >= 16) {
            __m128i v = _mm_loadu_si128((const __m128i *)(const void *)p);
            _mm_storeu_si128((__m128i *)(void *)o, v);
            /* Signed compare: bytes < 0x20 and bytes >= 0x80 (negative) both hit. */
            __m128i s =
                _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, bslash)),
                             _mm_cmplt_epi8(v, space));
            unsigned m = (unsigned)_mm_movemask_epi8(s);
            if (m != 0) {
                unsigned k = (unsigned)__builtin_ctz(m);
                p += k;
                o += k;
                goto special;
            }
            p += 16;
            o += 16;
        }
#else
        while ((size_t)(end - p) >= 8) {
            uint64_t w;
            memcpy(&w, p, 8);
            if (word_has_special(w))
                break;
            memcpy(o, p, 8);
            p += 8;
            o += 8;
        }
#endif
        while (p < end && (cls[*p] & C_PLAIN))
            *o++ = *p++;
        if (RN_UNLIKELY(p == end)) {
            *errp = end;
            return NULL;
        }
#if RN_JSON_USE_SSE2
    special:
#endif
        if (*p == '"') {
            *o++ = '"';
            *op = o;
            return p + 1;
        }
        if (*p == '\\') {
            if ((size_t)(end - p) < 2) {
                *errp = end;
                return NULL;
            }
            uint8_t e = p[1];
            if (e == 'u') {
                for (unsigned i = 2; i < 6; i++) {
                    if (p + i == end) {
                        *errp = end;
                        return NULL;
                    }
                    if (!(cls[p[i]] & C_HEX)) {
                        *errp = p + i;
                        return NULL;
                    }
                }
                memcpy(o, p, 6); /* escapes are kept exactly as written */
                o += 6;
                p += 6;
            } else if (cls[e] & C_ESC) {
                o[0] = '\\';
                o[1] = e;
                o += 2;
                p += 2;
            } else {
                *errp = p + 1;
                return NULL;
            }
            continue;
        }
        if (*p < 0x80) { /* unescaped control character */
            *errp = p;
            return NULL;
        }
        /* Non-ASCII: validate the run of multi-byte sequences here. */
        do {
            p = copy_utf8_seq(p, end, &o, errp);
            if (!p)
                return NULL;
        } while (p < end && *p >= 0x80);
    }
}

/*
 * Validates and copies one JSON value (the whole of one message). *pp must
 * point at the value's first byte (whitespace already skipped; may equal end).
 * On RN_JSON_OK, *pp is just past the value and *op just past its compact
 * text. Otherwise *pp is the error position. Nesting is limited to
 * RN_JSON_MAX_DEPTH containers relative to this value.
 */
static rn_json_status parse_value(const uint8_t **pp, const uint8_t *end, uint8_t **op) {
    const uint8_t *p = *pp;
    const uint8_t *err;
    uint8_t *o = *op;
    uint8_t is_obj[RN_JSON_MAX_DEPTH]; /* container kind per open level */
    unsigned depth = 0;
    rn_json_status st = RN_JSON_INVALID;

value:
    if (RN_UNLIKELY(p == end)) {
        err = end;
        goto fail;
    }
    switch (*p) {
    case '"':
        *o++ = '"';
        p = copy_string(p + 1, end, &o, &err);
        if (!p)
            goto fail;
        goto after_value;
    case '{':
    case '[':
        if (RN_UNLIKELY(depth == RN_JSON_MAX_DEPTH)) {
            err = p;
            st = RN_JSON_TOO_DEEP;
            goto fail;
        }
        {
            uint8_t open = *p;
            uint8_t close = open == '{' ? '}' : ']';
            is_obj[depth++] = open == '{';
            *o++ = open;
            p = skip_ws(p + 1, end);
            if (p < end && *p == close) {
                *o++ = close;
                p++;
                depth--;
                goto after_value;
            }
            if (open == '{')
                goto member;
            goto value;
        }
    case '-':
    case '0':
    case '1':
    case '2':
    case '3':
    case '4':
    case '5':
    case '6':
    case '7':
    case '8':
    case '9': {
        /* -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? */
        const uint8_t *start = p;
        if (*p == '-') {
            p++;
            if (p == end) {
                err = end;
                goto fail;
            }
        }
        if (*p == '0') {
            p++;
        } else if (cls[*p] & C_DIGIT) {
            p++;
            while (p < end && (cls[*p] & C_DIGIT))
                p++;
        } else {
            err = p;
            goto fail;
        }
        if (p < end && *p == '.') {
            p++;
            if (p == end) {
                err = end;
                goto fail;
            }
            if (!(cls[*p] & C_DIGIT)) {
                err = p;
                goto fail;
            }
            while (p < end && (cls[*p] & C_DIGIT))
                p++;
        }
        if (p < end && (*p == 'e' || *p == 'E')) {
            p++;
            if (p < end && (*p == '+' || *p == '-'))
                p++;
            if (p == end) {
                err = end;
                goto fail;
            }
            if (!(cls[*p] & C_DIGIT)) {
                err = p;
                goto fail;
            }
            while (p < end && (cls[*p] & C_DIGIT))
                p++;
        }
        size_t n = (size_t)(p - start);
        memcpy(o, start, n); /* number text is kept exactly as written */
        o += n;
        goto after_value;
    }
    case 't':
    case 'f':
    case 'n': {
        const char *lit = *p == 't' ? "true" : *p == 'f' ? "false" : "null";
        size_t n = *p == 'f' ? 5 : 4;
        if ((size_t)(end - p) >= n && memcmp(p, lit, n) == 0) {
            memcpy(o, lit, n);
            o += n;
            p += n;
            goto after_value;
        }
        for (size_t i = 1;; i++) { /* locate the first mismatch for err */
            if (p + i == end) {
                err = end;
                goto fail;
            }
            if (p[i] != (uint8_t)lit[i]) {
                err = p + i;
                goto fail;
            }
        }
    }
    default:
        err = p;
        goto fail;
    }

member: /* inside an object, at (whitespace-skipped) position of a key */
    if (RN_UNLIKELY(p == end)) {
        err = end;
        goto fail;
    }
    if (*p != '"') {
        err = p;
        goto fail;
    }
    *o++ = '"';
    p = copy_string(p + 1, end, &o, &err);
    if (!p)
        goto fail;
    p = skip_ws(p, end);
    if (RN_UNLIKELY(p == end)) {
        err = end;
        goto fail;
    }
    if (*p != ':') {
        err = p;
        goto fail;
    }
    *o++ = ':';
    p = skip_ws(p + 1, end);
    goto value;

after_value:
    if (depth == 0) {
        *pp = p;
        *op = o;
        return RN_JSON_OK;
    }
    p = skip_ws(p, end);
    if (RN_UNLIKELY(p == end)) {
        err = end;
        goto fail;
    }
    if (*p == ',') {
        *o++ = ',';
        p = skip_ws(p + 1, end);
        if (is_obj[depth - 1])
            goto member;
        goto value;
    }
    if (*p == (is_obj[depth - 1] ? '}' : ']')) {
        *o++ = *p++;
        depth--;
        goto after_value;
    }
    err = p;
    goto fail;

fail:
    *pp = err;
    return st;
}

/*
 * Output capacity bound: out needs at most len + 1 bytes.
 * Proof. Every byte written is either a copy of a distinct input byte or an LF.
 *  - Top-level non-array: the value's significant bytes are copied (a subset of
 *    the input) and one LF is appended, so out_len <= len + 1.
 *  - Top-level array: the opening '[' is never copied, and each LF written
 *    stands in for a distinct ',' or the closing ']' that is not copied, so
 *    out_len <= len - 1.
 * The same argument bounds every intermediate state: before the final LF of a
 * non-array body, (o - out) <= (p - in), i.e. the output cursor never passes
 * the input cursor. copy_string's 16-byte block store at o happens only when
 * p + 16 <= end, so it ends at o + 16 <= out + len, inside the buffer, even
 * on inputs that later turn out invalid.
 */
rn_json_status rn_json_to_messages(const uint8_t *in, size_t len, uint8_t *out, size_t *out_len,
                                   size_t *msg_count, size_t *err_pos) {
    assert((in || len == 0) && out && out_len);
    assert((uintptr_t)out + len + 1 <= (uintptr_t)in || (uintptr_t)in + len <= (uintptr_t)out);
    rn_json_status st = RN_JSON_INVALID;
    size_t count = 0;
    const uint8_t *p, *end, *err;
    uint8_t *o = out;

    *out_len = 0;
    if (msg_count)
        *msg_count = 0;
    if (len == 0) { /* also avoids arithmetic on a NULL `in` */
        if (err_pos)
            *err_pos = 0;
        return RN_JSON_INVALID;
    }
    end = in + len;
    p = skip_ws(in, end);
    if (p == end) {
        err = end;
        goto fail;
    }
    if (*p == '[') {
        p = skip_ws(p + 1, end);
        if (p < end && *p == ']') {
            p = skip_ws(p + 1, end);
            if (p != end) {
                err = p;
                goto fail;
            }
            if (err_pos)
                *err_pos = len;
            return RN_JSON_EMPTY_ARRAY;
        }
        for (;;) {
            st = parse_value(&p, end, &o);
            if (st != RN_JSON_OK) {
                err = p;
                goto fail;
            }
            *o++ = '\n';
            count++;
            p = skip_ws(p, end);
            if (p == end) {
                st = RN_JSON_INVALID;
                err = end;
                goto fail;
            }
            if (*p == ']') {
                p++;
                break;
            }
            if (*p != ',') {
                st = RN_JSON_INVALID;
                err = p;
                goto fail;
            }
            p = skip_ws(p + 1, end);
        }
    } else {
        st = parse_value(&p, end, &o);
        if (st != RN_JSON_OK) {
            err = p;
            goto fail;
        }
        *o++ = '\n';
        count = 1;
    }
    p = skip_ws(p, end);
    if (p != end) {
        st = RN_JSON_INVALID;
        err = p;
        goto fail;
    }
    *out_len = (size_t)(o - out);
    if (msg_count)
        *msg_count = count;
    if (err_pos)
        *err_pos = len;
    return RN_JSON_OK;

fail:
    if (err_pos)
        *err_pos = (size_t)(err - in);
    return st;
}

const char *rn_json_status_name(rn_json_status s) {
    switch (s) {
    case RN_JSON_OK:
        return "ok";
    case RN_JSON_EMPTY_ARRAY:
        return "empty array";
    case RN_JSON_INVALID:
        return "invalid JSON";
    case RN_JSON_TOO_DEEP:
        return "JSON nested too deeply";
    }
    return "unknown JSON status";
}

/*
 * Counts LF bytes. SSE2: compare 16 bytes at a time and accumulate per-lane
 * byte counters (each match subtracts -1), folding them into the total with
 * SAD before any lane can wrap (at most 255 blocks per fold).
 */
size_t rn_json_count_messages(const uint8_t *text, size_t len) {
    assert(text || len == 0);
    size_t n = 0, i = 0;
#if RN_JSON_USE_SSE2
    const __m128i lf = _mm_set1_epi8('\n');
    const __m128i zero = _mm_setzero_si128();
    while (len - i >= 16) {
        size_t blocks = (len - i) / 16;
        if (blocks > 255)
            blocks = 255;
        __m128i acc = zero;
        for (size_t b = 0; b < blocks; b++, i += 16) {
            __m128i v = _mm_loadu_si128((const __m128i *)(const void *)(text + i));
            acc = _mm_sub_epi8(acc, _mm_cmpeq_epi8(v, lf));
        }
        __m128i sums = _mm_sad_epu8(acc, zero);
        n += (size_t)_mm_cvtsi128_si32(sums) + (size_t)_mm_extract_epi16(sums, 4);
    }
#endif
    for (; i < len; i++)
        n += text[i] == '\n';
    return n;
}

void rn_json_append_array(rn_buf *out, const uint8_t *text, size_t len) {
    assert(len == 0 || text[len - 1] == '\n');
    rn_buf_reserve(out, len + 2);
    uint8_t *p = out->data + out->len;
    p[0] = '[';
    if (len == 0) {
        p[1] = ']';
        out->len += 2;
        return;
    }
    memcpy(p + 1, text, len - 1);
    for (size_t i = 1; i < len; i++)
        if (p[i] == '\n')
            p[i] = ',';
    p[len] = ']';
    out->len += len + 1;
}
