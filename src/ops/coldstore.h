/*
 * coldstore.h — the S3 backends named by the settings: the cold store's
 * (--cold-store and the --s3-* options), and any other S3 prefix (backups).
 */
#ifndef RN_OPS_COLDSTORE_H
#define RN_OPS_COLDSTORE_H

#include <stddef.h>
#include <uv.h>

#include "ops/config.h"
#include "tiers/store.h"

/* *out: the S3 store for --cold-store=s3 (the caller hands it to the tiers
 * as rn_tiers_config.cold_backend), owned by the deployment whose cluster
 * id is owner (tiers/s3store.h), else NULL (the tiers make the local
 * directory, or keep no cold store). Returns 0, or -1 with the reason in
 * err (a missing bucket, region or credentials, a bad endpoint; no
 * secret). */
int rn_cold_backend_open(uv_loop_t *loop, const rn_config *cfg, const char *owner, rn_store **out,
                         char *err, size_t errcap);

/* *out: an S3 store over the --s3-* settings (bucket, endpoint, region,
 * addressing, timeouts; credentials from the AWS environment and files)
 * with every key under prefix ("" or ending in "/"), owned by the
 * deployment whose cluster id is owner (NULL: no owner object); its reads
 * are staged in <data>/cold-reads. Returns 0, or -1 with the reason in
 * err, which names the store as `what` (never a secret). */
int rn_s3_backend_open(uv_loop_t *loop, const rn_config *cfg, const char *what, const char *prefix,
                       const char *owner, rn_store **out, char *err, size_t errcap);

#endif
