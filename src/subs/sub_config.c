/*
 * sub_config.c — subscription configuration parsing and hashing. See
 * sub_config.h.
 */
#include "subs/sub_config.h"
#include "util/buf.h"

#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>

long rn_sub_path_normalize(const char *path, size_t len, const char **start) {
    while (len && path[0] == '/') {
        path++;
        len--;
    }
    while (len && path[len - 1] == '/')
        len--;
    if (len == 0 || len > RN_SUB_MAX_PATH)
        return -1;
    *start = path;
    return (long)len;
}

/* A normalized copy of a JSON string holding a path, or NULL. */
static char *path_dup(const json_t *v) {
    const char *p;
    long n = json_is_string(v)
                 ? rn_sub_path_normalize(json_string_value(v), json_string_length(v), &p)
                 : -1;
    return n < 0 ? NULL : rn_xstrndup(p, (size_t)n);
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

void rn_sub_streams_free(char **streams, size_t n) {
    for (size_t i = 0; i < n; i++)
        free(streams[i]);
    free(streams);
}

int rn_sub_streams_parse(const json_t *array, char ***out, size_t *n) {
    if (!json_is_array(array))
        return -1;
    size_t count = json_array_size(array);
    char **v = rn_xcalloc(count ? count : 1, sizeof *v);
    for (size_t i = 0; i < count; i++) {
        v[i] = path_dup(json_array_get(array, i));
        if (!v[i]) {
            rn_sub_streams_free(v, i);
            return -1;
        }
    }
    qsort(v, count, sizeof *v, cmp_str);
    size_t kept = 0;
    for (size_t i = 0; i < count; i++) {
        if (kept && strcmp(v[kept - 1], v[i]) == 0)
            free(v[i]);
        else
            v[kept++] = v[i];
    }
    *out = v;
    *n = kept;
    return 0;
}

/* The member, or NULL when absent or JSON null. */
static const json_t *member(const json_t *o, const char *key) {
    const json_t *v = json_object_get(o, key);
    return json_is_null(v) ? NULL : v;
}

static int parse(const json_t *body, rn_sub_config *c, rn_error *err) {
    if (!json_is_object(body))
        return *err = RN_E_SUB_INVALID_JSON, -1;
    const json_t *type = member(body, "type");
    const char *t = json_string_value(type);
    if (t && strcmp(t, "webhook") == 0)
        c->type = RN_SUB_WEBHOOK;
    else if (t && strcmp(t, "pull-wake") == 0)
        c->type = RN_SUB_PULL_WAKE;
    else
        return *err = RN_E_SUB_INVALID_TYPE, -1;
    const json_t *v;
    if ((v = member(body, "pattern")) && !(c->pattern = path_dup(v)))
        return *err = RN_E_SUB_INVALID_PATTERN, -1;
    if ((v = member(body, "streams")) && rn_sub_streams_parse(v, &c->streams, &c->nstreams) < 0)
        return *err = RN_E_SUB_INVALID_STREAMS, -1;
    if (!c->pattern && c->nstreams == 0)
        return *err = RN_E_SUB_NO_TARGET, -1;
    const json_t *webhook = member(body, "webhook");
    if (c->type == RN_SUB_WEBHOOK) {
        const json_t *url = json_object_get(webhook, "url");
        if (!json_is_object(webhook) || !json_is_string(url) || json_string_length(url) == 0)
            return *err = RN_E_SUB_INVALID_WEBHOOK, -1;
        c->webhook_url = rn_xstrndup(json_string_value(url), json_string_length(url));
    } else if (webhook) {
        return *err = RN_E_SUB_INVALID_WEBHOOK, -1;
    }
    v = member(body, "wake_stream");
    if (c->type == RN_SUB_PULL_WAKE ? !(c->wake_stream = path_dup(v)) : v != NULL)
        return *err = RN_E_SUB_INVALID_WAKE_STREAM, -1;
    c->lease_ttl_ms = RN_SUB_LEASE_DEFAULT_MS;
    if ((v = member(body, "lease_ttl_ms"))) {
        json_int_t ms = json_is_integer(v) ? json_integer_value(v) : -1;
        if (ms < RN_SUB_LEASE_MIN_MS || ms > RN_SUB_LEASE_MAX_MS)
            return *err = RN_E_SUB_INVALID_LEASE, -1;
        c->lease_ttl_ms = (uint64_t)ms;
    }
    if ((v = member(body, "description"))) {
        if (!json_is_string(v))
            return *err = RN_E_SUB_INVALID_DESCRIPTION, -1;
        c->description = rn_xstrndup(json_string_value(v), json_string_length(v));
    }
    return 0;
}

int rn_sub_config_parse(const json_t *body, rn_sub_config *out, rn_error *err) {
    memset(out, 0, sizeof *out);
    if (parse(body, out, err) == 0)
        return 0;
    rn_sub_config_free(out);
    return -1;
}

json_t *rn_sub_config_json(const rn_sub_config *c) {
    json_t *o = json_object();
    json_object_set_new(o, "type",
                        json_string(c->type == RN_SUB_WEBHOOK ? "webhook" : "pull-wake"));
    if (c->pattern)
        json_object_set_new(o, "pattern", json_string(c->pattern));
    if (c->nstreams) {
        json_t *a = json_array();
        for (size_t i = 0; i < c->nstreams; i++)
            json_array_append_new(a, json_string(c->streams[i]));
        json_object_set_new(o, "streams", a);
    }
    if (c->webhook_url)
        json_object_set_new(o, "webhook", json_pack("{s:s}", "url", c->webhook_url));
    if (c->wake_stream)
        json_object_set_new(o, "wake_stream", json_string(c->wake_stream));
    json_object_set_new(o, "lease_ttl_ms", json_integer((json_int_t)c->lease_ttl_ms));
    if (c->description)
        json_object_set_new(o, "description", json_string(c->description));
    return o;
}

static void append_opt(rn_buf *b, const char *s) {
    rn_buf_append_u8(b, s != NULL);
    if (s)
        rn_buf_append_lstr(b, s, strlen(s));
}

void rn_sub_config_hash(const rn_sub_config *c, uint8_t out[32]) {
    rn_buf b = {0};
    rn_buf_append_u8(&b, (uint8_t)c->type);
    append_opt(&b, c->pattern);
    rn_buf_append_u32(&b, (uint32_t)c->nstreams);
    for (size_t i = 0; i < c->nstreams; i++)
        rn_buf_append_lstr(&b, c->streams[i], strlen(c->streams[i]));
    append_opt(&b, c->webhook_url);
    append_opt(&b, c->wake_stream);
    rn_buf_append_u64(&b, c->lease_ttl_ms);
    append_opt(&b, c->description);
    unsigned int len = 32;
    EVP_Digest(b.data, b.len, out, &len, EVP_sha256(), NULL);
    rn_buf_free(&b);
}

void rn_sub_config_free(rn_sub_config *c) {
    free(c->pattern);
    rn_sub_streams_free(c->streams, c->nstreams);
    free(c->webhook_url);
    free(c->wake_stream);
    free(c->description);
    memset(c, 0, sizeof *c);
}
