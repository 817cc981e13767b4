/*
 * s3store.h — the S3 backend of the store seam (store.h): objects of the
 * cold store kept in an S3 bucket under a prefix, reached through the S3
 * client (s3/s3.h). Its operations answer later, on the loop thread, and
 * are made only there (the store is `network`, see store.h).
 *
 * How failures come back (each after up to `attempts` tries with backoff
 * for the answers the client calls RETRY): -EAGAIN when the store is slow
 * or saturated (503 SlowDown, 429, a timeout, or the client's queue full:
 * the caller answers 503 COLD_BACKPRESSURE), -ENOENT for a missing object,
 * -EIO for any other failure (502 COLD_STORE_FAILED).
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
} rn_s3store_config;

/* Fills the defaults: 8 MiB parts, 4 attempts, prefix "". */
void rn_s3store_config_defaults(rn_s3store_config *cfg);

/* The S3 store, or NULL with the reason in err (no credential in it).
 * The strings are copied. Stop it (ops->stop) and run the loop before
 * ops->close. */
rn_store *rn_s3store_open(uv_loop_t *loop, const rn_s3store_config *cfg, char *err, size_t errcap);

#endif
