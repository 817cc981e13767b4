/*
 * coldstore.c — the cold store's backend the server hands the tiers, from
 * the settings: none, the local directory (the tiers make it), or the S3
 * store (tiers/s3store.h) with credentials and region from the AWS
 * environment and files. No credential is ever logged or put in err.
 *
 * A region is required, never guessed: requests are signed for it, and
 * without an endpoint it names the endpoint too. The old default,
 * us-east-1, signed silently for a region the bucket may not be in, whose
 * refusal (or redirect) came much later and further from its cause.
 */
#include "ops/coldstore.h"
#include "tiers/s3/creds.h"
#include "tiers/s3store.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

int rn_s3_backend_open(uv_loop_t *loop, const rn_config *cfg, const char *what, const char *prefix,
                       const char *owner, rn_store **out, char *err, size_t errcap) {
    *out = NULL;
    if (!cfg->s3_bucket[0]) {
        snprintf(err, errcap, "%s needs --s3-bucket", what);
        return -1;
    }
    char *env_region = cfg->s3_region[0] ? NULL : rn_s3_region_from_env();
    if (!cfg->s3_region[0] && !env_region) {
        snprintf(err, errcap,
                 "%s needs a region, which its requests are signed for: --s3-region, "
                 "AWS_REGION, AWS_DEFAULT_REGION or the profile's region in the AWS config file "
                 "(an S3-compatible store takes the one it is configured with, often us-east-1)",
                 what);
        return -1;
    }
    rn_s3_creds creds = {0};
    char why[256];
    if (rn_s3_creds_load(&creds, why, sizeof why) != 0) {
        snprintf(err, errcap, "%s has no credentials: %s", what, why);
        free(env_region);
        return -1;
    }
    char tmp[sizeof cfg->data_dir + 16];
    snprintf(tmp, sizeof tmp, "%s/cold-reads", cfg->data_dir);
    mkdir(tmp, 0700);
    rn_s3store_config sc;
    rn_s3store_config_defaults(&sc);
    sc.s3.endpoint = cfg->s3_endpoint[0] ? cfg->s3_endpoint : NULL;
    sc.s3.bucket = cfg->s3_bucket;
    sc.s3.region = cfg->s3_region[0] ? cfg->s3_region : env_region;
    sc.s3.virtual_host = cfg->s3_virtual_host;
    sc.s3.access_key = creds.access_key;
    sc.s3.secret_key = creds.secret_key;
    sc.s3.session_token = creds.session_token;
    sc.s3.timeout_ms = cfg->s3_timeout_ms;
    sc.s3.user_agent = "runnel";
    sc.prefix = prefix;
    sc.owner = owner;
    sc.tmp_dir = tmp;
    sc.part_bytes = cfg->s3_part_bytes;
    char why_s3[256];
    *out = rn_s3store_open(loop, &sc, why_s3, sizeof why_s3);
    rn_s3_creds_clear(&creds);
    free(env_region);
    if (!*out) {
        snprintf(err, errcap, "%s: %s", what, why_s3);
        return -1;
    }
    return 0;
}

int rn_cold_backend_open(uv_loop_t *loop, const rn_config *cfg, const char *owner, rn_store **out,
                         char *err, size_t errcap) {
    *out = NULL;
    if (cfg->cold_store != RN_COLD_S3)
        return 0;
    if (!cfg->s3_bucket[0]) {
        snprintf(err, errcap, "--cold-store=s3 needs --s3-bucket");
        return -1;
    }
    return rn_s3_backend_open(loop, cfg, "the S3 cold store", cfg->s3_prefix, owner, out, err,
                              errcap);
}
