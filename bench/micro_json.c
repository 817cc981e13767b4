/*
 * micro_json.c — `runnel-micro-json`: throughput of rn_json_to_messages()
 * (src/util/json_text.h), the validator/minifier every JSON append passes.
 *
 * Three generated inputs, each validated repeatedly for --seconds (default
 * 2) and reported as MB/s of input (10^6 bytes) and messages/s:
 *   small    1 KiB bodies: arrays of ten ~100 B objects (typical small appends)
 *   objects  a 1 MiB array of typical objects (nested, numbers, escapes, UTF-8)
 *   strings  a 1 MiB array of 64 KiB strings (long string scanning)
 * Inputs are deterministic (a fixed LCG), so runs are comparable.
 * Usage: runnel-micro-json [--seconds S] [--json]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "util/buf.h"
#include "util/json_text.h"

static uint32_t lcg = 12345;
static uint32_t rnd(uint32_t n) {
    lcg = lcg * 1103515245u + 12345u;
    return (lcg >> 8) % n;
}

/* One ~100 B object. */
static void small_object(rn_buf *b, int i) {
    rn_buf_appendf(b,
                   "{\"id\":%d,\"type\":\"update\",\"user\":\"u%04u\",\"v\":%u.%02u,\"ok\":%s,"
                   "\"text\":\"the quick brown fox %u\"}",
                   i, rnd(10000), rnd(1000), rnd(100), rnd(2) ? "true" : "false", rnd(1000));
}

/* A typical object: nesting, a string with escapes and multi-byte UTF-8. */
static void typical_object(rn_buf *b, int i) {
    rn_buf_appendf(b,
                   "{\n  \"id\": %d, \"kind\": \"order\", \"amount\": %u.%02u, \"tags\": "
                   "[\"a\", \"b\", \"c%u\"],\n  \"customer\": {\"name\": \"Jos\\u00e9 "
                   "Garc\xc3\xad"
                   "a\", \"city\": \"M\xc3\xbcnchen\", \"note\": \"line\\nbreak \\\"q\\\" "
                   "\xe2\x82\xac\"},\n  \"items\": [{\"sku\": %u, \"qty\": %u}, {\"sku\": %u, "
                   "\"qty\": %u}], \"paid\": %s, \"ref\": null}",
                   i, rnd(100000), rnd(100), rnd(100), rnd(1000000), rnd(10), rnd(1000000), rnd(10),
                   rnd(2) ? "true" : "false");
}

static void long_string(rn_buf *b, size_t n) {
    rn_buf_append_byte(b, '"');
    for (size_t k = 0; k < n; k++) {
        uint32_t r = rnd(100);
        if (r == 0)
            rn_buf_append_str(b, "\\n");
        else if (r == 1)
            rn_buf_append_str(b, "\xc3\xa9");
        else
            rn_buf_append_byte(b, (uint8_t)('a' + rnd(26)));
    }
    rn_buf_append_byte(b, '"');
}

typedef struct {
    const char *name;
    rn_buf in;
} input;

static void build(input *small, input *objects, input *strings) {
    rn_buf_append_byte(&small->in, '[');
    for (int i = 0; i < 10; i++) {
        if (i)
            rn_buf_append_byte(&small->in, ',');
        small_object(&small->in, i);
    }
    rn_buf_append_byte(&small->in, ']');
    rn_buf_append_byte(&objects->in, '[');
    for (int i = 0; objects->in.len < (1u << 20) - 600; i++) {
        if (i)
            rn_buf_append_str(&objects->in, ",\n");
        typical_object(&objects->in, i);
    }
    rn_buf_append_byte(&objects->in, ']');
    rn_buf_append_byte(&strings->in, '[');
    for (int i = 0; i < 15; i++) {
        if (i)
            rn_buf_append_byte(&strings->in, ',');
        long_string(&strings->in, 64 * 1024);
    }
    rn_buf_append_byte(&strings->in, ']');
}

/* Validates `in` repeatedly for `seconds`; prints one result. */
static void measure(const input *in, double seconds, int json, int first) {
    uint8_t *out = rn_xmalloc(in->in.len + 1);
    uint64_t iters = 0, msgs = 0;
    uint64_t t0 = uv_hrtime(), t = t0;
    while ((double)(t - t0) / 1e9 < seconds) {
        for (int k = 0; k < 16; k++) {
            size_t out_len, n;
            rn_json_status st =
                rn_json_to_messages(in->in.data, in->in.len, out, &out_len, &n, NULL);
            if (st != RN_JSON_OK) {
                fprintf(stderr, "runnel-micro-json: %s input rejected: %s\n", in->name,
                        rn_json_status_name(st));
                exit(1);
            }
            msgs += n;
        }
        iters += 16;
        t = uv_hrtime();
    }
    double secs = (double)(t - t0) / 1e9;
    double mbps = (double)in->in.len * (double)iters / 1e6 / secs;
    if (json)
        printf("%s\"%s\":{\"input_bytes\":%zu,\"mb_per_s\":%.1f,\"messages_per_s\":%.0f}",
               first ? "" : ",", in->name, in->in.len, mbps, (double)msgs / secs);
    else
        printf("%-8s input %8zu B  %8.1f MB/s  %12.0f messages/s\n", in->name, in->in.len, mbps,
               (double)msgs / secs);
    free(out);
}

int main(int argc, char **argv) {
    double seconds = 2;
    int json = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0)
            json = 1;
        else if (strcmp(argv[i], "--seconds") == 0 && i + 1 < argc)
            seconds = atof(argv[++i]);
        else {
            fprintf(stderr, "usage: runnel-micro-json [--seconds S] [--json]\n");
            return 2;
        }
    }
    input small = {"small", {0}}, objects = {"objects", {0}}, strings = {"strings", {0}};
    build(&small, &objects, &strings);
    if (json)
        printf("{");
    measure(&small, seconds, json, 1);
    measure(&objects, seconds, json, 0);
    measure(&strings, seconds, json, 0);
    if (json)
        printf("}\n");
    return 0;
}
