/*
 * engine.c — the engine's remaining public calls: observers, lookups of
 * visible streams, the TTL window (and, in cluster mode, the streams read
 * here that the other replicas are told of), and the test hooks. See engine.h for the model and
 * engine_int.h for where the rest lives.
 */
#include "engine/engine_int.h"
#include "util/clock.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

void rn_engine_observe(rn_engine *e, rn_stream_observer fn, void *arg) {
    if (e->observer_count == RN_ENGINE_MAX_OBSERVERS)
        abort(); /* a wiring error, not a runtime condition */
    e->observers[e->observer_count].fn = fn;
    e->observers[e->observer_count].arg = arg;
    e->observer_count++;
}

void rn_engine_unobserve(rn_engine *e, rn_stream_observer fn, void *arg) {
    int i = 0;
    while (i < e->observer_count && (e->observers[i].fn != fn || e->observers[i].arg != arg))
        i++;
    assert(i < e->observer_count);
    memmove(&e->observers[i], &e->observers[i + 1],
            (size_t)(e->observer_count - i - 1) * sizeof e->observers[0]);
    e->observer_count--;
}

int rn_engine_namespace_exists(rn_engine *e, const char *ns, size_t len) {
    return rn_state_namespace_exists(&e->state, ns, len);
}

const rn_fence *rn_engine_fence_of(rn_engine *e, const char *ns, size_t len) {
    return rn_state_fence(&e->state, ns, len);
}

void rn_engine_foreach_namespace(rn_engine *e, void (*fn)(const char *ns, size_t len, void *arg),
                                 void *arg) {
    size_t i = 0;
    void *v;
    while (rn_map_next(&e->state.namespaces, &i, &v))
        fn(v, strlen(v), arg);
}

int rn_engine_path_erased(rn_engine *e, const char *path, size_t len, int is_namespace) {
    return (is_namespace ? rn_state_fence(&e->state, path, len)
                         : rn_state_path_fence(&e->state, path, len)) != NULL;
}

rn_stream *rn_engine_find(rn_engine *e, const char *path, size_t len) {
    rn_stream *s = rn_state_at(&e->state, path, len);
    if (!s || s->pending_create || s->soft_deleted || rn_state_path_fence(&e->state, path, len))
        return NULL;
    if (rn_stream_expired(s, rn_now_ms())) {
        engine_start_expiry(e, s);
        return NULL;
    }
    return s;
}

static int visible(rn_engine *e, const rn_stream *s, int64_t now) {
    return !s->pending_create && !s->soft_deleted && !rn_stream_expired(s, now) &&
           !rn_state_path_fence(&e->state, s->path, s->path_len);
}

void rn_engine_foreach(rn_engine *e, void (*fn)(rn_stream *s, void *arg), void *arg) {
    int64_t now = rn_now_ms();
    size_t i = 0;
    void *v;
    while (rn_map_next(&e->state.by_path, &i, &v))
        if (visible(e, v, now))
            fn(v, arg);
}

size_t rn_engine_stream_slots(const rn_engine *e) {
    return e->state.by_path.cap;
}

int engine_slice(rn_engine *e, rn_engine_slice *at, size_t slots,
                 void (*fn)(rn_stream *s, void *arg), void *arg) {
    assert(slots > 0);
    const rn_map *m = &e->state.by_path;
    if (at->cursor > 0 && at->shape != m->cap) { /* rebuilt: slots moved */
        *at = (rn_engine_slice){.shape = m->cap};
        return -1;
    }
    at->shape = m->cap;
    size_t end = m->cap - at->cursor > slots ? at->cursor + slots : m->cap;
    for (; at->cursor < end; at->cursor++)
        if (m->slots[at->cursor].hash)
            fn(m->slots[at->cursor].value, arg);
    return at->cursor == m->cap;
}

typedef struct {
    rn_engine *e;
    int64_t now;
    void (*fn)(rn_stream *s, void *arg);
    void *arg;
} visible_filter;

static void visit_if_visible(rn_stream *s, void *arg) {
    visible_filter *f = arg;
    if (visible(f->e, s, f->now))
        f->fn(s, f->arg);
}

int rn_engine_foreach_slice(rn_engine *e, rn_engine_slice *at, size_t slots,
                            void (*fn)(rn_stream *s, void *arg), void *arg) {
    visible_filter f = {.e = e, .now = rn_now_ms(), .fn = fn, .arg = arg};
    return engine_slice(e, at, slots, visit_if_visible, &f);
}

int rn_engine_body_referenced(rn_engine *e, int cold, const char *key) {
    static const char prefix[] = "snapshots/"; /* rn_tiers_body_key's form */
    size_t p = sizeof prefix - 1;
    if (strncmp(key, prefix, p) != 0 || strlen(key) < p + 16)
        return 1; /* not a body key: never the sweep's to remove */
    char hex[17];
    memcpy(hex, key + p, 16);
    hex[16] = 0;
    const rn_stream *s = rn_state_stream(&e->state, strtoull(hex, NULL, 16));
    return s && s->snapshot.present && s->snapshot.cold == cold && s->snapshot.key &&
           strcmp(s->snapshot.key, key) == 0;
}

int rn_engine_stream_kept(rn_engine *e, uint64_t id) {
    return rn_state_stream(&e->state, id) != NULL;
}

int rn_engine_is_gone(rn_engine *e, const char *path, size_t len) {
    rn_stream *s = rn_state_at(&e->state, path, len);
    return s && s->soft_deleted && !rn_state_path_fence(&e->state, path, len);
}

void rn_engine_touch(rn_engine *e, rn_stream *s) {
    s->last_access_ms = rn_now_ms();
    if (!e->share_touches || s->touch_shared || s->ttl_s < 0)
        return; /* only a TTL window needs renewing elsewhere */
    if (e->ntouches == e->touches_cap) {
        e->touches_cap = e->touches_cap ? 2 * e->touches_cap : 64;
        e->touches = rn_xrealloc(e->touches, e->touches_cap * sizeof *e->touches);
    }
    e->touches[e->ntouches++] = s->id;
    s->touch_shared = 1;
}

void rn_engine_share_touches(rn_engine *e) {
    e->share_touches = 1;
}

size_t rn_engine_take_touches(rn_engine *e, uint64_t *ids, size_t cap) {
    size_t n = e->ntouches < cap ? e->ntouches : cap;
    for (size_t i = 0; i < n; i++) {
        ids[i] = e->touches[i];
        rn_stream *s = rn_state_stream(&e->state, ids[i]);
        if (s)
            s->touch_shared = 0;
    }
    e->ntouches -= n;
    if (n && e->ntouches)
        memmove(e->touches, e->touches + n, e->ntouches * sizeof *e->touches);
    return n;
}

void rn_engine_touch_id(rn_engine *e, uint64_t id) {
    rn_stream *s = rn_state_stream(&e->state, id);
    if (s && !s->pending_create)
        s->last_access_ms = rn_now_ms();
}

void rn_engine_inject_sync_failures(rn_engine *e, int n) {
    if (e->wal)
        rn_wal_inject_sync_failures(e->wal, n);
}

int rn_engine_busy(const rn_engine *e) {
    return e->ops_in_log > 0 || e->ops_preparing > 0 || e->checkpoint != NULL;
}
