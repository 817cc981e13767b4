/*
 * apart.c — the engine's side of forks apart from their source (cluster
 * mode: the fork's key hashes to another group than its source's; the
 * state's side is pins.c). A create of such a fork issues the fork's id,
 * has the source's group pin it (rn_cmdlog_ops.pin: the source's leader
 * runs the create's checks of its source and logs a PIN), waits, bounded,
 * until this replica applied that pin (so that the fork reads its source
 * here as soon as it is answered), then logs its CREATE carrying the
 * pin's answer; a replica that does not host the source's group logs it
 * at once and answers it once its copy of the inherited range is here
 * (inherit.c), bounded too. A pin the create did not use is released;
 * one whose fork is gone (a create that never applied, a release that
 * was lost) is released by the sweep of the source's leader. Also what
 * the source's leader runs for its peers: rn_engine_pin, rn_engine_unpin,
 * rn_engine_fork_of.
 */
#include "engine/engine_int.h"
#include "util/fault.h"

#include <stdlib.h>
#include <string.h>

#define PIN_WAIT_STEP_MS 10
#define PIN_WAIT_MAX_MS 3000 /* a replica this far behind its source's group */
#define PIN_SWEEP_ASKS 16    /* questions of one sweep */

struct engine_apart {
    rn_engine *e;
    rn_op *op;
    uint64_t fork_id;
    int answered; /* the pin applied: `ans` holds its answer */
    rn_fork_pin_answer ans;
    char *ct;          /* the answer's content type (or the conflicting one) */
    int keep;          /* the pin stays whatever op's answer (the sweep's to release) */
    uint64_t waited;   /* ms waited for this replica to apply the pin (or copy) */
    uv_timer_t *timer; /* that wait */
    int holding;       /* applied: the answer waits for the inherited range's copy */
};

int engine_apart(const rn_engine *e, const rn_op_request *in) {
    assert(in->fork_source);
    const rn_cmdlog_ops *ops = e->log->ops;
    return ops->apart &&
           ops->apart(e->log, in->fork_source, in->fork_source_len, in->path, in->path_len);
}

const rn_fork_pin_answer *engine_apart_answer(rn_op *op) {
    const struct engine_apart *a = priv(op)->apart;
    return a && a->answered ? &a->ans : NULL;
}

uint64_t engine_apart_fork_id(rn_op *op) {
    const struct engine_apart *a = priv(op)->apart;
    return a && a->answered ? a->fork_id : 0;
}

static void timer_closed(uv_handle_t *h) {
    free(h);
}

static void on_wait(uv_timer_t *t);

static void wait_more(struct engine_apart *a);

/* Runs the create again once this replica applied the pin, or answers it
 * 503 when that takes too long (the pin is then released). A replica
 * without the source's group never sees the pin: it logs the create at
 * once, and its answer waits for the copy instead (engine_apart_hold). */
static void wait_applied(struct engine_apart *a) {
    rn_engine *e = a->e;
    const rn_stream *src = rn_state_stream(&e->state, a->ans.source_id);
    if ((src && rn_stream_pin(src, a->fork_id)) || !engine_hosts(e, a->ans.source_id)) {
        engine_run_op(e, a->op);
        return;
    }
    if (a->waited >= PIN_WAIT_MAX_MS) {
        engine_finish_op(a->op, RN_ERR_NO_LEADER, NULL);
        return;
    }
    wait_more(a);
}

/* Answers the applied create once this replica copied the fork's
 * inherited range, or when that takes too long: created either way (the
 * create is durable; reads of the range meanwhile go to another node). */
static void wait_copied(struct engine_apart *a) {
    rn_stream *s = rn_state_stream(&a->e->state, a->fork_id);
    if (!s) { /* removed meanwhile: the outcome cannot be shown (as pipeline.c) */
        engine_finish_op(a->op, RN_ERR_UNAVAILABLE, NULL);
        return;
    }
    if (!(s->gap_from < s->gap_to && s->gap_from < s->fork_offset) ||
        a->waited >= PIN_WAIT_MAX_MS) {
        engine_finish_op(a->op, RN_OK_CREATED, s);
        return;
    }
    wait_more(a);
}

static void wait_more(struct engine_apart *a) {
    if (!a->timer) {
        a->timer = rn_xmalloc(sizeof *a->timer);
        uv_timer_init(a->e->loop, a->timer);
        a->timer->data = a;
    }
    a->waited += PIN_WAIT_STEP_MS;
    uv_timer_start(a->timer, on_wait, PIN_WAIT_STEP_MS, 0);
}

static void on_wait(uv_timer_t *t) {
    struct engine_apart *a = t->data;
    if (a->holding)
        wait_copied(a);
    else
        wait_applied(a);
}

int engine_apart_hold(rn_op *op, const rn_stream *s) {
    struct engine_apart *a = priv(op)->apart;
    if (!a || !a->answered || !s->inherit || !(s->gap_from < s->gap_to))
        return 0;
    a->holding = 1;
    a->waited = 0;
    wait_more(a);
    return 1;
}

/* The source group's answer to the create's pin. */
static void pinned(void *arg, const rn_fork_pin_answer *ans) {
    struct engine_apart *a = arg;
    const char *ct = ans->content_type ? ans->content_type : "";
    a->ct = rn_xstrndup(ct, ans->content_type_len);
    if (ans->result != RN_OK_CREATED) {
        a->keep = 1; /* nothing pinned, or (unknown) the sweep's */
        if (ans->result == RN_ERR_CONTENT_TYPE) {
            a->op->out.conflicting_type = a->ct;
            a->op->out.conflicting_type_len = ans->content_type_len;
        }
        engine_finish_op(a->op, ans->result, NULL);
        return;
    }
    a->ans = *ans;
    a->ans.content_type = a->ct;
    a->answered = 1;
    if (rn_fault_fail("fork-create-after-pin")) { /* as if the node stopped here */
        a->keep = 1;
        engine_finish_op(a->op, RN_ERR_UNAVAILABLE, NULL);
        return;
    }
    wait_applied(a);
}

void engine_apart_pin(rn_engine *e, rn_op *op) {
    assert(!priv(op)->apart && e->log->ops->pin);
    uint64_t id = engine_issue_id(e, op->in.path, op->in.path_len);
    if (!id) {
        engine_finish_op(op, RN_ERR_DISK_FULL, NULL); /* no id could be issued */
        return;
    }
    struct engine_apart *a = rn_xcalloc(1, sizeof *a);
    a->e = e;
    a->op = op;
    a->fork_id = id;
    priv(op)->apart = a;
    const rn_op_request *in = &op->in;
    rn_fork_pin_ask ask = {.source = in->fork_source,
                           .source_len = in->fork_source_len,
                           .content_type = in->content_type,
                           .content_type_len = in->content_type_len,
                           .has_fork_offset = in->has_fork_offset,
                           .fork_offset = in->fork_offset,
                           .fork_sub_offset = in->fork_sub_offset,
                           .fork_id = id};
    e->log->ops->pin(e->log, &ask, pinned, a);
}

struct engine_apart *engine_apart_detach(rn_op *op, rn_result result) {
    struct engine_apart *a = priv(op)->apart;
    if (!a)
        return NULL;
    priv(op)->apart = NULL;
    /* created, or perhaps (its entry's outcome unknown): the fork holds it */
    int used = result == RN_OK_CREATED || result == RN_ERR_UNAVAILABLE;
    if (a->answered && !a->keep && !used)
        a->e->log->ops->unpin(a->e->log, a->ans.source_id, a->fork_id);
    return a;
}

void engine_apart_free(struct engine_apart *a) {
    if (!a)
        return;
    if (a->timer)
        uv_close((uv_handle_t *)a->timer, timer_closed);
    free(a->ct);
    free(a);
}

void engine_apart_destroyed(rn_engine *e, const rn_stream *s) {
    assert(s->apart_source);
    if (e->log && e->log->ops->unpin && engine_log_accepts(e, s->path, s->path_len))
        e->log->ops->unpin(e->log, s->apart_source, s->id);
}

/* ---- the source's leader ---- */

typedef struct {
    rn_op op;
    char *source, *ct;
    rn_fork_pin_done done;
    void *arg;
} pin_op;

static void pin_answered(rn_op *op) {
    pin_op *p = op->arg;
    const rn_stream *src = op->out.stream;
    rn_fork_pin_answer ans = {.result = op->out.result};
    if (ans.result == RN_OK_CREATED && src) {
        uint64_t at = op->out.fork_offset;
        ans.source_id = src->id;
        ans.fork_offset = at;
        ans.retained = src->retained < at ? src->retained : at;
        ans.depth = src->fork_depth + 1;
        ans.ttl_s = src->ttl_s;
        ans.expires_at_ms = src->expires_at_ms;
        ans.content_type = src->content_type;
        ans.content_type_len = src->content_type_len;
    } else if (ans.result == RN_OK_CREATED) {
        ans.result = RN_ERR_UNAVAILABLE; /* applied, and gone since */
    } else if (ans.result == RN_ERR_CONTENT_TYPE) {
        ans.content_type = op->out.conflicting_type;
        ans.content_type_len = op->out.conflicting_type_len;
    }
    p->done(p->arg, &ans);
    free(p->source);
    free(p->ct);
    free(p);
}

void rn_engine_pin(rn_engine *e, const rn_fork_pin_ask *ask, rn_fork_pin_done done, void *arg) {
    assert(ask->fork_id && ask->source_len);
    pin_op *p = rn_xcalloc(1, sizeof *p);
    p->source = rn_xstrndup(ask->source, ask->source_len);
    p->ct = ask->content_type ? rn_xstrndup(ask->content_type, ask->content_type_len) : NULL;
    p->done = done;
    p->arg = arg;
    p->op.in = (rn_op_request){.kind = RN_OP_PIN,
                               .path = p->source,
                               .path_len = ask->source_len,
                               .content_type = p->ct,
                               .content_type_len = ask->content_type_len,
                               .ttl_s = -1,
                               .expires_at_ms = -1,
                               .has_fork_offset = ask->has_fork_offset,
                               .fork_offset = ask->fork_offset,
                               .fork_sub_offset = ask->fork_sub_offset,
                               .fork_id = ask->fork_id};
    p->op.done = pin_answered;
    p->op.arg = p;
    rn_engine_submit(e, &p->op);
}

typedef struct {
    rn_op op;
    char *path;
} unpin_op;

static void unpin_answered(rn_op *op) {
    unpin_op *u = op->arg;
    free(u->path);
    free(u);
}

void rn_engine_unpin(rn_engine *e, uint64_t source_id, uint64_t fork_id) {
    const rn_stream *s = rn_state_stream(&e->state, source_id);
    if (!s || !rn_stream_pin(s, fork_id))
        return;
    unpin_op *u = rn_xcalloc(1, sizeof *u);
    u->path = rn_xstrndup(s->path, s->path_len);
    u->op.in = (rn_op_request){.kind = RN_OP_UNPIN,
                               .path = u->path,
                               .path_len = s->path_len,
                               .ttl_s = -1,
                               .expires_at_ms = -1,
                               .stream_id = source_id,
                               .fork_id = fork_id};
    u->op.done = unpin_answered;
    u->op.arg = u;
    rn_engine_submit(e, &u->op);
}

int rn_engine_fork_of(const rn_engine *e, uint64_t source_id, uint64_t fork_id) {
    const rn_stream *s = rn_state_stream(&e->state, fork_id);
    return s && s->apart_source == source_id; /* pending: its create is under way */
}

/* ---- the sweep of orphan pins ---- */

typedef struct {
    rn_engine *e;
    uint64_t source_id, fork_id;
} pin_question;

static void fork_answered(void *arg, int alive) {
    pin_question *q = arg;
    q->e->pin_asks--;
    if (alive == 0)
        rn_engine_unpin(q->e, q->source_id, q->fork_id);
    free(q);
}

int engine_pins_sweep_due(const rn_engine *e) {
    return e->log->ops->fork_alive && !e->pin_asks;
}

void engine_sweep_pins_of(rn_engine *e, const rn_stream *s, int64_t now) {
    if (!s->npins || s->busy || !engine_log_accepts(e, s->path, s->path_len))
        return;
    for (uint32_t k = 0; k < s->npins && e->pin_asks < PIN_SWEEP_ASKS; k++) {
        if (now - s->pins[k].time_ms < RN_PIN_GRACE_MS)
            continue;
        pin_question *q = rn_xmalloc(sizeof *q);
        *q = (pin_question){.e = e, .source_id = s->id, .fork_id = s->pins[k].fork_id};
        e->pin_asks++;
        e->log->ops->fork_alive(e->log, q->source_id, q->fork_id, fork_answered, q);
    }
}
