/*
 * backup_refs.h — which snapshot bodies of the shared cold store the
 * backups at this node's destination (--backup-to) reference, so that the
 * orphan sweep (tiers.h: rn_tiers_watch_bodies) keeps them.
 *
 * A backup copies no body of an S3 cold store: its state object names it
 * by key (backup_format.h), and a restore names the same object. The set
 * is learnt from the destination itself, so backups another process took
 * and backups the operator removed count: a refresh lists every
 * "<name>/state" object there, decodes each and keeps the cold bodies'
 * keys. Refreshes run at the start, every refresh_ms, and after each
 * backup. A backup being taken pins the keys its instant names until a
 * refresh started after it ended completed.
 *
 * Fail safe: until a refresh succeeded, and whenever the last one failed
 * (the destination unreachable, a state object unreadable or damaged, more
 * than RN_BACKUP_REFS_MAX_KEYS keys, a state object over
 * RN_BACKUP_REFS_MAX_STATE bytes), every cold body counts as referenced;
 * each failure is logged. Memory: at most RN_BACKUP_REFS_MAX_KEYS keys and
 * one state object at a time.
 */
#ifndef RN_OPS_BACKUP_REFS_H
#define RN_OPS_BACKUP_REFS_H

#include <stdint.h>
#include <uv.h>

#include "tiers/store.h"

#define RN_BACKUP_REFS_MAX_KEYS 262144          /* distinct cold bodies referenced */
#define RN_BACKUP_REFS_MAX_STATE (256ull << 20) /* bytes of one state object */

typedef struct rn_backup_refs rn_backup_refs;

/* The references of the backups at dest (borrowed; it outlives the set),
 * refreshed every refresh_ms (> 0) and now. */
rn_backup_refs *rn_backup_refs_new(uv_loop_t *loop, rn_store *dest, uint64_t refresh_ms);
/* 1 when a backup may reference the cold body key (see above). */
int rn_backup_refs_hold(const rn_backup_refs *r, const char *key);
/* A backup being taken names the cold body key: held from now on. */
void rn_backup_refs_pin(rn_backup_refs *r, const char *key);
/* The backup being taken ended, its state object written or not: starts a
 * refresh; the pins go once a refresh started from now on succeeded. */
void rn_backup_refs_backup_ended(rn_backup_refs *r);
/* Closes the refresh timer; run the loop afterwards, then free. A refresh
 * in flight ends with the destination's (rn_backups_stop). */
void rn_backup_refs_stop(rn_backup_refs *r);
/* Frees r; no refresh may be in flight. NULL is fine. */
void rn_backup_refs_free(rn_backup_refs *r);

#endif
