/*
 * wake.c — the wake lifecycle of PROTOCOL.md §7: issuing wakes, webhook
 * retries, leases, generation fencing, acks, claims. See subs_int.h for
 * the states.
 *
 * Time. Leases and retry times are wall-clock milliseconds, because they
 * are persisted and must mean the same after a restart. One timer serves
 * the whole module: arm() only ever moves it earlier, and when it fires it
 * scans every subscription, handles what is due and re-arms for the
 * earliest remaining deadline. A stale (too early) firing is harmless.
 *
 * Webhook retries back off exponentially from 1 s to 60 s with ±20%
 * jitter. While a delivery is being attempted or retried the lease does
 * not run; it starts when the receiver accepts the wake (a 2xx answer
 * without "done", or any valid callback), and a callback extends it.
 */
#include "subs/subs_int.h"
#include "protocol/offset.h"
#include "util/backoff.h"
#include "util/clock.h"

#include <assert.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RETRY_BASE_MS 1000
#define RETRY_MAX_MS 60000

static void on_timer(uv_timer_t *t);

/* Makes the timer fire no later than due_ms. */
static void arm(rn_subs *S, int64_t due_ms) {
    if (S->quiesced || (S->timer_due_ms && S->timer_due_ms <= due_ms))
        return;
    int64_t now = rn_now_ms();
    S->timer_due_ms = due_ms;
    uv_timer_start(&S->timer, on_timer, due_ms > now ? (uint64_t)(due_ms - now) : 0, 0);
}

static void reset_snapshots(rn_sub *sub) {
    size_t i = 0;
    void *v;
    while (rn_map_next(&sub->links, &i, &v))
        ((rn_sub_link *)v)->snapshot = -1;
}

void rn_wake_unannounce(rn_subs *S, rn_sub *sub) {
    if (!sub->announcing)
        return;
    rn_list_remove(&S->announcing, &sub->announce_link);
    sub->announcing = 0;
}

/* Queues sub's wake to be announced once the change just made is durable. */
static void announce_later(rn_subs *S, rn_sub *sub) {
    sub->announce_seq = rn_durable_seq(S->state);
    if (sub->announcing)
        return;
    sub->announcing = 1;
    rn_list_push_front(&S->announcing, &sub->announce_link);
}

static void issue(rn_subs *S, rn_sub *sub, const rn_sub_link *trigger) {
    uint8_t rnd[12];
    if (RAND_bytes(rnd, sizeof rnd) != 1)
        abort(); /* the CSPRNG failing is not a condition to serve through */
    sub->generation++;
    char *o = sub->wake_id + sprintf(sub->wake_id, "w_");
    for (size_t i = 0; i < sizeof rnd; i++)
        o += sprintf(o, "%02x", rnd[i]);
    free(sub->trigger);
    sub->trigger = rn_xstrndup(trigger->path, trigger->path_len);
    free(sub->holder);
    sub->holder = NULL;
    sub->announced = 0;
    sub->lease_expires_ms = 0;
    sub->attempts = 0;
    sub->next_attempt_ms = sub->cfg.type == RN_SUB_WEBHOOK ? rn_now_ms() : 0;
    reset_snapshots(sub);
    rn_durable_changed(S->state);
    announce_later(S, sub);
}

void rn_wake_maybe(rn_subs *S, rn_sub *sub, const rn_sub_link *trigger, uint64_t trigger_tail) {
    if (sub->wake_id[0])
        return;
    if (trigger ? trigger_tail <= trigger->acked : !(trigger = rn_sub_first_pending(S, sub)))
        return;
    issue(S, sub, trigger);
}

int rn_wake_finish(rn_subs *S, rn_sub *sub) {
    if (sub->fetch) {
        rn_fetch_cancel(sub->fetch);
        sub->fetch = NULL;
    }
    rn_wake_unannounce(S, sub);
    sub->wake_id[0] = 0;
    free(sub->trigger);
    sub->trigger = NULL;
    free(sub->holder);
    sub->holder = NULL;
    sub->announced = 0;
    sub->lease_expires_ms = 0;
    sub->attempts = 0;
    sub->next_attempt_ms = 0;
    reset_snapshots(sub);
    rn_durable_changed(S->state);
    rn_sub_link *pending = rn_sub_first_pending(S, sub);
    if (!pending)
        return 0;
    issue(S, sub, pending);
    return 1;
}

/* Ends the wake if its lease ran out. Returns 1 when it did. */
static int expire_if_due(rn_subs *S, rn_sub *sub, int64_t now) {
    if (!sub->lease_expires_ms || sub->lease_expires_ms > now)
        return 0;
    rn_wake_finish(S, sub);
    return 1;
}

static void start_lease(rn_subs *S, rn_sub *sub) {
    sub->attempts = 0;
    sub->next_attempt_ms = 0;
    sub->lease_expires_ms = rn_now_ms() + (int64_t)sub->cfg.lease_ttl_ms;
    arm(S, sub->lease_expires_ms);
    rn_durable_changed(S->state);
}

void rn_wake_delivered(rn_subs *S, rn_sub *sub, int done) {
    if (!done) {
        start_lease(S, sub);
        return;
    }
    size_t i = 0;
    void *v;
    while (rn_map_next(&sub->links, &i, &v)) {
        rn_sub_link *l = v;
        if (l->snapshot >= 0 && (uint64_t)l->snapshot > l->acked)
            l->acked = (uint64_t)l->snapshot;
    }
    rn_wake_finish(S, sub);
}

void rn_wake_delivery_failed(rn_subs *S, rn_sub *sub) {
    if (sub->lease_expires_ms)
        return; /* a callback already showed the receiver has the wake */
    sub->attempts++;
    sub->next_attempt_ms =
        rn_now_ms() +
        (int64_t)rn_backoff_ms(sub->attempts, RETRY_BASE_MS, RETRY_MAX_MS, 0.2, rn_backoff_unit());
    arm(S, sub->next_attempt_ms);
    rn_durable_changed(S->state);
}

rn_error rn_wake_check(rn_subs *S, rn_sub *sub, const char *token, size_t token_len,
                       const char *wake_id, uint64_t generation) {
    int64_t now = rn_now_ms();
    uint64_t token_gen;
    char token_wid[RN_WAKE_ID_MAX];
    switch (rn_token_verify(rn_subs_keys_token_key(S->keys), token, token_len, sub->id, now / 1000,
                            &token_gen, token_wid)) {
    case RN_TOKEN_INVALID:
        return RN_E_TOKEN_INVALID;
    case RN_TOKEN_EXPIRED:
        return RN_E_TOKEN_EXPIRED;
    case RN_TOKEN_VALID:
        break;
    }
    expire_if_due(S, sub, now);
    if (!sub->wake_id[0] || token_gen != sub->generation || generation != sub->generation ||
        strcmp(token_wid, sub->wake_id) != 0 || strcmp(wake_id, sub->wake_id) != 0)
        return RN_E_SUB_FENCED;
    return RN_E_COUNT;
}

/* The stream path of an ack ("stream", or "path"), normalized; -1 if bad. */
static long ack_path(const json_t *ack, const char **path) {
    const json_t *p = json_object_get(ack, "stream");
    if (!p)
        p = json_object_get(ack, "path");
    return json_is_string(p)
               ? rn_sub_path_normalize(json_string_value(p), json_string_length(p), path)
               : -1;
}

/* Validates every ack, then applies them all; returns -1 (nothing applied)
 * for an unlinked stream, a malformed offset, or an offset behind the
 * acked position or past the tail. */
static int apply_acks(rn_subs *S, rn_sub *sub, const json_t *acks) {
    size_t n = json_array_size(acks);
    rn_sub_link **links = rn_xcalloc(n ? n : 1, sizeof *links);
    uint64_t *pos = rn_xcalloc(n ? n : 1, sizeof *pos);
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        const json_t *ack = json_array_get(acks, i);
        const json_t *off = json_object_get(ack, "offset");
        const char *path;
        long len = ack_path(ack, &path);
        rn_offset_kind kind;
        links[i] = len < 0 ? NULL : rn_sub_link_get(sub, path, (size_t)len);
        if (!links[i] || !json_is_string(off) ||
            rn_offset_parse(json_string_value(off), json_string_length(off), &kind, &pos[i]) < 0 ||
            kind != RN_OFFSET_POSITION || pos[i] < links[i]->acked ||
            pos[i] > rn_link_tail(S, links[i]))
            rc = -1;
    }
    for (size_t i = 0; i < n && rc == 0; i++)
        if (pos[i] > links[i]->acked)
            links[i]->acked = pos[i];
    free(links);
    free(pos);
    return rc;
}

rn_error rn_wake_progress(rn_subs *S, rn_sub *sub, const json_t *acks, int done, int *next_wake) {
    if (acks && apply_acks(S, sub, acks) < 0)
        return RN_E_SUB_ACK_INVALID;
    *next_wake = 0;
    if (done)
        *next_wake = rn_wake_finish(S, sub);
    else
        start_lease(S, sub);
    rn_durable_changed(S->state);
    return RN_E_COUNT;
}

rn_error rn_wake_claim(rn_subs *S, rn_sub *sub, const char *worker) {
    if (sub->cfg.type != RN_SUB_PULL_WAKE)
        return RN_E_SUB_WRONG_TYPE;
    expire_if_due(S, sub, rn_now_ms());
    if (sub->holder)
        return RN_E_SUB_ALREADY_CLAIMED;
    if (!sub->wake_id[0]) {
        rn_sub_link *pending = rn_sub_first_pending(S, sub);
        if (!pending)
            return RN_E_SUB_NO_PENDING_WORK;
        issue(S, sub, pending);
        rn_wake_unannounce(S, sub); /* claimed at once: no wake event needed */
        sub->announced = 1;
    }
    sub->holder = rn_xstrdup(worker);
    start_lease(S, sub);
    return RN_E_COUNT;
}

/* Sends sub's wake out: a delivery attempt (when due) or the wake event. */
static void announce(rn_subs *S, rn_sub *sub) {
    if (sub->cfg.type == RN_SUB_PULL_WAKE) {
        if (!sub->announced && !sub->holder && !sub->fetch)
            rn_wakestream_announce(S, sub);
    } else if (!sub->fetch && sub->next_attempt_ms) {
        if (sub->next_attempt_ms <= rn_now_ms())
            rn_webhook_deliver(S, sub);
        else
            arm(S, sub->next_attempt_ms);
    }
}

void rn_wake_announce_again(rn_subs *S, rn_sub *sub) {
    assert(sub->cfg.type == RN_SUB_PULL_WAKE);
    sub->next_attempt_ms = rn_now_ms() + RETRY_BASE_MS;
    arm(S, sub->next_attempt_ms);
}

void rn_wake_on_written(void *arg) {
    rn_subs *S = arg;
    if (S->quiesced)
        return;
    uint64_t synced = rn_durable_synced(S->state);
    for (rn_list_node *n = S->announcing.first, *next; n; n = next) {
        next = n->next;
        rn_sub *sub = rn_list_entry(n, rn_sub, announce_link);
        if (sub->announce_seq > synced)
            continue;
        rn_wake_unannounce(S, sub);
        announce(S, sub);
    }
}

static void on_timer(uv_timer_t *t) {
    rn_subs *S = t->data;
    S->timer_due_ms = 0;
    int64_t now = rn_now_ms(), next = 0;
    size_t i = 0;
    void *v;
    while (rn_map_next(&S->subs, &i, &v)) {
        rn_sub *sub = v;
        expire_if_due(S, sub, now);
        if (!sub->fetch && !sub->announcing && sub->next_attempt_ms &&
            sub->next_attempt_ms <= now) {
            if (sub->cfg.type == RN_SUB_WEBHOOK) {
                rn_webhook_deliver(S, sub);
            } else { /* a wake event to try again (wakestream.c) */
                sub->next_attempt_ms = 0;
                announce(S, sub);
            }
        }
        int64_t due[2] = {sub->lease_expires_ms,
                          sub->fetch || sub->announcing ? 0 : sub->next_attempt_ms};
        for (int k = 0; k < 2; k++)
            if (due[k] && (!next || due[k] < next))
                next = due[k];
    }
    if (next)
        arm(S, next);
}

void rn_wake_resume(rn_subs *S) {
    size_t i = 0;
    void *v;
    while (rn_map_next(&S->subs, &i, &v)) {
        rn_sub *sub = v;
        if (!sub->wake_id[0]) {
            rn_wake_maybe(S, sub, NULL, 0);
            continue;
        }
        if (sub->lease_expires_ms)
            arm(S, sub->lease_expires_ms);
        else if (sub->cfg.type == RN_SUB_WEBHOOK && !sub->next_attempt_ms)
            sub->next_attempt_ms = rn_now_ms();
        announce(S, sub);
    }
}
