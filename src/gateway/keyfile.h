/*
 * keyfile.h — `runnel gateway key new`: a new API key added to a tenants
 * file (the tenant created when new, its rights replaced), the file
 * rewritten atomically, the key returned once to be printed. The file keeps
 * only the key's SHA-256.
 */
#ifndef RN_GATEWAY_KEYFILE_H
#define RN_GATEWAY_KEYFILE_H

#include <stddef.h>

#define RN_API_KEY_LEN 68 /* "rnk_" and 64 hex digits */

/* Adds a key for tenant with rights (a spec: "orders:rw,audit:r") and an
 * optional expiry (RFC 3339, NULL: none) to the tenants file at path
 * (created when missing), and writes the key to key (RN_API_KEY_LEN + 1
 * bytes). Returns 0, or -1 with why in err (the file is unchanged). */
int rn_keyfile_add(const char *path, const char *tenant, const char *rights, const char *expires,
                   char key[RN_API_KEY_LEN + 1], char *err, size_t cap);

#endif
