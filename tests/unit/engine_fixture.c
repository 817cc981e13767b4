/*
 * engine_fixture.c - the fixture, restarts, requests and assertions shared
 * by the stream engine's unit tests. See engine_fixture.h.
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine_fixture.h"
#include "tmpdir.h"

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

void open_tiers(fx *f, const char *dir) {
    rn_tiers_config tc = {.data_dir = dir, .max_open_files = 3}; /* small: the cache evicts */
    char err[256] = "";
    f->tiers = rn_tiers_open(&f->loop, &tc, err, sizeof err);
    if (!f->tiers)
        fail_msg("rn_tiers_open(%s): %s", dir, err);
}

rn_engine *open_at(fx *f, const char *dir) {
    open_tiers(f, dir);
    rn_engine_config cfg = {
        .data_dir = dir,
        .tiers = f->tiers,
        .wal_segment_bytes = f->segment_bytes,
        .checkpoint_bytes = f->checkpoint_bytes,
        .producer_ttl_ms = f->producer_ttl_ms,
        .producer_cap = f->producer_cap,
        .incarnation_key = f->incarnation_key,
    };
    char err[256] = "";
    rn_engine *e = rn_engine_open(&f->loop, &cfg, &f->stats, err, sizeof err);
    if (!e)
        fail_msg("rn_engine_open(%s): %s", dir, err);
    rn_engine_observe(e, observe, f);
    return e;
}

void run(fx *f) {
    uv_run(&f->loop, UV_RUN_DEFAULT);
}

void close_engine(fx *f, rn_engine *e) {
    run(f);
    assert_false(rn_engine_busy(e));
    rn_engine_close(e);
    rn_tiers_close(f->tiers);
    f->tiers = NULL;
}

int setup(void **state) {
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

int teardown(void **state) {
    fx *f = *state;
    if (f->e)
        close_engine(f, f->e);
    assert_int_equal(uv_loop_close(&f->loop), 0);
    rm_tree(f->root);
    free(f);
    return 0;
}

void restart_clean(fx *f) {
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

void drop_stream_files(const char *copy) {
    char streams[PATH_MAX];
    snprintf(streams, sizeof streams, "%s/streams", copy);
    rm_tree(streams);
}

void restart_crash(fx *f, const char *name, damage_fn damage) {
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

void req_done(rn_op *op) {
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

void req_init(req *r, rn_op_kind kind, const char *path) {
    memset(r, 0, sizeof *r);
    r->op.in.kind = kind;
    r->op.in.path = path;
    r->op.in.path_len = strlen(path);
    r->op.in.ttl_s = -1;
    r->op.in.expires_at_ms = -1;
    r->op.done = req_done;
    r->op.arg = r;
}

void req_body(req *r, const char *ct, const void *body, size_t len) {
    r->op.in.content_type = ct;
    r->op.in.content_type_len = ct ? strlen(ct) : 0;
    r->op.in.body = body;
    r->op.in.body_len = len;
}

void req_text(req *r, const char *ct, const char *body) {
    req_body(r, ct, body, body ? strlen(body) : 0);
}

void req_producer(req *r, const char *id, uint64_t epoch, uint64_t seq) {
    r->op.in.has_producer = 1;
    r->op.in.producer_id = id;
    r->op.in.producer_id_len = strlen(id);
    r->op.in.producer_epoch = epoch;
    r->op.in.producer_seq = seq;
}

void req_seq(req *r, const char *seq) {
    r->op.in.has_seq = 1;
    r->op.in.seq = seq;
    r->op.in.seq_len = strlen(seq);
}

outcome run_req(fx *f, req *r) {
    rn_engine_submit(f->e, &r->op);
    run(f);
    assert_int_equal(r->out.done, 1);
    return r->out;
}

outcome create_full(fx *f, const char *path, const char *ct, const char *body, int64_t ttl_s,
                    int64_t expires_at_ms, int close) {
    req r;
    req_init(&r, RN_OP_CREATE, path);
    req_text(&r, ct, body);
    r.op.in.ttl_s = ttl_s;
    r.op.in.expires_at_ms = expires_at_ms;
    r.op.in.close = close;
    return run_req(f, &r);
}

outcome create(fx *f, const char *path, const char *ct, const char *body) {
    return create_full(f, path, ct, body, -1, -1, 0);
}

outcome append_ct(fx *f, const char *path, const char *ct, const char *body, int close) {
    req r;
    req_init(&r, RN_OP_APPEND, path);
    req_text(&r, ct, body);
    r.op.in.close = close;
    return run_req(f, &r);
}

outcome append(fx *f, const char *path, const char *body) {
    return append_ct(f, path, OCTET, body, 0);
}

outcome append_seq(fx *f, const char *path, const char *ct, const char *body, const char *seq) {
    req r;
    req_init(&r, RN_OP_APPEND, path);
    req_text(&r, ct, body);
    req_seq(&r, seq);
    return run_req(f, &r);
}

outcome append_prod(fx *f, const char *path, const char *ct, const char *body, const char *pid,
                    uint64_t epoch, uint64_t seq, int close) {
    req r;
    req_init(&r, RN_OP_APPEND, path);
    req_text(&r, ct, body);
    req_producer(&r, pid, epoch, seq);
    r.op.in.close = close;
    return run_req(f, &r);
}

outcome close_only(fx *f, const char *path) {
    req r;
    req_init(&r, RN_OP_APPEND, path);
    r.op.in.close = 1;
    return run_req(f, &r);
}

outcome rewrite_to(fx *f, const char *path, uint64_t keep) {
    req r;
    req_init(&r, RN_OP_REWRITE, path);
    r.op.in.target_offset = keep;
    return run_req(f, &r);
}

outcome delete_stream(fx *f, const char *path) {
    req r;
    req_init(&r, RN_OP_DELETE, path);
    return run_req(f, &r);
}

rn_stream *find(fx *f, const char *path) {
    return rn_engine_find(f->e, path, strlen(path));
}

void expect_bytes_from(fx *f, const char *path, uint64_t offset, const void *want, size_t len) {
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

void expect_bytes(fx *f, const char *path, const char *want) {
    expect_bytes_from(f, path, 0, want, strlen(want));
}

rn_producer *producer(rn_stream *s, const char *id) {
    rn_producer *p = rn_map_get(&s->producers, id, strlen(id));
    if (!p)
        fail_msg("producer %s missing", id);
    return p;
}

void expect_producer(rn_stream *s, const char *id, uint64_t epoch, uint64_t last_seq) {
    rn_producer *p = producer(s, id);
    assert_int_equal(p->epoch, epoch);
    assert_int_equal(p->last_seq, last_seq);
}

void expect_last_seq(rn_stream *s, const char *seq) {
    if (!seq) {
        assert_null(s->last_seq);
        return;
    }
    assert_non_null(s->last_seq);
    assert_int_equal(s->last_seq_len, strlen(seq));
    assert_memory_equal(s->last_seq, seq, strlen(seq));
}
