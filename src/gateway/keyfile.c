/*
 * keyfile.c — adding an API key to a tenants file. See keyfile.h.
 *
 * The new file is checked by loading it as the gate would before it
 * replaces the old one, so a key is never added to a file the gate would
 * refuse.
 */
#include "gateway/keyfile.h"
#include "gateway/rights.h"
#include "gateway/tenants.h"
#include "util/clock.h"
#include "util/files.h"
#include "util/text.h"

#include <errno.h>
#include <jansson.h>
#include <libgen.h>
#include <openssl/crypto.h>
#include <openssl/rand.h>
#include <openssl/sha.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The tenants document at path (an empty one when the file is missing). */
static json_t *load_doc(const char *path, char *err, size_t cap) {
    rn_buf text = {0};
    int rc = rn_read_path(path, &text);
    if (rc == -ENOENT) {
        rn_buf_free(&text);
        return json_object();
    }
    json_t *doc = NULL;
    json_error_t je;
    if (rc < 0)
        snprintf(err, cap, "cannot read %s: %s", path, strerror(-rc));
    else if (!(doc = json_loadb((const char *)text.data, text.len, JSON_REJECT_DUPLICATES, &je)))
        snprintf(err, cap, "%s:%d:%d: not valid JSON", path, je.line, je.column);
    else if (!json_is_object(doc)) {
        snprintf(err, cap, "%s: not a JSON object", path);
        json_decref(doc);
        doc = NULL;
    }
    rn_buf_free(&text);
    return doc;
}

/* obj's member name, an object, made when absent; NULL when it is not one. */
static json_t *object_member(json_t *obj, const char *name) {
    json_t *m = json_object_get(obj, name);
    if (!m) {
        m = json_object();
        json_object_set_new(obj, name, m);
    }
    return json_is_object(m) ? m : NULL;
}

/* The rights spec as the file's object: {"orders": "rw", ...}, a pattern
 * named twice getting the union of its letters. */
static json_t *rights_object(const char *spec, char *err, size_t cap) {
    rn_rights r = {0};
    int bad = rn_rights_parse_spec(&r, spec, err, cap);
    if (!bad && r.n == 0) {
        snprintf(err, cap, "--buckets names no PATTERN:LETTERS");
        bad = 1;
    }
    rn_rights_free(&r);
    if (bad)
        return NULL;
    json_t *o = json_object();
    for (const char *p = spec; *p;) {
        size_t n = strcspn(p, ", ");
        if (n) {
            char item[512];
            snprintf(item, sizeof item, "%.*s", (int)n, p);
            char *colon = strrchr(item, ':');
            *colon = 0;
            const char *had = json_string_value(json_object_get(o, item));
            char letters[4] = "";
            size_t nl = 0;
            for (const char *k = "rwa"; *k; k++) /* the union, in one order */
                if (strchr(colon + 1, *k) || (had && strchr(had, *k)))
                    letters[nl++] = *k;
            json_object_set_new(o, item, json_string(letters));
        }
        p += n;
        p += strspn(p, ", ");
    }
    return o;
}

/* Writes doc to path atomically, after checking that the gate loads it
 * (from a scratch copy beside it). */
static int write_doc(const char *path, json_t *doc, char *err, size_t cap) {
    char *text = json_dumps(doc, JSON_INDENT(2) | JSON_SORT_KEYS);
    if (!text)
        abort();
    char dir_buf[4200], name_buf[4200], check[4300];
    snprintf(dir_buf, sizeof dir_buf, "%s", path);
    snprintf(name_buf, sizeof name_buf, "%s", path);
    const char *dir = dirname(dir_buf), *name = basename(name_buf);
    snprintf(check, sizeof check, "%s.check", name);
    int rc = rn_atomic_write_file(dir, check, text, strlen(text), 0600);
    if (rc < 0) {
        snprintf(err, cap, "cannot write %s/%s: %s", dir, check, strerror(-rc));
    } else {
        char check_path[8600];
        snprintf(check_path, sizeof check_path, "%s/%s", dir, check);
        int missing;
        rn_tenants *t = rn_tenants_load(check_path, &missing, err, cap);
        rc = t ? 0 : -1;
        rn_tenants_unref(t);
        unlink(check_path);
    }
    if (rc == 0 && (rc = rn_atomic_write_file(dir, name, text, strlen(text), 0600)) < 0)
        snprintf(err, cap, "cannot write %s: %s", path, strerror(-rc));
    free(text);
    return rc < 0 ? -1 : 0;
}

int rn_keyfile_add(const char *path, const char *tenant, const char *rights, const char *expires,
                   char key[RN_API_KEY_LEN + 1], char *err, size_t cap) {
    int64_t ms;
    if (expires && rn_parse_rfc3339(expires, strlen(expires), &ms)) {
        snprintf(err, cap, "--expires must be an RFC 3339 timestamp (got \"%s\")", expires);
        return -1;
    }
    json_t *doc = load_doc(path, err, cap);
    if (!doc)
        return -1;
    json_t *rights_obj = rights_object(rights, err, cap);
    json_t *tenants = object_member(doc, "tenants");
    json_t *t = tenants ? object_member(tenants, tenant) : NULL;
    json_t *keys = t ? json_object_get(t, "keys") : NULL;
    if (t && !keys) {
        keys = json_array();
        json_object_set_new(t, "keys", keys);
    }
    int rc = -1;
    if (rights_obj && t && json_is_array(keys)) {
        uint8_t raw[32], hash[32];
        if (RAND_bytes(raw, sizeof raw) != 1)
            abort();
        memcpy(key, "rnk_", 4);
        rn_hex_encode(raw, sizeof raw, key + 4);
        key[RN_API_KEY_LEN] = 0;
        SHA256((const uint8_t *)key, RN_API_KEY_LEN, hash);
        char hex[65], id[32];
        rn_hex_encode(hash, sizeof hash, hex);
        hex[64] = 0;
        snprintf(id, sizeof id, "k-%lld-%.6s", (long long)(rn_now_ms() / 1000), hex);
        json_t *k = json_pack("{s:s, s:s}", "id", id, "sha256", hex);
        if (expires)
            json_object_set_new(k, "expires", json_string(expires));
        json_array_append_new(keys, k);
        json_object_set(t, "rights", rights_obj);
        rc = write_doc(path, doc, err, cap);
        OPENSSL_cleanse(raw, sizeof raw);
        if (rc)
            OPENSSL_cleanse(key, RN_API_KEY_LEN);
    } else if (rights_obj) {
        snprintf(err, cap, "%s: tenants.%s is not an object with a keys array", path, tenant);
    }
    json_decref(rights_obj);
    json_decref(doc);
    return rc;
}
