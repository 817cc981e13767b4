/*
 * route.c — the cluster-aware mode: a bounded table of streams whose
 * leader a redirect named (extensions §5.7). A 307 or 308 that carries
 * x-ursula-raft-leader-id, x-ursula-raft-group and x-ursula-raft-term
 * teaches "this stream's group is led by the Location's origin at this
 * term"; a hint of an older term than the one held for the group is
 * ignored; a 307 naming only the group (a node without a replica) teaches
 * nothing; a 503 NO_LEADER naming the group forgets its leader; a request
 * sent to a learned leader that got no answer forgets that stream's route.
 * Requests for a stream with a learned leader go to the leader directly.
 */
#include "client/internal.h"

#include <string.h>

/* The entry for path, or NULL. Called with the lock held. */
static rnc_route *find(runnel_client *c, const char *path) {
    for (int i = 0; i < RNC_ROUTES; i++)
        if (c->routes[i].path[0] && strcmp(c->routes[i].path, path) == 0)
            return &c->routes[i];
    return NULL;
}

/* A free entry, or the least recently used one. Called with the lock. */
static rnc_route *take(runnel_client *c) {
    rnc_route *best = &c->routes[0];
    for (int i = 0; i < RNC_ROUTES; i++) {
        if (!c->routes[i].path[0])
            return &c->routes[i];
        if (c->routes[i].used < best->used)
            best = &c->routes[i];
    }
    return best;
}

void rnc_route_apply(runnel_client *c, rnc_request *req) {
    char origin[512], path[RNC_URL_MAX];
    if (rnc_url_split(req->url, origin, sizeof origin, path, sizeof path))
        return;
    char url[RNC_URL_MAX];
    int n = -1;
    pthread_mutex_lock(&c->lock);
    rnc_route *r = find(c, path);
    if (r && r->origin[0] && strcmp(r->origin, origin) != 0) {
        r->used = ++c->route_clock;
        n = snprintf(url, sizeof url, "%s%s", r->origin, req->url + strlen(origin));
    }
    pthread_mutex_unlock(&c->lock);
    if (n > 0 && (size_t)n < sizeof url)
        memcpy(req->url, url, (size_t)n + 1);
}

/* Every route of `group` now points at origin (term), or at none. */
static void set_group(runnel_client *c, const char *group, const char *origin, int64_t term) {
    for (int i = 0; i < RNC_ROUTES; i++) {
        rnc_route *r = &c->routes[i];
        if (r->path[0] && strcmp(r->group, group) == 0) {
            rnc_copy(r->origin, sizeof r->origin, origin, strlen(origin));
            r->term = term;
        }
    }
}

/* The highest term held for group, or -1. */
static int64_t group_term(runnel_client *c, const char *group) {
    int64_t t = -1;
    for (int i = 0; i < RNC_ROUTES; i++)
        if (c->routes[i].path[0] && strcmp(c->routes[i].group, group) == 0 && c->routes[i].term > t)
            t = c->routes[i].term;
    return t;
}

void rnc_route_learn(runnel_client *c, const char *request_url, const runnel_answer *a) {
    char origin[512], path[RNC_URL_MAX];
    if (rnc_url_split(request_url, origin, sizeof origin, path, sizeof path))
        return;
    pthread_mutex_lock(&c->lock);
    rnc_route *r = find(c, path);
    if (a->status == 0) {
        if (r && strcmp(r->origin, origin) == 0)
            r->origin[0] = 0; /* the leader we went to is unreachable */
    } else if (a->status == 503 && strcmp(a->error_code, "NO_LEADER") == 0 && a->raft_group[0]) {
        set_group(c, a->raft_group, "", -1);
    } else if ((a->status == 307 || a->status == 308) && a->raft_group[0] && a->raft_leader_id[0] &&
               a->raft_term >= 0 && a->location[0]) {
        char lorigin[512], lpath[RNC_URL_MAX];
        if (!rnc_url_split(a->location, lorigin, sizeof lorigin, lpath, sizeof lpath) &&
            strlen(lorigin) < sizeof r->origin && a->raft_term >= group_term(c, a->raft_group)) {
            if (!r) {
                r = take(c);
                memset(r, 0, sizeof *r);
                if (rnc_copy(r->path, sizeof r->path, path, strlen(path)))
                    r = NULL; /* a path too long to remember */
            }
            if (r) {
                rnc_copy(r->group, sizeof r->group, a->raft_group, strlen(a->raft_group));
                r->used = ++c->route_clock;
                set_group(c, a->raft_group, lorigin, a->raft_term);
            }
        }
    }
    pthread_mutex_unlock(&c->lock);
}
