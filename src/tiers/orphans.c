/*
 * orphans.c — the orphan sweep of a network cold store's snapshot bodies
 * (see rn_tiers_watch_bodies in tiers.h). Recovery sweeps the local stores
 * at once; a network store cannot be listed from the recovery thread, so
 * bodies whose publish a crash kept out of the log, or that replay
 * superseded, are found here, on the loop, once the engine runs.
 *
 * Each sweep lists the cold store's bodies and asks the state about each:
 * a body found unreferenced becomes a suspect, remembered with the time it
 * was first seen so; a suspect still unreferenced once parts_grace_ms went
 * by is removed. A body on its way to a publish is referenced well within
 * the grace, so it is never removed. Suspects no longer listed are
 * forgotten; at most MAX_SUSPECTS are kept (the rest wait for a sweep).
 */
#include "tiers/tiers_int.h"
#include "util/buf.h"
#include "util/clock.h"

#include <stdlib.h>
#include <string.h>

#define MAX_SUSPECTS 100000

typedef struct {
    rn_tiers *t;
    rn_map seen; /* this listing's suspects: key -> first seen (uint64_t ms) */
    char **doomed;
    size_t ndoomed;
} orphan_sweep;

static void free_suspects(rn_map *m) {
    size_t i = 0;
    void *v;
    while (rn_map_next(m, &i, &v))
        free(v);
    rn_map_free(m);
}

static void orphan_found(void *arg, const char *key, uint64_t size) {
    orphan_sweep *o = arg;
    rn_tiers *t = o->t;
    (void)size;
    if (t->referenced(t->referenced_ctx, 1, key) || o->seen.count >= MAX_SUSPECTS)
        return;
    uint64_t now = rn_mono_ms();
    const uint64_t *before = rn_map_get(&t->suspects, key, strlen(key));
    uint64_t since = before ? *before : now;
    if (now - since >= t->parts_grace_ms) {
        o->doomed = rn_xrealloc(o->doomed, (o->ndoomed + 1) * sizeof *o->doomed);
        o->doomed[o->ndoomed++] = rn_xstrdup(key);
        return;
    }
    /* the map keeps its own copy of the key after the value */
    size_t len = strlen(key);
    uint64_t *v = rn_xmalloc(sizeof *v + len + 1);
    *v = since;
    memcpy(v + 1, key, len + 1);
    free(rn_map_put(&o->seen, v + 1, len, v)); /* a listing names a key once */
}

static void orphans_removed(void *arg, int status) {
    orphan_sweep *o = arg;
    (void)status; /* what stays is found again at the next sweep */
    for (size_t i = 0; i < o->ndoomed; i++)
        free(o->doomed[i]);
    free(o->doomed);
    o->t->orphan_listing = 0;
    free(o);
}

static void orphans_listed(void *arg, int status) {
    orphan_sweep *o = arg;
    rn_tiers *t = o->t;
    if (status < 0) { /* keep the suspects we had: an incomplete listing proves nothing */
        free_suspects(&o->seen);
        for (size_t i = 0; i < o->ndoomed; i++)
            free(o->doomed[i]);
        o->ndoomed = 0;
    } else {
        free_suspects(&t->suspects);
        t->suspects = o->seen;
    }
    if (!o->ndoomed) {
        orphans_removed(o, 0);
        return;
    }
    t->cold->ops->remove(t->cold, (const char *const *)o->doomed, o->ndoomed, orphans_removed, o);
}

void rn_tiers_watch_bodies(rn_tiers *t, int (*referenced)(void *ctx, int cold, const char *key),
                           void *ctx) {
    t->referenced = referenced;
    t->referenced_ctx = ctx;
}

void rn_tiers_orphans_sweep(rn_tiers *t) {
    if (!t->referenced || !t->cold || !t->cold->network || t->orphan_listing)
        return;
    t->orphan_listing = 1;
    orphan_sweep *o = rn_xcalloc(1, sizeof *o);
    o->t = t;
    t->cold->ops->list(t->cold, RN_TIERS_BODY_PREFIX, orphan_found, orphans_listed, o);
}

void rn_tiers_orphans_free(rn_tiers *t) {
    free_suspects(&t->suspects);
}
