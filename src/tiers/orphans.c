/*
 * orphans.c — the orphan sweep of the cold store: snapshot bodies of a
 * network cold store (see rn_tiers_watch_bodies in tiers.h) and history
 * objects of streams that are gone (rn_tiers_watch_history). Recovery
 * sweeps the local stores' bodies at once; a network store cannot be
 * listed from the recovery thread, so bodies whose publish a crash kept
 * out of the log, or that replay superseded, are found here, on the loop,
 * once the engine runs. History objects are dropped with their stream
 * (rn_tiers_history_drop); those a failed drop, or a crash before it,
 * left behind are found here too, in any cold store.
 *
 * Each sweep lists the cold store's bodies (network store) and walks its
 * history objects, and asks the state about each: an object found
 * unreferenced becomes a suspect, remembered with the time it was first
 * seen so; a suspect still unreferenced once parts_grace_ms went by is
 * removed (a history object with every object of its stream). A body on
 * its way to a publish is referenced well within the grace, so it is never
 * removed. Suspects no longer listed are forgotten; at most MAX_SUSPECTS
 * are kept (the rest wait for a sweep). Kill points: "orphan-before-remove"
 * once a sweep decided to remove something, "orphan-after-remove" once the
 * removal reported.
 *
 * In a cluster (rn_tiers_sweep_owned) the store is shared by every node:
 * a node judges only the objects of the streams it owns (those of the
 * groups it leads), and before removing any it has its ownership and its
 * state confirmed (a leader that lost its group without knowing it could
 * otherwise miss streams its successor created), then judges each doomed
 * object again against the confirmed state.
 */
#include "tiers/tiers_int.h"
#include "util/buf.h"
#include "util/clock.h"
#include "util/fault.h"
#include "util/log.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SUSPECTS 100000

typedef struct {
    rn_tiers *t;
    int history;    /* walk the history objects after the bodies */
    int incomplete; /* a listing failed */
    int removing;   /* something was doomed: its removal runs */
    rn_map seen;    /* this sweep's suspects: key -> first seen (uint64_t ms) */
    char **doomed;  /* bodies, then history objects */
    size_t ndoomed;
} orphan_sweep;

static void free_doomed(orphan_sweep *o) {
    for (size_t i = 0; i < o->ndoomed; i++)
        free(o->doomed[i]);
    free(o->doomed);
    o->doomed = NULL;
    o->ndoomed = 0;
}

/* The stream an object of the sweep's belongs to: 1 with *id, or 0 for a
 * name of another form (never the sweep's to remove). */
static int object_stream(const char *key, uint64_t *id) {
    static const char history[] = RN_TIERS_HISTORY_PREFIX;
    if (strncmp(key, history, sizeof history - 1) == 0)
        return rn_history_key_stream(key, id);
    return rn_tiers_body_key_stream(key, id);
}

/* 1 when the object named key is this node's to judge and nothing the
 * state holds references it. */
static int unreferenced(const rn_tiers *t, const char *key) {
    uint64_t id;
    if (!object_stream(key, &id) || (t->owns && !t->owns(t->owner_ctx, id)))
        return 0;
    if (strncmp(key, RN_TIERS_HISTORY_PREFIX, sizeof RN_TIERS_HISTORY_PREFIX - 1) == 0)
        return !t->stream_kept(t->stream_kept_ctx, id);
    return !t->referenced(t->referenced_ctx, 1, key);
}

static void orphan_found(void *arg, const char *key, uint64_t size) {
    orphan_sweep *o = arg;
    rn_tiers *t = o->t;
    (void)size;
    if (!unreferenced(t, key) || o->seen.count >= MAX_SUSPECTS)
        return;
    uint64_t now = rn_mono_ms();
    const uint64_t *before = rn_map_get(&t->suspects, key, strlen(key));
    uint64_t since = before ? *before : now;
    if (now - since >= t->parts_grace_ms) {
        o->doomed = rn_xrealloc(o->doomed, (o->ndoomed + 1) * sizeof *o->doomed);
        o->doomed[o->ndoomed++] = rn_xstrdup(key);
    }
    /* a suspect even when doomed: one whose removal is not confirmed stays
     * doomed at the next sweep. The map keeps its own copy of the key after
     * the value */
    size_t len = strlen(key);
    uint64_t *v = rn_xmalloc(sizeof *v + len + 1);
    *v = since;
    memcpy(v + 1, key, len + 1);
    free(rn_map_put(&o->seen, v + 1, len, v)); /* a listing names a key once */
}

static void orphans_removed(void *arg, int status) {
    orphan_sweep *o = arg;
    (void)status; /* what stays is found again at the next sweep */
    if (o->removing)
        rn_fault_point("orphan-after-remove");
    free_doomed(o);
    o->t->orphan_listing = 0;
    free(o);
}

/* Drops the streams of the doomed history objects (each once: a walk
 * names a stream's objects together) and leaves only bodies doomed. */
static void drop_doomed_history(orphan_sweep *o) {
    size_t bodies = 0;
    uint64_t last = 0;
    int any = 0;
    for (size_t i = 0; i < o->ndoomed; i++) {
        uint64_t id;
        if (!rn_history_key_stream(o->doomed[i], &id)) {
            o->doomed[bodies++] = o->doomed[i];
            continue;
        }
        if (!any || id != last)
            rn_tiers_history_drop(o->t, id);
        any = 1;
        last = id;
        free(o->doomed[i]);
    }
    o->ndoomed = bodies;
}

/* Removes the doomed objects, if any. */
static void remove_doomed(orphan_sweep *o) {
    rn_tiers *t = o->t;
    if (!o->ndoomed) {
        orphans_removed(o, 0);
        return;
    }
    rn_fault_point("orphan-before-remove");
    rn_log(RN_LOG_INFO, "orphan_sweep", "removing %zu cold objects no state referenced for %llu ms",
           o->ndoomed, (unsigned long long)t->parts_grace_ms);
    o->removing = 1;
    drop_doomed_history(o);
    if (!o->ndoomed) {
        orphans_removed(o, 0);
        return;
    }
    t->cold->ops->remove(t->cold, (const char *const *)o->doomed, o->ndoomed, orphans_removed, o);
}

/* The owner's confirmation came: the doomed objects still unreferenced in
 * the confirmed state go; without it, none does. */
static void confirmed(void *arg, int status) {
    orphan_sweep *o = arg;
    rn_tiers *t = o->t;
    size_t kept = 0;
    for (size_t i = 0; i < o->ndoomed; i++) {
        if (status == 0 && !t->stopped && unreferenced(t, o->doomed[i]))
            o->doomed[kept++] = o->doomed[i];
        else
            free(o->doomed[i]);
    }
    if (status < 0 && !t->stopped)
        rn_log_throttled(&t->orphan_failures, 60000, RN_LOG_WARN, "orphan_sweep",
                         "the state this node judged %zu cold objects by was not confirmed "
                         "(%s); none is removed until it is",
                         o->ndoomed, strerror(-status));
    o->ndoomed = kept;
    remove_doomed(o);
}

static void orphans_listed(void *arg, int status) {
    orphan_sweep *o = arg;
    rn_tiers *t = o->t;
    /* an incomplete listing proves nothing: keep the suspects we had */
    if (status < 0 || o->incomplete) {
        rn_log_throttled(&t->orphan_failures, 60000, RN_LOG_WARN, "orphan_sweep",
                         "listing the cold store failed (%s); nothing is removed until a "
                         "listing succeeds",
                         status < 0 ? strerror(-status) : "the bodies' listing");
        rn_map_free_values(&o->seen);
        free_doomed(o);
    } else {
        rn_map_free_values(&t->suspects);
        t->suspects = o->seen;
    }
    if (!o->ndoomed || !t->confirm) {
        remove_doomed(o);
        return;
    }
    uint64_t *ids = rn_xmalloc(o->ndoomed * sizeof *ids);
    for (size_t i = 0; i < o->ndoomed; i++)
        object_stream(o->doomed[i], &ids[i]); /* doomed: of a stream's */
    t->confirm(t->owner_ctx, ids, o->ndoomed, confirmed, o);
    free(ids);
}

static void bodies_listed(void *arg, int status) {
    orphan_sweep *o = arg;
    rn_tiers *t = o->t;
    if (status < 0)
        o->incomplete = 1;
    if (!o->history) {
        orphans_listed(o, 0);
        return;
    }
    assert(t->cold->ops->walk); /* every backend walks */
    t->cold->ops->walk(t->cold, RN_TIERS_HISTORY_PREFIX, orphan_found, orphans_listed, o);
}

void rn_tiers_watch_bodies(rn_tiers *t, int (*referenced)(void *ctx, int cold, const char *key),
                           void *ctx) {
    t->referenced = referenced;
    t->referenced_ctx = ctx;
}

void rn_tiers_watch_history(rn_tiers *t, int (*kept)(void *ctx, uint64_t id), void *ctx) {
    t->stream_kept = kept;
    t->stream_kept_ctx = ctx;
}

void rn_tiers_sweep_owned(rn_tiers *t, int (*owns)(void *ctx, uint64_t stream),
                          void (*confirm)(void *ctx, const uint64_t *streams, size_t n,
                                          rn_tiers_status_fn done, void *arg),
                          void *ctx) {
    assert(!t->started && owns && confirm);
    t->owns = owns;
    t->confirm = confirm;
    t->owner_ctx = ctx;
}

void rn_tiers_orphans_sweep(rn_tiers *t) {
    if (!t->cold || t->orphan_listing)
        return;
    int bodies = t->referenced && t->cold->network;
    int history = t->stream_kept && t->history;
    if (!bodies && !history)
        return;
    t->orphan_listing = 1;
    orphan_sweep *o = rn_xcalloc(1, sizeof *o);
    o->t = t;
    o->history = history;
    if (bodies)
        t->cold->ops->list(t->cold, RN_TIERS_BODY_PREFIX, orphan_found, bodies_listed, o);
    else
        bodies_listed(o, 0);
}

void rn_tiers_orphans_free(rn_tiers *t) {
    rn_map_free_values(&t->suspects);
}
