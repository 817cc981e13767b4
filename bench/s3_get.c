/*
 * s3_get.c - runnel-s3-bench: ranged-GET throughput of the S3 client
 * (src/tiers/s3/s3.h), for comparison with curl on the same endpoint
 * (bench/s3_get.sh runs both).
 *
 * With --put it first stores an object of --object-mib MiB (a fixed
 * pattern) under --key. Then it reads the object --passes times in ranges
 * of --range-mib MiB, --concurrency ranges at a time, into memory or (with
 * --to-file) into a file, checks every byte against the pattern and prints
 * one JSON line: {"mib", "seconds", "mib_per_s", "concurrency", "sink"}.
 * Credentials and region come from the AWS_* environment.
 *
 * usage: runnel-s3-bench --endpoint URL --bucket B --key K [--put]
 *        [--object-mib 64] [--range-mib 4] [--passes 4] [--concurrency 1]
 *        [--to-file DIR]
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

#include "tiers/s3/creds.h"
#include "tiers/s3/s3.h"
#include "util/clock.h"

typedef struct {
    rn_s3 *s3;
    const char *key;
    const uint8_t *want;
    uint64_t object, range, next, end; /* next byte to ask for, of `end` in all */
    uint8_t **bufs;
    int fd;
    int running, failed;
} bench;

typedef struct {
    bench *b;
    int slot;
    uint64_t offset; /* within the object */
} slot_call;

static void start_next(bench *b, slot_call *s);

static void on_got(void *arg, const rn_s3_result *r) {
    slot_call *s = arg;
    bench *b = s->b;
    b->running--;
    uint64_t len = b->range < b->object - s->offset ? b->range : b->object - s->offset;
    if (r->outcome != RN_S3_OK || r->length != len) {
        fprintf(stderr, "GET failed: %s %s %s\n", rn_s3_outcome_name(r->outcome), r->code,
                r->message);
        b->failed = 1;
        return;
    }
    const uint8_t *got = b->bufs[s->slot];
    if (b->fd >= 0) {
        if (pread(b->fd, b->bufs[s->slot], len, (off_t)(s->slot * b->range)) != (ssize_t)len)
            b->failed = 1;
    }
    if (memcmp(got, b->want + s->offset, len) != 0) {
        fprintf(stderr, "GET returned other bytes at %llu\n", (unsigned long long)s->offset);
        b->failed = 1;
        return;
    }
    start_next(b, s);
}

static void start_next(bench *b, slot_call *s) {
    if (b->failed || b->next >= b->end)
        return;
    s->offset = b->next % b->object;
    uint64_t len = b->range < b->object - s->offset ? b->range : b->object - s->offset;
    b->next += len;
    rn_s3_sink sink = b->fd >= 0 ? rn_s3_to_file(b->fd, (uint64_t)s->slot * b->range)
                                 : rn_s3_into(b->bufs[s->slot]);
    if (!rn_s3_get(b->s3, b->key, s->offset, len, sink, on_got, s)) {
        b->failed = 1;
        return;
    }
    b->running++;
}

static void on_put(void *arg, const rn_s3_result *r) {
    int *ok = arg;
    *ok = r->outcome == RN_S3_OK ? 1 : -1;
    if (*ok < 0)
        fprintf(stderr, "PUT failed: %s %s\n", r->code, r->message);
}

static int usage(void) {
    fprintf(stderr, "usage: runnel-s3-bench --endpoint URL --bucket B --key K [--put] "
                    "[--object-mib N] [--range-mib N] [--passes N] [--concurrency N] "
                    "[--to-file DIR]\n");
    return 2;
}

int main(int argc, char **argv) {
    const char *endpoint = NULL, *bucket = NULL, *key = NULL, *file_dir = NULL;
    int put = 0, concurrency = 1, passes = 4;
    uint64_t object_mib = 64, range_mib = 4;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--put") == 0) {
            put = 1;
            continue;
        }
        if (!v)
            return usage();
        i++;
        if (strcmp(a, "--endpoint") == 0)
            endpoint = v;
        else if (strcmp(a, "--bucket") == 0)
            bucket = v;
        else if (strcmp(a, "--key") == 0)
            key = v;
        else if (strcmp(a, "--object-mib") == 0)
            object_mib = strtoull(v, NULL, 10);
        else if (strcmp(a, "--range-mib") == 0)
            range_mib = strtoull(v, NULL, 10);
        else if (strcmp(a, "--passes") == 0)
            passes = atoi(v);
        else if (strcmp(a, "--concurrency") == 0)
            concurrency = atoi(v);
        else if (strcmp(a, "--to-file") == 0)
            file_dir = v;
        else
            return usage();
    }
    if (!endpoint || !bucket || !key || concurrency < 1 || passes < 1 || !object_mib || !range_mib)
        return usage();
    rn_s3_creds creds = {0};
    char err[256];
    char *region = rn_s3_region_from_env();
    if (rn_s3_creds_load(&creds, err, sizeof err) != 0 || !region) {
        fprintf(stderr, "runnel-s3-bench: %s\n", region ? err : "no region (AWS_REGION)");
        return 1;
    }
    uv_loop_t loop;
    uv_loop_init(&loop);
    rn_s3_config cfg;
    rn_s3_config_defaults(&cfg);
    cfg.endpoint = endpoint;
    cfg.bucket = bucket;
    cfg.region = region;
    cfg.access_key = creds.access_key;
    cfg.secret_key = creds.secret_key;
    cfg.session_token = creds.session_token;
    cfg.max_running = (size_t)concurrency;
    bench b = {.key = key, .object = object_mib << 20, .range = range_mib << 20, .fd = -1};
    b.s3 = rn_s3_new(&loop, &cfg, err, sizeof err);
    if (!b.s3) {
        fprintf(stderr, "runnel-s3-bench: %s\n", err);
        return 1;
    }
    uint8_t *want = malloc(b.object);
    for (uint64_t i = 0; i < b.object; i++)
        want[i] = (uint8_t)(i * 2654435761u >> 13);
    b.want = want;
    if (put) {
        int ok = 0;
        rn_s3_put(b.s3, key, rn_s3_mem(want, b.object), on_put, &ok);
        while (!ok)
            uv_run(&loop, UV_RUN_ONCE);
        if (ok < 0)
            return 1;
    }
    if (file_dir) {
        char path[512];
        snprintf(path, sizeof path, "%s/runnel-s3-bench-XXXXXX", file_dir);
        b.fd = mkstemp(path);
        unlink(path);
    }
    b.bufs = calloc((size_t)concurrency, sizeof *b.bufs);
    slot_call *slots = calloc((size_t)concurrency, sizeof *slots);
    for (int i = 0; i < concurrency; i++) {
        b.bufs[i] = malloc(b.range);
        memset(b.bufs[i], 0, b.range); /* touched before the clock starts */
        slots[i] = (slot_call){.b = &b, .slot = i};
    }
    b.end = b.object * (uint64_t)passes;
    uint64_t t0 = rn_mono_ms();
    for (int i = 0; i < concurrency; i++)
        start_next(&b, &slots[i]);
    while (b.running)
        uv_run(&loop, UV_RUN_ONCE);
    double seconds = (double)(rn_mono_ms() - t0) / 1000.0;
    double mib = (double)b.end / (1 << 20);
    if (!b.failed)
        printf("{\"mib\":%.0f,\"seconds\":%.3f,\"mib_per_s\":%.1f,\"concurrency\":%d,"
               "\"sink\":\"%s\"}\n",
               mib, seconds, mib / seconds, concurrency, b.fd >= 0 ? "file" : "memory");
    rn_s3_stop(b.s3);
    uv_run(&loop, UV_RUN_DEFAULT);
    rn_s3_free(b.s3);
    uv_loop_close(&loop);
    for (int i = 0; i < concurrency; i++)
        free(b.bufs[i]);
    free(b.bufs);
    free(slots);
    free(want);
    free(region);
    rn_s3_creds_clear(&creds);
    if (b.fd >= 0)
        close(b.fd);
    return b.failed;
}
