/*
 * propose.c — entries in, applies out: consensus_propose and the adapter
 * between libraft's state machine interface and consensus_fsm.
 *
 * libraft's apply callback is not told the entry's index, and it drops the
 * result of an entry nobody on this node waits for. The adapter derives the
 * index (the entry after last_applied: libraft applies strictly in order),
 * hands the result to this node's proposal of that index when there is one
 * (the oldest pending proposal, since proposals enter the log in order and
 * a leader that loses its term fails all of them at once), and releases it
 * otherwise.
 *
 * Entry framing: libraft 0.15 needs every entry's length to be a multiple
 * of 8. Its segment writer copies entries unpadded while its reader skips
 * padding (the assert that says so is compiled out in Debian's build), so
 * any other length silently corrupts the segment, found only when a
 * restart loads it. An entry is therefore the proposal's bytes followed by
 * 1 to 8 bytes whose last byte counts them.
 *
 * Snapshots are the state machine's manifest behind a 32-byte header
 * (little-endian: u32 'RNSM', u32 version 1, u32 group, u32 crc32c of the
 * manifest, u64 index, u64 manifest length), which carries the index that
 * libraft does not pass to restore and lets a damaged or misplaced snapshot
 * be refused instead of restored.
 */
#include "consensus/consensus_int.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "util/buf.h"
#include "util/crc32c.h"
#include "util/log.h"

#define SNAP_MAGIC 0x4d534e52u /* "RNSM" */
#define SNAP_VERSION 1u
#define SNAP_HEADER_BYTES 32u

/* Bytes added to a proposal of len bytes: 1..8, so the entry's length is a
 * multiple of 8 and its last byte says how many were added. */
static size_t frame_padding(size_t len) {
    return 8 - (len % 8);
}

/* --- the commit nudge ----------------------------------------------------- */

/* A follower learns that an entry committed from the leader's next
 * AppendEntries, which without another write is the next heartbeat (100 ms
 * by default): a write acknowledged on the leader would show on a follower
 * up to a heartbeat later, and a read there waiting for it would wait as
 * long. So once a proposal completed and no other is in flight (they carry
 * the commit index anyway), the leader appends a barrier entry, whose
 * AppendEntries carries the new commit index to every follower at once.
 * One at a time per group; a proposal that completes meanwhile asks for
 * one more when it is done, and a barrier's own commit asks for none, so
 * nudges never feed themselves. */
static void nudge_followers(cs_group *g);

static void nudge_done(struct raft_barrier *req, int status) {
    cs_group *g = req->data;
    g->nudge_active = false;
    if (status == 0 && g->nudge_wanted)
        nudge_followers(g);
}

static void nudge_followers(cs_group *g) {
    if (g->nudge_active) {
        g->nudge_wanted = true;
        return;
    }
    g->nudge_wanted = false;
    if (g->inflight_entries || g->node->stopping || g->stage != CS_RAFT_READY ||
        g->raft.state != RAFT_LEADER)
        return;
    g->nudge_req.data = g;
    if (raft_barrier(&g->raft, &g->nudge_req, nudge_done) == 0) {
        g->nudge_active = true;
        g->nudges++;
    }
}

/* --- proposals ------------------------------------------------------------ */

static void proposal_fire(cs_completion *item) {
    cs_proposal *p = (cs_proposal *)item;
    consensus_propose_cb cb = p->cb;
    void *arg = p->arg;
    consensus_status st = p->status;
    uint64_t index = p->index;
    void *result = p->result;
    cs_group *g = p->group;
    free(p);
    if (st == CONSENSUS_OK) /* outside libraft: the completion queue */
        nudge_followers(g);
    cb(arg, st, index, result);
}

static void unlink_proposal(cs_group *g, cs_proposal *p) {
    cs_proposal *prev = NULL;
    for (cs_proposal *q = g->proposals; q; prev = q, q = q->next) {
        if (q != p)
            continue;
        if (prev)
            prev->next = p->next;
        else
            g->proposals = p->next;
        if (g->proposals_tail == p)
            g->proposals_tail = prev;
        p->next = NULL;
        return;
    }
    assert(!"proposal not pending");
}

/* libraft's outcome: 0 after this node applied the entry, else the entry
 * was in the log and its fate is unknown here (leadership lost, closing). */
static void proposal_done(struct raft_apply *req, int status, void *unused) {
    (void)unused;
    cs_proposal *p = req->data;
    cs_group *g = p->group;
    unlink_proposal(g, p);
    assert(g->inflight_entries > 0 && g->inflight_bytes >= p->len);
    g->inflight_entries--;
    g->inflight_bytes -= p->len;
    p->index = req->index;
    if (status == 0) {
        assert(p->has_result);
        p->status = CONSENSUS_OK;
    } else {
        assert(!p->has_result);
        p->status = CONSENSUS_OUTCOME_UNKNOWN;
    }
    cs_enqueue(g->node, &p->done);
}

static void refuse(consensus *c, cs_proposal *p, consensus_status st) {
    p->status = st;
    p->index = 0;
    cs_enqueue(c, &p->done);
}

void consensus_propose(consensus *c, unsigned group, const void *data, size_t len,
                       consensus_propose_cb cb, void *arg) {
    assert(c != NULL && group < c->cfg.groups && data != NULL && len > 0 && cb != NULL);
    assert(!c->in_fsm);
    cs_group *g = &c->groups[group];
    const consensus_params *prm = &c->cfg.params;
    cs_proposal *p = rn_xcalloc(1, sizeof *p);
    p->done.fire = proposal_fire;
    p->group = g;
    p->len = len;
    p->cb = cb;
    p->arg = arg;
    if (c->stopping || g->stage != CS_RAFT_READY) {
        refuse(c, p, CONSENSUS_NOT_PROPOSED);
        return;
    }
    if (!consensus_is_leader(c, group)) {
        refuse(c, p, CONSENSUS_NOT_LEADER);
        return;
    }
    if (g->inflight_entries >= prm->max_inflight_entries ||
        (g->inflight_bytes > 0 && g->inflight_bytes + len > prm->max_inflight_bytes)) {
        refuse(c, p, CONSENSUS_BUSY);
        return;
    }
    size_t pad = frame_padding(len);
    struct raft_buffer buf = {.base = raft_malloc(len + pad), .len = len + pad};
    if (buf.base == NULL) {
        refuse(c, p, CONSENSUS_NOT_PROPOSED);
        return;
    }
    memcpy(buf.base, data, len);
    memset((uint8_t *)buf.base + len, 0, pad - 1);
    ((uint8_t *)buf.base)[len + pad - 1] = (uint8_t)pad;
    /* Linked first: the outcome may only come later, but the list must
     * already hold the proposal if apply ever ran inside raft_apply. */
    if (g->proposals_tail)
        g->proposals_tail->next = p;
    else
        g->proposals = p;
    g->proposals_tail = p;
    g->inflight_entries++;
    g->inflight_bytes += len;
    p->req.data = p;
    int rv = raft_apply(&g->raft, &p->req, &buf, 1, proposal_done);
    if (rv != 0) {
        /* Nothing appended (raft_apply discards the entry before it
         * returns an error), and the buffer is still ours. */
        raft_free(buf.base);
        unlink_proposal(g, p);
        g->inflight_entries--;
        g->inflight_bytes -= len;
        refuse(c, p, rv == RAFT_NOTLEADER ? CONSENSUS_NOT_LEADER : CONSENSUS_NOT_PROPOSED);
    }
}

/* --- the state machine adapter --------------------------------------------- */

const struct raft_entry *cs_log_entry(const struct raft *r, uint64_t index) {
    const struct raft_log *l = &r->log;
    size_t n = l->back >= l->front ? l->back - l->front : l->size - l->front + l->back;
    if (index <= l->offset || index - l->offset > n)
        return NULL;
    return &l->entries[(l->front + (index - l->offset - 1)) % l->size];
}

/* The entries at and behind `index` that fit in `budget` bytes, at most
 * `most`: what a snapshot at index may keep. */
static unsigned trailing_within(const struct raft *r, uint64_t index, uint64_t budget,
                                unsigned most) {
    uint64_t used = 0;
    unsigned kept = 0;
    const struct raft_entry *e;
    while (kept < most && (e = cs_log_entry(r, index - kept)) && used + e->buf.len <= budget) {
        used += e->buf.len;
        kept++;
    }
    return kept;
}

/* After entry `index` (len bytes) applied: when a snapshot is due after
 * this apply, by entries or by bytes (snapshot_bytes), has libraft take it
 * now and keep behind it only what fits in a quarter of snapshot_bytes.
 * libraft decides after the apply, by its threshold: a threshold of 1
 * makes it decide yes; fsm_snapshot puts the configured one back. */
static void bound_log_memory(cs_group *g, uint64_t index, size_t len) {
    const consensus_params *p = &g->node->cfg.params;
    g->since_snapshot_bytes += len;
    int by_bytes = p->snapshot_bytes && g->since_snapshot_bytes >= p->snapshot_bytes;
    int by_count = index - g->raft.log.snapshot.last_index >= p->snapshot_threshold;
    if (!p->snapshot_bytes || (!by_bytes && !by_count))
        return;
    raft_set_snapshot_trailing(
        &g->raft, trailing_within(&g->raft, index, p->snapshot_bytes / 4, p->snapshot_trailing));
    if (by_bytes)
        raft_set_snapshot_threshold(&g->raft, 1);
}

static int fsm_apply(struct raft_fsm *fsm, const struct raft_buffer *buf, void **result) {
    cs_group *g = fsm->data;
    consensus *c = g->node;
    uint64_t index = g->raft.last_applied + 1;
    assert(index > g->applied_seen);
    const uint8_t *bytes = buf->base;
    size_t pad = buf->len >= 8 && buf->len % 8 == 0 ? bytes[buf->len - 1] : 0;
    if (pad < 1 || pad > 8) {
        /* Not an entry consensus_propose framed: applying stops here. */
        rn_log(RN_LOG_ERROR, "cluster_bad_entry", "group %u: entry %llu is not framed", g->index,
               (unsigned long long)index);
        return RAFT_MALFORMED;
    }
    c->in_fsm = true;
    void *res = c->cfg.fsm.apply(c->cfg.fsm.ctx, g->index, index, bytes, buf->len - pad);
    c->in_fsm = false;
    g->applied_seen = index;
    bound_log_memory(g, index, buf->len);
    cs_proposal *p = g->proposals;
    assert(p == NULL || p->req.index >= index);
    if (p != NULL && p->req.index == index) {
        p->result = res;
        p->has_result = true;
    } else if (res != NULL && c->cfg.fsm.free_result) {
        c->cfg.fsm.free_result(c->cfg.fsm.ctx, g->index, res);
    }
    *result = NULL;
    return 0;
}

void cs_snapshot_header(unsigned group, uint64_t index, const void *manifest, size_t len,
                        rn_buf *out) {
    assert(out->len == 0);
    rn_buf_append_u32(out, SNAP_MAGIC);
    rn_buf_append_u32(out, SNAP_VERSION);
    rn_buf_append_u32(out, group);
    rn_buf_append_u32(out, rn_crc32c(0, manifest, len));
    rn_buf_append_u64(out, index);
    rn_buf_append_u64(out, len);
    assert(out->len == SNAP_HEADER_BYTES);
}

static int fsm_snapshot(struct raft_fsm *fsm, struct raft_buffer *bufs[], unsigned *n_bufs) {
    cs_group *g = fsm->data;
    consensus *c = g->node;
    uint64_t index = g->raft.last_applied;
    void *manifest = NULL;
    size_t len = 0;
    c->in_fsm = true;
    int rv = c->cfg.fsm.snapshot(c->cfg.fsm.ctx, g->index, index, &manifest, &len);
    c->in_fsm = false;
    if (rv != 0)
        return RAFT_BUSY; /* libraft retries after the next applies */
    assert(manifest != NULL || len == 0);
    rn_buf header = {0};
    cs_snapshot_header(g->index, index, manifest, len, &header);
    struct raft_buffer *b = rn_xcalloc(2, sizeof *b);
    b[0].base = rn_buf_steal(&header, &b[0].len);
    *n_bufs = 1;
    if (len > 0) {
        b[1].base = manifest;
        b[1].len = len;
        *n_bufs = 2;
    } else {
        free(manifest);
    }
    *bufs = b;
    g->since_snapshot_bytes = 0;
    raft_set_snapshot_threshold(&g->raft, c->cfg.params.snapshot_threshold);
    g->snapshots++;
    g->last_snapshot_bytes = SNAP_HEADER_BYTES + len;
    return 0;
}

/* libraft runs an FSM's snapshot_async through io->async_work, which
 * Debian's raft_uv (io version 1) lacks: the adapter provides it, a
 * uv_queue_work on the group's loop. */
typedef struct {
    uv_work_t work;
    struct raft_io_async_work *req;
    int status;
} cs_async;

static void async_run(uv_work_t *w) {
    cs_async *a = w->data;
    a->status = a->req->work(a->req);
}

static void async_done(uv_work_t *w, int status) {
    cs_async *a = w->data;
    struct raft_io_async_work *req = a->req;
    int rv = status != 0 ? RAFT_CANCELED : a->status;
    free(a);
    req->cb(req, rv);
}

static int io_async_work(struct raft_io *io, struct raft_io_async_work *req,
                         raft_io_async_work_cb cb) {
    struct raft *r = io->data; /* raft_init points it at the instance */
    cs_group *g = r->data;
    cs_async *a = rn_xcalloc(1, sizeof *a);
    a->work.data = a;
    a->req = req;
    req->cb = cb;
    int rv = uv_queue_work(g->node->cfg.loop, &a->work, async_run, async_done);
    if (rv != 0) {
        free(a);
        return RAFT_IOERR;
    }
    return 0;
}

/* On a worker thread, between fsm_snapshot and the snapshot's write. */
static int fsm_snapshot_async(struct raft_fsm *fsm, struct raft_buffer *bufs[], unsigned *n_bufs) {
    (void)bufs, (void)n_bufs;
    cs_group *g = fsm->data;
    consensus *c = g->node;
    return c->cfg.fsm.snapshot_durable(c->cfg.fsm.ctx, g->index) != 0 ? RAFT_IOERR : 0;
}

/* Releases what fsm_snapshot allocated, once libraft stored (or failed to
 * store) the snapshot. */
static int fsm_snapshot_finalize(struct raft_fsm *fsm, struct raft_buffer *bufs[],
                                 unsigned *n_bufs) {
    (void)fsm;
    for (unsigned i = 0; i < *n_bufs; i++)
        free((*bufs)[i].base);
    free(*bufs);
    *bufs = NULL;
    *n_bufs = 0;
    return 0;
}

static int fsm_restore(struct raft_fsm *fsm, struct raft_buffer *buf) {
    cs_group *g = fsm->data;
    consensus *c = g->node;
    assert(g->proposals == NULL);
    if (buf->len < SNAP_HEADER_BYTES)
        return RAFT_CORRUPT;
    rn_reader r;
    rn_reader_init(&r, buf->base, SNAP_HEADER_BYTES);
    uint32_t magic = rn_read_u32(&r);
    uint32_t version = rn_read_u32(&r);
    uint32_t group = rn_read_u32(&r);
    uint32_t crc = rn_read_u32(&r);
    uint64_t index = rn_read_u64(&r);
    uint64_t len = rn_read_u64(&r);
    const uint8_t *manifest = (const uint8_t *)buf->base + SNAP_HEADER_BYTES;
    if (r.failed || magic != SNAP_MAGIC || version != SNAP_VERSION || group != g->index ||
        len != buf->len - SNAP_HEADER_BYTES || rn_crc32c(0, manifest, len) != crc)
        return RAFT_CORRUPT;
    c->in_fsm = true;
    int rv = c->cfg.fsm.restore(c->cfg.fsm.ctx, g->index, index, manifest, len);
    c->in_fsm = false;
    if (rv != 0)
        return RAFT_CORRUPT;
    g->restores++;
    g->applied_seen = index;
    g->since_snapshot_bytes = 0;
    raft_free(buf->base); /* restore owns the buffer once it succeeds */
    return 0;
}

void cs_fsm_setup(cs_group *g) {
    memset(&g->fsm, 0, sizeof g->fsm);
    /* 2: snapshot_finalize (the adapter owns snapshot buffers); 3: and
     * snapshot_async, when the state machine has durable work to do */
    g->fsm.version = g->node->cfg.fsm.snapshot_durable ? 3 : 2;
    g->fsm.data = g;
    g->fsm.apply = fsm_apply;
    g->fsm.snapshot = fsm_snapshot;
    g->fsm.restore = fsm_restore;
    g->fsm.snapshot_finalize = fsm_snapshot_finalize;
    g->fsm.snapshot_async = g->node->cfg.fsm.snapshot_durable ? fsm_snapshot_async : NULL;
    if (g->fsm.snapshot_async && g->io.version < 2) {
        g->io.version = 2;
        g->io.async_work = io_async_work;
    }
}
