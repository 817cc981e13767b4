/*
 * tiers_int.h — the tiers service's state, shared by tiers.c (lifecycle,
 * snapshot bodies) and parts.c (staged parts). Private to src/tiers/.
 */
#ifndef RN_TIERS_INT_H
#define RN_TIERS_INT_H

#include "tiers/store.h"
#include "tiers/tiers.h"
#include "util/map.h"

struct rn_tiers {
    uv_loop_t *loop;
    rn_streamfiles *files;
    rn_store *local;      /* snapshot bodies below the cold threshold */
    rn_store *cold;       /* large bodies and staged parts; NULL without a cold store */
    uint64_t body_serial; /* makes body keys unique within a millisecond */
    uint64_t parts_grace_ms;
    uv_timer_t sweep; /* of staged parts, every parts_grace_ms / 4 */
    int started;
    rn_map staged; /* (stream, incarnation) -> staged parts (parts.c) */
};

/* A fresh key for a snapshot body of stream `stream`. */
void rn_tiers_body_key(rn_tiers *t, uint64_t stream, char out[RN_TIERS_KEY_MAX]);

/* parts.c: removes staged parts older than the grace period and forgets
 * the counts of idle incarnations; frees every count (at close). */
void rn_tiers_parts_sweep(rn_tiers *t);
void rn_tiers_parts_free(rn_tiers *t);

#endif
