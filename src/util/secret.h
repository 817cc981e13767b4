/*
 * secret.h — secrets read from files (the admin token, the cluster key) and
 * their comparison in constant time. A secret never appears in a log line or
 * an error message: errors name the file, never its content.
 */
#ifndef RN_SECRET_H
#define RN_SECRET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define RN_SECRET_MIN 16   /* bytes a secret has at least */
#define RN_SECRET_MAX 1024 /* and at most */

typedef struct {
    uint8_t bytes[RN_SECRET_MAX];
    size_t len; /* 0: no secret configured */
} rn_secret;

/* Reads the secret in path: the file's bytes without trailing whitespace
 * (a final newline), RN_SECRET_MIN..RN_SECRET_MAX of them, none of them a
 * control character or a space. The file must be a regular file that
 * neither its group nor others may read or write (mode & 077 == 0), as
 * ssh demands of private keys. Returns 0 with *out set, or -1 with err set
 * (naming `what` and the path) and *out emptied. */
int rn_secret_load(const char *path, const char *what, rn_secret *out, char *err, size_t errcap);

/* True when the len bytes at p are exactly the secret, compared in time that
 * depends on neither's content (CRYPTO_memcmp). Precondition: s->len > 0. */
bool rn_secret_equals(const rn_secret *s, const void *p, size_t len);

/* True when the len bytes at a and b are the same, in time that does not
 * depend on their content (a MAC checked against the expected one). */
bool rn_equal_const_time(const void *a, const void *b, size_t len);

/* Overwrites the secret's bytes (at stop). */
void rn_secret_wipe(rn_secret *s);

#endif
