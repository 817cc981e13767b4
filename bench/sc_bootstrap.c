/*
 * sc_bootstrap.c — the `bootstrap` scenario: --clients clients, each with
 * its own stream pre-filled with --events events of --event-bytes bytes
 * (--batch events per append), then all released in the same loop turn,
 * each on the connection that prepared its stream (already open).
 *
 * --mode replay (works on every server): each client replays its whole
 * stream from offset -1, following Stream-Next-Offset until
 * Stream-Up-To-Date. Reports each client's completion latency (release to
 * up-to-date) and the bytes read.
 *
 * --mode bootstrap (bucket surface, extensions.txt §2–3): after the pre-fill
 * each client learns its tail from HEAD's Stream-Next-Offset (offsets are
 * opaque tokens: only server-given ones are used) and publishes a snapshot
 * of --snapshot-bytes there (PUT {stream}/snapshot/{offset},
 * application/octet-stream, 204 naming that offset); --after-events more
 * events may follow the snapshot (then HEAD again gives the tail). At the
 * release each client sends GET {stream}/bootstrap and checks the answer:
 * status 200; a multipart/mixed body whose first part is exactly the
 * published snapshot (bytes and content type) and whose other parts hold the
 * updates after it, in the stream's content type; Stream-Snapshot-Offset
 * naming the snapshot; and, when the answer is complete
 * (Stream-Up-To-Date: true), Stream-Next-Offset equal to the tail and all of
 * the updates present. A partial answer is legal (§3.2): the client then
 * reads on from its Stream-Next-Offset with ordinary catch-up reads until
 * up-to-date, and the update bytes of both must add up. Reports the latency
 * of each bootstrap request, each client's completion latency (release to
 * complete state, follow-up reads included), and the bytes.
 *
 * The load generator shares the machine's cores with the server, so while
 * answers arrive it only copies their bodies into buffers allocated and
 * touched before the release; the checks run after the last answer (a
 * failed check still fails the run).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hist.h"
#include "multipart.h"
#include "phases.h"
#include "report.h"
#include "run.h"
#include "scenarios.h"
#include "util/buf.h"

enum stage { ST_HEAD_SNAP, ST_SNAPSHOT, ST_HEAD_TAIL, ST_BOOTSTRAP, ST_FOLLOW };

typedef struct {
    bn_fill fill;
    bn_replay replay;
    int i;
    enum stage stage;
    char snap_offset[96];  /* where the snapshot was published */
    char tail[96];         /* the stream's tail before the release */
    rn_buf body;           /* the bootstrap answer's body */
    char ctype[160];       /* ... its Content-Type */
    char answer_snap[96];  /* ... its Stream-Snapshot-Offset */
    char final_next[96];   /* Stream-Next-Offset of the answer that completed the state */
    uint64_t follow_bytes; /* bytes of catch-up reads after a partial answer */
    uint64_t t_req_ns;
} client;

static struct {
    char **paths;
    client *cl;
    char *body;     /* pre-fill append body ('.' bytes) */
    char *snapshot; /* snapshot body */
    bn_hist done_lat, req_lat;
    int pending;
    uint64_t stream_bytes, after_bytes, bytes, requests, follow_bytes;
    uint64_t complete, partial;
    uint64_t t_fill_ns, t_release_ns;
} s;

static bn_multipart mp; /* one answer is checked at a time */
static int64_t release_unix_us;

static int64_t unix_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* The release-to-last-answer window on the monotonic clock (the clock of
 * uv_hrtime and of `perf record -k CLOCK_MONOTONIC`) and on the wall clock
 * (strace -ttt), so profiles can be cut to it. */
static void report_window(void) {
    bn_report_int("release_mono_us", (int64_t)(s.t_release_ns / 1000));
    bn_report_int("end_mono_us", (int64_t)(uv_hrtime() / 1000));
    bn_report_int("release_unix_us", release_unix_us);
    bn_report_int("end_unix_us", unix_us());
}

static client *of_fill(bn_fill *f) {
    return (client *)((char *)f - offsetof(client, fill));
}

/* Figures of the preparation; `prep` is its duration's name: fill_s (replay:
 * the pre-fill) or prepare_s (bootstrap: pre-fill, HEADs, snapshot publish
 * and any events after it). */
static void report_setup(const char *mode, const char *prep) {
    bn_report_str("scenario", "bootstrap");
    bn_report_str("mode", mode);
    bn_report_int("clients", bn_o.clients);
    bn_report_int("events", bn_o.events);
    bn_report_int("event_bytes", (int64_t)bn_o.event_bytes);
    bn_report_int("bytes_per_client", (int64_t)s.stream_bytes);
    bn_report_real(prep, bn_secs(s.t_fill_ns, uv_hrtime()));
}

/* ---- replay mode ---------------------------------------------------- */

static void replayed(bn_replay *r) {
    if (r->bytes != s.stream_bytes) {
        bn_report_error("replay read %llu bytes, the stream holds %llu",
                        (unsigned long long)r->bytes, (unsigned long long)s.stream_bytes);
        bn_run_stop();
        return;
    }
    bn_hist_add(&s.done_lat, (r->t_end_ns - s.t_release_ns) / 1000);
    s.bytes += r->bytes;
    s.requests += r->requests;
    if (--s.pending > 0)
        return;
    double secs = bn_secs(s.t_release_ns, uv_hrtime());
    bn_report_real("replay_makespan_s", secs);
    bn_report_int("replay_bytes", (int64_t)s.bytes);
    bn_report_int("replay_requests", (int64_t)s.requests);
    bn_report_real("replay_mb_per_s", (double)s.bytes / 1e6 / secs);
    bn_report_hist("completion_latency", &s.done_lat);
    bn_report_int("server_rss_kib", bn_server_rss_kib());
    report_window();
    bn_run_stop();
}

static void replay_filled(bn_fill *f) {
    if (--s.pending > 0)
        return;
    report_setup("replay", "fill_s");
    size_t expect =
        bn_o.snapshot_bytes + (s.after_bytes < (1u << 20) ? s.after_bytes : (1u << 20)) + 16384;
    for (int i = 0; i < bn_o.clients; i++) {
        rn_buf_reserve(&s.cl[i].body, expect);
        memset(s.cl[i].body.data, 0, expect); /* fault the pages in now, not while timing */
    }
    s.pending = bn_o.clients;
    release_unix_us = unix_us();
    s.t_release_ns = uv_hrtime();
    for (int i = 0; i < bn_o.clients; i++)
        bn_replay_start(&s.cl[i].replay, s.cl[i].fill.c, s.paths[i], replayed);
}

/* ---- bootstrap mode -------------------------------------------------- */

static void boot_done(bn_conn *c, int err);
static void boot_body(bn_conn *c, const char *at, size_t n);
static const bn_handlers boot_handlers = {.on_body = boot_body, .on_done = boot_done};

static void fail(client *cl, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail(client *cl, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    bn_report_error("client %d: %s", cl->i, msg);
    bn_run_stop();
}

static void release(void) {
    report_setup("bootstrap", "prepare_s");
    bn_report_int("snapshot_bytes", (int64_t)bn_o.snapshot_bytes);
    bn_report_int("after_events", bn_o.after_events);
    size_t expect =
        bn_o.snapshot_bytes + (s.after_bytes < (1u << 20) ? s.after_bytes : (1u << 20)) + 16384;
    for (int i = 0; i < bn_o.clients; i++) {
        rn_buf_reserve(&s.cl[i].body, expect);
        memset(s.cl[i].body.data, 0, expect); /* fault the pages in now, not while timing */
    }
    s.pending = bn_o.clients;
    release_unix_us = unix_us();
    s.t_release_ns = uv_hrtime();
    for (int i = 0; i < bn_o.clients; i++) {
        client *cl = &s.cl[i];
        char path[1024];
        snprintf(path, sizeof path, "%s/bootstrap", s.paths[i]);
        cl->stage = ST_BOOTSTRAP;
        cl->t_req_ns = uv_hrtime();
        s.requests++;
        bn_conn_request(cl->fill.c, "GET", path, NULL, NULL, 0);
    }
}

static void prepared(client *cl) {
    if (--s.pending == 0)
        release();
}

static void head(client *cl, enum stage st) {
    cl->stage = st;
    bn_conn_rebind(cl->fill.c, &boot_handlers, cl);
    bn_conn_request(cl->fill.c, "HEAD", s.paths[cl->i], NULL, NULL, 0);
}

static void after_filled(bn_fill *f) {
    head(of_fill(f), ST_HEAD_TAIL);
}

static void boot_filled(bn_fill *f) {
    head(of_fill(f), ST_HEAD_SNAP);
}

static void boot_body(bn_conn *c, const char *at, size_t n) {
    client *cl = bn_conn_user(c);
    if (cl->stage == ST_BOOTSTRAP)
        rn_buf_append(&cl->body, at, n);
}

static void follow(client *cl, const char *offset) {
    char path[1024];
    snprintf(path, sizeof path, "%s?offset=%s", s.paths[cl->i], offset);
    cl->stage = ST_FOLLOW;
    s.requests++;
    bn_conn_request(cl->fill.c, "GET", path, NULL, NULL, 0);
}

/* Checks a client's bootstrap answer and totals (see the header comment).
 * Returns 0, or -1 after recording the failure. */
static int check_client(client *cl) {
    char err[256];
    if (bn_multipart_parse(cl->ctype, (const char *)cl->body.data, cl->body.len, &mp, err,
                           sizeof err) != 0) {
        fail(cl, "bootstrap answer: %s", err);
        return -1;
    }
    const bn_mp_part *snap = &mp.part[0];
    if (mp.n < 1 || snap->len != bn_o.snapshot_bytes ||
        memcmp(snap->body, s.snapshot, snap->len) != 0) {
        fail(cl, "bootstrap answer: the first part is not the published snapshot");
        return -1;
    }
    if (snap->ctype_len != 24 || memcmp(snap->ctype, "application/octet-stream", 24) != 0) {
        fail(cl, "bootstrap answer: snapshot part Content-Type is not the published one");
        return -1;
    }
    if (strcmp(cl->answer_snap, cl->snap_offset) != 0) {
        fail(cl, "bootstrap answer: Stream-Snapshot-Offset %s, the snapshot is at %s",
             cl->answer_snap, cl->snap_offset);
        return -1;
    }
    size_t ctl = strlen(bn_o.content_type);
    uint64_t update_bytes = 0;
    for (size_t k = 1; k < mp.n; k++) {
        const bn_mp_part *p = &mp.part[k];
        if (p->ctype_len != ctl || memcmp(p->ctype, bn_o.content_type, ctl) != 0) {
            fail(cl, "bootstrap answer: an update part's Content-Type is not %s",
                 bn_o.content_type);
            return -1;
        }
        for (size_t j = 0; j < p->len; j++)
            if (p->body[j] != '.') {
                fail(cl, "bootstrap answer: an update part holds bytes never appended");
                return -1;
            }
        update_bytes += p->len;
    }
    if (strcmp(cl->final_next, cl->tail) != 0) {
        fail(cl, "complete at Stream-Next-Offset %s, but the tail is %s", cl->final_next, cl->tail);
        return -1;
    }
    if (update_bytes + cl->follow_bytes != s.after_bytes) {
        fail(cl,
             "got %llu update bytes after the snapshot (%llu in the answer), %llu were appended",
             (unsigned long long)(update_bytes + cl->follow_bytes),
             (unsigned long long)update_bytes, (unsigned long long)s.after_bytes);
        return -1;
    }
    rn_buf_free(&cl->body);
    return 0;
}

/* The client has the complete state (Stream-Next-Offset `next`). After the
 * last one: check every answer, report. */
static void client_complete(client *cl, const char *next) {
    bn_hist_add(&s.done_lat, (uv_hrtime() - s.t_release_ns) / 1000);
    snprintf(cl->final_next, sizeof cl->final_next, "%s", next);
    if (--s.pending > 0)
        return;
    double secs = bn_secs(s.t_release_ns, uv_hrtime());
    uint64_t end_mono_us = uv_hrtime() / 1000;
    int64_t end_unix_us = unix_us();
    for (int i = 0; i < bn_o.clients; i++)
        if (check_client(&s.cl[i]) != 0)
            break;
    bn_report_real("bootstrap_makespan_s", secs);
    bn_report_int("bootstrap_requests", (int64_t)bn_o.clients);
    bn_report_int("bootstrap_bytes", (int64_t)s.bytes);
    bn_report_int("complete_answers", (int64_t)s.complete);
    bn_report_int("partial_answers", (int64_t)s.partial);
    bn_report_int("follow_up_requests", (int64_t)(s.requests - (uint64_t)bn_o.clients));
    bn_report_int("follow_up_bytes", (int64_t)s.follow_bytes);
    bn_report_real("bootstrap_mb_per_s", (double)(s.bytes + s.follow_bytes) / 1e6 / secs);
    bn_report_hist("request_latency", &s.req_lat);
    bn_report_hist("completion_latency", &s.done_lat);
    bn_report_int("server_rss_kib", bn_server_rss_kib());
    bn_report_int("release_mono_us", (int64_t)(s.t_release_ns / 1000));
    bn_report_int("end_mono_us", (int64_t)end_mono_us);
    bn_report_int("release_unix_us", release_unix_us);
    bn_report_int("end_unix_us", end_unix_us);
    bn_run_stop();
}

static void boot_done(bn_conn *c, int err) {
    static const int ok200[] = {200, 0}, ok204[] = {204, 0};
    client *cl = bn_conn_user(c);
    const bn_resp *r = bn_conn_resp(c);
    switch (cl->stage) {
    case ST_HEAD_SNAP:
    case ST_HEAD_TAIL:
        if (!bn_expect(c, err, "HEAD of the stream", ok200))
            return;
        if (!r->next_offset[0]) {
            fail(cl, "HEAD without Stream-Next-Offset");
            return;
        }
        if (cl->stage == ST_HEAD_TAIL) {
            snprintf(cl->tail, sizeof cl->tail, "%s", r->next_offset);
            prepared(cl);
            return;
        }
        snprintf(cl->snap_offset, sizeof cl->snap_offset, "%s", r->next_offset);
        char path[1024];
        snprintf(path, sizeof path, "%s/snapshot/%s", s.paths[cl->i], cl->snap_offset);
        cl->stage = ST_SNAPSHOT;
        bn_conn_request(c, "PUT", path, "Content-Type: application/octet-stream\r\n", s.snapshot,
                        bn_o.snapshot_bytes);
        return;
    case ST_SNAPSHOT:
        if (!bn_expect(c, err, "snapshot publish (PUT {stream}/snapshot/{offset})", ok204))
            return;
        if (strcmp(r->snapshot_offset, cl->snap_offset) != 0) {
            fail(cl, "snapshot publish answered Stream-Snapshot-Offset '%s' for %s",
                 r->snapshot_offset, cl->snap_offset);
            return;
        }
        if (bn_o.after_events == 0) {
            snprintf(cl->tail, sizeof cl->tail, "%s", cl->snap_offset);
            prepared(cl);
            return;
        }
        /* A second producer: the first one's sequence numbers are used up. */
        bn_fill_start(&cl->fill, c, s.paths[cl->i], bn_o.clients + cl->i, s.after_bytes,
                      (size_t)bn_o.batch * bn_o.event_bytes, s.body, after_filled);
        return;
    case ST_BOOTSTRAP:
        if (!bn_expect(c, err, "bootstrap (GET {stream}/bootstrap)", ok200))
            return;
        bn_hist_add(&s.req_lat, (uv_hrtime() - cl->t_req_ns) / 1000);
        s.bytes += r->body_bytes;
        snprintf(cl->ctype, sizeof cl->ctype, "%s", r->content_type);
        snprintf(cl->answer_snap, sizeof cl->answer_snap, "%s", r->snapshot_offset);
        if (!r->next_offset[0]) {
            fail(cl, "bootstrap answer without Stream-Next-Offset");
        } else if (r->up_to_date) {
            s.complete++;
            client_complete(cl, r->next_offset);
        } else {
            s.partial++;
            follow(cl, r->next_offset);
        }
        return;
    case ST_FOLLOW:
        if (!bn_expect(c, err, "catch-up read after a partial bootstrap", ok200))
            return;
        cl->follow_bytes += r->body_bytes;
        s.follow_bytes += r->body_bytes;
        if (r->up_to_date) {
            client_complete(cl, r->next_offset);
        } else if (!r->next_offset[0] || r->body_bytes == 0) {
            fail(cl, "catch-up after a partial bootstrap made no progress (next offset '%s')",
                 r->next_offset);
        } else {
            char next[sizeof r->next_offset];
            memcpy(next, r->next_offset, sizeof next);
            follow(cl, next);
        }
        return;
    }
}

/* ---- common ------------------------------------------------------------ */

static void created(void) {
    s.pending = bn_o.clients;
    s.t_fill_ns = uv_hrtime();
    size_t chunk = (size_t)bn_o.batch * bn_o.event_bytes;
    for (int i = 0; i < bn_o.clients; i++)
        bn_fill_start(&s.cl[i].fill, bn_conn_new(bn_cl, NULL, NULL), s.paths[i], i, s.stream_bytes,
                      chunk, s.body, bn_o.replay_mode ? replay_filled : boot_filled);
}

void bn_bootstrap_start(void) {
    bn_hist_init(&s.done_lat);
    bn_hist_init(&s.req_lat);
    s.stream_bytes = (uint64_t)bn_o.events * bn_o.event_bytes;
    s.after_bytes = (uint64_t)bn_o.after_events * bn_o.event_bytes;
    s.paths = bn_stream_paths("b", bn_o.clients);
    s.cl = rn_xcalloc((size_t)bn_o.clients, sizeof *s.cl);
    for (int i = 0; i < bn_o.clients; i++)
        s.cl[i].i = i;
    size_t chunk = (size_t)bn_o.batch * bn_o.event_bytes;
    s.body = rn_xmalloc(chunk);
    memset(s.body, '.', chunk);
    if (!bn_o.replay_mode) {
        s.snapshot = rn_xmalloc(bn_o.snapshot_bytes + 1);
        for (size_t k = 0; k < bn_o.snapshot_bytes; k++)
            s.snapshot[k] = (char)('a' + k * 7 % 26); /* never the boundary's "\r\n--" */
    }
    bn_create_streams(s.paths, bn_o.clients, created);
}
