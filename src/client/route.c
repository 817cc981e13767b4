/*
 * route.c — the cluster-aware mode: requests for a stream whose group's
 * leader a redirect named go to that leader directly. What is learned, and
 * from which answers, is util/routes.h's (shared with the gateway); this
 * file applies it to the client's requests under the client's lock.
 */
#include "client/internal.h"

#include <string.h>

void rnc_route_apply(runnel_client *c, rnc_request *req) {
    char origin[RN_ROUTES_ORIGIN_MAX], path[RNC_URL_MAX], leader[RN_ROUTES_ORIGIN_MAX];
    if (rn_url_split(req->url, origin, sizeof origin, path, sizeof path))
        return;
    pthread_mutex_lock(&c->lock);
    int known = rn_routes_lookup(c->routes, path, strlen(path), leader, sizeof leader);
    pthread_mutex_unlock(&c->lock);
    if (!known || strcmp(leader, origin) == 0)
        return;
    char url[RNC_URL_MAX];
    int n = snprintf(url, sizeof url, "%s%s", leader, req->url + strlen(origin));
    if (n > 0 && (size_t)n < sizeof url)
        memcpy(req->url, url, (size_t)n + 1);
}

void rnc_route_learn(runnel_client *c, const char *request_url, const runnel_answer *a) {
    char origin[RN_ROUTES_ORIGIN_MAX], path[RNC_URL_MAX];
    if (rn_url_split(request_url, origin, sizeof origin, path, sizeof path))
        return;
    rn_route_answer ra = {.status = a->status,
                          .error_code = a->error_code,
                          .group = a->raft_group,
                          .leader_id = a->raft_leader_id,
                          .term = a->raft_term,
                          .location = a->location};
    pthread_mutex_lock(&c->lock);
    rn_routes_learn(c->routes, origin, path, strlen(path), &ra);
    pthread_mutex_unlock(&c->lock);
}
