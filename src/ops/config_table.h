/*
 * config_table.h — the settings table that config.c parses into an
 * rn_config (private to src/ops/config*.c): each setting's flag, variable,
 * kind, field, default, bounds and help, and which command takes it.
 */
#ifndef RUNNEL_OPS_CONFIG_TABLE_H
#define RUNNEL_OPS_CONFIG_TABLE_H

#include <stddef.h>
#include <stdint.h>

#include "ops/config.h"

typedef enum {
    KIND_U64,
    KIND_LISTEN,
    KIND_PATH,
    KIND_TEXT,
    KIND_URL,
    KIND_BOOL,     /* true|false (1|0 as aliases), into an int; a flag alone means true;
                      with `choices`, one more word too, stored as 2 */
    KIND_CHOICE,   /* one of the |-separated words in `choices`, into a char[8] */
    KIND_CPUS,     /* a count of threads, as KIND_U64; default: usable CPUs minus `def` */
    KIND_PEER,     /* N=RAFTADDR,URL[,PEERURL] into cfg->peers; repeatable (config_peers.h) */
    KIND_UPSTREAM, /* http://HOST:PORT into cfg->upstreams; repeatable */
} setting_kind;

typedef struct {
    const char *flag; /* without the leading -- */
    const char *env;
    setting_kind kind;
    size_t field; /* offset in rn_config */
    uint64_t def, min, max;
    const char *def_text; /* default for LISTEN/PATH/TEXT/URL/CHOICE */
    const char *help;
    const char *choices; /* KIND_CHOICE */
} setting;

/* The protocol's request limit (extensions §10): every route accepts a body
 * this large, and none larger. */
#define REQUEST_LIMIT 33554432

/* Every setting, NSETTINGS of them (at most RN_CONFIG_MAX_SETTINGS), in
 * the order of --help. */
#define RN_CONFIG_MAX_SETTINGS 256
extern const setting *const SETTINGS;
extern const size_t NSETTINGS;

/* Whether the command `scope` takes s. */
int rn_config_takes(rn_config_scope scope, const setting *s);

/* The default of a KIND_CPUS setting: usable CPUs minus its `def`, within
 * its bounds. */
uint64_t rn_config_cpus_default(const setting *s);

#endif
