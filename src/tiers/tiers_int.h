/*
 * tiers_int.h — the tiers service's state, shared by tiers.c (lifecycle,
 * snapshot bodies) and parts.c (staged parts). Private to src/tiers/.
 */
#ifndef RN_TIERS_INT_H
#define RN_TIERS_INT_H

#include "tiers/spares.h"
#include "tiers/store.h"
#include "tiers/tiers.h"
#include "util/log.h"
#include "util/map.h"

struct rn_tiers {
    uv_loop_t *loop;
    rn_streamfiles *files;
    rn_spares *spares;    /* NULL: none kept (spare_files 0, or no directory) */
    rn_store *local;      /* snapshot bodies below the cold threshold */
    rn_store *cold;       /* large bodies and staged parts; NULL without a cold store */
    uint64_t body_serial; /* makes body keys unique within a millisecond */
    uint64_t parts_grace_ms;
    uv_timer_t sweep; /* of staged parts, every parts_grace_ms / 4 */
    int started;
    int stopped;   /* rn_tiers_stop: the stores take no more calls */
    rn_map staged; /* stream -> its staged parts (parts.c) */
    uint64_t (*parts_epoch)(void *ctx, uint64_t stream); /* rn_tiers_parts_epoch; NULL: none */
    void *parts_epoch_ctx;
    unsigned copies;                /* parts commits copying (rn_tiers_parts_assemble) */
    rn_log_throttle parts_failures; /* sweeps of stale parts that failed */
    /* the orphan sweep of a network cold store's bodies (orphans.c) */
    int (*referenced)(void *ctx, int cold, const char *key);
    void *referenced_ctx;
    int (*stream_kept)(void *ctx, uint64_t id); /* and of history objects */
    void *stream_kept_ctx;
    rn_map suspects; /* object key -> when a listing first found it unreferenced */
    int orphan_listing;
    rn_log_throttle orphan_failures;         /* listings that failed */
    int drop_by_sweep_only;                  /* rn_tiers_drop_by_sweep_only */
    int (*owns)(void *ctx, uint64_t stream); /* rn_tiers_sweep_owned; NULL: every stream */
    void (*confirm)(void *ctx, const uint64_t *streams, size_t n, rn_tiers_status_fn done,
                    void *arg);
    void *owner_ctx;
    struct rn_history *history; /* history.c; NULL without a cold store */
};

/* A fresh key for a snapshot body of stream `stream`. */
void rn_tiers_body_key(rn_tiers *t, uint64_t stream, char out[RN_TIERS_KEY_MAX]);
/* 1 with *id when key is a body key (rn_tiers_body_key_valid), naming
 * stream *id. */
int rn_tiers_body_key_stream(const char *key, uint64_t *id);

/* parts.c: removes staged parts older than the grace period and forgets
 * the counts of idle incarnations; frees every count (at close). */
void rn_tiers_parts_sweep(rn_tiers *t);
void rn_tiers_parts_free(rn_tiers *t);

/* orphans.c: one orphan sweep of the cold store's bodies (when watched and
 * the cold store is a network store) and history objects (when watched);
 * frees what it keeps (at close). */
void rn_tiers_orphans_sweep(rn_tiers *t);
void rn_tiers_orphans_free(rn_tiers *t);

/* history.c: the read cache and the flush of stream history, made with the
 * cold store; stop closes the flush's timer; free releases everything. */
struct rn_history *rn_history_new(rn_tiers *t, uint64_t cache_bytes);
void rn_history_stop(struct rn_history *h);
void rn_history_free(struct rn_history *h);
/* 1 with *id when key names a history object ("history/<id>/<chunk>"). */
int rn_history_key_stream(const char *key, uint64_t *id);

#define RN_TIERS_BODY_PREFIX "snapshots/"  /* where bodies are, in both stores */
#define RN_TIERS_HISTORY_PREFIX "history/" /* where history objects are (history.c) */

#endif
