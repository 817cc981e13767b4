/*
 * sigv4.c — AWS Signature Version 4. See sigv4.h.
 */
#include "tiers/s3/sigv4.h"
#include "util/text.h"

#include <assert.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int unreserved(unsigned char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '_' || c == '.' || c == '~';
}

void rn_sigv4_encode(rn_buf *out, const char *s, size_t n, int keep_slash) {
    static const char digits[] = "0123456789ABCDEF";
    rn_buf_reserve(out, n);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (unreserved(c) || (keep_slash && c == '/')) {
            rn_buf_append_byte(out, c);
        } else {
            char esc[3] = {'%', digits[c >> 4], digits[c & 15]};
            rn_buf_append(out, esc, 3);
        }
    }
}

typedef struct {
    char *name, *value; /* encoded (query) or lowercased/trimmed (headers) */
    size_t order;       /* position given, to keep repeated headers in order */
} pair;

static int cmp_query(const void *a, const void *b) {
    const pair *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    return c ? c : strcmp(x->value, y->value);
}

static int cmp_header(const void *a, const void *b) {
    const pair *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    return c ? c : (x->order < y->order ? -1 : x->order > y->order);
}

static char *encoded(const char *s) {
    rn_buf b = {0};
    if (s)
        rn_sigv4_encode(&b, s, strlen(s), 0);
    rn_buf_append_byte(&b, 0);
    return (char *)b.data;
}

static void free_pairs(pair *p, size_t n) {
    for (size_t i = 0; i < n; i++) {
        free(p[i].name);
        free(p[i].value);
    }
    free(p);
}

void rn_sigv4_query(rn_buf *out, const rn_sigv4_param *query, size_t n) {
    if (n == 0)
        return;
    pair *p = rn_xcalloc(n, sizeof *p);
    for (size_t i = 0; i < n; i++) {
        assert(query[i].name);
        p[i].name = encoded(query[i].name);
        p[i].value = encoded(query[i].value);
    }
    qsort(p, n, sizeof *p, cmp_query);
    for (size_t i = 0; i < n; i++)
        rn_buf_appendf(out, "%s%s=%s", i ? "&" : "", p[i].name, p[i].value);
    free_pairs(p, n);
}

/* Lowercases a header name. */
static char *lower_name(const char *s) {
    char *d = rn_xstrdup(s);
    for (char *c = d; *c; c++)
        if (*c >= 'A' && *c <= 'Z')
            *c = (char)(*c - 'A' + 'a');
    return d;
}

/* Trims a header value and collapses inner runs of spaces and tabs. */
static char *trimmed_value(const char *s) {
    char *d = rn_xmalloc(strlen(s) + 1);
    size_t n = 0;
    int space = 0;
    for (const char *c = s; *c; c++) {
        if (*c == ' ' || *c == '\t') {
            space = 1;
            continue;
        }
        if (space && n)
            d[n++] = ' ';
        space = 0;
        d[n++] = *c;
    }
    d[n] = '\0';
    return d;
}

/* Sorted, lowercased, trimmed headers; repeated names stay adjacent in the
 * order given. */
static pair *sorted_headers(const rn_sigv4_request *r) {
    pair *p = rn_xcalloc(r->nheaders ? r->nheaders : 1, sizeof *p);
    for (size_t i = 0; i < r->nheaders; i++) {
        p[i].name = lower_name(r->headers[i].name);
        p[i].value = trimmed_value(r->headers[i].value);
        p[i].order = i;
    }
    qsort(p, r->nheaders, sizeof *p, cmp_header);
    return p;
}

static void append_signed_names(rn_buf *out, const pair *h, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (i == 0 || strcmp(h[i].name, h[i - 1].name) != 0)
            rn_buf_appendf(out, "%s%s", i ? ";" : "", h[i].name);
}

void rn_sigv4_canonical_request(const rn_sigv4_request *r, rn_buf *out) {
    assert(r->method && r->path && r->path[0] == '/' && r->payload_hash);
    rn_buf_appendf(out, "%s\n", r->method);
    rn_sigv4_encode(out, r->path, strlen(r->path), 1);
    rn_buf_append_byte(out, '\n');
    rn_sigv4_query(out, r->query, r->nquery);
    rn_buf_append_byte(out, '\n');
    pair *h = sorted_headers(r);
    for (size_t i = 0; i < r->nheaders; i++) {
        int same = i > 0 && strcmp(h[i].name, h[i - 1].name) == 0;
        if (same)
            rn_buf_appendf(out, ",%s", h[i].value);
        else
            rn_buf_appendf(out, "%s%s:%s", i ? "\n" : "", h[i].name, h[i].value);
    }
    rn_buf_append_str(out, "\n\n");
    append_signed_names(out, h, r->nheaders);
    rn_buf_appendf(out, "\n%s", r->payload_hash);
    free_pairs(h, r->nheaders);
}

void rn_sha256_hex(const void *data, size_t n, char out[65]) {
    uint8_t digest[32];
    unsigned int len = 0;
    EVP_Digest(data, n, digest, &len, EVP_sha256(), NULL);
    rn_hex_encode(digest, 32, out);
}

static void date_of(const rn_sigv4_request *r, char date[9]) {
    assert(r->amz_date && strlen(r->amz_date) == 16);
    memcpy(date, r->amz_date, 8);
    date[8] = '\0';
}

void rn_sigv4_string_to_sign(const rn_sigv4_request *r, const rn_sigv4_identity *id,
                             const rn_buf *canonical, rn_buf *out) {
    char date[9], hash[65];
    date_of(r, date);
    rn_sha256_hex(canonical->data, canonical->len, hash);
    rn_buf_appendf(out, "AWS4-HMAC-SHA256\n%s\n%s/%s/%s/aws4_request\n%s", r->amz_date, date,
                   id->region, id->service, hash);
}

static void hmac(const uint8_t *key, size_t key_len, const void *msg, size_t n, uint8_t out[32]) {
    unsigned int len = 32;
    HMAC(EVP_sha256(), key, (int)key_len, msg, n, out, &len);
}

void rn_sigv4_signing_key(const char *secret_key, const char *date, const char *region,
                          const char *service, uint8_t key[32]) {
    size_t n = strlen(secret_key);
    uint8_t *k_secret = rn_xmalloc(n + 4);
    memcpy(k_secret, "AWS4", 4);
    memcpy(k_secret + 4, secret_key, n);
    uint8_t k_date[32], k_region[32], k_service[32];
    hmac(k_secret, n + 4, date, strlen(date), k_date);
    hmac(k_date, 32, region, strlen(region), k_region);
    hmac(k_region, 32, service, strlen(service), k_service);
    hmac(k_service, 32, "aws4_request", 12, key);
    OPENSSL_cleanse(k_secret, n + 4);
    OPENSSL_cleanse(k_date, 32);
    OPENSSL_cleanse(k_region, 32);
    OPENSSL_cleanse(k_service, 32);
    free(k_secret);
}

void rn_sigv4_authorization(const rn_sigv4_request *r, const rn_sigv4_identity *id, rn_buf *out) {
    rn_buf canonical = {0}, sts = {0};
    rn_sigv4_canonical_request(r, &canonical);
    rn_sigv4_string_to_sign(r, id, &canonical, &sts);
    char date[9];
    date_of(r, date);
    uint8_t key[32], sig[32];
    rn_sigv4_signing_key(id->secret_key, date, id->region, id->service, key);
    hmac(key, 32, sts.data, sts.len, sig);
    OPENSSL_cleanse(key, 32);
    char sig_hex[65];
    rn_hex_encode(sig, 32, sig_hex);
    rn_buf_appendf(out, "AWS4-HMAC-SHA256 Credential=%s/%s/%s/%s/aws4_request, SignedHeaders=",
                   id->access_key, date, id->region, id->service);
    pair *h = sorted_headers(r);
    append_signed_names(out, h, r->nheaders);
    free_pairs(h, r->nheaders);
    rn_buf_appendf(out, ", Signature=%s", sig_hex);
    rn_buf_free(&canonical);
    rn_buf_free(&sts);
}

void rn_sigv4_amz_date(int64_t unix_ms, char out[17]) {
    time_t t = (time_t)(unix_ms / 1000);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(out, 17, "%Y%m%dT%H%M%SZ", &tm);
}
