/*
 * run.h — what every scenario shares: the options, the loop and client of
 * the run, timers that are all closed when the run stops, the hard
 * deadline, and small helpers (stream names, append headers, status checks,
 * rate pacing, send-time stamps in payloads, server RSS).
 *
 * A run ends by itself in every case: the scenario calls bn_run_stop() when
 * it is done, the first protocol error stops it too, and a hard deadline
 * (--timeout) stops it with an error if a phase hangs. Stopping closes the
 * client and every registered timer, so uv_run() returns.
 */
#ifndef BN_RUN_H
#define BN_RUN_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "http_client.h"
#include "target.h"

typedef struct {
    const char *scenario;
    bn_target target;
    const char *content_type;
    int streams;            /* writes, longpoll, create, fill, tokens */
    int subscribers;        /* fanout */
    int tails;              /* fanout: reader processes of tail_cmd (0: none) */
    const char *tail_cmd;   /* fanout: a client program reading the stream's URL */
    int readers;            /* longpoll */
    int readers_per_stream; /* tokens */
    int clients;            /* catchup (concurrent phase), bootstrap, create (connections) */
    int events;             /* bootstrap: events per stream */
    int batch;              /* bootstrap: events per pre-fill append */
    int replay_mode;        /* bootstrap: 1 replay, 0 bootstrap (snapshot + GET /bootstrap) */
    int after_events;       /* bootstrap mode: events appended after the snapshot */
    int server_pid;         /* sample this process's VmRSS (0: don't) */
    int json;
    double rate;           /* requests or events per second (tokens: per stream); 0: closed loop */
    double duration;       /* seconds of measurement */
    double timeout;        /* hard deadline of the whole run, seconds */
    size_t payload;        /* bytes per append (writes, fanout, longpoll, tokens) */
    size_t event_bytes;    /* bootstrap */
    size_t snapshot_bytes; /* bootstrap mode */
    size_t append_bytes;   /* catchup pre-fill and fill: append size */
    uint64_t bytes;        /* catchup pre-fill total; fill: total over all streams */
    int surface_bucket;    /* --surface bucket (or a template without /v1/) */
    int follow_leaders;    /* a cluster: each stream's requests go to its group's leader */
    char run_id[40];       /* unique per run: prefixes stream and producer names */
} bn_opts;

extern bn_opts bn_o;
extern uv_loop_t *bn_loop;
extern bn_client *bn_cl;

/* Sets up loop, client and deadline from bn_o. */
void bn_run_init(void);
/* Ends the run (idempotent). */
void bn_run_stop(void);
/* Registers fn to be called once by bn_run_stop(), after the client and the
 * timers are closed (for handles the run owns besides those: at most 4). */
void bn_run_at_stop(void (*fn)(void));
int bn_run_stopping(void);
/* Starts a timer that bn_run_stop() closes. */
void bn_timer(uv_timer_cb cb, uint64_t timeout_ms, uint64_t repeat_ms);

/* Paths of streams 0..n-1 of this run, named "<run_id>-<tag>-<i>". */
char **bn_stream_paths(const char *tag, int n);

/* Header lines of an append: Content-Type and Producer-Id/Epoch/Seq with
 * producer "<run_id>-<producer>". Returns out. */
char *bn_append_headers(char *out, size_t cap, int producer, uint64_t seq);

/* Checks a finished request: err == 0 and status one of the allowed
 * (0-terminated list). On failure records a protocol error naming `what`,
 * stops the run and returns 0. */
int bn_expect(bn_conn *c, int err, const char *what, const int *allowed);

/* Creates the named streams (PUT with bn_o.content_type; 201 or 200), at
 * most 64 at a time, then calls done(). With --follow-leaders a 307 is
 * followed once: the create goes to the leader named by Location, and
 * bn_stream_leader(i) is that address from then on. */
void bn_create_streams(char **paths, int n, void (*done)(void));
/* Where stream i of the last bn_create_streams is written: its leader
 * (--follow-leaders), else the target. */
const struct sockaddr_storage *bn_stream_leader(int i);

/* Fixed-rate scheduling: how many sends are due at `now_ns`. */
typedef struct {
    double rate;
    uint64_t t0_ns;
    uint64_t issued;
} bn_pacer;
uint64_t bn_pacer_due(const bn_pacer *p, uint64_t now_ns);

/* Fills buf[0..len) with a payload carrying send time ns: the marker
 * 'T' + 16 lowercase hex digits, padded with '.'; for JSON streams the
 * payload is one JSON string. len must be >= BN_STAMP_MIN. */
#define BN_STAMP_MIN 19
void bn_stamp(char *buf, size_t len, uint64_t ns);
/* Calls fn(arg, ns) for every complete marker in s[0..n). */
void bn_stamp_scan(const char *s, size_t n, void (*fn)(void *arg, uint64_t ns), void *arg);

/* VmRSS of bn_o.server_pid in KiB, or -1. */
int64_t bn_server_rss_kib(void);

/* Seconds between two uv_hrtime() values. */
double bn_secs(uint64_t from_ns, uint64_t to_ns);

#endif
