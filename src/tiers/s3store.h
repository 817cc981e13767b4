/*
 * s3store.h — the S3 backend of the store seam (store.h): objects of the
 * cold store kept in an S3 bucket under a prefix, reached through the S3
 * client (s3/s3.h). Its operations answer later, on the loop thread, and
 * are made only there (the store is `network`, see store.h).
 *
 * Every S3 call is tried up to `attempts` times with backoff while the
 * client calls its answer RETRY, and all its tries together end within
 * the bound of one: the client's timeout plus its payload at the client's
 * least rate (s3.h). How failures come back: -EAGAIN when the store is
 * slow or saturated (503 SlowDown, 429, no answer within the bound, or the
 * client's queue full: the caller answers 503 COLD_BACKPRESSURE), -ENOENT
 * for a missing object, -EIO when it failed or could not be reached (5xx,
 * a refused or cut connection), -EPERM when it refuses the request as
 * asked (403 and other 4xx, 501, a certificate that fails verification:
 * no retry helps until the configuration changes). The last failure in the
 * store's words: the store's `why`.
 *
 * Ownership (`owner`, the deployment's cluster id): the store's prefix
 * belongs to one deployment, named by the object OWNER_KEY under it (the
 * cluster id and a newline). The nodes of one cluster share a prefix (one
 * cluster id); two deployments never do, so neither overwrites nor
 * removes the other's objects: the store's `claim` writes or confirms the
 * owner object (at start), and every removal (`remove`, `sweep`) reads it
 * first and removes nothing unless it still names this deployment. Once a
 * check found another owner, every write and removal fails -EPERM.
 */
#ifndef RN_TIERS_S3STORE_H
#define RN_TIERS_S3STORE_H

#include "tiers/s3/s3.h"
#include "tiers/store.h"

typedef struct {
    rn_s3_config s3;     /* the client's configuration (credentials included) */
    const char *prefix;  /* prepended to every key ("" or ending in "/") */
    const char *tmp_dir; /* where ranged reads land (a temporary file each) */
    uint64_t part_bytes; /* objects larger are written as multipart uploads of
                            parts this large (>= 5 MiB, S3's least part) */
    uint32_t attempts;   /* tries of a call that may succeed later (>= 1) */
    const char *owner;   /* the deployment's cluster id (1-64 of [A-Za-z0-9._-]);
                            NULL: no owner object (a backup destination) */
} rn_s3store_config;

#define RN_S3STORE_OWNER_KEY "runnel-owner" /* under the prefix */

/* Fills the defaults: 8 MiB parts, 4 attempts, prefix "". */
void rn_s3store_config_defaults(rn_s3store_config *cfg);

/* The S3 store, or NULL with the reason in err (no credential in it).
 * The strings are copied. Stop it (ops->stop) and run the loop before
 * ops->close. */
rn_store *rn_s3store_open(uv_loop_t *loop, const rn_s3store_config *cfg, char *err, size_t errcap);

#endif
