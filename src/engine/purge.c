/*
 * purge.c — bucket purges on this engine (engine.h, "bucket purges"): the
 * FENCE command's way into the log, and the driver that removes the
 * fenced streams one PURGE command each.
 *
 * A FENCE names no stream, so it does not go through the pipeline's
 * per-stream queues: it is encoded here and submitted to the command log
 * directly (counted in ops_in_log like any mutation, so a drain and a
 * checkpoint wait for it). In a replicated log its stream id field is the
 * group whose log takes it (command.h).
 *
 * The driver is a timer (100 ms). While fenced streams may be left
 * (purge_wanted: a FENCE applied, a checkpoint or a manifest with fences
 * loaded), each tick with nothing of its own in flight walks the streams
 * once: the fenced ones this engine's log takes now (engine_log_accepts:
 * everything on a single node, a group's streams on its leader) get a
 * PURGE op each, at most PURGE_BATCH per tick, queued behind whatever
 * mutation of the stream is in the log; a stream that forks in other groups
 * pin has them cut first (cutforks.c), and its PURGE goes once its last
 * pin did. A walk that finds none left ends
 * the purge; a single node then writes a checkpoint, so that no log
 * segment keeps the bytes the purged streams were appended with (the
 * segments before a checkpoint are dropped). A replica that does not lead
 * a group keeps walking while the group's leader removes its streams: the
 * leader may change. The walk costs O(streams) per tick, only while a
 * purge is under way.
 */
#include "engine/engine_int.h"
#include "util/clock.h"

#include <stdlib.h>
#include <string.h>

#define PURGE_TICK_MS 100
#define PURGE_BATCH 1024

/* ---- the fence ---- */

typedef struct {
    rn_engine *engine;
    rn_cmdlog_entry entry;
    rn_cmd cmd;
    rn_buf head;
    void (*done)(void *arg, rn_result r);
    void *arg;
    char ns[];
} fence_job;

static void fence_logged(rn_cmdlog_entry *entry) {
    fence_job *j = entry->arg;
    assert(j->engine->ops_in_log > 0);
    j->engine->ops_in_log--;
    rn_result r = entry->applied ? RN_OK_FENCED : entry->refusal;
    j->done(j->arg, r);
    rn_buf_free(&j->head);
    free(j);
}

void rn_engine_fence(rn_engine *e, const char *ns, size_t len, int group,
                     void (*done)(void *arg, rn_result r), void *arg) {
    assert(len > 0 && !memchr(ns, '/', len) && group < 256 && done);
    const rn_fence *f = rn_state_fence(&e->state, ns, len);
    if (f && (group < 0 ? f->all : rn_fence_covers(f, (uint64_t)group))) {
        done(arg, RN_OK_FENCED); /* permanent: nothing to log again */
        return;
    }
    fence_job *j = rn_xcalloc(1, sizeof *j + len + 1);
    memcpy(j->ns, ns, len);
    j->engine = e;
    j->done = done;
    j->arg = arg;
    j->cmd = (rn_cmd){.type = RN_CMD_FENCE,
                      .stream_id = group < 0 ? 0 : (uint64_t)group,
                      .time_ms = rn_now_ms(),
                      .path = j->ns,
                      .path_len = len,
                      .fence_scope = group < 0 ? RN_FENCE_ALL : (uint16_t)group};
    rn_cmd_encode_head(&j->cmd, &j->head);
    j->entry.cmd = &j->cmd;
    j->entry.piece[0] = (struct iovec){j->head.data, j->head.len};
    j->entry.pieces = 1;
    j->entry.done = fence_logged;
    j->entry.arg = j;
    e->ops_in_log++;
    e->log->ops->submit(e->log, &j->entry);
}

void engine_purge_wanted(rn_engine *e) {
    e->purge_wanted = 1;
}

/* ---- the driver ---- */

typedef struct purge_driver {
    uv_timer_t timer;
    rn_engine *engine;
    unsigned inflight;  /* PURGE ops submitted, not answered */
    int checkpoint_due; /* a single node's purge ended: drop the log's copies */
    int closed;         /* the timer closed: freed once inflight is 0 */
} purge_driver;

typedef struct {
    rn_op op;
    purge_driver *driver;
    char path[];
} purge_op;

static void driver_free_when_idle(purge_driver *d) {
    if (d->closed && d->inflight == 0)
        free(d);
}

static void purged(rn_op *op) {
    purge_op *p = op->arg;
    purge_driver *d = p->driver;
    d->inflight--;
    free(p);
    driver_free_when_idle(d);
}

static void submit_purge(purge_driver *d, const rn_stream *s) {
    purge_op *p = rn_xcalloc(1, sizeof *p + s->path_len + 1);
    memcpy(p->path, s->path, s->path_len);
    p->driver = d;
    p->op.in = (rn_op_request){.kind = RN_OP_PURGE,
                               .path = p->path,
                               .path_len = s->path_len,
                               .ttl_s = -1,
                               .expires_at_ms = -1,
                               .stream_id = s->id};
    p->op.done = purged;
    p->op.arg = p;
    d->inflight++;
    rn_engine_submit(d->engine, &p->op);
}

/* True when s is fenced for its own group (its PURGE may be logged). */
static int covered(const rn_state *st, const rn_stream *s) {
    const rn_fence *f = rn_state_path_fence(st, s->path, s->path_len);
    return f && !s->pending_create && rn_fence_covers(f, s->id);
}

static void tick(uv_timer_t *t) {
    purge_driver *d = t->data;
    rn_engine *e = d->engine;
    if (d->checkpoint_due && (!e->checkpoint_wanted || engine_checkpoint_start(e) == 0))
        d->checkpoint_due = 0; /* started here, or by the log's batch hook */
    if (d->inflight || !e->purge_wanted)
        return;
    /* collect first: a submission may destroy streams (a cascade) */
    rn_stream **batch = rn_xcalloc(PURGE_BATCH, sizeof *batch);
    size_t n = 0, left = 0, i = 0;
    int cut_round = !e->cut_asks; /* forks apart are asked about one round at a time */
    int64_t now = rn_now_ms();
    void *v;
    while (rn_map_next(&e->state.by_path, &i, &v)) {
        rn_stream *s = v;
        if (!rn_state_path_fence(&e->state, s->path, s->path_len) || s->pending_create)
            continue;
        left++;
        if (!covered(&e->state, s) || !engine_log_accepts(e, s->path, s->path_len))
            continue;
        if (s->npins && cut_round)
            engine_cut_pinned(e, s, now); /* its PURGE waits for its forks apart */
        else if (!s->npins && n < PURGE_BATCH)
            batch[n++] = s;
    }
    if (left == 0) {
        e->purge_wanted = 0;
        d->checkpoint_due = e->wal != NULL;
        e->checkpoint_wanted = e->wal != NULL; /* under write load, between two batches */
    }
    uint64_t *ids = rn_xcalloc(n ? n : 1, sizeof *ids);
    for (size_t k = 0; k < n; k++)
        ids[k] = batch[k]->id;
    for (size_t k = 0; k < n; k++) {
        const rn_stream *s = rn_state_stream(&e->state, ids[k]); /* still there? */
        if (s)
            submit_purge(d, s);
    }
    free(ids);
    free(batch);
}

void rn_engine_purge_start(rn_engine *e) {
    assert(!e->purge);
    purge_driver *d = rn_xcalloc(1, sizeof *d);
    d->engine = e;
    uv_timer_init(e->loop, &d->timer);
    d->timer.data = d;
    uv_timer_start(&d->timer, tick, PURGE_TICK_MS, PURGE_TICK_MS);
    uv_unref((uv_handle_t *)&d->timer);
    if (e->state.fences.count)
        e->purge_wanted = 1; /* the state was loaded with fences */
    e->purge = d;
}

static void timer_closed(uv_handle_t *h) {
    purge_driver *d = h->data;
    d->closed = 1;
    driver_free_when_idle(d);
}

void rn_engine_purge_stop(rn_engine *e) {
    purge_driver *d = e->purge;
    if (!d)
        return;
    e->purge = NULL;
    uv_timer_stop(&d->timer);
    uv_close((uv_handle_t *)&d->timer, timer_closed);
}

void rn_engine_foreach_fenced(rn_engine *e, void (*fn)(rn_stream *s, void *arg), void *arg) {
    size_t i = 0;
    void *v;
    if (!e->state.fences.count)
        return;
    while (rn_map_next(&e->state.by_path, &i, &v)) {
        rn_stream *s = v;
        if (!s->pending_create && rn_state_path_fence(&e->state, s->path, s->path_len))
            fn(s, arg);
    }
}
