/*
 * config.c — flag, environment and configuration file parsing into an
 * rn_config, over the settings table of config_table.c. See config.h.
 */
#include "ops/config.h"
#include "ops/config_peers.h"
#include "ops/config_table.h"
#include "util/text.h"

#include <errno.h>
#include <ini.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Where a value comes from: a repeatable setting given by a source replaces
 * what a lower one gave (flags > environment > file). */
enum { FROM_DEFAULT, FROM_FILE, FROM_ENV, FROM_FLAG };

static int set_value(rn_config *cfg, const setting *s, const char *v, const char *source, int from,
                     char *err, size_t errcap) {
    switch (s->kind) {
    case KIND_UPSTREAM: {
        static int upstreams_from;
        if (from != upstreams_from || cfg->n_upstreams == 0) {
            cfg->n_upstreams = 0;
            upstreams_from = from;
        }
        for (const char *p = v; *p;) {
            size_t n = from == FROM_ENV ? strcspn(p, " \t") : strlen(p);
            size_t len = n;
            while (len && p[len - 1] == '/')
                len--;
            if (n && (cfg->n_upstreams == RN_MAX_PEERS || len >= sizeof cfg->upstreams[0] ||
                      !rn_iprefix(p, len, "http://") || len <= 7 || memchr(p + 7, '/', len - 7))) {
                snprintf(err, errcap,
                         "%s: upstream must be http://HOST:PORT, at most %d of them (got \"%.*s\")",
                         source, RN_MAX_PEERS, (int)n, p);
                return -1;
            }
            if (n)
                snprintf(cfg->upstreams[cfg->n_upstreams++], sizeof cfg->upstreams[0], "%.*s",
                         (int)len, p);
            p += n;
            while (from == FROM_ENV && (*p == ' ' || *p == '\t'))
                p++;
        }
        return 0;
    }
    case KIND_PEER: {
        static int peers_from; /* the source the peers so far came from */
        if (from != peers_from || cfg->n_peers == 0) {
            cfg->n_peers = 0;
            peers_from = from;
        }
        /* the environment variable lists them separated by spaces */
        for (const char *p = v; *p;) {
            size_t n = from == FROM_ENV ? strcspn(p, " \t") : strlen(p);
            if (n && rn_config_add_peer(cfg, p, n, source, err, errcap))
                return -1;
            p += n;
            while (from == FROM_ENV && (*p == ' ' || *p == '\t'))
                p++;
        }
        return 0;
    }
    case KIND_U64:
    case KIND_CPUS: {
        uint64_t n;
        if (rn_parse_strict_u64(v, strlen(v), UINT64_MAX, &n) || n < s->min || n > s->max) {
            snprintf(err, errcap, "%s: %s must be an integer from %llu to %llu (got \"%s\")",
                     source, s->flag, (unsigned long long)s->min, (unsigned long long)s->max, v);
            return -1;
        }
        *(uint64_t *)((char *)cfg + s->field) = n;
        return 0;
    }
    case KIND_CHOICE: {
        size_t n = strlen(v);
        const char *c = s->choices;
        while (c && *c) {
            const char *bar = strchr(c, '|');
            size_t len = bar ? (size_t)(bar - c) : strlen(c);
            if (len == n && memcmp(c, v, n) == 0 && n < 8) {
                memcpy((char *)cfg + s->field, v, n + 1);
                return 0;
            }
            c = bar ? bar + 1 : NULL;
        }
        snprintf(err, errcap, "%s: %s must be one of %s (got \"%s\")", source, s->flag, s->choices,
                 v);
        return -1;
    }
    case KIND_PATH: {
        if (!*v && !s->def_text) { /* an optional path: none */
            ((char *)cfg + s->field)[0] = 0;
            return 0;
        }
        if (!*v || strlen(v) >= sizeof cfg->data_dir) {
            snprintf(err, errcap, "%s: %s must be a non-empty path", source, s->flag);
            return -1;
        }
        snprintf((char *)cfg + s->field, sizeof cfg->data_dir, "%s", v);
        return 0;
    }
    case KIND_TEXT: {
        if (strlen(v) >= sizeof cfg->cluster_id) {
            snprintf(err, errcap, "%s: %s is too long", source, s->flag);
            return -1;
        }
        snprintf((char *)cfg + s->field, sizeof cfg->cluster_id, "%s", v);
        return 0;
    }
    case KIND_URL: {
        size_t n = strlen(v);
        while (n && v[n - 1] == '/')
            n--;
        if (n >= sizeof cfg->public_url ||
            (n && !rn_iprefix(v, n, "http://") && !rn_iprefix(v, n, "https://"))) {
            snprintf(err, errcap, "%s: %s must be an http:// or https:// URL (got \"%s\")", source,
                     s->flag, v);
            return -1;
        }
        snprintf((char *)cfg + s->field, sizeof cfg->public_url, "%.*s", (int)n, v);
        return 0;
    }
    case KIND_BOOL: {
        int on = strcmp(v, "true") == 0 || strcmp(v, "1") == 0;
        if (s->choices && strcmp(v, s->choices) == 0) {
            on = 2;
        } else if (!on && strcmp(v, "false") != 0 && strcmp(v, "0") != 0) {
            snprintf(err, errcap, "%s: %s must be true or false%s%s (got \"%s\")", source, s->flag,
                     s->choices ? " or " : "", s->choices ? s->choices : "", v);
            return -1;
        }
        *(int *)((char *)cfg + s->field) = on;
        return 0;
    }
    case KIND_LISTEN: {
        rn_listen_address *to = (rn_listen_address *)((char *)cfg + s->field);
        if (!*v && s->def_text && !*s->def_text) { /* an optional listener: none */
            *to = (rn_listen_address){0};
            return 0;
        }
        const char *colon = strrchr(v, ':');
        uint64_t port;
        const char *host = v;
        size_t host_len = colon ? (size_t)(colon - v) : 0;
        if (host_len >= 2 && host[0] == '[' && host[host_len - 1] == ']') {
            host++;
            host_len -= 2;
        }
        if (!colon || host_len == 0 || host_len >= sizeof to->host ||
            rn_parse_strict_u64(colon + 1, strlen(colon + 1), 65535, &port)) {
            snprintf(err, errcap, "%s: %s must be HOST:PORT (got \"%s\")", source, s->flag, v);
            return -1;
        }
        memcpy(to->host, host, host_len);
        to->host[host_len] = 0;
        to->port = (int)port;
        return 0;
    }
    }
    return -1;
}

/* Prints the --help text. */
static void print_usage(rn_config_scope scope) {
    if (scope == RN_CONFIG_GATEWAY)
        printf("usage: runnel gateway --upstream URL [--upstream URL ...] --tenants FILE "
               "[options]\n       runnel gateway key new --tenant NAME --buckets RIGHTS "
               "--tenants FILE [--expires RFC3339]\n\n"
               "Starts the gateway (docs/GATEWAY.md) in front of a node or a cluster's nodes.\n");
    else
        printf("usage: runnel serve [options]\n\n"
               "Starts a Durable Streams server on an embedded durable store.\n");
    printf("Every option can also be set by its environment variable or, by its name, in the\n"
           "configuration file; flags win over the environment, which wins over the file.\n"
           "Yes/no options (default true or false) are set by --NAME alone or --NAME=true|false,\n"
           "and by true or false in the environment and the file (1 and 0 are aliases).\n"
           "In the file a value may be enclosed in double or single quotes, which are removed\n"
           "(nothing inside is escaped); a quote at only one end is refused.\n\n");
    for (size_t i = 0; i < NSETTINGS; i++) {
        const setting *s = &SETTINGS[i];
        if (!rn_config_takes(scope, s))
            continue;
        char def[64];
        if (s->kind == KIND_BOOL)
            snprintf(def, sizeof def, "%s", s->def ? "true" : "false");
        else if (s->kind == KIND_U64)
            snprintf(def, sizeof def, "%llu", (unsigned long long)s->def);
        else if (s->kind == KIND_CPUS) /* its help text says how it is computed */
            snprintf(def, sizeof def, "%llu", (unsigned long long)rn_config_cpus_default(s));
        else
            snprintf(def, sizeof def, "%s", s->def_text && *s->def_text ? s->def_text : "none");
        printf("  --%-24s %s\n  %-26s env %s, default %s\n", s->flag, s->help, "", s->env, def);
    }
    printf("  --%-24s %s\n", "help", "show this text");
}

static const setting *find_setting(rn_config_scope scope, const char *name, size_t len) {
    for (size_t i = 0; i < NSETTINGS; i++)
        if (rn_config_takes(scope, &SETTINGS[i]) && strlen(SETTINGS[i].flag) == len &&
            strncmp(SETTINGS[i].flag, name, len) == 0)
            return &SETTINGS[i];
    return NULL;
}

typedef struct {
    rn_config *cfg;
    rn_config_scope scope;
    const char *path;
    char *err;
    size_t errcap;
    int failed;
    unsigned char seen[RN_CONFIG_MAX_SETTINGS]; /* keys already given */
} file_load;

/* A file value without its enclosing quotes: "..." or '...' gives the text
 * between them as it is (no escapes); a value without quotes is kept. Returns
 * -1 for a quote at only one end, or a value longer than cap. */
static int unquote(const char *v, char *out, size_t cap) {
    size_t n = strlen(v);
    int opens = n > 0 && (v[0] == '"' || v[0] == '\'');
    int closes = n > 0 && (v[n - 1] == '"' || v[n - 1] == '\'');
    if (opens && closes && n >= 2 && v[0] == v[n - 1]) {
        v++;
        n -= 2;
    } else if (opens || closes) {
        return -1;
    }
    if (n >= cap)
        return -1;
    memcpy(out, v, n);
    out[n] = 0;
    return 0;
}

static int on_ini_entry(void *user, const char *section, const char *name, const char *value) {
    file_load *l = user;
    if (l->failed)
        return 0;
    const setting *s = find_setting(l->scope, name, strlen(name));
    char source[4200];
    snprintf(source, sizeof source, "%s: key %s", l->path, name);
    if (section[0] || !s || s->field == offsetof(rn_config, config_file)) {
        snprintf(l->err, l->errcap,
                 "%s: unknown key \"%s%s%s\" (keys are the option names of "
                 "runnel %s --help, outside any [section])",
                 source, section, section[0] ? "." : "", name,
                 l->scope == RN_CONFIG_GATEWAY ? "gateway" : "serve");
        l->failed = 1;
        return 0;
    }
    /* A key given twice is refused rather than silently last-wins; inih
     * also reports an indented line as more value of the key above it. */
    if (l->seen[s - SETTINGS]++ && s->kind != KIND_PEER && s->kind != KIND_UPSTREAM) {
        snprintf(l->err, l->errcap,
                 "%s: given twice (or continued by an indented line; keys start their line)",
                 source);
        l->failed = 1;
        return 0;
    }
    char unquoted[4200];
    if (unquote(value, unquoted, sizeof unquoted) != 0) {
        snprintf(l->err, l->errcap,
                 "%s: a quote at only one end of the value (got %s); enclose the whole value in "
                 "matching quotes, or use none",
                 source, value);
        l->failed = 1;
        return 0;
    }
    if (set_value(l->cfg, s, unquoted, source, FROM_FILE, l->err, l->errcap))
        l->failed = 1;
    return !l->failed;
}

/* Applies the configuration file named by --config or RUNNEL_CONFIG. */
static int load_file(rn_config *cfg, rn_config_scope scope, int argc, char **argv, char *err,
                     size_t errcap) {
    const char *path = getenv("RUNNEL_CONFIG");
    for (int a = 0; a < argc; a++) {
        if (strncmp(argv[a], "--config=", 9) == 0)
            path = argv[a] + 9;
        else if (strcmp(argv[a], "--config") == 0 && a + 1 < argc)
            path = argv[++a];
    }
    if (!path || !*path)
        return 0;
    struct stat st; /* fopen() opens a directory and inih reads it as an empty file */
    int stat_rc = stat(path, &st);
    if (stat_rc != 0 || S_ISDIR(st.st_mode)) {
        snprintf(err, errcap, "cannot read configuration file %s: %s", path,
                 stat_rc != 0 ? strerror(errno) : "a directory");
        return -1;
    }
    file_load l = {.cfg = cfg, .scope = scope, .path = path, .err = err, .errcap = errcap};
    int rc = ini_parse(path, on_ini_entry, &l);
    if (l.failed)
        return -1;
    if (rc < 0) {
        snprintf(err, errcap, "cannot read configuration file %s", path);
        return -1;
    }
    if (rc > 0) {
        snprintf(err, errcap, "%s:%d: not a `key = value` line", path, rc);
        return -1;
    }
    snprintf(cfg->config_file, sizeof cfg->config_file, "%s", path);
    return 0;
}

uint64_t rn_config_history_cache_floor(const rn_config *cfg) {
    return cfg->max_read_bytes + (16u << 20);
}

/* History tiering needs a cold store (in cluster mode one every node
 * shares: a chunk the leader moved is read by every replica from there),
 * and a read cache that holds the chunks of the largest read. */
static int check_tiering(const rn_config *cfg, char *err, size_t errcap) {
    if (cfg->hot_bytes && cfg->cold_store == RN_COLD_NONE) {
        snprintf(err, errcap, "--hot-bytes (history tiering) needs --cold-store");
        return -1;
    }
    if (cfg->hot_bytes && cfg->node_id && cfg->cold_store != RN_COLD_S3) {
        snprintf(err, errcap,
                 "--hot-bytes (history tiering) in cluster mode (--node-id) needs "
                 "--cold-store=s3: every node reads the history its group's leader moved from "
                 "the one store they share, and a local cold store is one node's");
        return -1;
    }
    if (cfg->hot_bytes && cfg->history_cache_bytes < rn_config_history_cache_floor(cfg)) {
        snprintf(err, errcap,
                 "--history-cache-bytes must be at least --max-read-bytes plus 16 MiB");
        return -1;
    }
    return 0;
}

int rn_config_load(rn_config *cfg, rn_config_scope scope, int argc, char **argv, char *err,
                   size_t errcap) {
    memset(cfg, 0, sizeof *cfg);
    for (size_t i = 0; i < NSETTINGS; i++) {
        const setting *s = &SETTINGS[i];
        if (s->kind == KIND_U64)
            *(uint64_t *)((char *)cfg + s->field) = s->def;
        else if (s->kind == KIND_CPUS)
            *(uint64_t *)((char *)cfg + s->field) = rn_config_cpus_default(s);
        else if (s->kind == KIND_BOOL)
            *(int *)((char *)cfg + s->field) = (int)s->def;
        else if (s->def_text &&
                 set_value(cfg, s, s->def_text, "default", FROM_DEFAULT, err, errcap))
            return -1;
    }
    if (scope == RN_CONFIG_GATEWAY) { /* beside a node on its default port */
        snprintf(cfg->listen.host, sizeof cfg->listen.host, "127.0.0.1");
        cfg->listen.port = 4438;
    }
    for (int a = 0; a < argc; a++) {
        if (strcmp(argv[a], "--help") == 0 || strcmp(argv[a], "-h") == 0) {
            print_usage(scope);
            return 1;
        }
    }
    if (load_file(cfg, scope, argc, argv, err, errcap))
        return -1;
    for (size_t i = 0; i < NSETTINGS; i++) {
        const char *v = rn_config_takes(scope, &SETTINGS[i]) ? getenv(SETTINGS[i].env) : NULL;
        if (v && set_value(cfg, &SETTINGS[i], v, SETTINGS[i].env, FROM_ENV, err, errcap))
            return -1;
    }
    for (int a = 0; a < argc; a++) {
        const char *arg = argv[a];
        if (strncmp(arg, "--", 2) != 0) {
            const char *before = a ? argv[a - 1] : "";
            const setting *prev = strncmp(before, "--", 2) == 0
                                      ? find_setting(scope, before + 2, strlen(before + 2))
                                      : NULL;
            if (prev && prev->kind == KIND_BOOL)
                snprintf(err, errcap,
                         "unexpected argument \"%s\" after --%s: a yes/no option takes --%s "
                         "alone or --%s=true|false",
                         arg, prev->flag, prev->flag, prev->flag);
            else
                snprintf(err, errcap, "unexpected argument \"%s\" (see runnel %s --help)", arg,
                         scope == RN_CONFIG_GATEWAY ? "gateway" : "serve");
            return -1;
        }
        const char *name = arg + 2;
        const char *eq = strchr(name, '=');
        size_t name_len = eq ? (size_t)(eq - name) : strlen(name);
        const setting *s = find_setting(scope, name, name_len);
        if (!s) {
            snprintf(err, errcap, "unknown option \"%.*s\" (see runnel %s --help)",
                     (int)name_len + 2, arg, scope == RN_CONFIG_GATEWAY ? "gateway" : "serve");
            return -1;
        }
        const char *value = eq                     ? eq + 1
                            : s->kind == KIND_BOOL ? "true"
                            : a + 1 < argc         ? argv[++a]
                                                   : NULL;
        if (!value) {
            snprintf(err, errcap, "option --%s needs a value", s->flag);
            return -1;
        }
        char source[80];
        snprintf(source, sizeof source, "--%s", s->flag);
        if (set_value(cfg, s, value, source, FROM_FLAG, err, errcap))
            return -1;
    }
    if (!cfg->tls_cert[0] != !cfg->tls_key[0]) {
        snprintf(err, errcap, "--tls-cert and --tls-key go together (%s is missing)",
                 cfg->tls_cert[0] ? "--tls-key" : "--tls-cert");
        return -1;
    }
    /* a server must take the protocol's 32 MiB; an intermediary may lower
     * what it takes (ext §10), announcing it (Ursula-Max-Request-Bytes) */
    if (scope == RN_CONFIG_SERVE && cfg->max_body_bytes < REQUEST_LIMIT && !cfg->test_hooks) {
        snprintf(err, errcap,
                 "--max-body-bytes %llu is below the protocol's request limit, 33554432 (32 MiB), "
                 "which every route must accept; a lower limit is a test setting (--test-hooks)",
                 (unsigned long long)cfg->max_body_bytes);
        return -1;
    }
    int peer_files = !!cfg->peer_cert[0] + !!cfg->peer_key[0] + !!cfg->peer_ca[0];
    if (peer_files != 0 && peer_files != 3) {
        snprintf(err, errcap, "--peer-cert, --peer-key and --peer-ca go together (%s is missing)",
                 !cfg->peer_cert[0]  ? "--peer-cert"
                 : !cfg->peer_key[0] ? "--peer-key"
                                     : "--peer-ca");
        return -1;
    }
    return check_tiering(cfg, err, errcap);
}

void rn_config_describe(const rn_config *cfg, rn_config_scope scope, const char *sep, char *out,
                        size_t cap) {
    size_t n = 0;
    out[0] = 0;
    for (size_t i = 0; i < NSETTINGS && n < cap; i++) {
        const setting *s = &SETTINGS[i];
        if (!rn_config_takes(scope, s))
            continue;
        const char *field = (const char *)cfg + s->field;
        const char *lead = n ? sep : "";
        switch (s->kind) {
        case KIND_U64:
        case KIND_CPUS:
            n += (size_t)snprintf(out + n, cap - n, "%s%s=%llu", lead, s->flag,
                                  (unsigned long long)*(const uint64_t *)field);
            break;
        case KIND_BOOL: {
            int v = *(const int *)field;
            n += (size_t)snprintf(out + n, cap - n, "%s%s=%s", lead, s->flag,
                                  v == 2 ? s->choices
                                  : v    ? "true"
                                         : "false");
            break;
        }
        case KIND_LISTEN: {
            const rn_listen_address *a = (const rn_listen_address *)field;
            if (a->host[0])
                n += (size_t)snprintf(out + n, cap - n, "%s%s=%s:%d", lead, s->flag, a->host,
                                      a->port);
            else
                n += (size_t)snprintf(out + n, cap - n, "%s%s=", lead, s->flag);
            break;
        }
        case KIND_PEER:
            if (!cfg->n_peers)
                n += (size_t)snprintf(out + n, cap - n, "%s%s=", lead, s->flag);
            for (int k = 0; k < cfg->n_peers && n < cap; k++)
                n += (size_t)snprintf(out + n, cap - n, "%s%s=%llu=%s,%s%s%s", k || i ? sep : "",
                                      s->flag, (unsigned long long)cfg->peers[k].id,
                                      cfg->peers[k].raft, cfg->peers[k].url,
                                      cfg->peers[k].peer_url[0] ? "," : "", cfg->peers[k].peer_url);
            break;
        case KIND_UPSTREAM:
            for (int k = 0; k < cfg->n_upstreams && n < cap; k++)
                n += (size_t)snprintf(out + n, cap - n, "%s%s=%s", k || n ? sep : "", s->flag,
                                      cfg->upstreams[k]);
            break;
        default:
            n += (size_t)snprintf(out + n, cap - n, "%s%s=%s", lead, s->flag, field);
            break;
        }
    }
}
