/*
 * wakestream.c — pull-wake events (PROTOCOL.md §7.2).
 *
 * A wake is announced by appending {"type":"wake","subscription_id",
 * "stream","generation","ts"} to the subscription's wake stream through
 * the engine, like any client append (logged, synced, then visible to
 * readers). The append carries the wake stream's own content type. When
 * it has been applied, the wake is marked announced, so a restart
 * re-announces only wakes whose event may be missing: events are written
 * at least once. If the wake stream is gone or refuses the append, the
 * failure is logged and the wake stays claimable.
 */
#include "subs/subs_int.h"
#include "util/log.h"
#include "util/clock.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    rn_op op; /* must live until op.done */
    rn_subs *S;
    char *sub_id;
    char wake_id[RN_WAKE_ID_MAX];
    char *path, *content_type;
    rn_buf body;
} wake_append;

/* Marks wake wake_id of subscription id announced, if it is still current. */
static void mark_announced(rn_subs *S, const char *id, const char *wake_id) {
    rn_sub *sub = rn_sub_find(S, id, strlen(id));
    if (sub && strcmp(sub->wake_id, wake_id) == 0 && !sub->announced) {
        sub->announced = 1;
        rn_durable_changed(S->state);
    }
}

static void on_appended(rn_op *op) {
    wake_append *wa = op->arg;
    if (op->out.result != RN_OK_APPENDED)
        rn_log(RN_LOG_WARN, "wake_event_refused",
               "subscription %s: the append to %s failed (result %d)", wa->sub_id, wa->path,
               (int)op->out.result);
    mark_announced(wa->S, wa->sub_id, wa->wake_id);
    rn_buf_free(&wa->body);
    free(wa->sub_id);
    free(wa->path);
    free(wa->content_type);
    free(wa);
}

void rn_wakestream_announce(rn_subs *S, rn_sub *sub) {
    const char *path = sub->cfg.wake_stream;
    rn_stream *ws = rn_engine_find(S->engine, path, strlen(path));
    if (!ws) {
        rn_log(RN_LOG_WARN, "wake_event_refused", "subscription %s: wake stream %s does not exist",
               sub->id, path);
        mark_announced(S, sub->id, sub->wake_id);
        return;
    }
    wake_append *wa = rn_xcalloc(1, sizeof *wa);
    wa->S = S;
    wa->sub_id = rn_xstrdup(sub->id);
    strcpy(wa->wake_id, sub->wake_id);
    wa->path = rn_xstrdup(path);
    wa->content_type = rn_xstrndup(ws->content_type, ws->content_type_len);
    json_t *ev = json_pack("{s:s, s:s, s:s, s:I, s:I}", "type", "wake", "subscription_id", sub->id,
                           "stream", sub->trigger ? sub->trigger : "", "generation",
                           (json_int_t)sub->generation, "ts", (json_int_t)rn_now_ms());
    char *text = json_dumps(ev, JSON_COMPACT);
    json_decref(ev);
    rn_buf_append_str(&wa->body, text);
    free(text);
    rn_op *op = &wa->op;
    op->in.kind = RN_OP_APPEND;
    op->in.path = wa->path;
    op->in.path_len = strlen(wa->path);
    op->in.content_type = wa->content_type;
    op->in.content_type_len = ws->content_type_len;
    op->in.ttl_s = -1;
    op->in.expires_at_ms = -1;
    op->in.body = wa->body.data;
    op->in.body_len = wa->body.len;
    op->done = on_appended;
    op->arg = wa;
    rn_engine_submit(S->engine, op);
}
