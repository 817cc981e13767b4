/*
 * arriving.c — large appends written while their body arrives (engine.h:
 * rn_engine_arriving_*). Such an append is validated and queued behind its
 * stream's earlier mutations like any other, with its body still to come.
 * Once its files are pinned (engine_write_ahead), the bytes fed so far and
 * those still to come are written to the stream's file a piece at a time on
 * a worker, one piece in flight, each piece ending on a block boundary
 * (at most PIECE_BYTES) so that the checksums the pieces compute are those
 * of the whole range. Once the body is complete and written, ahead.c seals
 * it (checksum and index entries, the sync) and logs the append stored
 * ahead: durability is that of any large append written once.
 *
 * Until the append runs, fed bytes wait here, and the caller is asked to
 * pause once a piece's worth waits; a piece on a worker pauses it too. So
 * an arrival holds about two pieces, whatever its body's size. A body that
 * ends incomplete is refused unlogged (RN_ERR_UNAVAILABLE) once no piece is
 * on a worker: bytes written past the stream's tail are overwritten by the
 * next append there, or cut by recovery, as a refused large append's are.
 */
#include "engine/engine_int.h"
#include "tiers/blocksums.h"
#include "util/fault.h"

#include <stdlib.h>
#include <string.h>

#define PIECE_BYTES (1u << 20)

typedef struct engine_arrival engine_arrival;

typedef enum {
    ARRIVAL_WAITING, /* validated or queued: nothing is written yet */
    ARRIVAL_WRITING, /* its stream reserved: pieces go to the file */
    ARRIVAL_SEALING, /* every byte written: the seal and the log follow */
} arrival_state;

struct engine_arrival {
    rn_engine *engine;
    rn_op *op;
    arrival_state state;
    rn_buf filling;     /* bytes fed and not yet in a piece */
    rn_buf piece;       /* the piece on the worker */
    uint64_t piece_off; /* its offset in the stream's file */
    int piece_busy;     /* a piece is on the worker */
    int piece_status;   /* its outcome: 0 or -errno */
    int failed;         /* the first piece failure (-errno), 0 */
    uint64_t written;   /* body bytes given to pieces */
    int ended;          /* 0: arriving; 1: complete; -1: incomplete */
    int paused;         /* the caller was asked to pause */
    uv_work_t work;
};

void engine_arrival_begin(rn_op *op) {
    assert(op->in.kind == RN_OP_APPEND && op->in.arriving && !op->in.body && op->in.body_len > 0 &&
           op->in.arriving_resume && !op->in.has_producer_digest && op->in.content_type);
    /* not JSON: a JSON stream then refuses it as another content type */
    assert(!rn_content_type_is_json(op->in.content_type, op->in.content_type_len));
    engine_arrival *a = rn_xcalloc(1, sizeof *a);
    a->engine = priv(op)->engine;
    a->op = op;
    priv(op)->arrival = a;
}

void engine_arrival_free(rn_op *op) {
    engine_arrival *a = priv(op)->arrival;
    if (!a)
        return;
    assert(!a->piece_busy);
    rn_buf_free(&a->filling);
    rn_buf_free(&a->piece);
    free(a);
    priv(op)->arrival = NULL;
}

int engine_arrival_cut(rn_op *op) {
    engine_arrival *a = priv(op)->arrival;
    return a && a->ended < 0;
}

/* The length of the next piece: up to the block boundary at most
 * PIECE_BYTES past the bytes written, within the body. */
static uint64_t next_piece_len(const engine_arrival *a) {
    const rn_cmd *c = &priv(a->op)->cmd;
    uint64_t at = c->offset + a->written;
    uint64_t boundary = (at + PIECE_BYTES) / RN_BLOCKSUM_BLOCK * RN_BLOCKSUM_BLOCK;
    uint64_t left = c->data_len - a->written;
    return boundary - at < left ? boundary - at : left;
}

static void write_piece(uv_work_t *req) {
    engine_arrival *a = req->data;
    op_private *p = priv(a->op);
    uint64_t first_block = p->cmd.offset / RN_BLOCKSUM_BLOCK;
    uint8_t *crcs = p->sums.data + (a->piece_off / RN_BLOCKSUM_BLOCK - first_block) * 4;
    a->piece_status =
        rn_streamfiles_write_piece(&p->pin, a->piece.data, a->piece.len, a->piece_off, crcs);
    rn_fault_point("arriving-after-piece");
}

static void piece_written(uv_work_t *req, int status);

/* Moves the first len bytes waiting into a piece and starts its write. */
static void start_piece(engine_arrival *a, uint64_t len) {
    assert(!a->piece_busy && len > 0 && len <= a->filling.len);
    rn_buf t = a->piece;
    a->piece = a->filling;
    a->filling = t;
    a->filling.len = 0;
    rn_buf_append(&a->filling, a->piece.data + len, a->piece.len - len);
    a->piece.len = len;
    a->piece_off = priv(a->op)->cmd.offset + a->written;
    a->written += len;
    a->piece_busy = 1;
    a->work.data = a;
    uv_queue_work(a->engine->loop, &a->work, write_piece, piece_written);
}

/* Takes the arrival one step on: the next piece, the seal once the body is
 * complete and written, or the refusal of a failed or incomplete one.
 * Returns 0 when op was answered (it and a may be gone). */
static int advance(engine_arrival *a) {
    if (a->state != ARRIVAL_WRITING || a->piece_busy)
        return 1;
    rn_engine *e = a->engine;
    rn_op *op = a->op;
    op_private *p = priv(op);
    if (a->failed || a->ended < 0) {
        e->ops_preparing--;
        rn_streamfiles_unpin(&p->pin);
        rn_stream *s = rn_state_stream(&e->state, p->stream_id);
        assert(s && s->busy); /* nothing removes a busy stream */
        if (a->failed)
            engine_refuse_unlogged(e, op, s, a->failed);
        else
            engine_release_unlogged(e, op, s, RN_ERR_UNAVAILABLE);
        return 0;
    }
    uint64_t len = next_piece_len(a);
    if (len && (a->filling.len >= len)) {
        start_piece(a, len);
    } else if (!len && a->ended > 0) {
        a->state = ARRIVAL_SEALING;
        p->work.data = op;
        uv_queue_work(e->loop, &p->work, engine_ahead_seal_work, engine_ahead_sealed);
    }
    return 1;
}

/* Asks the caller for more when the pause it was asked for is over: room
 * for a piece waits. The caller may feed (and end) the body inside the
 * call, so it comes last. */
static void resume_when_room(engine_arrival *a) {
    if (!a->paused || a->filling.len >= PIECE_BYTES)
        return;
    a->paused = 0;
    a->op->in.arriving_resume(a->op);
}

static void piece_written(uv_work_t *req, int status) {
    engine_arrival *a = req->data;
    a->piece_busy = 0;
    if (!a->failed)
        a->failed = status < 0 ? status : a->piece_status;
    if (advance(a))
        resume_when_room(a);
}

void engine_arrival_start(rn_engine *e, rn_op *op) {
    engine_arrival *a = priv(op)->arrival;
    assert(a && a->state == ARRIVAL_WAITING && a->engine == e);
    a->state = ARRIVAL_WRITING;
    if (advance(a))
        resume_when_room(a);
}

int rn_engine_arriving_possible(const rn_engine *e, uint64_t body_len) {
    return e->cfg.large_append_bytes && body_len >= e->cfg.large_append_bytes &&
           body_len <= RN_CMD_MAX_STORED_AHEAD && e->log->ops->stored_ahead;
}

int rn_engine_arriving_data(rn_engine *e, rn_op *op, const uint8_t *bytes, size_t len) {
    engine_arrival *a = priv(op)->arrival;
    assert(a && a->engine == e && !a->ended && !a->failed && len > 0);
    assert(a->written + a->filling.len + len <= op->in.body_len);
    rn_buf_append(&a->filling, bytes, len);
    advance(a); /* cannot answer: the body is neither failed nor ended */
    if (a->filling.len >= PIECE_BYTES)
        a->paused = 1;
    return a->paused;
}

void rn_engine_arriving_end(rn_engine *e, rn_op *op, int complete) {
    engine_arrival *a = priv(op)->arrival;
    assert(a && a->engine == e && !a->ended);
    assert(!complete || a->written + a->filling.len == op->in.body_len);
    a->ended = complete ? 1 : -1;
    advance(a);
}
