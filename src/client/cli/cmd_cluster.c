/*
 * cmd_cluster.c — `runnel cluster`: a cluster's operators' routes from the
 * command line (the node's admin token in --admin-token or
 * RUNNEL_ADMIN_TOKEN, else --token or RUNNEL_TOKEN).
 *
 *   runnel cluster status                 the report (/__runnel/cluster), JSON
 *   runnel cluster add ID RAFTADDR URL [PEERURL]
 *                                         add a node (started with --join;
 *                                         PEERURL: its peer listener's)
 *   runnel cluster remove ID              decommission: its replicas move away,
 *                                         then it is removed
 *   runnel cluster drain ID               the node leads nothing
 *   runnel cluster undrain ID             it may lead again
 *
 * Each prints the node's answer (JSON) on stdout; the exit code is 0 for a
 * 2xx, 1 for a refusal (the code and message on stderr), 4 when no node
 * answered.
 */
#include "client/cli/cli.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int print_body(void *arg, const void *data, size_t len) {
    (void)arg;
    return fwrite(data, 1, len, stdout) == len ? 0 : 1;
}

/* Percent-encodes s into out for a query value; -1 when it does not fit. */
static int encoded(const char *s, char *out, size_t cap) {
    return runnel_url_encode(s, out, cap);
}

/* The id operand: 1..255 in decimal. */
static int node_id(const char *s) {
    char *end;
    long v = strtol(s, &end, 10);
    return *s && !*end && v >= 1 && v <= 255 ? (int)v : 0;
}

int cli_cluster(cli_ctx *x, int argc, char **argv) {
    static const struct option opts[] = {{"admin-token", required_argument, NULL, 'A'}, {0}};
    const char *admin_token = NULL;
    int c;
    while ((c = cli_getopt(x, argc, argv, "", opts)) != -1) {
        if (c != 'A')
            return RN_EXIT_USAGE;
        admin_token = cli_optarg();
    }
    int at = cli_optind();
    if (at >= argc)
        return cli_usage_error("cluster", "which: status, add, remove, drain or undrain");
    const char *verb = argv[at++];
    int rest = argc - at;
    char path[2048];
    const char *method = "GET";
    int id = rest >= 1 ? node_id(argv[at]) : 0;
    if (strcmp(verb, "status") == 0 && rest == 0) {
        snprintf(path, sizeof path, "/__runnel/cluster");
    } else if (strcmp(verb, "add") == 0 && (rest == 3 || rest == 4) && id) {
        char raft[256], url[768], peer_url[768] = "";
        if (encoded(argv[at + 1], raft, sizeof raft) || encoded(argv[at + 2], url, sizeof url) ||
            (rest == 4 && encoded(argv[at + 3], peer_url, sizeof peer_url)))
            return cli_usage_error("cluster", "the address or URL is too long");
        method = "POST";
        snprintf(path, sizeof path, "/__runnel/cluster/members?id=%d&raft=%s&url=%s%s%s", id, raft,
                 url, rest == 4 ? "&peer_url=" : "", peer_url);
    } else if ((strcmp(verb, "remove") == 0 || strcmp(verb, "drain") == 0 ||
                strcmp(verb, "undrain") == 0) &&
               rest == 1 && id) {
        method = strcmp(verb, "drain") == 0 ? "POST" : "DELETE";
        snprintf(path, sizeof path, "/__runnel/cluster/%s/%d",
                 strcmp(verb, "remove") == 0 ? "members" : "drain", id);
    } else {
        return cli_usage_error("cluster",
                               "usage: runnel cluster status | add ID RAFTADDR URL [PEERURL] | "
                               "remove ID | drain ID | undrain ID (ID: 1..255)");
    }
    if (!x->client && cli_connect_admin(x, admin_token))
        return RN_EXIT_USAGE;
    runnel_answer a;
    runnel_result r = runnel_admin_call(x->client, method, path, print_body, NULL, &a);
    if (r == RUNNEL_OK)
        return RN_EXIT_OK;
    return cli_report(x, verb, r, &a, 0);
}
