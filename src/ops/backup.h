/*
 * backup.h — POST /__runnel/backup?name=NAME: a point-in-time copy of this
 * node written to its backup destination (--backup-to), in the layout of
 * backup_format.h, while the server keeps serving.
 *
 * The instant is the one the request starts copying at: the engine's state
 * image then (every stream's metadata, producers and snapshot reference)
 * names each stream's tail, and only the bytes below those tails are
 * copied, a piece at a time on the loop thread, each read checked against
 * the state the image named (engine.h: rn_engine_backup_read). Appends
 * land past the tails and never change a copied byte; a stream deleted,
 * rewritten or whose retention advanced past a byte still to copy makes
 * the backup fail (503 BACKUP_INTERRUPTED) rather than copy another
 * instant. History moved to the cold store is read back through the
 * tiers' read cache; a cold store that fails meanwhile fails the backup
 * with its typed error (502 COLD_STORE_FAILED, 503 COLD_BACKPRESSURE).
 * The state object is written last, so a failed backup is never
 * mistaken for a complete one, and a retry under the same name rewrites
 * it. One backup runs at a time. A single node's backups name the
 * bodies of a shared cold store rather than copy them, and those bodies
 * stay (rn_backups_hold); a cluster's copy them (rn_backups_settle_with).
 */
#ifndef RN_OPS_BACKUP_H
#define RN_OPS_BACKUP_H

#include <stddef.h>

#include "engine/engine.h"
#include "tiers/store.h"
#include "tiers/tiers.h"
#include "transport/http.h"

typedef struct rn_backups rn_backups;

/* The backups of engine e (whose snapshot bodies the tiers t hold) into
 * dest, which it takes over, with the set of cold bodies the backups there
 * reference (backup_refs.h), refreshed every refresh_ms (> 0). */
rn_backups *rn_backups_new(uv_loop_t *loop, rn_engine *e, rn_tiers *t, rn_store *dest,
                           uint64_t refresh_ms);
/* Waits until the node's state holds every write acknowledged before the
 * call (rn_cluster_settle's contract): done(arg, 0), or done(arg, -errno). */
typedef void (*rn_backup_settle_fn)(void *ctx, uint64_t timeout_ms,
                                    void (*done)(void *arg, int status), void *arg);
/* Cluster mode: makes every backup wait for settle(ctx, ...) before its
 * instant (a settle that fails answers 503 NO_LEADER), and copy every
 * snapshot body, a shared cold store's too: the node taking a backup is
 * not the one that removes a superseded body from the store every node
 * shares (its group's leader: tiers.h, rn_tiers_sweep_owned), which the
 * references it pins would not hold back. */
void rn_backups_settle_with(rn_backups *b, rn_backup_settle_fn settle, void *ctx);
/* 1 when a backup at the destination, or the one being taken, may
 * reference the cold body key: the orphan sweep keeps it. */
int rn_backups_hold(const rn_backups *b, const char *key);
/* Answers POST /__runnel/backup (query: name=NAME): 200 with a JSON
 * summary once the backup is complete and durable, or an error (400
 * INVALID_BACKUP_NAME, 409 BACKUP_EXISTS, 503 BACKUP_IN_PROGRESS,
 * BACKUP_INTERRUPTED or NO_LEADER, 502 BACKUP_STORE_FAILED, 500 INTERNAL). */
void rn_backups_handle(rn_backups *b, rn_request *req, const char *query, size_t query_len);
/* Closes the destination's loop handles (a network store's calls in
 * flight end failed); run the loop afterwards, then free. */
void rn_backups_stop(rn_backups *b);
/* Frees b and its destination; no backup may be running. NULL is fine. */
void rn_backups_free(rn_backups *b);

#endif
