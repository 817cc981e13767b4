/*
 * cutforks.c — a bucket purge of a stream that forks in other groups read
 * (cluster mode: forks apart, pins.c). A fork of the purged stream in its
 * own group is cut by the PURGE's apply (fences.c); a fork apart is in
 * another group's state, which only that group's log changes. So:
 *
 *   - The purged stream's leader (its purge driver, purge.c) does not log
 *     the PURGE while the stream has pins (such a PURGE would change
 *     nothing: fences.c). For each pin it asks the fork's leader to cut
 *     the fork (rn_cmdlog_ops.fork_cut), and logs the pin's UNPIN once
 *     that leader answered that it did, or that the fork is not one (gone,
 *     once the pin is RN_PIN_GRACE_MS old, as the sweep of orphan pins
 *     does). With the last pin gone, the PURGE goes.
 *   - The fork's leader (rn_engine_cut) logs a CUT of the fork in its own
 *     group, whose apply raises the retained offsets of the fork and of
 *     its forks there (fences.c), then asks the same of every fork apart
 *     that any of them pins, at the offset where its chain reaches the
 *     cut, and answers once they all answered.
 *
 * Nothing is decided by a node alone: the pins say which forks are still
 * to cut, in the purged stream's group's log, until each fork's group
 * logged its cut. A leader that dies midway leaves the pins: the next
 * leader asks again, and a CUT already applied is not logged again (the
 * fork no longer reads the source), but its forks apart are asked again.
 */
#include "engine/engine_int.h"
#include "engine/fences.h"
#include "util/clock.h"

#include <stdlib.h>
#include <string.h>

#define CUT_ASKS 16       /* pins asked about in one round */
#define CUT_RETRY_MS 1000 /* after a round with an unknown answer */

/* ---- the purged stream's leader ---- */

typedef struct {
    rn_engine *e;
    uint64_t source_id, fork_id;
} cut_question;

static void pin_cut(void *arg, int cut) {
    cut_question *q = arg;
    rn_engine *e = q->e;
    e->cut_asks--;
    const rn_stream *s = rn_state_stream(&e->state, q->source_id);
    const rn_pin *p = s ? rn_stream_pin(s, q->fork_id) : NULL;
    int old = p && rn_now_ms() - p->time_ms >= RN_PIN_GRACE_MS; /* a create under way pinned it */
    if (cut == 1 || (cut == 0 && old))
        rn_engine_unpin(e, q->source_id, q->fork_id);
    else
        e->cut_retry_ms = rn_now_ms() + CUT_RETRY_MS;
    free(q);
}

void engine_cut_pinned(rn_engine *e, const rn_stream *s, int64_t now) {
    if (!e->log->ops->fork_cut || s->busy || now < e->cut_retry_ms)
        return;
    for (uint32_t k = 0; k < s->npins && e->cut_asks < CUT_ASKS; k++) {
        cut_question *q = rn_xmalloc(sizeof *q);
        *q = (cut_question){.e = e, .source_id = s->id, .fork_id = s->pins[k].fork_id};
        e->cut_asks++;
        e->log->ops->fork_cut(e->log, q->source_id, q->fork_id, RN_CUT_SOURCE, pin_cut, q);
    }
}

/* ---- the fork's leader ---- */

typedef struct {
    rn_engine *e;
    uint64_t source_id, fork_id, offset;
    rn_fork_cut_done done;
    void *arg;
    unsigned waiting; /* forks apart asked, not answered */
    int failed;       /* one of them answered -1 */
    rn_cmdlog_entry entry;
    rn_cmd cmd;
    rn_buf head;
} cut_job;

static void job_end(cut_job *j, int cut) {
    j->done(j->arg, cut);
    rn_buf_free(&j->head);
    free(j);
}

static void fork_answered(void *arg, int cut) {
    cut_job *j = arg;
    j->failed = j->failed || cut < 0;
    if (--j->waiting == 0)
        job_end(j, j->failed ? -1 : 1);
}

/* Asks the leaders of the forks apart that x or its forks here pin to cut
 * them where their chains reach x's cut; answers j once they all did. */
static void cut_pinned_forks(cut_job *j) {
    rn_engine *e = j->e;
    const rn_stream *x = rn_state_stream(&e->state, j->fork_id);
    if (!x) {
        job_end(j, 1); /* deleted since: nothing reads through it */
        return;
    }
    uint64_t top = j->offset < x->fork_offset ? j->offset : x->fork_offset;
    size_t n, asks = 0;
    rn_stream **all = rn_state_streams_by_id(&e->state, &n);
    for (size_t k = 0; k < n; k++)
        asks += all[k]->npins;
    uint64_t *ask = rn_xcalloc(asks ? 3 * asks : 1, sizeof *ask); /* source, fork, offset */
    asks = 0;
    for (size_t k = 0; k < n; k++) {
        const rn_stream *y = all[k];
        uint64_t floor = y == x ? top : rn_fences_reach(y, x);
        if (!y->npins || floor == UINT64_MAX)
            continue;
        for (uint32_t p = 0; p < y->npins; p++, asks++) {
            ask[3 * asks] = y->id;
            ask[3 * asks + 1] = y->pins[p].fork_id;
            ask[3 * asks + 2] = floor < top ? floor : top;
        }
    }
    free(all);
    j->waiting = (unsigned)asks + 1; /* + 1: none answers before all are asked */
    for (size_t k = 0; k < asks; k++)
        e->log->ops->fork_cut(e->log, ask[3 * k], ask[3 * k + 1], ask[3 * k + 2], fork_answered, j);
    free(ask);
    fork_answered(j, 1);
}

static void cut_logged(rn_cmdlog_entry *entry) {
    cut_job *j = entry->arg;
    assert(j->e->ops_in_log > 0);
    j->e->ops_in_log--;
    if (entry->applied)
        cut_pinned_forks(j);
    else
        job_end(j, -1);
}

void rn_engine_cut(rn_engine *e, uint64_t source_id, uint64_t fork_id, uint64_t offset,
                   rn_fork_cut_done done, void *arg) {
    assert(source_id && fork_id && done);
    const rn_stream *x = rn_state_stream(&e->state, fork_id);
    if (!x) {
        done(arg, 0);
        return;
    }
    if (x->pending_create || !e->log->ops->fork_cut ||
        !engine_log_accepts(e, x->path, x->path_len)) {
        done(arg, -1); /* its create under way, or not this node's to log */
        return;
    }
    int reads = x->apart_source == source_id;
    int forgot = !x->apart_source && offset == RN_CUT_SOURCE && x->retained >= x->fork_offset;
    if (!reads && !forgot) {
        done(arg, 0);
        return;
    }
    cut_job *j = rn_xcalloc(1, sizeof *j);
    *j = (cut_job){.e = e,
                   .source_id = source_id,
                   .fork_id = fork_id,
                   .offset = offset,
                   .done = done,
                   .arg = arg};
    uint64_t floor = offset < x->fork_offset ? offset : x->fork_offset;
    if (!reads || (offset != RN_CUT_SOURCE && x->retained >= floor)) {
        cut_pinned_forks(j); /* its CUT applied before: its forks apart may not have */
        return;
    }
    j->cmd = (rn_cmd){.type = RN_CMD_CUT,
                      .stream_id = fork_id,
                      .time_ms = rn_now_ms(),
                      .source_id = source_id,
                      .offset = offset};
    rn_cmd_encode_head(&j->cmd, &j->head);
    j->entry.cmd = &j->cmd;
    j->entry.piece[0] = (struct iovec){j->head.data, j->head.len};
    j->entry.pieces = 1;
    j->entry.done = cut_logged;
    j->entry.arg = j;
    e->ops_in_log++;
    e->log->ops->submit(e->log, &j->entry);
}
