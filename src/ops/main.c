/*
 * main.c — the runnel command: `runnel serve` (ops/server.c), `runnel
 * backup` and `runnel restore` (ops/backup_cmd.h), `runnel version`,
 * `runnel help`, and the client subcommands (client/cli/).
 */
#include "client/cli/cli.h"
#include "ops/backup_cmd.h"
#include "ops/gateway_cmd.h"
#include "ops/server.h"

#include <stdio.h>
#include <string.h>

#ifndef RUNNEL_VERSION
#define RUNNEL_VERSION "dev"
#endif

static void usage(void) {
    printf("usage: runnel <command> [options]\n\n"
           "commands:\n"
           "  serve      run the server (runnel serve --help for options)\n"
           "  gateway    run the gateway in front of nodes (runnel gateway --help), or make a key\n"
           "             (runnel gateway key new --tenant NAME --buckets RIGHTS --tenants FILE)\n"
           "  backup     take a backup of a running server (runnel backup --help)\n"
           "  restore    build a data directory from a backup (runnel restore --help)\n"
           "  version    print the version (also --version)\n"
           "\nclient commands (see runnel(1)):\n");
    rn_cli_usage(stdout);
}

int main(int argc, char **argv) {
    if (argc >= 2 && strcmp(argv[1], "serve") == 0)
        return rn_serve(argc - 2, argv + 2);
    if (argc >= 2 && strcmp(argv[1], "gateway") == 0)
        return rn_gateway_cmd(argc - 2, argv + 2);
    if (argc >= 2 && strcmp(argv[1], "backup") == 0)
        return rn_backup_cmd(argc - 1, argv + 1);
    if (argc >= 2 && strcmp(argv[1], "restore") == 0)
        return rn_restore_cmd(argc - 1, argv + 1);
    if (argc >= 2 && (strcmp(argv[1], "version") == 0 || strcmp(argv[1], "--version") == 0)) {
        printf("runnel %s\n", RUNNEL_VERSION);
        return 0;
    }
    if (argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "help") == 0)) {
        usage();
        return 0;
    }
    if (argc < 2) {
        usage();
        return 2;
    }
    return rn_cli_main(argc, argv);
}
