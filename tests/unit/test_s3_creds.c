/*
 * test_s3_creds.c - unit tests for src/tiers/s3/creds.{h,c}: where S3
 * credentials and the region come from.
 *
 * How: each test sets the AWS_* variables and HOME itself (everything else
 * unset) and writes credentials/config files into a fresh temporary
 * directory: environment over file, profiles, AWS_SHARED_CREDENTIALS_FILE
 * and AWS_CONFIG_FILE, ~/.aws defaults, comments and spacing, session
 * tokens longer than libinih's line limit, and errors, whose text must
 * never carry a secret.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tiers/s3/creds.h"

static char dir[256];

static const char *const vars[] = {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
                                   "AWS_SESSION_TOKEN", "AWS_PROFILE",
                                   "AWS_REGION",        "AWS_DEFAULT_REGION",
                                   "AWS_CONFIG_FILE",   "AWS_SHARED_CREDENTIALS_FILE"};

static int setup(void **state) {
    (void)state;
    snprintf(dir, sizeof dir, "%s/rn-creds-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    assert_non_null(mkdtemp(dir));
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        unsetenv(vars[i]);
    setenv("HOME", dir, 1);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
    return 0;
}

static void write_file(const char *rel, const char *text) {
    char path[512];
    snprintf(path, sizeof path, "%s/.aws", dir);
    mkdir(path, 0700);
    snprintf(path, sizeof path, "%s/%s", dir, rel);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void test_environment_first(void **state) {
    (void)state;
    write_file(".aws/credentials", "[default]\naws_access_key_id=FILEKEY\n"
                                   "aws_secret_access_key=FILESECRET\n");
    setenv("AWS_ACCESS_KEY_ID", "ENVKEY", 1);
    setenv("AWS_SECRET_ACCESS_KEY", "ENVSECRET", 1);
    setenv("AWS_SESSION_TOKEN", "ENVTOKEN", 1);
    rn_s3_creds c = {0};
    char err[256] = "";
    assert_int_equal(rn_s3_creds_load(&c, err, sizeof err), 0);
    assert_string_equal(c.access_key, "ENVKEY");
    assert_string_equal(c.secret_key, "ENVSECRET");
    assert_string_equal(c.session_token, "ENVTOKEN");
    rn_s3_creds_clear(&c);
    assert_null(c.access_key);
    assert_null(c.secret_key);
    assert_null(c.session_token);
}

static void test_default_file_and_profiles(void **state) {
    (void)state;
    write_file(".aws/credentials", "# a comment\n[default]\n  aws_access_key_id =  DEFKEY  \n"
                                   "aws_secret_access_key\t=\tDEFSECRET\n\n"
                                   "; another\n[ci]\naws_access_key_id=CIKEY\n"
                                   "aws_secret_access_key=CISECRET\naws_session_token=CITOKEN\n");
    rn_s3_creds c = {0};
    char err[256] = "";
    assert_int_equal(rn_s3_creds_load(&c, err, sizeof err), 0);
    assert_string_equal(c.access_key, "DEFKEY");
    assert_string_equal(c.secret_key, "DEFSECRET");
    assert_null(c.session_token);
    rn_s3_creds_clear(&c);
    setenv("AWS_PROFILE", "ci", 1);
    assert_int_equal(rn_s3_creds_load(&c, err, sizeof err), 0);
    assert_string_equal(c.access_key, "CIKEY");
    assert_string_equal(c.session_token, "CITOKEN");
    rn_s3_creds_clear(&c);
}

static void test_named_file_and_long_token(void **state) {
    (void)state;
    char token[2001];
    memset(token, 'T', 2000);
    token[2000] = '\0';
    char text[2300];
    snprintf(text, sizeof text,
             "[default]\naws_access_key_id=K\naws_secret_access_key=S\naws_session_token=%s\n",
             token);
    write_file("elsewhere", text);
    char path[512];
    snprintf(path, sizeof path, "%s/elsewhere", dir);
    setenv("AWS_SHARED_CREDENTIALS_FILE", path, 1);
    rn_s3_creds c = {0};
    char err[256] = "";
    assert_int_equal(rn_s3_creds_load(&c, err, sizeof err), 0);
    assert_string_equal(c.session_token, token);
    rn_s3_creds_clear(&c);
}

static void test_errors_name_no_secret(void **state) {
    (void)state;
    rn_s3_creds c = {0};
    char err[512] = "";
    setenv("AWS_SECRET_ACCESS_KEY", "TOPSECRET", 1);
    assert_int_equal(rn_s3_creds_load(&c, err, sizeof err), -1);
    assert_non_null(strstr(err, "AWS_ACCESS_KEY_ID"));
    assert_null(strstr(err, "TOPSECRET"));
    unsetenv("AWS_SECRET_ACCESS_KEY");

    assert_int_equal(rn_s3_creds_load(&c, err, sizeof err), -1); /* no file */
    assert_non_null(strstr(err, ".aws/credentials"));

    write_file(".aws/credentials", "[default]\naws_secret_access_key=FILESECRET\n"
                                   "aws_session_token=FILETOKEN\n");
    assert_int_equal(rn_s3_creds_load(&c, err, sizeof err), -1);
    assert_non_null(strstr(err, "[default]"));
    assert_null(strstr(err, "FILESECRET"));
    assert_null(strstr(err, "FILETOKEN"));
    setenv("AWS_PROFILE", "missing", 1);
    assert_int_equal(rn_s3_creds_load(&c, err, sizeof err), -1);
    assert_non_null(strstr(err, "[missing]"));
    assert_null(c.access_key);
}

static void test_region(void **state) {
    (void)state;
    assert_null(rn_s3_region_from_env());
    write_file(".aws/config", "[default]\nregion = eu-west-3\n[profile ci]\nregion=ap-south-1\n");
    char *r = rn_s3_region_from_env();
    assert_string_equal(r, "eu-west-3");
    free(r);
    setenv("AWS_PROFILE", "ci", 1);
    r = rn_s3_region_from_env();
    assert_string_equal(r, "ap-south-1");
    free(r);
    setenv("AWS_DEFAULT_REGION", "us-west-2", 1);
    r = rn_s3_region_from_env();
    assert_string_equal(r, "us-west-2");
    free(r);
    setenv("AWS_REGION", "us-east-2", 1);
    r = rn_s3_region_from_env();
    assert_string_equal(r, "us-east-2");
    free(r);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_environment_first, setup, teardown),
        cmocka_unit_test_setup_teardown(test_default_file_and_profiles, setup, teardown),
        cmocka_unit_test_setup_teardown(test_named_file_and_long_token, setup, teardown),
        cmocka_unit_test_setup_teardown(test_errors_name_no_secret, setup, teardown),
        cmocka_unit_test_setup_teardown(test_region, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
