/*
 * tenants.c — reading the tenants file. See tenants.h.
 *
 * The file is JSON (jansson). Every member is checked: an unknown one is
 * refused, so that a misspelt limit never silently goes unenforced, and a
 * bad value names its place ("tenants.acme.limits.burst"). Key material
 * never appears in an error.
 */
#include "gateway/tenants.h"
#include "util/files.h"
#include "util/text.h"

#include <errno.h>
#include <jansson.h>
#include <openssl/crypto.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The loader's context: where it is in the file, and the first error. */
typedef struct {
    char *err;
    size_t cap;
    int failed;
} loader;

static int fail(loader *l, const char *fmt, ...) {
    if (!l->failed) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(l->err, l->cap, fmt, ap);
        va_end(ap);
    }
    l->failed = 1;
    return -1;
}

/* Refuses a member of obj not in `allowed` (NULL-terminated). */
static int only_members(loader *l, json_t *obj, const char *where, const char *const *allowed) {
    const char *key;
    json_t *v;
    json_object_foreach(obj, key, v) {
        int known = 0;
        for (const char *const *a = allowed; *a && !known; a++)
            known = strcmp(*a, key) == 0;
        if (!known)
            return fail(l, "%s: unknown member \"%s\"", where, key);
    }
    return 0;
}

static char *dup_str(const char *s) {
    size_t n = strlen(s);
    char *d = rn_xmalloc(n + 1);
    memcpy(d, s, n + 1);
    return d;
}

/* A non-negative integer member (absent: 0). */
static int get_u64(loader *l, json_t *obj, const char *name, const char *where, uint64_t *out) {
    json_t *v = json_object_get(obj, name);
    *out = 0;
    if (!v)
        return 0;
    if (!json_is_integer(v) || json_integer_value(v) < 0)
        return fail(l, "%s.%s: must be a non-negative integer", where, name);
    *out = (uint64_t)json_integer_value(v);
    return 0;
}

/* A string member; required or not. */
static int get_str(loader *l, json_t *obj, const char *name, const char *where, int required,
                   const char **out) {
    json_t *v = json_object_get(obj, name);
    *out = NULL;
    if (!v)
        return required ? fail(l, "%s: \"%s\" is required", where, name) : 0;
    if (!json_is_string(v) || json_string_length(v) == 0)
        return fail(l, "%s.%s: must be a non-empty string", where, name);
    *out = json_string_value(v);
    return 0;
}

static int load_limits(loader *l, json_t *obj, const char *where, rn_tenant_limits *lim) {
    static const char *const names[] = {"requests_per_second",
                                        "burst",
                                        "bytes_in_per_second",
                                        "bytes_out_per_second",
                                        "live_reads",
                                        "uploads",
                                        "upload_bytes",
                                        "max_request_bytes",
                                        "min_body_bytes_per_second",
                                        NULL};
    if (!json_is_object(obj))
        return fail(l, "%s: must be an object", where);
    if (only_members(l, obj, where, names))
        return -1;
    uint64_t *fields[] = {&lim->requests_per_second,
                          &lim->burst,
                          &lim->bytes_in_per_second,
                          &lim->bytes_out_per_second,
                          &lim->live_reads,
                          &lim->uploads,
                          &lim->upload_bytes,
                          &lim->max_request_bytes,
                          &lim->min_body_bytes_per_second};
    for (size_t i = 0; names[i]; i++)
        if (get_u64(l, obj, names[i], where, fields[i]))
            return -1;
    if (lim->burst && !lim->requests_per_second)
        return fail(l, "%s.burst: needs requests_per_second", where);
    return 0;
}

static int load_keys(loader *l, json_t *arr, const char *where, rn_tenant *t) {
    static const char *const names[] = {"id", "sha256", "expires", NULL};
    if (!json_is_array(arr))
        return fail(l, "%s: must be an array", where);
    t->keys = rn_xcalloc(json_array_size(arr) + 1, sizeof *t->keys);
    size_t i;
    json_t *k;
    json_array_foreach(arr, i, k) {
        char at[704];
        snprintf(at, sizeof at, "%s[%zu]", where, i);
        const char *id, *hash, *expires;
        if (!json_is_object(k))
            return fail(l, "%s: must be an object", at);
        if (only_members(l, k, at, names) || get_str(l, k, "id", at, 1, &id) ||
            get_str(l, k, "sha256", at, 1, &hash) || get_str(l, k, "expires", at, 0, &expires))
            return -1;
        rn_api_key *key = &t->keys[t->nkeys];
        if (strlen(id) >= sizeof key->id)
            return fail(l, "%s.id: at most %zu bytes", at, sizeof key->id - 1);
        snprintf(key->id, sizeof key->id, "%s", id);
        if (strlen(hash) != 64 || rn_parse_lower_hex(hash, 64, key->sha256))
            return fail(l, "%s.sha256: must be 64 lowercase hex digits", at);
        if (expires && rn_parse_rfc3339(expires, strlen(expires), &key->expires_ms))
            return fail(l, "%s.expires: must be an RFC 3339 timestamp", at);
        t->nkeys++;
    }
    return 0;
}

/* An origin as a browser sends it: http(s)://host[:port], nothing after
 * (no path, no trailing slash, no "*"). */
static int origin_ok(const char *s) {
    size_t skip = strncmp(s, "https://", 8) == 0 ? 8 : strncmp(s, "http://", 7) == 0 ? 7 : 0;
    size_t host = strlen(s + skip);
    return skip && host && strcspn(s + skip, "/?#*@ ") == host;
}

static int load_tenant(loader *l, const char *name, json_t *obj, rn_tenant *t) {
    static const char *const names[] = {"keys", "rights", "cors", "status", "limits", NULL};
    char where[512];
    snprintf(where, sizeof where, "tenants.%.64s", name);
    t->name = dup_str(name);
    size_t n = strlen(name);
    if (n == 0 || n > 64 || (n == 1 && name[0] == '-') ||
        strspn(name, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") != n)
        return fail(l, "%s: a tenant's name is 1 to 64 of A-Z, a-z, 0-9, ., _ and - (not \"-\")",
                    where);
    if (!json_is_object(obj))
        return fail(l, "%s: must be an object", where);
    if (only_members(l, obj, where, names))
        return -1;
    json_t *v;
    char at[640];
    if ((v = json_object_get(obj, "keys"))) {
        snprintf(at, sizeof at, "%s.keys", where);
        if (load_keys(l, v, at, t))
            return -1;
    }
    if ((v = json_object_get(obj, "rights"))) {
        if (!json_is_object(v))
            return fail(l, "%s.rights: must be an object of PATTERN: LETTERS", where);
        const char *pattern;
        json_t *letters;
        json_object_foreach(v, pattern, letters) {
            char why[256];
            if (!json_is_string(letters) ||
                rn_rights_add(&t->rights, pattern, json_string_value(letters), why, sizeof why))
                return fail(l, "%s.rights: %s", where,
                            json_is_string(letters) ? why : "letters must be a string");
        }
    }
    if ((v = json_object_get(obj, "cors"))) {
        if (!json_is_array(v))
            return fail(l, "%s.cors: must be an array of origins", where);
        t->cors = rn_xcalloc(json_array_size(v) + 1, sizeof *t->cors);
        size_t i;
        json_t *o;
        json_array_foreach(v, i, o) {
            const char *s = json_string_value(o);
            if (!s || !origin_ok(s))
                return fail(l,
                            "%s.cors[%zu]: must be an origin such as https://app.example.com "
                            "(no *)",
                            where, i);
            t->cors[t->ncors++] = dup_str(s);
        }
    }
    const char *status;
    if (get_str(l, obj, "status", where, 0, &status))
        return -1;
    if (!status || strcmp(status, "active") == 0)
        t->status = RN_TENANT_ACTIVE;
    else if (strcmp(status, "unpaid") == 0)
        t->status = RN_TENANT_UNPAID;
    else if (strcmp(status, "revoked") == 0)
        t->status = RN_TENANT_REVOKED;
    else
        return fail(l, "%s.status: must be active, unpaid or revoked", where);
    if ((v = json_object_get(obj, "limits"))) {
        snprintf(at, sizeof at, "%s.limits", where);
        if (load_limits(l, v, at, &t->limits))
            return -1;
    }
    return 0;
}

/* An issuer's "keys": secrets (base64url) and PEM public keys. */
static int load_issuer_keys(loader *l, json_t *arr, const char *where, rn_issuer *is) {
    static const char *const names[] = {"kid", "secret_base64url", "pem", NULL};
    if (!json_is_array(arr))
        return fail(l, "%s: must be an array", where);
    size_t i;
    json_t *k;
    json_array_foreach(arr, i, k) {
        char at[600], why[256];
        snprintf(at, sizeof at, "%s[%zu]", where, i);
        const char *kid, *secret, *pem;
        if (!json_is_object(k))
            return fail(l, "%s: must be an object", at);
        if (only_members(l, k, at, names) || get_str(l, k, "kid", at, 0, &kid) ||
            get_str(l, k, "secret_base64url", at, 0, &secret) || get_str(l, k, "pem", at, 0, &pem))
            return -1;
        if (!secret == !pem)
            return fail(l, "%s: exactly one of secret_base64url and pem", at);
        int rc;
        if (secret) {
            uint8_t raw[1024];
            size_t slen = strlen(secret);
            long n = slen <= sizeof raw * 4 / 3 ? rn_b64url_decode(secret, slen, raw) : -1;
            rc =
                n < 0 ? -1 : rn_jwt_keys_add_secret(is->keys, kid, raw, (size_t)n, why, sizeof why);
            if (n < 0)
                snprintf(why, sizeof why, "secret_base64url is not base64url");
            OPENSSL_cleanse(raw, sizeof raw);
        } else {
            rc = rn_jwt_keys_add_pem(is->keys, kid, pem, strlen(pem), why, sizeof why);
        }
        if (rc)
            return fail(l, "%s: %s", at, why);
    }
    return 0;
}

static int load_issuer(loader *l, json_t *obj, size_t i, rn_issuer *is) {
    static const char *const names[] = {"issuer",       "audience",       "tenant_claim",
                                        "scope_rights", "leeway_seconds", "keys",
                                        "jwks_file",    "jwks_url",       NULL};
    char where[64];
    snprintf(where, sizeof where, "issuers[%zu]", i);
    is->keys = rn_jwt_keys_new();
    if (!json_is_object(obj))
        return fail(l, "%s: must be an object", where);
    const char *issuer, *audience, *claim, *jwks_file, *jwks_url;
    if (only_members(l, obj, where, names) || get_str(l, obj, "issuer", where, 1, &issuer) ||
        get_str(l, obj, "audience", where, 1, &audience) ||
        get_str(l, obj, "tenant_claim", where, 0, &claim) ||
        get_str(l, obj, "jwks_file", where, 0, &jwks_file) ||
        get_str(l, obj, "jwks_url", where, 0, &jwks_url) ||
        get_u64(l, obj, "leeway_seconds", where, &is->leeway_s))
        return -1;
    is->issuer = dup_str(issuer);
    is->audience = dup_str(audience);
    is->tenant_claim = dup_str(claim ? claim : "client_id");
    json_t *sr = json_object_get(obj, "scope_rights");
    if (sr && !json_is_boolean(sr))
        return fail(l, "%s.scope_rights: must be true or false", where);
    is->scope_rights = sr && json_is_true(sr);
    json_t *keys = json_object_get(obj, "keys");
    char at[80];
    snprintf(at, sizeof at, "%s.keys", where);
    if (keys && load_issuer_keys(l, keys, at, is))
        return -1;
    if (jwks_file) {
        rn_buf doc = {0};
        char why[256];
        int rc = rn_read_path(jwks_file, &doc);
        if (rc == 0 &&
            rn_jwt_keys_add_jwks(is->keys, (const char *)doc.data, doc.len, NULL, why, sizeof why))
            rc = 1;
        rn_buf_free(&doc);
        if (rc < 0)
            return fail(l, "%s.jwks_file: cannot read %s: %s", where, jwks_file, strerror(-rc));
        if (rc > 0)
            return fail(l, "%s.jwks_file: %s: %s", where, jwks_file, why);
    }
    if (jwks_url) {
        if (strncmp(jwks_url, "http://", 7) && strncmp(jwks_url, "https://", 8))
            return fail(l, "%s.jwks_url: must be an http(s) URL", where);
        is->jwks_url = dup_str(jwks_url);
    }
    if (!rn_jwt_keys_count(is->keys) && !jwks_url)
        return fail(l, "%s: names no key (keys, jwks_file or jwks_url)", where);
    return 0;
}

static int load_authorizer(loader *l, json_t *obj, rn_authorizer_config *a) {
    static const char *const names[] = {"url", "timeout_ms", "cache_ms", NULL};
    const char *url;
    if (!json_is_object(obj))
        return fail(l, "authorizer: must be an object");
    if (only_members(l, obj, "authorizer", names) ||
        get_str(l, obj, "url", "authorizer", 1, &url) ||
        get_u64(l, obj, "timeout_ms", "authorizer", &a->timeout_ms) ||
        get_u64(l, obj, "cache_ms", "authorizer", &a->cache_ms))
        return -1;
    if (strncmp(url, "http://", 7) && strncmp(url, "https://", 8))
        return fail(l, "authorizer.url: must be an http(s) URL");
    a->url = dup_str(url);
    if (!a->timeout_ms)
        a->timeout_ms = 500;
    return 0;
}

/* Indexes every key by its hash; two tenants with one key are refused. */
static int index_keys(loader *l, rn_tenants *t) {
    size_t total = 0;
    for (size_t i = 0; i < t->ntenants; i++)
        total += t->tenants[i].nkeys;
    t->key_index = rn_xcalloc(total + 1, sizeof *t->key_index);
    for (size_t i = 0; i < t->ntenants; i++) {
        const rn_tenant *tenant = &t->tenants[i];
        rn_map_put(&t->by_name, tenant->name, strlen(tenant->name), (void *)tenant);
        for (size_t k = 0; k < tenant->nkeys; k++) {
            rn_tenant_key *e = &t->key_index[t->nkeys++];
            *e = (rn_tenant_key){&tenant->keys[k], tenant};
            if (rn_map_put(&t->by_key, e->key->sha256, 32, e))
                return fail(l, "tenants.%s: key %s has the hash of another key", tenant->name,
                            e->key->id);
        }
    }
    return 0;
}

static int load_doc(loader *l, json_t *doc, rn_tenants *t) {
    static const char *const names[] = {"tenants", "issuers", "authorizer", NULL};
    if (!json_is_object(doc))
        return fail(l, "the file must hold one JSON object");
    if (only_members(l, doc, "the file", names))
        return -1;
    json_t *tenants = json_object_get(doc, "tenants");
    if (tenants && !json_is_object(tenants))
        return fail(l, "tenants: must be an object of NAME: TENANT");
    t->tenants = rn_xcalloc(json_object_size(tenants) + 1, sizeof *t->tenants);
    const char *name;
    json_t *v;
    json_object_foreach(tenants, name, v) {
        if (load_tenant(l, name, v, &t->tenants[t->ntenants++]))
            return -1;
    }
    json_t *issuers = json_object_get(doc, "issuers");
    if (issuers && !json_is_array(issuers))
        return fail(l, "issuers: must be an array");
    t->issuers = rn_xcalloc(json_array_size(issuers) + 1, sizeof *t->issuers);
    size_t i;
    json_array_foreach(issuers, i, v) {
        if (load_issuer(l, v, i, &t->issuers[t->nissuers++]))
            return -1;
    }
    json_t *a = json_object_get(doc, "authorizer");
    if (a && load_authorizer(l, a, &t->authorizer))
        return -1;
    return index_keys(l, t);
}

rn_tenants *rn_tenants_load(const char *path, int *missing, char *err, size_t cap) {
    rn_tenants *t = rn_xcalloc(1, sizeof *t);
    t->refs = 1;
    *missing = 0;
    rn_buf text = {0};
    int rc = rn_read_path(path, &text);
    if (rc == -ENOENT) {
        *missing = 1;
        return t;
    }
    loader l = {.err = err, .cap = cap};
    size_t blank = 0;
    while (rc == 0 && blank < text.len && strchr(" \t\r\n", text.data[blank]))
        blank++;
    if (rc < 0) {
        fail(&l, "cannot read %s: %s", path, strerror(-rc));
    } else if (blank == text.len) {
        /* an empty file: no tenants (fail closed, as a missing one) */
    } else {
        json_error_t je;
        json_t *doc = json_loadb((const char *)text.data, text.len, JSON_REJECT_DUPLICATES, &je);
        if (!doc)
            /* where, not what: jansson's text may quote the file (a secret) */
            fail(&l, "%s:%d:%d: not valid JSON", path, je.line, je.column);
        else
            load_doc(&l, doc, t);
        json_decref(doc);
    }
    if (text.data)
        OPENSSL_cleanse(text.data, text.cap);
    rn_buf_free(&text);
    if (l.failed) {
        rn_tenants_unref(t);
        return NULL;
    }
    return t;
}

void rn_tenants_ref(rn_tenants *t) {
    t->refs++;
}

void rn_tenants_unref(rn_tenants *t) {
    if (!t || --t->refs > 0)
        return;
    for (size_t i = 0; i < t->ntenants; i++) {
        rn_tenant *x = &t->tenants[i];
        free(x->name);
        rn_rights_free(&x->rights);
        for (size_t c = 0; c < x->ncors; c++)
            free(x->cors[c]);
        free(x->cors);
        free(x->keys);
    }
    for (size_t i = 0; i < t->nissuers; i++) {
        rn_issuer *is = &t->issuers[i];
        free(is->issuer);
        free(is->audience);
        free(is->tenant_claim);
        free(is->jwks_url);
        rn_jwt_keys_free(is->keys);
    }
    free(t->issuers);
    free(t->tenants);
    free(t->key_index);
    free(t->authorizer.url);
    rn_map_free(&t->by_name);
    rn_map_free(&t->by_key);
    free(t);
}

const rn_tenant *rn_tenants_by_key(const rn_tenants *t, const uint8_t sha256[32],
                                   const rn_api_key **key) {
    const rn_tenant_key *e = rn_map_get(&t->by_key, sha256, 32);
    *key = e ? e->key : NULL;
    return e ? e->tenant : NULL;
}

const rn_tenant *rn_tenants_by_name(const rn_tenants *t, const char *name) {
    return rn_map_get(&t->by_name, name, strlen(name));
}

int rn_tenant_cors(const rn_tenant *tenant, const char *origin, size_t len) {
    for (size_t i = 0; i < tenant->ncors; i++)
        if (strlen(tenant->cors[i]) == len && memcmp(tenant->cors[i], origin, len) == 0)
            return 1;
    return 0;
}

int rn_tenants_any_cors(const rn_tenants *t, const char *origin, size_t len) {
    for (size_t i = 0; i < t->ntenants; i++)
        if (rn_tenant_cors(&t->tenants[i], origin, len))
            return 1;
    return 0;
}
