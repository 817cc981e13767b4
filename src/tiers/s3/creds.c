/*
 * creds.c — S3 credentials and region from the AWS environment variables
 * and shared files. See creds.h.
 */
#include "tiers/s3/creds.h"
#include "util/buf.h"

#include <errno.h>
#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *section; /* the section wanted */
    const char *const *names;
    char **values; /* one per name; set when found in the section */
    size_t n;
} ini_query;

static char *trim(char *s) {
    while (*s == ' ' || *s == '\t')
        s++;
    char *e = s + strlen(s);
    while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r' || e[-1] == '\n'))
        e--;
    *e = '\0';
    return s;
}

/* Reads the wanted names of one section of an INI file. Returns 0, or
 * -errno when the file cannot be read. A later value replaces an earlier. */
static int ini_read(const char *path, ini_query *q) {
    FILE *f = fopen(path, "re");
    if (!f)
        return -errno;
    char *line = NULL;
    size_t cap = 0;
    int in_section = 0;
    while (getline(&line, &cap, f) > 0) {
        char *s = trim(line);
        if (*s == '#' || *s == ';' || *s == '\0')
            continue;
        if (*s == '[') {
            char *close = strchr(s, ']');
            if (close)
                *close = '\0';
            in_section = strcmp(trim(s + 1), q->section) == 0;
            continue;
        }
        char *eq = strchr(s, '=');
        if (!in_section || !eq)
            continue;
        *eq = '\0';
        const char *name = trim(s);
        const char *value = trim(eq + 1);
        for (size_t i = 0; i < q->n; i++) {
            if (strcmp(name, q->names[i]) == 0) {
                if (q->values[i]) {
                    OPENSSL_cleanse(q->values[i], strlen(q->values[i]));
                    free(q->values[i]);
                }
                q->values[i] = rn_xstrdup(value);
            }
        }
    }
    OPENSSL_cleanse(line, cap);
    free(line);
    fclose(f);
    return 0;
}

/* A file named by env_var, else $HOME/<home_rel>; NULL without either. */
static char *file_path(const char *env_var, const char *home_rel) {
    const char *p = getenv(env_var);
    if (p && *p)
        return rn_xstrdup(p);
    const char *home = getenv("HOME");
    if (!home || !*home)
        return NULL;
    rn_buf b = {0};
    rn_buf_appendf(&b, "%s/%s", home, home_rel);
    rn_buf_append_byte(&b, 0);
    return (char *)b.data;
}

static const char *profile_name(void) {
    const char *p = getenv("AWS_PROFILE");
    return p && *p ? p : "default";
}

static char *dup_or_null(const char *s) {
    return s && *s ? rn_xstrdup(s) : NULL;
}

int rn_s3_creds_load(rn_s3_creds *c, char *err, size_t errcap) {
    const char *key = getenv("AWS_ACCESS_KEY_ID"), *secret = getenv("AWS_SECRET_ACCESS_KEY");
    int have_key = key && *key, have_secret = secret && *secret;
    if (have_key && have_secret) {
        c->access_key = rn_xstrdup(key);
        c->secret_key = rn_xstrdup(secret);
        c->session_token = dup_or_null(getenv("AWS_SESSION_TOKEN"));
        return 0;
    }
    if (have_key != have_secret) {
        snprintf(err, errcap, "%s is set but %s is not",
                 have_key ? "AWS_ACCESS_KEY_ID" : "AWS_SECRET_ACCESS_KEY",
                 have_key ? "AWS_SECRET_ACCESS_KEY" : "AWS_ACCESS_KEY_ID");
        return -1;
    }
    char *path = file_path("AWS_SHARED_CREDENTIALS_FILE", ".aws/credentials");
    if (!path) {
        snprintf(err, errcap,
                 "no credentials: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY are "
                 "unset and there is no HOME for ~/.aws/credentials");
        return -1;
    }
    static const char *const names[] = {"aws_access_key_id", "aws_secret_access_key",
                                        "aws_session_token"};
    char *values[3] = {NULL, NULL, NULL};
    ini_query q = {.section = profile_name(), .names = names, .values = values, .n = 3};
    int rc = ini_read(path, &q);
    if (rc < 0) {
        snprintf(err, errcap, "no credentials: AWS_ACCESS_KEY_ID is unset and %s: %s", path,
                 strerror(-rc));
    } else if (!values[0] || !values[1] || !*values[0] || !*values[1]) {
        snprintf(err, errcap, "%s: profile [%s] lacks aws_access_key_id or aws_secret_access_key",
                 path, q.section);
        rc = -1;
    }
    free(path);
    if (rc < 0) {
        rn_s3_creds c_tmp = {values[0], values[1], values[2]};
        rn_s3_creds_clear(&c_tmp);
        return -1;
    }
    c->access_key = values[0];
    c->secret_key = values[1];
    c->session_token = values[2] && *values[2] ? values[2] : NULL;
    if (!c->session_token)
        free(values[2]);
    return 0;
}

static void wipe(char **s) {
    if (*s) {
        OPENSSL_cleanse(*s, strlen(*s));
        free(*s);
        *s = NULL;
    }
}

void rn_s3_creds_clear(rn_s3_creds *c) {
    wipe(&c->access_key);
    wipe(&c->secret_key);
    wipe(&c->session_token);
}

char *rn_s3_region_from_env(void) {
    const char *r = getenv("AWS_REGION");
    if (!r || !*r)
        r = getenv("AWS_DEFAULT_REGION");
    if (r && *r)
        return rn_xstrdup(r);
    char *path = file_path("AWS_CONFIG_FILE", ".aws/config");
    if (!path)
        return NULL;
    const char *profile = profile_name();
    rn_buf section = {0};
    if (strcmp(profile, "default") == 0)
        rn_buf_append_str(&section, "default");
    else
        rn_buf_appendf(&section, "profile %s", profile);
    rn_buf_append_byte(&section, 0);
    static const char *const names[] = {"region"};
    char *value = NULL;
    ini_query q = {.section = (const char *)section.data, .names = names, .values = &value, .n = 1};
    ini_read(path, &q);
    rn_buf_free(&section);
    free(path);
    if (value && !*value) {
        free(value);
        value = NULL;
    }
    return value;
}
