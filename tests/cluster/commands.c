/*
 * commands.c — the test node's line protocol. Each line is "TAG VERB ARGS";
 * each answer is one JSON object with "tag" (and "error" for a bad line):
 *
 *   propose G VALUE         {"status","index","seq"}  seq: the value's
 *                                                      position in G (apply's result)
 *   read G                  {"status","applied"}      a read barrier
 *   info                    {"groups":[{group,state,leader,term,commit,applied,
 *                            last,snapshot,ready,transferring,voters,count,digest,
 *                            leader_changes,snapshots,snapshot_bytes,restores,
 *                            read_rounds,read_barriers,inflight}]}
 *   values G                {"count","digest","last_index","values":[...]}
 *   transfer G TARGET       {"status"}                TARGET 0: any voter
 *   add G ID ADDRESS        {"status"}                as spare
 *   assign G ID ROLE        {"status"}                ROLE: spare|standby|voter
 *   remove G ID             {"status"}
 *   members G               {"members":[{id,role,address}]}
 *   sockets                 {"tcp","nodelay"}         this process's connected TCP
 *                                                      sockets, and how many have TCP_NODELAY
 *   bench G COUNT INFLIGHT SIZE, readbench G COUNT CONCURRENCY: see bench.c
 *   stop                    {"status":"ok"}, then a graceful stop
 *
 * digest is a 16-digit hex string (JSON numbers lose 64-bit precision).
 */
#include "node.h"

#include <dirent.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "util/text.h"

#define MAX_ARGS 8

static void answer(json_t *tag, json_t *o) {
    json_object_set_new(o, "tag", tag);
    node_print(o);
}

static void answer_status(json_t *tag, consensus_status st) {
    answer(tag, json_pack("{s:s}", "status", consensus_status_name(st)));
}

static void proposed(void *arg, consensus_status st, uint64_t index, void *result) {
    json_t *o =
        json_pack("{s:s, s:I}", "status", consensus_status_name(st), "index", (json_int_t)index);
    if (result != NULL) {
        json_object_set_new(o, "seq", json_integer((json_int_t) * (uint64_t *)result));
        free(result);
    }
    answer(arg, o);
}

static void read_done(void *arg, consensus_status st, uint64_t applied) {
    answer(arg, json_pack("{s:s, s:I}", "status", consensus_status_name(st), "applied",
                          (json_int_t)applied));
}

static void op_done(void *arg, consensus_status st) {
    answer_status(arg, st);
}

static const char *state_name(consensus_state s) {
    static const char *names[] = {"stopped", "follower", "candidate", "leader"};
    return names[s];
}

static json_t *digest_text(uint64_t d) {
    char hex[17];
    snprintf(hex, sizeof hex, "%016llx", (unsigned long long)d);
    return json_string(hex);
}

static json_t *group_json(unsigned g) {
    consensus_group_info i;
    consensus_group_info_get(N.c, g, &i);
    const toy_group *t = &N.toy.groups[g];
    json_t *o = json_pack("{s:i, s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:b, s:b, s:i}", "group",
                          (int)g, "state", state_name(i.state), "leader", (json_int_t)i.leader_id,
                          "term", (json_int_t)i.term, "commit", (json_int_t)i.commit_index,
                          "applied", (json_int_t)i.applied_index, "last", (json_int_t)i.last_index,
                          "snapshot", (json_int_t)i.snapshot_index, "ready", i.leader_ready,
                          "transferring", i.transferring, "voters", (int)i.voters);
    json_object_set_new(o, "count", json_integer((json_int_t)t->count));
    json_object_set_new(o, "digest", digest_text(t->digest));
    json_object_set_new(o, "leader_changes", json_integer((json_int_t)i.leader_changes));
    json_object_set_new(o, "snapshots", json_integer((json_int_t)i.snapshots));
    json_object_set_new(o, "snapshot_bytes", json_integer((json_int_t)i.last_snapshot_bytes));
    json_object_set_new(o, "restores", json_integer((json_int_t)i.restores));
    json_object_set_new(o, "read_rounds", json_integer((json_int_t)i.read_rounds));
    json_object_set_new(o, "read_barriers", json_integer((json_int_t)i.read_barriers));
    json_object_set_new(o, "inflight", json_integer((json_int_t)i.proposals_inflight));
    return o;
}

static json_t *values_json(unsigned g) {
    const toy_group *t = &N.toy.groups[g];
    json_t *list = json_array();
    for (size_t i = 0; i < t->n; i++)
        json_array_append_new(list, json_string(t->values[i]));
    json_t *o = json_pack("{s:I, s:I, s:o}", "count", (json_int_t)t->count, "last_index",
                          (json_int_t)t->last_index, "values", list);
    json_object_set_new(o, "digest", digest_text(t->digest));
    return o;
}

static json_t *members_json(unsigned g) {
    consensus_member m[16];
    unsigned n = consensus_members(N.c, g, m, 16);
    static const char *roles[] = {"spare", "standby", "voter"};
    json_t *list = json_array();
    for (unsigned i = 0; i < n && i < 16; i++)
        json_array_append_new(list, json_pack("{s:I, s:s, s:s}", "id", (json_int_t)m[i].id, "role",
                                              roles[m[i].role], "address", m[i].address));
    return json_pack("{s:o}", "members", list);
}

/* Counts this process's connected TCP sockets and those with TCP_NODELAY. */
static json_t *sockets_json(void) {
    int tcp = 0, nodelay = 0;
    DIR *d = opendir("/proc/self/fd");
    for (struct dirent *e; d && (e = readdir(d));) {
        int fd = atoi(e->d_name);
        int type = 0, listening = 0, on = 0;
        socklen_t len = sizeof type;
        struct sockaddr_storage sa;
        socklen_t salen = sizeof sa;
        if (e->d_name[0] == '.' || fd == dirfd(d) ||
            getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0 || type != SOCK_STREAM ||
            getsockname(fd, (struct sockaddr *)&sa, &salen) != 0 ||
            (sa.ss_family != AF_INET && sa.ss_family != AF_INET6))
            continue;
        len = sizeof listening;
        if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) != 0 || listening)
            continue;
        tcp++;
        len = sizeof on;
        if (getsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, &len) == 0 && on)
            nodelay++;
    }
    if (d)
        closedir(d);
    return json_pack("{s:i, s:i}", "tcp", tcp, "nodelay", nodelay);
}

static int parse_u64(const char *s, uint64_t max, uint64_t *out) {
    return s == NULL ? -1 : rn_parse_strict_u64(s, strlen(s), max, out);
}

static int parse_role(const char *s, consensus_role *out) {
    if (s && strcmp(s, "spare") == 0)
        *out = CONSENSUS_SPARE;
    else if (s && strcmp(s, "standby") == 0)
        *out = CONSENSUS_STANDBY;
    else if (s && strcmp(s, "voter") == 0)
        *out = CONSENSUS_VOTER;
    else
        return -1;
    return 0;
}

/* Runs a verb that names a group (args[0]); returns -1 for bad arguments. */
static int group_command(json_t *tag, const char *verb, char **args, int n) {
    uint64_t g, id;
    consensus_role role;
    if (parse_u64(args[0], consensus_groups(N.c) - 1, &g) != 0)
        return -1;
    unsigned group = (unsigned)g;
    if (strcmp(verb, "propose") == 0 && n == 2)
        consensus_propose(N.c, group, args[1], strlen(args[1]), proposed, tag);
    else if (strcmp(verb, "read") == 0 && n == 1)
        consensus_read_barrier(N.c, group, read_done, tag);
    else if (strcmp(verb, "values") == 0 && n == 1)
        answer(tag, values_json(group));
    else if (strcmp(verb, "members") == 0 && n == 1)
        answer(tag, members_json(group));
    else if (strcmp(verb, "transfer") == 0 && n == 2 && parse_u64(args[1], UINT32_MAX, &id) == 0)
        consensus_transfer(N.c, group, id, op_done, tag);
    else if (strcmp(verb, "add") == 0 && n == 3 && parse_u64(args[1], UINT32_MAX, &id) == 0)
        consensus_add(N.c, group, id, args[2], op_done, tag);
    else if (strcmp(verb, "assign") == 0 && n == 3 && parse_u64(args[1], UINT32_MAX, &id) == 0 &&
             parse_role(args[2], &role) == 0)
        consensus_assign(N.c, group, id, role, op_done, tag);
    else if (strcmp(verb, "remove") == 0 && n == 2 && parse_u64(args[1], UINT32_MAX, &id) == 0)
        consensus_remove(N.c, group, id, op_done, tag);
    else if (strcmp(verb, "bench") == 0)
        node_bench(tag, group, args + 1, n - 1);
    else if (strcmp(verb, "readbench") == 0)
        node_readbench(tag, group, args + 1, n - 1);
    else
        return -1;
    return 0;
}

void node_command(char *line) {
    char *tok[MAX_ARGS + 2];
    int n = 0;
    for (char *save = NULL, *t = strtok_r(line, " ", &save); t && n < MAX_ARGS + 2;
         t = strtok_r(NULL, " ", &save))
        tok[n++] = t;
    if (n < 2) {
        node_print(json_pack("{s:s}", "error", "expected: TAG VERB ARGS"));
        return;
    }
    json_t *tag = json_string(tok[0]);
    const char *verb = tok[1];
    if (strcmp(verb, "info") == 0) {
        json_t *groups = json_array();
        for (unsigned g = 0; g < consensus_groups(N.c); g++)
            json_array_append_new(groups, group_json(g));
        answer(tag, json_pack("{s:o}", "groups", groups));
    } else if (strcmp(verb, "sockets") == 0) {
        answer(tag, sockets_json());
    } else if (strcmp(verb, "stop") == 0) {
        answer_status(tag, CONSENSUS_OK);
        node_stop();
    } else if (n < 3 || group_command(tag, verb, tok + 2, n - 2) != 0) {
        answer(tag, json_pack("{s:s}", "error", "bad command"));
    }
}
