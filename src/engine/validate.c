/*
 * validate.c — a mutation against the applied state: the checks of the
 * protocol, in its order, ending in a verdict (answer now, wait behind
 * another mutation of the stream, or log this command) that the pipeline
 * acts on. Also the answers given before a body arrives (ext §5.5).
 *
 * Order (ext §5.3, RFC 9110 for preconditions): a path in a namespace a
 * bucket purge fenced is refused first, whatever the kind (BUCKET_ERASED:
 * the fence is permanent, so waiting would change nothing; the purge's own
 * PURGE commands excepted); a stream with a mutation in
 * the log makes the request wait; then soft deletion (410), the
 * Stream-Incarnation precondition (412), expiry (the request waits behind
 * the deletion), existence (404); then per kind, for an append: idle
 * producer state is discarded first, then the producer rules, closure,
 * content (type, emptiness, Stream-Seq, JSON text, Producer-Digest last),
 * admission of a new producer, and the hot budget of history tiering.
 */
#include "engine/engine_int.h"
#include "engine/producers.h"
#include "util/blake3.h"
#include "util/clock.h"
#include "util/json_text.h"

#include <string.h>

static const char DEFAULT_TYPE[] = "application/octet-stream";

static verdict answer(rn_result result, rn_stream *s) {
    return (verdict){.kind = VERDICT_ANSWER, .result = result, .stream = s};
}

static verdict wait_on(verdict_kind kind, rn_stream *s, rn_producer *victim) {
    return (verdict){.kind = kind, .stream = s, .victim = victim};
}

static verdict log_for(rn_stream *s) {
    return (verdict){.kind = VERDICT_LOG, .stream = s};
}

/* Converts the body to stored form for the stream's content type (JSON:
 * message text in priv(op)->stored). Returns 0 and sets *data and *len,
 * or a result code to refuse with. */
static int prepare_body(rn_op *op, int json, int allow_empty_array, const uint8_t **data,
                        size_t *len) {
    op_private *p = priv(op);
    if (!json || op->in.body_len == 0) {
        *data = op->in.body;
        *len = op->in.body_len;
        p->messages = op->in.body_len ? 1 : 0;
        return 0;
    }
    p->stored.len = 0;
    rn_buf_reserve(&p->stored, op->in.body_len + 1);
    size_t out_len = 0, count = 0;
    rn_json_status st =
        rn_json_to_messages(op->in.body, op->in.body_len, p->stored.data, &out_len, &count, NULL);
    if (st == RN_JSON_EMPTY_ARRAY && allow_empty_array) {
        *data = NULL;
        *len = 0;
        return 0;
    }
    if (st == RN_JSON_EMPTY_ARRAY)
        return RN_ERR_JSON_EMPTY_ARRAY;
    if (st == RN_JSON_TOO_DEEP)
        return RN_ERR_JSON_TOO_DEEP;
    if (st != RN_JSON_OK)
        return RN_ERR_JSON_INVALID;
    p->stored.len = out_len;
    p->messages = count;
    *data = p->stored.data;
    *len = out_len;
    return 0;
}

/* The checks a fork's create makes of its source src (the stream at the
 * source path, or NULL; not busy), in the protocol's order. Returns 0 with
 * *fork_at, or the result to refuse with (CONTENT_TYPE: op's out names the
 * source's type). */
static int check_fork_source(rn_engine *e, rn_op *op, rn_stream *src, int64_t now,
                             uint64_t *fork_at) {
    const rn_op_request *in = &op->in;
    assert(!src || !src->busy);
    if (!src || src->pending_create || rn_stream_expired(src, now))
        return RN_ERR_SOURCE_NOT_FOUND;
    if (src->soft_deleted)
        return RN_ERR_SOURCE_GONE;
    if (src->fork_depth + 1 > RN_MAX_FORK_DEPTH)
        return RN_ERR_FORK_DEPTH;
    if (in->content_type && !rn_content_type_equal(src->content_type, src->content_type_len,
                                                   in->content_type, in->content_type_len)) {
        op->out.conflicting_type = src->content_type;
        op->out.conflicting_type_len = src->content_type_len;
        return RN_ERR_CONTENT_TYPE;
    }
    return engine_fork_position(e, in, src, fork_at);
}

/* What a fork inherits from its source and where it starts: from the
 * source in this group, or from the pin's answer of the source's group. */
typedef struct {
    uint64_t source_id; /* with RN_CMD_SOURCE_APART when apart */
    uint64_t fork_at, retained, depth;
    const char *ct;
    size_t ct_len;
    int64_t ttl_s, expires_at_ms;
} fork_origin;

/* A create (s: what holds the path now, or NULL). The command names the
 * request's path and the chosen content type; the pipeline makes the
 * pending stream, which then holds both. A fork whose source is in another
 * group is pinned there first (VERDICT_PIN; apart.c), then evaluated again
 * with the pin's answer. */
static verdict validate_create(rn_engine *e, rn_op *op, rn_stream *s, int64_t now) {
    const rn_op_request *in = &op->in;
    if (s && s->soft_deleted)
        return answer(RN_ERR_CONFIG_MISMATCH, NULL);
    const char *ct = in->content_type ? in->content_type : DEFAULT_TYPE;
    size_t ct_len = in->content_type ? in->content_type_len : sizeof DEFAULT_TYPE - 1;
    int64_t ttl_s = in->ttl_s, expires_at_ms = in->expires_at_ms;
    fork_origin o = {0};
    const rn_fork_pin_answer *pinned = engine_apart_answer(op);
    if (in->fork_source && !pinned && engine_apart(e, in)) {
        return (verdict){.kind = VERDICT_PIN};
    } else if (pinned) {
        o = (fork_origin){.source_id = pinned->source_id | RN_CMD_SOURCE_APART,
                          .fork_at = pinned->fork_offset,
                          .retained = pinned->retained,
                          .depth = pinned->depth,
                          .ct = pinned->content_type,
                          .ct_len = pinned->content_type_len,
                          .ttl_s = pinned->ttl_s,
                          .expires_at_ms = pinned->expires_at_ms};
    } else if (in->fork_source) {
        rn_stream *src = rn_state_at(&e->state, in->fork_source, in->fork_source_len);
        if (src && src->busy)
            return wait_on(VERDICT_WAIT, src, NULL); /* evaluate against its next state */
        int refuse = check_fork_source(e, op, src, now, &o.fork_at);
        if (refuse)
            return answer((rn_result)refuse, NULL);
        o = (fork_origin){.source_id = src->id,
                          .fork_at = o.fork_at,
                          .ct = src->content_type,
                          .ct_len = src->content_type_len,
                          .ttl_s = src->ttl_s,
                          .expires_at_ms = src->expires_at_ms};
    }
    if (in->fork_source) {
        if (!in->content_type) {
            ct = o.ct;
            ct_len = o.ct_len;
        }
        if (ttl_s < 0 && expires_at_ms < 0) { /* inherit the source's expiry */
            ttl_s = o.ttl_s;
            expires_at_ms = o.expires_at_ms;
        }
    }
    if (s) {
        uint64_t has = s->apart_source ? s->apart_source | RN_CMD_SOURCE_APART
                                       : (s->source ? s->source->id : 0);
        int same = rn_content_type_equal(s->content_type, s->content_type_len, ct, ct_len) &&
                   s->ttl_s == ttl_s && s->expires_at_ms == expires_at_ms &&
                   s->closed == (in->close != 0) && has == o.source_id &&
                   s->fork_offset == o.fork_at;
        return answer(same ? RN_OK_EXISTS : RN_ERR_CONFIG_MISMATCH, s);
    }
    const uint8_t *data;
    size_t len;
    int refuse = prepare_body(op, rn_content_type_is_json(ct, ct_len), 1, &data, &len);
    if (refuse)
        return answer((rn_result)refuse, NULL);
    priv(op)->cmd = (rn_cmd){.type = RN_CMD_CREATE,
                             .path = in->path,
                             .path_len = in->path_len,
                             .content_type = ct,
                             .content_type_len = ct_len,
                             .ttl_s = ttl_s,
                             .expires_at_ms = expires_at_ms,
                             .source_id = o.source_id,
                             .offset = o.fork_at,
                             .fork_retained = o.retained,
                             .fork_depth = o.depth,
                             .close = (uint8_t)(in->close != 0),
                             .data = data,
                             .data_len = len};
    return log_for(NULL);
}

/* An append or close, after the stream checks (see the top). */
static verdict validate_append(rn_engine *e, rn_op *op, rn_stream *s, int64_t now) {
    const rn_op_request *in = &op->in;
    if (in->has_producer) {
        rn_producer *p = rn_map_get(&s->producers, in->producer_id, in->producer_id_len);
        if (p && rn_producer_idle(p, now, e->cfg.producer_ttl_ms))
            return wait_on(VERDICT_EXPIRE_PRODUCER, s, p);
        int rule = rn_producer_rules(s, in, &op->out);
        if (rule != RN_PRODUCER_APPLIES)
            return answer((rn_result)rule, s);
    }
    if (s->closed) {
        /* Close-only without producer headers is idempotent (PROTOCOL §5.2). */
        int repeat = !in->has_producer && !in->body_len && in->close;
        return answer(repeat ? RN_OK_DUPLICATE : RN_ERR_CLOSED, s);
    }
    if (!in->body_len && !in->close)
        return answer(RN_ERR_EMPTY_BODY, s);
    if (in->body_len && !in->content_type)
        return answer(RN_ERR_MISSING_CONTENT_TYPE, s);
    if (in->body_len && !rn_content_type_equal(s->content_type, s->content_type_len,
                                               in->content_type, in->content_type_len)) {
        op->out.conflicting_type = s->content_type;
        op->out.conflicting_type_len = s->content_type_len;
        return answer(RN_ERR_CONTENT_TYPE, s);
    }
    if (in->has_seq && s->last_seq) {
        size_t n = in->seq_len < s->last_seq_len ? in->seq_len : s->last_seq_len;
        int cmp = memcmp(in->seq, s->last_seq, n);
        if (cmp < 0 || (cmp == 0 && in->seq_len <= s->last_seq_len))
            return answer(RN_ERR_SEQ_REGRESSION, s);
    }
    const uint8_t *data;
    size_t len;
    int refuse = prepare_body(op, s->json, 0, &data, &len);
    if (refuse)
        return answer((rn_result)refuse, s);
    if (in->has_producer_digest) {
        uint8_t digest[32];
        rn_blake3_hash(in->body, in->body_len, digest);
        if (memcmp(digest, in->producer_digest, 32) != 0)
            return answer(RN_ERR_DIGEST_MISMATCH, s);
    }
    if (in->has_producer) {
        rn_admission a = rn_producer_admit(s, in, e->cfg.producer_cap, e->cfg.producer_ttl_ms, now);
        if (a.verdict == RN_ADMIT_DISPLACE)
            return wait_on(VERDICT_EXPIRE_PRODUCER, s, a.victim);
        if (a.verdict == RN_ADMIT_REFUSE) {
            op->out.retry_after_s = a.retry_after_s;
            return answer(RN_ERR_PRODUCER_LIMIT, s);
        }
    }
    if (len && engine_hot_budget_spent(e))
        return answer(engine_hot_budget_refusal(e, &op->out.cause), s);
    priv(op)->cmd = (rn_cmd){.type = RN_CMD_APPEND,
                             .stream_id = s->id,
                             .offset = s->tail,
                             .close = (uint8_t)(in->close != 0),
                             .data = data,
                             .data_len = len,
                             .has_producer = (uint8_t)in->has_producer,
                             .producer_id = in->producer_id,
                             .producer_id_len = in->producer_id_len,
                             .producer_epoch = in->producer_epoch,
                             .producer_seq = in->producer_seq,
                             .has_digest = (uint8_t)(in->has_producer && in->has_producer_digest),
                             .producer_digest = in->producer_digest,
                             .has_seq = (uint8_t)in->has_seq,
                             .seq = in->seq,
                             .seq_len = in->seq_len};
    return log_for(s);
}

/* Snapshot publish (ext §2.2), in the section's order: retention (410),
 * tail (409 naming nothing), JSON boundary (400), latest snapshot (a repeat
 * succeeds, anything else answers 409 naming the latest). */
static verdict validate_publish(rn_engine *e, rn_op *op, rn_stream *s) {
    const rn_op_request *in = &op->in;
    uint64_t off = in->target_offset;
    if (off < s->retained)
        return answer(RN_ERR_BELOW_RETAINED, s);
    if (off > s->tail)
        return answer(RN_ERR_OFFSET_BEYOND_TAIL, s);
    int valid = rn_engine_offset_valid(e, s, off);
    if (valid <= 0)
        return answer(valid < 0 ? RN_ERR_BOUNDARY_UNVERIFIED : RN_ERR_NOT_BOUNDARY, s);
    if (s->snapshot.present && off <= s->snapshot.offset) {
        int repeat = off == s->snapshot.offset && memcmp(in->digest, s->snapshot.digest, 32) == 0;
        op->out.repeat = repeat;
        return answer(repeat ? RN_OK_PUBLISHED : RN_ERR_SNAPSHOT_CONFLICT, s);
    }
    priv(op)->cmd = (rn_cmd){.type = RN_CMD_PUBLISH,
                             .stream_id = s->id,
                             .offset = off,
                             .content_type = in->content_type,
                             .content_type_len = in->content_type_len,
                             .digest = in->digest,
                             .snapshot_size = in->blob_size,
                             .cold = (uint8_t)in->blob_cold,
                             .object_key = in->blob_key,
                             .object_key_len = in->blob_key_len};
    return log_for(s);
}

/* Retention (ext §2.2): aligned, not past the latest snapshot, forward
 * only (a boundary at or below the current one changes nothing). */
static verdict validate_retain(rn_engine *e, rn_op *op, rn_stream *s) {
    uint64_t off = op->in.target_offset;
    if (off <= s->retained)
        return answer(RN_OK_RETAINED, s);
    int valid = off <= s->tail ? rn_engine_offset_valid(e, s, off) : 0;
    if (valid <= 0)
        return answer(valid < 0 ? RN_ERR_BOUNDARY_UNVERIFIED : RN_ERR_NOT_BOUNDARY, s);
    if (!s->snapshot.present || off > s->snapshot.offset)
        return answer(RN_ERR_RETENTION_PAST_SNAPSHOT, s);
    priv(op)->cmd = (rn_cmd){.type = RN_CMD_RETAIN, .stream_id = s->id, .offset = off};
    return log_for(s);
}

/* History rewrite to target_offset (an operator action). Refused for a
 * stream that forks read through, whose bytes must not change under them,
 * and below the stream's cold end (its objects hold whole chunks of the
 * old history; tiers/history.c). The pipeline issues the new
 * incarnation's serial. */
static verdict validate_rewrite(rn_op *op, rn_stream *s) {
    if (op->in.target_offset > s->tail || rn_stream_held(s) || op->in.target_offset < s->cold_end)
        return answer(RN_ERR_CONFIG_MISMATCH, s);
    priv(op)->cmd =
        (rn_cmd){.type = RN_CMD_REWRITE, .stream_id = s->id, .offset = op->in.target_offset};
    return log_for(s);
}

/* A move of history to the cold store (an internal mutation of the
 * tiers' flush): of the same stream, forward, within the tail. */
static verdict validate_tier(rn_op *op, rn_stream *s) {
    uint64_t end = op->in.target_offset;
    if (s->id != op->in.stream_id)
        return answer(RN_ERR_NOT_FOUND, NULL);
    if (end <= s->cold_end)
        return answer(RN_OK_TIERED, s);
    if (end > s->tail)
        return answer(RN_ERR_CONFIG_MISMATCH, s); /* a rewrite cut it meanwhile */
    priv(op)->cmd = (rn_cmd){.type = RN_CMD_TIER, .stream_id = s->id, .offset = end};
    return log_for(s);
}

/* A purge's removal of a fenced stream (the same stream: by id), once its
 * mutations in the log applied. */
static verdict validate_purge(rn_engine *e, rn_op *op, rn_stream *s) {
    const rn_fence *f = s ? rn_state_path_fence(&e->state, s->path, s->path_len) : NULL;
    if (!s || s->id != op->in.stream_id || s->pending_create || !f || !rn_fence_covers(f, s->id))
        return answer(RN_ERR_NOT_FOUND, NULL);
    if (s->busy)
        return wait_on(VERDICT_WAIT, s, NULL);
    priv(op)->cmd = (rn_cmd){.type = RN_CMD_PURGE, .stream_id = s->id};
    return log_for(s);
}

/* A PIN (the source's group, for a fork's create in another group: the
 * checks the create makes of its source) or an UNPIN (of the source by
 * id). A repeated pin answers what it found. */
static verdict validate_pin(rn_engine *e, rn_op *op, rn_stream *s, int64_t now) {
    const rn_op_request *in = &op->in;
    assert(in->fork_id);
    if (in->kind == RN_OP_UNPIN)
        s = rn_state_stream(&e->state, in->stream_id);
    if (s && s->busy)
        return wait_on(VERDICT_WAIT, s, NULL);
    if (in->kind == RN_OP_UNPIN) {
        if (!s || !rn_stream_pin(s, in->fork_id))
            return answer(RN_ERR_NOT_FOUND, NULL);
        priv(op)->cmd = (rn_cmd){.type = RN_CMD_UNPIN, .stream_id = s->id, .fork_id = in->fork_id};
        return log_for(s);
    }
    uint64_t fork_at;
    int refuse = check_fork_source(e, op, s, now, &fork_at);
    if (refuse)
        return answer((rn_result)refuse, NULL);
    op->out.fork_offset = fork_at;
    if (rn_stream_pin(s, in->fork_id))
        return answer(RN_OK_CREATED, s);
    priv(op)->cmd =
        (rn_cmd){.type = RN_CMD_PIN, .stream_id = s->id, .fork_id = in->fork_id, .offset = fork_at};
    return log_for(s);
}

verdict engine_validate(rn_engine *e, rn_op *op, int64_t now) {
    const rn_op_request *in = &op->in;
    rn_stream *s = rn_state_at(&e->state, in->path, in->path_len);
    if (in->kind == RN_OP_PURGE)
        return validate_purge(e, op, s);
    if (in->kind == RN_OP_PIN || in->kind == RN_OP_UNPIN)
        return validate_pin(e, op, s, now);
    if (rn_state_path_fence(&e->state, in->path, in->path_len))
        return answer(RN_ERR_BUCKET_ERASED, NULL);
    if (s && s->busy)
        return wait_on(VERDICT_WAIT, s, NULL);
    if (s && s->soft_deleted && in->kind != RN_OP_CREATE)
        return answer(RN_ERR_GONE, NULL);
    int expired = s && rn_stream_expired(s, now);
    if (in->has_incarnation && !expired) {
        /* RFC 9110 order: a missing stream stays 404, except that a create
         * with the precondition creates nothing and answers 412. */
        rn_stream *live = s && !s->soft_deleted ? s : NULL;
        if ((live && live->incarnation != in->incarnation) || (!live && in->kind == RN_OP_CREATE))
            return answer(RN_ERR_INCARNATION, live);
    }
    if (expired)
        return wait_on(VERDICT_EXPIRE_STREAM, s, NULL);
    if (in->kind == RN_OP_CREATE)
        return validate_create(e, op, s, now);
    if (!s)
        return answer(RN_ERR_NOT_FOUND, NULL);
    if (in->kind == RN_OP_TIER) /* internal: renews no TTL window */
        return validate_tier(op, s);
    rn_engine_touch(e, s);
    switch (in->kind) {
    case RN_OP_DELETE:
        priv(op)->cmd = (rn_cmd){.type = RN_CMD_DELETE, .stream_id = s->id};
        return log_for(s);
    case RN_OP_PUBLISH:
        return validate_publish(e, op, s);
    case RN_OP_RETAIN:
        return validate_retain(e, op, s);
    case RN_OP_REWRITE:
        return validate_rewrite(op, s);
    default:
        return validate_append(e, op, s, now);
    }
}

int rn_engine_answer_early(rn_engine *e, rn_op *op) {
    const rn_op_request *in = &op->in;
    if (in->kind != RN_OP_APPEND || !in->has_producer || !in->has_incarnation)
        return 0;
    int64_t now = rn_now_ms();
    rn_stream *s = rn_state_at(&e->state, in->path, in->path_len);
    if (!s || s->busy || s->pending_create || s->soft_deleted || rn_stream_expired(s, now) ||
        s->incarnation != in->incarnation || !engine_log_accepts(e, in->path, in->path_len) ||
        rn_state_path_fence(&e->state, in->path, in->path_len))
        return 0;
    const rn_producer *p = rn_map_get(&s->producers, in->producer_id, in->producer_id_len);
    if (p && rn_producer_idle(p, now, e->cfg.producer_ttl_ms))
        return 0; /* its discard is a logged step that comes first */
    rn_op_outcome out = {0};
    int rule = rn_producer_rules(s, in, &out);
    if (rule != RN_OK_DUPLICATE && rule != RN_ERR_KEY_CONFLICT)
        return 0;
    rn_engine_touch(e, s);
    out.result = (rn_result)rule;
    out.stream = s;
    out.next_offset = s->tail;
    out.stream_closed = s->closed;
    op->out = out;
    return 1;
}

int rn_engine_publish_early(rn_engine *e, rn_op *op) {
    const rn_op_request *in = &op->in;
    assert(in->kind == RN_OP_PUBLISH);
    int64_t now = rn_now_ms();
    rn_stream *s = rn_state_at(&e->state, in->path, in->path_len);
    if (!s || s->busy || s->pending_create || s->soft_deleted || rn_stream_expired(s, now) ||
        (in->has_incarnation && s->incarnation != in->incarnation) || !s->snapshot.present ||
        in->target_offset > s->snapshot.offset || in->target_offset < s->retained ||
        !engine_log_accepts(e, in->path, in->path_len) ||
        rn_state_path_fence(&e->state, in->path, in->path_len))
        return 0;
    if (rn_engine_offset_valid(e, s, in->target_offset) <= 0)
        return 0; /* a boundary refused or unverified: the submitted op answers */
    verdict v = validate_publish(e, op, s);
    assert(v.kind == VERDICT_ANSWER); /* at or below the latest snapshot */
    rn_engine_touch(e, s);
    op->out.result = v.result;
    op->out.stream = s;
    op->out.next_offset = s->tail;
    op->out.stream_closed = s->closed;
    return 1;
}
