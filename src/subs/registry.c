/*
 * registry.c — subscriptions, their links and the watch index. See
 * subs_int.h for the data model.
 *
 * Every link lives in two places: its subscription's map (path -> link)
 * and the doubly linked list of its path's watch entry. Adding and removing
 * links goes through this file only, which keeps the two in step; a watch
 * entry disappears with its last link.
 */
#include "subs/glob.h"
#include "net/outbound.h"
#include "subs/subs_int.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

rn_sub *rn_sub_find(rn_subs *S, const char *id, size_t len) {
    return rn_map_get(&S->subs, id, len);
}

rn_sub *rn_sub_add(rn_subs *S, const char *id, size_t id_len, rn_sub_config *cfg,
                   int64_t created_ms) {
    rn_sub *sub = rn_xcalloc(1, sizeof *sub);
    sub->owner = S;
    sub->id = rn_xstrndup(id, id_len);
    sub->id_len = id_len;
    sub->cfg = *cfg;
    memset(cfg, 0, sizeof *cfg);
    rn_sub_config_hash(&sub->cfg, sub->hash);
    sub->created_ms = created_ms;
    rn_map_put(&S->subs, sub->id, sub->id_len, sub);
    if (sub->cfg.pattern)
        S->pattern_subs++;
    return sub;
}

void rn_sub_remove(rn_subs *S, rn_sub *sub) {
    if (sub->fetch)
        rn_fetch_cancel(sub->fetch);
    rn_wake_unannounce(S, sub);
    rn_map_remove(&S->subs, sub->id, sub->id_len);
    if (sub->cfg.pattern)
        S->pattern_subs--;
    rn_sub_link **all = rn_sub_links_sorted(sub);
    size_t n = sub->links.count;
    for (size_t i = 0; i < n; i++)
        rn_sub_link_remove(S, all[i]);
    free(all);
    rn_map_free(&sub->links);
    rn_sub_config_free(&sub->cfg);
    free(sub->id);
    free(sub->trigger);
    free(sub->holder);
    free(sub);
}

rn_sub_link *rn_sub_link_get(const rn_sub *sub, const char *path, size_t len) {
    return rn_map_get(&sub->links, path, len);
}

rn_watch *rn_watch_get(rn_subs *S, const char *path, size_t len) {
    return rn_map_get(&S->watch, path, len);
}

rn_sub_link *rn_sub_link_add(rn_subs *S, rn_sub *sub, const char *path, size_t len, uint64_t acked,
                             uint64_t stream_id) {
    assert(!rn_sub_link_get(sub, path, len));
    rn_sub_link *l = rn_xcalloc(1, sizeof *l);
    l->path = rn_xstrndup(path, len);
    l->path_len = len;
    l->sub = sub;
    l->acked = acked;
    l->stream_id = stream_id;
    l->snapshot = -1;
    rn_map_put(&sub->links, l->path, l->path_len, l);
    rn_watch *w = rn_watch_get(S, path, len);
    if (!w) {
        w = rn_xcalloc(1, sizeof *w);
        w->path = rn_xstrndup(path, len);
        w->path_len = len;
        rn_map_put(&S->watch, w->path, w->path_len, w);
    }
    rn_list_push_front(&w->links, &l->watch_link);
    return l;
}

void rn_sub_link_set_explicit(rn_subs *S, rn_sub_link *l, int on) {
    assert(on == 0 || on == 1);
    S->explicit_links += (size_t)on - (size_t)l->is_explicit;
    l->is_explicit = on;
}

void rn_sub_link_remove(rn_subs *S, rn_sub_link *l) {
    rn_sub_link_set_explicit(S, l, 0);
    rn_watch *w = rn_watch_get(S, l->path, l->path_len);
    rn_list_remove(&w->links, &l->watch_link);
    if (rn_list_empty(&w->links)) {
        rn_map_remove(&S->watch, w->path, w->path_len);
        free(w->path);
        free(w);
    }
    rn_map_remove(&l->sub->links, l->path, l->path_len);
    free(l->path);
    free(l);
}

rn_sub_link *rn_sub_link_at_tail(rn_subs *S, rn_sub *sub, const char *path, size_t len, int glob) {
    rn_sub_link *l = rn_sub_link_get(sub, path, len);
    if (!l) {
        rn_seen s;
        int found = rn_subs_stream(S, path, len, &s);
        l = rn_sub_link_add(S, sub, path, len, found ? s.tail : 0, found ? s.id : 0);
    }
    if (glob)
        l->is_glob = 1;
    else
        rn_sub_link_set_explicit(S, l, 1);
    return l;
}

int rn_sub_matches(const rn_sub *sub, const char *path, size_t len) {
    const char *p = sub->cfg.pattern, *ws = sub->cfg.wake_stream;
    if (!p || (ws && strlen(ws) == len && memcmp(ws, path, len) == 0))
        return 0;
    return rn_glob_match(p, strlen(p), path, len);
}

typedef struct {
    rn_subs *S;
    rn_sub *sub;
} backfill_ctx;

static void backfill_one(const rn_seen *s, void *arg) {
    backfill_ctx *c = arg;
    if (!rn_sub_matches(c->sub, s->path, s->path_len))
        return;
    rn_sub_link *l = rn_sub_link_get(c->sub, s->path, s->path_len);
    if (!l)
        l = rn_sub_link_add(c->S, c->sub, s->path, s->path_len, s->tail, s->id);
    l->is_glob = 1;
}

void rn_sub_backfill(rn_subs *S, rn_sub *sub) {
    backfill_ctx c = {S, sub};
    rn_subs_foreach(S, backfill_one, &c);
}

uint64_t rn_link_tail(rn_subs *S, const rn_sub_link *l) {
    rn_seen s;
    return rn_subs_stream(S, l->path, l->path_len, &s) ? s.tail : 0;
}

static int cmp_link(const void *a, const void *b) {
    const rn_sub_link *x = *(rn_sub_link *const *)a, *y = *(rn_sub_link *const *)b;
    size_t n = x->path_len < y->path_len ? x->path_len : y->path_len;
    int c = memcmp(x->path, y->path, n);
    return c ? c : (x->path_len > y->path_len) - (x->path_len < y->path_len);
}

rn_sub_link **rn_sub_links_sorted(const rn_sub *sub) {
    rn_sub_link **all = rn_xcalloc(sub->links.count ? sub->links.count : 1, sizeof *all);
    size_t i = 0, n = 0;
    void *v;
    while (rn_map_next(&sub->links, &i, &v))
        all[n++] = v;
    qsort(all, n, sizeof *all, cmp_link);
    return all;
}

rn_sub_link *rn_sub_first_pending(rn_subs *S, const rn_sub *sub) {
    rn_sub_link **all = rn_sub_links_sorted(sub), *found = NULL;
    for (size_t i = 0; i < sub->links.count && !found; i++)
        if (rn_link_tail(S, all[i]) > all[i]->acked)
            found = all[i];
    free(all);
    return found;
}
