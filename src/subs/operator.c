/*
 * operator.c — the operator's view of subscriptions (ops/admin.c, the
 * admin routes of docs/ADMIN.md): a page of them in id order with their
 * delivery state, and the subscriptions that link one stream. Reads only;
 * secrets never appear (rn_view_sub's rendering, which publishes none).
 */
#include "subs/subs_int.h"
#include "protocol/offset.h"
#include "util/text.h"
#include "util/topk.h"

#include <stdlib.h>
#include <string.h>

/* What the subscription's wake is doing now. */
static const char *wake_state(const rn_sub *sub) {
    if (!sub->wake_id[0])
        return "idle";
    if (sub->cfg.type == RN_SUB_WEBHOOK) {
        if (sub->fetch)
            return "delivering";
        return sub->lease_expires_ms > 0 ? "leased" : "pending";
    }
    if (sub->holder)
        return "claimed";
    return sub->announced ? "announced" : "pending";
}

/* rn_view_sub's object with the operator's fields: links, those with data
 * past their acked offset, the wake's state, failed attempts, the lease. */
static json_t *admin_view(rn_subs *S, const rn_sub *sub) {
    json_t *o = rn_view_sub(S, sub);
    size_t pending = 0, i = 0;
    void *v;
    while (rn_map_next(&sub->links, &i, &v)) {
        const rn_sub_link *l = v;
        pending += rn_link_tail(S, l) > l->acked;
    }
    json_object_set_new(o, "links", json_integer((json_int_t)sub->links.count));
    json_object_set_new(o, "pending_links", json_integer((json_int_t)pending));
    json_object_set_new(o, "wake", json_string(wake_state(sub)));
    json_object_set_new(o, "attempts", json_integer((json_int_t)sub->attempts));
    char when[48];
    if (sub->lease_expires_ms > 0)
        rn_format_rfc3339(sub->lease_expires_ms, when);
    json_object_set_new(o, "lease_expires_at",
                        sub->lease_expires_ms > 0 ? json_string(when) : json_null());
    return o;
}

int rn_subs_admin_page(rn_subs *S, const char *after, size_t after_len, size_t limit, json_t *out) {
    rn_topk page;
    rn_topk_init(&page, limit + 1, after, after_len);
    size_t i = 0;
    void *v;
    while (rn_map_next(&S->subs, &i, &v)) {
        rn_sub *sub = v;
        rn_topk_offer(&page, sub->id, sub->id_len, sub);
    }
    size_t n = rn_topk_sort(&page);
    for (size_t k = 0; k < n && k < limit; k++)
        json_array_append_new(out, admin_view(S, page.heap[k].item));
    rn_topk_free(&page);
    return n > limit;
}

void rn_subs_admin_links(rn_subs *S, const char *path, size_t len, json_t *out) {
    rn_watch *w = rn_watch_get(S, path, len);
    if (!w)
        return;
    for (rn_list_node *n = w->links.first; n; n = n->next) {
        const rn_sub_link *l = rn_list_entry(n, rn_sub_link, watch_link);
        char acked[RN_OFFSET_LEN + 1];
        rn_offset_format(l->acked, acked);
        json_array_append_new(
            out,
            json_pack("{s:s, s:s, s:s, s:s}", "id", l->sub->id, "type",
                      l->sub->cfg.type == RN_SUB_WEBHOOK ? "webhook" : "pull-wake", "link_type",
                      l->is_explicit ? "explicit" : "glob", "acked_offset", acked));
    }
}
