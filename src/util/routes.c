/*
 * routes.c — the table of streams' groups and groups' leaders. See
 * routes.h.
 *
 * Paths live in a fixed array of entries found through a hash map (keys
 * point into the entries); when the array is full, the least recently used
 * of a few sampled entries is replaced (an approximation of LRU that costs
 * no list upkeep per lookup). Groups live in a small array found by a
 * linear scan: a cluster has a few hundred at most.
 */
#include "util/routes.h"
#include "util/map.h"
#include "util/text.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EVICT_SAMPLE 8

typedef struct {
    char name[64];
    char origin[RN_ROUTES_ORIGIN_MAX]; /* "" when no leader is known */
    int64_t term;                      /* the newest term heard of, or -1 */
} group_entry;

typedef struct {
    char path[RN_ROUTES_PATH_MAX];
    size_t path_len; /* 0: free */
    int group;       /* index into groups */
    uint64_t used;
} path_entry;

struct rn_routes {
    rn_map by_path; /* path -> path_entry */
    path_entry *paths;
    size_t max_paths, npaths;
    group_entry groups[RN_ROUTES_GROUPS];
    int ngroups;
    uint64_t clock;
    uint64_t seed; /* of the eviction sample */
};

rn_routes *rn_routes_new(size_t max_paths) {
    assert(max_paths >= 1);
    rn_routes *r = rn_xcalloc(1, sizeof *r);
    r->paths = rn_xcalloc(max_paths, sizeof *r->paths);
    r->max_paths = max_paths;
    r->seed = 0x9e3779b97f4a7c15ull;
    return r;
}

void rn_routes_free(rn_routes *r) {
    if (!r)
        return;
    rn_map_free(&r->by_path);
    free(r->paths);
    free(r);
}

int rn_url_split(const char *url, char *origin, size_t origin_cap, char *path, size_t path_cap) {
    size_t n = strlen(url), skip;
    if (rn_iprefix(url, n, "http://"))
        skip = 7;
    else if (rn_iprefix(url, n, "https://"))
        skip = 8;
    else
        return -1;
    size_t olen = skip + strcspn(url + skip, "/?#"); /* the authority ends at any of them */
    const char *p = url[olen] == '/' ? url + olen : "/";
    size_t plen = strcspn(p, "?#");
    if (olen == skip || olen >= origin_cap || plen >= path_cap)
        return -1;
    memcpy(origin, url, olen);
    origin[olen] = 0;
    memcpy(path, p, plen);
    path[plen] = 0;
    return 0;
}

static int find_group(const rn_routes *r, const char *name) {
    for (int i = 0; i < r->ngroups; i++)
        if (strcmp(r->groups[i].name, name) == 0)
            return i;
    return -1;
}

/* The group's index, added when new; -1 when the name does not fit or the
 * table of groups is full. */
static int group_of(rn_routes *r, const char *name) {
    int g = find_group(r, name);
    if (g >= 0 || strlen(name) >= sizeof r->groups[0].name || r->ngroups == RN_ROUTES_GROUPS)
        return g;
    g = r->ngroups++;
    snprintf(r->groups[g].name, sizeof r->groups[g].name, "%s", name);
    r->groups[g].origin[0] = 0;
    r->groups[g].term = -1;
    return g;
}

/* A free entry, or the least recently used of a sample (removed from the
 * map). */
static path_entry *take_entry(rn_routes *r) {
    if (r->npaths < r->max_paths)
        return &r->paths[r->npaths++];
    path_entry *victim = NULL;
    for (int i = 0; i < EVICT_SAMPLE; i++) {
        r->seed = r->seed * 6364136223846793005ull + 1442695040888963407ull;
        path_entry *e = &r->paths[(r->seed >> 33) % r->max_paths];
        if (!victim || e->used < victim->used)
            victim = e;
    }
    rn_map_remove(&r->by_path, victim->path, victim->path_len);
    return victim;
}

int rn_routes_lookup(rn_routes *r, const char *path, size_t path_len, char *origin, size_t cap) {
    path_entry *e = rn_map_get(&r->by_path, path, path_len);
    if (!e || !r->groups[e->group].origin[0])
        return 0;
    const char *o = r->groups[e->group].origin;
    if (strlen(o) >= cap)
        return 0;
    e->used = ++r->clock;
    memcpy(origin, o, strlen(o) + 1);
    return 1;
}

void rn_routes_learn(rn_routes *r, const char *origin, const char *path, size_t path_len,
                     const rn_route_answer *a) {
    if (a->status == 0) { /* no answer: the leader we went to is unreachable */
        path_entry *e = rn_map_get(&r->by_path, path, path_len);
        if (e && strcmp(r->groups[e->group].origin, origin) == 0)
            r->groups[e->group].origin[0] = 0;
        return;
    }
    if (a->status == 503 && a->error_code && strcmp(a->error_code, "NO_LEADER") == 0 && a->group &&
        a->group[0]) {
        int g = find_group(r, a->group);
        if (g >= 0) /* its term stays: a later redirect of an older term is still stale */
            r->groups[g].origin[0] = 0;
        return;
    }
    if ((a->status != 307 && a->status != 308) || !a->group || !a->group[0] || !a->leader_id ||
        !a->leader_id[0] || a->term < 0 || !a->location || !a->location[0])
        return; /* a group-only redirect, or no routing answer */
    char lorigin[RN_ROUTES_ORIGIN_MAX], lpath[RN_ROUTES_PATH_MAX];
    if (rn_url_split(a->location, lorigin, sizeof lorigin, lpath, sizeof lpath) ||
        path_len >= RN_ROUTES_PATH_MAX)
        return;
    int g = group_of(r, a->group);
    if (g < 0 || a->term < r->groups[g].term)
        return; /* an older term's hint */
    snprintf(r->groups[g].origin, sizeof r->groups[g].origin, "%s", lorigin);
    r->groups[g].term = a->term;
    path_entry *e = rn_map_get(&r->by_path, path, path_len);
    if (!e) {
        e = take_entry(r);
        memcpy(e->path, path, path_len);
        e->path[path_len] = 0;
        e->path_len = path_len;
        rn_map_put(&r->by_path, e->path, e->path_len, e);
    }
    e->group = g;
    e->used = ++r->clock;
}
