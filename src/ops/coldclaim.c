/*
 * coldclaim.c — the cold store's claim at start (coldclaim.h): one claim
 * at a time through the tiers, tried again with backoff while the store
 * cannot tell (-EAGAIN, -EIO), given up on a refusal (-EEXIST, -EPERM).
 */
#include "ops/coldclaim.h"
#include "util/backoff.h"
#include "util/buf.h"
#include "util/log.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RETRY_BASE_MS 1000
#define RETRY_CAP_MS 30000

struct rn_cold_claim {
    rn_tiers *t;
    uv_timer_t timer;
    uint32_t failures;
    int in_flight, confirmed, stopped;
    char why[256];
    void (*done)(void *arg, int status);
    void *arg;
};

static void try_claim(rn_cold_claim *c);

static void on_closed(uv_handle_t *h) {
    free(h->data);
}

static void on_timer(uv_timer_t *timer) {
    try_claim(timer->data);
}

static void claimed(void *arg, int status) {
    rn_cold_claim *c = arg;
    c->in_flight = 0;
    if (c->stopped) { /* the tiers stopped: its store ended the claim */
        uv_close((uv_handle_t *)&c->timer, on_closed);
        return;
    }
    char store[160];
    if (!rn_tiers_cold_why(c->t, store, sizeof store))
        snprintf(store, sizeof store, "%s", strerror(-status));
    if (status == 0) {
        c->confirmed = 1;
        c->done(c->arg, 0);
        return;
    }
    if (status == -EEXIST || status == -EPERM) {
        snprintf(c->why, sizeof c->why, "%s", store);
        c->done(c->arg, status);
        return;
    }
    c->failures++;
    uint64_t delay =
        rn_backoff_ms(c->failures, RETRY_BASE_MS, RETRY_CAP_MS, 0.2, rn_backoff_unit());
    snprintf(c->why, sizeof c->why, "the cold store does not answer as it should (%s)", store);
    rn_log(RN_LOG_WARN, "start", "%s; not ready; trying again in %llu ms", c->why,
           (unsigned long long)delay);
    uv_timer_start(&c->timer, on_timer, delay, 0);
}

static void try_claim(rn_cold_claim *c) {
    c->in_flight = 1;
    rn_tiers_cold_claim(c->t, 0, claimed, c);
}

rn_cold_claim *rn_cold_claim_start(uv_loop_t *loop, rn_tiers *t,
                                   void (*done)(void *arg, int status), void *arg) {
    rn_cold_claim *c = rn_xcalloc(1, sizeof *c);
    c->t = t;
    c->done = done;
    c->arg = arg;
    snprintf(c->why, sizeof c->why, "the cold store has not answered yet");
    uv_timer_init(loop, &c->timer);
    c->timer.data = c;
    try_claim(c);
    return c;
}

int rn_cold_claim_why(const rn_cold_claim *c, char *why, size_t cap) {
    if (!c || c->confirmed)
        return 0;
    snprintf(why, cap, "%s", c->why);
    return 1;
}

void rn_cold_claim_stop(rn_cold_claim *c) {
    if (!c)
        return;
    c->stopped = 1;
    uv_timer_stop(&c->timer);
    if (!c->in_flight)
        uv_close((uv_handle_t *)&c->timer, on_closed);
}
