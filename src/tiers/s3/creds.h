/*
 * creds.h — S3 credentials and region from the standard AWS sources.
 *
 * Credentials: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (with
 * AWS_SESSION_TOKEN when set) from the environment when both are set;
 * otherwise the profile AWS_PROFILE ("default" when unset) of the shared
 * credentials file, AWS_SHARED_CREDENTIALS_FILE or ~/.aws/credentials
 * (keys aws_access_key_id, aws_secret_access_key, aws_session_token).
 * Region: AWS_REGION, else AWS_DEFAULT_REGION, else the profile's "region"
 * in AWS_CONFIG_FILE or ~/.aws/config (section [default] or
 * [profile NAME]).
 *
 * The files are INI: [section] lines, "name = value" lines, comments from
 * '#' or ';' at a line's start. (Read here rather than with libinih:
 * Debian's build of it cuts lines at 200 bytes, and session tokens are
 * longer.)
 *
 * Secrets never appear in an error message; rn_s3_creds_clear wipes them.
 */
#ifndef RN_S3_CREDS_H
#define RN_S3_CREDS_H

#include <stddef.h>

typedef struct {
    char *access_key;
    char *secret_key;
    char *session_token; /* NULL without one */
} rn_s3_creds;

/* Loads credentials into c (zeroed by the caller). Returns 0, or -1 with
 * the reason in err (which names the source but no secret). */
int rn_s3_creds_load(rn_s3_creds *c, char *err, size_t errcap);

/* Wipes and frees the strings; c becomes empty. */
void rn_s3_creds_clear(rn_s3_creds *c);

/* The region from the environment or the config file, or NULL. The caller
 * frees it. */
char *rn_s3_region_from_env(void);

#endif
