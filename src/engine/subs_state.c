/*
 * subs_state.c — the subscriptions' state in a replicated log (engine.h,
 * "replicated subscriptions"): the SUBS command's way into the log, its
 * apply, and its section of the carrying group's manifest.
 *
 * The state is opaque here (subs/state.c's document). A SUBS command
 * names no stream, so, as a FENCE (purge.c), it skips the pipeline's
 * per-stream queues and goes to the log directly, counted in ops_in_log;
 * its stream id field is the carrying group. Each SUBS replaces the state
 * whole, so applying the group's log in order leaves every replica with
 * the last one committed. A manifest of the carrying group ends with the
 * state (after the fences and cold ends sections, written then even when
 * empty); a manifest of that group without it means no subscriptions.
 */
#include "engine/engine_int.h"
#include "util/clock.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    rn_engine *engine;
    rn_cmdlog_entry entry;
    rn_cmd cmd;
    rn_buf head;
    void (*done)(void *arg, int status);
    void *arg;
} subs_job;

void rn_state_apply_subs(rn_state *st, const rn_cmd *c) {
    assert(c->type == RN_CMD_SUBS && c->path_len > 0 && c->stream_id <= 0xff);
    st->subs.len = 0;
    rn_buf_append(&st->subs, c->path, c->path_len);
    st->subs_group = (unsigned)c->stream_id;
}

static void subs_logged(rn_cmdlog_entry *entry) {
    subs_job *j = entry->arg;
    assert(j->engine->ops_in_log > 0);
    j->engine->ops_in_log--;
    int status = entry->applied ? 0 : entry->refusal == RN_ERR_UNAVAILABLE ? -EIO : -EAGAIN;
    j->done(j->arg, status);
    rn_buf_free(&j->head);
    free(j);
}

void rn_engine_subs_put(rn_engine *e, unsigned group, const uint8_t *state, size_t len,
                        void (*done)(void *arg, int status), void *arg) {
    assert(e->log && !e->wal && group <= 0xff && len > 0 && done);
    subs_job *j = rn_xcalloc(1, sizeof *j);
    j->engine = e;
    j->done = done;
    j->arg = arg;
    j->cmd = (rn_cmd){.type = RN_CMD_SUBS,
                      .stream_id = group,
                      .time_ms = rn_now_ms(),
                      .path = (const char *)state,
                      .path_len = len};
    rn_cmd_encode_head(&j->cmd, &j->head);
    j->cmd.path = (const char *)j->head.data + (j->head.len - len); /* the head's copy */
    j->entry.cmd = &j->cmd;
    j->entry.piece[0] = (struct iovec){j->head.data, j->head.len};
    j->entry.pieces = 1;
    j->entry.done = subs_logged;
    j->entry.arg = j;
    e->ops_in_log++;
    e->log->ops->submit(e->log, &j->entry);
}

const uint8_t *rn_engine_subs_state(const rn_engine *e, size_t *len) {
    *len = e->state.subs.len;
    return e->state.subs.len ? e->state.subs.data : NULL;
}

int rn_engine_leads(const rn_engine *e, const char *key, size_t len) {
    return !e->log || engine_log_accepts(e, key, len);
}

int engine_subs_in(const rn_state *st, unsigned group) {
    return st->subs.len > 0 && st->subs_group == group;
}

void engine_restore_subs(rn_state *st, unsigned group, const uint8_t *m, size_t len) {
    if (m) {
        st->subs.len = 0;
        rn_buf_append(&st->subs, m, len);
        st->subs_group = group;
    } else if (engine_subs_in(st, group)) {
        st->subs.len = 0; /* the group's state holds no subscriptions */
    }
}
