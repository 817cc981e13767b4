/*
 * command.c — encoding and decoding of engine commands. See command.h.
 */
#include "engine/command.h"
#include "engine/state.h"
#include "tiers/blocksums.h"

#include <assert.h>
#include <string.h>

void rn_cmd_encode_head(const rn_cmd *c, rn_buf *b) {
    assert(!c->stored_ahead ||
           ((c->type == RN_CMD_CREATE || c->type == RN_CMD_APPEND) && c->data_len));
    rn_buf_append_u8(b, c->stored_ahead ? c->type | RN_CMD_STORED_AHEAD : c->type);
    rn_buf_append_u64(b, c->stream_id);
    rn_buf_append_u64(b, (uint64_t)c->time_ms);
    switch (c->type) {
    case RN_CMD_CREATE:
        rn_buf_append_lstr(b, c->path, c->path_len);
        rn_buf_append_u64(b, c->incarnation);
        rn_buf_append_lstr(b, c->content_type, c->content_type_len);
        rn_buf_append_u64(b, (uint64_t)c->ttl_s);
        rn_buf_append_u64(b, (uint64_t)c->expires_at_ms);
        rn_buf_append_u8(b, c->close);
        rn_buf_append_u64(b, c->source_id);
        rn_buf_append_u64(b, c->offset);
        if (c->source_id & RN_CMD_SOURCE_APART) {
            rn_buf_append_u64(b, c->fork_retained);
            rn_buf_append_u64(b, c->fork_depth);
        }
        rn_buf_append_u64(b, c->data_len);
        break;
    case RN_CMD_PIN:
        rn_buf_append_u64(b, c->fork_id);
        rn_buf_append_u64(b, c->offset);
        break;
    case RN_CMD_UNPIN:
        rn_buf_append_u64(b, c->fork_id);
        break;
    case RN_CMD_CUT:
        rn_buf_append_u64(b, c->source_id);
        rn_buf_append_u64(b, c->offset);
        break;
    case RN_CMD_APPEND:
        rn_buf_append_u64(b, c->offset);
        rn_buf_append_u8(b, c->close);
        rn_buf_append_u8(b, c->has_producer);
        if (c->has_producer) {
            rn_buf_append_lstr(b, c->producer_id, c->producer_id_len);
            rn_buf_append_u64(b, c->producer_epoch);
            rn_buf_append_u64(b, c->producer_seq);
            rn_buf_append_u8(b, c->has_digest);
            if (c->has_digest)
                rn_buf_append(b, c->producer_digest, 32);
        }
        rn_buf_append_u8(b, c->has_seq);
        if (c->has_seq)
            rn_buf_append_lstr(b, c->seq, c->seq_len);
        rn_buf_append_u64(b, c->data_len);
        break;
    case RN_CMD_PUBLISH:
        rn_buf_append_u64(b, c->offset);
        rn_buf_append_lstr(b, c->content_type, c->content_type_len);
        rn_buf_append(b, c->digest, 32);
        rn_buf_append_u64(b, c->snapshot_size);
        rn_buf_append_u8(b, c->cold);
        rn_buf_append_lstr(b, c->object_key, c->object_key_len);
        break;
    case RN_CMD_RETAIN:
    case RN_CMD_TIER:
        rn_buf_append_u64(b, c->offset);
        break;
    case RN_CMD_REWRITE:
        rn_buf_append_u64(b, c->serial);
        rn_buf_append_u64(b, c->offset);
        rn_buf_append_u64(b, c->incarnation);
        break;
    case RN_CMD_EXPIRE_PRODUCERS:
        rn_buf_append_u64(b, c->producer_ids_len);
        rn_buf_append(b, c->producer_ids, c->producer_ids_len);
        break;
    case RN_CMD_FENCE:
        rn_buf_append_lstr(b, c->path, c->path_len);
        rn_buf_append_u8(b, (uint8_t)(c->fence_scope & 0xff));
        rn_buf_append_u8(b, (uint8_t)(c->fence_scope >> 8));
        break;
    case RN_CMD_SUBS:
        rn_buf_append_lstr(b, c->path, c->path_len);
        break;
    default:
        break;
    }
}

size_t rn_cmd_block_sums_len(const rn_cmd *c) {
    assert(c->data_len);
    return (size_t)rn_blocksums_blocks(c->offset, c->data_len) * 4;
}

int rn_cmd_decode(const uint8_t *rec, size_t len, rn_cmd *c) {
    memset(c, 0, sizeof *c);
    rn_reader r;
    rn_reader_init(&r, rec, len);
    c->type = rn_read_u8(&r);
    if (c->type & RN_CMD_STORED_AHEAD) {
        c->type &= (uint8_t)~RN_CMD_STORED_AHEAD;
        c->stored_ahead = 1;
        if (c->type != RN_CMD_CREATE && c->type != RN_CMD_APPEND)
            return -1;
    }
    c->stream_id = rn_read_u64(&r);
    c->time_ms = (int64_t)rn_read_u64(&r);
    switch (c->type) {
    case RN_CMD_CREATE:
        c->path = (const char *)rn_read_lstr(&r, &c->path_len);
        c->incarnation = rn_read_u64(&r);
        c->content_type = (const char *)rn_read_lstr(&r, &c->content_type_len);
        c->ttl_s = (int64_t)rn_read_u64(&r);
        c->expires_at_ms = (int64_t)rn_read_u64(&r);
        c->close = rn_read_u8(&r);
        c->source_id = rn_read_u64(&r);
        c->offset = rn_read_u64(&r);
        if (c->source_id & RN_CMD_SOURCE_APART) {
            c->fork_retained = rn_read_u64(&r);
            c->fork_depth = rn_read_u64(&r);
        }
        c->data_len = rn_read_u64(&r);
        break;
    case RN_CMD_PIN:
        c->fork_id = rn_read_u64(&r);
        c->offset = rn_read_u64(&r);
        if (!c->fork_id)
            return -1;
        break;
    case RN_CMD_UNPIN:
        c->fork_id = rn_read_u64(&r);
        if (!c->fork_id)
            return -1;
        break;
    case RN_CMD_CUT:
        c->source_id = rn_read_u64(&r);
        c->offset = rn_read_u64(&r);
        if (!c->source_id)
            return -1;
        break;
    case RN_CMD_APPEND:
        c->offset = rn_read_u64(&r);
        c->close = rn_read_u8(&r);
        c->has_producer = rn_read_u8(&r);
        if (c->has_producer) {
            c->producer_id = (const char *)rn_read_lstr(&r, &c->producer_id_len);
            c->producer_epoch = rn_read_u64(&r);
            c->producer_seq = rn_read_u64(&r);
            c->has_digest = rn_read_u8(&r);
            if (c->has_digest)
                c->producer_digest = rn_read_bytes(&r, 32);
        }
        c->has_seq = rn_read_u8(&r);
        if (c->has_seq)
            c->seq = (const char *)rn_read_lstr(&r, &c->seq_len);
        c->data_len = rn_read_u64(&r);
        break;
    case RN_CMD_DELETE:
        break;
    case RN_CMD_PUBLISH:
        c->offset = rn_read_u64(&r);
        c->content_type = (const char *)rn_read_lstr(&r, &c->content_type_len);
        c->digest = rn_read_bytes(&r, 32);
        c->snapshot_size = rn_read_u64(&r);
        c->cold = rn_read_u8(&r);
        c->object_key = (const char *)rn_read_lstr(&r, &c->object_key_len);
        break;
    case RN_CMD_RETAIN:
    case RN_CMD_TIER:
        c->offset = rn_read_u64(&r);
        break;
    case RN_CMD_REWRITE:
        c->serial = rn_read_u64(&r);
        c->offset = rn_read_u64(&r);
        /* a record of a build before the deployment's key ends here; its
         * token came from the fixed permutation */
        c->incarnation = r.end - r.p >= 8 ? rn_read_u64(&r) : rn_incarnation_for(0, c->serial);
        break;
    case RN_CMD_EXPIRE_PRODUCERS:
        c->producer_ids_len = rn_read_u64(&r);
        c->producer_ids = rn_read_bytes(&r, c->producer_ids_len);
        break;
    case RN_CMD_FENCE:
        c->path = (const char *)rn_read_lstr(&r, &c->path_len);
        c->fence_scope = rn_read_u8(&r);
        c->fence_scope |= (uint16_t)(rn_read_u8(&r) << 8);
        if (!c->path_len || (c->fence_scope != RN_FENCE_ALL && c->fence_scope > 0xff))
            return -1;
        break;
    case RN_CMD_PURGE:
        break;
    case RN_CMD_SUBS:
        c->path = (const char *)rn_read_lstr(&r, &c->path_len);
        if (!c->path_len || c->stream_id > 0xff)
            return -1;
        break;
    default:
        return -1;
    }
    if (c->stored_ahead) {
        if (!c->data_len || c->data_len > RN_CMD_MAX_STORED_AHEAD ||
            c->offset > UINT64_MAX - c->data_len)
            return -1;
        c->block_sums = rn_read_bytes(&r, rn_cmd_block_sums_len(c));
    } else if (c->type == RN_CMD_CREATE || c->type == RN_CMD_APPEND)
        c->data = rn_read_bytes(&r, c->data_len);
    if (r.failed || r.p != r.end)
        return -1;
    return 0;
}
