/*
 * gw_fixture.h - what the gateway's unit tests share: a temporary
 * directory, writing and reading whole files, and the SHA-256 of a key in
 * lowercase hex, as the tenants file keeps it.
 */
#ifndef RN_TEST_GW_FIXTURE_H
#define RN_TEST_GW_FIXTURE_H

#include <stddef.h>

/* The group's directory: gw_make_dir (a cmocka group setup) makes a fresh
 * one under $TMPDIR (or /tmp) and names it in gw_dir; gw_remove_dir (the
 * group teardown) removes it with everything in it. */
extern char gw_dir[512];
int gw_make_dir(void **state);
int gw_remove_dir(void **state);
/* Writes text to dir/name (replacing it) and its path to path (cap bytes). */
void gw_write(const char *dir, const char *name, const char *text, char *path, size_t cap);
/* The whole file at path, NUL-terminated (free it), or NULL when absent. */
char *gw_read(const char *path);
/* The SHA-256 of s in 64 lowercase hex digits and a NUL. */
void gw_sha256_hex(const char *s, char out[65]);
/* The SHA-256 of s, raw. */
void gw_sha256(const char *s, unsigned char out[32]);

#endif
