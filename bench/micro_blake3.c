/*
 * micro_blake3.c — `runnel-micro-blake3`: throughput of BLAKE3
 * (src/util/blake3.h: rn_blake3_init + rn_blake3_update + rn_blake3_final)
 * per code path, forced with rn_blake3_set_impl: auto (the choice the
 * server makes), portable, sse41, avx2 (paths this CPU lacks are reported
 * as unsupported).
 *
 * Inputs (deterministic bytes):
 *   1m        a 1 MiB input in one update
 *   64k       a 64 KiB input in one update
 *   1m_in_4k  a 1 MiB input in 4 KiB updates (a body hashed as it arrives)
 * Each is hashed repeatedly for --seconds (default 1) and reported as MB/s
 * (10^6 bytes of input per second). The digests of every path must agree,
 * and the empty input's digest must be the specification's; otherwise the
 * tool exits 1.
 * Usage: runnel-micro-blake3 [--seconds S] [--json]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "util/blake3.h"
#include "util/buf.h"

static const struct {
    const char *name;
    rn_blake3_impl impl;
} PATHS[] = {{"auto", RN_BLAKE3_AUTO},
             {"portable", RN_BLAKE3_PORTABLE},
             {"sse41", RN_BLAKE3_SSE41},
             {"avx2", RN_BLAKE3_AVX2}};
#define N_PATHS 4

static const struct {
    const char *name;
    size_t len, piece;
} INPUTS[] = {
    {"1m", 1u << 20, 1u << 20}, {"64k", 64u << 10, 64u << 10}, {"1m_in_4k", 1u << 20, 4096}};
#define N_INPUTS 3

static void hash(const uint8_t *in, size_t len, size_t piece, uint8_t out[32]) {
    rn_blake3 h;
    rn_blake3_init(&h);
    for (size_t off = 0; off < len; off += piece)
        rn_blake3_update(&h, in + off, len - off < piece ? len - off : piece);
    rn_blake3_final(&h, out);
}

int main(int argc, char **argv) {
    double seconds = 1;
    int json = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0)
            json = 1;
        else if (strcmp(argv[i], "--seconds") == 0 && i + 1 < argc)
            seconds = atof(argv[++i]);
        else {
            fprintf(stderr, "usage: runnel-micro-blake3 [--seconds S] [--json]\n");
            return 2;
        }
    }
    uint8_t *in = rn_xmalloc(1u << 20);
    uint32_t x = 12345;
    for (size_t k = 0; k < (1u << 20); k++) {
        x = x * 1103515245u + 12345u;
        in[k] = (uint8_t)(x >> 16);
    }
    /* BLAKE3("") from the specification's test vectors. */
    static const char EMPTY[] = "af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262";
    uint8_t ref[N_INPUTS][32];
    int have_ref = 0, bad = 0;
    if (json)
        printf("{");
    for (int p = 0; p < N_PATHS; p++) {
        int ok = rn_blake3_set_impl(PATHS[p].impl) == 0;
        if (json)
            printf("%s\"%s\":", p ? "," : "", PATHS[p].name);
        if (!ok) {
            if (json)
                printf("null");
            else
                printf("%-9s not supported by this CPU or build\n", PATHS[p].name);
            continue;
        }
        uint8_t d[32];
        char hex[65];
        hash(in, 0, 1, d);
        rn_blake3_hex(d, hex);
        if (strcmp(hex, EMPTY) != 0) {
            fprintf(stderr, "runnel-micro-blake3: %s: wrong digest of the empty input\n",
                    PATHS[p].name);
            bad = 1;
        }
        if (json)
            printf("{\"impl\":\"%s\"", rn_blake3_impl_name());
        for (int k = 0; k < N_INPUTS; k++) {
            hash(in, INPUTS[k].len, INPUTS[k].piece, d);
            if (!have_ref)
                memcpy(ref[k], d, 32);
            else if (memcmp(ref[k], d, 32) != 0) {
                fprintf(stderr, "runnel-micro-blake3: %s: digest of %s differs from the %s path\n",
                        PATHS[p].name, INPUTS[k].name, PATHS[0].name);
                bad = 1;
            }
            uint64_t iters = 0, t0 = uv_hrtime(), t = t0;
            while ((double)(t - t0) / 1e9 < seconds) {
                for (int r = 0; r < 8; r++)
                    hash(in, INPUTS[k].len, INPUTS[k].piece, d);
                iters += 8;
                t = uv_hrtime();
            }
            double mbps = (double)INPUTS[k].len * (double)iters / 1e6 / ((double)(t - t0) / 1e9);
            if (json)
                printf(",\"%s_mb_per_s\":%.1f", INPUTS[k].name, mbps);
            else
                printf("%-9s (%s) %-9s %9.1f MB/s\n", PATHS[p].name, rn_blake3_impl_name(),
                       INPUTS[k].name, mbps);
        }
        have_ref = 1;
        if (json)
            printf("}");
    }
    if (json)
        printf("}\n");
    rn_blake3_set_impl(RN_BLAKE3_AUTO);
    free(in);
    return bad;
}
