/*
 * producer.c — the exactly-once producer (extensions §5): one Producer-Id
 * and epoch, one seq per write, several writes in flight at once (a curl
 * multi handle, one connection per slot), each write's outcome read by
 * runnel_classify and acted on by §5.6:
 *
 *   applied, repeat  the write holds; receipts go to the caller in seq order
 *   unknown          the same write again (same key, body, Producer-Digest),
 *                    with Expect: 100-continue, after a pause, for at most
 *                    retry_for_ms from its first unknown answer
 *   refused          with Retry-After: the same write again later; with
 *                    Producer-Expected-Seq pointing at an earlier write of
 *                    ours (a gap: requests on two connections crossed): sent
 *                    again once every earlier write holds; a first claim
 *                    refused or repeated by another claimant: claimed again
 *                    above the epoch the server names; anything else ends
 *                    the producer (the caller learns why)
 *   redirected       sent again to the Location (§5.7: nothing applied)
 *
 * Writes are sent in seq order, and nothing after a new epoch's claim (seq
 * 0) is sent before the claim holds. With a state file, every seq is
 * recorded (with its body's length and digest) before it is first sent,
 * so a restarted producer never sends a recorded seq with another body:
 * it sends the recorded writes again (the caller supplies the bodies, and
 * they must match) and then new ones.
 */
#include "client/internal.h"
#include "client/producer_state.h"
#include "util/blake3.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { W_QUEUED, W_IN_FLIGHT, W_WAIT, W_DONE };

typedef struct {
    uint64_t seq, tag;
    uint8_t *body;
    size_t len;
    char digest[65];
    int closed;
    int state;
    int persisted;     /* the state file records it */
    int maybe_applied; /* an earlier attempt, here or before a restart, may have applied it */
    int attempts, redirects;
    int sent_in_order; /* this try went out when every earlier write held */
    int64_t not_before;
    int64_t retrying_since; /* first unknown or transient answer; 0: none */
    int repeat, evicted, receipt_closed;
    char offset[RUNNEL_VALUE_MAX], next_offset[RUNNEL_VALUE_MAX];
} wentry;

typedef struct {
    CURL *e;
    rnc_request req;
    runnel_answer ans;
    runnel_body body;
    wentry *w; /* NULL: free */
} slot;

struct runnel_producer {
    runnel_client *c;
    rnc_pstate st; /* url, id, epoch, claimed, incarnation, next_seq, acked_tag */
    char url_now[RNC_URL_MAX];
    char content_type[128];
    char *state_path;
    int lock_fd;
    int dirty; /* the epoch changed: save before the next send */
    rnc_pstate_write *replay;
    size_t nreplay, ireplay;
    unsigned window;
    wentry *ring;
    unsigned head, count;
    slot *slots;
    CURLM *multi;
    long retry_for_ms;
    int use_incarnation;
    void (*on_receipt)(void *arg, const runnel_receipt *r);
    void *arg;
    int claims;
    uint64_t last_tag;
    runnel_result fail;
    uint64_t fail_seq;
    runnel_outcome fail_outcome;
    runnel_answer fail_ans;
    char why[320];
    runnel_producer_stats stats;
};

static wentry *at(runnel_producer *p, unsigned i) {
    return &p->ring[(p->head + i) % p->window];
}

static void fail(runnel_producer *p, runnel_result r, const wentry *w, const runnel_answer *a,
                 const char *why) {
    if (p->fail != RUNNEL_OK)
        return;
    p->fail = r;
    p->fail_seq = w ? w->seq : 0;
    p->fail_outcome = a ? a->outcome : RUNNEL_REFUSED;
    if (a)
        p->fail_ans = *a;
    rnc_fmt(p->why, sizeof p->why, "%s", why);
}

/* Writes the state: every write not known to hold, then the recorded
 * writes not sent again yet. */
static int save(runnel_producer *p) {
    if (!p->state_path)
        return 0;
    p->st.npending = 0;
    for (unsigned i = 0; i < p->count; i++) {
        wentry *w = at(p, i);
        if (w->state == W_DONE)
            continue;
        rnc_pstate_write pw = {.seq = w->seq, .len = w->len, .tag = w->tag, .closed = w->closed};
        memcpy(pw.digest, w->digest, sizeof pw.digest);
        rnc_pstate_add(&p->st, &pw);
    }
    for (size_t i = p->ireplay; i < p->nreplay; i++)
        rnc_pstate_add(&p->st, &p->replay[i]);
    char err[300];
    if (rnc_pstate_save(p->state_path, &p->st, err, sizeof err)) {
        fail(p, RUNNEL_E_IO, NULL, NULL, err);
        return -1;
    }
    for (unsigned i = 0; i < p->count; i++)
        at(p, i)->persisted = 1;
    p->dirty = 0;
    return 0;
}

/* Delivers the receipts of the writes at the head that hold. */
static void retire(runnel_producer *p) {
    while (p->count && at(p, 0)->state == W_DONE) {
        wentry *w = at(p, 0);
        runnel_receipt r = {.epoch = p->st.epoch,
                            .seq = w->seq,
                            .tag = w->tag,
                            .offset = w->offset,
                            .next_offset = w->next_offset,
                            .repeat = w->repeat,
                            .closed = w->receipt_closed};
        p->st.acked_tag = w->tag;
        p->stats.acked++;
        if (p->on_receipt)
            p->on_receipt(p->arg, &r);
        free(w->body);
        w->body = NULL;
        p->head = (p->head + 1) % p->window;
        p->count--;
    }
}

static slot *free_slot(runnel_producer *p) {
    for (unsigned i = 0; i < p->window; i++)
        if (!p->slots[i].w)
            return &p->slots[i];
    return NULL;
}

static void start(runnel_producer *p, slot *s, wentry *w, int earlier_held) {
    rnc_request *req = &s->req;
    rnc_request_free(req);
    memset(req, 0, sizeof *req);
    req->method = "POST";
    memcpy(req->url, p->url_now, sizeof req->url);
    if (p->c->o.cluster_aware)
        rnc_route_apply(p->c, req);
    if (w->len || !w->closed)
        rnc_header(&req->headers, "Content-Type", p->content_type);
    rnc_header(&req->headers, "Stream-Closed", w->closed ? "true" : NULL);
    rnc_header(&req->headers, "Producer-Id", p->st.id);
    rnc_header_u64(&req->headers, "Producer-Epoch", p->st.epoch);
    rnc_header_u64(&req->headers, "Producer-Seq", w->seq);
    rnc_header(&req->headers, "Producer-Digest", w->digest);
    if (p->use_incarnation && p->st.incarnation[0])
        rnc_header(&req->headers, "Stream-Incarnation", p->st.incarnation);
    /* a repeat may be answered from its head (§5.5): keep the body back */
    req->expect_continue = w->attempts > 0 && p->use_incarnation && p->st.incarnation[0];
    s->body = (runnel_body){.data = w->body, .len = w->len};
    req->body = &s->body;
    s->w = w;
    w->sent_in_order = earlier_held;
    rnc_easy_setup(p->c, s->e, req, &s->ans);
    curl_easy_setopt(s->e, CURLOPT_PRIVATE, s);
    curl_multi_add_handle(p->multi, s->e);
    w->state = W_IN_FLIGHT;
    if (w->attempts++)
        p->stats.retries++;
    else
        p->stats.writes++;
}

/* Sends what may be sent: in seq order, no seq after an unheld claim. */
static void send_ready(runnel_producer *p) {
    int64_t now = rnc_now_ms();
    int need_save = p->dirty;
    for (unsigned i = 0; i < p->count; i++)
        if (at(p, i)->state == W_QUEUED && !at(p, i)->persisted)
            need_save = 1;
    if (need_save && save(p))
        return;
    int earlier_held = 1; /* every write before the i-th holds */
    for (unsigned i = 0; i < p->count; earlier_held &= at(p, i)->state == W_DONE, i++) {
        wentry *w = at(p, i);
        if (w->state == W_DONE || w->state == W_IN_FLIGHT)
            continue;
        if (w->state == W_WAIT) { /* a gap: sent again once every earlier write holds */
            if (!earlier_held)
                return;
            w->state = W_QUEUED;
            w->not_before = 0;
        }
        if (w->not_before > now || (!p->st.claimed && w->seq != 0))
            return;
        slot *s = free_slot(p);
        if (!s)
            return;
        start(p, s, w, earlier_held);
    }
}

static void retry_later(runnel_producer *p, wentry *w, const runnel_answer *a) {
    int64_t now = rnc_now_ms();
    if (!w->retrying_since)
        w->retrying_since = now;
    if (p->retry_for_ms >= 0 && now - w->retrying_since > p->retry_for_ms) {
        char why[200];
        rnc_fmt(why, sizeof why, "seq %llu: still %s after %ld ms of repeats",
                (unsigned long long)w->seq, runnel_outcome_name(a->outcome), p->retry_for_ms);
        fail(p, a->outcome == RUNNEL_UNKNOWN ? RUNNEL_E_UNKNOWN : RUNNEL_E_REFUSED, w, a, why);
        return;
    }
    w->state = W_QUEUED;
    w->not_before = now + rnc_retry_delay_ms(a, w->attempts - 1);
}

/* A producer 403 or a repeated claim for this process's first claim:
 * claims the epoch above the one the server names (at most 5 times). */
static int reclaim(runnel_producer *p, wentry *w, const runnel_answer *a) {
    if (w->seq != 0 || p->st.claimed || w->maybe_applied || p->claims >= 5 || a->producer_epoch < 0)
        return 0;
    uint64_t e = (uint64_t)a->producer_epoch;
    if (a->closed_epoch > a->producer_epoch)
        e = (uint64_t)a->closed_epoch;
    p->st.epoch = (e > p->st.epoch ? e : p->st.epoch) + 1;
    p->claims++;
    p->dirty = 1;
    w->state = W_QUEUED;
    w->not_before = 0;
    return 1;
}

static void on_refused(runnel_producer *p, wentry *w, const runnel_answer *a) {
    char why[300];
    if (rnc_repeatable(a)) {
        retry_later(p, w, a);
        return;
    }
    if ((a->status == 409 || a->status == 400) && a->expected_seq >= 0) {
        /* A gap: an earlier write of ours was still on its way (two
         * connections crossed). Sent again once every earlier write holds;
         * a gap for a try sent after they all held means the server no
         * longer has this producer's state. */
        uint64_t e = (uint64_t)a->expected_seq;
        if (e < w->seq && !w->sent_in_order) {
            w->state = W_WAIT;
            p->stats.gaps++;
            return;
        }
        snprintf(why, sizeof why,
                 "seq %llu refused: the server expects seq %llu; it no longer holds this "
                 "producer's state (expired?)",
                 (unsigned long long)w->seq, (unsigned long long)e);
        fail(p, RUNNEL_E_REFUSED, w, a, why);
        return;
    }
    if (a->status == 403 && a->producer_answer) {
        if (reclaim(p, w, a))
            return;
        char closed[64] = "";
        if (a->closed_seq >= 0)
            rnc_fmt(closed, sizeof closed, ", Producer-Closed-Seq %lld", (long long)a->closed_seq);
        rnc_fmt(why, sizeof why, "seq %llu of epoch %llu refused: %s (Producer-Epoch %lld%s)",
                (unsigned long long)w->seq, (unsigned long long)p->st.epoch, a->producer_outcome,
                (long long)a->producer_epoch, closed);
        fail(p, RUNNEL_E_REFUSED, w, a, why);
        return;
    }
    rnc_fmt(why, sizeof why, "seq %llu refused: %d %s", (unsigned long long)w->seq, a->status,
            a->error_code[0] ? a->error_code : "");
    fail(p, a->status == 412 ? RUNNEL_E_INCARNATION : RUNNEL_E_REFUSED, w, a, why);
}

/* Whether the answer comes from another deployment than the producer's
 * state (extensions §10: another Ursula-Cluster-Id is another deployment,
 * never a new history of the same stream); fails the producer if so. An
 * answer without the header (an intermediary's) says nothing. */
static int other_deployment(runnel_producer *p, wentry *w, const runnel_answer *a) {
    if (!a->cluster_id[0] || !p->st.cluster_id[0] || strcmp(a->cluster_id, p->st.cluster_id) == 0)
        return 0;
    char why[300];
    rnc_fmt(why, sizeof why,
            "seq %llu was answered by deployment %s, not %s, which holds this producer's "
            "stream: another deployment's stream is another history; nothing more is sent",
            (unsigned long long)w->seq, a->cluster_id, p->st.cluster_id);
    fail(p, RUNNEL_E_STATE, w, a, why);
    return 1;
}

static void on_answer(runnel_producer *p, slot *s) {
    wentry *w = s->w;
    runnel_answer *a = &s->ans;
    if (a->status)
        rnc_learn_limits(p->c, a);
    if (other_deployment(p, w, a))
        return;
    if (p->c->o.cluster_aware)
        rnc_route_learn(p->c, s->req.url, a);
    a->outcome = a->status ? runnel_classify(RUNNEL_WRITE_PRODUCER, a) : RUNNEL_UNKNOWN;
    switch (a->outcome) {
    case RUNNEL_REPEAT:
        if (w->seq == 0 && !p->st.claimed && !w->maybe_applied && reclaim(p, w, a))
            return; /* another claimant's identical claim holds this epoch */
        /* fall through */
    case RUNNEL_APPLIED:
        w->state = W_DONE;
        w->repeat = a->outcome == RUNNEL_REPEAT;
        w->receipt_closed = a->closed;
        rnc_fmt(w->offset, sizeof w->offset, "%s", a->offset);
        rnc_fmt(w->next_offset, sizeof w->next_offset, "%s", a->next_offset);
        p->stats.repeats += (uint64_t)w->repeat;
        if (w->seq == 0)
            p->st.claimed = 1;
        return;
    case RUNNEL_REDIRECTED:
        if (a->location[0] && w->redirects++ < 5) {
            rnc_fmt(p->url_now, sizeof p->url_now, "%s", a->location);
            w->state = W_QUEUED;
            return;
        }
        fail(p, RUNNEL_E_STATUS, w, a, "too many redirects");
        return;
    case RUNNEL_UNKNOWN:
        w->maybe_applied = 1;
        retry_later(p, w, a);
        return;
    case RUNNEL_REFUSED:
        on_refused(p, w, a);
        return;
    }
}

/* Makes progress: saves and sends what may go, collects answers, delivers
 * receipts; with block, first waits (bounded) for the network. */
static void pump(runnel_producer *p, int block) {
    send_ready(p);
    int running = 0;
    if (block)
        curl_multi_poll(p->multi, NULL, 0, 100, NULL);
    curl_multi_perform(p->multi, &running);
    CURLMsg *m;
    int left;
    while ((m = curl_multi_info_read(p->multi, &left))) {
        if (m->msg != CURLMSG_DONE)
            continue;
        slot *s = NULL;
        curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&s);
        CURLcode code = m->data.result;
        curl_multi_remove_handle(p->multi, s->e);
        rnc_easy_finish(s->e, &s->req, code);
        on_answer(p, s);
        s->w = NULL;
    }
    retire(p);
    if (p->fail == RUNNEL_OK)
        send_ready(p);
}

runnel_result runnel_producer_open(runnel_client *c, const char *stream,
                                   const runnel_producer_options *o, runnel_producer **out,
                                   char *err, size_t errcap) {
    *out = NULL;
    if (!o || !o->id || !o->id[0] || strpbrk(o->id, "\r\n") || strlen(o->id) >= 256 ||
        o->window > 64) {
        rnc_fmt(err, errcap, "a producer needs an id (1 to 255 bytes, no CR or LF)");
        return RUNNEL_E_USAGE;
    }
    runnel_producer *p = calloc(1, sizeof *p);
    if (!p)
        abort();
    p->c = c;
    p->lock_fd = -1;
    p->window = o->window ? o->window : 4;
    p->retry_for_ms = o->retry_for_ms ? o->retry_for_ms : 60000;
    p->use_incarnation = o->use_incarnation;
    p->on_receipt = o->on_receipt;
    p->arg = o->arg;
    rnc_request probe;
    if (rnc_request_init(&probe, c, "HEAD", stream, NULL)) {
        free(p);
        rnc_fmt(err, errcap, "the stream URL is too long");
        return RUNNEL_E_USAGE;
    }
    rnc_pstate fresh = {0};
    rnc_fmt(fresh.url, sizeof fresh.url, "%s", probe.url);
    rnc_fmt(fresh.id, sizeof fresh.id, "%s", o->id);
    fresh.epoch = o->epoch;
    p->st = fresh;
    runnel_result r = RUNNEL_OK;
    if (o->state_path) {
        p->state_path = strdup(o->state_path);
        if (!p->state_path)
            abort();
        if ((p->lock_fd = rnc_pstate_lock(o->state_path, err, errcap)) < 0) {
            r = RUNNEL_E_STATE;
        } else {
            int got = rnc_pstate_load(o->state_path, &p->st, err, errcap);
            if (got < 0) {
                r = RUNNEL_E_STATE;
            } else if (got == 1) {
                p->st = fresh;
            } else if (strcmp(p->st.url, fresh.url) != 0 || strcmp(p->st.id, fresh.id) != 0) {
                rnc_fmt(err, errcap, "%s belongs to producer %s of %s", o->state_path, p->st.id,
                        p->st.url);
                r = RUNNEL_E_STATE;
            } else { /* resume: the recorded writes are sent again first */
                p->replay = p->st.pending;
                p->nreplay = p->st.npending;
                p->st.pending = NULL;
                p->st.npending = p->st.cap = 0;
            }
        }
    }
    if (r == RUNNEL_OK) {
        runnel_answer a;
        runnel_result h =
            runnel_head(c, p->st.url, p->st.incarnation[0] ? p->st.incarnation : NULL, &a);
        if (h != RUNNEL_OK) {
            if (a.status)
                rnc_fmt(err, errcap, "HEAD %s: %d %s", p->st.url, a.status, a.error_code);
            else
                rnc_fmt(err, errcap, "HEAD %s: %s", p->st.url, a.transport_message);
            r = a.status == 412 ? RUNNEL_E_INCARNATION : h;
        } else {
            rnc_fmt(p->content_type, sizeof p->content_type, "%s",
                    o->content_type     ? o->content_type
                    : a.content_type[0] ? a.content_type
                                        : "application/octet-stream");
            if (p->use_incarnation && !p->st.incarnation[0])
                rnc_fmt(p->st.incarnation, sizeof p->st.incarnation, "%s", a.incarnation);
            if (p->st.cluster_id[0] && a.cluster_id[0] &&
                strcmp(p->st.cluster_id, a.cluster_id) != 0) {
                rnc_fmt(err, errcap,
                        "%s was recorded with deployment %s; %s is served by deployment %s: "
                        "another deployment's stream is another history (extensions §10)",
                        o->state_path, p->st.cluster_id, p->st.url, a.cluster_id);
                r = RUNNEL_E_STATE;
            } else if (a.cluster_id[0] && !p->st.cluster_id[0]) {
                rnc_fmt(p->st.cluster_id, sizeof p->st.cluster_id, "%s", a.cluster_id);
                p->dirty = 1; /* saved before the first send */
            }
        }
    }
    rnc_request_free(&probe);
    if (r != RUNNEL_OK) {
        runnel_producer_free(p);
        return r;
    }
    memcpy(p->url_now, p->st.url, sizeof p->url_now);
    p->last_tag = p->st.acked_tag;
    p->ring = calloc(p->window, sizeof *p->ring);
    p->slots = calloc(p->window, sizeof *p->slots);
    p->multi = curl_multi_init();
    if (!p->ring || !p->slots || !p->multi)
        abort();
    for (unsigned i = 0; i < p->window; i++)
        if (!(p->slots[i].e = curl_easy_init()))
            abort();
    p->stats.epoch = p->st.epoch;
    *out = p;
    return RUNNEL_OK;
}

int runnel_producer_replay_next(const runnel_producer *p, uint64_t *from_tag, uint64_t *tag) {
    if (p->ireplay >= p->nreplay)
        return 0;
    *from_tag = p->ireplay ? p->replay[p->ireplay - 1].tag : p->st.acked_tag;
    *tag = p->replay[p->ireplay].tag;
    return 1;
}

uint64_t runnel_producer_acked_tag(const runnel_producer *p) {
    return p->st.acked_tag;
}

void runnel_producer_note(const runnel_producer *p, uint64_t note[2]) {
    note[0] = p->st.note[0];
    note[1] = p->st.note[1];
}

runnel_result runnel_producer_set_note(runnel_producer *p, const uint64_t note[2]) {
    if (p->fail != RUNNEL_OK)
        return p->fail;
    p->st.note[0] = note[0];
    p->st.note[1] = note[1];
    save(p);
    return p->fail;
}

static runnel_result queue(runnel_producer *p, const void *body, size_t len, uint64_t tag,
                           int closed) {
    if (p->fail != RUNNEL_OK)
        return p->fail;
    if (tag < p->last_tag || (!len && !closed) ||
        (uint64_t)len > (uint64_t)runnel_client_max_request_bytes(p->c))
        return RUNNEL_E_USAGE;
    while (p->count == p->window && p->fail == RUNNEL_OK)
        pump(p, 1);
    if (p->fail != RUNNEL_OK)
        return p->fail;
    wentry *w = at(p, p->count);
    memset(w, 0, sizeof *w);
    uint8_t d[32];
    rn_blake3_hash(body, len, d);
    rn_blake3_hex(d, w->digest);
    if (p->ireplay < p->nreplay) {
        const rnc_pstate_write *r = &p->replay[p->ireplay];
        if (r->len != len || r->tag != tag || r->closed != closed ||
            strcmp(r->digest, w->digest) != 0) {
            char why[200];
            rnc_fmt(why, sizeof why,
                    "the write resent as seq %llu differs from the one the state file recorded "
                    "(length, digest or tag): the input is not the one the producer was given",
                    (unsigned long long)r->seq);
            fail(p, RUNNEL_E_STATE, NULL, NULL, why);
            return p->fail;
        }
        w->seq = r->seq;
        w->persisted = 1;
        w->maybe_applied = 1;
        p->ireplay++;
    } else {
        w->seq = p->st.next_seq++;
    }
    w->body = malloc(len ? len : 1);
    if (!w->body)
        abort();
    if (len)
        memcpy(w->body, body, len);
    w->len = len;
    w->tag = tag;
    w->closed = closed;
    w->state = W_QUEUED;
    p->count++;
    p->last_tag = tag;
    pump(p, 0);
    return p->fail;
}

runnel_result runnel_producer_send(runnel_producer *p, const void *body, size_t len, uint64_t tag) {
    return queue(p, body, len, tag, 0);
}

runnel_result runnel_producer_close_stream(runnel_producer *p, uint64_t tag) {
    return queue(p, NULL, 0, tag, 1);
}

runnel_result runnel_producer_flush(runnel_producer *p) {
    while (p->count && p->fail == RUNNEL_OK)
        pump(p, 1);
    if (p->fail == RUNNEL_OK && p->ireplay < p->nreplay) {
        fail(p, RUNNEL_E_STATE, NULL, NULL,
             "the input ended before every write the state file recorded was resent");
    }
    if (p->fail == RUNNEL_OK)
        save(p);
    return p->fail;
}

const runnel_answer *runnel_producer_failure(const runnel_producer *p, uint64_t *seq,
                                             runnel_outcome *outcome, char *why, size_t whycap) {
    if (p->fail == RUNNEL_OK)
        return NULL;
    if (seq)
        *seq = p->fail_seq;
    if (outcome)
        *outcome = p->fail_outcome;
    if (why)
        rnc_fmt(why, whycap, "%s", p->why);
    return &p->fail_ans;
}

void runnel_producer_get_stats(const runnel_producer *p, runnel_producer_stats *s) {
    *s = p->stats;
    s->epoch = p->st.epoch;
    s->next_seq = p->st.next_seq;
}

void runnel_producer_free(runnel_producer *p) {
    if (!p)
        return;
    for (unsigned i = 0; p->slots && i < p->window; i++) {
        if (p->slots[i].w)
            curl_multi_remove_handle(p->multi, p->slots[i].e);
        if (p->slots[i].e)
            curl_easy_cleanup(p->slots[i].e);
        rnc_request_free(&p->slots[i].req);
    }
    for (unsigned i = 0; p->ring && i < p->count; i++)
        free(at(p, i)->body);
    if (p->multi)
        curl_multi_cleanup(p->multi);
    free(p->slots);
    free(p->ring);
    free(p->replay);
    rnc_pstate_free(&p->st);
    if (p->lock_fd >= 0)
        close(p->lock_fd);
    free(p->state_path);
    free(p);
}
