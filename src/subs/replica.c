/*
 * replica.c — subscriptions in cluster mode: which node delivers, and the
 * hand-over when the leadership moves.
 *
 * The whole state (subscriptions, links and acked offsets, wake state,
 * lease holders, retry times, and the signing and token keys, so that
 * every node signs and checks alike) is one document, as in the state
 * file, but stored as a SUBS command of the log of the group RN_SUBS_KEY
 * hashes to (rn_engine_subs_put; the group's manifests carry it too). A
 * change is acknowledged, and a wake revealed, only once that command
 * applied on the leader: after a majority stored it.
 *
 * Only that group's leader holds the subscriptions in memory and acts: it
 * answers the API (other nodes forward or redirect to it, as writes),
 * observes the engine and delivers. A timer (every 100 ms) and every API
 * request compare the role with the log's: a node that comes to lead the
 * group (ready: everything earlier leaders committed applied) loads the
 * replicated state, reconciles it with the streams it holds (a link to a
 * stream of a group this replica has not caught up with since its start is
 * left as it is: the stream may only be missing here, and its events come
 * as the group applies; one of a group it does not host is settled by the
 * first answer of that group's leader, elsewhere.c) and resumes as after a
 * restart: retries and leases re-armed at their replicated times, wakes
 * not known announced announced again, idle subscriptions with pending
 * work woken. A wake whose acknowledgement the old leader had not
 * committed is thus delivered again (at least once, PROTOCOL.md §6–7), and
 * none is lost: a wake is revealed only once its state committed. A node
 * that stops leading drops its in-memory state, cancels its deliveries,
 * and answers the changes still waiting for their commit 503 NO_LEADER
 * (their command was refused) or OUTCOME_UNKNOWN; so does a node found
 * leading in another term than the one it took over in (it lost the
 * leadership between two looks, and another leader may have committed
 * meanwhile), which then loads the state again.
 */
#include "subs/subs_int.h"
#include "protocol/routing.h"
#include "util/log.h"

#include <assert.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>

#define ROLE_TICK_MS 100

static void propose(void *arg, const uint8_t *data, size_t len, rn_durable_done done, void *job) {
    rn_subs *S = arg;
    rn_engine_subs_put(S->engine, S->group, data, len, done, job);
}

static void take_over(rn_subs *S) {
    size_t len;
    const uint8_t *state = rn_engine_subs_state(S->engine, &len);
    char err[256];
    if (len && rn_state_load(S, state, len, err, sizeof err) < 0) {
        rn_subs_clear(S);
        if (!S->load_failed)
            rn_log(RN_LOG_ERROR, "subs_state_invalid",
                   "group %u: the replicated subscriptions' state does not load; this node "
                   "does not deliver",
                   S->group);
        S->load_failed = 1;
        return;
    }
    S->load_failed = 0;
    S->active = 1;
    rn_elsewhere_start(S);
    rn_subs_reconcile(S);
    rn_wake_resume(S);
    rn_log(RN_LOG_INFO, "subs_lead", "group %u: this node delivers %zu subscriptions", S->group,
           S->subs.count);
}

static void give_up(rn_subs *S) {
    S->active = 0;
    rn_elsewhere_stop(S);
    uv_timer_stop(&S->timer);
    S->timer_due_ms = 0;
    rn_subs_clear(S); /* cancels deliveries, empties the announce list */
    rn_durable_discard(S->state, -EAGAIN);
    rn_log(RN_LOG_INFO, "subs_lead", "group %u: this node stopped delivering", S->group);
}

int rn_subs_replica_sync(rn_subs *S) {
    assert(S->replicated);
    size_t len = strlen(RN_SUBS_KEY);
    int leads = !S->quiesced && rn_engine_leads(S->engine, RN_SUBS_KEY, len);
    rn_group_route r;
    rn_routing_route(RN_SUBS_KEY, len, &r);
    uint64_t term = leads ? r.term : 0;
    if (S->active && (!leads || term != S->term))
        give_up(S); /* a leadership lost between two looks: another may have committed */
    if (leads && !S->active) {
        S->term = term;
        take_over(S);
    }
    return S->active;
}

static void on_role_tick(uv_timer_t *t) {
    rn_subs_replica_sync(t->data);
}

void rn_subs_replica_start(rn_subs *S) {
    assert(S->replicated && !S->active);
    rn_group_route r;
    rn_routing_route(RN_SUBS_KEY, strlen(RN_SUBS_KEY), &r);
    S->group = r.group;
    rn_durable_set_sink(S->state, propose, S);
    rn_outbound_config out = {.user_agent = "runnel-subscriptions",
                              .max_running = 64,
                              .max_queued = SIZE_MAX,
                              .ca_file = S->tls_ca};
    S->peer_out = rn_outbound_new(S->loop, &out);
    uv_timer_init(S->loop, &S->role_timer);
    S->role_timer.data = S;
    uv_timer_start(&S->role_timer, on_role_tick, ROLE_TICK_MS, ROLE_TICK_MS);
    uv_timer_init(S->loop, &S->far_timer);
    S->far_timer.data = S;
}

void rn_subs_replica_stop(rn_subs *S) {
    rn_elsewhere_stop(S);
    uv_close((uv_handle_t *)&S->role_timer, NULL);
    uv_close((uv_handle_t *)&S->far_timer, NULL);
}
