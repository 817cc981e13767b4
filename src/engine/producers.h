/*
 * producers.h — idempotent producers' rules and answers (PROTOCOL §5.2.1,
 * extensions §5): pure functions of a stream's applied state, a request's
 * producer headers and the time. Nothing here changes state; apply.c
 * records applied producer writes.
 */
#ifndef RN_ENGINE_PRODUCERS_H
#define RN_ENGINE_PRODUCERS_H

#include <stdint.h>

#include "engine/op.h"
#include "engine/state.h"

/* rn_producer_rules(): the write would apply. */
#define RN_PRODUCER_APPLIES (-1)

/* The producer rules of ext §5.3 for an append with producer headers
 * (in->has_producer), against the applied state of s, from the headers
 * alone (the body is never consulted). Returns RN_PRODUCER_APPLIES, or the
 * answer (a repeat or a refusal) with its fields set in *out; may set
 * out->current_epoch either way. */
int rn_producer_rules(const rn_stream *s, const rn_op_request *in, rn_op_outcome *out);

/* Fills the answer of an applied producer write of seq `seq`, from the
 * producer's state after it: its receipt, the epoch's highest seq and, for
 * a claim (seq 0), the closure it reported. */
void rn_producer_answer_applied(const rn_producer *p, uint64_t seq, rn_op_outcome *out);

/* True when p wrote nothing for ms at time now. */
int rn_producer_idle(const rn_producer *p, int64_t now, uint64_t ms);

/* Whether a stream admits the producer a request names (ext §5.4). */
typedef struct {
    enum {
        RN_ADMIT,          /* it holds state for it, or room for one more */
        RN_ADMIT_DISPLACE, /* `victim`'s state must be discarded first */
        RN_ADMIT_REFUSE,   /* PRODUCER_LIMIT: room in retry_after_s seconds at the soonest */
    } verdict;
    rn_producer *victim;
    uint64_t retry_after_s;
} rn_admission;

/* A stream holding cap producers admits another one by displacing the
 * least recently written producer once that one is idle for an hour, or
 * for ttl_ms when shorter. */
rn_admission rn_producer_admit(const rn_stream *s, const rn_op_request *in, uint64_t cap,
                               uint64_t ttl_ms, int64_t now);

#endif
