/*
 * coldstore.h — the cold store's backend named by the settings
 * (--cold-store and the --s3-* options).
 */
#ifndef RN_OPS_COLDSTORE_H
#define RN_OPS_COLDSTORE_H

#include <stddef.h>
#include <uv.h>

#include "ops/config.h"
#include "tiers/store.h"

/* *out: the S3 store for --cold-store=s3 (the caller hands it to the tiers
 * as rn_tiers_config.cold_backend), else NULL (the tiers make the local
 * directory, or keep no cold store). Returns 0, or -1 with the reason in
 * err (a missing bucket or credentials, a bad endpoint; no secret). */
int rn_cold_backend_open(uv_loop_t *loop, const rn_config *cfg, rn_store **out, char *err,
                         size_t errcap);

#endif
