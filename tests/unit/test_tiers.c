/*
 * test_tiers.c - unit tests for the tiers service (src/tiers/tiers.h):
 * snapshot bodies and staged parts, over the local directory and over an
 * asynchronous store.
 *
 * How: every test opens the tiers on a fresh temporary data directory with
 * its own libuv loop, makes calls, runs the loop until idle and checks what
 * the callbacks reported and what reads back. The local-directory tests
 * check where bodies go (by size, with and without a cold store), ranges
 * read back, drops and the recovery sweep, and the life of staged parts
 * (counts, claims, assembly in the listed order, release, discard, counts
 * listed again after a reopen, the grace-period sweep), and the directory's
 * listings of one level and of every depth. The asynchronous
 * tests give the tiers a cold store kept in memory whose every operation
 * reports on a later loop turn, the shape of a network backend such as
 * S3: no callback may run before its call returns, counts are unknown
 * until listed, and every operation still completes with the same results.
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <utime.h>

#include "tiers/store.h"
#include "tiers/tiers.h"

/* ------------------------------------------------------------------------ */
/* An asynchronous store in memory                                          */

typedef struct object {
    char *key;
    uint8_t *data;
    size_t len;
    struct object *next;
} object;

typedef struct {
    rn_store base;
    uv_loop_t *loop;
    object *objects;
} memstore;

typedef enum { PUT, CONCAT, OPEN, LIST, WALK, REMOVE, SWEEP } op_kind;

/* One operation, run on a later loop turn. */
typedef struct {
    uv_timer_t timer;
    memstore *ms;
    op_kind kind;
    const char *key;
    const void *data;
    size_t len;
    const char *const *keys;
    size_t n;
    uint64_t off, max_bytes;
    rn_store_observe_fn observe;
    void *observe_arg;
    rn_store_entry_fn each;
    rn_store_done_fn done;
    rn_store_size_fn done_size;
    rn_store_open_fn done_open;
    void *arg;
} mem_op;

static object *mem_find(memstore *ms, const char *key) {
    for (object *o = ms->objects; o; o = o->next)
        if (strcmp(o->key, key) == 0)
            return o;
    return NULL;
}

static void mem_store(memstore *ms, const char *key, uint8_t *data, size_t len) {
    object *o = calloc(1, sizeof *o);
    o->key = strdup(key);
    o->data = data;
    o->len = len;
    o->next = ms->objects;
    ms->objects = o;
}

static void mem_remove(memstore *ms, const char *key) {
    for (object **p = &ms->objects; *p; p = &(*p)->next) {
        if (strcmp((*p)->key, key) == 0) {
            object *o = *p;
            *p = o->next;
            free(o->key);
            free(o->data);
            free(o);
            return;
        }
    }
}

static int under(const char *key, const char *prefix) {
    return strncmp(key, prefix, strlen(prefix)) == 0;
}

static void mem_concat(mem_op *op) {
    size_t total = 0;
    for (size_t i = 0; i < op->n; i++) {
        object *o = mem_find(op->ms, op->keys[i]);
        if (!o) {
            op->done_size(op->arg, -ENOENT);
            return;
        }
        total += o->len;
    }
    if (total > op->max_bytes) {
        op->done_size(op->arg, -EFBIG);
        return;
    }
    uint8_t *all = malloc(total ? total : 1);
    size_t at = 0;
    for (size_t i = 0; i < op->n; i++) {
        object *o = mem_find(op->ms, op->keys[i]);
        if (op->observe)
            op->observe(op->observe_arg, o->data, o->len);
        memcpy(all + at, o->data, o->len);
        at += o->len;
    }
    mem_store(op->ms, op->key, all, total);
    op->done_size(op->arg, (int64_t)total);
}

/* Hands back the range in a file of its own, from offset 0 of it. */
static void mem_open(mem_op *op) {
    object *o = mem_find(op->ms, op->key);
    if (!o) {
        op->done_open(op->arg, -ENOENT, 0);
        return;
    }
    FILE *tmp = tmpfile();
    uint64_t len = op->off >= o->len ? 0 : o->len - op->off;
    len = len < op->len ? len : op->len;
    fwrite(o->data + op->off, 1, len, tmp);
    fflush(tmp);
    int fd = dup(fileno(tmp));
    fclose(tmp);
    op->done_open(op->arg, fd, 0);
}

/* LIST: one level under the prefix; WALK: every depth. */
static void mem_list(mem_op *op) {
    size_t plen = strlen(op->key);
    for (object *o = op->ms->objects; o; o = o->next)
        if (under(o->key, op->key) && (op->kind == WALK || !strchr(o->key + plen, '/')))
            op->each(op->arg, o->key, o->len);
    op->done(op->arg, 0);
}

static void mem_op_closed(uv_handle_t *h) {
    free(h->data);
}

static void mem_op_run(uv_timer_t *t) {
    mem_op *op = t->data;
    memstore *ms = op->ms;
    switch (op->kind) {
    case PUT: {
        uint8_t *copy = malloc(op->len ? op->len : 1);
        memcpy(copy, op->data, op->len);
        mem_remove(ms, op->key);
        mem_store(ms, op->key, copy, op->len);
        op->done(op->arg, 0);
        break;
    }
    case CONCAT:
        mem_concat(op);
        break;
    case OPEN:
        mem_open(op);
        break;
    case LIST:
    case WALK:
        mem_list(op);
        break;
    case REMOVE:
        for (size_t i = 0; i < op->n; i++)
            mem_remove(ms, op->keys[i]);
        op->done(op->arg, 0);
        break;
    case SWEEP:
        for (object *o = ms->objects, *next; o; o = next) {
            next = o->next;
            if (under(o->key, op->key))
                mem_remove(ms, o->key);
        }
        op->done(op->arg, 0);
        break;
    }
    uv_close((uv_handle_t *)&op->timer, mem_op_closed);
}

static mem_op *mem_later(rn_store *st, op_kind kind, void *arg) {
    memstore *ms = (memstore *)st;
    mem_op *op = calloc(1, sizeof *op);
    op->ms = ms;
    op->kind = kind;
    op->arg = arg;
    uv_timer_init(ms->loop, &op->timer);
    op->timer.data = op;
    uv_timer_start(&op->timer, mem_op_run, 0, 0);
    return op;
}

static void m_put(rn_store *st, const char *key, const void *data, size_t len,
                  rn_store_done_fn done, void *arg) {
    mem_op *op = mem_later(st, PUT, arg);
    op->key = key;
    op->data = data;
    op->len = len;
    op->done = done;
}

static void m_concat(rn_store *st, const char *key, const char *const *src, size_t n,
                     uint64_t max_bytes, rn_store_observe_fn observe, void *observe_arg,
                     rn_store_size_fn done, void *arg) {
    mem_op *op = mem_later(st, CONCAT, arg);
    op->key = key;
    op->keys = src;
    op->n = n;
    op->max_bytes = max_bytes;
    op->observe = observe;
    op->observe_arg = observe_arg;
    op->done_size = done;
}

static void m_open(rn_store *st, const char *key, uint64_t off, uint64_t len, rn_store_open_fn done,
                   void *arg) {
    mem_op *op = mem_later(st, OPEN, arg);
    op->key = key;
    op->off = off;
    op->len = len;
    op->done_open = done;
}

static void mem_listing(rn_store *st, op_kind kind, const char *prefix, rn_store_entry_fn each,
                        rn_store_done_fn done, void *arg) {
    mem_op *op = mem_later(st, kind, arg);
    op->key = prefix;
    op->each = each;
    op->done = done;
}

static void m_list(rn_store *st, const char *prefix, rn_store_entry_fn each, rn_store_done_fn done,
                   void *arg) {
    mem_listing(st, LIST, prefix, each, done, arg);
}

static void m_walk(rn_store *st, const char *prefix, rn_store_entry_fn each, rn_store_done_fn done,
                   void *arg) {
    mem_listing(st, WALK, prefix, each, done, arg);
}

static void m_remove(rn_store *st, const char *const *keys, size_t n, rn_store_done_fn done,
                     void *arg) {
    mem_op *op = mem_later(st, REMOVE, arg);
    op->keys = keys;
    op->n = n;
    op->done = done;
}

static void m_sweep(rn_store *st, const char *prefix, int64_t older_than, rn_store_done_fn done,
                    void *arg) {
    (void)older_than; /* everything in memory counts as old */
    mem_op *op = mem_later(st, SWEEP, arg);
    op->key = prefix;
    op->done = done;
}

static void m_close(rn_store *st) {
    memstore *ms = (memstore *)st;
    while (ms->objects)
        mem_remove(ms, ms->objects->key);
    free(ms);
}

static const rn_store_ops memstore_ops = {.put = m_put,
                                          .concat = m_concat,
                                          .open = m_open,
                                          .list = m_list,
                                          .walk = m_walk,
                                          .remove = m_remove,
                                          .sweep = m_sweep,
                                          .close = m_close};

static size_t mem_count_under(rn_store *st, const char *prefix) {
    size_t n = 0;
    for (object *o = ((memstore *)st)->objects; o; o = o->next)
        n += under(o->key, prefix);
    return n;
}

/* ------------------------------------------------------------------------ */
/* Fixture                                                                   */

typedef struct {
    char dir[64];
    uv_loop_t loop;
    rn_tiers *t;
    rn_store *mem; /* the cold store of the asynchronous tests (owned by t) */
} fx;

static void open_tiers(fx *f, int cold_store, uint64_t grace_ms, rn_store *backend) {
    rn_tiers_config cfg = {.data_dir = f->dir,
                           .cold_store = cold_store,
                           .max_open_files = 4,
                           .parts_grace_ms = grace_ms,
                           .cold_backend = backend};
    char err[256] = "";
    f->t = rn_tiers_open(&f->loop, &cfg, err, sizeof err);
    if (!f->t)
        fail_msg("rn_tiers_open: %s", err);
}

static void run(fx *f) {
    uv_run(&f->loop, UV_RUN_DEFAULT);
}

static void close_tiers(fx *f) {
    rn_tiers_stop(f->t);
    run(f);
    rn_tiers_close(f->t);
    f->t = NULL;
}

static int setup(void **state) {
    fx *f = calloc(1, sizeof *f);
    strcpy(f->dir, "/tmp/runnel-tiers-XXXXXX");
    if (!mkdtemp(f->dir) || uv_loop_init(&f->loop) != 0)
        return -1;
    open_tiers(f, 1, 3600 * 1000, NULL);
    *state = f;
    return 0;
}

static int setup_async(void **state) {
    fx *f = calloc(1, sizeof *f);
    strcpy(f->dir, "/tmp/runnel-tiers-XXXXXX");
    if (!mkdtemp(f->dir) || uv_loop_init(&f->loop) != 0)
        return -1;
    memstore *ms = calloc(1, sizeof *ms);
    ms->base.ops = &memstore_ops;
    ms->loop = &f->loop;
    f->mem = &ms->base;
    open_tiers(f, 1, 3600 * 1000, f->mem);
    *state = f;
    return 0;
}

static int teardown(void **state) {
    fx *f = *state;
    if (f->t)
        close_tiers(f);
    int rc = uv_loop_close(&f->loop);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", f->dir);
    rc |= system(cmd);
    free(f);
    return rc == 0 ? 0 : -1;
}

/* ------------------------------------------------------------------------ */
/* Calls and what they reported                                              */

typedef struct {
    int calls, status, cold;
    char key[RN_TIERS_KEY_MAX];
    uint64_t size;
} body_result;

static void on_body(void *arg, int status, int cold, const char *key) {
    body_result *r = arg;
    r->calls++;
    r->status = status;
    r->cold = cold;
    snprintf(r->key, sizeof r->key, "%s", key);
}

static body_result write_body(fx *f, uint64_t stream, const void *data, size_t len) {
    body_result r = {0};
    rn_tiers_body_write(f->t, stream, data, len, on_body, &r);
    run(f);
    assert_int_equal(r.calls, 1);
    return r;
}

typedef struct {
    int calls, fd;
    uint64_t fd_off;
} read_result;

static void on_read(void *arg, int fd, uint64_t fd_off) {
    read_result *r = arg;
    r->calls++;
    r->fd = fd;
    r->fd_off = fd_off;
}

/* Reads bytes [off, off + len) of a body into out; returns the fd result. */
static int read_body(fx *f, int cold, const char *key, uint64_t off, size_t len, char *out) {
    read_result r = {0};
    rn_tiers_body_read(f->t, cold, key, off, len, on_read, &r);
    run(f);
    assert_int_equal(r.calls, 1);
    if (r.fd < 0)
        return r.fd;
    assert_int_equal(pread(r.fd, out, len, (off_t)r.fd_off), (ssize_t)len);
    close(r.fd);
    return 0;
}

typedef struct {
    int calls, status;
    char id[80];
} part_result;

static void on_part(void *arg, int status, const char *id) {
    part_result *r = arg;
    r->calls++;
    r->status = status;
    snprintf(r->id, sizeof r->id, "%s", status == 0 ? id : "");
}

static void stage(fx *f, uint64_t stream, uint64_t inc, const char *body, char *id_out) {
    part_result r = {0};
    rn_tiers_part_stage(f->t, stream, inc, body, strlen(body), on_part, &r);
    run(f);
    assert_int_equal(r.calls, 1);
    assert_int_equal(r.status, 0);
    strcpy(id_out, r.id);
}

static void expect_staged(fx *f, uint64_t stream, uint64_t count, uint64_t bytes) {
    uint64_t c = 99, b = 99;
    assert_int_equal(rn_tiers_parts_staged(f->t, stream, &c, &b), 0);
    assert_int_equal(c, count);
    assert_int_equal(b, bytes);
}

typedef struct {
    int calls, status, cold;
    char key[RN_TIERS_KEY_MAX];
    uint64_t size;
    char seen[256]; /* what observe saw */
} assembly;

static void observe(void *arg, const uint8_t *data, size_t len) {
    assembly *a = arg;
    strncat(a->seen, (const char *)data, len);
}

static void on_assembled(void *arg, int status, int cold, const char *key, uint64_t size) {
    assembly *a = arg;
    a->calls++;
    a->status = status;
    a->cold = cold;
    a->size = size;
    snprintf(a->key, sizeof a->key, "%s", key);
}

static assembly assemble(fx *f, uint64_t stream, uint64_t inc, const char *const *ids, size_t n,
                         uint64_t max_bytes) {
    assembly a = {0};
    rn_tiers_parts_assemble(f->t, stream, inc, ids, n, max_bytes, observe, &a, on_assembled, &a);
    run(f);
    assert_int_equal(a.calls, 1);
    return a;
}

static void on_status(void *arg, int status) {
    int *r = arg;
    *r = status;
}

/* ------------------------------------------------------------------------ */
/* Snapshot bodies over the local directory                                  */

static void test_small_bodies_stay_local_large_ones_go_cold(void **state) {
    fx *f = *state;
    body_result small = write_body(f, 7, "0123456789", 10);
    assert_int_equal(small.status, 0);
    assert_int_equal(small.cold, 0);
    size_t big_len = 1u << 20;
    char *big = malloc(big_len);
    for (size_t i = 0; i < big_len; i++)
        big[i] = (char)('a' + i % 26);
    body_result large = write_body(f, 7, big, big_len);
    assert_int_equal(large.status, 0);
    assert_int_equal(large.cold, 1);
    assert_string_not_equal(small.key, large.key);
    char out[16] = "";
    assert_int_equal(read_body(f, small.cold, small.key, 3, 4, out), 0);
    assert_memory_equal(out, "3456", 4);
    assert_int_equal(read_body(f, large.cold, large.key, big_len - 5, 5, out), 0);
    assert_memory_equal(out, big + big_len - 5, 5);
    free(big);
}

static void test_without_a_cold_store_every_body_is_local(void **state) {
    fx *f = *state;
    close_tiers(f);
    open_tiers(f, 0, 1000, NULL);
    assert_false(rn_tiers_keeps_parts(f->t));
    size_t len = 2u << 20;
    char *big = calloc(1, len);
    body_result r = write_body(f, 1, big, len);
    assert_int_equal(r.status, 0);
    assert_int_equal(r.cold, 0);
    free(big);
}

static void test_a_dropped_body_no_longer_reads(void **state) {
    fx *f = *state;
    body_result r = write_body(f, 3, "body", 4);
    char out[4];
    assert_int_equal(read_body(f, r.cold, r.key, 0, 4, out), 0);
    rn_tiers_body_drop(f->t, r.cold, r.key);
    run(f);
    assert_int_equal(read_body(f, r.cold, r.key, 0, 4, out), -ENOENT);
}

static const char *kept_key;

static int only_kept(void *ctx, int cold, const char *key) {
    (void)ctx, (void)cold;
    return strcmp(key, kept_key) == 0;
}

static void test_the_recovery_sweep_keeps_referenced_bodies_only(void **state) {
    fx *f = *state;
    close_tiers(f); /* the sweep runs before the tiers start: reopen, unstarted */
    open_tiers(f, 1, 1000, NULL);
    size_t big_len = 1u << 20;
    char *big = calloc(1, big_len);
    body_result keep = write_body(f, 1, "keep", 4);
    body_result lose = write_body(f, 1, "lose", 4);
    body_result cold = write_body(f, 2, big, big_len);
    assert_int_equal(cold.cold, 1);
    kept_key = keep.key;
    rn_tiers_sweep_bodies(f->t, only_kept, NULL);
    char out[4];
    assert_int_equal(read_body(f, keep.cold, keep.key, 0, 4, out), 0);
    assert_int_equal(read_body(f, lose.cold, lose.key, 0, 4, out), -ENOENT);
    assert_int_equal(read_body(f, cold.cold, cold.key, 0, 4, out), -ENOENT);
    free(big);
}

/* ------------------------------------------------------------------------ */
/* Staged parts over the local directory                                     */

static void test_parts_are_counted_assembled_in_order_and_released(void **state) {
    fx *f = *state;
    char a[80], b[80], c[80];
    stage(f, 5, 1, "ab", a);
    stage(f, 5, 1, "cd", b);
    stage(f, 5, 1, "ef", c);
    assert_int_equal(strlen(a), 32);
    assert_string_not_equal(a, b);
    expect_staged(f, 5, 3, 6);
    assert_int_equal(rn_tiers_parts_claim(f->t, 5), 0);
    assert_int_equal(rn_tiers_parts_claim(f->t, 5), -EBUSY);
    const char *ids[] = {c, a};
    assembly got = assemble(f, 5, 1, ids, 2, 1024);
    assert_int_equal(got.status, 0);
    assert_int_equal(got.cold, 1);
    assert_int_equal(got.size, 4);
    assert_string_equal(got.seen, "efab");
    char out[4];
    assert_int_equal(read_body(f, got.cold, got.key, 0, 4, out), 0);
    assert_memory_equal(out, "efab", 4);
    expect_staged(f, 5, 3, 6); /* assembly uses nothing up */
    rn_tiers_parts_release(f->t, 5, 1, ids, 2);
    run(f);
    expect_staged(f, 5, 1, 2);                          /* listed again: b is left */
    assert_int_equal(rn_tiers_parts_claim(f->t, 5), 0); /* the claim ended */
    rn_tiers_parts_unclaim(f->t, 5);
}

static void test_an_assembly_refuses_missing_parts_and_too_many_bytes(void **state) {
    fx *f = *state;
    char a[80];
    stage(f, 6, 1, "abc", a);
    assert_int_equal(rn_tiers_parts_claim(f->t, 6), 0);
    const char *missing[] = {a, "nosuchpart"};
    assert_int_equal(assemble(f, 6, 1, missing, 2, 1024).status, -ENOENT);
    const char *dir[] = {"."};
    assert_int_equal(assemble(f, 6, 1, dir, 1, 1024).status, -ENOENT);
    const char *one[] = {a};
    assembly big = assemble(f, 6, 1, one, 1, 2);
    assert_int_equal(big.status, -EFBIG);
    assert_string_equal(big.seen, ""); /* refused before copying */
    assert_int_equal(assemble(f, 6, 1, one, 1, 3).status, 0);
    rn_tiers_parts_unclaim(f->t, 6);
    expect_staged(f, 6, 1, 3);
}

static void test_a_discard_removes_every_part_and_ends_the_claim(void **state) {
    fx *f = *state;
    char a[80], b[80];
    stage(f, 8, 1, "one", a);
    stage(f, 8, 1, "two", b);
    stage(f, 8, 2, "other incarnation", a);
    expect_staged(f, 8, 3, 23); /* every incarnation's parts count */
    assert_int_equal(rn_tiers_parts_claim(f->t, 8), 0);
    int status = 1;
    rn_tiers_parts_discard(f->t, 8, on_status, &status);
    run(f);
    assert_int_equal(status, 0);
    expect_staged(f, 8, 0, 0);
    assert_int_equal(rn_tiers_parts_claim(f->t, 8), 0);
    rn_tiers_parts_unclaim(f->t, 8);
    close_tiers(f); /* and nothing comes back from the directory */
    open_tiers(f, 1, 1000, NULL);
    expect_staged(f, 8, 0, 0);
}

static uint64_t fixture_epoch(void *ctx, uint64_t stream) {
    (void)stream;
    return *(const uint64_t *)ctx;
}

static void test_counts_made_under_another_epoch_are_listed_again(void **state) {
    fx *f = *state;
    uint64_t epoch = 5; /* this node leads the stream's group in term 5 */
    rn_tiers_parts_epoch(f->t, fixture_epoch, &epoch);
    char a[80];
    stage(f, 11, 1, "abc", a);
    expect_staged(f, 11, 1, 3);
    char path[PATH_MAX]; /* another leader staged a part in the shared store */
    snprintf(path, sizeof path, "%s/cold/parts/%016llx/1/%032d", f->dir, 11ull, 7);
    FILE *o = fopen(path, "w");
    assert_non_null(o);
    fputs("defg", o);
    fclose(o);
    expect_staged(f, 11, 1, 3); /* the same leadership: its count stands */
    epoch = 9;                  /* led again (after another node), in a later term */
    expect_staged(f, 11, 2, 7);
}

static void test_a_destroyed_streams_parts_are_dropped(void **state) {
    fx *f = *state;
    char a[80];
    stage(f, 12, 1, "abc", a);
    stage(f, 12, 2, "de", a);
    expect_staged(f, 12, 2, 5);
    rn_tiers_parts_drop(f->t, 12);
    run(f);
    expect_staged(f, 12, 0, 0); /* walked again: none is left */
}

static void test_counts_are_listed_again_after_a_reopen(void **state) {
    fx *f = *state;
    char a[80];
    stage(f, 9, 4, "12345", a);
    stage(f, 9, 4, "678", a);
    close_tiers(f);
    open_tiers(f, 1, 1000, NULL);
    expect_staged(f, 9, 2, 8);
}

static void stop_loop(uv_timer_t *t) {
    uv_close((uv_handle_t *)t, NULL);
}

static void test_the_sweep_removes_parts_older_than_the_grace_period(void **state) {
    fx *f = *state;
    close_tiers(f);
    open_tiers(f, 1, 1000, NULL); /* swept every 250 ms */
    char old[80], young[80];
    stage(f, 10, 1, "old", old);
    stage(f, 10, 1, "young", young);
    expect_staged(f, 10, 2, 8);
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/cold/parts/%016llx/1/%s", f->dir, 10ull, old);
    struct utimbuf hour_ago = {time(NULL) - 3600, time(NULL) - 3600};
    assert_int_equal(utime(path, &hour_ago), 0);
    rn_tiers_start(f->t);
    static uv_timer_t wait; /* outlives this test until the loop closed it */
    uv_timer_init(&f->loop, &wait);
    uv_timer_start(&wait, stop_loop, 400, 0);
    while (!uv_is_closing((uv_handle_t *)&wait)) /* the sweep timer keeps the loop alive */
        uv_run(&f->loop, UV_RUN_ONCE);
    expect_staged(f, 10, 1, 5);
    struct stat sb;
    assert_int_equal(stat(path, &sb), -1);
}

/* ------------------------------------------------------------------------ */
/* Over an asynchronous store                                                */

static void on_count(void *arg, uint64_t count, uint64_t bytes) {
    uint64_t *r = arg;
    r[0]++;
    r[1] = count;
    r[2] = bytes;
}

static void test_async_counts_are_known_once_listed(void **state) {
    fx *f = *state;
    uint64_t c, b;
    assert_int_equal(rn_tiers_parts_staged(f->t, 1, &c, &b), -EAGAIN);
    uint64_t first[3] = {0}, second[3] = {0};
    rn_tiers_parts_count(f->t, 1, on_count, first);
    rn_tiers_parts_count(f->t, 1, on_count, second);
    assert_int_equal(first[0], 0); /* not before the listing reported */
    run(f);
    assert_int_equal(first[0], 1);
    assert_int_equal(second[0], 1);
    assert_int_equal(first[1], 0);
    expect_staged(f, 1, 0, 0);
    part_result r = {0};
    rn_tiers_part_stage(f->t, 1, 1, "abcd", 4, on_part, &r);
    assert_int_equal(r.calls, 0);
    expect_staged(f, 1, 0, 4); /* counted while it uploads */
    run(f);
    assert_int_equal(r.status, 0);
    expect_staged(f, 1, 1, 4);
    assert_int_equal(mem_count_under(f->mem, "parts/"), 1);
}

static void test_async_parts_assemble_and_discard(void **state) {
    fx *f = *state;
    char a[80], b[80];
    uint64_t counted[3] = {0};
    rn_tiers_parts_count(f->t, 2, on_count, counted);
    run(f);
    stage(f, 2, 1, "xy", a);
    stage(f, 2, 1, "z", b);
    assert_int_equal(rn_tiers_parts_claim(f->t, 2), 0);
    const char *ids[] = {b, a};
    assembly got = assemble(f, 2, 1, ids, 2, 100);
    assert_int_equal(got.status, 0);
    assert_int_equal(got.cold, 1);
    assert_string_equal(got.seen, "zxy");
    read_result rr = {0};
    rn_tiers_body_read(f->t, got.cold, got.key, 1, 2, on_read, &rr);
    assert_int_equal(rr.calls, 0);
    run(f);
    char out[2];
    assert_int_equal(pread(rr.fd, out, 2, (off_t)rr.fd_off), 2);
    close(rr.fd);
    assert_memory_equal(out, "xy", 2);
    const char *missing[] = {"gone"};
    assert_int_equal(assemble(f, 2, 1, missing, 1, 100).status, -ENOENT);
    int status = 1;
    rn_tiers_parts_discard(f->t, 2, on_status, &status);
    assert_int_equal(status, 1);
    run(f);
    assert_int_equal(status, 0);
    assert_int_equal(mem_count_under(f->mem, "parts/"), 0);
    expect_staged(f, 2, 0, 0);
}

static void test_async_large_bodies_go_to_the_cold_backend(void **state) {
    fx *f = *state;
    size_t len = 1u << 20;
    char *big = calloc(1, len);
    body_result r = {0};
    rn_tiers_body_write(f->t, 4, big, len, on_body, &r);
    assert_int_equal(r.calls, 0);
    run(f);
    assert_int_equal(r.status, 0);
    assert_int_equal(r.cold, 1);
    assert_int_equal(mem_count_under(f->mem, "snapshots/"), 1);
    rn_tiers_body_drop(f->t, r.cold, r.key);
    run(f);
    assert_int_equal(mem_count_under(f->mem, "snapshots/"), 0);
    free(big);
}

/* The local directory lists one level with list, every depth with walk. */
typedef struct {
    int found, done, status;
} listing_seen;

static void seen_entry(void *arg, const char *key, uint64_t size) {
    listing_seen *l = arg;
    l->found |= strcmp(key, "top") == 0 && size == 1         ? 1
                : strcmp(key, "b1/state") == 0 && size == 2  ? 2
                : strcmp(key, "b1/data/p") == 0 && size == 3 ? 4
                                                             : 8;
}

static void seen_done(void *arg, int status) {
    listing_seen *l = arg;
    l->done = 1;
    l->status = status;
}

static void test_localdir_lists_one_level_or_every_depth(void **state) {
    fx *f = *state;
    char dir[128];
    snprintf(dir, sizeof dir, "%s/ld", f->dir);
    rn_store *st = rn_localdir_open(&f->loop, dir);
    assert_non_null(st);
    const char *keys[] = {"top", "b1/state", "b1/data/p"};
    listing_seen put_done[3] = {{0}};
    for (int i = 0; i < 3; i++)
        st->ops->put(st, keys[i], "xyz", (size_t)i + 1, seen_done, &put_done[i]);
    uv_run(&f->loop, UV_RUN_DEFAULT);
    for (int i = 0; i < 3; i++)
        assert_true(put_done[i].done && put_done[i].status == 0);
    listing_seen one = {0}, all = {0};
    st->ops->list(st, "", seen_entry, seen_done, &one);
    st->ops->walk(st, "", seen_entry, seen_done, &all);
    uv_run(&f->loop, UV_RUN_DEFAULT);
    assert_true(one.done && one.status == 0 && all.done && all.status == 0);
    assert_int_equal(one.found, 1);
    assert_int_equal(all.found, 7);
    st->ops->close(st);
}

#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
#define A(name) cmocka_unit_test_setup_teardown(name, setup_async, teardown)

int main(void) {
    const struct CMUnitTest tests[] = {
        T(test_small_bodies_stay_local_large_ones_go_cold),
        T(test_without_a_cold_store_every_body_is_local),
        T(test_a_dropped_body_no_longer_reads),
        T(test_the_recovery_sweep_keeps_referenced_bodies_only),
        T(test_parts_are_counted_assembled_in_order_and_released),
        T(test_an_assembly_refuses_missing_parts_and_too_many_bytes),
        T(test_a_discard_removes_every_part_and_ends_the_claim),
        T(test_counts_made_under_another_epoch_are_listed_again),
        T(test_a_destroyed_streams_parts_are_dropped),
        T(test_counts_are_listed_again_after_a_reopen),
        T(test_the_sweep_removes_parts_older_than_the_grace_period),
        A(test_async_counts_are_known_once_listed),
        A(test_async_parts_assemble_and_discard),
        A(test_async_large_bodies_go_to_the_cold_backend),
        T(test_localdir_lists_one_level_or_every_depth),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
