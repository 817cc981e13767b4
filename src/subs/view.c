/*
 * view.c — JSON renderings of subscriptions for responses and webhook
 * bodies (PROTOCOL.md §6.3, §7.1, §7.2). Secrets never appear here: the
 * signing key is published only as its public JWK, and tokens are minted
 * by the callers that hand them to their one recipient.
 */
#include "subs/subs_int.h"
#include "protocol/offset.h"
#include "util/text.h"

#include <stdlib.h>
#include <string.h>

static json_t *offset_json(uint64_t pos) {
    char tok[RN_OFFSET_LEN + 1];
    rn_offset_format(pos, tok);
    return json_string(tok);
}

static json_t *opt_string(const char *s) {
    return s ? json_string(s) : json_null();
}

static const char *link_type(const rn_sub_link *l) {
    return l->is_explicit ? "explicit" : "glob";
}

char *rn_view_action_url(const rn_subs *S, const rn_sub *sub, const char *action) {
    rn_buf b = {0};
    rn_buf_appendf(&b, "%s/v1/stream/__ds/subscriptions/%s/%s", S->public_url, sub->id, action);
    rn_buf_append_byte(&b, 0);
    return (char *)rn_buf_steal(&b, NULL);
}

json_t *rn_view_wake_streams(rn_subs *S, rn_sub *sub) {
    json_t *a = json_array();
    rn_sub_link **all = rn_sub_links_sorted(sub);
    for (size_t i = 0; i < sub->links.count; i++) {
        rn_sub_link *l = all[i];
        uint64_t tail = rn_link_tail(S, l);
        l->snapshot = (int64_t)tail;
        json_array_append_new(a, json_pack("{s:s, s:s, s:o, s:o, s:b}", "path", l->path,
                                           "link_type", link_type(l), "acked_offset",
                                           offset_json(l->acked), "tail_offset", offset_json(tail),
                                           "has_pending", tail > l->acked));
    }
    free(all);
    return a;
}

json_t *rn_view_sub(rn_subs *S, const rn_sub *sub) {
    const rn_sub_config *c = &sub->cfg;
    json_t *streams = json_array();
    rn_sub_link **all = rn_sub_links_sorted(sub);
    for (size_t i = 0; i < sub->links.count; i++)
        json_array_append_new(streams, json_pack("{s:s, s:s, s:o}", "path", all[i]->path,
                                                 "link_type", link_type(all[i]), "acked_offset",
                                                 offset_json(all[i]->acked)));
    free(all);
    json_t *webhook = json_null();
    if (c->type == RN_SUB_WEBHOOK) {
        char jwks[2048];
        snprintf(jwks, sizeof jwks, "%s/v1/stream/__ds/jwks.json", S->public_url);
        webhook = json_pack("{s:s, s:{s:s, s:s, s:s}}", "url", c->webhook_url, "signing", "alg",
                            "ed25519", "kid", rn_subs_keys_kid(S->keys), "jwks_url", jwks);
    }
    char created[48];
    rn_format_rfc3339(sub->created_ms, created);
    int failed = c->type == RN_SUB_WEBHOOK && sub->wake_id[0] && sub->attempts > 0;
    json_t *o = json_object();
    json_object_set_new(o, "id", json_string(sub->id));
    json_object_set_new(o, "subscription_id", json_string(sub->id));
    json_object_set_new(o, "type",
                        json_string(c->type == RN_SUB_WEBHOOK ? "webhook" : "pull-wake"));
    json_object_set_new(o, "pattern", opt_string(c->pattern));
    json_object_set_new(o, "streams", streams);
    json_object_set_new(o, "webhook", webhook);
    json_object_set_new(o, "wake_stream", opt_string(c->wake_stream));
    json_object_set_new(o, "lease_ttl_ms", json_integer((json_int_t)c->lease_ttl_ms));
    json_object_set_new(o, "created_at", json_string(created));
    json_object_set_new(o, "status", json_string(failed ? "failed" : "active"));
    json_object_set_new(o, "description", opt_string(c->description));
    return o;
}
