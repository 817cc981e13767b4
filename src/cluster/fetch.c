/*
 * fetch.c — filling gaps and fetching snapshot bodies from peers. See
 * fetch.h.
 */
#include "cluster/fetch.h"
#include "cluster/placement.h"
#include "tiers/tiers.h"
#include "util/buf.h"
#include "util/fault.h"
#include "util/log.h"
#include "util/map.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define FETCH_JOBS 4
#define FETCH_RETRY_MS 500
#define FETCH_TIMEOUT_MS 30000
#define BODY_MIN_RATE (1u << 20) /* bytes/s a body's fetch is given time for */

typedef enum { JOB_GAP, JOB_BODY } job_kind;

typedef struct job {
    uint64_t id; /* the stream: the jobs map's key (one map per kind) */
    job_kind kind;
    rn_fetcher *f;
    struct job *next_waiting;
    unsigned attempt;   /* failed tries of the current piece */
    rn_fetch *inflight; /* the piece being fetched */
    /* JOB_GAP: the piece, of the index (else of the data), and its range:
     * bytes, or index entries */
    int index;
    uint64_t from, to;
    uint64_t ask_id; /* the stream asked: j->id, or for a fork's inherited range its source */
    /* JOB_BODY: the body being written (its store, key, temporary file) */
    int cold;
    char key[RN_TIERS_KEY_MAX];
    int fd;
    uint64_t size;
    uv_work_t work;
    int syncing;  /* work (the body's sync and rename) in flight */
    int orphaned; /* the fetcher stopped meanwhile: the work's end frees the job */
    uv_timer_t retry;
} job;

struct rn_fetcher {
    uv_loop_t *loop;
    uint64_t rate;    /* bytes/s the pieces are paced to (0: as fast as peers answer) */
    uint64_t free_ms; /* loop time from which the next piece may start (pacing) */
    rn_engine *engine;
    rn_tiers *tiers;
    rn_outbound *http;
    rn_fetch_source source;
    void *source_ctx;
    rn_map jobs[2];                   /* by kind: stream id -> job */
    job *waiting_head, *waiting_tail; /* not started for want of a slot */
    unsigned active;                  /* jobs started, at most FETCH_JOBS */
    int stopping;
};

static void pump(rn_fetcher *f);
static void start_piece(job *j);

static void job_closed(uv_handle_t *h) {
    free(h->data);
}

/* Ends a job: nothing is left to fetch, or its stream is gone. */
static void finish(job *j) {
    rn_fetcher *f = j->f;
    rn_map_remove(&f->jobs[j->kind], &j->id, sizeof j->id);
    f->active--;
    uv_close((uv_handle_t *)&j->retry, job_closed);
    pump(f);
}

static void on_retry(uv_timer_t *t) {
    start_piece(t->data);
}

static void retry_later(job *j) {
    j->attempt++;
    uv_timer_start(&j->retry, on_retry, FETCH_RETRY_MS, 0);
}

/* Pacing: a piece of `bytes` may start now (1: its time is booked), or
 * the job waits for its turn (0: the timer runs start_piece again then). */
static int paced(job *j, uint64_t bytes) {
    rn_fetcher *f = j->f;
    if (!f->rate)
        return 1;
    uint64_t now = uv_now(f->loop);
    if (f->free_ms > now) {
        uv_timer_start(&j->retry, on_retry, f->free_ms - now, 0);
        return 0;
    }
    f->free_ms = now + bytes * 1000 / f->rate;
    return 1;
}

/* The bytes one gap piece moves: 8 MiB, or less when paced (a quarter
 * second's worth, at least 64 KiB), so a slow rate is kept smoothly. */
static uint64_t piece_bytes(const rn_fetcher *f) {
    uint64_t piece = RN_REPLICA_FETCH_MAX;
    if (f->rate && f->rate / 4 < piece)
        piece = f->rate / 4 > 65536 ? f->rate / 4 : 65536;
    return piece;
}

/* Logs a failed piece once per piece: a peer may be down for a while. */
static void report_failure(const job *j, const rn_fetch_result *r) {
    if (j->attempt > 0)
        return;
    char what[128];
    if (j->kind == JOB_BODY)
        snprintf(what, sizeof what, "its snapshot body");
    else
        snprintf(what, sizeof what, "%s %" PRIu64 "..%" PRIu64,
                 j->index ? "index entries" : "bytes", j->from, j->to);
    rn_log(RN_LOG_WARN, "cluster_fetch",
           "stream %016" PRIx64 ": a peer did not give %s (%s, status %ld); asking again", j->id,
           what, r->failure == RN_FETCH_ANSWERED ? "answered" : r->error, r->status);
}

/* ---- gaps ---- */

static void gap_piece_done(void *arg, const rn_fetch_result *r) {
    job *j = arg;
    rn_fetcher *f = j->f;
    j->inflight = NULL;
    uint64_t want = (j->to - j->from) * (j->index ? 8 : 1);
    if (rn_fault_fail("gap-piece") || r->failure != RN_FETCH_ANSWERED || r->status != 200 ||
        r->body_len != want) {
        report_failure(j, r);
        retry_later(j);
        return;
    }
    int rc;
    if (j->index) {
        uint64_t *ends = rn_xmalloc((size_t)want);
        rn_reader rd;
        rn_reader_init(&rd, r->body, r->body_len);
        for (uint64_t k = 0; k < j->to - j->from; k++)
            ends[k] = rn_read_u64(&rd);
        rc = rn_engine_gap_fill_index(f->engine, j->id, j->from, ends, (size_t)(j->to - j->from));
        free(ends);
    } else {
        rc = rn_engine_gap_fill_data(f->engine, j->id, j->from, r->body, r->body_len);
    }
    if (rc < 0 && rc != -ESTALE) {
        rn_log(RN_LOG_ERROR, "cluster_fetch",
               "stream %016" PRIx64 ": fetched bytes not written: %s", j->id, strerror(-rc));
        retry_later(j);
        return;
    }
    j->attempt = 0;
    start_piece(j);
}

/* The next piece of the job's gap (range and URL path), or 0 when it has
 * none left. */
static int next_gap_piece(job *j, char *path, size_t cap) {
    rn_streamfiles_gap gap;
    if (!rn_engine_gap(j->f->engine, j->id, &gap)) {
        rn_log(RN_LOG_INFO, "cluster_gap", "stream %016" PRIx64 ": filled", j->id);
        return 0;
    }
    j->index = !(gap.from < gap.to);
    uint64_t piece = j->index ? piece_bytes(j->f) / 8 : piece_bytes(j->f);
    j->from = j->index ? gap.kfrom : gap.from;
    uint64_t end = j->index ? gap.kto : gap.to;
    j->to = end - j->from > piece ? j->from + piece : end;
    j->ask_id = j->id;
    const rn_stream *s = rn_engine_stream(j->f->engine, j->id);
    if (!j->index && s->inherit && s->apart_source && j->from < s->fork_offset) {
        j->ask_id = s->apart_source; /* kept here, read from a node of the source's group */
        j->to = j->to < s->fork_offset ? j->to : s->fork_offset;
    }
    snprintf(path, cap, "%s/%016" PRIx64 "?from=%" PRIu64 "&to=%" PRIu64,
             j->index ? "index" : "bytes", j->ask_id, j->from, j->to);
    return 1;
}

/* ---- snapshot bodies ---- */

static void body_synced_work(uv_work_t *w) {
    job *j = w->data;
    j->size = (uint64_t)rn_tiers_body_intake_end(j->f->tiers, j->cold, j->key, j->fd,
                                                 0); /* 0 or -errno, as u64 */
}

static void body_synced(uv_work_t *w, int status) {
    job *j = w->data;
    j->fd = -1;
    j->syncing = 0;
    if (j->orphaned) {
        uv_close((uv_handle_t *)&j->retry, job_closed);
        return;
    }
    int rc = status < 0 ? status : (int)(int64_t)j->size;
    if (rc < 0) {
        rn_log(RN_LOG_ERROR, "cluster_fetch",
               "stream %016" PRIx64 ": fetched snapshot body not stored: %s", j->id, strerror(-rc));
        retry_later(j);
        return;
    }
    rn_log(RN_LOG_INFO, "cluster_fetch", "stream %016" PRIx64 ": snapshot body fetched", j->id);
    finish(j);
}

static void body_done(void *arg, const rn_fetch_result *r) {
    job *j = arg;
    j->inflight = NULL;
    if (r->failure != RN_FETCH_ANSWERED || r->status != 200 || r->received != j->size) {
        report_failure(j, r);
        rn_tiers_body_intake_end(j->f->tiers, j->cold, j->key, j->fd, -EIO); /* removes it */
        j->fd = -1;
        retry_later(j);
        return;
    }
    j->work.data = j; /* the sync of up to a snapshot's size runs on a worker */
    j->syncing = 1;
    uv_queue_work(j->f->loop, &j->work, body_synced_work, body_synced);
}

/* The body the job's stream names as its snapshot, when it is not here:
 * opens its temporary file and writes the URL path; 0 when there is
 * nothing to fetch (stored already, superseded, stream gone). */
static int next_body(job *j, char *path, size_t cap) {
    const rn_stream *s = rn_engine_stream(j->f->engine, j->id);
    if (!s || !s->snapshot.present || !rn_tiers_body_key_valid(s->snapshot.key) ||
        rn_tiers_body_present(j->f->tiers, s->snapshot.cold, s->snapshot.key))
        return 0;
    j->cold = s->snapshot.cold;
    snprintf(j->key, sizeof j->key, "%s", s->snapshot.key);
    j->size = s->snapshot.size;
    j->fd = rn_tiers_body_intake_begin(j->f->tiers, j->cold, j->key);
    if (j->fd < 0)
        return -1;
    snprintf(path, cap, "blob?cold=%d&key=%s", s->snapshot.cold, j->key);
    return 1;
}

/* ---- jobs ---- */

/* Asks a peer for the job's next piece, or ends the job. */
static void start_piece(job *j) {
    rn_fetcher *f = j->f;
    char path[200];
    int more =
        j->kind == JOB_GAP ? next_gap_piece(j, path, sizeof path) : next_body(j, path, sizeof path);
    if (more <= 0) {
        if (more < 0)
            retry_later(j);
        else
            finish(j);
        return;
    }
    uint64_t bytes = j->kind == JOB_GAP ? (j->to - j->from) * (j->index ? 8 : 1) : j->size;
    if (!paced(j, bytes)) {
        if (j->kind == JOB_BODY) { /* opened by next_body: opened again in its turn */
            rn_tiers_body_intake_end(j->f->tiers, j->cold, j->key, j->fd, -EAGAIN);
            j->fd = -1;
        }
        return;
    }
    uint64_t asked = j->kind == JOB_GAP ? j->ask_id : j->id;
    const char *base = f->source(f->source_ctx, rn_placement_id_group(asked), j->attempt);
    rn_fetch_request req = {.method = "GET", .body_fd = -1, .sink_fd = -1, .strict_size = 1};
    char url[700];
    if (base) {
        snprintf(url, sizeof url, "%s/__runnel/cluster/%s", base, path);
        req.url = url;
        if (j->kind == JOB_GAP) {
            req.sink_cap = (j->to - j->from) * (j->index ? 8 : 1);
            req.timeout_ms = FETCH_TIMEOUT_MS;
        } else {
            req.sink_fd = j->fd;
            req.sink_cap = j->size;
            req.timeout_ms = FETCH_TIMEOUT_MS + j->size / BODY_MIN_RATE * 1000;
        }
        j->inflight =
            rn_outbound_start(f->http, &req, j->kind == JOB_GAP ? gap_piece_done : body_done, j);
    }
    if (!j->inflight) { /* no peer known now, or the client's queue is full */
        if (j->kind == JOB_BODY) {
            rn_tiers_body_intake_end(j->f->tiers, j->cold, j->key, j->fd, -EAGAIN);
            j->fd = -1;
        }
        retry_later(j);
    }
}

static void pump(rn_fetcher *f) {
    while (!f->stopping && f->active < FETCH_JOBS && f->waiting_head) {
        job *j = f->waiting_head;
        f->waiting_head = j->next_waiting;
        if (!f->waiting_head)
            f->waiting_tail = NULL;
        f->active++;
        start_piece(j);
    }
}

static void add_job(rn_fetcher *f, uint64_t id, job_kind kind) {
    if (rn_map_get(&f->jobs[kind], &id, sizeof id))
        return;
    job *j = rn_xcalloc(1, sizeof *j);
    j->id = id;
    j->kind = kind;
    j->f = f;
    j->fd = -1;
    uv_timer_init(f->loop, &j->retry);
    j->retry.data = j;
    rn_map_put(&f->jobs[kind], &j->id, sizeof j->id, j);
    if (f->waiting_tail)
        f->waiting_tail->next_waiting = j;
    else
        f->waiting_head = j;
    f->waiting_tail = j;
}

static void add_gap(uint64_t id, void *arg) {
    add_job(arg, id, JOB_GAP);
}

void rn_fetcher_gap(rn_fetcher *f, uint64_t id) {
    add_job(f, id, JOB_GAP);
    pump(f);
}

typedef struct {
    rn_fetcher *f;
    unsigned group;
} body_scan;

static void add_body_if_missing(rn_stream *s, void *arg) {
    body_scan *b = arg;
    if (s->snapshot.present && rn_placement_id_group(s->id) == b->group &&
        rn_tiers_body_key_valid(s->snapshot.key) &&
        !rn_tiers_body_present(b->f->tiers, s->snapshot.cold, s->snapshot.key))
        add_job(b->f, s->id, JOB_BODY);
}

rn_fetcher *rn_fetcher_new(uv_loop_t *loop, rn_engine *engine, rn_tiers *tiers, rn_outbound *http,
                           rn_fetch_source source, void *source_ctx, uint64_t bytes_per_s) {
    rn_fetcher *f = rn_xcalloc(1, sizeof *f);
    f->loop = loop;
    f->rate = bytes_per_s;
    f->engine = engine;
    f->tiers = tiers;
    f->http = http;
    f->source = source;
    f->source_ctx = source_ctx;
    return f;
}

void rn_fetcher_scan(rn_fetcher *f, unsigned group) {
    rn_engine_gaps(f->engine, rn_placement_stream_in_group, &group, add_gap, f);
    body_scan b = {f, group};
    rn_engine_foreach(f->engine, add_body_if_missing, &b);
    pump(f);
}

void rn_fetcher_published(rn_fetcher *f, uint64_t id) {
    add_job(f, id, JOB_BODY);
    pump(f);
}

unsigned rn_fetcher_pending(const rn_fetcher *f) {
    return (unsigned)(f->jobs[JOB_GAP].count + f->jobs[JOB_BODY].count);
}

unsigned rn_fetcher_pending_group(const rn_fetcher *f, unsigned group) {
    unsigned n = 0;
    for (int k = 0; k < 2; k++) {
        size_t i = 0;
        void *v;
        while (rn_map_next((rn_map *)&f->jobs[k], &i, &v))
            n += rn_placement_id_group(((job *)v)->id) == group;
    }
    return n;
}

void rn_fetcher_free(rn_fetcher *f) {
    if (!f)
        return;
    f->stopping = 1;
    for (int k = 0; k < 2; k++) {
        size_t i = 0;
        void *v;
        while (rn_map_next(&f->jobs[k], &i, &v)) {
            job *j = v;
            if (j->inflight)
                rn_fetch_cancel(j->inflight);
            if (j->syncing) {
                j->orphaned = 1; /* body_synced closes its file and frees it */
                continue;
            }
            if (j->fd >= 0)
                rn_tiers_body_intake_end(j->f->tiers, j->cold, j->key, j->fd, -ECANCELED);
            uv_close((uv_handle_t *)&j->retry, job_closed);
        }
        rn_map_free(&f->jobs[k]);
    }
    free(f);
}
