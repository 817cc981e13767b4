/*
 * apply.c — rn_state_apply(): how one durable command changes the state.
 * Deterministic: the result depends only on the state and the command
 * (time included); storage and observers are reached through the caller's
 * rn_effects. See state.h.
 */
#include "engine/fences.h"
#include "engine/state.h"
#include "util/buf.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Drops s's snapshot, deleting its body when asked. */
static void snapshot_drop(rn_stream *s, int delete_body, const rn_effects *fx) {
    if (!s->snapshot.present)
        return;
    if (delete_body)
        fx->drop_body(fx->ctx, s, s->snapshot.cold, s->snapshot.key);
    free(s->snapshot.content_type);
    free(s->snapshot.key);
    memset(&s->snapshot, 0, sizeof s->snapshot);
}

/* Deletes a stream: soft while forks (or pins) still read it (its path then answers
 * 410 and blocks re-creation), else for good. */
static void stream_delete(rn_state *st, rn_stream *s, const rn_effects *fx) {
    if (rn_stream_held(s)) {
        s->soft_deleted = 1;
        fx->removed(fx->ctx, s);
        return;
    }
    rn_state_destroy(st, s, fx);
}

/* Makes a published snapshot the latest; the superseded body is deleted
 * (a repeat of the same key keeps it). */
static void apply_publish(rn_stream *s, const rn_cmd *c, const rn_effects *fx) {
    int same_key = s->snapshot.present && s->snapshot.cold == c->cold &&
                   strlen(s->snapshot.key) == c->object_key_len &&
                   memcmp(s->snapshot.key, c->object_key, c->object_key_len) == 0;
    snapshot_drop(s, !same_key, fx);
    s->snapshot.present = 1;
    s->snapshot.offset = c->offset;
    memcpy(s->snapshot.digest, c->digest, 32);
    s->snapshot.size = c->snapshot_size;
    s->snapshot.content_type = rn_xstrndup(c->content_type, c->content_type_len);
    s->snapshot.content_type_len = c->content_type_len;
    s->snapshot.key = rn_xstrndup(c->object_key, c->object_key_len);
    s->snapshot.cold = c->cold;
}

/* Advances the retained offset; the disk blocks below it may be given back
 * while no fork reads through them. */
static void apply_retain(rn_stream *s, uint64_t offset, const rn_effects *fx) {
    if (offset <= s->retained)
        return;
    uint64_t from = s->retained > s->fork_offset ? s->retained : s->fork_offset;
    uint64_t len = !rn_stream_held(s) && offset > s->fork_offset ? offset - from : 0;
    fx->retain(fx->ctx, s->id, from, len);
    s->retained = offset;
}

/* Records that the stream's bytes below `end` are in the cold store (the
 * tiers wrote their objects before the command was logged): the data
 * file's blocks below it go. A stale move (at or below the cold end, or
 * past the tail after a rewrite cut it) changes nothing. */
static void apply_tier(rn_stream *s, uint64_t end, const rn_effects *fx) {
    if (end <= s->cold_end || end > s->tail)
        return;
    fx->tiered(fx->ctx, s->id, s->cold_end, end - s->cold_end);
    s->cold_end = end;
}

/* ---- producer state (ext §5) ---- */

static void identity_from_cmd(rn_write_identity *id, const rn_cmd *c) {
    id->has_digest = c->has_digest;
    if (c->has_digest)
        memcpy(id->digest, c->producer_digest, 32);
    else
        memset(id->digest, 0, 32);
}

/* Records an applied producer write: a claim of a new epoch (seq 0) closes
 * the previous one (reported only when the server can vouch for it: state
 * above the floor, and not lost to a rewrite), then the write becomes the
 * newest, with its identity and range. Returns the producer. */
static const rn_producer *apply_producer(rn_stream *s, const rn_cmd *c) {
    rn_producer *p = rn_map_get(&s->producers, c->producer_id, c->producer_id_len);
    int claim = !p || c->producer_epoch != p->epoch;
    if (!p) {
        p = rn_stream_add_producer(s, c->producer_id, c->producer_id_len);
    } else if (claim) {
        p->closes_epoch = p->above_floor && p->history != RN_EPOCH_LOST;
        p->closed_epoch = p->epoch;
        p->closed_seq = p->history == RN_EPOCH_REWRITTEN ? p->history_seq : p->last_seq;
    }
    if (claim) {
        p->above_floor = p->above_floor || rn_stream_above_floor(s, c->producer_epoch);
        p->epoch = c->producer_epoch;
        p->history = RN_EPOCH_OPEN;
        identity_from_cmd(&p->claim, c);
    }
    p->last_seq = c->producer_seq;
    p->last_ms = c->time_ms;
    identity_from_cmd(&p->newest, c);
    p->newest_start = c->offset;
    p->newest_end = c->offset + c->data_len;
    p->newest_closed = c->close;
    return p;
}

/* Discards the state of the listed producers and raises the stream's epoch
 * floor to the highest epoch discarded. */
static void apply_expire_producers(rn_stream *s, const rn_cmd *c) {
    rn_reader r;
    rn_reader_init(&r, c->producer_ids, c->producer_ids_len);
    while (r.p < r.end) {
        size_t n;
        const char *id = (const char *)rn_read_lstr(&r, &n);
        rn_producer *p = id ? rn_map_get(&s->producers, id, n) : NULL;
        if (!p)
            continue;
        if (!s->has_floor || p->epoch > s->epoch_floor)
            s->epoch_floor = p->epoch;
        s->has_floor = 1;
        rn_stream_remove_producer(s, p);
    }
}

/* A rewrite keeping the bytes below `keep` closes every producer's current
 * epoch (ext §2.4). Only the newest write's range is known, so the highest
 * surviving seq is last_seq when that write survived, last_seq - 1 when the
 * cut falls inside it (the earlier writes end before it), and unknown when
 * the cut is below it. Closure reports of older epochs are dropped: what
 * they said applied may be gone. */
static void close_epochs_by_rewrite(rn_stream *s, uint64_t keep) {
    size_t i = 0;
    void *v;
    while (rn_map_next(&s->producers, &i, &v)) {
        rn_producer *p = v;
        p->closes_epoch = 0;
        int known = p->newest_end <= keep || (keep >= p->newest_start && p->last_seq > 0);
        uint64_t seq = p->newest_end <= keep ? p->last_seq : p->last_seq - 1;
        if (!known || p->history == RN_EPOCH_LOST) {
            p->history = RN_EPOCH_LOST;
        } else if (p->history == RN_EPOCH_OPEN || seq < p->history_seq) {
            p->history = RN_EPOCH_REWRITTEN;
            p->history_seq = seq;
        }
    }
}

/* A history rewrite: a new incarnation that keeps the bytes below the kept
 * offset. The previous token is reported unless nothing was written since
 * the last rewrite (then the older report still holds, ext §2.4). */
static void apply_rewrite(rn_state *st, rn_stream *s, const rn_cmd *c, const rn_effects *fx) {
    if (!s->has_previous || s->written_since_rewrite) {
        s->has_previous = 1;
        s->previous_incarnation = s->incarnation;
        s->inherited_offset = c->offset;
    } else if (c->offset < s->inherited_offset) {
        s->inherited_offset = c->offset; /* what survived both rewrites */
    }
    s->incarnation = c->incarnation; /* decided where the serial was issued */
    if (c->serial >= st->next_id)
        st->next_id = c->serial + 1; /* never issue the serial again */
    s->written_since_rewrite = 0;
    close_epochs_by_rewrite(s, c->offset);
    if (c->offset < s->tail) {
        s->appends = fx->cut(fx->ctx, s, c->offset);
        s->tail = c->offset;
        s->closed = 0;
        s->touched = 1;
    }
    if (s->snapshot.present && s->snapshot.offset > s->tail)
        snapshot_drop(s, 1, fx);
    if (s->retained > s->tail)
        s->retained = s->tail;
}

/* Records a command's data (fx->store puts it in the stream files), then
 * advances the tail. */
static int store_data(rn_stream *s, const rn_cmd *c, const rn_effects *fx) {
    if (!c->data_len)
        return 0;
    int rc = fx->store(fx->ctx, s->id, c, s->appends);
    if (rc < 0)
        return rc;
    s->appends++;
    s->tail = c->offset + c->data_len;
    return 0;
}

/* Remembers the namespace of a created stream (its path's bytes before the
 * first "/"), also once its streams are gone. */
static void note_namespace(rn_state *st, const rn_stream *s) {
    const char *slash = memchr(s->path, '/', s->path_len);
    if (slash && slash > s->path)
        rn_state_add_namespace(st, s->path, (size_t)(slash - s->path));
}

/* A create: of the stream the pipeline made pending for it, or (replay, a
 * follower) a new one, replacing whatever holds its path; NULL when its
 * namespace's fence refuses it (out->erased). */
static rn_stream *apply_create(rn_state *st, const rn_cmd *c, const rn_effects *fx, int *rc,
                               rn_applied *out) {
    if (rn_fences_refuse_create(st, c, out))
        return NULL;
    rn_stream *s = rn_state_stream(st, c->stream_id);
    if (!s || !s->pending_create) {
        rn_stream *old = rn_state_at(st, c->path, c->path_len);
        if (old)
            rn_state_destroy(st, old, fx);
        s = rn_state_add(st, c->stream_id, c->path, c->path_len, c->content_type,
                         c->content_type_len);
    }
    if (c->source_id & RN_CMD_SOURCE_APART) { /* the pin in its source's group holds it */
        s->apart_source = c->source_id & ~RN_CMD_SOURCE_APART;
        s->fork_offset = c->offset;
        s->retained = c->fork_retained;
        s->fork_depth = (uint32_t)c->fork_depth;
    } else if (c->source_id) {
        rn_stream *src = rn_state_stream(st, c->source_id);
        if (!src) {
            *rc = -EINVAL;
            return s;
        }
        s->source = src;
        s->fork_offset = c->offset;
        s->retained = src->retained < c->offset ? src->retained : c->offset;
        s->fork_depth = src->fork_depth + 1;
        src->refcount++;
    }
    s->pending_create = 0;
    note_namespace(st, s);
    s->incarnation = c->incarnation;
    s->ttl_s = c->ttl_s;
    s->expires_at_ms = c->expires_at_ms;
    s->created_ms = c->time_ms;
    s->last_access_ms = c->time_ms;
    s->closed = c->close;
    s->touched = 1;
    s->tail = c->offset;
    *rc = store_data(s, c, fx);
    return s;
}

static int apply_append(rn_stream *s, const rn_cmd *c, const rn_effects *fx, rn_applied *out) {
    int rc = store_data(s, c, fx);
    if (rc < 0)
        return rc;
    s->touched = 1;
    s->written_since_rewrite = 1;
    if (c->has_producer) {
        out->has_producer = 1;
        out->producer = *apply_producer(s, c);
        out->producer.id = NULL;
    }
    if (c->has_seq) {
        free(s->last_seq);
        s->last_seq = rn_xstrndup(c->seq, c->seq_len);
        s->last_seq_len = c->seq_len;
    }
    if (c->close)
        s->closed = 1;
    return 0;
}

int rn_state_apply(rn_state *st, const rn_cmd *c, const rn_effects *fx, rn_applied *out) {
    memset(out, 0, sizeof *out);
    out->stream_id = c->stream_id;
    rn_stream *s;
    int rc = 0;
    if (c->type == RN_CMD_FENCE) {
        rn_fences_apply_fence(st, c); /* its streams go by their PURGEs */
        return 0;
    }
    if (c->type == RN_CMD_SUBS) {
        rn_state_apply_subs(st, c); /* no stream changes */
        return 0;
    }
    if (c->type == RN_CMD_CREATE) {
        s = apply_create(st, c, fx, &rc, out);
        if (!s)
            return 0; /* refused by a fence: nothing to tell */
        out->event = RN_STREAM_CREATED;
    } else {
        s = rn_state_stream(st, c->stream_id);
        if (!s) /* a delete, purge, unpin or cut of what was removed first */
            return c->type == RN_CMD_DELETE || c->type == RN_CMD_PURGE || c->type == RN_CMD_UNPIN ||
                           c->type == RN_CMD_CUT
                       ? 0
                       : -ENOENT;
        out->event = c->type == RN_CMD_REWRITE ? RN_STREAM_REWRITTEN : RN_STREAM_CHANGED;
        switch (c->type) {
        case RN_CMD_APPEND:
            rc = apply_append(s, c, fx, out);
            break;
        case RN_CMD_DELETE:
            stream_delete(st, s, fx); /* observers heard REMOVED */
            return 0;
        case RN_CMD_PURGE:
            rn_fences_apply_purge(st, s, fx); /* observers heard REMOVED */
            return 0;
        case RN_CMD_PUBLISH:
            apply_publish(s, c, fx);
            break;
        case RN_CMD_RETAIN:
            apply_retain(s, c->offset, fx);
            break;
        case RN_CMD_REWRITE:
            apply_rewrite(st, s, c, fx);
            break;
        case RN_CMD_EXPIRE_PRODUCERS:
            apply_expire_producers(s, c); /* nothing a reader sees changes */
            return 0;
        case RN_CMD_TIER:
            apply_tier(s, c->offset, fx); /* the bytes read the same */
            return 0;
        case RN_CMD_PIN:
            rn_state_apply_pin(s, c); /* the bytes read the same */
            return 0;
        case RN_CMD_UNPIN:
            rn_state_apply_unpin(st, s, c, fx); /* its last: observers heard REMOVED */
            return 0;
        case RN_CMD_CUT:
            rn_fences_apply_cut(st, s, c, fx); /* reads below answer 410 now */
            break;
        default:
            return -EINVAL;
        }
    }
    if (rc < 0)
        return rc;
    out->notify = 1;
    out->tail = s->tail;
    out->closed = s->closed;
    return 0;
}
