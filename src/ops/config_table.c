/*
 * config_table.c — the settings table (see config_table.h): every setting
 * of runnel serve and runnel gateway, and which command takes which.
 */
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#include "ops/config_table.h"

#include <sched.h>
#include <string.h>
#include <unistd.h>

/* Which commands take a setting: serve's alone (most of them), the
 * gateway's alone, or both (the lists after the table). */
enum { FOR_SERVE, FOR_GATEWAY, FOR_BOTH };

#define U64(name, env, field, def, min, max, help)                                                 \
    { name, env, KIND_U64, offsetof(rn_config, field), def, min, max, NULL, help, NULL }
#define BOOL(name, env, field, def, help)                                                          \
    { name, env, KIND_BOOL, offsetof(rn_config, field), def, 0, 1, NULL, help, NULL }

/* The CPUs this process may run on. */
static uint64_t usable_cpus(void) {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0)
        return (uint64_t)CPU_COUNT(&set);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (uint64_t)n : 1;
}

uint64_t rn_config_cpus_default(const setting *s) {
    uint64_t n = usable_cpus();
    n = n > s->def ? n - s->def : 0;
    return n < s->min ? s->min : n > s->max ? s->max : n;
}

static const setting SETTINGS_TABLE[] = {
    {"config", "RUNNEL_CONFIG", KIND_PATH, offsetof(rn_config, config_file), 0, 0, 0, NULL,
     "configuration file: lines of `key = value` with the options' names as keys", NULL},
    BOOL("print-config", "RUNNEL_PRINT_CONFIG", print_config, 0,
         "print the effective configuration and exit"),
    {"log-format", "RUNNEL_LOG_FORMAT", KIND_CHOICE, offsetof(rn_config, log_format), 0, 0, 0,
     "text", "log lines as text or json", "text|json"},
    {"log-level", "RUNNEL_LOG_LEVEL", KIND_CHOICE, offsetof(rn_config, log_level), 0, 0, 0, "info",
     "lowest level logged", "debug|info|warn|error"},
    BOOL("access-log", "RUNNEL_ACCESS_LOG", access_log, 0,
         "log one line per answered request (method, path without query, status, bytes, "
         "microseconds)"),
    {"listen", "RUNNEL_LISTEN", KIND_LISTEN, offsetof(rn_config, listen), 0, 0, 0, "127.0.0.1:4437",
     "HOST:PORT to listen on (IPv6 as [::1]:PORT)", NULL},
    {"peer-listen", "RUNNEL_PEER_LISTEN", KIND_LISTEN, offsetof(rn_config, peer_listen), 0, 0, 0,
     "",
     "HOST:PORT of a second listener, for peer and operator traffic only (the cluster's peer "
     "routes, membership, backups, test hooks): --listen then answers those 404, and this one "
     "answers every other route 404; it speaks TLS with --peer-cert when given, else with "
     "--tls-cert when given; empty: one listener for everything",
     NULL},
    {"tls-cert", "RUNNEL_TLS_CERT", KIND_PATH, offsetof(rn_config, tls_cert), 0, 0, 0, NULL,
     "PEM certificate chain (leaf first): the port speaks TLS 1.2/1.3 (https) instead of "
     "cleartext; with --tls-key; both files are read again on SIGHUP",
     NULL},
    {"tls-key", "RUNNEL_TLS_KEY", KIND_PATH, offsetof(rn_config, tls_key), 0, 0, 0, NULL,
     "PEM private key of --tls-cert", NULL},
    {"tls-ca", "RUNNEL_TLS_CA", KIND_PATH, offsetof(rn_config, tls_ca), 0, 0, 0, NULL,
     "cluster mode: PEM CA certificates that the requests to peers' https URLs trust (default: "
     "the system's)",
     NULL},
    {"admin-token-file", "RUNNEL_ADMIN_TOKEN_FILE", KIND_PATH,
     offsetof(rn_config, admin_token_file), 0, 0, 0, NULL,
     "file holding the admin token (16 to 1024 bytes, mode 600): the operator routes under "
     "/__runnel/ (backups, membership changes, test hooks) then need Authorization: Bearer "
     "<token>; empty: they are open",
     NULL},
    BOOL("metrics-need-token", "RUNNEL_METRICS_NEED_TOKEN", metrics_need_token, 0,
         "/__runnel/metrics needs the admin token too (with --admin-token-file)"),
    {"cluster-key-file", "RUNNEL_CLUSTER_KEY_FILE", KIND_PATH,
     offsetof(rn_config, cluster_key_file), 0, 0, 0, NULL,
     "cluster mode: file holding the cluster key (16 to 1024 bytes, mode 600), the same on "
     "every node: every Raft port connection and every peer request proves it; empty: peers "
     "are not authenticated",
     NULL},
    {"peer-cert", "RUNNEL_PEER_CERT", KIND_PATH, offsetof(rn_config, peer_cert), 0, 0, 0, NULL,
     "cluster mode: this node's PEM certificate chain for mutual TLS between nodes, issued by "
     "--peer-ca and naming the node as its URI subject alternative name runnel-node:ID: every "
     "Raft port connection runs inside TLS and proves which node it is, and so does every peer "
     "request (its client certificate); with --peer-key and --peer-ca; not with "
     "--cluster-key-file",
     NULL},
    {"peer-key", "RUNNEL_PEER_KEY", KIND_PATH, offsetof(rn_config, peer_key), 0, 0, 0, NULL,
     "PEM private key of --peer-cert", NULL},
    {"peer-ca", "RUNNEL_PEER_CA", KIND_PATH, offsetof(rn_config, peer_ca), 0, 0, 0, NULL,
     "PEM certificates of the cluster's CA: a peer's certificate must verify against them", NULL},
    {"data-dir", "RUNNEL_DATA_DIR", KIND_PATH, offsetof(rn_config, data_dir), 0, 0, 0,
     "./runnel-data", "directory of the embedded store (created if missing)", NULL},
    {"cluster-id", "RUNNEL_CLUSTER_ID", KIND_TEXT, offsetof(rn_config, cluster_id), 0, 0, 0, "",
     "Ursula-Cluster-Id to send (default: generated once, kept in the data dir)", NULL},
    U64("node-id", "RUNNEL_NODE_ID", node_id, 0, 0, 255,
        "cluster mode: this node's id (1 to 255), unique in the cluster; 0: a single node"),
    {"peer", "RUNNEL_PEER", KIND_PEER, offsetof(rn_config, peers), 0, 0, 0, NULL,
     "cluster mode: N=RAFTADDR,URL[,PEERURL] for every node, this one included (repeat the "
     "option, or the key in the file; RUNNEL_PEER takes them separated by spaces): its id, the "
     "numeric host:port of its Raft port, its public base URL and, when it has a "
     "--peer-listen, that listener's base URL (its peers' requests go there)",
     NULL},
    U64("groups", "RUNNEL_GROUPS", groups, 16, 1, 256,
        "cluster mode: number of Raft groups streams are spread over; the same on every node and "
        "at every start"),
    U64("replicas", "RUNNEL_REPLICAS", replicas, 3, 1, 7,
        "cluster mode: each group is on this many nodes (fewer while the cluster has fewer); "
        "the cluster records it when it is first made, from the node that makes it"),
    U64("move-rate-bytes", "RUNNEL_MOVE_RATE_BYTES", move_rate_bytes, 33554432, 0, 1ull << 40,
        "cluster mode: bytes per second a node fetches from its peers (a replica placed on it, "
        "bytes a snapshot named that it lacks), so moves leave the disks and network to "
        "foreground requests; 0: as fast as peers answer"),
    U64("election-timeout-ms", "RUNNEL_ELECTION_TIMEOUT_MS", election_timeout_ms, 1000, 50, 60000,
        "cluster mode: a follower that hears no leader for 1-2 times this starts an election"),
    BOOL("join", "RUNNEL_JOIN", join, 0,
         "cluster mode: this node joins a running cluster: its groups wait to be added "
         "(POST /__runnel/cluster/members on a node of the cluster) rather than start with the "
         "peers as voters"),
    BOOL("forward-writes", "RUNNEL_FORWARD_WRITES", forward_writes, 1,
         "cluster mode: a write for a group another node leads is forwarded to that leader and "
         "its answer relayed (the body streamed through), instead of answered 307 (for clients "
         "that cannot follow a redirect with a body); a write carrying Runnel-No-Forward (a "
         "forwarded one, or a router's that learns leaders) is answered 307 instead"),
    {"follower-reads", "RUNNEL_FOLLOWER_READS", KIND_CHOICE, offsetof(rn_config, follower_reads), 0,
     0, 0, "confirm",
     "cluster mode: a read on a follower that does not ask consistency=local waits until the "
     "follower applied what the group's leader had committed when the read arrived (confirm: "
     "read-your-writes through any node), or is answered from what it applied at once (local)",
     "confirm|local"},
    U64("raft-snapshot-entries", "RUNNEL_RAFT_SNAPSHOT_ENTRIES", snapshot_entries, 1024, 4, 1000000,
        "cluster mode: a group snapshots its streams' metadata (a manifest) after this many "
        "applied entries and drops the log before it"),
    U64("raft-snapshot-trailing", "RUNNEL_RAFT_SNAPSHOT_TRAILING", snapshot_trailing, 128, 1,
        1000000,
        "cluster mode: entries a group keeps behind its snapshot, so that a follower this far "
        "behind catches up from the log rather than from the snapshot and its peers' bytes"),
    U64("raft-snapshot-bytes", "RUNNEL_RAFT_SNAPSHOT_BYTES", snapshot_bytes, 64ull << 20, 0,
        1ull << 40,
        "cluster mode: a group also snapshots once the entries applied since its last snapshot "
        "hold this many bytes, and keeps behind it only the entries that fit in a quarter of "
        "it: a group's log is held in memory, so this bounds it whatever the appends' size (0: "
        "entries are counted only)"),
    U64("disk-reserve-bytes", "RUNNEL_DISK_RESERVE_BYTES", disk_reserve_bytes, 64ull << 20, 0,
        1ull << 40,
        "cluster mode: while the data directory's file system has less free, a leader refuses "
        "writes (503 WAL_DISK_PRESSURE), hands its groups to a healthy node and readyz says "
        "why; its last quarter (at most 16 MiB) is kept from the node's own log and data and "
        "held in the file 'reserve', released at every start; 0: no reserve"),
    U64("log-stall-ms", "RUNNEL_LOG_STALL_MS", log_stall_ms, 3000, 100, 600000,
        "cluster mode: a leader whose oldest pending Raft log write has waited this long (a "
        "full or slow disk) hands its groups to a healthy node, and readyz says why"),
    {"public-url", "RUNNEL_PUBLIC_URL", KIND_URL, offsetof(rn_config, public_url), 0, 0, 0, "",
     "http(s)://HOST[:PORT] clients reach this server at, for subscription callback and JWKS URLs "
     "(default: http://LISTEN)",
     NULL},
    BOOL("webhook-allow-loopback", "RUNNEL_WEBHOOK_ALLOW_LOOPBACK", webhook_allow_loopback, 0,
         "development only: allow webhook URLs on http(s)://localhost and 127.0.0.x"),
    U64("webhook-timeout-ms", "RUNNEL_WEBHOOK_TIMEOUT_MS", webhook_timeout_ms, 10000, 100, 600000,
        "how long one webhook delivery attempt may take before it counts as failed"),
    U64("max-subscriptions", "RUNNEL_MAX_SUBSCRIPTIONS", max_subscriptions, 10000, 1, 10000000,
        "most subscriptions this server holds; a create past it answers 429 "
        "SUBSCRIPTION_LIMIT"),
    U64("max-subscription-streams", "RUNNEL_MAX_SUBSCRIPTION_STREAMS", max_subscription_streams,
        100000, 1, 100000000,
        "most explicit streams all subscriptions name together (a pattern's links are bounded "
        "by the streams it matches); more answer 429 SUBSCRIPTION_STREAMS_LIMIT"),
    U64("long-poll-timeout-ms", "RUNNEL_LONG_POLL_TIMEOUT_MS", long_poll_timeout_ms, 30000, 1,
        3600000, "how long a long-poll waits for data before 204"),
    U64("sse-max-duration-ms", "RUNNEL_SSE_MAX_DURATION_MS", sse_max_duration_ms, 60000, 1,
        86400000, "SSE responses end after this long (clients reconnect)"),
    U64("max-body-bytes", "RUNNEL_MAX_BODY_BYTES", max_body_bytes, REQUEST_LIMIT, 1, REQUEST_LIMIT,
        "largest request body; larger ones get 413 unread. The protocol requires 32 MiB on "
        "every route: a lower value is a test setting, refused without --test-hooks"),
    U64("max-header-bytes", "RUNNEL_MAX_HEADER_BYTES", max_header_bytes, 16384, 1024, 1048576,
        "largest request line plus headers (431 beyond)"),
    U64("max-headers", "RUNNEL_MAX_HEADERS", max_headers, 100, 8, 10000,
        "most header fields in one request"),
    U64("max-connections", "RUNNEL_MAX_CONNECTIONS", max_connections, 10000, 1, 1000000,
        "open client connections; more are closed at accept"),
    U64("max-connections-per-ip", "RUNNEL_MAX_CONNECTIONS_PER_IP", max_connections_per_ip, 0, 0,
        1000000,
        "open connections from one client address; more are closed at accept (0: no bound; "
        "behind a proxy every client has the proxy's address)"),
    U64("http2-max-streams", "RUNNEL_HTTP2_MAX_STREAMS", http2_max_streams, 100, 1, 10000,
        "concurrent streams of one HTTP/2 connection (SETTINGS_MAX_CONCURRENT_STREAMS)"),
    U64("http2-max-header-list-bytes", "RUNNEL_HTTP2_MAX_HEADER_LIST_BYTES",
        http2_max_header_list_bytes, 16384, 1024, 1048576,
        "decoded header list of one HTTP/2 request (SETTINGS_MAX_HEADER_LIST_SIZE; 431 beyond)"),
    U64("http2-header-table-bytes", "RUNNEL_HTTP2_HEADER_TABLE_BYTES", http2_header_table_bytes,
        4096, 512, 65536, "HPACK dynamic table the server keeps per HTTP/2 connection"),
    U64("http2-max-control-frames", "RUNNEL_HTTP2_MAX_CONTROL_FRAMES", http2_max_control_frames,
        200, 10, 100000,
        "PING, SETTINGS and RST_STREAM frames one HTTP/2 connection may send per second; more "
        "close it (GOAWAY ENHANCE_YOUR_CALM: floods and rapid reset)"),
    U64("request-timeout-ms", "RUNNEL_REQUEST_TIMEOUT_MS", request_timeout_ms, 30000, 100, 3600000,
        "time to receive a whole request (408 beyond), plus what its body earns at "
        "--min-body-rate"),
    U64("min-body-rate", "RUNNEL_MIN_BODY_RATE", min_body_rate, 65536, 0, 1ull << 40,
        "bytes/s: each body byte received adds 1/rate s to the request timeout, so an upload "
        "keeping this rate is never cut; 0: the whole request within the timeout"),
    U64("idle-timeout-ms", "RUNNEL_IDLE_TIMEOUT_MS", idle_timeout_ms, 60000, 100, 3600000,
        "keep-alive connections idle this long are closed, and so is one whose client takes "
        "no byte of a waiting answer for this long"),
    U64("max-body-bytes-in-flight", "RUNNEL_MAX_BODY_BYTES_IN_FLIGHT", max_body_bytes_in_flight,
        536870912, 1048576, 1ull << 40,
        "request body bytes held in memory at once (declared lengths of bodies being received "
        "and bodies not yet answered); a request past it gets 503 "
        "INGRESS_BODY_BYTES_LIMIT_REACHED unread"),
    U64("max-answer-bytes-in-flight", "RUNNEL_MAX_ANSWER_BYTES_IN_FLIGHT",
        max_answer_bytes_in_flight, 268435456, 0, 1ull << 40,
        "answer bytes held in memory at once for clients that have not taken them; large "
        "answers (catch-up reads, snapshots) go out a piece at a time, 256 KiB, and past it "
        "64 KiB; 0: no bound"),
    U64("max-live-reads", "RUNNEL_MAX_LIVE_READS", max_live_reads, 8192, 1, 10000000,
        "parked long-polls and SSE readers in all; one more gets 503 LIVE_READ_BACKPRESSURE"),
    U64("max-live-reads-per-stream", "RUNNEL_MAX_LIVE_READS_PER_STREAM", max_live_reads_per_stream,
        4096, 1, 10000000,
        "parked long-polls and SSE readers of one stream; one more gets 503 "
        "LIVE_READ_BACKPRESSURE"),
    U64("max-read-bytes", "RUNNEL_MAX_READ_BYTES", max_read_bytes, 4194304, 1024, 67108864,
        "most stream bytes in one read response or SSE event"),
    U64("sse-queue-bytes", "RUNNEL_SSE_QUEUE_BYTES", sse_queue_bytes, 4194304, 65536, 1073741824,
        "unsent bytes at which an SSE reader is paused until its socket drains"),
    {"fanout-threads", "RUNNEL_FANOUT_THREADS", KIND_CPUS, offsetof(rn_config, fanout_threads), 1,
     0, 256, NULL,
     "helper threads that send with the loop thread when an append wakes many live readers (64 "
     "sockets or more); default: the CPUs this process may use, minus 1; 0: the loop thread "
     "sends alone",
     NULL},
    U64("wal-segment-bytes", "RUNNEL_WAL_SEGMENT_BYTES", wal_segment_bytes, 67108864, 1048576,
        1ull << 30, "log segment size before rotation (each is preallocated with zeros)"),
    U64("checkpoint-bytes", "RUNNEL_CHECKPOINT_BYTES", checkpoint_bytes, 268435456, 1048576,
        1ull << 40, "log bytes between checkpoints (bounds restart time)"),
    U64("large-append-bytes", "RUNNEL_LARGE_APPEND_BYTES", large_append_bytes, 1048576, 0,
        1ull << 40,
        "appends and creates with at least this much data are written once: synced in their "
        "stream file, then logged as a reference with the data's checksums, not written to the "
        "log too (single node; a cluster's log carries every byte to the replicas); a POST "
        "declaring this much (not JSON, without Producer-Digest) is written while its body "
        "arrives, its stream reserved from its head; 0: never"),
    U64("max-open-files", "RUNNEL_MAX_OPEN_FILES", max_open_files, 4096, 16, 1000000,
        "stream data files kept open"),
    U64("spare-stream-files", "RUNNEL_SPARE_STREAM_FILES", spare_stream_files, 256, 0, 65536,
        "sets of empty stream files made ahead, so that a new stream's first append does not "
        "wait for its files (0: made when needed)"),
    U64("scrub-bytes-per-second", "RUNNEL_SCRUB_BYTES_PER_SECOND", scrub_bytes_per_second, 1048576,
        0, 1ull << 34,
        "stream data bytes a background scrub checks against their checksums per second, "
        "walking every stream in turn (damage is repaired from a peer in a cluster, reported "
        "on a single node); 0: no scrub"),
    U64("expiry-sweep-ms", "RUNNEL_EXPIRY_SWEEP_MS", expiry_sweep_ms, 10000, 10, 3600000,
        "interval between passes of the sweep that deletes expired streams and idle producers' "
        "state (a pass goes over the streams a slice per loop turn)"),
    {"cold-store", "RUNNEL_COLD_STORE", KIND_BOOL, offsetof(rn_config, cold_store), 1, 0, 2, NULL,
     "keep large snapshot bodies and snapshot parts in a cold store: true, the local directory "
     "<data>/cold; s3, an S3 bucket (the --s3-* options; credentials from AWS_ACCESS_KEY_ID and "
     "AWS_SECRET_ACCESS_KEY or the AWS credentials file); false: none (parts answer 501)",
     "s3"},
    {"s3-endpoint", "RUNNEL_S3_ENDPOINT", KIND_URL, offsetof(rn_config, s3_endpoint), 0, 0, 0, "",
     "the S3 cold store's endpoint, http(s)://host[:port]; empty: AWS's for the region", NULL},
    {"s3-bucket", "RUNNEL_S3_BUCKET", KIND_TEXT, offsetof(rn_config, s3_bucket), 0, 0, 0, "",
     "the S3 cold store's bucket", NULL},
    {"s3-region", "RUNNEL_S3_REGION", KIND_TEXT, offsetof(rn_config, s3_region), 0, 0, 0, "",
     "the S3 cold store's region; empty: AWS_REGION, AWS_DEFAULT_REGION or the AWS config file",
     NULL},
    {"s3-prefix", "RUNNEL_S3_PREFIX", KIND_TEXT, offsetof(rn_config, s3_prefix), 0, 0, 0, "",
     "prepended to every object key of the S3 cold store: empty or ending in /", NULL},
    BOOL("s3-virtual-host", "RUNNEL_S3_VIRTUAL_HOST", s3_virtual_host, 0,
         "address the bucket as bucket.endpoint (virtual host); else endpoint/bucket (path style)"),
    U64("s3-part-bytes", "RUNNEL_S3_PART_BYTES", s3_part_bytes, 8388608, 5242880, 5368709120ull,
        "S3 objects larger are written as multipart uploads of parts this large"),
    U64("s3-timeout-ms", "RUNNEL_S3_TIMEOUT_MS", s3_timeout_ms, 30000, 100, 3600000,
        "each S3 call's timeout, plus its payload's time at 1 MiB/s"),
    U64("hot-bytes", "RUNNEL_HOT_BYTES", hot_bytes, 0, 0, 1ull << 50,
        "history tiering (needs --cold-store): every whole 4 MiB chunk of a stream below its "
        "tail moves to the cold store, and appends get 503 COLD_BACKPRESSURE while chunks "
        "waiting to move hold this many bytes; 0: history stays in the local stream files"),
    U64("history-cache-bytes", "RUNNEL_HISTORY_CACHE_BYTES", history_cache_bytes, 67108864,
        33554432, 1ull << 50,
        "history chunks fetched from the cold store that the read cache keeps on local disk; at "
        "least --max-read-bytes plus 16 MiB"),
    U64("producer-ttl-ms", "RUNNEL_PRODUCER_TTL_MS", producer_ttl_ms, 604800000, 100, 1ull << 40,
        "a producer's state is kept while it wrote within this long; idle state is discarded and "
        "raises the stream's epoch floor"),
    U64("producer-cap", "RUNNEL_PRODUCER_CAP", producer_cap, 4096, 1, 1000000,
        "producers a stream holds; one more displaces the least recently written one once it is "
        "idle for an hour (or --producer-ttl-ms when shorter), else gets 429"),
    U64("parts-grace-ms", "RUNNEL_PARTS_GRACE_MS", parts_grace_ms, 86400000, 1000, 1ull << 40,
        "staged snapshot parts no commit used are deleted after this long"),
    BOOL("test-hooks", "RUNNEL_TEST_HOOKS", test_hooks, 0,
         "enable /__runnel/test/ endpoints (history rewrites); never in production"),
    {"backup-to", "RUNNEL_BACKUP_TO", KIND_PATH, offsetof(rn_config, backup_to), 0, 0, 0, NULL,
     "where POST /__runnel/backup?name=NAME (runnel backup) writes a point-in-time copy of this "
     "node: a directory, or s3:PREFIX (PREFIX empty or ending in /) in the --s3-bucket over the "
     "--s3-* settings; empty: no backups",
     NULL},
    {"accept-loss", "RUNNEL_ACCEPT_LOSS", KIND_TEXT, offsetof(rn_config, accept_loss), 0, 0, 0, "",
     "when log recovery refuses to start because acknowledged records do not read back and "
     "names the damage (segment-N), start with that name to keep the log up to the damage, drop "
     "the rest and rewrite the history of every stream (new Stream-Incarnation, producers closed "
     "by history); ignored when the log is intact. Cluster mode: group-N,...[,meta] brings back "
     "the groups that lost their majority from this node's replica alone, rewriting the history "
     "of their streams (docs/CLUSTER_OPERATIONS.md)",
     NULL},
    U64("shutdown-grace-ms", "RUNNEL_SHUTDOWN_GRACE_MS", shutdown_grace_ms, 10000, 0, 600000,
        "how long SIGTERM waits for in-flight requests"),
    {"tenants", "RUNNEL_TENANTS", KIND_PATH, offsetof(rn_config, tenants), 0, 0, 0, NULL,
     "the tenants file (docs/GATEWAY.md): requests need a credential of one of its tenants, and "
     "get its rights, limits and quotas; read again on SIGHUP; with runnel serve, the gate runs "
     "in the node (empty: no gate, anyone who reaches the port may do anything)",
     NULL},
    U64("upload-budget-bytes", "RUNNEL_UPLOAD_BUDGET_BYTES", upload_budget_bytes, 0, 0, 1ull << 50,
        "with --tenants: declared request body bytes in flight at once over all tenants; one more "
        "gets 503 UPLOAD_BUDGET_EXHAUSTED (0: no bound)"),
    {"usage-log", "RUNNEL_USAGE_LOG", KIND_PATH, offsetof(rn_config, usage_log), 0, 0, 0, NULL,
     "with --tenants: a file of JSON lines, one per tenant and bucket each interval, with its "
     "requests, bytes in and out and refusals (empty: none)",
     NULL},
    U64("usage-log-max-bytes", "RUNNEL_USAGE_LOG_MAX_BYTES", usage_log_max_bytes, 67108864, 4096,
        1ull << 40, "the usage log is renamed to FILE.1 (replacing it) once this large"),
    U64("usage-log-interval-ms", "RUNNEL_USAGE_LOG_INTERVAL_MS", usage_log_interval_ms, 10000, 10,
        86400000, "how often the usage log gets its lines"),
    {"upstream", "RUNNEL_UPSTREAM", KIND_UPSTREAM, offsetof(rn_config, upstreams), 0, 0, 0, NULL,
     "a node's base URL, http://HOST:PORT (repeat it for every node of a cluster, or some of "
     "them; RUNNEL_UPSTREAM takes them separated by spaces)",
     NULL},
    {"upstream-timeout-ms", "RUNNEL_UPSTREAM_TIMEOUT_MS", KIND_U64,
     offsetof(rn_config, upstream_timeout_ms), 30000, 100, 3600000, NULL,
     "how long a node may take to start its answer (a long-poll: plus its wait) before 504 "
     "UPSTREAM_TIMEOUT",
     NULL},
    {"upstream-idle-ms", "RUNNEL_UPSTREAM_IDLE_MS", KIND_U64, offsetof(rn_config, upstream_idle_ms),
     20000, 100, 3600000, NULL,
     "an idle connection to a node is kept this long (keep it under the nodes' "
     "--idle-timeout-ms)",
     NULL},
    {"hold-body-bytes", "RUNNEL_HOLD_BODY_BYTES", KIND_U64, offsetof(rn_config, hold_body_bytes),
     1048576, 0, 33554432, NULL,
     "request bodies up to this are read whole and kept until their answer, so that a node's "
     "redirect can be followed; larger ones stream through",
     NULL},
    {"upstream-admin-token-file", "RUNNEL_UPSTREAM_ADMIN_TOKEN_FILE", KIND_PATH,
     offsetof(rn_config, upstream_admin_token_file), 0, 0, 0, NULL,
     "a file holding the nodes' admin token, sent with the operator routes the gateway forwards "
     "for a tenant with admin rights",
     NULL},
};
_Static_assert(sizeof SETTINGS_TABLE / sizeof SETTINGS_TABLE[0] <= RN_CONFIG_MAX_SETTINGS,
               "RN_CONFIG_MAX_SETTINGS bounds the table");
const setting *const SETTINGS = SETTINGS_TABLE;
const size_t NSETTINGS = sizeof SETTINGS_TABLE / sizeof SETTINGS_TABLE[0];

/* Settings runnel serve and runnel gateway both take; every other one is
 * serve's alone (or GATEWAY_ONLY's). */
static const char *const SHARED[] = {"config",
                                     "print-config",
                                     "log-format",
                                     "log-level",
                                     "access-log",
                                     "listen",
                                     "tls-cert",
                                     "tls-key",
                                     "max-body-bytes",
                                     "max-header-bytes",
                                     "max-headers",
                                     "max-connections",
                                     "max-connections-per-ip",
                                     "http2-max-streams",
                                     "http2-max-header-list-bytes",
                                     "http2-header-table-bytes",
                                     "http2-max-control-frames",
                                     "request-timeout-ms",
                                     "min-body-rate",
                                     "idle-timeout-ms",
                                     "max-body-bytes-in-flight",
                                     "max-answer-bytes-in-flight",
                                     "shutdown-grace-ms",
                                     "tenants",
                                     "upload-budget-bytes",
                                     "usage-log",
                                     "usage-log-max-bytes",
                                     "usage-log-interval-ms",
                                     NULL};

/* Settings runnel gateway takes alone. */
static const char *const GATEWAY_ONLY[] = {
    "upstream",        "upstream-timeout-ms",       "upstream-idle-ms",
    "hold-body-bytes", "upstream-admin-token-file", NULL};

static int scope_of(const setting *s) {
    for (const char *const *n = GATEWAY_ONLY; *n; n++)
        if (strcmp(*n, s->flag) == 0)
            return FOR_GATEWAY;
    for (const char *const *n = SHARED; *n; n++)
        if (strcmp(*n, s->flag) == 0)
            return FOR_BOTH;
    return FOR_SERVE;
}

int rn_config_takes(rn_config_scope scope, const setting *s) {
    int k = scope_of(s);
    return k == FOR_BOTH || (k == FOR_GATEWAY) == (scope == RN_CONFIG_GATEWAY);
}
