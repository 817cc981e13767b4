/*
 * test_config.c - unit tests for the settings of runnel serve and runnel
 * gateway (src/ops/config.h, config_peers.h), as config.h, their --help
 * and docs/OPERATIONS.md ("Configuration") state them: every kind of setting (an
 * integer within bounds, HOST:PORT, a path, a text, a URL, yes/no, a word
 * of a list, a thread count, the repeatable peers and upstreams), flags
 * over the environment over the file over the defaults, the file's form
 * (keys, quotes, repeats, sections), the refusals with their messages, the
 * settings that go together, and which command takes which setting.
 *
 * How: rn_config_load on argument vectors, RUNNEL_* variables set for a
 * case and cleared after it, configuration files in a temporary
 * directory; a refusal's message is checked for the setting and the
 * reason it names. The effective configuration (rn_config_describe)
 * written back as a file must load to the same configuration.
 */
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gw_fixture.h"
#include "ops/config.h"

extern char **environ;

static rn_config *cfg;
static char err[1024];

/* Unsets every RUNNEL_* variable, so a case sees only what it sets. */
static void clear_env(void) {
    for (;;) {
        char name[256] = "";
        for (char **e = environ; *e; e++) {
            const char *eq = strchr(*e, '=');
            if (strncmp(*e, "RUNNEL_", 7) == 0 && eq && (size_t)(eq - *e) < sizeof name) {
                memcpy(name, *e, (size_t)(eq - *e));
                name[eq - *e] = 0;
                break;
            }
        }
        if (!name[0])
            return;
        unsetenv(name);
    }
}

static int setup(void **state) {
    cfg = malloc(sizeof *cfg);
    clear_env();
    return cfg ? gw_make_dir(state) : -1;
}

static int teardown(void **state) {
    free(cfg);
    return gw_remove_dir(state);
}

static int reset(void **state) {
    (void)state;
    clear_env();
    err[0] = 0;
    return 0;
}

/* Loads the NULL-terminated arguments in scope; returns the result. */
static int load_in(rn_config_scope scope, const char *const *args) {
    int argc = 0;
    while (args[argc])
        argc++;
    return rn_config_load(cfg, scope, argc, (char **)args, err, sizeof err);
}

#define ARGS(...) ((const char *const[]){__VA_ARGS__, NULL})
#define NO_ARGS ((const char *const[]){NULL})
#define serve(...) load_in(RN_CONFIG_SERVE, ARGS(__VA_ARGS__))
#define gateway(...) load_in(RN_CONFIG_GATEWAY, ARGS(__VA_ARGS__))

/* Asserts that args are refused in scope with a message holding each of
 * the NULL-terminated phrases. */
static void refused_in(rn_config_scope scope, const char *const *args, const char *const *phrases) {
    assert_int_equal(load_in(scope, args), -1);
    for (size_t i = 0; phrases[i]; i++)
        if (!strstr(err, phrases[i]))
            fail_msg("message \"%s\" lacks \"%s\"", err, phrases[i]);
}

#define SAYS(...) ((const char *const[]){__VA_ARGS__, NULL})
#define refused(args, phrases) refused_in(RN_CONFIG_SERVE, args, phrases)

/* Writes a configuration file and returns its path (static storage). */
static const char *config_file(const char *text) {
    static char path[600];
    gw_write(gw_dir, "runnel.conf", text, path, sizeof path);
    return path;
}

/* A text of n - 1 letters in buf. */
static const char *filled(char *buf, size_t n) {
    memset(buf, 'x', n - 1);
    buf[n - 1] = 0;
    return buf;
}

static uint64_t usable_cpus(void) {
    cpu_set_t set;
    assert_int_equal(sched_getaffinity(0, sizeof set, &set), 0);
    return (uint64_t)CPU_COUNT(&set);
}

static void test_defaults_of_each_command(void **state) {
    (void)state;
    assert_int_equal(load_in(RN_CONFIG_SERVE, NO_ARGS), 0);
    assert_string_equal(cfg->listen.host, "127.0.0.1");
    assert_int_equal(cfg->listen.port, 4437);
    assert_string_equal(cfg->peer_listen.host, ""); /* none */
    assert_string_equal(cfg->data_dir, "./runnel-data");
    assert_string_equal(cfg->tls_cert, "");
    assert_int_equal(cfg->max_body_bytes, 33554432);
    assert_int_equal(cfg->long_poll_timeout_ms, 30000);
    assert_int_equal(cfg->groups, 16);
    assert_int_equal(cfg->node_id, 0);
    assert_int_equal(cfg->n_peers, 0);
    assert_int_equal(cfg->forward_writes, 1);
    assert_int_equal(cfg->access_log, 0);
    assert_int_equal(cfg->cold_store, RN_COLD_LOCAL);
    assert_string_equal(cfg->follower_reads, "confirm");
    assert_string_equal(cfg->log_format, "text");
    assert_string_equal(cfg->log_level, "info");
    uint64_t cpus = usable_cpus();
    assert_int_equal(cfg->fanout_threads, cpus > 1 ? (cpus - 1 > 256 ? 256 : cpus - 1) : 0);
    /* the gateway listens beside a node on its default port */
    assert_int_equal(load_in(RN_CONFIG_GATEWAY, NO_ARGS), 0);
    assert_string_equal(cfg->listen.host, "127.0.0.1");
    assert_int_equal(cfg->listen.port, 4438);
    assert_int_equal(cfg->upstream_timeout_ms, 30000);
    assert_int_equal(cfg->hold_body_bytes, 1048576);
    assert_int_equal(cfg->n_upstreams, 0);
}

static void test_integers_within_their_bounds(void **state) {
    (void)state;
    assert_int_equal(serve("--max-headers", "8"), 0);
    assert_int_equal(cfg->max_headers, 8);
    assert_int_equal(serve("--max-headers=10000"), 0);
    assert_int_equal(cfg->max_headers, 10000);
    const char *bad[] = {"7",  "10001", "",    "abc", "08",
                         "-1", "+9",    "1e3", " 9",  "99999999999999999999999"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char got[64];
        snprintf(got, sizeof got, "(got \"%s\")", bad[i]);
        refused(ARGS("--max-headers", bad[i]),
                SAYS("--max-headers: max-headers must be an integer from 8 to 10000", got));
    }
    /* a thread count is an integer too; its default follows the CPUs */
    assert_int_equal(serve("--fanout-threads", "0"), 0);
    assert_int_equal(cfg->fanout_threads, 0);
    refused(ARGS("--fanout-threads=257"), SAYS("fanout-threads must be an integer from 0 to 256"));
}

static void test_listen_addresses(void **state) {
    (void)state;
    assert_int_equal(serve("--listen", "0.0.0.0:80"), 0);
    assert_string_equal(cfg->listen.host, "0.0.0.0");
    assert_int_equal(cfg->listen.port, 80);
    assert_int_equal(serve("--listen=[::1]:4437"), 0);
    assert_string_equal(cfg->listen.host, "::1");
    assert_int_equal(cfg->listen.port, 4437);
    assert_int_equal(serve("--listen", "localhost:0"), 0);
    assert_string_equal(cfg->listen.host, "localhost");
    assert_int_equal(cfg->listen.port, 0);
    const char *bad[] = {"localhost", ":4437", "[]:1", "h:", "h:65536", "h:08", "h:-1", "h:1x", ""};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        refused(ARGS("--listen", bad[i]), SAYS("--listen: listen must be HOST:PORT"));
    /* the second listener is optional: empty means none */
    assert_int_equal(serve("--peer-listen", "127.0.0.1:5437"), 0);
    assert_string_equal(cfg->peer_listen.host, "127.0.0.1");
    assert_int_equal(cfg->peer_listen.port, 5437);
    assert_int_equal(serve("--peer-listen="), 0);
    assert_string_equal(cfg->peer_listen.host, "");
}

static void test_paths_texts_and_urls(void **state) {
    (void)state;
    assert_int_equal(serve("--data-dir", "/srv/runnel data", "--tls-ca", ""), 0);
    assert_string_equal(cfg->data_dir, "/srv/runnel data");
    assert_string_equal(cfg->tls_ca, ""); /* optional: none */
    refused(ARGS("--data-dir="), SAYS("--data-dir: data-dir must be a non-empty path"));
    char long_text[4200];
    refused(ARGS("--data-dir", filled(long_text, sizeof long_text)),
            SAYS("data-dir must be a non-empty path"));
    assert_int_equal(serve("--cluster-id", "prod-eu"), 0);
    assert_string_equal(cfg->cluster_id, "prod-eu");
    refused(ARGS("--cluster-id", filled(long_text, 200)),
            SAYS("--cluster-id: cluster-id is too long"));
    /* URLs lose their trailing slashes; the scheme is http or https */
    assert_int_equal(serve("--public-url", "https://streams.example.com:8443//"), 0);
    assert_string_equal(cfg->public_url, "https://streams.example.com:8443");
    assert_int_equal(serve("--public-url", "HTTP://a"), 0);
    assert_string_equal(cfg->public_url, "HTTP://a");
    assert_int_equal(serve("--public-url", ""), 0);
    assert_string_equal(cfg->public_url, "");
    const char *bad[] = {"ftp://a",  "streams.example.com", "http:/a", "https:", "http://",
                         "https:///"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        refused(ARGS("--public-url", bad[i]),
                SAYS("--public-url: public-url must be an http:// or https:// URL"));
}

static void test_yes_no_options(void **state) {
    (void)state;
    assert_int_equal(serve("--access-log"), 0);
    assert_int_equal(cfg->access_log, 1);
    const struct {
        const char *arg;
        int on;
    } ok[] = {{"--access-log=true", 1},
              {"--access-log=1", 1},
              {"--access-log=false", 0},
              {"--access-log=0", 0}};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        assert_int_equal(serve(ok[i].arg), 0);
        assert_int_equal(cfg->access_log, ok[i].on);
    }
    const char *bad[] = {"--access-log=yes", "--access-log=TRUE",
                         "--access-log=", "--access-log=2"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        refused(ARGS(bad[i]), SAYS("--access-log: access-log must be true or false"));
    /* the value as a separate argument is refused, naming the forms */
    refused(ARGS("--access-log", "1"),
            SAYS("unexpected argument \"1\" after --access-log", "--access-log=true|false"));
    /* a default-true option is switched off the same way */
    assert_int_equal(serve("--forward-writes=false"), 0);
    assert_int_equal(cfg->forward_writes, 0);
    /* --cold-store takes one more word, s3 */
    assert_int_equal(serve("--cold-store=s3"), 0);
    assert_int_equal(cfg->cold_store, RN_COLD_S3);
    assert_int_equal(serve("--cold-store=false"), 0);
    assert_int_equal(cfg->cold_store, RN_COLD_NONE);
    refused(ARGS("--cold-store=S3"), SAYS("cold-store must be true or false or s3"));
    refused(ARGS("--access-log=s3"), SAYS("access-log must be true or false (got \"s3\")"));
}

static void test_words_of_a_list(void **state) {
    (void)state;
    const char *levels[] = {"debug", "info", "warn", "error"};
    for (size_t i = 0; i < 4; i++) {
        assert_int_equal(serve("--log-level", levels[i]), 0);
        assert_string_equal(cfg->log_level, levels[i]);
    }
    assert_int_equal(serve("--log-format=json", "--follower-reads=local"), 0);
    assert_string_equal(cfg->log_format, "json");
    assert_string_equal(cfg->follower_reads, "local");
    const char *bad[] = {"DEBUG", "warning", "", "info ", "debu"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        refused(ARGS("--log-level", bad[i]),
                SAYS("--log-level: log-level must be one of debug|info|warn|error"));
}

static void test_peers_repeat_and_a_source_replaces_a_lower_one(void **state) {
    (void)state;
    assert_int_equal(serve("--peer", "1=127.0.0.1:7001,http://127.0.0.1:4437/", "--peer",
                           "2=127.0.0.1:7002,https://b.example,https://b.example:5437"),
                     0);
    assert_int_equal(cfg->n_peers, 2);
    assert_int_equal(cfg->peers[0].id, 1);
    assert_string_equal(cfg->peers[0].raft, "127.0.0.1:7001");
    assert_string_equal(cfg->peers[0].url, "http://127.0.0.1:4437");
    assert_string_equal(cfg->peers[0].peer_url, "");
    assert_string_equal(cfg->peers[1].peer_url, "https://b.example:5437");
    /* the environment lists them separated by spaces; a flag replaces them */
    setenv("RUNNEL_PEER", " 3=h:3,http://c  4=h:4,http://d\t", 1);
    assert_int_equal(load_in(RN_CONFIG_SERVE, NO_ARGS), 0);
    assert_int_equal(cfg->n_peers, 2);
    assert_int_equal(cfg->peers[0].id, 3);
    assert_string_equal(cfg->peers[1].url, "http://d");
    assert_int_equal(serve("--peer", "5=h:5,http://e"), 0);
    assert_int_equal(cfg->n_peers, 1);
    assert_int_equal(cfg->peers[0].id, 5);
    /* lines of the file add up; the environment replaces them */
    const char *path = config_file("peer = 6=h:6,http://f\npeer = 7=h:7,http://g\n");
    unsetenv("RUNNEL_PEER");
    assert_int_equal(serve("--config", path), 0);
    assert_int_equal(cfg->n_peers, 2);
    setenv("RUNNEL_PEER", "8=h:8,http://h", 1);
    assert_int_equal(serve("--config", path), 0);
    assert_int_equal(cfg->n_peers, 1);
    assert_int_equal(cfg->peers[0].id, 8);
    unsetenv("RUNNEL_PEER");
    const char *bad[] = {"0=h:1,http://a", "256=h:1,http://a", "01=h:1,http://a",
                         "1=h:1",          "1=,http://a",      "h:1,http://a"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        refused(ARGS("--peer", bad[i]), SAYS("--peer: peer"));
    refused(ARGS("--peer", "1=h:1,ftp://a"),
            SAYS("peer 1: URL must be an http:// or https:// URL"));
    refused(ARGS("--peer", "1=h:1,http://a b"), SAYS("peer 1: URL must be"));
    refused(ARGS("--peer", "1=h:1,http://"), SAYS("peer 1: URL must be"));
    refused(ARGS("--peer", "1=h:1,https:///"), SAYS("peer 1: URL must be"));
    refused(ARGS("--peer", "1=h:1,http://a,https://"), SAYS("peer 1: PEERURL must be"));
    refused(ARGS("--peer", "1=h:1,http://a,http://b\"c"), SAYS("peer 1: PEERURL must be"));
}

static void test_upstreams_are_http_origins(void **state) {
    (void)state;
    assert_int_equal(gateway("--upstream", "http://10.0.0.1:4437/", "--upstream=http://n2:4437"),
                     0);
    assert_int_equal(cfg->n_upstreams, 2);
    assert_string_equal(cfg->upstreams[0], "http://10.0.0.1:4437");
    assert_string_equal(cfg->upstreams[1], "http://n2:4437");
    setenv("RUNNEL_UPSTREAM", "http://a:1 http://b:2", 1);
    assert_int_equal(load_in(RN_CONFIG_GATEWAY, NO_ARGS), 0);
    assert_int_equal(cfg->n_upstreams, 2);
    assert_string_equal(cfg->upstreams[1], "http://b:2");
    assert_int_equal(gateway("--upstream", "http://c:3"), 0);
    assert_int_equal(cfg->n_upstreams, 1);
    unsetenv("RUNNEL_UPSTREAM");
    const char *bad[] = {"https://a:1", "http://a:1/path", "http://", "a:1", "HTTP:/a"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        refused_in(RN_CONFIG_GATEWAY, ARGS("--upstream", bad[i]),
                   SAYS("--upstream: upstream must be http://HOST:PORT"));
}

static void test_flags_over_environment_over_file_over_defaults(void **state) {
    (void)state;
    const char *path = config_file("long-poll-timeout-ms = 1000\nmax-headers = 50\n");
    assert_int_equal(serve("--config", path), 0);
    assert_int_equal(cfg->long_poll_timeout_ms, 1000);
    assert_int_equal(cfg->max_headers, 50);
    assert_string_equal(cfg->config_file, path);
    setenv("RUNNEL_LONG_POLL_TIMEOUT_MS", "2000", 1);
    char flag[700];
    snprintf(flag, sizeof flag, "--config=%s", path);
    assert_int_equal(serve(flag), 0);
    assert_int_equal(cfg->long_poll_timeout_ms, 2000);
    assert_int_equal(cfg->max_headers, 50);
    assert_int_equal(serve("--config", path, "--long-poll-timeout-ms", "3000"), 0);
    assert_int_equal(cfg->long_poll_timeout_ms, 3000);
    /* the file named by the environment */
    setenv("RUNNEL_CONFIG", path, 1);
    unsetenv("RUNNEL_LONG_POLL_TIMEOUT_MS");
    assert_int_equal(load_in(RN_CONFIG_SERVE, NO_ARGS), 0);
    assert_int_equal(cfg->long_poll_timeout_ms, 1000);
    /* the last flag wins */
    assert_int_equal(serve("--max-headers", "9", "--max-headers=10"), 0);
    assert_int_equal(cfg->max_headers, 10);
    /* a bad environment value is refused, naming the variable */
    setenv("RUNNEL_MAX_HEADERS", "x", 1);
    refused(NO_ARGS, SAYS("RUNNEL_MAX_HEADERS: max-headers must be an integer"));
}

static void test_file_form(void **state) {
    (void)state;
    const char *path = config_file("; a comment\n# another\ndata-dir = \"/srv/runnel data\"\n"
                                   "cluster-id = 'a \"quoted\" id'\naccess-log = true\n\n");
    assert_int_equal(serve("--config", path), 0);
    assert_string_equal(cfg->data_dir, "/srv/runnel data");
    assert_string_equal(cfg->cluster_id, "a \"quoted\" id");
    assert_int_equal(cfg->access_log, 1);
    const struct {
        const char *text, *says;
    } bad[] = {
        {"no-such-key = 1\n", "unknown key \"no-such-key\""},
        {"[serve]\nlisten = 127.0.0.1:1\n", "unknown key \"serve.listen\""},
        {"config = other.conf\n", "unknown key \"config\""},
        {"upstream = http://a:1\n", "unknown key \"upstream\""}, /* the gateway's */
        {"max-headers = 9\nmax-headers = 9\n", "key max-headers: given twice"},
        {"data-dir = \"/srv\n", "a quote at only one end"},
        {"data-dir = /srv'\n", "a quote at only one end"},
        {"data-dir = \"/srv'\n", "a quote at only one end"},
        {"this is not a setting\n", ":1: not a `key = value` line"},
        {"max-headers = 7\n", "key max-headers: max-headers must be an integer from 8 to 10000"},
        {"access-log = yes\n", "key access-log: access-log must be true or false"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        path = config_file(bad[i].text);
        refused(ARGS("--config", path), SAYS(path, bad[i].says));
    }
    refused(ARGS("--config", gw_dir), SAYS("cannot read configuration file", "a directory"));
    char missing[600];
    snprintf(missing, sizeof missing, "%s/none.conf", gw_dir);
    refused(ARGS("--config", missing), SAYS("cannot read configuration file", missing));
}

static void test_arguments_that_are_no_options(void **state) {
    (void)state;
    refused(ARGS("--no-such-option=1"),
            SAYS("unknown option \"--no-such-option\" (see runnel serve --help)"));
    refused(ARGS("listen"), SAYS("unexpected argument \"listen\" (see runnel serve --help)"));
    refused(ARGS("--listen", "127.0.0.1:1", "extra"), SAYS("unexpected argument \"extra\""));
    refused(ARGS("--listen"), SAYS("option --listen needs a value"));
    /* --help prints the usage (to stdout, silenced here) and says so */
    fflush(stdout);
    int saved = dup(STDOUT_FILENO), null = open("/dev/null", O_WRONLY);
    assert_true(saved >= 0 && null >= 0);
    dup2(null, STDOUT_FILENO);
    int serve_help = serve("--listen", "x", "--help"), gateway_help = gateway("-h");
    fflush(stdout);
    dup2(saved, STDOUT_FILENO);
    close(saved);
    close(null);
    assert_int_equal(serve_help, 1);
    assert_int_equal(gateway_help, 1);
}

static void test_settings_that_go_together(void **state) {
    (void)state;
    refused(ARGS("--tls-cert", "c.pem"),
            SAYS("--tls-cert and --tls-key go together (--tls-key is missing)"));
    refused(ARGS("--tls-key", "k.pem"),
            SAYS("--tls-cert and --tls-key go together (--tls-cert is missing)"));
    assert_int_equal(serve("--tls-cert", "c.pem", "--tls-key", "k.pem"), 0);
    refused(ARGS("--peer-cert", "c", "--peer-key", "k"),
            SAYS("--peer-cert, --peer-key and --peer-ca go together (--peer-ca is missing)"));
    refused(ARGS("--peer-ca", "ca"), SAYS("go together (--peer-cert is missing)"));
    assert_int_equal(serve("--peer-cert", "c", "--peer-key", "k", "--peer-ca", "ca"), 0);
    /* the protocol's 32 MiB: lower only for a test server or an intermediary */
    refused(ARGS("--max-body-bytes", "1024"),
            SAYS("--max-body-bytes 1024 is below the protocol's request limit", "--test-hooks"));
    assert_int_equal(serve("--max-body-bytes", "1024", "--test-hooks"), 0);
    assert_int_equal(cfg->max_body_bytes, 1024);
    assert_int_equal(gateway("--max-body-bytes", "1024"), 0);
    /* history tiering needs a cold store (in a cluster, the S3 one every node
     * shares), a large enough cache */
    refused(ARGS("--hot-bytes", "1", "--cold-store=false"),
            SAYS("--hot-bytes (history tiering) needs --cold-store"));
    refused(ARGS("--hot-bytes", "1", "--node-id", "1"),
            SAYS("in cluster mode (--node-id) needs --cold-store=s3"));
    refused(ARGS("--hot-bytes", "1", "--max-read-bytes", "67108864"),
            SAYS("--history-cache-bytes must be at least --max-read-bytes plus 16 MiB"));
    assert_int_equal(serve("--hot-bytes", "1", "--max-read-bytes", "67108864",
                           "--history-cache-bytes", "83886080"),
                     0);
    assert_int_equal(rn_config_history_cache_floor(cfg), 83886080);
}

static void test_each_command_takes_its_own_settings(void **state) {
    (void)state;
    refused(ARGS("--upstream", "http://a:1"),
            SAYS("unknown option \"--upstream\" (see runnel serve --help)"));
    refused_in(RN_CONFIG_GATEWAY, ARGS("--data-dir", "/d"),
               SAYS("unknown option \"--data-dir\" (see runnel gateway --help)"));
    refused_in(RN_CONFIG_GATEWAY, ARGS("--node-id=1"), SAYS("unknown option \"--node-id\""));
    /* the shared ones: listening, TLS, limits, logs, the gate */
    const char *shared[] = {"--listen=127.0.0.1:9", "--max-headers=9",          "--log-level=warn",
                            "--tenants=t.json",     "--request-timeout-ms=100", "--access-log"};
    for (size_t i = 0; i < sizeof shared / sizeof shared[0]; i++) {
        assert_int_equal(serve(shared[i]), 0);
        assert_int_equal(gateway(shared[i]), 0);
    }
    /* a variable of the other command's settings is not read */
    setenv("RUNNEL_DATA_DIR", "", 1); /* serve refuses it */
    assert_int_equal(load_in(RN_CONFIG_GATEWAY, NO_ARGS), 0);
    refused(NO_ARGS, SAYS("RUNNEL_DATA_DIR: data-dir must be a non-empty path"));
    unsetenv("RUNNEL_DATA_DIR");
    setenv("RUNNEL_UPSTREAM", "not a url", 1); /* the gateway refuses it */
    assert_int_equal(load_in(RN_CONFIG_SERVE, NO_ARGS), 0);
    refused_in(RN_CONFIG_GATEWAY, NO_ARGS, SAYS("RUNNEL_UPSTREAM: upstream must be"));
    /* and the effective configuration names only the command's settings */
    unsetenv("RUNNEL_UPSTREAM");
    char out[16384];
    assert_int_equal(load_in(RN_CONFIG_GATEWAY, NO_ARGS), 0);
    rn_config_describe(cfg, RN_CONFIG_GATEWAY, "\n", out, sizeof out);
    assert_non_null(strstr(out, "listen=127.0.0.1:4438\n"));
    assert_non_null(strstr(out, "hold-body-bytes=1048576\n"));
    assert_null(strstr(out, "data-dir="));
    assert_int_equal(load_in(RN_CONFIG_SERVE, NO_ARGS), 0);
    rn_config_describe(cfg, RN_CONFIG_SERVE, " ", out, sizeof out);
    assert_non_null(strstr(out, "data-dir=./runnel-data "));
    assert_null(strstr(out, "hold-body-bytes="));
}

/* Writes the effective configuration of scope as a file, without the
 * config key itself (the file cannot name a file), and loads it. */
static void describe_and_reload(rn_config_scope scope, char *before, char *after, size_t cap) {
    rn_config_describe(cfg, scope, "\n", before, cap);
    char *text = malloc(cap + 1), *t = text;
    assert_non_null(text);
    for (const char *line = before; *line;) {
        const char *nl = strchr(line, '\n');
        size_t n = nl ? (size_t)(nl - line) : strlen(line);
        if (strncmp(line, "config=", 7) != 0) {
            memcpy(t, line, n);
            t += n;
            *t++ = '\n';
        }
        line += n + (nl != NULL);
    }
    *t = 0;
    const char *path = config_file(text);
    free(text);
    assert_int_equal(load_in(scope, ARGS("--config", path)), 0);
    rn_config_describe(cfg, scope, "\n", after, cap);
    /* the same but for the config line */
    char *a = strstr(before, "config="), *b = strstr(after, "config=");
    assert_non_null(a);
    assert_non_null(b);
    memmove(a, strchr(a, '\n'), strlen(strchr(a, '\n')) + 1);
    memmove(b, strchr(b, '\n'), strlen(strchr(b, '\n')) + 1);
}

static void test_the_effective_configuration_loads_back_the_same(void **state) {
    (void)state;
    static char before[32768], after[32768];
    assert_int_equal(
        serve("--listen", "[::1]:7000", "--peer-listen", "127.0.0.1:7001", "--data-dir", "/srv/a b",
              "--cluster-id", "c1", "--public-url", "https://x.example", "--cold-store=s3",
              "--s3-bucket", "bk", "--access-log", "--forward-writes=false", "--log-level", "debug",
              "--fanout-threads", "3", "--node-id", "2", "--peer", "1=h:1,http://a,http://a2",
              "--peer", "2=h:2,https://b", "--groups", "7", "--max-headers", "11"),
        0);
    describe_and_reload(RN_CONFIG_SERVE, before, after, sizeof before);
    assert_string_equal(before, after);
    assert_int_equal(cfg->cold_store, RN_COLD_S3);
    assert_int_equal(cfg->n_peers, 2);
    assert_string_equal(cfg->peers[0].peer_url, "http://a2");
    assert_int_equal(gateway("--upstream", "http://a:1", "--upstream", "http://b:2",
                             "--hold-body-bytes", "0", "--listen", "0.0.0.0:80"),
                     0);
    describe_and_reload(RN_CONFIG_GATEWAY, before, after, sizeof before);
    assert_string_equal(before, after);
    assert_int_equal(cfg->n_upstreams, 2);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_defaults_of_each_command, reset),
        cmocka_unit_test_setup(test_integers_within_their_bounds, reset),
        cmocka_unit_test_setup(test_listen_addresses, reset),
        cmocka_unit_test_setup(test_paths_texts_and_urls, reset),
        cmocka_unit_test_setup(test_yes_no_options, reset),
        cmocka_unit_test_setup(test_words_of_a_list, reset),
        cmocka_unit_test_setup(test_peers_repeat_and_a_source_replaces_a_lower_one, reset),
        cmocka_unit_test_setup(test_upstreams_are_http_origins, reset),
        cmocka_unit_test_setup(test_flags_over_environment_over_file_over_defaults, reset),
        cmocka_unit_test_setup(test_file_form, reset),
        cmocka_unit_test_setup(test_arguments_that_are_no_options, reset),
        cmocka_unit_test_setup(test_settings_that_go_together, reset),
        cmocka_unit_test_setup(test_each_command_takes_its_own_settings, reset),
        cmocka_unit_test_setup(test_the_effective_configuration_loads_back_the_same, reset),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
