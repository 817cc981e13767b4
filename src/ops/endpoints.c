/*
 * endpoints.c — /__runnel/livez, /__runnel/readyz, /__runnel/metrics and
 * the test hooks. See endpoints.h.
 *
 * Readiness: 200 once recovery finished and the cold store confirmed the
 * claim (coldclaim.h), and while the data directory probe (probe.h)
 * reads; else 503 with the reason in the body.
 *
 * Metrics are rendered in the Prometheus text format from the counters of
 * util/metrics.h plus gauges read at scrape time (streams, producers and
 * stored bytes come from a walk over the engine's streams, store_gauges.h,
 * spread over loop turns when the store is large; it takes no lock and
 * changes nothing).
 */
#include "ops/endpoints.h"
#include "live/live.h"
#include "ops/backup.h"
#include "ops/coldclaim.h"
#include "ops/store_gauges.h"
#include "surface/admin.h"
#include "protocol/reply.h"
#include "tiers/streamfiles.h"
#include "tiers/tiers.h"
#include "util/metrics.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void answer_text(rn_request *req, int status, const char *content_type, rn_buf *body) {
    rn_buf h = {0};
    rn_reply_common(&h);
    rn_buf_appendf(&h, "Content-Type: %s\r\nCache-Control: no-store\r\n", content_type);
    rn_http_respond(req, status, &h, body);
}

static void metric(rn_buf *b, const char *name, const char *type, const char *help, uint64_t v) {
    rn_buf_appendf(b, "# HELP %s %s\n# TYPE %s %s\n%s %llu\n", name, help, name, type, name,
                   (unsigned long long)v);
}

/* History tiering: where the stream bytes are, the read cache, the flush. */
static void history_metrics(rn_buf *b, const rn_endpoints *ep, uint64_t cold_bytes) {
    rn_tiers_history_stats st = {0};
    if (ep->tiers)
        rn_tiers_history_stats_get(ep->tiers, &st);
    metric(b, "runnel_history_cold_bytes", "gauge",
           "Retained stream bytes in the cold store (history tiering).", cold_bytes);
    metric(b, "runnel_history_cached_bytes", "gauge",
           "History chunks from the cold store in the read cache.", st.cached_bytes);
    metric(b, "runnel_history_flush_lag_bytes", "gauge",
           "Stream bytes in whole chunks waiting to move to the cold store.",
           ep->ready ? rn_engine_cold_backlog(ep->engine) : 0);
    metric(b, "runnel_history_flushed_bytes_total", "counter",
           "Stream bytes moved to the cold store.", st.flushed_bytes);
    metric(b, "runnel_history_flush_failures_total", "counter",
           "Moves to the cold store that failed (retried).", st.flush_failures);
    metric(b, "runnel_history_cache_hits_total", "counter",
           "Reads of cold history found in the read cache (one per chunk read).", st.hits);
    metric(b, "runnel_history_cache_misses_total", "counter",
           "Reads of cold history that had to fetch their chunk.", st.misses);
    metric(b, "runnel_history_fetches_total", "counter",
           "History chunks fetched from the cold store.", st.fetches);
    metric(b, "runnel_history_fetch_failures_total", "counter",
           "History chunk fetches that failed.", st.fetch_failures);
}

/* The cold store's S3 calls, one sample per operation. */
static void cold_store_metrics(rn_buf *b) {
    static const char *const ops[RN_COLD_OP_COUNT] = {"put",  "get",    "head",
                                                      "list", "delete", "multipart"};
    static const struct {
        const char *name, *type, *help;
    } families[] = {
        {"runnel_cold_store_requests_total", "counter", "S3 calls of the cold store answered."},
        {"runnel_cold_store_errors_total", "counter", "S3 calls of the cold store that failed."},
        {"runnel_cold_store_request_seconds_total", "counter",
         "Time the cold store's S3 calls took, summed."},
    };
    for (size_t f = 0; f < sizeof families / sizeof families[0]; f++) {
        rn_buf_appendf(b, "# HELP %s %s\n# TYPE %s %s\n", families[f].name, families[f].help,
                       families[f].name, families[f].type);
        for (int op = 0; op < RN_COLD_OP_COUNT; op++) {
            if (f == 2)
                rn_buf_appendf(b, "%s{op=\"%s\"} %.6f\n", families[f].name, ops[op],
                               (double)rn_metric.cold_us_sum[op] / 1e6);
            else
                rn_buf_appendf(b, "%s{op=\"%s\"} %llu\n", families[f].name, ops[op],
                               (unsigned long long)(f == 0 ? rn_metric.cold_requests[op]
                                                           : rn_metric.cold_errors[op]));
        }
    }
    metric(b, "runnel_cold_store_put_bytes_total", "counter",
           "Bytes written to the cold store's S3 objects.", rn_metric.cold_put_bytes);
    metric(b, "runnel_cold_store_get_bytes_total", "counter",
           "Bytes read from the cold store's S3 objects.", rn_metric.cold_get_bytes);
}

static void checksum_metrics(rn_buf *b) {
    metric(b, "runnel_data_blocks_verified_total", "counter",
           "Stream data blocks whose checksum a read or the scrub checked.",
           rn_metric.data_blocks_verified);
    metric(b, "runnel_data_blocks_damaged_read_total", "counter",
           "Stream data blocks a read found not matching their checksum.",
           rn_metric.data_blocks_bad_read);
    metric(b, "runnel_data_blocks_damaged_scrub_total", "counter",
           "Stream data blocks the scrub found not matching their checksum.",
           rn_metric.data_blocks_bad_scrub);
    metric(b, "runnel_data_blocks_repaired_total", "counter",
           "Damaged stream data blocks rewritten with bytes fetched from a peer.",
           rn_metric.data_blocks_repaired);
    metric(b, "runnel_data_blocks_unrepairable_total", "counter",
           "Damaged stream data blocks found with no other copy to repair them from.",
           rn_metric.data_blocks_unrepairable);
    metric(b, "runnel_scrub_bytes_total", "counter", "Stream data bytes the scrub checked.",
           rn_metric.scrub_bytes);
    metric(b, "runnel_scrub_passes_total", "counter",
           "Walks of the scrub over every stream's data it finished.", rn_metric.scrub_passes);
    metric(b, "runnel_history_warmed_total", "counter",
           "Chunks the history flush found out of the page cache, read from the disk on a worker "
           "thread.",
           rn_metric.history_warmed);
    metric(b, "runnel_scrub_warmed_total", "counter",
           "Ranges the scrub found out of the page cache, read from the disk on a worker thread.",
           rn_metric.scrub_warmed);
    metric(b, "runnel_spare_file_sets_made_total", "counter",
           "Empty stream file sets made ahead for new streams.", rn_metric.spare_file_sets_made);
    metric(b, "runnel_spare_file_sets_taken_total", "counter",
           "New streams whose files were a spare set.", rn_metric.spare_file_sets_taken);
    metric(b, "runnel_spare_file_sets_missed_total", "counter",
           "New streams that found no spare set and waited for their files.",
           rn_metric.spare_file_sets_missed);
    metric(b, "runnel_reads_warmed_total", "counter",
           "Catch-up pieces not in the page cache, read from the disk on a worker thread.",
           rn_metric.reads_warmed);
    metric(b, "runnel_stream_files_opened_total", "counter",
           "Stream files opened (data, index and checksums); an append to a stream whose files "
           "are open opens none.",
           rn_streamfiles_opened());
}

static uint64_t resident_bytes(void) {
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long long size = 0, rss = 0;
    if (f) {
        if (fscanf(f, "%llu %llu", &size, &rss) != 2)
            rss = 0;
        fclose(f);
    }
    return rss * (uint64_t)sysconf(_SC_PAGESIZE);
}

/* A histogram of microsecond observations in RN_SYNC_BUCKETS buckets
 * (le 2^k * 64 us, then +Inf), rendered in seconds. */
static void histogram(rn_buf *b, const char *name, const char *help,
                      const uint64_t le[RN_SYNC_BUCKETS], uint64_t us_sum) {
    rn_buf_appendf(b, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
    uint64_t cum = 0;
    for (int k = 0; k < RN_SYNC_BUCKETS; k++) {
        cum += le[k];
        if (k == RN_SYNC_BUCKETS - 1)
            rn_buf_appendf(b, "%s_bucket{le=\"+Inf\"} %llu\n", name, (unsigned long long)cum);
        else
            rn_buf_appendf(b, "%s_bucket{le=\"%.6f\"} %llu\n", name, (double)(64ull << k) / 1e6,
                           (unsigned long long)cum);
    }
    rn_buf_appendf(b, "%s_sum %.6f\n%s_count %llu\n", name, (double)us_sum / 1e6, name,
                   (unsigned long long)cum);
}

static void render(rn_buf *b, const rn_endpoints *ep, const rn_store_gauges *g) {
    static const char *const routes[RN_ROUTE_COUNT] = {
        "other", "v1", "bucket", "subresource", "subscriptions", "ops"};
    static const char *const methods[RN_METHOD_SLOTS] = {"OTHER", "GET",    "HEAD",   "POST",
                                                         "PUT",   "DELETE", "OPTIONS"};
    rn_buf_append_str(b, "# HELP runnel_http_requests_total Answered requests by route, method "
                         "and status.\n# TYPE runnel_http_requests_total counter\n");
    for (int r = 0; r < RN_ROUTE_COUNT; r++)
        for (int m = 0; m < RN_METHOD_SLOTS; m++)
            for (int st = 0; st < RN_STATUS_SLOTS; st++)
                if (rn_metric.http_requests[r][m][st])
                    rn_buf_appendf(b,
                                   "runnel_http_requests_total{route=\"%s\",method=\"%s\","
                                   "status=\"%d\"} %llu\n",
                                   routes[r], methods[m], st,
                                   (unsigned long long)rn_metric.http_requests[r][m][st]);
    metric(b, "runnel_appends_total", "counter", "Applied appends (with data).", rn_metric.appends);
    metric(b, "runnel_append_bytes_total", "counter", "Stored bytes of applied appends.",
           rn_metric.append_bytes);
    metric(b, "runnel_append_messages_total", "counter",
           "Messages of applied appends (JSON messages; one per append otherwise).",
           rn_metric.append_messages);
    metric(b, "runnel_reads_total", "counter", "Catch-up and long-poll responses with data.",
           rn_metric.reads);
    metric(b, "runnel_read_bytes_total", "counter", "Stream bytes sent by catch-up and long-poll.",
           rn_metric.read_bytes);
    metric(b, "runnel_sse_events_total", "counter", "SSE data events sent.", rn_metric.sse_events);
    metric(b, "runnel_sse_bytes_total", "counter", "Stream bytes sent in SSE data events.",
           rn_metric.sse_bytes);
    metric(b, "runnel_http2_connections_total", "counter", "HTTP/2 connections opened.",
           rn_metric.h2_connections);
    metric(b, "runnel_http2_streams_total", "counter", "HTTP/2 streams (requests) opened.",
           rn_metric.h2_streams);
    metric(b, "runnel_http2_ping_frames_total", "counter", "HTTP/2 PING frames received.",
           rn_metric.h2_ping_frames);
    metric(b, "runnel_http2_settings_frames_total", "counter",
           "HTTP/2 SETTINGS frames received (acks excluded).", rn_metric.h2_settings_frames);
    metric(b, "runnel_http2_rst_frames_total", "counter", "HTTP/2 RST_STREAM frames received.",
           rn_metric.h2_rst_frames);
    metric(b, "runnel_http2_flood_closes_total", "counter",
           "HTTP/2 connections closed for sending control frames past "
           "--http2-max-control-frames a second, or for a flood nghttp2 detected.",
           rn_metric.h2_flood_closes);
    metric(b, "runnel_wal_batches_total", "counter", "Log group-commit batches.",
           rn_metric.wal_batches);
    metric(b, "runnel_wal_records_total", "counter",
           "Log records written (records / batches = batch size).", rn_metric.wal_records);
    metric(b, "runnel_wal_bytes_total", "counter", "Log bytes made durable.", rn_metric.wal_bytes);
    metric(b, "runnel_appends_written_once_total", "counter",
           "Large appends synced in their stream file and logged as a reference "
           "(--large-append-bytes).",
           rn_metric.appends_written_once);
    metric(b, "runnel_bytes_written_once_total", "counter",
           "Bytes of those appends (written to the disk once, not to the log).",
           rn_metric.bytes_written_once);
    metric(b, "runnel_appends_written_arriving_total", "counter",
           "Of those appends, the ones written to their stream file while their body arrived.",
           rn_metric.appends_written_arriving);
    metric(b, "runnel_wal_sync_failures_total", "counter",
           "Log batches whose write or sync failed.", rn_metric.wal_sync_failures);
    histogram(b, "runnel_wal_sync_seconds", "Time of a batch's write and fdatasync.",
              rn_metric.wal_sync_le, rn_metric.wal_sync_us_sum);
    if (ep->cluster_metrics) {
        metric(b, "runnel_cluster_proposals_total", "counter",
               "Raft entries proposed (each holds the commands of one loop turn and group).",
               rn_metric.raft_proposals);
        metric(b, "runnel_cluster_commands_total", "counter",
               "Commands proposed (commands / proposals = batch size).", rn_metric.raft_commands);
        metric(b, "runnel_cluster_stream_asks_full_total", "counter",
               "Peers' asks for the streams of groups led here answered with every stream.",
               rn_metric.stream_asks_full);
        metric(b, "runnel_cluster_stream_asks_changes_total", "counter",
               "The same asks answered with only the streams changed since the asker's cursor.",
               rn_metric.stream_asks_changes);
        histogram(b, "runnel_cluster_proposal_seconds",
                  "Time from a proposal to its outcome (committed and applied here, or not).",
                  rn_metric.raft_commit_le, rn_metric.raft_commit_us_sum);
        ep->cluster_metrics(ep->cluster_ctx, b);
    }
    metric(b, "runnel_subscription_deliveries_total", "counter", "Webhook deliveries answered 2xx.",
           rn_metric.sub_deliveries);
    metric(b, "runnel_subscription_delivery_failures_total", "counter",
           "Webhook delivery attempts that failed.", rn_metric.sub_delivery_failures);
    metric(b, "runnel_streams", "gauge", "Visible streams.", g->streams);
    metric(b, "runnel_producers", "gauge", "Idempotent producers with state.", g->producers);
    metric(b, "runnel_hot_bytes", "gauge", "Retained stream bytes in local stream files.",
           g->hot_bytes);
    history_metrics(b, ep, g->history_cold_bytes);
    metric(b, "runnel_snapshot_bytes", "gauge", "Snapshot bodies in the local snapshot store.",
           g->snapshot_bytes);
    metric(b, "runnel_cold_bytes", "gauge", "Snapshot bodies in the cold store.", g->cold_bytes);
    metric(b, "runnel_gauge_walks_total", "counter",
           "Walks over every stream for these gauges (one per scrape, or shared by the "
           "scrapes during a walk).",
           rn_metric.gauge_walks);
    metric(b, "runnel_gauge_walk_slices_total", "counter",
           "Loop turns the walks over a large store were spread over.",
           rn_metric.gauge_walk_slices);
    metric(b, "runnel_admin_walks_total", "counter",
           "Walks over every stream for the operator's listings of buckets, streams and usage.",
           rn_metric.admin_walks);
    metric(b, "runnel_admin_walk_slices_total", "counter",
           "Loop turns the listings' walks over a large store were spread over.",
           rn_metric.admin_walk_slices);
    cold_store_metrics(b);
    checksum_metrics(b);
    metric(b, "runnel_live_readers", "gauge", "Parked long-poll and SSE readers.",
           ep->ready ? rn_live_count(ep->live) : 0);
    metric(b, "runnel_open_connections", "gauge", "Open client connections.",
           rn_http_connections(ep->http));
    metric(b, "runnel_answer_bytes_in_flight", "gauge",
           "Answer bytes queued for clients that have not taken them.",
           rn_http_answer_bytes_held(ep->http));
    metric(b, "runnel_process_resident_bytes", "gauge", "Resident memory of the process.",
           resident_bytes());
    if (ep->gate)
        rn_gate_metrics(ep->gate, b);
    char why[512];
    metric(b, "runnel_ready", "gauge", "1 while /__runnel/readyz answers 200.",
           (uint64_t)(ep->ready && !rn_probe_failing(ep->probe, why, sizeof why)));
}

typedef struct {
    rn_request *req;
    const rn_endpoints *ep;
} scrape;

static void scraped(void *arg, const rn_store_gauges *g) {
    scrape *sc = arg;
    if (g && !rn_request_gone(sc->req)) {
        rn_buf body = {0};
        render(&body, sc->ep, g);
        answer_text(sc->req, 200, "text/plain; version=0.0.4", &body);
    } /* else the server stops: the connections close unanswered */
    rn_request_release(sc->req);
    free(sc);
}

/* 1 with why when something holds readiness back (recovered or not). */
static int not_ready(const rn_endpoints *ep, char *why, size_t cap) {
    int failing = rn_probe_failing(ep->probe, why, cap);
    if (!failing && !ep->ready && rn_cold_claim_why(ep->claim, why, cap))
        failing = 1; /* recovered or not, the cold store holds the start */
    if (!failing && ep->ready && ep->cluster_ready)
        failing = !ep->cluster_ready(ep->cluster_ctx, why, cap);
    return failing;
}

int rn_endpoints_ready(void *arg) {
    const rn_endpoints *ep = arg;
    char why[512];
    return ep->ready && !not_ready(ep, why, sizeof why);
}

/* True when path is `name` or under `name`/. */
static int is_under(const char *path, size_t len, const char *name) {
    size_t n = strlen(name);
    return len >= n && memcmp(path, name, n) == 0 && (len == n || path[n] == '/');
}

bool rn_endpoints_on_listener(const rn_endpoints *ep, rn_request *req) {
    if (!ep->peer_listener || (req->route_flags & RN_REQUEST_PEER_LISTENER))
        return true;
    rn_reply_error(req, RN_E_PEER_LISTENER_ONLY, NULL);
    return false;
}

/* An operator route's check: on the right listener, with the admin
 * token. False after answering the refusal. */
static bool operator_allowed(const rn_endpoints *ep, rn_request *req) {
    return rn_endpoints_on_listener(ep, req) && rn_admin_authorize(ep->admin, req);
}

void rn_endpoints_handle(rn_request *req, const char *path, size_t path_len, const char *query,
                         size_t query_len, void *arg) {
    rn_endpoints *ep = arg;
    rn_buf body = {0};
    int get = req->method == RN_HTTP_GET || req->method == RN_HTTP_HEAD;
    if (get && path_len == 5 && memcmp(path, "livez", 5) == 0) {
        /* the request limit, which a gateway in front must not exceed */
        rn_buf h = {0};
        rn_reply_common(&h);
        rn_buf_appendf(&h,
                       "Content-Type: text/plain\r\nCache-Control: no-store\r\n"
                       "Ursula-Max-Request-Bytes: %llu\r\n",
                       (unsigned long long)ep->max_body_bytes);
        rn_buf_append_str(&body, "ok\n");
        rn_http_respond(req, 200, &h, &body);
    } else if (get && path_len == 6 && memcmp(path, "readyz", 6) == 0) {
        char why[512];
        int failing = not_ready(ep, why, sizeof why);
        if (failing)
            rn_buf_appendf(&body, "not ready: %s\n", why);
        else
            rn_buf_append_str(&body, ep->ready ? "ready\n" : "recovering\n");
        answer_text(req, ep->ready && !failing ? 200 : 503, "text/plain", &body);
    } else if (get && path_len == 7 && memcmp(path, "metrics", 7) == 0) {
        if (ep->metrics_need_token && !operator_allowed(ep, req))
            return;
        if (ep->ready && ep->gauges) {
            scrape *sc = rn_xmalloc(sizeof *sc);
            *sc = (scrape){.req = req, .ep = ep};
            rn_request_hold(req);
            rn_gauge_walk_ask(ep->gauges, scraped, sc);
        } else {
            rn_store_gauges none = {0};
            render(&body, ep, &none);
            answer_text(req, 200, "text/plain; version=0.0.4", &body);
        }
    } else if (req->method == RN_HTTP_POST && path_len == 6 && memcmp(path, "backup", 6) == 0) {
        rn_buf_free(&body);
        if (!operator_allowed(ep, req))
            return;
        if (!ep->ready)
            rn_reply_error(req, RN_E_RECOVERING, NULL);
        else if (!ep->backups)
            rn_reply_error(req, RN_E_NO_BACKUP_TARGET, NULL);
        else
            rn_backups_handle(ep->backups, req, query, query_len);
    } else if (ep->console_route && is_under(path, path_len, "console")) {
        rn_buf_free(&body);
        /* static files: no credential, even while recovering; on the
         * listener of the operator routes it talks to */
        if (rn_endpoints_on_listener(ep, req))
            ep->console_route(req, path, path_len);
    } else if (is_under(path, path_len, "admin")) {
        rn_buf_free(&body);
        if (!rn_endpoints_on_listener(ep, req)) {
            /* answered 404: the operator's plane is on the peer listener */
        } else if (ep->ready && ep->admin_route) {
            ep->admin_route(ep->admin_ctx, req, path, path_len, query, query_len);
        } else if (rn_admin_authorize(ep->admin, req)) {
            rn_buf extra = {0};
            rn_buf_append_str(&extra, "Retry-After: 1\r\n");
            rn_reply_error(req, RN_E_RECOVERING, &extra);
        }
    } else if (ep->ready && ep->cluster_route &&
               ep->cluster_route(ep->cluster_ctx, req, path, path_len, query, query_len)) {
        rn_buf_free(&body);
    } else if (ep->ready) {
        if (operator_allowed(ep, req)) /* the test hooks change state */
            rn_admin_handle(ep->surface, req, ep->test_hooks, path, path_len, query, query_len);
    } else {
        rn_reply_error(req, RN_E_NOT_FOUND, NULL);
    }
}
