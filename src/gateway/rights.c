/*
 * rights.c — rules, their patterns and the targets requests name. See
 * rights.h.
 */
#include "gateway/rights.h"
#include "util/text.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define V1_PREFIX "/v1/stream/"
#define OPS_PREFIX "/__runnel/"

/* A bucket id as §1.1 allows it (4 to 64 of a-z, 0-9, _ and -). */
static int bucket_id_ok(const char *s, size_t n) {
    if (n < 4 || n > 64)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '_' ||
              s[i] == '-'))
            return 0;
    return 1;
}

static char *dup_n(const char *s, size_t n) {
    char *d = rn_xmalloc(n + 1);
    memcpy(d, s, n);
    d[n] = 0;
    return d;
}

int rn_rights_add(rn_rights *r, const char *pattern, const char *letters, char *err, size_t cap) {
    rn_rights_rule rule = {0};
    size_t plen = strlen(pattern);
    for (const char *l = letters; *l; l++) {
        unsigned bit = *l == 'r'   ? RN_RIGHT_READ
                       : *l == 'w' ? RN_RIGHT_WRITE
                       : *l == 'a' ? RN_RIGHT_ADMIN
                                   : 0;
        if (!bit || (rule.rights & bit)) {
            snprintf(err, cap,
                     "rights of \"%s\" must be letters from \"rwa\", each once (got \"%s\")",
                     pattern, letters);
            return -1;
        }
        rule.rights |= bit;
    }
    if (!rule.rights) {
        snprintf(err, cap, "rights of \"%s\" are empty", pattern);
        return -1;
    }
    if (strcmp(pattern, "*") == 0) {
        rule.all = 1;
    } else if (strncmp(pattern, "v1:", 3) == 0) {
        rule.v1 = 1;
        rule.prefix = dup_n(pattern + 3, plen - 3);
        rule.prefix_len = plen - 3;
    } else {
        const char *slash = strchr(pattern, '/');
        size_t blen = slash ? (size_t)(slash - pattern) : plen;
        if (!bucket_id_ok(pattern, blen)) {
            snprintf(
                err, cap,
                "pattern \"%s\" must be *, v1:PREFIX, BUCKET or BUCKET/PREFIX with a bucket id "
                "of 4 to 64 of a-z, 0-9, _ and -",
                pattern);
            return -1;
        }
        rule.space = dup_n(pattern, blen);
        rule.space_len = blen;
        size_t rest = slash ? plen - blen - 1 : 0;
        rule.prefix = dup_n(slash ? slash + 1 : "", rest);
        rule.prefix_len = rest;
    }
    r->rules = rn_xrealloc(r->rules, (r->n + 1) * sizeof *r->rules);
    r->rules[r->n++] = rule;
    return 0;
}

/* Drops the rules of r past its first n. */
static void rights_truncate(rn_rights *r, size_t n) {
    for (size_t i = n; i < r->n; i++) {
        free(r->rules[i].space);
        free(r->rules[i].prefix);
    }
    r->n = n;
}

/* Adds one entry "PATTERN:LETTERS" of a spec. */
static int add_entry(rn_rights *r, const char *p, size_t len, char *err, size_t cap) {
    char item[512];
    if (len >= sizeof item) {
        snprintf(err, cap, "a rights entry is too long");
        return -1;
    }
    memcpy(item, p, len);
    item[len] = 0;
    char *colon = strrchr(item, ':');
    if (!colon || colon == item || (colon - item == 2 && strncmp(item, "v1", 2) == 0)) {
        snprintf(err, cap, "a rights entry is PATTERN:LETTERS (got \"%s\")", item);
        return -1;
    }
    *colon = 0;
    return rn_rights_add(r, item, colon + 1, err, cap);
}

int rn_rights_parse_spec(rn_rights *r, const char *spec, char *err, size_t cap) {
    size_t before = r->n;
    for (const char *p = spec; *p;) {
        size_t len = strcspn(p, ", ");
        if (len && add_entry(r, p, len, err, cap)) {
            rights_truncate(r, before); /* a refused spec adds nothing */
            return -1;
        }
        p += len;
        while (*p == ',' || *p == ' ')
            p++;
    }
    return 0;
}

void rn_rights_free(rn_rights *r) {
    rights_truncate(r, 0);
    free(r->rules);
    r->rules = NULL;
}

/* Percent-decodes [s, s+n) into t->buf at *used; returns its start, or
 * NULL when it does not decode or fit. */
static const char *decode_into(rn_target *t, size_t *used, const char *s, size_t n, size_t *out) {
    if (n >= sizeof t->buf - *used)
        return NULL;
    long len = rn_percent_decode(s, n, t->buf + *used);
    if (len < 0)
        return NULL;
    const char *start = t->buf + *used;
    *used += (size_t)len;
    *out = (size_t)len;
    return start;
}

/* Whether name (decoded, after /v1/stream/) is
 * __ds/subscriptions/{id}/callback, /ack or /release. */
static int token_route(const char *name, size_t len) {
    static const char pre[] = "__ds/subscriptions/";
    size_t pl = sizeof pre - 1;
    if (len <= pl || memcmp(name, pre, pl) != 0)
        return 0;
    const char *id = name + pl, *end = name + len;
    const char *slash = memchr(id, '/', (size_t)(end - id));
    if (!slash || slash == id)
        return 0;
    size_t n = (size_t)(end - slash - 1);
    const char *last = slash + 1;
    return (n == 8 && memcmp(last, "callback", 8) == 0) ||
           (n == 3 && memcmp(last, "ack", 3) == 0) || (n == 7 && memcmp(last, "release", 7) == 0);
}

void rn_target_of(const rn_request *req, rn_target *t) {
    const char *q = memchr(req->target, '?', req->target_len);
    size_t n = q ? (size_t)(q - req->target) : req->target_len;
    const char *p = req->target;
    size_t used = 0, vl = sizeof V1_PREFIX - 1, ol = sizeof OPS_PREFIX - 1;
    t->kind = RN_TARGET_NONE;
    t->bucket = t->stream = NULL;
    t->bucket_len = t->stream_len = 0;
    if (n > ol && memcmp(p, OPS_PREFIX, ol) == 0) {
        size_t rest = n - ol;
        /* the console's page and scripts hold no credential: open too */
        int open =
            (rest == 5 && memcmp(p + ol, "livez", 5) == 0) ||
            (rest == 6 && memcmp(p + ol, "readyz", 6) == 0) ||
            (rest >= 7 && memcmp(p + ol, "console", 7) == 0 && (rest == 7 || p[ol + 7] == '/'));
        t->kind = open ? RN_TARGET_OPEN : RN_TARGET_OPS;
        return;
    }
    if (n > vl && memcmp(p, V1_PREFIX, vl) == 0) {
        const char *name = decode_into(t, &used, p + vl, n - vl, &t->stream_len);
        if (!name)
            return;
        t->stream = name;
        const char *slash = memchr(name, '/', t->stream_len); /* decoded: no NUL after it */
        size_t seg = slash ? (size_t)(slash - name) : t->stream_len;
        t->kind = seg == 4 && memcmp(name, "__ds", 4) == 0 ? RN_TARGET_SUBS : RN_TARGET_V1;
        if (t->kind == RN_TARGET_SUBS && req->method == RN_HTTP_POST &&
            token_route(name, t->stream_len))
            t->kind = RN_TARGET_SUBS_TOKEN;
        return;
    }
    if (n < 2 || p[0] != '/')
        return;
    const char *b = p + 1, *end = p + n;
    const char *slash = memchr(b, '/', (size_t)(end - b));
    t->bucket = decode_into(t, &used, b, (size_t)((slash ? slash : end) - b), &t->bucket_len);
    if (!t->bucket || t->bucket_len == 0)
        return;
    if (slash) {
        const char *s = slash + 1;
        const char *s_end = memchr(s, '/', (size_t)(end - s));
        t->stream = decode_into(t, &used, s, (size_t)((s_end ? s_end : end) - s), &t->stream_len);
        if (!t->stream)
            return;
    }
    t->kind = RN_TARGET_BUCKET;
}

/* Whether rule covers t. */
static int covers(const rn_rights_rule *rule, const rn_target *t) {
    if (rule->all)
        return 1;
    if (t->kind == RN_TARGET_SUBS)
        return rule->v1 && rule->prefix_len == 0;
    if (t->kind == RN_TARGET_V1)
        return rule->v1 && t->stream_len >= rule->prefix_len &&
               memcmp(t->stream, rule->prefix, rule->prefix_len) == 0;
    if (t->kind != RN_TARGET_BUCKET || rule->v1 || rule->space_len != t->bucket_len ||
        memcmp(rule->space, t->bucket, t->bucket_len) != 0)
        return 0;
    if (rule->prefix_len == 0)
        return 1;
    /* a prefix rule covers streams, not the bucket itself */
    return t->stream_len >= rule->prefix_len &&
           memcmp(t->stream, rule->prefix, rule->prefix_len) == 0;
}

unsigned rn_rights_on(const rn_rights *r, const rn_target *t) {
    unsigned rights = 0;
    for (size_t i = 0; i < r->n; i++)
        if (covers(&r->rules[i], t))
            rights |= r->rules[i].rights;
    if (rights & RN_RIGHT_ADMIN)
        rights |= RN_RIGHT_READ | RN_RIGHT_WRITE;
    return rights;
}

int rn_rights_admin(const rn_rights *r) {
    for (size_t i = 0; i < r->n; i++)
        if (r->rules[i].all && (r->rules[i].rights & RN_RIGHT_ADMIN))
            return 1;
    return 0;
}
