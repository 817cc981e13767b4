/*
 * elsewhere.c — the streams of groups this node does not host, for the
 * subscriptions' deliverer (cluster mode with groups placed on some of the
 * nodes).
 *
 * The deliverer (the leader of the subscriptions' group) observes the
 * engine, which holds the streams of the groups hosted here only. The
 * others it learns from their leaders: while it delivers, every
 * RN_ELSEWHERE_MS it asks each of them for the streams of the groups it
 * leads (rn_routing_ask_elsewhere: one signed peer request per leader,
 * with the cursor of each group's last answer, so that a leader whose
 * journal can tell answers with only the streams changed and removed
 * since) and compares each answer with the view: a stream new to it (or
 * under a new id) is created, a changed tail changed, a stream named
 * removed removed, as the engine's events say for the hosted ones
 * (subs.c). A full answer names every stream of the groups it covers: a
 * stream of theirs it does not name is removed, and links to paths of
 * such a group that it does not name are treated as removed when they
 * still name a stream (the state of a take-over, or a removal between two
 * rounds). So a wake for an append to such a stream comes within a round
 * (plus the leader's answer), not at once; appends between two rounds
 * make one wake. A group whose leader did not answer keeps what was
 * known of it.
 *
 * The API's changes (a create: its wake stream, its explicit links, its
 * pattern's backfill; an explicit link; a callback, claim or ack, which
 * judge offsets by the tails) wait for a round started after them
 * (rn_elsewhere_wait), so that they see a stream created, or an append
 * made, before they came. Such a round must cover the groups placed
 * elsewhere that the change looks up (every one for a pattern's backfill,
 * else the groups of the streams it names or judges): one whose leader is
 * not known here, did not answer or no longer leads it leaves the change
 * waiting for the next round, up to RN_ELSEWHERE_WAIT_MS, after which it
 * is refused (503 NO_LEADER, nothing changed) rather than made on a
 * partial view. A change that looks up no such group goes on at once, so
 * a group without a majority holds up only the changes that need it.
 * The view is dropped when this node stops delivering; the next deliverer
 * builds its own, its first round treating every stream as seen for the
 * first time (links keep their acked offsets, so pending work wakes and
 * nothing is lost).
 */
#include "subs/subs_int.h"
#include "util/text.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

/* True when path is in a group this node does not host (cluster mode);
 * *group its group. */
static int far_path(rn_subs *S, const char *path, size_t len, unsigned *group) {
    rn_group_route r;
    if (!S->replicated || !rn_routing_route(path, len, &r))
        return 0;
    *group = r.group;
    return !r.hosted;
}

rn_seen rn_seen_of(const rn_stream *s) {
    return (rn_seen){.path = s->path,
                     .path_len = s->path_len,
                     .id = s->id,
                     .tail = s->tail,
                     .start = s->fork_offset,
                     .content_type = s->content_type,
                     .content_type_len = s->content_type_len};
}

static rn_seen seen_of(const rn_far_stream *f) {
    return (rn_seen){.path = f->path,
                     .path_len = f->path_len,
                     .id = f->id,
                     .tail = f->tail,
                     .start = f->start,
                     .content_type = f->content_type,
                     .content_type_len = strlen(f->content_type)};
}

int rn_subs_stream(rn_subs *S, const char *path, size_t len, rn_seen *out) {
    unsigned g;
    if (far_path(S, path, len, &g)) {
        rn_far_stream *f = rn_map_get(&S->far, path, len);
        if (f)
            *out = seen_of(f);
        return f != NULL;
    }
    rn_stream *s = rn_engine_find(S->engine, path, len);
    if (s)
        *out = rn_seen_of(s);
    return s != NULL;
}

typedef struct {
    void (*fn)(const rn_seen *s, void *arg);
    void *arg;
} foreach_ctx;

static void foreach_engine(rn_stream *s, void *arg) {
    foreach_ctx *c = arg;
    rn_seen seen = rn_seen_of(s);
    c->fn(&seen, c->arg);
}

void rn_subs_foreach(rn_subs *S, void (*fn)(const rn_seen *s, void *arg), void *arg) {
    foreach_ctx c = {fn, arg};
    rn_engine_foreach(S->engine, foreach_engine, &c);
    size_t i = 0;
    void *v;
    unsigned g;
    while (rn_map_next(&S->far, &i, &v)) {
        rn_far_stream *f = v;
        if (far_path(S, f->path, f->path_len, &g)) { /* not a group placed here since */
            rn_seen seen = seen_of(f);
            fn(&seen, arg);
        }
    }
}

static void far_free(rn_far_stream *f) {
    free(f->path);
    free(f->content_type);
    free(f);
}

/* Drops the view (memory only). */
static void far_clear(rn_subs *S) {
    size_t i = 0;
    void *v;
    while (rn_map_next(&S->far, &i, &v))
        far_free(v);
    rn_map_free(&S->far);
    memset(&S->far, 0, sizeof S->far);
    memset(S->cursors, 0, sizeof S->cursors);
}

/* One stream of an answer into the view, with the event it makes. */
static void learn(rn_subs *S, unsigned group, const char *path, size_t len, uint64_t id,
                  uint64_t tail, uint64_t start, const char *ct) {
    rn_far_stream *f = rn_map_get(&S->far, path, len);
    int created = !f || f->id != id, changed = f && f->tail != tail;
    if (!f) {
        f = rn_xcalloc(1, sizeof *f);
        f->path = rn_xstrndup(path, len);
        f->path_len = len;
        rn_map_put(&S->far, f->path, f->path_len, f);
    }
    if (created || strcmp(f->content_type ? f->content_type : "", ct) != 0) {
        free(f->content_type);
        f->content_type = rn_xstrdup(ct);
    }
    f->group = group;
    f->id = id;
    f->tail = tail;
    f->start = start;
    f->round = S->round;
    rn_seen seen = seen_of(f);
    if (created)
        rn_subs_seen_created(S, &seen);
    else if (changed)
        rn_subs_seen_changed(S, &seen);
}

/* True when a link to the path (of a group placed elsewhere, not in the
 * view) names a stream: one that saw it, or a pattern's. */
static int link_names_stream(rn_subs *S, const char *path, size_t len) {
    rn_watch *w = rn_map_get(&S->watch, path, len);
    for (rn_list_node *ln = w ? w->links.first : NULL; ln; ln = ln->next) {
        rn_sub_link *l = rn_list_entry(ln, rn_sub_link, watch_link);
        if (l->stream_id || !l->is_explicit)
            return 1;
    }
    return 0;
}

/* After a full answer covering groups `covered`: the streams of those
 * groups it did not name leave the view, and the links naming a stream
 * there that the view lacks see it removed. */
static void forget(rn_subs *S, const uint8_t *covered, size_t ngroups) {
    size_t i = 0, n = 0;
    void *v;
    rn_far_stream **drop = rn_xcalloc(S->far.count + 1, sizeof *drop);
    while (rn_map_next(&S->far, &i, &v)) {
        rn_far_stream *f = v;
        if (f->group < ngroups && covered[f->group] && f->round != S->round)
            drop[n++] = f;
    }
    for (size_t k = 0; k < n; k++) {
        rn_map_remove(&S->far, drop[k]->path, drop[k]->path_len);
        far_free(drop[k]);
    }
    free(drop);
    char **gone = rn_xcalloc(S->watch.count + 1, sizeof *gone);
    n = i = 0;
    unsigned g;
    while (rn_map_next(&S->watch, &i, &v)) {
        rn_watch *w = v;
        if (far_path(S, w->path, w->path_len, &g) && g < ngroups && covered[g] &&
            !rn_map_get(&S->far, w->path, w->path_len) &&
            link_names_stream(S, w->path, w->path_len))
            gone[n++] = rn_xstrndup(w->path, w->path_len);
    }
    for (size_t k = 0; k < n; k++) {
        rn_subs_seen_removed(S, gone[k], strlen(gone[k]));
        free(gone[k]);
    }
    free(gone);
}

/* After an answer since a point: a stream it names as removed leaves the
 * view, and the links naming it see it removed. */
static void forget_removed(rn_subs *S, const uint8_t *covered, size_t ngroups, json_t *removed) {
    size_t k;
    json_t *e;
    unsigned g;
    json_array_foreach(removed, k, e) {
        const char *path = json_string_value(e);
        size_t len = json_string_length(e);
        if (!path || !far_path(S, path, len, &g) || g >= ngroups || !covered[g])
            continue;
        rn_far_stream *f = rn_map_remove(&S->far, path, len);
        if (f)
            far_free(f);
        if (f || link_names_stream(S, path, len))
            rn_subs_seen_removed(S, path, len);
    }
}

/* An answer's cursor, INCARNATION.SEQ; zeroed when absent or malformed. */
static rn_elsewhere_cursor cursor_of(const json_t *doc) {
    rn_elsewhere_cursor c = {0};
    const json_t *text = json_object_get(doc, "cursor");
    if (json_is_string(text) &&
        rn_elsewhere_cursor_parse(json_string_value(text), json_string_length(text), &c) != 0)
        c = (rn_elsewhere_cursor){0};
    return c;
}

/* One leader's answer (routing.h's shape); a malformed one changes nothing. */
static void on_answer(void *arg, const uint8_t *body, size_t len) {
    rn_subs *S = arg;
    json_t *doc = json_loadb((const char *)body, len, JSON_REJECT_DUPLICATES, NULL);
    json_t *groups = json_object_get(doc, "groups"), *streams = json_object_get(doc, "streams");
    size_t ngroups = 0, k;
    json_t *e;
    json_array_foreach(groups, k, e) {
        if (!json_is_integer(e) || json_integer_value(e) < 0 || json_integer_value(e) > 65535)
            groups = NULL;
        else if ((size_t)json_integer_value(e) >= ngroups)
            ngroups = (size_t)json_integer_value(e) + 1;
    }
    if (!json_is_array(groups) || !json_is_array(streams) || !S->active) {
        json_decref(doc);
        return;
    }
    json_t *removed = json_object_get(doc, "removed");
    int full = !json_is_false(json_object_get(doc, "full")); /* absent: a full answer */
    if (!full && !json_is_array(removed)) {
        json_decref(doc);
        return;
    }
    rn_elsewhere_cursor cursor = cursor_of(doc);
    uint8_t *covered = rn_xcalloc(ngroups + 1, 1);
    json_array_foreach(groups, k, e) {
        covered[json_integer_value(e)] = 1;
        if (json_integer_value(e) < RN_GROUPS_MAX) {
            rn_group_set_add(&S->round_covered, (unsigned)json_integer_value(e));
            S->cursors[json_integer_value(e)] = cursor;
        }
    }
    json_array_foreach(streams, k, e) {
        const char *path, *id, *ct;
        size_t path_len;
        json_int_t tail, start;
        uint8_t raw[8];
        unsigned g;
        if (json_unpack(e, "[s%sIIs]", &path, &path_len, &id, &tail, &start, &ct) != 0 ||
            strlen(id) != 16 || rn_parse_lower_hex(id, 16, raw) != 0 || tail < 0 || start < 0 ||
            !far_path(S, path, path_len, &g) || g >= ngroups || !covered[g])
            continue; /* not of a group this answer covers */
        uint64_t sid = 0;
        for (int b = 0; b < 8; b++)
            sid = sid << 8 | raw[b];
        learn(S, g, path, path_len, sid, (uint64_t)tail, (uint64_t)start, ct);
    }
    if (full)
        forget(S, covered, ngroups);
    else
        forget_removed(S, covered, ngroups, removed);
    free(covered);
    json_decref(doc);
}

/* Runs every waiter of list, telling each whether the round was complete. */
static void run_waiters(rn_list *list, int complete) {
    while (!rn_list_empty(list)) {
        rn_far_waiter *w = rn_list_entry(list->first, rn_far_waiter, link);
        rn_list_remove(list, &w->link);
        w->fn(w->arg, complete);
    }
}

static void move_all(rn_list *from, rn_list *to) {
    while (!rn_list_empty(from)) {
        rn_list_node *n = from->first;
        rn_list_remove(from, n);
        rn_list_push_back(to, n);
    }
}

/* True when the answers of the round in flight covered every group placed
 * elsewhere that w needs. */
static int covers(const rn_subs *S, const rn_far_waiter *w) {
    for (size_t i = 0; i < sizeof w->groups.bits; i++) {
        uint8_t needed = w->all_groups ? 0xff : w->groups.bits[i];
        if (S->round_far.bits[i] & needed & ~S->round_covered.bits[i])
            return 0;
    }
    return 1;
}

/* The round in flight ended: its waiters whose groups it covered go on (all
 * of them when this node no longer asks); the others wait for a round at
 * the next tick, up to their bound. */
static void round_ended(rn_subs *S) {
    uint64_t now = uv_now(S->loop);
    while (!rn_list_empty(&S->far_covered)) {
        rn_far_waiter *w = rn_list_entry(S->far_covered.first, rn_far_waiter, link);
        rn_list_remove(&S->far_covered, &w->link);
        int complete = covers(S, w);
        if (complete || !S->active || S->quiesced || now >= w->give_up_ms)
            w->fn(w->arg, complete);
        else
            rn_list_push_back(&S->far_again, &w->link);
    }
}

static void start_round(rn_subs *S);

static void on_round_done(void *arg) {
    rn_subs *S = arg;
    S->asking = NULL;
    round_ended(S);
    if (!rn_list_empty(&S->far_waiting))
        start_round(S);
}

/* Starts a round for the waiters (and the view), or, when there is nothing
 * to ask, ends it at once. */
static void start_round(rn_subs *S) {
    assert(!S->asking);
    move_all(&S->far_waiting, &S->far_covered);
    S->round++;
    memset(&S->round_covered, 0, sizeof S->round_covered);
    memset(&S->round_far, 0, sizeof S->round_far);
    if (S->active && !S->quiesced)
        S->asking =
            rn_routing_ask_elsewhere(on_answer, on_round_done, S, S->cursors, &S->round_far);
    if (!S->asking)
        round_ended(S);
}

static void on_tick(uv_timer_t *t) {
    rn_subs *S = t->data;
    move_all(&S->far_again, &S->far_waiting);
    if (!S->asking && (S->subs.count || !rn_list_empty(&S->far_waiting)))
        start_round(S);
}

void rn_elsewhere_need(rn_subs *S, rn_far_waiter *w, const char *path, size_t len) {
    unsigned g;
    if (far_path(S, path, len, &g) && g < RN_GROUPS_MAX)
        rn_group_set_add(&w->groups, g);
}

void rn_elsewhere_wait(rn_subs *S, rn_far_waiter *w) {
    static const rn_group_set none;
    if (!w->all_groups && memcmp(&w->groups, &none, sizeof none) == 0) {
        w->fn(w->arg, 1);
        return;
    }
    w->give_up_ms = uv_now(S->loop) + RN_ELSEWHERE_WAIT_MS;
    rn_list_push_back(&S->far_waiting, &w->link);
    if (!S->asking)
        start_round(S);
}

void rn_elsewhere_start(rn_subs *S) {
    assert(S->replicated);
    uv_timer_start(&S->far_timer, on_tick, 0, RN_ELSEWHERE_MS);
}

void rn_elsewhere_stop(rn_subs *S) {
    uv_timer_stop(&S->far_timer);
    if (S->asking) {
        rn_routing_ask_elsewhere_cancel(S->asking);
        S->asking = NULL;
    }
    far_clear(S);
    run_waiters(&S->far_covered, 0);
    run_waiters(&S->far_waiting, 0);
    run_waiters(&S->far_again, 0);
}

void rn_elsewhere_close(rn_subs *S) {
    far_clear(S);
}
