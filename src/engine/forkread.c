/*
 * forkread.c — reading stream bytes: through fork chains (a fork's bytes
 * below its fork offset are its source's, never copied), message
 * boundaries of JSON streams, and where a fork starts (its offset and
 * sub-offset, found through the append index of tiers/streamfiles.h).
 * Reads run on the loop thread: a catch-up answer is read there, a piece
 * at a time when it is large (rn_engine_read_again), from the page cache
 * only when asked (a miss is warmed on a worker first: warm.c). Bytes below a
 * stream's cold end come from the tiers' cache of cold objects, or fail
 * -ENODATA (see rn_engine_cold_fetch).
 */
#include "engine/engine_int.h"
#include "util/fault.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Bytes [off, off + len) of s's own file (off not below its cold end). */
static int read_file(rn_engine *e, const rn_stream *s, uint64_t off, size_t len, uint8_t *out) {
    if (len == 0 || !out)
        return 0;
    if (off < s->gap_to && off + len > s->gap_from)
        return -EAGAIN; /* not in this replica's files yet (replica.c) */
    uint64_t bad = 0;
    ssize_t got = e->reads_cached_only
                      ? rn_streamfiles_read_cached(e->files, s->id, out, len, off, &bad)
                      : rn_streamfiles_read(e->files, s->id, out, len, off, &bad);
    if (got == -EINPROGRESS) { /* for rn_engine_warm */
        e->read_miss.id = s->id;
        e->read_miss.off = off;
        e->read_miss.len = len;
        return -EINPROGRESS;
    }
    if (got == -EUCLEAN)
        return engine_data_damaged(e, s->id, bad, 0);
    if (got < 0)
        return (int)got;
    return (size_t)got == len ? 0 : -EIO;
}

int engine_read_range(rn_engine *e, const rn_stream *s, uint64_t off, size_t len, uint8_t *out) {
    assert(off + len <= s->tail);
    if (len > 0 && off < s->fork_offset) {
        uint64_t inherited = s->fork_offset - off;
        size_t n = inherited < len ? (size_t)inherited : len;
        const rn_stream *src = s->inherit ? NULL : rn_state_fork_source(&e->state, s);
        int rc;
        if (s->inherit) /* kept in its own file here (inherit.c) */
            rc = read_file(e, s, off, n, out);
        else if (!src)
            rc = -EAGAIN; /* apart: this replica has not applied the source's pin yet */
        else
            rc = engine_read_range(e, src, off, n, out);
        if (rc < 0)
            return rc;
        off += n;
        out = out ? out + n : NULL;
        len -= n;
    }
    if (len > 0 && off < s->cold_end) { /* in the cold store: through the read cache */
        size_t n = s->cold_end - off < len ? (size_t)(s->cold_end - off) : len;
        int rc = rn_tiers_history_read(e->cfg.tiers, s->id, off, n, out);
        if (rc < 0)
            return rc;
        off += n;
        out = out ? out + n : NULL;
        len -= n;
    }
    return read_file(e, s, off, len, out);
}

int rn_engine_read_ready(rn_engine *e, rn_stream *s, uint64_t off, size_t len) {
    int rc = engine_read_range(e, s, off, len, NULL);
    if (rc == 0)
        engine_cold_read_ahead(e, s, off + len, len);
    return rc;
}

/* Finds the append holding position x (< tail) as seen by s: [start, end).
 * An inherited append is cut at the fork offset. Returns 0 or -errno. */
static int find_append(rn_engine *e, const rn_stream *s, uint64_t x, uint64_t *start,
                       uint64_t *end) {
    if (x < s->fork_offset) {
        const rn_stream *src = rn_state_fork_source(&e->state, s);
        if (!src) /* apart: this replica has not applied the source's pin yet, or keeps
                     the bytes without their appends' boundaries (inherit.c) */
            return -EAGAIN;
        int rc = find_append(e, src, x, start, end);
        if (rc == 0 && *end > s->fork_offset)
            *end = s->fork_offset;
        return rc;
    }
    if (s->gap_kfrom < s->gap_kto)
        return -EAGAIN; /* the index is not all here yet (replica.c) */
    uint64_t lo = 0, hi = s->appends, v;
    while (lo < hi) { /* first entry whose end is past x */
        uint64_t mid = lo + (hi - lo) / 2;
        int rc = rn_streamfiles_index_get(e->files, s->id, mid, &v);
        if (rc < 0)
            return rc;
        if (v > x)
            hi = mid;
        else
            lo = mid + 1;
    }
    if (lo == s->appends)
        return -ERANGE;
    int rc = rn_streamfiles_index_get(e->files, s->id, lo, end);
    if (rc == 0 && lo > 0)
        rc = rn_streamfiles_index_get(e->files, s->id, lo - 1, start);
    else if (rc == 0)
        *start = s->fork_offset;
    return rc;
}

int engine_fork_position(rn_engine *e, const rn_op_request *in, rn_stream *src, uint64_t *pos) {
    uint64_t base = in->has_fork_offset ? in->fork_offset : src->tail;
    int valid = base <= src->tail ? rn_engine_offset_valid(e, src, base) : 0;
    if (valid <= 0)
        return valid < 0 ? RN_ERR_BOUNDARY_UNVERIFIED : RN_ERR_FORK_OFFSET;
    uint64_t n = in->fork_sub_offset;
    if (n == 0) {
        *pos = base;
        return 0;
    }
    uint64_t start, end;
    if (base >= src->tail)
        return RN_ERR_SUB_OFFSET;
    if (find_append(e, src, base, &start, &end) != 0)
        return RN_ERR_BOUNDARY_UNVERIFIED; /* the append index was unreadable */
    if (!src->json) {
        if (n > end - base)
            return RN_ERR_SUB_OFFSET;
        *pos = base + n;
        return 0;
    }
    /* JSON: n whole messages of the append, counted from base. */
    uint8_t *text = rn_xmalloc((size_t)(end - base));
    int rc = rn_fault_fail("boundary-read");
    if (rc == 0)
        rc = engine_read_range(e, src, base, (size_t)(end - base), text);
    uint64_t p = base;
    for (size_t i = 0; rc == 0 && n > 0 && i < end - base; i++) {
        if (text[i] == '\n') {
            n--;
            p = base + i + 1;
        }
    }
    free(text);
    if (rc == -ENODATA)
        rn_engine_cold_fetch(e, NULL, NULL); /* so that a retry finds it */
    if (rc != 0 || n > 0)
        return rc != 0 ? RN_ERR_BOUNDARY_UNVERIFIED : RN_ERR_SUB_OFFSET;
    *pos = p;
    return 0;
}

int rn_engine_offset_valid(rn_engine *e, rn_stream *s, uint64_t offset) {
    if (offset > s->tail)
        return 0;
    if (!s->json || offset == 0 || offset == s->tail || offset == s->retained)
        return 1; /* the retained offset: retention cleared the byte before it */
    uint8_t c;
    int rc = rn_fault_fail("boundary-read");
    if (rc == 0)
        rc = engine_read_range(e, s, offset - 1, 1, &c);
    if (rc == -ENODATA)
        rn_engine_cold_fetch(e, NULL, NULL); /* so that a retry finds it */
    return rc < 0 ? rc : c == '\n';
}

#define SCAN_BYTES (64 * 1024) /* message ends are looked for this much at a time */

/* Finds a message end of s (a position just past an LF) in (lo, hi]: the
 * last one when `backwards`, else the first, reading SCAN_BYTES at a time.
 * Returns 1 with *end, 0 when there is none, or -errno. */
static int find_message_end(rn_engine *e, const rn_stream *s, uint64_t lo, uint64_t hi,
                            int backwards, uint64_t *end) {
    uint8_t *buf = rn_xmalloc(SCAN_BYTES);
    int rc = 0;
    for (uint64_t done = 0; rc == 0 && done < hi - lo;) {
        size_t n = hi - lo - done < SCAN_BYTES ? (size_t)(hi - lo - done) : SCAN_BYTES;
        uint64_t at = backwards ? hi - done - n : lo + done;
        rc = engine_read_range(e, s, at, n, buf);
        for (size_t k = 0; rc == 0 && k < n; k++) {
            size_t i = backwards ? n - 1 - k : k;
            if (buf[i] == '\n') {
                *end = at + i + 1;
                rc = 1;
            }
        }
        done += n;
    }
    free(buf);
    return rc;
}

long rn_engine_read_length(rn_engine *e, rn_stream *s, uint64_t offset, size_t max,
                           int whole_messages) {
    if (offset >= s->tail)
        return 0;
    uint64_t avail = s->tail - offset;
    /* A replica filling a gap (replica.c) answers up to what is here, and
     * sends a read inside the gap elsewhere. */
    uint64_t limit = s->tail;
    int short_of_gap = s->gap_from < s->gap_to && offset < s->gap_to;
    if (short_of_gap) {
        if (offset >= s->gap_from)
            return -EAGAIN;
        limit = s->gap_from;
        avail = limit - offset;
    }
    /* A single node answers up to a block it knows is damaged (damage.c),
     * and refuses a read that starts in one. */
    uint64_t bad = engine_known_damage(e, s, offset, avail < max ? limit : offset + max);
    int short_of_damage = bad != UINT64_MAX;
    if (short_of_damage) {
        if (bad <= offset)
            return -EUCLEAN;
        limit = bad;
        avail = limit - offset;
    }
    int short_of_limit = short_of_gap || short_of_damage; /* maybe mid-message */
    if (!s->json || !whole_messages || (avail <= max && !short_of_limit))
        return (long)(avail < max ? avail : max);
    /* Within max (and the limit): cut at the last message end. A first
     * message longer than max comes alone: the range then ends where it
     * does. */
    uint64_t hi = offset + (avail < max ? avail : max), end = limit;
    int rc = find_message_end(e, s, offset, hi, 1, &end);
    if (rc == 0 && hi < limit)
        rc = find_message_end(e, s, hi, limit, 0, &end);
    if (rc == 0 && short_of_limit) /* no whole message before it */
        return short_of_gap ? -EAGAIN : -EUCLEAN;
    return rc < 0 ? rc : (long)(end - offset); /* stored messages end in LF: found */
}

long rn_engine_read(rn_engine *e, rn_stream *s, uint64_t offset, size_t max, int whole_messages,
                    rn_buf *out) {
    long n = rn_engine_read_length(e, s, offset, max, whole_messages);
    if (n <= 0)
        return n;
    rn_buf_reserve(out, (size_t)n);
    int rc = engine_read_range(e, s, offset, (size_t)n, out->data + out->len);
    if (rc < 0)
        return rc;
    out->len += (size_t)n;
    return n;
}

int rn_engine_read_again(rn_engine *e, uint64_t id, uint64_t incarnation, uint64_t offset,
                         size_t len, int may_block, uint8_t *out) {
    const rn_stream *s = rn_state_stream(&e->state, id);
    if (!s || s->pending_create || s->soft_deleted || s->incarnation != incarnation ||
        offset < s->retained || offset + len > s->tail)
        return -ESTALE;
    assert(!e->reads_cached_only);
    e->reads_cached_only = !may_block;
    int rc = engine_read_range(e, s, offset, len, out);
    e->reads_cached_only = 0;
    return rc;
}
