/*
 * test_engine.c - unit tests for the stream engine (src/engine/engine.{h,c})
 * through its public API: rn_engine_open / submit / find / read / close.
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
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <uv.h>

#include "engine/engine.h"
#include "tiers/tiers.h"
#include "util/blake3.h"
#include "util/clock.h"

/* ------------------------------------------------------------------------ */
/* Fixture                                                                   */

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
    rn_recovery_stats stats;        /* of the last open */
    int creates, changes, removals; /* observer calls */
} fx;

static int completions; /* done() calls so far, for ordering checks */

static void observe(rn_stream *s, rn_stream_event ev, void *arg) {
    fx *f = arg;
    (void)s;
    if (ev == RN_STREAM_CREATED)
        f->creates++;
    else if (ev == RN_STREAM_CHANGED)
        f->changes++;
    else if (ev == RN_STREAM_REMOVED)
        f->removals++;
}

/* Opens f->tiers on data directory dir. */
static void open_tiers(fx *f, const char *dir) {
    rn_tiers_config tc = {.data_dir = dir, .max_open_files = 3}; /* small: the cache evicts */
    char err[256] = "";
    f->tiers = rn_tiers_open(&f->loop, &tc, err, sizeof err);
    if (!f->tiers)
        fail_msg("rn_tiers_open(%s): %s", dir, err);
}

static rn_engine *open_at(fx *f, const char *dir) {
    open_tiers(f, dir);
    rn_engine_config cfg = {
        .data_dir = dir,
        .tiers = f->tiers,
        .wal_segment_bytes = f->segment_bytes,
        .checkpoint_bytes = f->checkpoint_bytes,
        .producer_ttl_ms = f->producer_ttl_ms,
        .producer_cap = f->producer_cap,
    };
    char err[256] = "";
    rn_engine *e = rn_engine_open(&f->loop, &cfg, &f->stats, err, sizeof err);
    if (!e)
        fail_msg("rn_engine_open(%s): %s", dir, err);
    rn_engine_observe(e, observe, f);
    return e;
}

static void run(fx *f) {
    uv_run(&f->loop, UV_RUN_DEFAULT);
}

static void close_engine(fx *f, rn_engine *e) {
    run(f);
    assert_false(rn_engine_busy(e));
    rn_engine_close(e);
    rn_tiers_close(f->tiers);
    f->tiers = NULL;
}

static int setup(void **state) {
    fx *f = calloc(1, sizeof *f);
    assert_non_null(f);
    strcpy(f->root, "/tmp/runnel-engine-XXXXXX");
    assert_non_null(mkdtemp(f->root));
    snprintf(f->dir, sizeof f->dir, "%s/data", f->root);
    assert_int_equal(mkdir(f->dir, 0755), 0);
    assert_int_equal(uv_loop_init(&f->loop), 0);
    f->segment_bytes = 1u << 20;
    f->checkpoint_bytes = 1ull << 40; /* no background checkpoints unless asked */
    f->e = open_at(f, f->dir);
    completions = 0;
    *state = f;
    return 0;
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static void rm_tree(const char *path) {
    nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static int teardown(void **state) {
    fx *f = *state;
    if (f->e)
        close_engine(f, f->e);
    assert_int_equal(uv_loop_close(&f->loop), 0);
    rm_tree(f->root);
    free(f);
    return 0;
}

/* Reopens f->e on the same directory after a clean close. */
static void restart_clean(fx *f) {
    close_engine(f, f->e);
    f->e = open_at(f, f->dir);
}

/* Copies a directory tree (regular files and directories). */
static const char *copy_src, *copy_dst;

static int copy_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)ftw;
    char out[PATH_MAX];
    snprintf(out, sizeof out, "%s%s", copy_dst, path + strlen(copy_src));
    if (flag == FTW_D)
        return mkdir(out, st->st_mode & 07777) < 0 && errno != EEXIST;
    if (flag != FTW_F)
        return 0;
    int in = open(path, O_RDONLY);
    int o = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (in < 0 || o < 0)
        return 1;
    char buf[65536];
    ssize_t n;
    while ((n = read(in, buf, sizeof buf)) > 0)
        if (write(o, buf, (size_t)n) != n)
            return 1;
    close(in);
    close(o);
    return n < 0;
}

/* How a simulated crash damages the copied data directory before it is
 * opened (NULL: not at all). */
typedef void (*damage_fn)(const char *copy);

/* Loses every stream file: the log (and checkpoint) must rebuild them. */
static void drop_stream_files(const char *copy) {
    char streams[PATH_MAX];
    snprintf(streams, sizeof streams, "%s/streams", copy);
    rm_tree(streams);
}

/* Simulates a crash of f->e at this moment: copies its data directory to
 * root/<name> (the engine must be idle), applies `damage` to the copy, and
 * switches f->e to a new engine opened on the copy. The old engine is closed
 * afterwards, which cannot affect the copy. */
static void restart_crash(fx *f, const char *name, damage_fn damage) {
    run(f);
    assert_false(rn_engine_busy(f->e));
    char copy[128];
    snprintf(copy, sizeof copy, "%s/%s", f->root, name);
    copy_src = f->dir;
    copy_dst = copy;
    assert_int_equal(nftw(f->dir, copy_entry, 16, FTW_PHYS), 0);
    close_engine(f, f->e);
    f->e = NULL;
    if (damage)
        damage(copy);
    snprintf(f->dir, sizeof f->dir, "%s", copy);
    f->e = open_at(f, f->dir);
}

/* ------------------------------------------------------------------------ */
/* Requests                                                                  */

typedef struct {
    int done;
    int order;
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

static void req_done(rn_op *op) {
    req *r = op->arg;
    r->out.done++;
    r->out.order = completions++;
    r->out.result = op->out.result;
    r->out.stream_id = op->out.stream ? op->out.stream->id : 0;
    r->out.next_offset = op->out.next_offset;
    r->out.closed = op->out.stream_closed;
    r->out.current_epoch = op->out.current_epoch;
    r->out.expected_seq = op->out.expected_seq;
    r->out.ack_epoch = op->out.ack_epoch;
    r->out.ack_seq = op->out.ack_seq;
    r->out.receipt = op->out.receipt;
    r->out.receipt_start = op->out.receipt_start;
    r->out.receipt_end = op->out.receipt_end;
    r->out.receipt_closed = op->out.receipt_closed;
    r->out.closes_epoch = op->out.closes_epoch;
    r->out.closed_by_history = op->out.closed_by_history;
    r->out.closed_epoch = op->out.closed_epoch;
    r->out.closed_seq = op->out.closed_seq;
    r->out.retry_after_s = op->out.retry_after_s;
}

static void req_init(req *r, rn_op_kind kind, const char *path) {
    memset(r, 0, sizeof *r);
    r->op.in.kind = kind;
    r->op.in.path = path;
    r->op.in.path_len = strlen(path);
    r->op.in.ttl_s = -1;
    r->op.in.expires_at_ms = -1;
    r->op.done = req_done;
    r->op.arg = r;
}

static void req_body(req *r, const char *ct, const void *body, size_t len) {
    r->op.in.content_type = ct;
    r->op.in.content_type_len = ct ? strlen(ct) : 0;
    r->op.in.body = body;
    r->op.in.body_len = len;
}

static void req_text(req *r, const char *ct, const char *body) {
    req_body(r, ct, body, body ? strlen(body) : 0);
}

static void req_producer(req *r, const char *id, uint64_t epoch, uint64_t seq) {
    r->op.in.has_producer = 1;
    r->op.in.producer_id = id;
    r->op.in.producer_id_len = strlen(id);
    r->op.in.producer_epoch = epoch;
    r->op.in.producer_seq = seq;
}

static void req_seq(req *r, const char *seq) {
    r->op.in.has_seq = 1;
    r->op.in.seq = seq;
    r->op.in.seq_len = strlen(seq);
}

/* Submits, runs the loop until idle, and returns the outcome. */
static outcome run_req(fx *f, req *r) {
    rn_engine_submit(f->e, &r->op);
    run(f);
    assert_int_equal(r->out.done, 1);
    return r->out;
}

#define OCTET "application/octet-stream"
#define JSON "application/json"

static outcome create_full(fx *f, const char *path, const char *ct, const char *body, int64_t ttl_s,
                           int64_t expires_at_ms, int close) {
    req r;
    req_init(&r, RN_OP_CREATE, path);
    req_text(&r, ct, body);
    r.op.in.ttl_s = ttl_s;
    r.op.in.expires_at_ms = expires_at_ms;
    r.op.in.close = close;
    return run_req(f, &r);
}

static outcome create(fx *f, const char *path, const char *ct, const char *body) {
    return create_full(f, path, ct, body, -1, -1, 0);
}

static outcome append_ct(fx *f, const char *path, const char *ct, const char *body, int close) {
    req r;
    req_init(&r, RN_OP_APPEND, path);
    req_text(&r, ct, body);
    r.op.in.close = close;
    return run_req(f, &r);
}

static outcome append(fx *f, const char *path, const char *body) {
    return append_ct(f, path, OCTET, body, 0);
}

static outcome append_seq(fx *f, const char *path, const char *ct, const char *body,
                          const char *seq) {
    req r;
    req_init(&r, RN_OP_APPEND, path);
    req_text(&r, ct, body);
    req_seq(&r, seq);
    return run_req(f, &r);
}

static outcome append_prod(fx *f, const char *path, const char *ct, const char *body,
                           const char *pid, uint64_t epoch, uint64_t seq, int close) {
    req r;
    req_init(&r, RN_OP_APPEND, path);
    req_text(&r, ct, body);
    req_producer(&r, pid, epoch, seq);
    r.op.in.close = close;
    return run_req(f, &r);
}

static outcome close_only(fx *f, const char *path) {
    req r;
    req_init(&r, RN_OP_APPEND, path);
    r.op.in.close = 1;
    return run_req(f, &r);
}

static outcome delete_stream(fx *f, const char *path) {
    req r;
    req_init(&r, RN_OP_DELETE, path);
    return run_req(f, &r);
}

static rn_stream *find(fx *f, const char *path) {
    return rn_engine_find(f->e, path, strlen(path));
}

/* Asserts that the stream's bytes from `offset` on are exactly `want`. */
static void expect_bytes_from(fx *f, const char *path, uint64_t offset, const void *want,
                              size_t len) {
    rn_stream *s = find(f, path);
    if (!s)
        fail_msg("stream %s not found", path);
    assert_int_equal(s->tail, offset + len);
    rn_buf b = {0};
    long n = rn_engine_read(f->e, s, offset, 1u << 30, 1, &b);
    if (n != (long)len || (len && memcmp(b.data, want, len) != 0))
        fail_msg("stream %s: read %ld bytes \"%.*s\", want %zu \"%.*s\"", path, n,
                 (int)(n > 0 ? n : 0), b.data ? (const char *)b.data : "", len, (int)len,
                 (const char *)want);
    rn_buf_free(&b);
}

static void expect_bytes(fx *f, const char *path, const char *want) {
    expect_bytes_from(f, path, 0, want, strlen(want));
}

static rn_producer *producer(rn_stream *s, const char *id) {
    rn_producer *p = rn_map_get(&s->producers, id, strlen(id));
    if (!p)
        fail_msg("producer %s missing", id);
    return p;
}

static void expect_producer(rn_stream *s, const char *id, uint64_t epoch, uint64_t last_seq) {
    rn_producer *p = producer(s, id);
    assert_int_equal(p->epoch, epoch);
    assert_int_equal(p->last_seq, last_seq);
}

static void expect_last_seq(rn_stream *s, const char *seq) {
    if (!seq) {
        assert_null(s->last_seq);
        return;
    }
    assert_non_null(s->last_seq);
    assert_int_equal(s->last_seq_len, strlen(seq));
    assert_memory_equal(s->last_seq, seq, strlen(seq));
}

/* ------------------------------------------------------------------------ */
/* Create                                                                    */

static void test_create_answers_created_then_exists_for_same_config(void **state) {
    fx *f = *state;
    outcome o = create(f, "/s", "text/plain; charset=utf-8", NULL);
    assert_int_equal(o.result, RN_OK_CREATED);
    assert_int_equal(o.next_offset, 0);
    assert_int_equal(o.closed, 0);
    assert_true(o.stream_id != 0);
    rn_stream *s = find(f, "/s");
    assert_non_null(s);
    assert_int_equal(s->id, o.stream_id);
    assert_string_equal(s->content_type, "text/plain; charset=utf-8");
    assert_int_equal(s->json, 0);

    outcome again = create(f, "/s", "text/plain; charset=utf-8", NULL);
    assert_int_equal(again.result, RN_OK_EXISTS);
    assert_int_equal(again.stream_id, o.stream_id);
    /* The media type compares case-insensitively, parameters ignored. */
    assert_int_equal(create(f, "/s", "TEXT/Plain", NULL).result, RN_OK_EXISTS);
    /* A matching repeat with a body does not append it. */
    assert_int_equal(create(f, "/s", "text/plain", "ignored").result, RN_OK_EXISTS);
    assert_int_equal(find(f, "/s")->tail, 0);
}

static void test_create_with_different_config_is_a_mismatch(void **state) {
    fx *f = *state;
    int64_t exp = rn_now_ms() + 3600000;
    assert_int_equal(create_full(f, "/s", "text/plain", NULL, 600, exp, 0).result, RN_OK_CREATED);
    assert_int_equal(create_full(f, "/s", "text/plain", NULL, 600, exp, 0).result, RN_OK_EXISTS);
    assert_int_equal(create_full(f, "/s", "text/html", NULL, 600, exp, 0).result,
                     RN_ERR_CONFIG_MISMATCH);
    assert_int_equal(create_full(f, "/s", NULL, NULL, 600, exp, 0).result, RN_ERR_CONFIG_MISMATCH);
    assert_int_equal(create_full(f, "/s", "text/plain", NULL, 601, exp, 0).result,
                     RN_ERR_CONFIG_MISMATCH);
    assert_int_equal(create_full(f, "/s", "text/plain", NULL, -1, exp, 0).result,
                     RN_ERR_CONFIG_MISMATCH);
    assert_int_equal(create_full(f, "/s", "text/plain", NULL, 600, exp + 1, 0).result,
                     RN_ERR_CONFIG_MISMATCH);
    assert_int_equal(create_full(f, "/s", "text/plain", NULL, 600, -1, 0).result,
                     RN_ERR_CONFIG_MISMATCH);
    assert_int_equal(create_full(f, "/s", "text/plain", NULL, 600, exp, 1).result,
                     RN_ERR_CONFIG_MISMATCH);
    /* The mismatches changed nothing. */
    rn_stream *s = find(f, "/s");
    assert_string_equal(s->content_type, "text/plain");
    assert_int_equal(s->ttl_s, 600);
    assert_int_equal(s->expires_at_ms, exp);
    assert_int_equal(s->closed, 0);
}

static void test_create_without_content_type_defaults_to_octet_stream(void **state) {
    fx *f = *state;
    assert_int_equal(create(f, "/d", NULL, NULL).result, RN_OK_CREATED);
    assert_string_equal(find(f, "/d")->content_type, OCTET);
    assert_int_equal(create(f, "/d", OCTET, NULL).result, RN_OK_EXISTS);
}

static void test_create_with_body_stores_it_and_closed_create_refuses_appends(void **state) {
    fx *f = *state;
    outcome o = create_full(f, "/c", OCTET, "initial", -1, -1, 1);
    assert_int_equal(o.result, RN_OK_CREATED);
    assert_int_equal(o.next_offset, 7);
    assert_int_equal(o.closed, 1);
    expect_bytes(f, "/c", "initial");
    assert_int_equal(append(f, "/c", "more").result, RN_ERR_CLOSED);
    expect_bytes(f, "/c", "initial");
}

static void test_paths_are_distinct_streams(void **state) {
    fx *f = *state;
    assert_int_equal(create(f, "/a", NULL, "A").result, RN_OK_CREATED);
    assert_int_equal(create(f, "/a/", NULL, "B").result, RN_OK_CREATED);
    assert_int_equal(create(f, "/A", NULL, "C").result, RN_OK_CREATED);
    expect_bytes(f, "/a", "A");
    expect_bytes(f, "/a/", "B");
    expect_bytes(f, "/A", "C");
    assert_null(find(f, "/b"));
    assert_null(find(f, "/"));
}

/* ------------------------------------------------------------------------ */
/* Append and read                                                           */

static void test_append_then_read_back_bytes(void **state) {
    fx *f = *state;
    assert_int_equal(create(f, "/s", NULL, NULL).result, RN_OK_CREATED);
    outcome o = append(f, "/s", "hello");
    assert_int_equal(o.result, RN_OK_APPENDED);
    assert_int_equal(o.next_offset, 5);
    assert_int_equal(o.closed, 0);
    o = append(f, "/s", ", world");
    assert_int_equal(o.next_offset, 12);
    /* Binary data including NUL bytes, through req_body. */
    static const uint8_t bin[] = {0, 1, 2, 0xff, 0, '\n'};
    req r;
    req_init(&r, RN_OP_APPEND, "/s");
    req_body(&r, OCTET, bin, sizeof bin);
    o = run_req(f, &r);
    assert_int_equal(o.result, RN_OK_APPENDED);
    assert_int_equal(o.next_offset, 18);

    uint8_t want[18];
    memcpy(want, "hello, world", 12);
    memcpy(want + 12, bin, sizeof bin);
    expect_bytes_from(f, "/s", 0, want, 18);
    expect_bytes_from(f, "/s", 7, want + 7, 11);

    rn_stream *s = find(f, "/s");
    rn_buf b = {0};
    assert_int_equal(rn_engine_read(f->e, s, 2, 4, 1, &b), 4);
    assert_memory_equal(b.data, "llo,", 4);
    /* Reads append to the buffer. */
    assert_int_equal(rn_engine_read(f->e, s, 18, 10, 1, &b), 0);
    assert_int_equal(rn_engine_read(f->e, s, 17, 10, 1, &b), 1);
    assert_int_equal(b.len, 5);
    assert_int_equal(b.data[4], '\n');
    rn_buf_free(&b);
    assert_true(rn_engine_offset_valid(f->e, s, 0));
    assert_true(rn_engine_offset_valid(f->e, s, 3));
    assert_true(rn_engine_offset_valid(f->e, s, 18));
    assert_false(rn_engine_offset_valid(f->e, s, 19));
}

static void test_append_refusals_change_nothing(void **state) {
    fx *f = *state;
    outcome o = append(f, "/missing", "x");
    assert_int_equal(o.result, RN_ERR_NOT_FOUND);
    assert_int_equal(o.stream_id, 0);
    assert_int_equal(create(f, "/s", "text/plain", "abc").result, RN_OK_CREATED);
    assert_int_equal(append_ct(f, "/s", OCTET, "x", 0).result, RN_ERR_CONTENT_TYPE);
    assert_int_equal(append_ct(f, "/s", NULL, "x", 0).result, RN_ERR_MISSING_CONTENT_TYPE);
    assert_int_equal(append_ct(f, "/s", "text/plain", "", 0).result, RN_ERR_EMPTY_BODY);
    /* Content type parameters and case do not matter. */
    o = append_ct(f, "/s", "Text/Plain; charset=utf-8", "d", 0);
    assert_int_equal(o.result, RN_OK_APPENDED);
    assert_int_equal(o.next_offset, 4);
    expect_bytes(f, "/s", "abcd");
    assert_int_equal(find(f, "/s")->closed, 0);
}

static void test_refusals_are_answered_before_submit_returns(void **state) {
    fx *f = *state;
    req r;
    req_init(&r, RN_OP_APPEND, "/nope");
    req_text(&r, OCTET, "x");
    rn_engine_submit(f->e, &r.op);
    assert_int_equal(r.out.done, 1);
    assert_int_equal(r.out.result, RN_ERR_NOT_FOUND);
    assert_false(rn_engine_busy(f->e));
}

/* A fork created with data (its first data makes its files) and a delete
 * of the source submitted right after it: the create was checked against
 * the source, so it must be logged first; the source then survives as a
 * soft-deleted stream under its fork. */
static void test_a_fork_create_with_data_is_logged_before_a_later_source_delete(void **state) {
    fx *f = *state;
    assert_int_equal(create(f, "/src", OCTET, "abc").result, RN_OK_CREATED);
    req fork, del;
    req_init(&fork, RN_OP_CREATE, "/fork");
    req_text(&fork, OCTET, "def");
    fork.op.in.fork_source = "/src";
    fork.op.in.fork_source_len = 4;
    req_init(&del, RN_OP_DELETE, "/src");
    rn_engine_submit(f->e, &fork.op);
    rn_engine_submit(f->e, &del.op);
    run(f);
    assert_int_equal(fork.out.result, RN_OK_CREATED);
    assert_int_equal(del.out.result, RN_OK_DELETED);
    assert_true(fork.out.order < del.out.order);
    assert_true(rn_engine_is_gone(f->e, "/src", 4));
    expect_bytes(f, "/fork", "abcdef");
    restart_clean(f);
    assert_true(rn_engine_is_gone(f->e, "/src", 4));
    expect_bytes(f, "/fork", "abcdef");
}

static void test_observers_see_applied_changes_only(void **state) {
    fx *f = *state;
    create(f, "/h", NULL, NULL);
    assert_int_equal(f->creates, 1);
    assert_int_equal(f->changes, 0);
    append(f, "/h", "x");
    assert_int_equal(f->changes, 1);
    close_only(f, "/h");
    assert_int_equal(f->changes, 2);
    /* Refusals, duplicates and failed syncs change nothing observable. */
    append(f, "/h", "refused");
    close_only(f, "/h");
    create(f, "/h", NULL, NULL);
    rn_engine_inject_sync_failures(f->e, 1);
    create(f, "/failed", NULL, "x");
    assert_int_equal(f->creates, 1);
    assert_int_equal(f->changes, 2);
    assert_int_equal(f->removals, 0);
    delete_stream(f, "/h");
    assert_int_equal(f->removals, 1);
}

/* ------------------------------------------------------------------------ */
/* JSON streams                                                              */

static void test_json_stream_stores_minified_messages_with_lf(void **state) {
    fx *f = *state;
    outcome o = create(f, "/j", JSON, "[]");
    assert_int_equal(o.result, RN_OK_CREATED);
    assert_int_equal(o.next_offset, 0);
    assert_int_equal(find(f, "/j")->json, 1);
    o = append_ct(f, "/j", JSON, " { \"a\" : 1 , \"b\" : [ 1, 2 ] } ", 0);
    assert_int_equal(o.result, RN_OK_APPENDED);
    expect_bytes(f, "/j", "{\"a\":1,\"b\":[1,2]}\n");
    /* A top-level array is one message per element. */
    o = append_ct(f, "/j", JSON, "[1, \"two\", {\"3\": null}, [ ]]", 0);
    assert_int_equal(o.result, RN_OK_APPENDED);
    const char *all = "{\"a\":1,\"b\":[1,2]}\n1\n\"two\"\n{\"3\":null}\n[]\n";
    expect_bytes(f, "/j", all);
    assert_int_equal(o.next_offset, strlen(all));
    /* Strings keep their inner spaces. */
    append_ct(f, "/j", "application/json; charset=utf-8", "\"a b\"", 0);
    expect_bytes_from(f, "/j", strlen(all), "\"a b\"\n", 6);
}

static void test_json_append_refuses_invalid_and_empty_array(void **state) {
    fx *f = *state;
    create(f, "/j", JSON, "[1,2]");
    expect_bytes(f, "/j", "1\n2\n");
    assert_int_equal(append_ct(f, "/j", JSON, "[]", 0).result, RN_ERR_JSON_EMPTY_ARRAY);
    assert_int_equal(append_ct(f, "/j", JSON, " [ ] ", 0).result, RN_ERR_JSON_EMPTY_ARRAY);
    assert_int_equal(append_ct(f, "/j", JSON, "{bad", 0).result, RN_ERR_JSON_INVALID);
    assert_int_equal(append_ct(f, "/j", JSON, "1 2", 0).result, RN_ERR_JSON_INVALID);
    assert_int_equal(append_ct(f, "/j", JSON, "[1,]", 0).result, RN_ERR_JSON_INVALID);
    char deep[400];
    memset(deep, '[', 200);
    memset(deep + 200, ']', 200);
    req r;
    req_init(&r, RN_OP_APPEND, "/j");
    req_body(&r, JSON, deep, sizeof deep);
    assert_int_equal(run_req(f, &r).result, RN_ERR_JSON_TOO_DEEP);
    expect_bytes(f, "/j", "1\n2\n");
    /* Close-only needs no body, so no JSON check. */
    assert_int_equal(close_only(f, "/j").result, RN_OK_APPENDED);
    expect_bytes(f, "/j", "1\n2\n");
}

static void test_json_create_with_invalid_body_creates_nothing(void **state) {
    fx *f = *state;
    assert_int_equal(create(f, "/j", JSON, "{\"a\":").result, RN_ERR_JSON_INVALID);
    assert_null(find(f, "/j"));
    assert_int_equal(create(f, "/j", JSON, "{\"a\":1}").result, RN_OK_CREATED);
    expect_bytes(f, "/j", "{\"a\":1}\n");
}

static void test_json_reads_end_on_message_boundaries(void **state) {
    fx *f = *state;
    create(f, "/j", JSON, "[\"aaaaaaaaaa\", \"b\", \"cccccccccccccccccccc\"]");
    const char *all = "\"aaaaaaaaaa\"\n\"b\"\n\"cccccccccccccccccccc\"\n";
    expect_bytes(f, "/j", all);
    rn_stream *s = find(f, "/j");
    rn_buf b = {0};
    /* max smaller than the first message: whole messages still come (at
     * least the first one; the engine may return more). */
    long n = rn_engine_read(f->e, s, 0, 3, 1, &b);
    assert_true(n >= 13);
    assert_int_equal(b.data[n - 1], '\n');
    assert_memory_equal(b.data, all, (size_t)n);
    b.len = 0;
    /* max covering one and a half messages: cut after the whole one. */
    assert_int_equal(rn_engine_read(f->e, s, 0, 15, 1, &b), 13);
    assert_memory_equal(b.data, all, 13);
    b.len = 0;
    /* max covering two and a half messages: cut after the second. */
    assert_int_equal(rn_engine_read(f->e, s, 0, 20, 1, &b), 17);
    b.len = 0;
    assert_int_equal(rn_engine_read(f->e, s, 13, 100, 1, &b), (long)strlen(all) - 13);
    b.len = 0;
    /* Without whole_messages, max is exact even inside a message. */
    assert_int_equal(rn_engine_read(f->e, s, 0, 3, 0, &b), 3);
    assert_memory_equal(b.data, all, 3);
    b.len = 0;
    assert_int_equal(rn_engine_read(f->e, s, 14, 2, 0, &b), 2);
    assert_memory_equal(b.data, all + 14, 2);
    rn_buf_free(&b);
    assert_true(rn_engine_offset_valid(f->e, s, 0));
    assert_true(rn_engine_offset_valid(f->e, s, 13));
    assert_true(rn_engine_offset_valid(f->e, s, 17));
    assert_false(rn_engine_offset_valid(f->e, s, 5));
    assert_false(rn_engine_offset_valid(f->e, s, 14));
    assert_true(rn_engine_offset_valid(f->e, s, strlen(all)));
}

/* A read's length is found without reading it: a JSON range's last message
 * end is looked for backwards, 64 KiB at a time, and a first message longer
 * than max is followed forwards to its end. */
static void test_read_length_finds_message_ends_far_from_max(void **state) {
    fx *f = *state;
    size_t big = 200000; /* a message far longer than a scan step */
    char *body = malloc(big + 32);
    int n = snprintf(body, 32, "[\"a\", \"");
    memset(body + n, 'x', big);
    strcpy(body + n + big, "\", \"b\"]");
    create(f, "/long", JSON, body);
    free(body);
    rn_stream *s = find(f, "/long");
    uint64_t big_line = big + 3; /* the quoted message and its LF */
    assert_int_equal(s->tail, 4 + big_line + 4);
    /* the last message end within max lies more than two steps back */
    assert_int_equal(rn_engine_read_length(f->e, s, 0, 150000, 1), 4);
    /* a first message longer than max comes whole */
    assert_int_equal(rn_engine_read_length(f->e, s, 4, 1000, 1), (long)big_line);
    assert_int_equal(rn_engine_read_length(f->e, s, 4, (size_t)big_line + 3, 1), (long)big_line);
    assert_int_equal(rn_engine_read_length(f->e, s, 0, 1u << 30, 1), (long)s->tail);
    /* without whole_messages max is exact; past the tail nothing */
    assert_int_equal(rn_engine_read_length(f->e, s, 0, 150000, 0), 150000);
    assert_int_equal(rn_engine_read_length(f->e, s, s->tail, 10, 1), 0);
    rn_buf b = {0};
    assert_int_equal(rn_engine_read(f->e, s, 4, 1000, 1, &b), (long)big_line);
    assert_int_equal(b.data[big_line - 1], '\n');
    rn_buf_free(&b);
}

/* ------------------------------------------------------------------------ */
/* Idempotent producers                                                      */

static void test_producer_sequence_rules(void **state) {
    fx *f = *state;
    create(f, "/p", NULL, NULL);
    outcome o = append_prod(f, "/p", OCTET, "a", "w1", 0, 0, 0);
    assert_int_equal(o.result, RN_OK_APPENDED);
    assert_int_equal(o.ack_epoch, 0);
    assert_int_equal(o.ack_seq, 0);
    o = append_prod(f, "/p", OCTET, "b", "w1", 0, 1, 0);
    assert_int_equal(o.result, RN_OK_APPENDED);
    assert_int_equal(o.ack_seq, 1);
    o = append_prod(f, "/p", OCTET, "c", "w1", 0, 2, 0);
    assert_int_equal(o.result, RN_OK_APPENDED);
    expect_bytes(f, "/p", "abc");

    /* Repeats of any earlier seq are duplicates acknowledging the highest. */
    o = append_prod(f, "/p", OCTET, "c", "w1", 0, 2, 0);
    assert_int_equal(o.result, RN_OK_DUPLICATE);
    assert_int_equal(o.ack_epoch, 0);
    assert_int_equal(o.ack_seq, 2);
    assert_int_equal(o.next_offset, 3);
    o = append_prod(f, "/p", OCTET, "a", "w1", 0, 0, 0);
    assert_int_equal(o.result, RN_OK_DUPLICATE);
    assert_int_equal(o.ack_seq, 2);
    expect_bytes(f, "/p", "abc");

    /* A gap names the expected seq. */
    o = append_prod(f, "/p", OCTET, "e", "w1", 0, 4, 0);
    assert_int_equal(o.result, RN_ERR_SEQ_GAP);
    assert_int_equal(o.expected_seq, 3);
    /* An unknown producer must start at 0. */
    o = append_prod(f, "/p", OCTET, "x", "w2", 0, 5, 0);
    assert_int_equal(o.result, RN_ERR_SEQ_GAP);
    assert_int_equal(o.expected_seq, 0);
    /* A new epoch must start at seq 0. */
    assert_int_equal(append_prod(f, "/p", OCTET, "x", "w1", 1, 1, 0).result, RN_ERR_EPOCH_SEQ);
    expect_bytes(f, "/p", "abc");
    o = append_prod(f, "/p", OCTET, "D", "w1", 1, 0, 0);
    assert_int_equal(o.result, RN_OK_APPENDED);
    assert_int_equal(o.ack_epoch, 1);
    assert_int_equal(o.ack_seq, 0);
    /* The old epoch is now closed by the claim, up to its seq 2. */
    o = append_prod(f, "/p", OCTET, "x", "w1", 0, 3, 0);
    assert_int_equal(o.result, RN_ERR_EPOCH_CLOSED);
    assert_int_equal(o.current_epoch, 1);
    assert_int_equal(o.closed_by_history, 0);
    assert_int_equal(o.closed_epoch, 0);
    assert_int_equal(o.closed_seq, 2);
    /* Epochs may jump; the jump closes epoch 1, and epoch 0 is now stale. */
    o = append_prod(f, "/p", OCTET, "E", "w1", 7, 0, 0);
    assert_int_equal(o.result, RN_OK_APPENDED);
    assert_int_equal(o.closes_epoch, 1);
    assert_int_equal(o.closed_epoch, 1);
    assert_int_equal(o.closed_seq, 0);
    o = append_prod(f, "/p", OCTET, "x", "w1", 0, 3, 0);
    assert_int_equal(o.result, RN_ERR_STALE_EPOCH);
    assert_int_equal(o.current_epoch, 7);
    /* Producers are independent of each other. */
    assert_int_equal(append_prod(f, "/p", OCTET, "F", "w2", 0, 0, 0).result, RN_OK_APPENDED);
    assert_int_equal(append_prod(f, "/p", OCTET, "G", "w2", 0, 1, 0).result, RN_OK_APPENDED);
    expect_bytes(f, "/p", "abcDEFG");
    rn_stream *s = find(f, "/p");
    expect_producer(s, "w1", 7, 0);
    expect_producer(s, "w2", 0, 1);
    assert_int_equal(s->producers.count, 2);
    /* Plain appends do not disturb producer state. */
    append(f, "/p", "h");
    expect_producer(find(f, "/p"), "w2", 0, 1);
}

static void test_producer_state_is_per_stream(void **state) {
    fx *f = *state;
    create(f, "/a", NULL, NULL);
    create(f, "/b", NULL, NULL);
    assert_int_equal(append_prod(f, "/a", OCTET, "1", "w", 0, 0, 0).result, RN_OK_APPENDED);
    assert_int_equal(append_prod(f, "/a", OCTET, "2", "w", 0, 1, 0).result, RN_OK_APPENDED);
    outcome o = append_prod(f, "/b", OCTET, "1", "w", 0, 1, 0);
    assert_int_equal(o.result, RN_ERR_SEQ_GAP);
    assert_int_equal(o.expected_seq, 0);
    assert_int_equal(append_prod(f, "/b", OCTET, "1", "w", 0, 0, 0).result, RN_OK_APPENDED);
}

/* ------------------------------------------------------------------------ */
/* Stream-Seq                                                                */

static void test_stream_seq_must_increase_lexicographically(void **state) {
    fx *f = *state;
    create(f, "/q", NULL, NULL);
    assert_int_equal(append(f, "/q", "0").result, RN_OK_APPENDED); /* no seq: fine */
    assert_int_equal(append_seq(f, "/q", OCTET, "1", "b").result, RN_OK_APPENDED);
    expect_last_seq(find(f, "/q"), "b");
    assert_int_equal(append_seq(f, "/q", OCTET, "x", "b").result, RN_ERR_SEQ_REGRESSION);
    assert_int_equal(append_seq(f, "/q", OCTET, "x", "a").result, RN_ERR_SEQ_REGRESSION);
    assert_int_equal(append_seq(f, "/q", OCTET, "x", "az").result, RN_ERR_SEQ_REGRESSION);
    assert_int_equal(append_seq(f, "/q", OCTET, "2", "ba").result, RN_OK_APPENDED);
    assert_int_equal(append_seq(f, "/q", OCTET, "x", "b").result, RN_ERR_SEQ_REGRESSION);
    assert_int_equal(append_seq(f, "/q", OCTET, "3", "c").result, RN_OK_APPENDED);
    /* Byte order, not numeric order: "10" sorts before "9". */
    assert_int_equal(append_seq(f, "/q", OCTET, "4", "c9").result, RN_OK_APPENDED);
    assert_int_equal(append_seq(f, "/q", OCTET, "x", "c10").result, RN_ERR_SEQ_REGRESSION);
    /* Appends without a seq neither check nor reset it. */
    assert_int_equal(append(f, "/q", "5").result, RN_OK_APPENDED);
    assert_int_equal(append_seq(f, "/q", OCTET, "x", "c9").result, RN_ERR_SEQ_REGRESSION);
    expect_bytes(f, "/q", "012345");
    expect_last_seq(find(f, "/q"), "c9");
}

/* ------------------------------------------------------------------------ */
/* Close                                                                     */

static void test_close_refuses_later_appends_and_repeat_close_is_duplicate(void **state) {
    fx *f = *state;
    create(f, "/c", NULL, "ab");
    outcome o = append_ct(f, "/c", OCTET, "cd", 1);
    assert_int_equal(o.result, RN_OK_APPENDED);
    assert_int_equal(o.closed, 1);
    assert_int_equal(o.next_offset, 4);
    assert_int_equal(find(f, "/c")->closed, 1);
    o = append(f, "/c", "ef");
    assert_int_equal(o.result, RN_ERR_CLOSED);
    assert_int_equal(o.closed, 1);
    assert_int_equal(o.next_offset, 4);
    o = close_only(f, "/c");
    assert_int_equal(o.result, RN_OK_DUPLICATE);
    assert_int_equal(o.next_offset, 4);
    /* Data with close on a closed stream is still refused. */
    assert_int_equal(append_ct(f, "/c", OCTET, "gh", 1).result, RN_ERR_CLOSED);
    /* A producer that did not close it is refused too. */
    assert_int_equal(append_prod(f, "/c", OCTET, "x", "w", 0, 0, 0).result, RN_ERR_CLOSED);
    expect_bytes(f, "/c", "abcd");
}

static void test_close_only_closes_without_data(void **state) {
    fx *f = *state;
    create(f, "/c", NULL, "ab");
    outcome o = close_only(f, "/c");
    assert_int_equal(o.result, RN_OK_APPENDED);
    assert_int_equal(o.closed, 1);
    assert_int_equal(o.next_offset, 2);
    assert_int_equal(append(f, "/c", "x").result, RN_ERR_CLOSED);
    expect_bytes(f, "/c", "ab");
}

static void test_closing_producer_repeat_is_duplicate(void **state) {
    fx *f = *state;
    create(f, "/c", NULL, NULL);
    assert_int_equal(append_prod(f, "/c", OCTET, "a", "w", 2, 0, 0).result, RN_OK_APPENDED);
    outcome o = append_prod(f, "/c", OCTET, "b", "w", 2, 1, 1);
    assert_int_equal(o.result, RN_OK_APPENDED);
    assert_int_equal(o.closed, 1);
    rn_stream *s = find(f, "/c");
    expect_producer(s, "w", 2, 1);
    assert_int_equal(producer(s, "w")->newest_closed, 1);
    /* The same tuple again (a retry of the closing write) is a duplicate
     * carrying the write's receipt. */
    o = append_prod(f, "/c", OCTET, "b", "w", 2, 1, 1);
    assert_int_equal(o.result, RN_OK_DUPLICATE);
    assert_int_equal(o.ack_epoch, 2);
    assert_int_equal(o.ack_seq, 1);
    assert_int_equal(o.closed, 1);
    assert_int_equal(o.receipt, 1);
    assert_int_equal(o.receipt_start, 1);
    assert_int_equal(o.receipt_end, 2);
    assert_int_equal(o.receipt_closed, 1);
    /* Any write that would apply is refused for the closure; the producer
     * rules come first (ext §5.3), so an unknown producer's seq 1 is a gap. */
    assert_int_equal(append_prod(f, "/c", OCTET, "c", "w", 2, 2, 0).result, RN_ERR_CLOSED);
    assert_int_equal(append_prod(f, "/c", OCTET, "c", "w", 3, 0, 0).result, RN_ERR_CLOSED);
    assert_int_equal(append_prod(f, "/c", OCTET, "c", "v", 2, 0, 0).result, RN_ERR_CLOSED);
    assert_int_equal(append_prod(f, "/c", OCTET, "c", "v", 2, 1, 0).result, RN_ERR_SEQ_GAP);
    expect_bytes(f, "/c", "ab");
}

static void test_producer_close_only_records_closing_tuple(void **state) {
    fx *f = *state;
    create(f, "/c", NULL, "x");
    outcome o = append_prod(f, "/c", OCTET, NULL, "w", 0, 0, 1);
    assert_int_equal(o.result, RN_OK_APPENDED);
    assert_int_equal(o.closed, 1);
    assert_int_equal(append_prod(f, "/c", OCTET, NULL, "w", 0, 0, 1).result, RN_OK_DUPLICATE);
    expect_bytes(f, "/c", "x");
}

/* ------------------------------------------------------------------------ */
/* Producer identity, receipts, closures, history, floor (ext §5)           */

/* A producer write with Producer-Digest `digest_of` (its BLAKE3 need not
 * match the body for repeats and conflicts, which never read the body), or
 * without one when digest_of is NULL, and an optional Stream-Incarnation. */
static outcome write_id(fx *f, const char *path, const char *body, const char *pid, uint64_t epoch,
                        uint64_t seq, const char *digest_of, uint64_t incarnation) {
    req r;
    req_init(&r, RN_OP_APPEND, path);
    req_text(&r, OCTET, body);
    req_producer(&r, pid, epoch, seq);
    if (digest_of) {
        r.op.in.has_producer_digest = 1;
        rn_blake3_hash(digest_of, strlen(digest_of), r.op.in.producer_digest);
    }
    if (incarnation) {
        r.op.in.has_incarnation = 1;
        r.op.in.incarnation = incarnation;
    }
    return run_req(f, &r);
}

static void expect_receipt(outcome o, rn_result result, uint64_t start, uint64_t end,
                           uint64_t ack_seq) {
    assert_int_equal(o.result, result);
    assert_int_equal(o.receipt, 1);
    assert_int_equal(o.receipt_start, start);
    assert_int_equal(o.receipt_end, end);
    assert_int_equal(o.ack_seq, ack_seq);
}

static void test_producer_identity_and_receipts(void **state) {
    fx *f = *state;
    create(f, "/i", NULL, NULL);
    expect_receipt(write_id(f, "/i", "aa", "w", 0, 0, "aa", 0), RN_OK_APPENDED, 0, 2, 0);
    expect_receipt(write_id(f, "/i", "bbb", "w", 0, 1, "bbb", 0), RN_OK_APPENDED, 2, 5, 1);
    /* The newest write repeats with its receipt; another identity conflicts. */
    expect_receipt(write_id(f, "/i", "bbb", "w", 0, 1, "bbb", 0), RN_OK_DUPLICATE, 2, 5, 1);
    outcome o = write_id(f, "/i", "bbb", "w", 0, 1, "zzz", 0);
    assert_int_equal(o.result, RN_ERR_KEY_CONFLICT);
    assert_int_equal(o.current_epoch, 0);
    assert_int_equal(write_id(f, "/i", "bbb", "w", 0, 1, NULL, 0).result, RN_ERR_KEY_CONFLICT);
    /* The claim's identity is held; its receipt is not. */
    assert_int_equal(write_id(f, "/i", "aa", "w", 0, 0, "zz", 0).result, RN_ERR_KEY_CONFLICT);
    o = write_id(f, "/i", "aa", "w", 0, 0, "aa", 0);
    assert_int_equal(o.result, RN_OK_DUPLICATE);
    assert_int_equal(o.receipt, 0);
    assert_int_equal(o.ack_seq, 1);
    /* A wrong digest refuses a write that would apply, last, applying nothing. */
    assert_int_equal(write_id(f, "/i", "cc", "w", 0, 2, "cd", 0).result, RN_ERR_DIGEST_MISMATCH);
    expect_bytes(f, "/i", "aabbb");
    expect_receipt(write_id(f, "/i", "cc", "w", 0, 2, "cc", 0), RN_OK_APPENDED, 5, 7, 2);
    /* A claim closes the epoch before; its repeats report it too. */
    o = write_id(f, "/i", "dd", "w", 3, 0, "dd", 0);
    expect_receipt(o, RN_OK_APPENDED, 7, 9, 0);
    assert_int_equal(o.closes_epoch, 1);
    assert_int_equal(o.closed_epoch, 0);
    assert_int_equal(o.closed_seq, 2);
    o = write_id(f, "/i", "dd", "w", 3, 0, "dd", 0);
    assert_int_equal(o.result, RN_OK_DUPLICATE);
    assert_int_equal(o.closes_epoch, 1);
    o = write_id(f, "/i", "x", "w", 0, 1, NULL, 0);
    assert_int_equal(o.result, RN_ERR_EPOCH_CLOSED);
    assert_int_equal(o.closed_by_history, 0);
    assert_int_equal(o.closed_seq, 2);
    rn_producer *p = producer(find(f, "/i"), "w");
    assert_int_equal(p->claim.has_digest, 1);
    assert_int_equal(p->above_floor, 1);
}

/* Producer state after a clean restart (checkpoint) and after a crash (log
 * replay) answers as before. */
static void test_producer_state_survives_restarts(void **state) {
    fx *f = *state;
    create(f, "/r", NULL, NULL);
    write_id(f, "/r", "ab", "w", 1, 0, "ab", 0);
    write_id(f, "/r", "cd", "w", 2, 0, "cd", 0);
    write_id(f, "/r", "ef", "w", 2, 1, "ef", 0);
    for (int round = 0; round < 2; round++) {
        if (round == 0)
            restart_clean(f);
        else
            restart_crash(f, "crash", drop_stream_files);
        expect_receipt(write_id(f, "/r", "ef", "w", 2, 1, "ef", 0), RN_OK_DUPLICATE, 4, 6, 1);
        assert_int_equal(write_id(f, "/r", "ef", "w", 2, 1, "xx", 0).result, RN_ERR_KEY_CONFLICT);
        assert_int_equal(write_id(f, "/r", "cd", "w", 2, 0, "xx", 0).result, RN_ERR_KEY_CONFLICT);
        outcome o = write_id(f, "/r", "zz", "w", 1, 1, NULL, 0);
        assert_int_equal(o.result, RN_ERR_EPOCH_CLOSED);
        assert_int_equal(o.closed_epoch, 1);
        assert_int_equal(o.closed_seq, 0);
    }
}

static outcome rewrite_to(fx *f, const char *path, uint64_t keep) {
    req r;
    req_init(&r, RN_OP_REWRITE, path);
    r.op.in.target_offset = keep;
    return run_req(f, &r);
}

/* A later piece of an answer is read only while the stream keeps the id and
 * incarnation the answer began with, and the piece lies within its bytes. */
static void test_read_again_refuses_once_the_bytes_may_have_changed(void **state) {
    fx *f = *state;
    create(f, "/again", NULL, "0123456789");
    rn_stream *s = find(f, "/again");
    uint64_t id = s->id, inc = s->incarnation;
    uint8_t out[8];
    assert_int_equal(rn_engine_read_again(f->e, id, inc, 2, 3, out), 0);
    assert_memory_equal(out, "234", 3);
    assert_int_equal(rn_engine_read_again(f->e, id, inc + 1, 2, 3, out), -ESTALE);
    assert_int_equal(rn_engine_read_again(f->e, id, inc, 8, 3, out), -ESTALE); /* past the tail */
    append(f, "/again", "ab");
    assert_int_equal(rn_engine_read_again(f->e, id, inc, 8, 3, out),
                     0); /* an append changes nothing below */
    assert_memory_equal(out, "89a", 3);
    assert_int_equal(rewrite_to(f, "/again", 5).result, RN_OK_REWRITTEN);
    append(f, "/again", "ZZZZZ");
    assert_int_equal(rn_engine_read_again(f->e, id, inc, 2, 3, out),
                     -ESTALE); /* another incarnation */
    s = find(f, "/again");
    inc = s->incarnation;
    assert_int_equal(rn_engine_read_again(f->e, id, inc, 4, 3, out), 0);
    assert_memory_equal(out, "4ZZ", 3);
    assert_int_equal(delete_stream(f, "/again").result, RN_OK_DELETED);
    assert_int_equal(rn_engine_read_again(f->e, id, inc, 4, 3, out), -ESTALE); /* gone */
    create(f, "/again", NULL, "0123456789");
    assert_int_equal(rn_engine_read_again(f->e, id, inc, 2, 3, out), -ESTALE); /* another stream */
}

static void test_rewrite_closes_producer_epochs(void **state) {
    fx *f = *state;
    create(f, "/h", NULL, NULL);
    for (uint64_t seq = 0; seq < 3; seq++)
        write_id(f, "/h", "abcd", "kept", 0, seq, NULL, 0); /* newest [8, 12) */
    for (uint64_t seq = 0; seq < 2; seq++)
        write_id(f, "/h", "abcd", "cut", 0, seq, NULL, 0); /* newest [16, 20) */
    write_id(f, "/h", "abcd", "lost", 0, 0, NULL, 0);      /* [20, 24) */
    assert_int_equal(rewrite_to(f, "/h", 18).result, RN_OK_REWRITTEN);
    rn_stream *s = find(f, "/h");
    assert_int_equal(producer(s, "kept")->history, RN_EPOCH_REWRITTEN);
    assert_int_equal(producer(s, "kept")->history_seq, 2);
    assert_int_equal(producer(s, "cut")->history_seq, 0);
    assert_int_equal(producer(s, "lost")->history, RN_EPOCH_LOST);
    outcome o = write_id(f, "/h", "x", "kept", 0, 3, NULL, 0);
    assert_int_equal(o.result, RN_ERR_EPOCH_CLOSED);
    assert_int_equal(o.closed_by_history, 1);
    assert_int_equal(o.closed_seq, 2);
    expect_receipt(write_id(f, "/h", "abcd", "kept", 0, 2, NULL, 0), RN_OK_DUPLICATE, 8, 12, 2);
    o = write_id(f, "/h", "abcd", "cut", 0, 1, NULL, 0);
    assert_int_equal(o.result, RN_ERR_EPOCH_CLOSED);
    assert_int_equal(o.closed_seq, 0);
    assert_int_equal(write_id(f, "/h", "abcd", "lost", 0, 0, NULL, 0).result, RN_ERR_STALE_EPOCH);
    /* A claim after the rewrite closes the epoch at its surviving seq. */
    o = write_id(f, "/h", "n", "cut", 1, 0, NULL, 0);
    assert_int_equal(o.result, RN_OK_APPENDED);
    assert_int_equal(o.closes_epoch, 1);
    assert_int_equal(o.closed_seq, 0);
    restart_clean(f);
    assert_int_equal(producer(find(f, "/h"), "kept")->history_seq, 2);
}

/* A producer TTL short enough for a test and long enough that writes meant
 * to be back to back stay within it on a loaded machine (the sanitizer
 * build under parallel tests has stalled for more than 100 ms). */
#define IDLE_TTL_MS 1000
#define PAST_IDLE_TTL_US (1200 * 1000)

static void test_idle_producers_expire_and_raise_the_floor(void **state) {
    fx *f = *state;
    f->producer_ttl_ms = IDLE_TTL_MS;
    restart_clean(f);
    create(f, "/x", NULL, NULL);
    uint64_t inc = find(f, "/x")->incarnation;
    write_id(f, "/x", "a", "old", 5, 0, NULL, 0);
    usleep(PAST_IDLE_TTL_US);
    rn_engine_sweep_expired(f->e);
    run(f);
    rn_stream *s = find(f, "/x");
    assert_int_equal(s->producers.count, 0);
    assert_int_equal(s->has_floor, 1);
    assert_int_equal(s->epoch_floor, 5);
    outcome o = write_id(f, "/x", "b", "new", 5, 0, NULL, inc);
    assert_int_equal(o.result, RN_ERR_PRODUCER_EXPIRED);
    assert_int_equal(o.current_epoch, 5);
    /* Without the incarnation: a new producer, opened below the floor. */
    assert_int_equal(write_id(f, "/x", "b", "new", 2, 0, NULL, 0).result, RN_OK_APPENDED);
    assert_int_equal(producer(find(f, "/x"), "new")->above_floor, 0);
    assert_int_equal(write_id(f, "/x", "c", "new", 2, 1, NULL, inc).result,
                     RN_ERR_PRODUCER_EXPIRED);
    o = write_id(f, "/x", "c", "new", 6, 0, NULL, inc);
    assert_int_equal(o.result, RN_OK_APPENDED);
    assert_int_equal(o.closes_epoch, 0);
    assert_int_equal(producer(find(f, "/x"), "new")->above_floor, 1);
    /* On access: the writer's own idle state goes before its write is judged. */
    usleep(PAST_IDLE_TTL_US);
    o = write_id(f, "/x", "d", "new", 6, 1, NULL, 0);
    assert_int_equal(o.result, RN_ERR_SEQ_GAP);
    assert_int_equal(find(f, "/x")->epoch_floor, 6);
    restart_crash(f, "crash", NULL);
    assert_int_equal(find(f, "/x")->epoch_floor, 6);
    assert_int_equal(write_id(f, "/x", "d", "other", 6, 0, NULL, inc).result,
                     RN_ERR_PRODUCER_EXPIRED);
}

static void test_producer_cap_displaces_only_idle_producers(void **state) {
    fx *f = *state;
    f->producer_ttl_ms = IDLE_TTL_MS;
    f->producer_cap = 2;
    restart_clean(f);
    create(f, "/cap", NULL, NULL);
    write_id(f, "/cap", "a", "A", 3, 0, NULL, 0);
    write_id(f, "/cap", "b", "B", 0, 0, NULL, 0);
    outcome o = write_id(f, "/cap", "c", "C", 0, 0, NULL, 0);
    assert_int_equal(o.result, RN_ERR_PRODUCER_LIMIT);
    assert_int_equal(o.retry_after_s, 1);
    usleep(PAST_IDLE_TTL_US);
    assert_int_equal(write_id(f, "/cap", "c", "C", 0, 0, NULL, 0).result, RN_OK_APPENDED);
    rn_stream *s = find(f, "/cap");
    assert_int_equal(s->producers.count, 2);
    assert_null(rn_map_get(&s->producers, "A", 1));
    assert_int_equal(s->epoch_floor, 3);
    expect_bytes(f, "/cap", "abc");
}

static void test_answer_early_only_for_repeats_and_conflicts(void **state) {
    fx *f = *state;
    create(f, "/e", NULL, NULL);
    uint64_t inc = find(f, "/e")->incarnation;
    write_id(f, "/e", "abc", "w", 0, 0, "abc", 0);
    struct {
        uint64_t seq;
        const char *digest_of;
        uint64_t incarnation;
        int early;
        rn_result result;
    } cases[] = {
        {0, "abc", inc, 1, RN_OK_DUPLICATE},
        {0, "xyz", inc, 1, RN_ERR_KEY_CONFLICT},
        {1, "abc", inc, 0, 0},
        {0, "abc", inc + 1, 0, 0},
        {0, "abc", 0, 0, 0},
        {5, "abc", inc, 0, 0},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        rn_op op = {.in = {.kind = RN_OP_APPEND, .path = "/e", .path_len = 2}};
        op.in.has_producer = 1;
        op.in.producer_id = "w";
        op.in.producer_id_len = 1;
        op.in.producer_seq = cases[k].seq;
        op.in.has_producer_digest = 1;
        rn_blake3_hash(cases[k].digest_of, 3, op.in.producer_digest);
        op.in.has_incarnation = cases[k].incarnation != 0;
        op.in.incarnation = cases[k].incarnation;
        assert_int_equal(rn_engine_answer_early(f->e, &op), cases[k].early);
        if (cases[k].early)
            assert_int_equal(op.out.result, cases[k].result);
    }
    /* While a write of the stream is in the log, nothing is answered early. */
    req r;
    req_init(&r, RN_OP_APPEND, "/e");
    req_text(&r, OCTET, "d");
    rn_engine_submit(f->e, &r.op);
    rn_op op = {.in = {.kind = RN_OP_APPEND,
                       .path = "/e",
                       .path_len = 2,
                       .has_producer = 1,
                       .producer_id = "w",
                       .producer_id_len = 1,
                       .has_incarnation = 1,
                       .incarnation = inc}};
    assert_int_equal(rn_engine_answer_early(f->e, &op), 0);
    run(f);
    expect_bytes(f, "/e", "abcd");
}

/* ------------------------------------------------------------------------ */
/* Delete                                                                    */

static void test_delete_then_recreate_gives_new_id_and_empty_data(void **state) {
    fx *f = *state;
    outcome c1 = create(f, "/d", NULL, "old data");
    append_prod(f, "/d", OCTET, "!", "w", 0, 0, 0);
    append_seq(f, "/d", OCTET, "?", "m");
    outcome d = delete_stream(f, "/d");
    assert_int_equal(d.result, RN_OK_DELETED);
    assert_int_equal(d.stream_id, 0);
    assert_null(find(f, "/d"));
    assert_int_equal(append(f, "/d", "x").result, RN_ERR_NOT_FOUND);
    assert_int_equal(delete_stream(f, "/d").result, RN_ERR_NOT_FOUND);

    outcome c2 = create(f, "/d", "text/plain", NULL);
    assert_int_equal(c2.result, RN_OK_CREATED);
    assert_true(c2.stream_id != c1.stream_id);
    rn_stream *s = find(f, "/d");
    assert_int_equal(s->tail, 0);
    assert_string_equal(s->content_type, "text/plain");
    assert_int_equal(s->producers.count, 0);
    expect_last_seq(s, NULL);
    rn_buf b = {0};
    assert_int_equal(rn_engine_read(f->e, s, 0, 100, 1, &b), 0);
    rn_buf_free(&b);
    /* Producer and Stream-Seq state started over. */
    assert_int_equal(append_prod(f, "/d", "text/plain", "n", "w", 0, 0, 0).result, RN_OK_APPENDED);
    assert_int_equal(append_seq(f, "/d", "text/plain", "m", "a").result, RN_OK_APPENDED);
    expect_bytes(f, "/d", "nm");
}

/* A namespace (a path's part before its first "/") exists from its first
 * create on, also once its streams are gone, across a clean restart (the
 * checkpoint) and a crash (the log's creates). */
static void test_namespaces_outlive_their_streams(void **state) {
    fx *f = *state;
    assert_false(rn_engine_namespace_exists(f->e, "b1", 2));
    assert_int_equal(create(f, "b1/s", NULL, NULL).result, RN_OK_CREATED);
    assert_int_equal(create(f, "/rooted", NULL, NULL).result, RN_OK_CREATED);
    assert_int_equal(create(f, "plain", NULL, NULL).result, RN_OK_CREATED);
    assert_true(rn_engine_namespace_exists(f->e, "b1", 2));
    assert_false(rn_engine_namespace_exists(f->e, "b", 1));
    assert_false(rn_engine_namespace_exists(f->e, "b1/s", 4));
    assert_false(rn_engine_namespace_exists(f->e, "plain", 5));
    assert_false(rn_engine_namespace_exists(f->e, "", 0)); /* "/rooted" has none */
    assert_int_equal(delete_stream(f, "b1/s").result, RN_OK_DELETED);
    assert_true(rn_engine_namespace_exists(f->e, "b1", 2));
    restart_clean(f);
    assert_true(rn_engine_namespace_exists(f->e, "b1", 2));
    assert_int_equal(create(f, "b2/s", NULL, NULL).result, RN_OK_CREATED);
    restart_crash(f, "crash", NULL);
    assert_true(rn_engine_namespace_exists(f->e, "b1", 2));
    assert_true(rn_engine_namespace_exists(f->e, "b2", 2));
    assert_false(rn_engine_namespace_exists(f->e, "b3", 2));
}

static void test_stream_ids_are_never_reused(void **state) {
    fx *f = *state;
    uint64_t seen[12];
    int n = 0;
    for (int round = 0; round < 3; round++) {
        seen[n++] = create(f, "/x", NULL, "1").stream_id;
        seen[n++] = create(f, "/y", NULL, "2").stream_id;
        delete_stream(f, "/x");
        delete_stream(f, "/y");
        if (round == 1)
            restart_clean(f);
        if (round == 2)
            restart_crash(f, "crash", NULL);
    }
    seen[n++] = create(f, "/x", NULL, "3").stream_id;
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++)
            assert_true(seen[i] != seen[j]);
}

/* A request submitted from inside a delete's done() callback. The HTTP
 * layer does exactly this when a client pipelines requests on one
 * connection: answering the DELETE resumes parsing, which submits the next
 * request before done() returns. */
static rn_engine *chain_engine;
static req chained;

static void delete_done_then_submit(rn_op *op) {
    req_done(op);
    rn_engine_submit(chain_engine, &chained.op);
}

static outcome delete_then_from_callback(fx *f, const char *path) {
    chain_engine = f->e;
    req d;
    req_init(&d, RN_OP_DELETE, path);
    d.op.done = delete_done_then_submit;
    outcome o = run_req(f, &d);
    assert_int_equal(o.result, RN_OK_DELETED);
    assert_int_equal(chained.out.done, 1);
    return o;
}

static void test_create_submitted_from_delete_callback_sees_stream_deleted(void **state) {
    fx *f = *state;
    uint64_t old = create(f, "/p", "text/plain", "old").stream_id;
    req_init(&chained, RN_OP_CREATE, "/p");
    req_text(&chained, JSON, "[1]");
    delete_then_from_callback(f, "/p");
    assert_int_equal(chained.out.result, RN_OK_CREATED);
    assert_true(chained.out.stream_id != old);
    rn_stream *s = find(f, "/p");
    assert_non_null(s);
    assert_string_equal(s->content_type, JSON);
    expect_bytes(f, "/p", "1\n");
}

static void test_append_submitted_from_delete_callback_finds_no_stream(void **state) {
    fx *f = *state;
    create(f, "/p", NULL, "old");
    req_init(&chained, RN_OP_APPEND, "/p");
    req_text(&chained, OCTET, "new");
    delete_then_from_callback(f, "/p");
    assert_int_equal(chained.out.result, RN_ERR_NOT_FOUND);
    assert_null(find(f, "/p"));
    assert_false(rn_engine_busy(f->e));
}

/* ------------------------------------------------------------------------ */
/* Expiry                                                                    */

static void test_expired_streams_are_not_found(void **state) {
    fx *f = *state;
    int64_t now = rn_now_ms();
    assert_int_equal(create_full(f, "/ttl0", NULL, "x", 0, -1, 0).result, RN_OK_CREATED);
    assert_int_equal(create_full(f, "/past", NULL, "x", -1, now - 1000, 0).result, RN_OK_CREATED);
    assert_int_equal(create_full(f, "/ttl", NULL, "x", 3600, -1, 0).result, RN_OK_CREATED);
    assert_int_equal(create_full(f, "/future", NULL, "x", -1, now + 3600000, 0).result,
                     RN_OK_CREATED);
    assert_null(find(f, "/ttl0"));
    assert_null(find(f, "/past"));
    assert_non_null(find(f, "/ttl"));
    assert_non_null(find(f, "/future"));
    run(f); /* lets the expiry deletions finish */
    assert_null(find(f, "/ttl0"));
    /* The expired stream is gone: a different config creates afresh rather
     * than being a mismatch, and appends find nothing. */
    assert_int_equal(append(f, "/past", "y").result, RN_ERR_NOT_FOUND);
    assert_int_equal(create(f, "/ttl0", "text/plain", "new").result, RN_OK_CREATED);
    expect_bytes(f, "/ttl0", "new");
}

static void test_mutations_of_expired_stream_see_it_deleted(void **state) {
    fx *f = *state;
    create_full(f, "/e", NULL, "x", -1, rn_now_ms() - 1, 0);
    /* No find first: the append itself discovers the expiry. */
    assert_int_equal(append(f, "/e", "y").result, RN_ERR_NOT_FOUND);
    create_full(f, "/e2", NULL, "x", 0, -1, 0);
    assert_int_equal(create(f, "/e2", NULL, NULL).result, RN_OK_CREATED);
    expect_bytes(f, "/e2", "");
}

static void test_sweep_deletes_expired_streams(void **state) {
    fx *f = *state;
    create_full(f, "/gone", NULL, "x", 0, -1, 0);
    create_full(f, "/kept", NULL, "x", 3600, -1, 0);
    int removals = f->removals;
    rn_engine_sweep_expired(f->e);
    run(f);
    assert_int_equal(f->removals, removals + 1);
    restart_clean(f);
    assert_int_equal(f->stats.streams, 1);
    assert_non_null(find(f, "/kept"));
}

/* ------------------------------------------------------------------------ */
/* Back-to-back mutations                                                    */

static void test_back_to_back_mutations_apply_in_order(void **state) {
    fx *f = *state;
    enum { N = 14 };
    req r[N];
    static const char *chunks[] = {"a", "bb", "ccc", "dddd", "eeeee"};
    req_init(&r[0], RN_OP_CREATE, "/b2b");
    req_text(&r[0], OCTET, "0");
    for (int i = 0; i < 5; i++) {
        req_init(&r[1 + i], RN_OP_APPEND, "/b2b");
        req_text(&r[1 + i], OCTET, chunks[i]);
    }
    /* Producer seqs 0..4: each is checked against the state the previous
     * one left, so all succeed only if they are evaluated in order. */
    static const char digits[][2] = {"0", "1", "2", "3", "4"};
    for (int i = 0; i < 5; i++) {
        req_init(&r[6 + i], RN_OP_APPEND, "/b2b");
        req_text(&r[6 + i], OCTET, digits[i]);
        req_producer(&r[6 + i], "w", 0, (uint64_t)i);
    }
    req_init(&r[11], RN_OP_APPEND, "/b2b"); /* repeat of seq 2 */
    req_text(&r[11], OCTET, "2");
    req_producer(&r[11], "w", 0, 2);
    req_init(&r[12], RN_OP_APPEND, "/b2b"); /* close */
    r[12].op.in.close = 1;
    req_init(&r[13], RN_OP_APPEND, "/b2b"); /* after close */
    req_text(&r[13], OCTET, "late");
    for (int i = 0; i < N; i++)
        rn_engine_submit(f->e, &r[i].op);
    run(f);
    uint64_t tail = 1;
    assert_int_equal(r[0].out.result, RN_OK_CREATED);
    assert_int_equal(r[0].out.next_offset, 1);
    for (int i = 1; i <= 10; i++) {
        assert_int_equal(r[i].out.done, 1);
        assert_int_equal(r[i].out.result, RN_OK_APPENDED);
        tail += r[i].op.in.body_len;
        assert_int_equal(r[i].out.next_offset, tail);
    }
    assert_int_equal(r[11].out.result, RN_OK_DUPLICATE);
    assert_int_equal(r[11].out.ack_seq, 4);
    assert_int_equal(r[12].out.result, RN_OK_APPENDED);
    assert_int_equal(r[12].out.closed, 1);
    assert_int_equal(r[13].out.result, RN_ERR_CLOSED);
    for (int i = 0; i < N; i++) {
        assert_int_equal(r[i].out.order, i);
    }
    expect_bytes(f, "/b2b", "0abbcccddddeeeee01234");
}

static void test_back_to_back_mutations_of_two_streams_interleave_correctly(void **state) {
    fx *f = *state;
    enum { N = 40 };
    req r[N];
    static const char *paths[] = {"/s0", "/s1"};
    static const char letters[][2] = {"a", "b", "c", "d", "e", "f", "g", "h", "i", "j",
                                      "k", "l", "m", "n", "o", "p", "q", "r", "s", "t"};
    req_init(&r[0], RN_OP_CREATE, paths[0]);
    req_init(&r[1], RN_OP_CREATE, paths[1]);
    for (int i = 2; i < N; i++) {
        req_init(&r[i], RN_OP_APPEND, paths[i % 2]);
        req_text(&r[i], OCTET, letters[i / 2]);
    }
    for (int i = 0; i < N; i++)
        rn_engine_submit(f->e, &r[i].op);
    run(f);
    for (int i = 0; i < N; i++) {
        assert_int_equal(r[i].out.done, 1);
        assert_int_equal(r[i].out.result, i < 2 ? RN_OK_CREATED : RN_OK_APPENDED);
        assert_int_equal(r[i].out.next_offset, (uint64_t)(i / 2));
    }
    /* Per stream, completions follow submission order. */
    for (int i = 2; i < N; i++)
        assert_true(r[i].out.order > r[i - 2].out.order);
    expect_bytes(f, "/s0", "bcdefghijklmnopqrst");
    expect_bytes(f, "/s1", "bcdefghijklmnopqrst");
}

static void test_back_to_back_delete_and_recreate(void **state) {
    fx *f = *state;
    uint64_t old_id = create(f, "/r", NULL, "old").stream_id;
    req r[6];
    req_init(&r[0], RN_OP_APPEND, "/r");
    req_text(&r[0], OCTET, "+");
    req_init(&r[1], RN_OP_DELETE, "/r");
    req_init(&r[2], RN_OP_APPEND, "/r");
    req_text(&r[2], OCTET, "lost");
    req_init(&r[3], RN_OP_CREATE, "/r");
    req_text(&r[3], "text/plain", "new");
    req_init(&r[4], RN_OP_CREATE, "/r"); /* repeat: exists */
    req_text(&r[4], "text/plain", NULL);
    req_init(&r[5], RN_OP_APPEND, "/r");
    req_text(&r[5], "text/plain", "!");
    for (int i = 0; i < 6; i++)
        rn_engine_submit(f->e, &r[i].op);
    run(f);
    assert_int_equal(r[0].out.result, RN_OK_APPENDED);
    assert_int_equal(r[1].out.result, RN_OK_DELETED);
    assert_int_equal(r[2].out.result, RN_ERR_NOT_FOUND);
    assert_int_equal(r[3].out.result, RN_OK_CREATED);
    assert_true(r[3].out.stream_id != old_id);
    assert_int_equal(r[4].out.result, RN_OK_EXISTS);
    assert_int_equal(r[5].out.result, RN_OK_APPENDED);
    assert_int_equal(r[5].out.next_offset, 4);
    for (int i = 0; i < 6; i++) {
        assert_int_equal(r[i].out.done, 1);
    }
    expect_bytes(f, "/r", "new!");
}

/* ------------------------------------------------------------------------ */
/* Failed log syncs                                                          */

static void test_failed_sync_answers_unavailable_and_changes_nothing(void **state) {
    fx *f = *state;
    create(f, "/u", NULL, "abc");
    append_prod(f, "/u", OCTET, "1", "w", 0, 0, 0);
    append_seq(f, "/u", OCTET, "2", "s1");
    rn_engine_inject_sync_failures(f->e, 1);
    req r;
    req_init(&r, RN_OP_APPEND, "/u");
    req_text(&r, OCTET, "LOST");
    req_producer(&r, "w", 0, 1);
    req_seq(&r, "s2");
    r.op.in.close = 1;
    outcome o = run_req(f, &r);
    assert_int_equal(o.result, RN_ERR_UNAVAILABLE);
    rn_stream *s = find(f, "/u");
    assert_int_equal(s->tail, 5);
    assert_int_equal(s->closed, 0);
    expect_producer(s, "w", 0, 0);
    expect_last_seq(s, "s1");
    expect_bytes(f, "/u", "abc12");
    /* The same request again succeeds: seq 1 is not a duplicate, s2 is not
     * a regression. */
    req_init(&r, RN_OP_APPEND, "/u");
    req_text(&r, OCTET, "ok");
    req_producer(&r, "w", 0, 1);
    req_seq(&r, "s2");
    o = run_req(f, &r);
    assert_int_equal(o.result, RN_OK_APPENDED);
    assert_int_equal(o.next_offset, 7);
    expect_bytes(f, "/u", "abc12ok");
}

static void test_failed_create_leaves_no_stream(void **state) {
    fx *f = *state;
    rn_engine_inject_sync_failures(f->e, 1);
    outcome o = create(f, "/n", "text/plain", "lost");
    assert_int_equal(o.result, RN_ERR_UNAVAILABLE);
    assert_int_equal(o.stream_id, 0);
    assert_null(find(f, "/n"));
    assert_int_equal(append_ct(f, "/n", "text/plain", "x", 0).result, RN_ERR_NOT_FOUND);
    o = create(f, "/n", OCTET, "kept");
    assert_int_equal(o.result, RN_OK_CREATED);
    restart_crash(f, "crash", drop_stream_files);
    rn_stream *s = find(f, "/n");
    assert_non_null(s);
    assert_string_equal(s->content_type, OCTET);
    expect_bytes(f, "/n", "kept");
}

static void test_failed_append_is_absent_after_crash_when_log_moved_on(void **state) {
    fx *f = *state;
    create(f, "/u", NULL, "abc");
    rn_engine_inject_sync_failures(f->e, 1);
    assert_int_equal(append(f, "/u", "LOST").result, RN_ERR_UNAVAILABLE);
    assert_int_equal(append(f, "/u", "def").result, RN_OK_APPENDED);
    restart_crash(f, "crash", drop_stream_files);
    expect_bytes(f, "/u", "abcdef");
}

static void test_failed_append_is_absent_after_crash_right_after_it(void **state) {
    /* Nothing is written after the failure before the process dies. */
    fx *f = *state;
    create(f, "/u", NULL, "abc");
    rn_engine_inject_sync_failures(f->e, 1);
    assert_int_equal(append(f, "/u", "LOST").result, RN_ERR_UNAVAILABLE);
    restart_crash(f, "crash", drop_stream_files);
    expect_bytes(f, "/u", "abc");
    assert_int_equal(append(f, "/u", "def").result, RN_OK_APPENDED);
    expect_bytes(f, "/u", "abcdef");
}

static void test_failed_sync_fails_back_to_back_queue_consistently(void **state) {
    /* Mutations queued behind a failed one are evaluated against the state
     * it left (unchanged), so their offsets and producer checks are right. */
    fx *f = *state;
    create(f, "/u", NULL, NULL);
    rn_engine_inject_sync_failures(f->e, 1);
    req r[3];
    for (int i = 0; i < 3; i++) {
        req_init(&r[i], RN_OP_APPEND, "/u");
        req_text(&r[i], OCTET, i == 0 ? "A" : i == 1 ? "B" : "C");
        req_producer(&r[i], "w", 0, i == 0 ? 0 : (uint64_t)(i - 1));
        rn_engine_submit(f->e, &r[i].op);
    }
    run(f);
    assert_int_equal(r[0].out.result, RN_ERR_UNAVAILABLE);
    assert_int_equal(r[1].out.result, RN_OK_APPENDED); /* seq 0 again */
    assert_int_equal(r[1].out.next_offset, 1);
    assert_int_equal(r[2].out.result, RN_OK_APPENDED); /* seq 1 */
    assert_int_equal(r[2].out.next_offset, 2);
    expect_bytes(f, "/u", "BC");
    restart_crash(f, "crash", drop_stream_files);
    expect_bytes(f, "/u", "BC");
    expect_producer(find(f, "/u"), "w", 0, 1);
}

/* Places a regular file where the stream files directory for `id` would go,
 * so that writing the stream's file fails. Returns its path in out. */
static void block_stream_dir(fx *f, uint64_t id, char *out, size_t cap) {
    snprintf(out, cap, "%s/streams/%02x", f->dir, (unsigned)(id & 0xff));
    int fd = open(out, O_WRONLY | O_CREAT | O_EXCL, 0644);
    assert_true(fd >= 0);
    close(fd);
}

static void test_append_whose_file_cannot_be_reserved_changes_nothing(void **state) {
    fx *f = *state;
    uint64_t id = create(f, "/r", NULL, NULL).stream_id; /* no data: no file yet */
    char blocker[PATH_MAX];
    block_stream_dir(f, id, blocker, sizeof blocker);
    outcome o = append(f, "/r", "abc");
    assert_int_equal(o.result, RN_ERR_UNAVAILABLE);
    assert_int_equal(o.next_offset, 0);
    assert_false(rn_engine_busy(f->e));
    assert_int_equal(find(f, "/r")->tail, 0);
    assert_int_equal(unlink(blocker), 0);
    o = append(f, "/r", "def");
    assert_int_equal(o.result, RN_OK_APPENDED);
    expect_bytes(f, "/r", "def");
}

static void test_create_whose_file_cannot_be_reserved_creates_nothing(void **state) {
    fx *f = *state;
    /* The first stream of a fresh directory gets id 1. */
    char blocker[PATH_MAX];
    block_stream_dir(f, 1, blocker, sizeof blocker);
    outcome o = create(f, "/r", NULL, "abc");
    assert_int_equal(o.result, RN_ERR_UNAVAILABLE);
    assert_int_equal(o.stream_id, 0);
    assert_null(find(f, "/r"));
    assert_int_equal(unlink(blocker), 0);
    o = create(f, "/r", NULL, "def");
    assert_int_equal(o.result, RN_OK_CREATED);
    expect_bytes(f, "/r", "def");
}

/* ------------------------------------------------------------------------ */
/* Restarts                                                                  */

typedef struct {
    uint64_t bin, json, closed, closed2, ttl, exp, replaced, gone;
    int64_t exp_ms;
} population;

#define BIN_BYTES "hello worldABCxy"
#define JSON_BYTES "1\n2\n{\"k\":[true,null]}\n"

/* Builds a varied state: plain bytes with Stream-Seq and two producers, a
 * JSON stream, streams closed by a producer and at creation, TTL and
 * expiry settings, a deleted stream and a deleted-and-recreated one. */
static population populate(fx *f) {
    population p;
    p.bin = create(f, "/bin", NULL, NULL).stream_id;
    assert_int_equal(append_seq(f, "/bin", OCTET, "hello", "001").result, RN_OK_APPENDED);
    assert_int_equal(append_seq(f, "/bin", OCTET, " world", "002").result, RN_OK_APPENDED);
    for (uint64_t i = 0; i < 3; i++) {
        char body[2] = {(char)('A' + i), 0};
        assert_int_equal(append_prod(f, "/bin", OCTET, body, "p1", 0, i, 0).result, RN_OK_APPENDED);
    }
    assert_int_equal(append_prod(f, "/bin", OCTET, "x", "p2", 0, 0, 0).result, RN_OK_APPENDED);
    assert_int_equal(append_prod(f, "/bin", OCTET, "y", "p2", 3, 0, 0).result, RN_OK_APPENDED);

    p.json = create(f, "/json", JSON, "[1, 2]").stream_id;
    assert_int_equal(append_ct(f, "/json", JSON, "{\"k\": [true, null]}", 0).result,
                     RN_OK_APPENDED);

    p.closed = create(f, "/closed", "text/plain", NULL).stream_id;
    assert_int_equal(append_prod(f, "/closed", "text/plain", "bye", "c", 2, 0, 1).result,
                     RN_OK_APPENDED);
    p.closed2 = create_full(f, "/closed2", NULL, "final", -1, -1, 1).stream_id;

    p.ttl = create_full(f, "/ttl", NULL, "t", 3600, -1, 0).stream_id;
    p.exp_ms = rn_now_ms() + 3600000;
    p.exp = create_full(f, "/exp", NULL, NULL, -1, p.exp_ms, 0).stream_id;

    p.gone = create(f, "/gone", NULL, "zzz").stream_id;
    assert_int_equal(delete_stream(f, "/gone").result, RN_OK_DELETED);

    uint64_t first = create(f, "/replaced", NULL, "old").stream_id;
    assert_int_equal(delete_stream(f, "/replaced").result, RN_OK_DELETED);
    p.replaced = create(f, "/replaced", "text/plain", "new").stream_id;
    assert_true(p.replaced != first);
    return p;
}

/* Checks everything populate() left, without changing it. */
static void check_population(fx *f, const population *p) {
    rn_stream *s = find(f, "/bin");
    assert_non_null(s);
    assert_int_equal(s->id, p->bin);
    assert_string_equal(s->content_type, OCTET);
    assert_int_equal(s->closed, 0);
    expect_bytes(f, "/bin", BIN_BYTES);
    expect_last_seq(s, "002");
    assert_int_equal(s->producers.count, 2);
    expect_producer(s, "p1", 0, 2);
    expect_producer(s, "p2", 3, 0);

    s = find(f, "/json");
    assert_non_null(s);
    assert_int_equal(s->id, p->json);
    assert_int_equal(s->json, 1);
    expect_bytes(f, "/json", JSON_BYTES);
    assert_false(rn_engine_offset_valid(f->e, s, 1));
    assert_true(rn_engine_offset_valid(f->e, s, 2));

    s = find(f, "/closed");
    assert_non_null(s);
    assert_int_equal(s->id, p->closed);
    assert_int_equal(s->closed, 1);
    expect_producer(s, "c", 2, 0);
    assert_int_equal(producer(s, "c")->newest_closed, 1);
    expect_bytes(f, "/closed", "bye");

    s = find(f, "/closed2");
    assert_non_null(s);
    assert_int_equal(s->id, p->closed2);
    assert_int_equal(s->closed, 1);
    assert_int_equal(s->producers.count, 0);
    expect_bytes(f, "/closed2", "final");

    s = find(f, "/ttl");
    assert_non_null(s);
    assert_int_equal(s->id, p->ttl);
    assert_int_equal(s->ttl_s, 3600);
    assert_int_equal(s->expires_at_ms, -1);
    expect_bytes(f, "/ttl", "t");

    s = find(f, "/exp");
    assert_non_null(s);
    assert_int_equal(s->id, p->exp);
    assert_int_equal(s->ttl_s, -1);
    assert_int_equal(s->expires_at_ms, p->exp_ms);
    expect_bytes(f, "/exp", "");

    assert_null(find(f, "/gone"));

    s = find(f, "/replaced");
    assert_non_null(s);
    assert_int_equal(s->id, p->replaced);
    assert_string_equal(s->content_type, "text/plain");
    expect_bytes(f, "/replaced", "new");
}

/* Behaviour that depends on persisted state; every request here is refused
 * or a duplicate, so the state stays as check_population expects. */
static void check_population_behaviour(fx *f) {
    outcome o = append_prod(f, "/bin", OCTET, "C", "p1", 0, 2, 0);
    assert_int_equal(o.result, RN_OK_DUPLICATE);
    assert_int_equal(o.ack_seq, 2);
    o = append_prod(f, "/bin", OCTET, "E", "p1", 0, 4, 0);
    assert_int_equal(o.result, RN_ERR_SEQ_GAP);
    assert_int_equal(o.expected_seq, 3);
    o = append_prod(f, "/bin", OCTET, "z", "p2", 2, 0, 0);
    assert_int_equal(o.result, RN_ERR_STALE_EPOCH);
    assert_int_equal(o.current_epoch, 3);
    assert_int_equal(append_seq(f, "/bin", OCTET, "z", "002").result, RN_ERR_SEQ_REGRESSION);
    o = append_prod(f, "/closed", "text/plain", "bye", "c", 2, 0, 1);
    assert_int_equal(o.result, RN_OK_DUPLICATE);
    assert_int_equal(append_ct(f, "/closed", "text/plain", "more", 0).result, RN_ERR_CLOSED);
    assert_int_equal(append(f, "/closed2", "more").result, RN_ERR_CLOSED);
    assert_int_equal(close_only(f, "/closed2").result, RN_OK_DUPLICATE);
    assert_int_equal(create_full(f, "/ttl", NULL, NULL, 3600, -1, 0).result, RN_OK_EXISTS);
    assert_int_equal(append(f, "/gone", "x").result, RN_ERR_NOT_FOUND);
    assert_int_equal(append_ct(f, "/json", JSON, "[]", 0).result, RN_ERR_JSON_EMPTY_ARRAY);
}

static void check_new_ids_after(fx *f, const population *p) {
    uint64_t max = 0;
    const uint64_t all[] = {p->bin, p->json, p->closed,   p->closed2,
                            p->ttl, p->exp,  p->replaced, p->gone};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        max = all[i] > max ? all[i] : max;
    outcome o = create(f, "/brand-new", NULL, NULL);
    assert_int_equal(o.result, RN_OK_CREATED);
    assert_true(o.stream_id > max);
}

static void test_restart_after_close_restores_state_from_checkpoint(void **state) {
    fx *f = *state;
    population p = populate(f);
    check_population(f, &p);
    restart_clean(f);
    assert_int_equal(f->stats.checkpoint_streams, 7);
    assert_int_equal(f->stats.streams, 7);
    assert_int_equal(f->stats.records_replayed, 0);
    check_population(f, &p);
    check_population_behaviour(f);
    /* A second clean restart is stable too. */
    restart_clean(f);
    check_population(f, &p);
    check_new_ids_after(f, &p);
}

static void test_restart_after_crash_replays_the_log(void **state) {
    fx *f = *state;
    population p = populate(f);
    restart_crash(f, "crash", NULL);
    assert_int_equal(f->stats.checkpoint_streams, 0);
    assert_true(f->stats.records_replayed > 0);
    assert_int_equal(f->stats.torn_bytes, 0);
    assert_int_equal(f->stats.streams, 7);
    check_population(f, &p);
    check_population_behaviour(f);
    check_new_ids_after(f, &p);
}

static void test_restart_after_crash_rebuilds_stream_files_from_the_log(void **state) {
    fx *f = *state;
    population p = populate(f);
    restart_crash(f, "crash", drop_stream_files);
    check_population(f, &p);
    check_population_behaviour(f);
}

/* The newest log segment of dir and where its batches end (segments are
 * preallocated with zeros, so the file's size says nothing). The format is
 * log/segment.h's: a 40-byte header, then batches of a 32-byte header
 * {"RNB2", records, sequence, bytes, crc, 0} and the records. */
static void newest_segment_end(const char *dir, char *path, size_t cap, off_t *end) {
    char wdir[PATH_MAX];
    snprintf(wdir, sizeof wdir, "%s/wal", dir);
    DIR *d = opendir(wdir);
    assert_non_null(d);
    char best[256] = "";
    struct dirent *de;
    while ((de = readdir(d)))
        if (strlen(de->d_name) == 24 && strcmp(de->d_name + 20, ".log") == 0 &&
            strcmp(de->d_name, best) > 0)
            snprintf(best, sizeof best, "%s", de->d_name);
    closedir(d);
    assert_true(best[0]);
    int n = snprintf(path, cap, "%s/%s", wdir, best);
    assert_true(n > 0 && (size_t)n < cap);
    int fd = open(path, O_RDONLY);
    assert_true(fd >= 0);
    off_t pos = 40; /* segment header */
    uint8_t h[32];
    while (pread(fd, h, 32, pos) == 32 && memcmp(h, "RNB2", 4) == 0) {
        uint64_t bytes = 0;
        for (int i = 7; i >= 0; i--)
            bytes = bytes << 8 | h[16 + i];
        pos += 32 + (off_t)bytes;
    }
    close(fd);
    *end = pos;
}

static void test_restart_after_crash_cuts_a_torn_log_tail(void **state) {
    fx *f = *state;
    population p = populate(f);
    run(f);
    /* Bytes of an unfinished batch whose first page never reached the disk
     * (it reads as the preallocated zeros), as a crash during its write
     * can leave them. */
    char seg[PATH_MAX];
    off_t end;
    newest_segment_end(f->dir, seg, sizeof seg, &end);
    int fd = open(seg, O_WRONLY);
    assert_true(fd >= 0);
    const uint8_t garbage[21] = {9, 0, 0, 0, 1, 2, 3, 4, 'g', 'a', 'r', 'b', 'a', 'g', 'e'};
    off_t at = (end / 4096 + 1) * 4096;
    assert_int_equal(pwrite(fd, garbage, sizeof garbage, at), (ssize_t)sizeof garbage);
    close(fd);
    restart_crash(f, "crash", NULL);
    /* the garbage's last non-zero byte ends it */
    assert_int_equal(f->stats.torn_bytes, (uint64_t)(at + 15 - end));
    check_population(f, &p);
    check_population_behaviour(f);
}

static void test_restart_after_crash_combines_checkpoint_and_log(void **state) {
    fx *f = *state;
    population p = populate(f);
    restart_clean(f); /* checkpoint holds the population */
    /* Changes after the checkpoint, only in the log. */
    uint64_t late = create(f, "/late", "text/plain", "L1").stream_id;
    assert_int_equal(append_prod(f, "/late", "text/plain", "L2", "q", 1, 0, 0).result,
                     RN_OK_APPENDED);
    assert_int_equal(append_seq(f, "/late", "text/plain", "L3", "k").result, RN_OK_APPENDED);
    assert_int_equal(delete_stream(f, "/gone").result, RN_ERR_NOT_FOUND);
    restart_crash(f, "crash", NULL);
    assert_int_equal(f->stats.checkpoint_streams, 7);
    assert_int_equal(f->stats.records_replayed, 3);
    assert_int_equal(f->stats.streams, 8);
    check_population(f, &p);
    check_population_behaviour(f);
    rn_stream *s = find(f, "/late");
    assert_non_null(s);
    assert_int_equal(s->id, late);
    expect_bytes(f, "/late", "L1L2L3");
    expect_producer(s, "q", 1, 0);
    expect_last_seq(s, "k");
    check_new_ids_after(f, &p);
    assert_true(find(f, "/brand-new")->id > late);
}

static population cut_population; /* for cut_to_checkpoint */

static void cut_stream_file(const char *copy, uint64_t id, off_t len) {
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/streams/%02x/%016llx.dat", copy, (unsigned)(id & 0xff),
             (unsigned long long)id);
    assert_int_equal(truncate(path, len), 0);
}

/* Loses what was written to /bin's and /json's files after the checkpoint,
 * as unsynced pages would be lost in a power failure. */
static void cut_to_checkpoint(const char *copy) {
    cut_stream_file(copy, cut_population.bin, (off_t)strlen(BIN_BYTES));
    cut_stream_file(copy, cut_population.json, (off_t)strlen(JSON_BYTES));
}

static void test_restart_after_crash_replays_post_checkpoint_changes_to_old_streams(void **state) {
    fx *f = *state;
    cut_population = populate(f);
    restart_clean(f);
    /* Mutate checkpointed streams; then crash and lose the stream files'
     * unsynced pages: only the checkpoint and the log remain. */
    assert_int_equal(append_prod(f, "/bin", OCTET, "D", "p1", 0, 3, 0).result, RN_OK_APPENDED);
    assert_int_equal(append_ct(f, "/json", JSON, "[3]", 1).result, RN_OK_APPENDED);
    assert_int_equal(delete_stream(f, "/ttl").result, RN_OK_DELETED);
    restart_crash(f, "crash", cut_to_checkpoint);
    expect_bytes(f, "/bin", BIN_BYTES "D");
    expect_producer(find(f, "/bin"), "p1", 0, 3);
    expect_bytes(f, "/json", JSON_BYTES "3\n");
    assert_int_equal(find(f, "/json")->closed, 1);
    assert_null(find(f, "/ttl"));
}

/* Number of the oldest log segment in f->dir (UINT64_MAX: none; right after
 * a checkpoint every segment may be gone until the next write opens one). */
static uint64_t lowest_segment(fx *f) {
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/wal", f->dir);
    DIR *d = opendir(path);
    assert_non_null(d);
    uint64_t low = UINT64_MAX;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (strlen(de->d_name) != 24)
            continue;
        uint64_t n = strtoull(de->d_name, NULL, 10);
        low = n < low ? n : low;
    }
    closedir(d);
    return low;
}

static void test_background_checkpoints_and_crash_keep_all_data(void **state) {
    fx *f = *state;
    /* Reopen with a small log segment size and frequent checkpoints. */
    close_engine(f, f->e);
    f->segment_bytes = 2048;
    f->checkpoint_bytes = 4096;
    f->e = open_at(f, f->dir);
    uint64_t first_segment = lowest_segment(f);
    assert_true(first_segment != UINT64_MAX);
    enum { STREAMS = 3, ROUNDS = 120 };
    static const char *paths[STREAMS] = {"/bg0", "/bg1", "/bg2"};
    rn_buf want[STREAMS] = {{0}};
    for (int i = 0; i < STREAMS; i++)
        assert_int_equal(create(f, paths[i], NULL, NULL).result, RN_OK_CREATED);
    char chunk[STREAMS][ROUNDS][64];
    req r[STREAMS];
    for (int round = 0; round < ROUNDS; round++) {
        /* One append per stream back to back, so batches hold several. */
        for (int i = 0; i < STREAMS; i++) {
            int n = snprintf(chunk[i][round], sizeof chunk[i][round], "<%d:%d:%.*s>", i, round,
                             (round * 7 + i) % 40, "----------------------------------------");
            rn_buf_append(&want[i], chunk[i][round], (size_t)n);
            req_init(&r[i], RN_OP_APPEND, paths[i]);
            req_text(&r[i], OCTET, chunk[i][round]);
            req_producer(&r[i], "w", 0, (uint64_t)round);
            rn_engine_submit(f->e, &r[i].op);
        }
        run(f);
        for (int i = 0; i < STREAMS; i++) {
            assert_int_equal(r[i].out.result, RN_OK_APPENDED);
        }
    }
    /* Checkpoints happened in the background and dropped old segments. */
    /* (lowest_segment is UINT64_MAX when none is left.) The checkpoint
     * written at the reopen above held no streams, so the crash-restart
     * below finding all of them in one also shows a background checkpoint
     * ran. */
    assert_true(lowest_segment(f) > first_segment);

    restart_crash(f, "crash", NULL);
    assert_true(f->stats.checkpoint_streams == STREAMS);
    for (int i = 0; i < STREAMS; i++) {
        expect_bytes_from(f, paths[i], 0, want[i].data, want[i].len);
        expect_producer(find(f, paths[i]), "w", 0, ROUNDS - 1);
    }
    restart_clean(f);
    for (int i = 0; i < STREAMS; i++) {
        expect_bytes_from(f, paths[i], 0, want[i].data, want[i].len);
        rn_buf_free(&want[i]);
    }
}

static void test_restart_keeps_expired_streams_absent(void **state) {
    fx *f = *state;
    create_full(f, "/past", NULL, "x", -1, rn_now_ms() - 1, 0);
    create(f, "/live", NULL, "y");
    restart_crash(f, "crash", NULL);
    assert_null(find(f, "/past"));
    assert_non_null(find(f, "/live"));
    run(f);
    restart_clean(f);
    assert_null(find(f, "/past"));
    assert_int_equal(f->stats.streams, 1);
}

static void test_damaged_checkpoint_refuses_to_open(void **state) {
    fx *f = *state;
    create(f, "/s", NULL, "abc");
    close_engine(f, f->e);
    f->e = NULL;
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/checkpoint", f->dir);
    int fd = open(path, O_RDWR);
    assert_true(fd >= 0);
    uint8_t c;
    assert_int_equal(pread(fd, &c, 1, 20), 1);
    c ^= 0xff;
    assert_int_equal(pwrite(fd, &c, 1, 20), 1);
    close(fd);
    open_tiers(f, f->dir);
    rn_engine_config cfg = {.data_dir = f->dir,
                            .tiers = f->tiers,
                            .wal_segment_bytes = f->segment_bytes,
                            .checkpoint_bytes = f->checkpoint_bytes};
    char err[256] = "";
    rn_recovery_stats st;
    assert_null(rn_engine_open(&f->loop, &cfg, &st, err, sizeof err));
    assert_true(strlen(err) > 0);
    rn_tiers_close(f->tiers);
    f->tiers = NULL;
}

#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)

int main(void) {
    const struct CMUnitTest tests[] = {
        T(test_create_answers_created_then_exists_for_same_config),
        T(test_create_with_different_config_is_a_mismatch),
        T(test_create_without_content_type_defaults_to_octet_stream),
        T(test_create_with_body_stores_it_and_closed_create_refuses_appends),
        T(test_paths_are_distinct_streams),
        T(test_append_then_read_back_bytes),
        T(test_append_refusals_change_nothing),
        T(test_refusals_are_answered_before_submit_returns),
        T(test_a_fork_create_with_data_is_logged_before_a_later_source_delete),
        T(test_observers_see_applied_changes_only),
        T(test_json_stream_stores_minified_messages_with_lf),
        T(test_json_append_refuses_invalid_and_empty_array),
        T(test_json_create_with_invalid_body_creates_nothing),
        T(test_json_reads_end_on_message_boundaries),
        T(test_read_length_finds_message_ends_far_from_max),
        T(test_read_again_refuses_once_the_bytes_may_have_changed),
        T(test_producer_sequence_rules),
        T(test_producer_state_is_per_stream),
        T(test_stream_seq_must_increase_lexicographically),
        T(test_close_refuses_later_appends_and_repeat_close_is_duplicate),
        T(test_close_only_closes_without_data),
        T(test_closing_producer_repeat_is_duplicate),
        T(test_producer_close_only_records_closing_tuple),
        T(test_producer_identity_and_receipts),
        T(test_producer_state_survives_restarts),
        T(test_rewrite_closes_producer_epochs),
        T(test_idle_producers_expire_and_raise_the_floor),
        T(test_producer_cap_displaces_only_idle_producers),
        T(test_answer_early_only_for_repeats_and_conflicts),
        T(test_delete_then_recreate_gives_new_id_and_empty_data),
        T(test_stream_ids_are_never_reused),
        T(test_namespaces_outlive_their_streams),
        T(test_create_submitted_from_delete_callback_sees_stream_deleted),
        T(test_append_submitted_from_delete_callback_finds_no_stream),
        T(test_expired_streams_are_not_found),
        T(test_mutations_of_expired_stream_see_it_deleted),
        T(test_sweep_deletes_expired_streams),
        T(test_back_to_back_mutations_apply_in_order),
        T(test_back_to_back_mutations_of_two_streams_interleave_correctly),
        T(test_back_to_back_delete_and_recreate),
        T(test_failed_sync_answers_unavailable_and_changes_nothing),
        T(test_failed_create_leaves_no_stream),
        T(test_failed_append_is_absent_after_crash_when_log_moved_on),
        T(test_failed_append_is_absent_after_crash_right_after_it),
        T(test_failed_sync_fails_back_to_back_queue_consistently),
        T(test_append_whose_file_cannot_be_reserved_changes_nothing),
        T(test_create_whose_file_cannot_be_reserved_creates_nothing),
        T(test_restart_after_close_restores_state_from_checkpoint),
        T(test_restart_after_crash_replays_the_log),
        T(test_restart_after_crash_rebuilds_stream_files_from_the_log),
        T(test_restart_after_crash_cuts_a_torn_log_tail),
        T(test_restart_after_crash_combines_checkpoint_and_log),
        T(test_restart_after_crash_replays_post_checkpoint_changes_to_old_streams),
        T(test_background_checkpoints_and_crash_keep_all_data),
        T(test_restart_keeps_expired_streams_absent),
        T(test_damaged_checkpoint_refuses_to_open),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
