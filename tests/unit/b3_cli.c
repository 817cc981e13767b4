/*
 * b3_cli.c - runnel-b3, a test-only BLAKE3 command line tool.
 *
 * Owns: a thin CLI over src/util/blake3.h so scripts can compare Runnel's
 * BLAKE3 with the reference b3sum (tests/unit/blake3_vs_b3sum.sh). Prints the
 * lowercase hex digest of FILE (or of standard input for "-" or no FILE), one
 * line, like `b3sum --no-names`. Reads in pieces of -p BYTES (default 65536)
 * so the incremental path is exercised with any split; -l LEN prints LEN bytes
 * of extended output instead of the 32-byte digest; -i forces a code path
 * (portable, sse41, avx2).
 *
 * usage: runnel-b3 [-p BYTES] [-l LEN] [-i IMPL] [FILE|-]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/blake3.h"

static int usage(void) {
    fprintf(stderr, "usage: runnel-b3 [-p BYTES] [-l LEN] [-i portable|sse41|avx2] [FILE|-]\n");
    return 2;
}

int main(int argc, char **argv) {
    size_t piece = 65536, out_len = 32;
    const char *path = "-";
    int i = 1;
    for (; i < argc && argv[i][0] == '-' && argv[i][1] != '\0'; i++) {
        if (i + 1 >= argc)
            return usage();
        if (strcmp(argv[i], "-p") == 0) {
            piece = strtoul(argv[++i], NULL, 10);
        } else if (strcmp(argv[i], "-l") == 0) {
            out_len = strtoul(argv[++i], NULL, 10);
        } else if (strcmp(argv[i], "-i") == 0) {
            const char *name = argv[++i];
            rn_blake3_impl impl = strcmp(name, "portable") == 0 ? RN_BLAKE3_PORTABLE
                                  : strcmp(name, "sse41") == 0  ? RN_BLAKE3_SSE41
                                  : strcmp(name, "avx2") == 0   ? RN_BLAKE3_AVX2
                                                                : (rn_blake3_impl)-1;
            if (rn_blake3_set_impl(impl) != 0) {
                fprintf(stderr, "runnel-b3: code path %s unavailable\n", name);
                return 2;
            }
        } else {
            return usage();
        }
    }
    if (i < argc)
        path = argv[i++];
    if (i != argc || piece == 0 || out_len == 0 || out_len > (1u << 20))
        return usage();

    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
    if (!f) {
        perror(path);
        return 1;
    }
    uint8_t *buf = malloc(piece);
    uint8_t *out = malloc(out_len);
    char *hex = malloc(2 * out_len + 1);
    if (!buf || !out || !hex) {
        fprintf(stderr, "runnel-b3: out of memory\n");
        return 1;
    }
    rn_blake3 h;
    rn_blake3_init(&h);
    size_t n;
    while ((n = fread(buf, 1, piece, f)) > 0)
        rn_blake3_update(&h, buf, n);
    if (ferror(f)) {
        perror(path);
        return 1;
    }
    if (f != stdin)
        fclose(f);
    rn_blake3_final_xof(&h, out, out_len);
    static const char digits[] = "0123456789abcdef";
    for (size_t k = 0; k < out_len; k++) {
        hex[2 * k] = digits[out[k] >> 4];
        hex[2 * k + 1] = digits[out[k] & 15];
    }
    hex[2 * out_len] = '\0';
    puts(hex);
    free(buf);
    free(out);
    free(hex);
    return 0;
}
