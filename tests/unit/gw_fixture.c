/*
 * gw_fixture.c - what the gateway's unit tests share. See gw_fixture.h.
 */
#include "gw_fixture.h"

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tmpdir.h"

char gw_dir[512];

int gw_make_dir(void **state) {
    (void)state;
    const char *base = getenv("TMPDIR");
    int n = snprintf(gw_dir, sizeof gw_dir, "%s/runnel-gw-XXXXXX", base && *base ? base : "/tmp");
    return n > 0 && (size_t)n < sizeof gw_dir && mkdtemp(gw_dir) ? 0 : -1;
}

int gw_remove_dir(void **state) {
    (void)state;
    rm_tree(gw_dir);
    return 0;
}

void gw_write(const char *dir, const char *name, const char *text, char *path, size_t cap) {
    int n = snprintf(path, cap, "%s/%s", dir, name);
    assert_true(n > 0 && (size_t)n < cap);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(text, 1, strlen(text), f), strlen(text));
    assert_int_equal(fclose(f), 0);
}

char *gw_read(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 4096, len = 0;
    char *text = malloc(cap);
    assert_non_null(text);
    size_t got;
    while ((got = fread(text + len, 1, cap - len - 1, f)) > 0) {
        len += got;
        if (cap - len == 1) {
            cap *= 2;
            char *grown = realloc(text, cap);
            assert_non_null(grown);
            text = grown;
        }
    }
    fclose(f);
    text[len] = '\0';
    return text;
}

void gw_sha256(const char *s, unsigned char out[32]) {
    unsigned int n = 0;
    assert_int_equal(EVP_Digest(s, strlen(s), out, &n, EVP_sha256(), NULL), 1);
    assert_int_equal(n, 32);
}

void gw_sha256_hex(const char *s, char out[65]) {
    unsigned char d[32];
    gw_sha256(s, d);
    for (int i = 0; i < 32; i++)
        snprintf(out + 2 * i, 3, "%02x", d[i]);
}
