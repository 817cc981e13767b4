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
 * failure is logged and the wake stays claimable; an append refused for
 * the log's or the disk's state (no leader, busy, full) is tried again a
 * second later.
 *
 * In cluster mode the wake stream's group may be led by another node than
 * the one delivering, or not even hosted by it (then the stream is known
 * from its leader's last answer, elsewhere.c): the event is then POSTed to
 * that leader's public URL like a client append (with Runnel-No-Forward,
 * so a node that lost the leadership meanwhile answers 307 rather than
 * pass it on; a node hosting the group, when its leader is not known,
 * answers 307 too), through a client of the module's own (the webhooks'
 * SSRF policy is for receivers' addresses, not the cluster's). No answer,
 * a 3xx or a 5xx is tried again a second later (the wake's
 * next_attempt_ms; wake.c's timer); a 4xx is a refusal, logged as above.
 */
#include "subs/subs_int.h"
#include "protocol/routing.h"
#include "util/log.h"
#include "util/clock.h"
#include "util/routes.h"

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

/* Nothing was logged, and a later try may be: the log's or the disk's
 * state, not the stream's, refused the append. */
static int worth_again(rn_result r) {
    switch (r) {
    case RN_ERR_NO_LEADER:
    case RN_ERR_LOG_BUSY:
    case RN_ERR_APPLY_STOPPED:
    case RN_ERR_UNAVAILABLE:
    case RN_ERR_DISK_FULL:
    case RN_ERR_COLD_BACKPRESSURE:
    case RN_ERR_COLD_STORE_FAILED:
        return 1;
    default:
        return 0;
    }
}

static void on_appended(rn_op *op) {
    wake_append *wa = op->arg;
    rn_result r = op->out.result;
    rn_sub *sub = rn_sub_find(wa->S, wa->sub_id, strlen(wa->sub_id));
    if (r != RN_OK_APPENDED && worth_again(r)) {
        rn_log(RN_LOG_WARN, "wake_event_retry",
               "subscription %s: the append to %s failed (result %d); trying again in 1 s",
               wa->sub_id, wa->path, (int)r);
        if (wa->S->active && sub && strcmp(sub->wake_id, wa->wake_id) == 0 && !sub->announced)
            rn_wake_announce_again(wa->S, sub);
    } else {
        if (r != RN_OK_APPENDED)
            rn_log(RN_LOG_WARN, "wake_event_refused",
                   "subscription %s: the append to %s failed (result %d)", wa->sub_id, wa->path,
                   (int)r);
        mark_announced(wa->S, wa->sub_id, wa->wake_id);
    }
    rn_buf_free(&wa->body);
    free(wa->sub_id);
    free(wa->path);
    free(wa->content_type);
    free(wa);
}

/* The wake event of sub's current wake (JSON text). */
static void event_text(const rn_sub *sub, rn_buf *out) {
    json_t *ev = json_pack("{s:s, s:s, s:s, s:I, s:I}", "type", "wake", "subscription_id", sub->id,
                           "stream", sub->trigger ? sub->trigger : "", "generation",
                           (json_int_t)sub->generation, "ts", (json_int_t)rn_now_ms());
    char *text = json_dumps(ev, JSON_COMPACT);
    json_decref(ev);
    rn_buf_append_str(out, text);
    free(text);
}

static void on_remote(void *arg, const rn_fetch_result *r) {
    rn_sub *sub = arg;
    rn_subs *S = sub->owner;
    sub->fetch = NULL;
    if (r->failure == RN_FETCH_ANSWERED && r->status >= 200 && r->status < 300) {
        mark_announced(S, sub->id, sub->wake_id);
    } else if (r->failure == RN_FETCH_ANSWERED && r->status >= 400 && r->status < 500) {
        rn_log(RN_LOG_WARN, "wake_event_refused",
               "subscription %s: the append to %s was refused (%ld)", sub->id, sub->cfg.wake_stream,
               r->status);
        mark_announced(S, sub->id, sub->wake_id);
    } else {
        rn_log(RN_LOG_WARN, "wake_event_retry",
               "subscription %s: the append to %s got %s; trying again in 1 s", sub->id,
               sub->cfg.wake_stream, r->failure == RN_FETCH_ANSWERED ? "no success" : r->error);
        rn_wake_announce_again(S, sub);
    }
}

/* Appends a path byte, percent-encoded unless unreserved or '/'. */
static void append_path(rn_buf *out, const char *path) {
    for (const unsigned char *p = (const unsigned char *)path; *p; p++) {
        unsigned char c = *p;
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
            c == '-' || c == '.' || c == '_' || c == '~' || c == '/')
            rn_buf_append_byte(out, c);
        else
            rn_buf_appendf(out, "%%%02X", c);
    }
}

/* Cluster mode: the event goes to the leader of the wake stream's group. */
static void append_remote(rn_subs *S, rn_sub *sub, const rn_seen *ws) {
    const char *path = sub->cfg.wake_stream;
    rn_group_route r;
    rn_routing_route(path, strlen(path), &r);
    /* a group not hosted here: its leader as peers report it, else a node
     * hosting it (which answers 307: tried again a second later) */
    if (r.serves || !r.leader_url) { /* no other leader known yet */
        rn_wake_announce_again(S, sub);
        return;
    }
    rn_buf url = {0}, ct = {0}, body = {0};
    rn_buf_append_str(&url, r.leader_url);
    rn_buf_append_str(&url, "/v1/stream/");
    append_path(&url, path);
    rn_buf_append_byte(&url, 0);
    rn_buf_appendf(&ct, "Content-Type: %.*s", (int)ws->content_type_len, ws->content_type);
    rn_buf_append_byte(&ct, 0);
    event_text(sub, &body);
    const char *headers[] = {(const char *)ct.data, RN_NO_FORWARD_HEADER ": subscriptions"};
    sub->fetch =
        rn_subs_post(S, S->peer_out, (const char *)url.data, headers, 2, &body, on_remote, sub);
    rn_buf_free(&url);
    rn_buf_free(&ct);
    if (!sub->fetch)
        rn_wake_announce_again(S, sub);
}

void rn_wakestream_announce(rn_subs *S, rn_sub *sub) {
    const char *path = sub->cfg.wake_stream;
    rn_seen seen, *ws = rn_subs_stream(S, path, strlen(path), &seen) ? &seen : NULL;
    if (!ws) {
        rn_log(RN_LOG_WARN, "wake_event_refused", "subscription %s: wake stream %s does not exist",
               sub->id, path);
        mark_announced(S, sub->id, sub->wake_id);
        return;
    }
    if (S->replicated && !rn_engine_leads(S->engine, path, strlen(path))) {
        append_remote(S, sub, ws);
        return;
    }
    wake_append *wa = rn_xcalloc(1, sizeof *wa);
    wa->S = S;
    wa->sub_id = rn_xstrdup(sub->id);
    strcpy(wa->wake_id, sub->wake_id);
    wa->path = rn_xstrdup(path);
    wa->content_type = rn_xstrndup(ws->content_type, ws->content_type_len);
    event_text(sub, &wa->body);
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
