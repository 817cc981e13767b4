/*
 * changes.h — which stream paths changed on this node since a point, so
 * that a peer asking again for the streams of the groups this node leads
 * (elsewhere.h: the subscriptions' deliverer, every 250 ms) gets only what
 * changed instead of every stream each time.
 *
 * Every change noted (the engine's applied changes: a create, an append
 * or close, a rewrite, a removal) takes the next sequence number of this
 * journal and moves its path to the journal's end, so the paths changed
 * after a point are the journal's last ones. A path is kept once, with its last
 * change: the live paths are as many as the streams this node holds; the
 * removed ones are kept up to max_removed, the oldest forgotten first.
 * A point older than a forgotten removal cannot be answered from here
 * (the asker is answered in full instead), nor can a point of another
 * journal: each process starts one under a random incarnation, and it
 * does not survive a restart.
 *
 * A journal notes nothing until it is asked to keep changes (the first
 * answer that hands out one of its points), so a node no peer asks pays
 * neither the memory nor the time.
 *
 * Everything runs on the loop thread.
 */
#ifndef RN_CLUSTER_CHANGES_H
#define RN_CLUSTER_CHANGES_H

#include <stddef.h>
#include <stdint.h>

typedef struct rn_changes rn_changes;

/* A new, empty journal keeping up to max_removed (>= 1) removed paths. */
rn_changes *rn_changes_new(size_t max_removed);
void rn_changes_free(rn_changes *c);

/* The journal's incarnation (random, never 0) and its last sequence
 * number (0: nothing noted yet). */
uint64_t rn_changes_incarnation(const rn_changes *c);
uint64_t rn_changes_seq(const rn_changes *c);

/* Forgets every change under a new incarnation, so that no point of the
 * journal before can be answered: streams changed without a change noted
 * (a snapshot installed in their place). */
void rn_changes_forget_all(rn_changes *c);

/* From now on, notes the changes it is told of (before: ignores them). */
void rn_changes_keep(rn_changes *c);

/* Notes a change of the stream at path (removed: it no longer exists);
 * nothing until rn_changes_keep. */
void rn_changes_note(rn_changes *c, const char *path, size_t len, int removed);

/* Calls fn(path, len, removed, arg) once for every path whose last change
 * came after since (a sequence number of this journal), in no particular
 * order, and returns 1; returns 0, calling nothing, when since is past the journal's
 * end or older than a removal it forgot. fn must not note changes. */
int rn_changes_since(const rn_changes *c, uint64_t since,
                     void (*fn)(const char *path, size_t len, int removed, void *arg), void *arg);

#endif
