/*
 * config.h — runnel serve's settings: one table defines every setting's
 * flag, environment variable, configuration-file key (the flag's name),
 * default, bounds and help text. Precedence: flags > environment >
 * configuration file (--config / RUNNEL_CONFIG) > defaults. Yes/no options
 * are `--name` or `--name=true|false` and true|false elsewhere (1|0 are
 * aliases); a file value may be enclosed in matching quotes, which are
 * removed.
 */
#ifndef RN_CONFIG_H
#define RN_CONFIG_H

#include <stddef.h>
#include <stdint.h>

/* One node of a cluster (--peer N=RAFTADDR,URL[,PEERURL]). */
typedef struct {
    uint64_t id;        /* 1..255 */
    char raft[64];      /* host:port of its Raft/peer port, numeric */
    char url[512];      /* its public base URL, without a trailing slash */
    char peer_url[512]; /* its peer listener's base URL (--peer-listen); "": url */
} rn_peer_config;

/* An address to listen on (--listen, --peer-listen). */
typedef struct {
    char host[256]; /* "": none (an optional listener) */
    int port;
} rn_listen_address;

#define RN_MAX_PEERS 32

typedef struct {
    rn_listen_address listen;      /* the public listener */
    rn_listen_address peer_listen; /* the peer and operator listener; host "": none */
    char data_dir[4096];
    char tls_cert[4096];         /* PEM certificate chain; empty: cleartext (with tls_key) */
    char tls_key[4096];          /* PEM private key of tls_cert */
    char tls_ca[4096];           /* CA file for https requests to peers; empty: the system's */
    char admin_token_file[4096]; /* the operator routes' token (ops/admin_auth.h); empty: open */
    int metrics_need_token;      /* /__runnel/metrics is an operator route too */
    char cluster_key_file[4096]; /* the cluster key (cluster/peer_auth.h); empty: none */
    char peer_cert[4096];        /* this node's certificate (cluster/peer_tls.h); empty: none */
    char peer_key[4096];         /* its private key */
    char peer_ca[4096];          /* the cluster's CA, which every peer's certificate verifies */
    char cluster_id[128];        /* empty: generated once and kept in the data dir */
    char public_url[512];        /* empty: http://<listen> */
    int webhook_allow_loopback;
    uint64_t webhook_timeout_ms;
    uint64_t max_subscriptions, max_subscription_streams;
    uint64_t long_poll_timeout_ms;
    uint64_t sse_max_duration_ms;
    uint64_t max_body_bytes;
    uint64_t max_header_bytes;
    uint64_t max_headers;
    uint64_t max_connections;
    uint64_t max_connections_per_ip;      /* 0: no bound */
    uint64_t http2_max_streams;           /* concurrent streams of one HTTP/2 connection */
    uint64_t http2_max_header_list_bytes; /* decoded header list of one HTTP/2 request */
    uint64_t http2_header_table_bytes;    /* HPACK dynamic table the server keeps */
    uint64_t http2_max_control_frames;    /* PING, SETTINGS, RST_STREAM per connection per s */
    uint64_t request_timeout_ms;
    uint64_t min_body_rate; /* body bytes/s that extend the request timeout (0: none) */
    uint64_t idle_timeout_ms;
    uint64_t max_body_bytes_in_flight;   /* request body bytes buffered at once (503 beyond) */
    uint64_t max_answer_bytes_in_flight; /* answer bytes queued for clients (reads shrink beyond) */
    uint64_t max_live_reads;             /* parked long-polls + SSE readers (503 beyond) */
    uint64_t max_live_reads_per_stream;  /* the same per stream (429 beyond) */
    uint64_t max_read_bytes;
    uint64_t sse_queue_bytes;
    uint64_t fanout_threads; /* helpers of the loop thread's fan-out writes; 0: none */
    uint64_t wal_segment_bytes;
    uint64_t checkpoint_bytes;
    uint64_t large_append_bytes; /* data written once from this size (0: never) */
    uint64_t max_open_files;
    uint64_t spare_stream_files;
    uint64_t expiry_sweep_ms;
    uint64_t scrub_bytes_per_second; /* the stream data scrub's rate; 0: off */
    uint64_t shutdown_grace_ms;
    int cold_store; /* RN_COLD_NONE, RN_COLD_LOCAL or RN_COLD_S3 */
    /* The S3 cold store (--cold-store=s3); credentials come from the AWS
     * environment or files (tiers/s3/creds.h), never from here. */
    char s3_endpoint[512]; /* "": https://s3.<region>.amazonaws.com */
    char s3_bucket[128];
    char s3_region[128]; /* "": AWS_REGION, AWS_DEFAULT_REGION or the AWS config file */
    char s3_prefix[128]; /* before every key: "" or ending in "/" */
    int s3_virtual_host; /* bucket.endpoint addressing (else path style) */
    uint64_t s3_part_bytes;
    uint64_t s3_timeout_ms;
    int test_hooks; /* enable /__runnel/test/ (history rewrites) */
    /* The log damage a start accepts (engine/damage_report.h names it;
     * KIND_TEXT: as long as cluster_id), or "" */
    char accept_loss[128];
    /* Where POST /__runnel/backup writes: a directory, or s3:PREFIX over
     * the --s3-* settings (ops/backup_format.h); "": no backups */
    char backup_to[4096];
    uint64_t parts_grace_ms;
    uint64_t hot_bytes;           /* history tiering's hot budget; 0: off */
    uint64_t history_cache_bytes; /* the read cache of history chunks */
    uint64_t producer_ttl_ms;     /* idle producer state is discarded after this (ext §5.4) */
    uint64_t producer_cap;        /* producers per stream */
    /* Cluster mode (--node-id given; see src/cluster/cluster_config.h). */
    uint64_t node_id; /* 0: single node */
    rn_peer_config peers[RN_MAX_PEERS];
    int n_peers;
    uint64_t groups;              /* Raft groups; the same on every node */
    uint64_t replicas;            /* replicas per group (recorded when the cluster is made) */
    uint64_t move_rate_bytes;     /* bytes/s a node fetches from its peers; 0: unpaced */
    uint64_t election_timeout_ms; /* Raft election timeout */
    uint64_t snapshot_entries;    /* applied entries between a group's snapshots */
    uint64_t snapshot_trailing;   /* entries a group keeps behind its snapshot */
    uint64_t snapshot_bytes;      /* entry bytes between a group's snapshots (0: not counted) */
    int join;                     /* a node added to a running cluster: groups wait to be added */
    int forward_writes;          /* a write for another node's group goes to its leader from here */
    char follower_reads[8];      /* \"confirm\": reads wait for the leader's ReadIndex; \"local\" */
    uint64_t disk_reserve_bytes; /* free space below which a leader refuses writes (health.h) */
    uint64_t log_stall_ms;       /* log writes stalled this long move the leadership away */
    char config_file[4096];      /* empty: none */
    int print_config;            /* print the effective configuration and exit */
    char log_format[8];          /* "text" or "json" */
    char log_level[8];           /* "debug", "info", "warn" or "error" */
    int access_log;              /* one log line per answered request */
    /* The gate (src/gateway/): runnel gateway, and runnel serve with it */
    char tenants[4096];             /* the tenants file; "": no gate (serve only) */
    uint64_t upload_budget_bytes;   /* declared upload bytes at once, all tenants; 0: none */
    char usage_log[4096];           /* JSON lines of usage; "": none */
    uint64_t usage_log_max_bytes;   /* rotated past this */
    uint64_t usage_log_interval_ms; /* a line per tenant and bucket this often */
    /* runnel gateway only */
    char upstreams[RN_MAX_PEERS][512]; /* the nodes' base URLs */
    int n_upstreams;
    uint64_t upstream_timeout_ms;         /* for an answer's head */
    uint64_t upstream_idle_ms;            /* an idle connection to a node is kept this long */
    uint64_t hold_body_bytes;             /* bodies up to this are read whole and kept */
    char upstream_admin_token_file[4096]; /* the nodes' admin token, for operator routes */
} rn_config;

/* Which command a configuration is for: the settings of one are unknown to
 * the other, but for those they share (listening, TLS, limits, logs). */
typedef enum { RN_CONFIG_SERVE, RN_CONFIG_GATEWAY } rn_config_scope;

enum { RN_COLD_NONE, RN_COLD_LOCAL, RN_COLD_S3 };

/* Fills cfg from defaults, the environment and argv (the arguments after
 * "serve"). Returns 0; 1 when --help was printed; -1 with a message in err
 * for a bad flag, value or environment variable. */
int rn_config_load(rn_config *cfg, rn_config_scope scope, int argc, char **argv, char *err,
                   size_t errcap);

/* The smallest read cache of tiered history that holds the chunks of the
 * largest read (--max-read-bytes plus 16 MiB); --hot-bytes refuses a
 * smaller --history-cache-bytes. */
uint64_t rn_config_history_cache_floor(const rn_config *cfg);
/* Writes the effective configuration as key=value pairs separated by sep
 * (" " for a log line, "\n" for --print-config). */
void rn_config_describe(const rn_config *cfg, rn_config_scope scope, const char *sep, char *out,
                        size_t cap);

#endif
