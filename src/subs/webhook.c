/*
 * webhook.c — webhook delivery attempts (PROTOCOL.md §7.1).
 *
 * An attempt POSTs the wake notification: the subscription id, wake id,
 * generation, a snapshot of every linked stream (acked and tail offsets),
 * the callback URL and a callback token minted for this wake. The body is
 * signed with the server's Ed25519 key over "<t>.<body>" in the
 * Webhook-Signature header. The answer decides the wake's fate (wake.c):
 * 2xx with a JSON object whose "done" is true acks the snapshot and ends
 * the wake; any other 2xx hands the wake to the receiver under a lease;
 * anything else, or no answer within --webhook-timeout-ms, is a failed
 * attempt and is retried with backoff.
 */
#include "subs/subs_int.h"
#include "util/log.h"
#include "util/clock.h"
#include "util/metrics.h"

#include <stdlib.h>
#include <string.h>

/* True when an answer body is a JSON object with "done": true. */
static int answer_done(const rn_fetch_result *r) {
    json_t *j = json_loadb((const char *)r->body, r->body_len, 0, NULL);
    int done = json_is_object(j) && json_is_true(json_object_get(j, "done"));
    json_decref(j);
    return done;
}

static void on_result(void *arg, const rn_fetch_result *r) {
    rn_sub *sub = arg;
    rn_subs *S = sub->owner;
    sub->fetch = NULL;
    if (r->failure == RN_FETCH_ANSWERED && r->status >= 200 && r->status < 300) {
        rn_metric.sub_deliveries++;
        rn_wake_delivered(S, sub, answer_done(r));
        return;
    }
    rn_metric.sub_delivery_failures++;
    if (r->failure == RN_FETCH_ANSWERED)
        rn_log(RN_LOG_WARN, "webhook_failed",
               "subscription %s: the receiver answered %ld (attempt %u)", sub->id, r->status,
               sub->attempts + 1);
    else
        rn_log(RN_LOG_WARN, "webhook_failed", "subscription %s: %s (attempt %u)", sub->id, r->error,
               sub->attempts + 1);
    rn_wake_delivery_failed(S, sub);
}

rn_fetch *rn_subs_post(rn_subs *S, rn_outbound *out, const char *url, const char *const *headers,
                       size_t nheaders, rn_buf *body, rn_fetch_fn fn, void *arg) {
    rn_fetch_request req = {.method = "POST",
                            .url = url,
                            .headers = headers,
                            .nheaders = nheaders,
                            .body = body,
                            .body_fd = -1,
                            .sink_fd = -1,
                            .sink_cap = RN_FETCH_MAX_BODY,
                            .timeout_ms = S->webhook_timeout_ms};
    return rn_outbound_start(out, &req, fn, arg);
}

void rn_webhook_deliver(rn_subs *S, rn_sub *sub) {
    int64_t now = rn_now_ms();
    rn_buf token = {0};
    rn_token_mint(rn_subs_keys_token_key(S->keys), sub->id, sub->generation, sub->wake_id,
                  now / 1000 + RN_TOKEN_TTL_S, &token);
    char *callback = rn_view_action_url(S, sub, "callback");
    json_t *msg = json_object();
    json_object_set_new(msg, "subscription_id", json_string(sub->id));
    json_object_set_new(msg, "wake_id", json_string(sub->wake_id));
    json_object_set_new(msg, "generation", json_integer((json_int_t)sub->generation));
    json_object_set_new(msg, "streams", rn_view_wake_streams(S, sub));
    json_object_set_new(msg, "callback_url", json_string(callback));
    json_object_set_new(msg, "callback_token", json_stringn((const char *)token.data, token.len));
    free(callback);
    rn_buf_free(&token);
    char *text = json_dumps(msg, JSON_COMPACT);
    json_decref(msg);
    rn_buf body = {0};
    rn_buf_append_str(&body, text);
    free(text);
    rn_buf sig = {0};
    rn_buf_append_str(&sig, "Webhook-Signature: ");
    rn_subs_keys_sign_webhook(S->keys, now / 1000, body.data, body.len, &sig);
    rn_buf_append_byte(&sig, 0);
    const char *headers[] = {"Content-Type: application/json", (const char *)sig.data};
    sub->fetch = rn_subs_post(S, S->out, sub->cfg.webhook_url, headers, 2, &body, on_result, sub);
    rn_buf_free(&sig);
}
