/*
 * producers.c — the producer rules of extensions §5.3 and admission of
 * §5.4, as pure functions. See producers.h.
 */
#include "engine/producers.h"

#include <assert.h>
#include <string.h>

#define CROWDED_TTL_MS (3600 * 1000ull) /* kept at least this long when crowded */

int rn_producer_idle(const rn_producer *p, int64_t now, uint64_t ms) {
    return now - p->last_ms >= (int64_t)ms;
}

/* The closure a claim reported, for its answer and its repeats. */
static void report_closure(const rn_producer *p, rn_op_outcome *out) {
    out->closes_epoch = p->closes_epoch;
    out->closed_epoch = p->closed_epoch;
    out->closed_seq = p->closed_seq;
}

void rn_producer_answer_applied(const rn_producer *p, uint64_t seq, rn_op_outcome *out) {
    out->ack_epoch = p->epoch;
    out->ack_seq = p->last_seq;
    out->receipt = 1;
    out->receipt_start = p->newest_start;
    out->receipt_end = p->newest_end;
    out->receipt_closed = p->newest_closed;
    if (seq == 0)
        report_closure(p, out);
}

static int identity_matches(const rn_write_identity *held, const rn_op_request *in) {
    return held->has_digest == (in->has_producer_digest != 0) &&
           (!held->has_digest || memcmp(held->digest, in->producer_digest, 32) == 0);
}

/* A write (p->epoch, seq <= the epoch's highest surviving seq) repeats one
 * that applied. Where the server still holds that write's identity (the
 * newest write, or the claim) another identity is a key conflict; else the
 * answer is a repeat: the newest write's receipt, or one marked evicted. */
static int answer_repeat(const rn_producer *p, const rn_op_request *in, rn_op_outcome *out) {
    uint64_t seq = in->producer_seq;
    const rn_write_identity *held = seq == p->last_seq ? &p->newest : seq == 0 ? &p->claim : NULL;
    if (held && !identity_matches(held, in)) {
        out->current_epoch = p->epoch;
        return RN_ERR_KEY_CONFLICT;
    }
    int rewritten = p->history == RN_EPOCH_REWRITTEN;
    if (seq == p->last_seq && (!rewritten || p->history_seq == p->last_seq)) {
        rn_producer_answer_applied(p, seq, out);
        return RN_OK_DUPLICATE;
    }
    out->ack_epoch = p->epoch;
    out->ack_seq = rewritten ? p->history_seq : p->last_seq;
    if (seq == 0)
        report_closure(p, out);
    return RN_OK_DUPLICATE;
}

int rn_producer_rules(const rn_stream *s, const rn_op_request *in, rn_op_outcome *out) {
    assert(in->has_producer);
    const rn_producer *p = rn_map_get(&s->producers, in->producer_id, in->producer_id_len);
    uint64_t epoch = in->producer_epoch, seq = in->producer_seq;
    /* The floor binds writes that carry Stream-Incarnation (§5.4). */
    int floor_binds = in->has_incarnation && s->has_floor;
    int lifts = seq == 0 && p && epoch > p->epoch && rn_stream_above_floor(s, epoch);
    if (floor_binds && (p ? !p->above_floor && !lifts : epoch <= s->epoch_floor)) {
        out->current_epoch = s->epoch_floor;
        return RN_ERR_PRODUCER_EXPIRED;
    }
    if (!p) {
        if (seq == 0)
            return RN_PRODUCER_APPLIES;
        out->expected_seq = 0;
        return RN_ERR_SEQ_GAP;
    }
    out->current_epoch = p->epoch;
    if (epoch < p->epoch) {
        if (!p->closes_epoch || epoch != p->closed_epoch)
            return RN_ERR_STALE_EPOCH;
        report_closure(p, out);
        return RN_ERR_EPOCH_CLOSED;
    }
    if (epoch > p->epoch) {
        if (seq == 0)
            return RN_PRODUCER_APPLIES;
        out->expected_seq = 0;
        return RN_ERR_EPOCH_SEQ;
    }
    if (p->history == RN_EPOCH_LOST)
        return RN_ERR_STALE_EPOCH;
    if (p->history == RN_EPOCH_REWRITTEN && seq > p->history_seq) {
        out->closes_epoch = 1;
        out->closed_by_history = 1;
        out->closed_epoch = p->epoch;
        out->closed_seq = p->history_seq;
        return RN_ERR_EPOCH_CLOSED;
    }
    if (seq <= p->last_seq)
        return answer_repeat(p, in, out);
    if (seq == p->last_seq + 1)
        return RN_PRODUCER_APPLIES;
    out->expected_seq = p->last_seq + 1;
    return RN_ERR_SEQ_GAP;
}

/* The least recently written producer of s (s holds at least one). */
static rn_producer *least_recent(const rn_stream *s) {
    rn_producer *lru = NULL;
    size_t i = 0;
    void *v;
    while (rn_map_next(&s->producers, &i, &v)) {
        rn_producer *p = v;
        if (!lru || p->last_ms < lru->last_ms)
            lru = p;
    }
    assert(lru != NULL);
    return lru;
}

rn_admission rn_producer_admit(const rn_stream *s, const rn_op_request *in, uint64_t cap,
                               uint64_t ttl_ms, int64_t now) {
    rn_admission a = {.verdict = RN_ADMIT};
    if (s->producers.count < cap || rn_map_get(&s->producers, in->producer_id, in->producer_id_len))
        return a;
    uint64_t crowded_ttl = ttl_ms < CROWDED_TTL_MS ? ttl_ms : CROWDED_TTL_MS;
    rn_producer *lru = least_recent(s);
    if (rn_producer_idle(lru, now, crowded_ttl)) {
        a.verdict = RN_ADMIT_DISPLACE;
        a.victim = lru;
        return a;
    }
    int64_t wait_ms = lru->last_ms + (int64_t)crowded_ttl - now;
    a.verdict = RN_ADMIT_REFUSE;
    a.retry_after_s = (uint64_t)(wait_ms + 999) / 1000;
    return a;
}
