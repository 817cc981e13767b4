/*
 * s3_calls.c — the S3 client's calls: how each builds its request and
 * reads its answer (headers, XML documents, errors inside a 200 answer).
 * The life of a call is in s3.c; see s3_int.h.
 */
#include "tiers/s3/s3_int.h"
#include "tiers/s3/sigv4.h"
#include "tiers/s3/xml.h"
#include "util/text.h"

#include <assert.h>
#include <inttypes.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define S3_XMLNS "http://s3.amazonaws.com/doc/2006-03-01/"

/* ---- answer readers ---- */

static int ok(const rn_s3_result *r) {
    return r->outcome == RN_S3_OK;
}

/* Copies a header's value into out; "" when absent. */
static const char *header(const rn_fetch_result *fr, const char *name, char *out, size_t cap) {
    size_t len = 0;
    const char *v = rn_fetch_header(fr, name, &len);
    snprintf(out, cap, "%.*s", v ? (int)len : 0, v ? v : "");
    return out;
}

/* PutObject, UploadPart, DeleteObject, AbortMultipartUpload: the ETag
 * header, if any. */
static void read_etag(rn_s3_call *c, const rn_fetch_result *fr, rn_s3_result *r) {
    char etag[128];
    if (ok(r))
        r->etag = header(fr, "ETag", etag, sizeof etag);
    s3_deliver(c, r);
}

static int parse_u64(const char *s, size_t len, uint64_t *out) {
    return rn_parse_strict_u64(s, len, UINT64_MAX, out);
}

static void read_head(rn_s3_call *c, const rn_fetch_result *fr, rn_s3_result *r) {
    char etag[128], length[32];
    if (ok(r)) {
        r->etag = header(fr, "ETag", etag, sizeof etag);
        header(fr, "Content-Length", length, sizeof length);
        if (parse_u64(length, strlen(length), &r->length) != 0)
            s3_fail(r, RN_S3_FAILED, "BadResponse", "HEAD answered without a Content-Length");
        r->object_size = r->length;
    }
    s3_deliver(c, r);
}

/* Parses "bytes FIRST-LAST/TOTAL". */
static int parse_content_range(const char *v, uint64_t *first, uint64_t *last, uint64_t *total) {
    const char *dash = strchr(v, '-'), *slash = strchr(v, '/');
    if (strncmp(v, "bytes ", 6) != 0 || !dash || !slash || slash < dash)
        return -1;
    return parse_u64(v + 6, (size_t)(dash - v - 6), first) ||
                   parse_u64(dash + 1, (size_t)(slash - dash - 1), last) ||
                   parse_u64(slash + 1, strlen(slash + 1), total) || *last < *first
               ? -1
               : 0;
}

static void read_get(rn_s3_call *c, const rn_fetch_result *fr, rn_s3_result *r) {
    char range[96], etag[128];
    if (ok(r)) {
        r->etag = header(fr, "ETag", etag, sizeof etag);
        r->length = fr->received;
        uint64_t first, last, total;
        if (fr->status == 206) {
            header(fr, "Content-Range", range, sizeof range);
            if (parse_content_range(range, &first, &last, &total) != 0 ||
                first != c->range_offset || last - first + 1 != fr->received)
                s3_fail(r, RN_S3_FAILED, "BadResponse",
                        "the answer's Content-Range is not the range asked for");
            r->object_size = total;
        } else if (c->range_offset != 0) {
            s3_fail(r, RN_S3_FAILED, "BadResponse", "the store ignored the Range header");
        } else {
            r->object_size = fr->received;
        }
    }
    s3_deliver(c, r);
}

/* Collects a few fields of an XML answer. */
typedef struct {
    const char *root; /* the document expected */
    int root_seen, error_seen;
    char code[64], message[200];
    char value[1100]; /* the one value wanted (an ETag, an UploadId) */
    const char *value_path;
} doc_fields;

static void on_doc_open(void *arg, const char *path) {
    doc_fields *d = arg;
    if (strchr(path, '/'))
        return;
    d->root_seen = strcmp(path, d->root) == 0;
    d->error_seen = strcmp(path, "Error") == 0;
}

static void on_doc_text(void *arg, const char *path, const char *text, size_t len) {
    doc_fields *d = arg;
    if (strcmp(path, "Error/Code") == 0)
        snprintf(d->code, sizeof d->code, "%.*s", (int)len, text);
    else if (strcmp(path, "Error/Message") == 0)
        snprintf(d->message, sizeof d->message, "%.*s", (int)len, text);
    else if (d->value_path && strcmp(path, d->value_path) == 0)
        snprintf(d->value, sizeof d->value, "%.*s", (int)len, text);
}

/* Reads a 200 answer that is either the expected document, holding one
 * value (CreateMultipartUpload's UploadId, UploadPartCopy's and
 * CompleteMultipartUpload's ETag), or an Error document (S3 may fail
 * these after it started answering 200). */
static void read_value(rn_s3_call *c, const rn_fetch_result *fr, rn_s3_result *r, const char *root,
                       const char *value_path, const char **field) {
    doc_fields d = {.root = root, .value_path = value_path};
    if (ok(r)) {
        rn_s3_xml_handler h = {.open = on_doc_open, .text = on_doc_text, .arg = &d};
        if (rn_s3_xml_parse(fr->body, fr->body_len, &h) != 0 || (!d.root_seen && !d.error_seen))
            s3_fail(r, RN_S3_FAILED, "BadResponse", "the answer is not the XML expected");
        else if (d.error_seen)
            s3_fail(r, s3_outcome_of_code(d.code), d.code, d.message);
        else if (!d.value[0])
            s3_fail(r, RN_S3_FAILED, "BadResponse", "the answer lacks the value expected");
        else
            *field = d.value;
    }
    s3_deliver(c, r);
}

static void read_create(rn_s3_call *c, const rn_fetch_result *fr, rn_s3_result *r) {
    read_value(c, fr, r, "InitiateMultipartUploadResult", "InitiateMultipartUploadResult/UploadId",
               &r->upload_id);
}

static void read_copy(rn_s3_call *c, const rn_fetch_result *fr, rn_s3_result *r) {
    read_value(c, fr, r, "CopyPartResult", "CopyPartResult/ETag", &r->etag);
}

static void read_complete(rn_s3_call *c, const rn_fetch_result *fr, rn_s3_result *r) {
    read_value(c, fr, r, "CompleteMultipartUploadResult", "CompleteMultipartUploadResult/ETag",
               &r->etag);
}

/* Makes room for element n of a growing array. */
static void *grow(void *array, size_t *cap, size_t n, size_t size) {
    if (n < *cap)
        return array;
    *cap = *cap ? 2 * *cap : 16;
    return rn_xrealloc(array, *cap * size);
}

/* ListObjectsV2's page. */
typedef struct {
    rn_s3_entry *entries;
    size_t n, cap;
    int root_seen, bad;
    char truncated[8];
    char *token;
} list_page;

static void on_list_open(void *arg, const char *path) {
    list_page *p = arg;
    if (strcmp(path, "ListBucketResult") == 0) {
        p->root_seen = 1;
    } else if (strcmp(path, "ListBucketResult/Contents") == 0) {
        p->entries = grow(p->entries, &p->cap, p->n, sizeof *p->entries);
        p->entries[p->n++] = (rn_s3_entry){.key = NULL, .etag = NULL, .last_modified_ms = -1};
    }
}

static void on_list_text(void *arg, const char *path, const char *text, size_t len) {
    list_page *p = arg;
    rn_s3_entry *e = p->n ? &p->entries[p->n - 1] : NULL;
    if (strcmp(path, "ListBucketResult/IsTruncated") == 0) {
        snprintf(p->truncated, sizeof p->truncated, "%.*s", (int)len, text);
    } else if (strcmp(path, "ListBucketResult/NextContinuationToken") == 0) {
        free(p->token);
        p->token = rn_xstrndup(text, len);
    } else if (e && strcmp(path, "ListBucketResult/Contents/Key") == 0 && !e->key) {
        e->key = rn_xstrndup(text, len);
    } else if (e && strcmp(path, "ListBucketResult/Contents/ETag") == 0 && !e->etag) {
        e->etag = rn_xstrndup(text, len);
    } else if (e && strcmp(path, "ListBucketResult/Contents/Size") == 0) {
        p->bad |= parse_u64(text, len, &e->size) != 0;
    } else if (e && strcmp(path, "ListBucketResult/Contents/LastModified") == 0) {
        p->bad |= rn_parse_rfc3339(text, len, &e->last_modified_ms) != 0;
    }
}

static void read_list(rn_s3_call *c, const rn_fetch_result *fr, rn_s3_result *r) {
    list_page p = {0};
    if (ok(r)) {
        rn_s3_xml_handler h = {.open = on_list_open, .text = on_list_text, .arg = &p};
        int parsed = rn_s3_xml_parse(fr->body, fr->body_len, &h) == 0 && p.root_seen;
        for (size_t i = 0; i < p.n; i++)
            p.bad |= !p.entries[i].key;
        r->truncated = strcmp(p.truncated, "true") == 0;
        if (!parsed || p.bad || (r->truncated && !p.token)) {
            s3_fail(r, RN_S3_FAILED, "BadResponse", "the listing is not the XML expected");
        } else {
            r->entries = p.entries;
            r->nentries = p.n;
            r->next_token = p.token ? p.token : "";
        }
    }
    s3_deliver(c, r);
    for (size_t i = 0; i < p.n; i++) {
        free((char *)p.entries[i].key);
        free((char *)p.entries[i].etag);
    }
    free(p.entries);
    free(p.token);
}

/* DeleteObjects' per-key errors. */
typedef struct {
    rn_s3_key_error *errors;
    size_t n, cap;
    int root_seen;
} delete_result;

static void on_delete_open(void *arg, const char *path) {
    delete_result *d = arg;
    if (strcmp(path, "DeleteResult") == 0) {
        d->root_seen = 1;
    } else if (strcmp(path, "DeleteResult/Error") == 0) {
        d->errors = grow(d->errors, &d->cap, d->n, sizeof *d->errors);
        d->errors[d->n++] = (rn_s3_key_error){NULL, NULL, NULL};
    }
}

static void set_once(const char **field, const char *text, size_t len) {
    if (!*field)
        *field = rn_xstrndup(text, len);
}

static void on_delete_text(void *arg, const char *path, const char *text, size_t len) {
    delete_result *d = arg;
    rn_s3_key_error *e = d->n ? &d->errors[d->n - 1] : NULL;
    if (!e || strncmp(path, "DeleteResult/Error/", 19) != 0)
        return;
    if (strcmp(path + 19, "Key") == 0)
        set_once(&e->key, text, len);
    else if (strcmp(path + 19, "Code") == 0)
        set_once(&e->code, text, len);
    else if (strcmp(path + 19, "Message") == 0)
        set_once(&e->message, text, len);
}

static void read_delete_many(rn_s3_call *c, const rn_fetch_result *fr, rn_s3_result *r) {
    delete_result d = {0};
    char summary[96];
    if (ok(r)) {
        rn_s3_xml_handler h = {.open = on_delete_open, .text = on_delete_text, .arg = &d};
        if (rn_s3_xml_parse(fr->body, fr->body_len, &h) != 0 || !d.root_seen) {
            s3_fail(r, RN_S3_FAILED, "BadResponse", "the answer is not a DeleteResult");
        } else if (d.n) {
            rn_s3_outcome worst = RN_S3_RETRY;
            for (size_t i = 0; i < d.n; i++) {
                if (!d.errors[i].code)
                    d.errors[i].code = rn_xstrdup("");
                if (!d.errors[i].key)
                    d.errors[i].key = rn_xstrdup("");
                if (!d.errors[i].message)
                    d.errors[i].message = rn_xstrdup("");
                if (s3_outcome_of_code(d.errors[i].code) == RN_S3_FAILED)
                    worst = RN_S3_FAILED;
            }
            snprintf(summary, sizeof summary, "%zu keys were not deleted", d.n);
            s3_fail(r, worst, d.errors[0].code, summary);
            r->key_errors = d.errors;
            r->nkey_errors = d.n;
        }
    }
    s3_deliver(c, r);
    for (size_t i = 0; i < d.n; i++) {
        free((char *)d.errors[i].key);
        free((char *)d.errors[i].code);
        free((char *)d.errors[i].message);
    }
    free(d.errors);
}

/* ---- the calls ---- */

static rn_s3_call *submitted(rn_s3_call *c) {
    if (c)
        s3_submit(c);
    return c;
}

static void add_part_query(rn_s3_call *c, uint32_t number, const char *upload_id) {
    assert(number >= 1 && number <= 10000 && upload_id && *upload_id);
    char n[16];
    snprintf(n, sizeof n, "%" PRIu32, number);
    s3_add_query(c, "partNumber", n);
    s3_add_query(c, "uploadId", upload_id);
}

static void set_body(rn_s3_call *c, rn_s3_source body) {
    assert(body.data || body.fd >= 0 || body.len == 0);
    c->body = body;
}

rn_s3_call *rn_s3_put(rn_s3 *s3, const char *key, rn_s3_source body, rn_s3_fn fn, void *arg) {
    rn_s3_call *c = s3_call_new(s3, "PutObject", "PUT", key, read_etag, fn, arg);
    if (c) {
        set_body(c, body);
        s3_add_header(c, "Content-Type", "application/octet-stream");
    }
    return submitted(c);
}

rn_s3_call *rn_s3_get(rn_s3 *s3, const char *key, uint64_t offset, uint64_t len, rn_s3_sink sink,
                      rn_s3_fn fn, void *arg) {
    assert(len >= 1 && offset + len > offset && (sink.into || sink.fd >= 0));
    rn_s3_call *c = s3_call_new(s3, "GetObject", "GET", key, read_get, fn, arg);
    if (c) {
        char range[64];
        snprintf(range, sizeof range, "bytes=%" PRIu64 "-%" PRIu64, offset, offset + len - 1);
        s3_add_header(c, "Range", range);
        c->sink = sink;
        c->sink_len = len;
        c->range_offset = offset;
    }
    return submitted(c);
}

rn_s3_call *rn_s3_head(rn_s3 *s3, const char *key, rn_s3_fn fn, void *arg) {
    return submitted(s3_call_new(s3, "HeadObject", "HEAD", key, read_head, fn, arg));
}

rn_s3_call *rn_s3_delete(rn_s3 *s3, const char *key, rn_s3_fn fn, void *arg) {
    return submitted(s3_call_new(s3, "DeleteObject", "DELETE", key, read_etag, fn, arg));
}

/* Sets an XML document as the body, with its Content-MD5 when asked
 * (DeleteObjects requires one). */
static void set_doc(rn_s3_call *c, int with_md5) {
    s3_add_header(c, "Content-Type", "application/xml");
    if (with_md5) {
        uint8_t md5[16];
        unsigned int n = 0;
        EVP_Digest(c->doc.data, c->doc.len, md5, &n, EVP_md5(), NULL);
        rn_buf b64 = {0};
        rn_base64_append(&b64, md5, 16);
        rn_buf_append_byte(&b64, 0);
        s3_add_header(c, "Content-MD5", (const char *)b64.data);
        rn_buf_free(&b64);
    }
}

rn_s3_call *rn_s3_delete_many(rn_s3 *s3, const char *const *keys, size_t n, rn_s3_fn fn,
                              void *arg) {
    assert(n >= 1 && n <= 1000);
    rn_s3_call *c = s3_call_new(s3, "DeleteObjects", "POST", NULL, read_delete_many, fn, arg);
    if (!c)
        return NULL;
    s3_add_query(c, "delete", NULL);
    rn_buf_append_str(&c->doc,
                      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Delete xmlns=\"" S3_XMLNS
                      "\"><Quiet>true</Quiet>");
    for (size_t i = 0; i < n; i++) {
        assert(rn_s3_key_valid(keys[i]));
        rn_buf_append_str(&c->doc, "<Object><Key>");
        rn_s3_xml_escape(&c->doc, keys[i]);
        rn_buf_append_str(&c->doc, "</Key></Object>");
    }
    rn_buf_append_str(&c->doc, "</Delete>");
    set_doc(c, 1);
    return submitted(c);
}

rn_s3_call *rn_s3_list(rn_s3 *s3, const char *prefix, const char *token, unsigned max_keys,
                       rn_s3_fn fn, void *arg) {
    assert(max_keys >= 1 && max_keys <= 1000);
    rn_s3_call *c = s3_call_new(s3, "ListObjectsV2", "GET", NULL, read_list, fn, arg);
    if (!c)
        return NULL;
    char n[16];
    snprintf(n, sizeof n, "%u", max_keys);
    s3_add_query(c, "list-type", "2");
    s3_add_query(c, "max-keys", n);
    if (prefix && *prefix)
        s3_add_query(c, "prefix", prefix);
    if (token && *token)
        s3_add_query(c, "continuation-token", token);
    return submitted(c);
}

rn_s3_call *rn_s3_mpu_create(rn_s3 *s3, const char *key, rn_s3_fn fn, void *arg) {
    rn_s3_call *c = s3_call_new(s3, "CreateMultipartUpload", "POST", key, read_create, fn, arg);
    if (c) {
        s3_add_query(c, "uploads", NULL);
        s3_add_header(c, "Content-Type", "application/octet-stream");
    }
    return submitted(c);
}

rn_s3_call *rn_s3_mpu_part(rn_s3 *s3, const char *key, const char *upload_id, uint32_t number,
                           rn_s3_source body, rn_s3_fn fn, void *arg) {
    rn_s3_call *c = s3_call_new(s3, "UploadPart", "PUT", key, read_etag, fn, arg);
    if (c) {
        add_part_query(c, number, upload_id);
        set_body(c, body);
    }
    return submitted(c);
}

rn_s3_call *rn_s3_mpu_part_copy(rn_s3 *s3, const char *key, const char *upload_id, uint32_t number,
                                const char *src_key, uint64_t offset, uint64_t len, rn_s3_fn fn,
                                void *arg) {
    assert(len >= 1 && rn_s3_key_valid(src_key));
    rn_s3_call *c = s3_call_new(s3, "UploadPartCopy", "PUT", key, read_copy, fn, arg);
    if (!c)
        return NULL;
    add_part_query(c, number, upload_id);
    c->copy_len = len;
    rn_buf source = {0};
    rn_buf_appendf(&source, "/%s/", s3->bucket);
    rn_sigv4_encode(&source, src_key, strlen(src_key), 1);
    rn_buf_append_byte(&source, 0);
    s3_add_header(c, "x-amz-copy-source", (const char *)source.data);
    rn_buf_free(&source);
    char range[64];
    snprintf(range, sizeof range, "bytes=%" PRIu64 "-%" PRIu64, offset, offset + len - 1);
    s3_add_header(c, "x-amz-copy-source-range", range);
    return submitted(c);
}

rn_s3_call *rn_s3_mpu_complete(rn_s3 *s3, const char *key, const char *upload_id,
                               const rn_s3_part *parts, size_t n, rn_s3_fn fn, void *arg) {
    assert(n >= 1 && n <= 10000 && upload_id && *upload_id);
    rn_s3_call *c = s3_call_new(s3, "CompleteMultipartUpload", "POST", key, read_complete, fn, arg);
    if (!c)
        return NULL;
    s3_add_query(c, "uploadId", upload_id);
    rn_buf_append_str(&c->doc, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
                               "<CompleteMultipartUpload xmlns=\"" S3_XMLNS "\">");
    for (size_t i = 0; i < n; i++) {
        rn_buf_appendf(&c->doc, "<Part><PartNumber>%" PRIu32 "</PartNumber><ETag>",
                       parts[i].number);
        rn_s3_xml_escape(&c->doc, parts[i].etag);
        rn_buf_append_str(&c->doc, "</ETag></Part>");
    }
    rn_buf_append_str(&c->doc, "</CompleteMultipartUpload>");
    set_doc(c, 0);
    return submitted(c);
}

rn_s3_call *rn_s3_mpu_abort(rn_s3 *s3, const char *key, const char *upload_id, rn_s3_fn fn,
                            void *arg) {
    assert(upload_id && *upload_id);
    rn_s3_call *c = s3_call_new(s3, "AbortMultipartUpload", "DELETE", key, read_etag, fn, arg);
    if (c)
        s3_add_query(c, "uploadId", upload_id);
    return submitted(c);
}
