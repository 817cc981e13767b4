/*
 * sigv4_cli.c - runnel-sigv4, a test-only SigV4 signer on standard input.
 *
 * Owns: a thin CLI over src/tiers/s3/sigv4.h so tests/s3/sigv4_crosscheck.py
 * can compare our signatures with botocore's byte for byte. Reads one JSON
 * object per line:
 *   {"method", "path" (raw, not encoded), "query": [[name, value|null]...],
 *    "headers": [[name, value]...], "payload_hash", "amz_date",
 *    "access_key", "secret_key", "region", "service"}
 * and prints, per request, one line with the Authorization header value,
 * or, with -c, the canonical request as a JSON string.
 *
 * usage: runnel-sigv4 [-c] < requests.jsonl
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tiers/s3/sigv4.h"

static const char *str(json_t *o, const char *name) {
    const char *s = json_string_value(json_object_get(o, name));
    if (!s) {
        fprintf(stderr, "runnel-sigv4: missing \"%s\"\n", name);
        exit(2);
    }
    return s;
}

/* Reads [[name, value]...] into params (value may be null). */
static rn_sigv4_param *pairs(json_t *arr, size_t *n) {
    *n = json_array_size(arr);
    rn_sigv4_param *p = calloc(*n ? *n : 1, sizeof *p);
    for (size_t i = 0; i < *n; i++) {
        json_t *e = json_array_get(arr, i);
        p[i].name = json_string_value(json_array_get(e, 0));
        p[i].value = json_string_value(json_array_get(e, 1));
        if (!p[i].name) {
            fprintf(stderr, "runnel-sigv4: a pair without a name\n");
            exit(2);
        }
    }
    return p;
}

int main(int argc, char **argv) {
    int canonical_only = argc > 1 && strcmp(argv[1], "-c") == 0;
    char *line = NULL;
    size_t cap = 0;
    while (getline(&line, &cap, stdin) > 0) {
        json_error_t jerr;
        json_t *o = json_loads(line, 0, &jerr);
        if (!json_is_object(o)) {
            fprintf(stderr, "runnel-sigv4: bad line: %s\n", jerr.text);
            return 2;
        }
        rn_sigv4_request r = {.method = str(o, "method"),
                              .path = str(o, "path"),
                              .payload_hash = str(o, "payload_hash"),
                              .amz_date = str(o, "amz_date")};
        rn_sigv4_param *q = pairs(json_object_get(o, "query"), &r.nquery);
        rn_sigv4_param *h = pairs(json_object_get(o, "headers"), &r.nheaders);
        r.query = q;
        r.headers = h;
        rn_sigv4_identity id = {.access_key = str(o, "access_key"),
                                .secret_key = str(o, "secret_key"),
                                .region = str(o, "region"),
                                .service = str(o, "service")};
        rn_buf out = {0};
        if (canonical_only) {
            rn_sigv4_canonical_request(&r, &out);
            json_t *s = json_stringn((const char *)out.data, out.len);
            char *text = json_dumps(s, JSON_ENCODE_ANY);
            printf("%s\n", text);
            free(text);
            json_decref(s);
        } else {
            rn_sigv4_authorization(&r, &id, &out);
            printf("%.*s\n", (int)out.len, (const char *)out.data);
        }
        rn_buf_free(&out);
        free(q);
        free(h);
        json_decref(o);
    }
    free(line);
    return 0;
}
