/*
 * metrics.h — the process's counters, for the Prometheus endpoint
 * (ops/metrics.c renders them). Every counter is written only by the loop
 * thread (the log's worker reports sync times through the loop), so plain
 * increments suffice: no lock and no shared cache line with other threads
 * on the request path.
 */
#ifndef RN_METRICS_H
#define RN_METRICS_H

#include <stdint.h>

/* Request routes, as the router classifies them. */
typedef enum {
    RN_ROUTE_OTHER,
    RN_ROUTE_V1,
    RN_ROUTE_BUCKET,      /* /{bucket}/{stream} */
    RN_ROUTE_SUBRESOURCE, /* snapshot, retention, bootstrap, immutable reads */
    RN_ROUTE_SUBS,        /* /v1/stream/__ds/ */
    RN_ROUTE_OPS,         /* /__runnel/ */
    RN_ROUTE_COUNT
} rn_route;

/* Calls of the cold store's S3 backend (tiers/s3store.c). */
typedef enum {
    RN_COLD_PUT,
    RN_COLD_GET,
    RN_COLD_HEAD,
    RN_COLD_LIST,
    RN_COLD_DELETE,
    RN_COLD_MULTIPART, /* create, part, part copy, complete */
    RN_COLD_OP_COUNT
} rn_cold_op;

#define RN_METHOD_SLOTS 7   /* rn_http_method values */
#define RN_STATUS_SLOTS 600 /* status codes 0..599 */
#define RN_SYNC_BUCKETS 16  /* sync latency: le 2^k * 64 us, k = 0..14, then +Inf */

typedef struct {
    uint64_t http_requests[RN_ROUTE_COUNT][RN_METHOD_SLOTS][RN_STATUS_SLOTS];
    uint64_t append_bytes, appends, append_messages; /* applied, with JSON messages counted */
    uint64_t read_bytes, reads;                      /* catch-up and long-poll bodies */
    uint64_t sse_bytes, sse_events;
    uint64_t wal_batches, wal_records, wal_bytes;
    /* large appends written once (engine/ahead.c): synced in their stream
     * file, logged as a reference */
    uint64_t appends_written_once, bytes_written_once;
    uint64_t appends_written_arriving;     /* of them, written as their body arrived */
    uint64_t wal_sync_le[RN_SYNC_BUCKETS]; /* per bucket (not cumulative) */
    uint64_t wal_sync_us_sum;
    uint64_t wal_sync_failures;
    uint64_t sub_deliveries, sub_delivery_failures;
    /* HTTP/2: connections and streams opened, control frames received
     * (PING, SETTINGS, RST_STREAM; acks excluded) and connections closed for
     * a flood of them */
    uint64_t h2_connections, h2_streams;
    uint64_t h2_ping_frames, h2_settings_frames, h2_rst_frames, h2_flood_closes;
    /* cluster mode: proposals (Raft entries) and the commands in them, and
     * the time from a proposal to its outcome (commit and apply here) */
    uint64_t raft_proposals, raft_commands;
    /* peers' asks for the streams of groups this node leads, answered in
     * full or with the changes since the asker's cursor (cluster/elsewhere.c) */
    uint64_t stream_asks_full, stream_asks_changes;
    uint64_t raft_commit_le[RN_SYNC_BUCKETS];
    uint64_t raft_commit_us_sum;
    /* the cold store's S3 calls: answers (each try), failed tries, time */
    uint64_t cold_requests[RN_COLD_OP_COUNT], cold_errors[RN_COLD_OP_COUNT];
    uint64_t cold_us_sum[RN_COLD_OP_COUNT];
    uint64_t cold_put_bytes, cold_get_bytes; /* objects written, bytes read */
    /* stream data checksums (tiers/blocksums.h, engine/damage.c) */
    uint64_t data_blocks_verified;
    uint64_t data_blocks_bad_read, data_blocks_bad_scrub; /* damaged blocks found */
    uint64_t data_blocks_repaired, data_blocks_unrepairable;
    uint64_t scrub_bytes, scrub_passes; /* checked by the scrub; its walks over every stream */
    uint64_t scrub_warmed;   /* ranges the scrub missed in the page cache, read in on a worker */
    uint64_t history_warmed; /* chunks the history flush missed there, read in on a worker */
    /* new streams' files (tiers/spares.h): sets made ahead, taken, and
     * first appends that found the reserve empty */
    uint64_t spare_file_sets_made, spare_file_sets_taken, spare_file_sets_missed;
    /* catch-up pieces not in the page cache, read into it on a worker
     * (engine/warm.c) instead of on the loop thread */
    uint64_t reads_warmed;
    /* the scrapes' walks over every stream (ops/store_gauges.c): walks
     * completed, and the slices the large ones were spread over */
    uint64_t gauge_walks, gauge_walk_slices;
    /* the operator's listings' walks (ops/admin_local.c): walks started,
     * and the slices the large ones were spread over */
    uint64_t admin_walks, admin_walk_slices;
} rn_metrics;

extern rn_metrics rn_metric;

/* Records one log sync that took `us` microseconds. */
void rn_metric_sync(uint64_t us);
/* Records one proposal's outcome, `us` microseconds after it was made. */
void rn_metric_commit(uint64_t us);

#endif
