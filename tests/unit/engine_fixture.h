/*
 * engine_fixture.h - what the stream engine's unit tests share
 * (test_engine_streams.c, test_engine_producers.c, test_engine_pipeline.c,
 * test_engine_restarts.c; they test src/engine/engine.{h,c} through its
 * public API: rn_engine_open / submit / find / read / close): the fixture,
 * restarts, requests and their outcomes, and assertions on stream state.
 *
 * How: every test gets a fresh temporary directory (mkdtemp) holding the
 * engine's data directory, and its own libuv loop. Mutations are rn_op
 * requests; helpers submit one and run the loop until the engine is idle,
 * then hand back a copy of the outcome fields (the op's own buffers are
 * released right away). Tests that need several mutations in flight submit
 * them back to back before running the loop.
 *
 * Restarts: a clean restart closes the engine (which writes a checkpoint)
 * and opens it again. A crash is simulated by copying the data directory
 * while the engine is open and idle (every write's callback has returned)
 * and opening a second engine on the copy: the copy holds exactly what a
 * process killed at that moment would leave, minus page-cache loss, which
 * some tests model by deleting or cutting the copy's stream files so that
 * the log (and checkpoint) must rebuild them. State after a restart is
 * compared field by field with what was written, and behaviour that depends
 * on persisted state (producer duplicates and gaps, Stream-Seq, closure) is
 * exercised again.
 */
#ifndef RN_TEST_ENGINE_FIXTURE_H
#define RN_TEST_ENGINE_FIXTURE_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "engine/engine.h"
#include "tiers/tiers.h"

/* ---- the fixture ---- */

typedef struct {
    char root[64]; /* temporary directory */
    char dir[128]; /* data directory of `e` */
    uv_loop_t loop;
    rn_tiers *tiers; /* of `e`, opened and closed with it */
    rn_engine *e;
    uint64_t segment_bytes;
    uint64_t checkpoint_bytes;
    uint64_t producer_ttl_ms;       /* 0: the default */
    uint64_t producer_cap;          /* 0: the default */
    uint64_t incarnation_key;       /* 0: the tokens of builds before the key */
    rn_recovery_stats stats;        /* of the last open */
    int creates, changes, removals; /* observer calls */
} fx;

/* A fresh fixture in *state: a temporary root, its data directory, a loop,
 * and f->e open on it (1 MiB log segments, no background checkpoints). */
int setup(void **state);
/* Closes f->e if open (it must be idle) and removes the temporary root. */
int teardown(void **state);

/* A test run with the fixture, for a cmocka test list. */
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)

/* Opens f->tiers on data directory dir. */
void open_tiers(fx *f, const char *dir);
/* Opens f->tiers and an engine on dir with f's settings, the recovery
 * statistics in f->stats and f's counters observing its streams. */
rn_engine *open_at(fx *f, const char *dir);
/* Runs the loop until nothing is left to do. */
void run(fx *f);
/* Runs the loop, asserts that e is idle, and closes e and f->tiers. */
void close_engine(fx *f, rn_engine *e);

/* ---- restarts ---- */

/* Reopens f->e on the same directory after a clean close. */
void restart_clean(fx *f);

/* How a simulated crash damages the copied data directory before it is
 * opened (NULL: not at all). */
typedef void (*damage_fn)(const char *copy);

/* Loses every stream file: the log (and checkpoint) must rebuild them. */
void drop_stream_files(const char *copy);

/* Simulates a crash of f->e at this moment: copies its data directory to
 * root/<name> (the engine must be idle), applies `damage` to the copy, and
 * switches f->e to a new engine opened on the copy. The old engine is closed
 * afterwards, which cannot affect the copy. */
void restart_crash(fx *f, const char *name, damage_fn damage);

/* ---- requests ---- */

/* What done() reported, copied out of the op. */
typedef struct {
    int done;
    int order; /* position among the completions of the test */
    rn_result result;
    uint64_t stream_id; /* 0 when done() got no stream */
    uint64_t next_offset;
    int closed;
    uint64_t current_epoch, expected_seq, ack_epoch, ack_seq;
    int receipt, receipt_closed, closes_epoch, closed_by_history;
    uint64_t receipt_start, receipt_end, closed_epoch, closed_seq, retry_after_s;
} outcome;

typedef struct {
    rn_op op;
    outcome out;
} req;

/* The done() callback req_init installs: fills op->arg's (a req's) outcome. */
void req_done(rn_op *op);
/* A request of `kind` on `path` (which must outlive it): no body, TTL and
 * expiry unset, done() = req_done. */
void req_init(req *r, rn_op_kind kind, const char *path);
/* Sets the content type (NULL: none) and body; both must outlive r. */
void req_body(req *r, const char *ct, const void *body, size_t len);
/* req_body with a string body (NULL: none). */
void req_text(req *r, const char *ct, const char *body);
void req_producer(req *r, const char *id, uint64_t epoch, uint64_t seq);
void req_seq(req *r, const char *seq);

/* Submits, runs the loop until idle, and returns the outcome. */
outcome run_req(fx *f, req *r);

#define OCTET "application/octet-stream"
#define JSON "application/json"

/* One request each, run to completion (run_req). ttl_s and expires_at_ms
 * -1: unset; ct NULL: none; body NULL: none. */
outcome create_full(fx *f, const char *path, const char *ct, const char *body, int64_t ttl_s,
                    int64_t expires_at_ms, int close);
outcome create(fx *f, const char *path, const char *ct, const char *body);
outcome append_ct(fx *f, const char *path, const char *ct, const char *body, int close);
/* An octet-stream append. */
outcome append(fx *f, const char *path, const char *body);
outcome append_seq(fx *f, const char *path, const char *ct, const char *body, const char *seq);
outcome append_prod(fx *f, const char *path, const char *ct, const char *body, const char *pid,
                    uint64_t epoch, uint64_t seq, int close);
/* An append without data that closes the stream. */
outcome close_only(fx *f, const char *path);
outcome delete_stream(fx *f, const char *path);
/* A history rewrite of path keeping its bytes below keep (ext §2.4). */
outcome rewrite_to(fx *f, const char *path, uint64_t keep);

/* ---- stream state ---- */

/* The stream at path in f->e, or NULL. */
rn_stream *find(fx *f, const char *path);
/* Asserts that the stream's bytes from `offset` on are exactly `want`. */
void expect_bytes_from(fx *f, const char *path, uint64_t offset, const void *want, size_t len);
/* Asserts that the stream's bytes are exactly the string `want`. */
void expect_bytes(fx *f, const char *path, const char *want);
/* The stream's producer `id` (fails if it has none). */
rn_producer *producer(rn_stream *s, const char *id);
void expect_producer(rn_stream *s, const char *id, uint64_t epoch, uint64_t last_seq);
/* Asserts the stream's last Stream-Seq (NULL: none). */
void expect_last_seq(rn_stream *s, const char *seq);

#endif
