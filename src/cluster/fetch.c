/*
 * fetch.c — filling gaps from peers. See fetch.h.
 */
#include "cluster/fetch.h"
#include "cluster/placement.h"
#include "util/buf.h"
#include "util/log.h"
#include "util/map.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FETCH_JOBS 4
#define FETCH_RETRY_MS 500
#define FETCH_TIMEOUT_MS 30000

typedef struct job {
    uint64_t id; /* the map's key */
    rn_fetcher *f;
    struct job *next_waiting;
    unsigned attempt;   /* failed tries of the current piece */
    rn_fetch *inflight; /* the piece being fetched */
    int index;          /* it is of the index (else of the data) */
    uint64_t from, to;  /* its range: bytes, or index entries */
    uv_timer_t retry;
} job;

struct rn_fetcher {
    uv_loop_t *loop;
    rn_engine *engine;
    rn_outbound *http;
    rn_fetch_source source;
    void *source_ctx;
    rn_map jobs;                      /* id -> job */
    job *waiting_head, *waiting_tail; /* not started for want of a slot */
    unsigned active;                  /* jobs started, at most FETCH_JOBS */
};

static void pump(rn_fetcher *f);
static void start_piece(job *j);

static void job_closed(uv_handle_t *h) {
    free(h->data);
}

/* Ends a job: its stream has no gap left, or is gone. */
static void finish(job *j) {
    rn_fetcher *f = j->f;
    rn_map_remove(&f->jobs, &j->id, sizeof j->id);
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

static void piece_done(void *arg, const rn_fetch_result *r) {
    job *j = arg;
    rn_fetcher *f = j->f;
    j->inflight = NULL;
    uint64_t want = (j->to - j->from) * (j->index ? 8 : 1);
    if (r->failure != RN_FETCH_ANSWERED || r->status != 200 || r->body_len != want) {
        if (j->attempt == 0) /* once per piece: a peer may be down for a while */
            rn_log(RN_LOG_WARN, "cluster_fetch",
                   "stream %016" PRIx64 ": a peer did not give %s %" PRIu64 "..%" PRIu64
                   " (%s, status %ld); asking again",
                   j->id, j->index ? "index entries" : "bytes", j->from, j->to,
                   r->failure == RN_FETCH_ANSWERED ? "answered" : r->error, r->status);
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

/* Asks for the next piece of the job's gap, or ends the job. */
static void start_piece(job *j) {
    rn_fetcher *f = j->f;
    rn_streamfiles_gap gap;
    if (!rn_engine_gap(f->engine, j->id, &gap)) {
        rn_log(RN_LOG_INFO, "cluster_gap", "stream %016" PRIx64 ": filled", j->id);
        finish(j);
        return;
    }
    j->index = !(gap.from < gap.to);
    uint64_t piece = j->index ? RN_REPLICA_FETCH_MAX / 8 : RN_REPLICA_FETCH_MAX;
    j->from = j->index ? gap.kfrom : gap.from;
    uint64_t end = j->index ? gap.kto : gap.to;
    j->to = end - j->from > piece ? j->from + piece : end;
    const char *base = f->source(f->source_ctx, rn_placement_id_group(j->id), j->attempt);
    if (!base) {
        retry_later(j);
        return;
    }
    char url[700];
    snprintf(url, sizeof url, "%s/__runnel/cluster/%s/%016" PRIx64 "?from=%" PRIu64 "&to=%" PRIu64,
             base, j->index ? "index" : "bytes", j->id, j->from, j->to);
    rn_fetch_request req = {.method = "GET",
                            .url = url,
                            .body_fd = -1,
                            .sink_fd = -1,
                            .sink_cap = (j->to - j->from) * (j->index ? 8 : 1),
                            .strict_size = 1,
                            .timeout_ms = FETCH_TIMEOUT_MS};
    j->inflight = rn_outbound_start(f->http, &req, piece_done, j);
    if (!j->inflight)
        retry_later(j); /* the client's queue is full */
}

static void pump(rn_fetcher *f) {
    while (f->active < FETCH_JOBS && f->waiting_head) {
        job *j = f->waiting_head;
        f->waiting_head = j->next_waiting;
        if (!f->waiting_head)
            f->waiting_tail = NULL;
        f->active++;
        start_piece(j);
    }
}

static void add_job(uint64_t id, void *arg) {
    rn_fetcher *f = arg;
    if (rn_map_get(&f->jobs, &id, sizeof id))
        return;
    job *j = rn_xcalloc(1, sizeof *j);
    j->id = id;
    j->f = f;
    uv_timer_init(f->loop, &j->retry);
    j->retry.data = j;
    rn_map_put(&f->jobs, &j->id, sizeof j->id, j);
    if (f->waiting_tail)
        f->waiting_tail->next_waiting = j;
    else
        f->waiting_head = j;
    f->waiting_tail = j;
}

rn_fetcher *rn_fetcher_new(uv_loop_t *loop, rn_engine *engine, rn_outbound *http,
                           rn_fetch_source source, void *source_ctx) {
    rn_fetcher *f = rn_xcalloc(1, sizeof *f);
    f->loop = loop;
    f->engine = engine;
    f->http = http;
    f->source = source;
    f->source_ctx = source_ctx;
    return f;
}

void rn_fetcher_scan(rn_fetcher *f, unsigned group) {
    rn_engine_gaps(f->engine, rn_placement_stream_in_group, &group, add_job, f);
    pump(f);
}

unsigned rn_fetcher_pending(const rn_fetcher *f) {
    return (unsigned)f->jobs.count;
}

void rn_fetcher_free(rn_fetcher *f) {
    if (!f)
        return;
    size_t i = 0;
    void *v;
    while (rn_map_next(&f->jobs, &i, &v)) {
        job *j = v;
        if (j->inflight)
            rn_fetch_cancel(j->inflight);
        uv_close((uv_handle_t *)&j->retry, job_closed);
    }
    rn_map_free(&f->jobs);
    free(f);
}
