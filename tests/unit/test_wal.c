/*
 * test_wal.c - unit tests for the write-ahead log (src/log/wal.{h,c}).
 *
 * How: every test gets a fresh temporary data directory (mkdtemp) and its own
 * libuv loop. A "session" recovers the log, opens it, submits entries and
 * runs the loop until every callback fired, then closes it, like one run of
 * the server. Payloads are generated deterministically from their index, so
 * recovery output can be compared byte for byte with what was submitted.
 * Crashes are simulated by editing segment files between sessions: cutting
 * or extending the newest segment (torn tails), flipping or zeroing bytes of
 * acknowledged batches, deleting segments or the log head, or writing
 * damaged segment headers. The on-disk layout used for those edits is the
 * one log/segment.h documents: <dir>/wal/<20-digit>.log, a 40-byte header
 * {magic, segment number, previous segment's valid end, salt, crc}, then
 * batches {32-byte batch header {magic "RNB2", records, sequence number,
 * bytes, crc32c(salt || first 24 bytes)}, records {u32 len, u32 crc32c(len
 * bytes || payload), payload}}, and <dir>/wal/HEAD with two slots naming the
 * newest segment; little-endian. The helpers that build these bytes are
 * written here from that description, not taken from the log's code.
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

#include "log/wal.h"
#include "util/crc32c.h"

#define HEADER 40
#define BATCH 32

/* ------------------------------------------------------------------------ */
/* Fixture: a temporary directory and a loop                                 */

typedef struct {
    char dir[64];
    uv_loop_t loop;
} fx;

static int setup(void **state) {
    fx *f = calloc(1, sizeof *f);
    assert_non_null(f);
    strcpy(f->dir, "/tmp/runnel-wal-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    assert_int_equal(uv_loop_init(&f->loop), 0);
    *state = f;
    return 0;
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static int teardown(void **state) {
    fx *f = *state;
    assert_int_equal(uv_loop_close(&f->loop), 0);
    nftw(f->dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    free(f);
    return 0;
}

static void seg_path(const fx *f, uint64_t n, char *out, size_t cap) {
    snprintf(out, cap, "%s/wal/%020llu.log", f->dir, (unsigned long long)n);
}

static int seg_exists(const fx *f, uint64_t n) {
    char p[PATH_MAX];
    seg_path(f, n, p, sizeof p);
    return access(p, F_OK) == 0;
}

static uint64_t seg_size(const fx *f, uint64_t n) {
    char p[PATH_MAX];
    seg_path(f, n, p, sizeof p);
    struct stat st;
    assert_int_equal(stat(p, &st), 0);
    return (uint64_t)st.st_size;
}

static size_t count_segments(const fx *f) {
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s/wal", f->dir);
    DIR *d = opendir(p);
    assert_non_null(d);
    size_t n = 0;
    struct dirent *de;
    while ((de = readdir(d)))
        n += strlen(de->d_name) == 24 && strcmp(de->d_name + 20, ".log") == 0;
    closedir(d);
    return n;
}

static uint8_t *read_file(const char *path, size_t *len) {
    FILE *fp = fopen(path, "rb");
    assert_non_null(fp);
    fseek(fp, 0, SEEK_END);
    long n = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    uint8_t *data = malloc(n > 0 ? (size_t)n : 1);
    assert_non_null(data);
    assert_int_equal(fread(data, 1, (size_t)n, fp), (size_t)n);
    fclose(fp);
    *len = (size_t)n;
    return data;
}

static void append_bytes(const fx *f, uint64_t seg, const void *data, size_t len) {
    char p[PATH_MAX];
    seg_path(f, seg, p, sizeof p);
    int fd = open(p, O_WRONLY | O_APPEND);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, data, len), (ssize_t)len);
    close(fd);
}

static void poke_byte(const fx *f, uint64_t seg, uint64_t off, uint8_t xor_mask) {
    char p[PATH_MAX];
    seg_path(f, seg, p, sizeof p);
    int fd = open(p, O_RDWR);
    assert_true(fd >= 0);
    uint8_t c;
    assert_int_equal(pread(fd, &c, 1, (off_t)off), 1);
    c ^= xor_mask;
    assert_int_equal(pwrite(fd, &c, 1, (off_t)off), 1);
    close(fd);
}

static void truncate_segment(const fx *f, uint64_t seg, uint64_t len) {
    char p[PATH_MAX];
    seg_path(f, seg, p, sizeof p);
    assert_int_equal(truncate(p, (off_t)len), 0);
}

static void put_u32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void put_u64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get_u64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

/* A u64 field at `off` of segment n's header. */
static uint64_t header_field(const fx *f, uint64_t n, size_t off) {
    char p[PATH_MAX];
    seg_path(f, n, p, sizeof p);
    size_t len;
    uint8_t *data = read_file(p, &len);
    assert_true(len >= HEADER);
    uint64_t v = get_u64(data + off);
    free(data);
    return v;
}

/* The "previous segment's valid end" field of segment n's header. */
static uint64_t header_prev_end(const fx *f, uint64_t n) {
    return header_field(f, n, 16);
}

static uint64_t seg_salt(const fx *f, uint64_t n) {
    return header_field(f, n, 24);
}

/* Builds a header as segment.h documents it (used to forge damaged ones). */
static void make_header(uint8_t h[HEADER], uint64_t seg, uint64_t prev_end, uint64_t salt) {
    static const uint8_t magic[8] = {'R', 'N', 'W', 'A', 'L', 0, 0, 2};
    memcpy(h, magic, 8);
    put_u64(h + 8, seg);
    put_u64(h + 16, prev_end);
    put_u64(h + 24, salt);
    put_u32(h + 32, rn_crc32c(0, h, 32));
    put_u32(h + 36, 0);
}

/* Builds one record frame {len, crc, payload}; returns its size. */
static size_t make_frame(uint8_t *out, const uint8_t *payload, uint32_t len) {
    put_u32(out, len);
    put_u32(out + 4, rn_crc32c(rn_crc32c(0, out, 4), payload, len));
    memcpy(out + 8, payload, len);
    return 8 + (size_t)len;
}

/* The salt field of segment n's header. */
static uint64_t seg_salt(const fx *f, uint64_t n);

/* Builds a batch header for a segment with this salt. */
static void make_batch_header(uint8_t h[BATCH], uint64_t salt, uint32_t records, uint64_t seq,
                              uint64_t bytes) {
    put_u32(h, 0x32424e52u); /* "RNB2" */
    put_u32(h + 4, records);
    put_u64(h + 8, seq);
    put_u64(h + 16, bytes);
    uint8_t s[8];
    put_u64(s, salt);
    put_u32(h + 24, rn_crc32c(rn_crc32c(0, s, 8), h, 24));
    put_u32(h + 28, 0);
}

/* ------------------------------------------------------------------------ */
/* Payloads and recovery output                                              */

/* Payload i: deterministic bytes; length varies, including 0 and a large one. */
static size_t payload_len(int i) {
    if (i % 17 == 5)
        return 0;
    if (i == 23)
        return 300000;
    return (size_t)(1 + (i * 37) % 257);
}

static uint8_t *payload_make(int i, size_t *len) {
    *len = payload_len(i);
    uint8_t *p = malloc(*len ? *len : 1);
    assert_non_null(p);
    for (size_t k = 0; k < *len; k++)
        p[k] = (uint8_t)(i * 131 + k * 7 + (k >> 8));
    return p;
}

typedef struct {
    uint8_t **data;
    size_t *len;
    size_t n, cap;
} recs;

static int collect(void *arg, const uint8_t *payload, size_t len) {
    recs *r = arg;
    if (r->n == r->cap) {
        r->cap = r->cap ? r->cap * 2 : 16;
        r->data = realloc(r->data, r->cap * sizeof *r->data);
        r->len = realloc(r->len, r->cap * sizeof *r->len);
        assert_non_null(r->data);
        assert_non_null(r->len);
    }
    r->data[r->n] = malloc(len ? len : 1);
    assert_non_null(r->data[r->n]);
    memcpy(r->data[r->n], payload, len);
    r->len[r->n] = len;
    r->n++;
    return 0;
}

static void recs_free(recs *r) {
    for (size_t i = 0; i < r->n; i++)
        free(r->data[i]);
    free(r->data);
    free(r->len);
    memset(r, 0, sizeof *r);
}

/* Asserts that r holds exactly the payloads with the given indices, in order. */
static void expect_payloads(const recs *r, const int *ids, size_t n) {
    if (r->n != n)
        fail_msg("recovered %zu records, want %zu", r->n, n);
    for (size_t i = 0; i < n; i++) {
        size_t len;
        uint8_t *want = payload_make(ids[i], &len);
        if (r->len[i] != len || memcmp(r->data[i], want, len) != 0)
            fail_msg("record %zu differs from payload %d", i, ids[i]);
        free(want);
    }
}

static void expect_range(const recs *r, int first, int count) {
    int *ids = malloc((size_t)(count > 0 ? count : 1) * sizeof *ids);
    assert_non_null(ids);
    for (int i = 0; i < count; i++)
        ids[i] = first + i;
    expect_payloads(r, ids, (size_t)count);
    free(ids);
}

static int recover(fx *f, uint64_t from, recs *r, rn_wal_recovery *rec) {
    return rn_wal_recover(f->dir, from, collect, r, rec);
}

/* Offset of the first occurrence of needle in segment seg (fails if absent). */
static uint64_t find_in_segment(const fx *f, uint64_t seg, const uint8_t *needle, size_t n) {
    char p[PATH_MAX];
    seg_path(f, seg, p, sizeof p);
    size_t len;
    uint8_t *data = read_file(p, &len);
    const uint8_t *at = memmem(data, len, needle, n);
    assert_non_null(at);
    uint64_t off = (uint64_t)(at - data);
    free(data);
    return off;
}

/* The whole content of segment seg (caller frees). */
static uint8_t *segment_bytes(const fx *f, uint64_t seg, size_t *len) {
    char p[PATH_MAX];
    seg_path(f, seg, p, sizeof p);
    return read_file(p, len);
}

/* Recovery refuses (RN_WAL_CORRUPT) twice in a row, replaying nothing,
 * and leaves segment seg byte for byte as it was: a refusal changes nothing
 * on disk. Returns what it found lost. */
static rn_wal_damage expect_refused_unchanged(fx *f, uint64_t seg) {
    size_t before_len, after_len;
    uint8_t *before = segment_bytes(f, seg, &before_len);
    rn_wal_recovery rec;
    for (int i = 0; i < 2; i++) {
        recs r = {0};
        assert_int_equal(recover(f, 0, &r, &rec), RN_WAL_CORRUPT);
        assert_int_equal(r.n, 0);
        assert_true(rec.damage.kind != RN_WAL_INTACT);
        assert_true(strlen(rec.damage.what) > 0);
        recs_free(&r);
    }
    uint8_t *after = segment_bytes(f, seg, &after_len);
    assert_int_equal(after_len, before_len);
    assert_memory_equal(after, before, before_len);
    free(before);
    free(after);
    return rec.damage;
}

/* The records rn_wal_damaged_records() reports after damage d. */
static void damaged_records(fx *f, uint64_t from, const rn_wal_damage *d, recs *r) {
    assert_int_equal(rn_wal_damaged_records(f->dir, from, d, 1, collect, r), 0);
}

/* The records rn_wal_damaged_records() reports before damage d. */
static void records_before(fx *f, uint64_t from, const rn_wal_damage *d, recs *r) {
    assert_int_equal(rn_wal_damaged_records(f->dir, from, d, 0, collect, r), 0);
}

/* ------------------------------------------------------------------------ */
/* Writing sessions                                                          */

typedef struct tracker tracker;

typedef struct {
    rn_wal_entry entry;
    tracker *t;
    int id;
    uint8_t *payload;
    size_t len;
    int done;                   /* callbacks received */
    int status;                 /* last status */
    int order;                  /* position among completions */
    int batch;                  /* batch hooks run before this callback */
    int after_sync_runs;        /* times the after_sync hook ran */
    int after_sync_before_done; /* the hook ran before the callback */
    int after_sync_status;      /* what the callback found in the entry */
} item;

struct tracker {
    int completed;
    int batches;
};

static void item_done(rn_wal_entry *e, int status) {
    item *it = e->arg;
    it->done++;
    it->status = status;
    it->order = it->t->completed++;
    it->batch = it->t->batches;
    it->after_sync_status = e->after_sync_status;
}

/* An after_sync hook that fails for payload id 3. */
static int item_after_sync(rn_wal_entry *e) {
    item *it = e->arg;
    it->after_sync_runs++;
    it->after_sync_before_done = it->done == 0;
    return it->id == 3 ? -EIO : 0;
}

static void count_batch(void *arg) {
    tracker *t = arg;
    t->batches++;
}

/* Prepares items for payload ids first..first+n-1; entries use 1..4 pieces. */
static item *items_new(tracker *t, int first, int n) {
    item *v = calloc((size_t)n, sizeof *v);
    assert_non_null(v);
    for (int i = 0; i < n; i++) {
        item *it = &v[i];
        it->t = t;
        it->id = first + i;
        it->payload = payload_make(it->id, &it->len);
        it->order = -1;
        int pieces = 1 + it->id % RN_WAL_MAX_PIECES;
        size_t pos = 0;
        for (int p = 0; p < pieces; p++) {
            size_t take = p + 1 == pieces ? it->len - pos : (it->len - pos) / 2;
            it->entry.piece[p].iov_base = it->payload + pos;
            it->entry.piece[p].iov_len = take;
            pos += take;
        }
        it->entry.pieces = pieces;
        it->entry.done = item_done;
        it->entry.arg = it;
    }
    return v;
}

static void items_free(item *v, int n) {
    for (int i = 0; i < n; i++)
        free(v[i].payload);
    free(v);
}

/* Recovers (discarding records) and opens the log for writing. */
static rn_wal *open_log(fx *f, uint64_t segment_bytes, tracker *t) {
    recs r = {0};
    rn_wal_recovery rec;
    assert_int_equal(recover(f, 0, &r, &rec), 0);
    recs_free(&r);
    rn_wal_options o = {.segment_bytes = segment_bytes};
    int err = 0;
    rn_wal *w = rn_wal_open(&f->loop, f->dir, &rec, &o, &err);
    assert_non_null(w);
    if (t)
        rn_wal_set_batch_hook(w, count_batch, t);
    return w;
}

static void run(fx *f) {
    uv_run(&f->loop, UV_RUN_DEFAULT);
}

/* Submits items one batch at a time (each waits for the previous). */
static void submit_each(fx *f, rn_wal *w, item *v, int n) {
    for (int i = 0; i < n; i++) {
        rn_wal_submit(w, &v[i].entry);
        run(f);
        assert_int_equal(v[i].done, 1);
    }
}

/* Submits all items before running the loop. */
static void submit_all(fx *f, rn_wal *w, item *v, int n) {
    for (int i = 0; i < n; i++)
        rn_wal_submit(w, &v[i].entry);
    run(f);
}

/* Submits v[0..n) so that they travel in one batch: `lead` is submitted
 * first and starts a batch at once, v gather behind it. With `fail`, the
 * batch holding v (not the lead's) is made to fail. */
static void submit_one_batch(fx *f, rn_wal *w, item *lead, item *v, int n, int fail) {
    rn_wal_submit(w, &lead->entry);
    if (fail)
        rn_wal_inject_sync_failures(w, 1);
    for (int i = 0; i < n; i++)
        rn_wal_submit(w, &v[i].entry);
    run(f);
    assert_int_equal(lead->done, 1);
    assert_int_equal(lead->status, 0);
    for (int i = 0; i < n; i++)
        assert_int_equal(v[i].batch, v[0].batch);
}

/* One complete session writing payloads first..first+n-1; all must succeed. */
static void session(fx *f, uint64_t segment_bytes, int first, int n) {
    tracker t = {0};
    rn_wal *w = open_log(f, segment_bytes, &t);
    item *v = items_new(&t, first, n);
    submit_all(f, w, v, n);
    for (int i = 0; i < n; i++) {
        assert_int_equal(v[i].done, 1);
        assert_int_equal(v[i].status, 0);
    }
    assert_false(rn_wal_busy(w));
    rn_wal_close(w);
    items_free(v, n);
}

/* ------------------------------------------------------------------------ */
/* Tests: normal operation                                                   */

static void test_recover_of_empty_directory_finds_nothing(void **state) {
    fx *f = *state;
    recs r = {0};
    rn_wal_recovery rec;
    memset(&rec, 0xff, sizeof rec);
    assert_int_equal(recover(f, 0, &r, &rec), 0);
    assert_int_equal(r.n, 0);
    assert_int_equal(rec.records, 0);
    assert_int_equal(rec.last_segment, 0);
    assert_int_equal(rec.torn_bytes, 0);
    assert_int_equal(count_segments(f), 0);
    recs_free(&r);
}

static void test_submitted_records_are_replayed_in_order_byte_exact(void **state) {
    fx *f = *state;
    tracker t = {0};
    rn_wal *w = open_log(f, 64u << 20, &t);
    assert_int_equal(rn_wal_current_segment(w), 1);
    enum { N = 60 };
    item *v = items_new(&t, 0, N);
    /* Some one at a time, the rest in a burst. */
    submit_each(f, w, v, 10);
    submit_all(f, w, v + 10, N - 10);
    /* Ten batches of one, then one of the first of the burst and one of
     * the other 49 (they gathered while it was in flight). */
    assert_int_equal(t.batches, 12);
    uint64_t bytes = 12 * BATCH;
    for (int i = 0; i < N; i++) {
        assert_int_equal(v[i].done, 1);
        assert_int_equal(v[i].status, 0);
        bytes += 8 + v[i].len;
    }
    assert_int_equal(rn_wal_bytes_written(w), bytes);
    rn_wal_close(w);
    items_free(v, N);

    recs r = {0};
    rn_wal_recovery rec;
    assert_int_equal(recover(f, 0, &r, &rec), 0);
    expect_range(&r, 0, N);
    assert_int_equal(rec.records, N);
    assert_int_equal(rec.torn_bytes, 0);
    assert_int_equal(rec.last_segment, 1);
    assert_int_equal(rec.last_valid_end, HEADER + bytes);
    assert_int_equal(seg_size(f, 1), HEADER + bytes);
    recs_free(&r);
}

static void test_after_sync_runs_once_per_durable_entry_before_its_callback(void **state) {
    fx *f = *state;
    tracker t = {0};
    rn_wal *w = open_log(f, 64u << 20, &t);
    enum { N = 8 };
    item *lead = items_new(&t, 100, 2);
    item *v = items_new(&t, 0, 2 * N);
    for (int i = 0; i < 2 * N; i++)
        v[i].entry.after_sync = item_after_sync;
    lead[0].entry.after_sync = lead[1].entry.after_sync = item_after_sync;
    submit_one_batch(f, w, &lead[0], v, N, 0);
    for (int i = 0; i < N; i++) {
        assert_int_equal(v[i].status, 0);
        assert_int_equal(v[i].after_sync_runs, 1);
        assert_true(v[i].after_sync_before_done);
        assert_int_equal(v[i].after_sync_status, v[i].id == 3 ? -EIO : 0);
    }
    /* A failed batch: nothing is durable, so the hook does not run. */
    submit_one_batch(f, w, &lead[1], v + N, N, 1);
    for (int i = N; i < 2 * N; i++) {
        assert_true(v[i].status < 0);
        assert_int_equal(v[i].after_sync_runs, 0);
        assert_int_equal(v[i].after_sync_status, 0);
    }
    assert_int_equal(lead[1].after_sync_runs, 1);
    rn_wal_close(w);
    items_free(v, 2 * N);
    items_free(lead, 2);
}

/* A callback that submits another entry (as an HTTP answer does when it
 * runs the next pipelined request), and a batch hook that makes the next
 * batch fail. */
static rn_wal *reentry_log;
static item *reentry_next;
static void item_done_then_submit(rn_wal_entry *e, int status) {
    item_done(e, status);
    if (reentry_next) {
        rn_wal_submit(reentry_log, &reentry_next->entry);
        reentry_next = NULL;
    }
}
static int hook_fails_next;
static void fail_next_batch(void *arg) {
    count_batch(arg);
    if (hook_fails_next) {
        rn_wal_inject_sync_failures(reentry_log, 1);
        hook_fails_next = 0;
    }
}

static void test_an_entry_submitted_by_a_callback_waits_for_the_batch_hook(void **state) {
    fx *f = *state;
    tracker t = {0};
    rn_wal *w = open_log(f, 64u << 20, NULL);
    rn_wal_set_batch_hook(w, fail_next_batch, &t);
    item *v = items_new(&t, 0, 2);
    v[0].entry.done = item_done_then_submit;
    reentry_log = w;
    reentry_next = &v[1];
    hook_fails_next = 1;
    rn_wal_submit(w, &v[0].entry);
    run(f);
    assert_int_equal(v[0].status, 0);
    /* The hook ran after v[0]'s callback submitted v[1]; v[1]'s batch had
     * not started, so the failure the hook injected is v[1]'s. */
    assert_int_equal(v[1].done, 1);
    assert_true(v[1].status < 0);
    rn_wal_close(w);
    items_free(v, 2);
}

static void test_concurrent_submits_share_batches_and_complete_in_order(void **state) {
    fx *f = *state;
    tracker t = {0};
    rn_wal *w = open_log(f, 64u << 20, &t);
    enum { N = 300 };
    item *v = items_new(&t, 0, N);
    for (int i = 0; i < N; i++)
        rn_wal_submit(w, &v[i].entry);
    /* Nothing completes before the loop runs. */
    for (int i = 0; i < N; i++)
        assert_int_equal(v[i].done, 0);
    assert_true(rn_wal_busy(w));
    run(f);
    assert_false(rn_wal_busy(w));
    for (int i = 0; i < N; i++) {
        assert_int_equal(v[i].done, 1);
        assert_int_equal(v[i].status, 0);
        assert_int_equal(v[i].order, i);
    }
    /* The first submit starts a batch at once; the other 299 gather while it
     * is in flight and share the second batch (and its one sync). */
    assert_int_equal(t.batches, 2);
    assert_int_equal(v[0].batch, 0);
    for (int i = 1; i < N; i++)
        assert_int_equal(v[i].batch, 1);
    rn_wal_close(w);
    items_free(v, N);

    recs r = {0};
    rn_wal_recovery rec;
    assert_int_equal(recover(f, 0, &r, &rec), 0);
    expect_range(&r, 0, N);
    recs_free(&r);
}

static void test_records_of_successive_sessions_are_replayed_in_order(void **state) {
    fx *f = *state;
    session(f, 64u << 20, 0, 7);
    session(f, 64u << 20, 7, 5);
    session(f, 64u << 20, 12, 9);
    /* Each open starts a new segment. */
    assert_int_equal(count_segments(f), 3);
    assert_int_equal(header_prev_end(f, 2), seg_size(f, 1));
    assert_int_equal(header_prev_end(f, 3), seg_size(f, 2));
    recs r = {0};
    rn_wal_recovery rec;
    assert_int_equal(recover(f, 0, &r, &rec), 0);
    expect_range(&r, 0, 21);
    assert_int_equal(rec.last_segment, 3);
    recs_free(&r);
}

static void test_segment_rotation_spreads_records_and_replays_all(void **state) {
    fx *f = *state;
    tracker t = {0};
    const uint64_t seg_bytes = 600;
    rn_wal *w = open_log(f, seg_bytes, &t);
    enum { N = 70 };
    item *v = items_new(&t, 100, N); /* ids 100.. avoid the 300 KB payload */
    submit_each(f, w, v, N);
    uint64_t last = rn_wal_current_segment(w);
    rn_wal_close(w);
    items_free(v, N);

    assert_true(last >= 5);
    assert_int_equal(count_segments(f), last);
    for (uint64_t s = 1; s < last; s++) {
        /* A segment is left once it reached segment_bytes, and the next one
         * records exactly where it ended. */
        assert_true(seg_size(f, s) >= seg_bytes);
        assert_int_equal(header_prev_end(f, s + 1), seg_size(f, s));
    }
    recs r = {0};
    rn_wal_recovery rec;
    assert_int_equal(recover(f, 0, &r, &rec), 0);
    expect_range(&r, 100, N);
    assert_int_equal(rec.last_segment, last);
    assert_int_equal(rec.torn_bytes, 0);
    recs_free(&r);
}

static void test_rotate_makes_next_batch_start_a_new_segment(void **state) {
    fx *f = *state;
    tracker t = {0};
    rn_wal *w = open_log(f, 64u << 20, &t);
    item *v = items_new(&t, 0, 6);
    submit_each(f, w, v, 3);
    assert_int_equal(rn_wal_current_segment(w), 1);
    assert_int_equal(rn_wal_rotate(w), 2);
    submit_each(f, w, v + 3, 3);
    assert_int_equal(rn_wal_current_segment(w), 2);
    rn_wal_close(w);
    items_free(v, 6);
    assert_int_equal(header_prev_end(f, 2), seg_size(f, 1));
    recs r = {0};
    rn_wal_recovery rec;
    assert_int_equal(recover(f, 2, &r, &rec), 0);
    expect_range(&r, 3, 3);
    recs_free(&r);
}

static void test_drop_before_removes_older_segments(void **state) {
    fx *f = *state;
    session(f, 64u << 20, 0, 4);              /* segment 1 */
    session(f, 64u << 20, 4, 4);              /* segment 2 */
    session(f, 64u << 20, 8, 4);              /* segment 3 */
    rn_wal *w = open_log(f, 64u << 20, NULL); /* segment 4 */
    rn_wal_drop_before(w, 3);
    assert_false(seg_exists(f, 1));
    assert_false(seg_exists(f, 2));
    assert_true(seg_exists(f, 3));
    assert_true(seg_exists(f, 4));
    rn_wal_close(w);
    recs r = {0};
    rn_wal_recovery rec;
    assert_int_equal(recover(f, 3, &r, &rec), 0);
    expect_range(&r, 8, 4);
    assert_int_equal(rec.last_segment, 4);
    recs_free(&r);
}

static void test_recover_from_segment_skips_earlier_segments(void **state) {
    fx *f = *state;
    session(f, 64u << 20, 0, 5);  /* segment 1 */
    session(f, 64u << 20, 5, 6);  /* segment 2 */
    session(f, 64u << 20, 11, 3); /* segment 3 */
    recs r = {0};
    rn_wal_recovery rec;
    assert_int_equal(recover(f, 2, &r, &rec), 0);
    expect_range(&r, 5, 9);
    assert_int_equal(rec.records, 9);
    recs_free(&r);
    assert_int_equal(recover(f, 3, &r, &rec), 0);
    expect_range(&r, 11, 3);
    recs_free(&r);
    /* Starting past every segment replays nothing, and numbering continues
     * after the starting point so a new segment is not mistaken for an old. */
    assert_int_equal(recover(f, 9, &r, &rec), 0);
    assert_int_equal(r.n, 0);
    assert_int_equal(rec.last_segment, 8);
    recs_free(&r);
    /* Earlier segments were left alone. */
    assert_int_equal(recover(f, 0, &r, &rec), 0);
    expect_range(&r, 0, 14);
    recs_free(&r);
}

static int stop_after_three(void *arg, const uint8_t *payload, size_t len) {
    int *seen = arg;
    (void)payload;
    (void)len;
    return ++*seen == 3 ? 77 : 0;
}

static void test_replay_callback_can_abort_recovery(void **state) {
    fx *f = *state;
    session(f, 64u << 20, 0, 8);
    int seen = 0;
    rn_wal_recovery rec;
    assert_int_equal(rn_wal_recover(f->dir, 0, stop_after_three, &seen, &rec), 77);
    assert_int_equal(seen, 3);
}

/* ------------------------------------------------------------------------ */
/* Tests: torn tails of the newest segment                                   */

/* Writes payloads first..first+n-1 into segment 1, one batch each (each
 * acknowledged before the next is written). */
static void write_acknowledged_batches(fx *f, int first, int n) {
    tracker t = {0};
    rn_wal *w = open_log(f, 64u << 20, &t);
    item *v = items_new(&t, first, n);
    submit_each(f, w, v, n);
    assert_int_equal(t.batches, n);
    rn_wal_close(w);
    items_free(v, n);
}

enum { TORN_N = 10 };

/* Writes payloads 0..TORN_N-1 into segment 1, one batch each, and returns
 * the offset where the last batch starts. */
static uint64_t write_torn_fixture(fx *f) {
    write_acknowledged_batches(f, 0, TORN_N);
    uint64_t end = HEADER;
    for (int i = 0; i < TORN_N - 1; i++)
        end += BATCH + 8 + payload_len(i);
    assert_int_equal(seg_size(f, 1), end + BATCH + 8 + payload_len(TORN_N - 1));
    return end;
}

/* Recovers after the tail of segment 1 was damaged: expects `whole` records
 * replayed, `torn` bytes cut, the file cut to `cut_end`, and a second
 * recovery to find nothing more to cut. */
static void expect_cut(fx *f, int whole, uint64_t torn, uint64_t cut_end) {
    recs r = {0};
    rn_wal_recovery rec;
    assert_int_equal(recover(f, 0, &r, &rec), 0);
    expect_range(&r, 0, whole);
    assert_int_equal(rec.records, whole);
    assert_int_equal(rec.torn_bytes, torn);
    assert_int_equal(rec.last_segment, 1);
    assert_int_equal(rec.last_valid_end, cut_end);
    assert_int_equal(seg_size(f, 1), cut_end);
    recs_free(&r);
    assert_int_equal(recover(f, 0, &r, &rec), 0);
    expect_range(&r, 0, whole);
    assert_int_equal(rec.torn_bytes, 0);
    recs_free(&r);
}

/* Appends a batch of the given payloads to segment seg as the writer
 * would (sequence number seq); with `flip`, one bit of payload k is
 * flipped after its CRC was computed. Returns the batch's size. */
static size_t append_batch(fx *f, uint64_t seg, uint64_t seq, const int *ids, int n, int flip,
                           int k) {
    size_t cap = BATCH, len;
    for (int i = 0; i < n; i++)
        cap += 8 + payload_len(ids[i]);
    uint8_t *b = malloc(cap);
    assert_non_null(b);
    size_t at = BATCH;
    for (int i = 0; i < n; i++) {
        uint8_t *p = payload_make(ids[i], &len);
        size_t fl = make_frame(b + at, p, (uint32_t)len);
        if (flip && i == k) {
            assert_true(len > 0);
            b[at + 8 + len / 2] ^= 0x10;
        }
        at += fl;
        free(p);
    }
    make_batch_header(b, seg_salt(f, seg), (uint32_t)n, seq, at - BATCH);
    append_bytes(f, seg, b, at);
    free(b);
    return at;
}

static void test_torn_tail_cut_inside_last_payload(void **state) {
    fx *f = *state;
    uint64_t last = write_torn_fixture(f);
    uint64_t size = seg_size(f, 1);
    truncate_segment(f, 1, size - 3);
    expect_cut(f, TORN_N - 1, size - 3 - last, last);
}

static void test_torn_tail_cut_inside_last_batch_header(void **state) {
    fx *f = *state;
    uint64_t last = write_torn_fixture(f);
    truncate_segment(f, 1, last + 5);
    expect_cut(f, TORN_N - 1, 5, last);
}

static void test_torn_tail_cut_inside_last_record_frame(void **state) {
    fx *f = *state;
    uint64_t last = write_torn_fixture(f);
    truncate_segment(f, 1, last + BATCH + 5);
    expect_cut(f, TORN_N - 1, BATCH + 5, last);
}

static void test_torn_tail_cut_on_batch_boundary_loses_nothing_else(void **state) {
    fx *f = *state;
    uint64_t last = write_torn_fixture(f);
    truncate_segment(f, 1, last);
    expect_cut(f, TORN_N - 1, 0, last);
}

static void test_torn_tail_of_garbage_bytes_is_cut(void **state) {
    fx *f = *state;
    write_torn_fixture(f);
    uint64_t size = seg_size(f, 1);
    const uint8_t garbage[13] = {0xff, 0xfe, 0xfd, 0xfc, 1, 2, 3, 4, 5, 6, 7, 8, 9};
    append_bytes(f, 1, garbage, sizeof garbage);
    expect_cut(f, TORN_N, sizeof garbage, size);
}

/* Zeros after the batches (a preallocated segment's unused part, or a torn
 * write of zeros) are cut too, but counted apart from torn bytes. */
static void test_zero_tail_is_cut_and_counted_apart(void **state) {
    fx *f = *state;
    write_torn_fixture(f);
    uint64_t size = seg_size(f, 1);
    uint8_t zeros[4096] = {0};
    append_bytes(f, 1, zeros, sizeof zeros);
    recs r = {0};
    rn_wal_recovery rec;
    assert_int_equal(recover(f, 0, &r, &rec), 0);
    expect_range(&r, 0, TORN_N);
    assert_int_equal(rec.torn_bytes, 0);
    assert_int_equal(rec.zero_bytes, sizeof zeros);
    assert_int_equal(seg_size(f, 1), size);
    recs_free(&r);
}

static void test_torn_tail_partial_batch_is_cut(void **state) {
    fx *f = *state;
    write_torn_fixture(f);
    uint64_t size = seg_size(f, 1);
    int ids[] = {40, 41};
    size_t n = append_batch(f, 1, TORN_N + 1, ids, 2, 0, 0);
    truncate_segment(f, 1, size + n - 20); /* the last record's end did not make it */
    expect_cut(f, TORN_N, n - 20, size);
}

static void test_last_batch_record_written_whole_but_bad_is_damage(void **state) {
    /* An interrupted write leaves sectors it did not reach as zeros; a
     * record of the last batch that no such sector touches was written
     * whole, so one that fails its check was damaged afterwards. */
    fx *f = *state;
    write_torn_fixture(f);
    uint64_t size = seg_size(f, 1);
    int ids[] = {40, 41, 42};
    append_batch(f, 1, TORN_N + 1, ids, 3, 1, 0);
    rn_wal_damage d = expect_refused_unchanged(f, 1);
    assert_int_equal(d.kind, RN_WAL_DAMAGED_RECORDS);
    assert_int_equal(d.offset, size);
    assert_non_null(strstr(d.what, "written whole"));
}

static void test_last_batch_header_written_whole_but_bad_is_damage(void **state) {
    fx *f = *state;
    uint64_t last = write_torn_fixture(f);
    poke_byte(f, 1, last + 9, 0x01); /* the batch's sequence number */
    rn_wal_damage d = expect_refused_unchanged(f, 1);
    assert_int_equal(d.kind, RN_WAL_DAMAGED_RECORDS);
    assert_int_equal(d.offset, last);
}

static void test_torn_tail_whole_good_batch_appended_is_replayed(void **state) {
    /* Control for the tests above: a complete, correct batch written by hand
     * is a batch like any other (so the tests above fail for the damage,
     * not for the hand-made framing). */
    fx *f = *state;
    write_torn_fixture(f);
    uint64_t size = seg_size(f, 1);
    int ids[] = {TORN_N, TORN_N + 1};
    size_t n = append_batch(f, 1, TORN_N + 1, ids, 2, 0, 0);
    recs r = {0};
    rn_wal_recovery rec;
    assert_int_equal(recover(f, 0, &r, &rec), 0);
    expect_range(&r, 0, TORN_N + 2);
    assert_int_equal(rec.torn_bytes, 0);
    assert_int_equal(seg_size(f, 1), size + n);
    recs_free(&r);
}

static void test_torn_tail_leaving_only_the_header_replays_nothing(void **state) {
    fx *f = *state;
    write_torn_fixture(f);
    truncate_segment(f, 1, HEADER + 5); /* magic and the low byte of the record count */
    expect_cut(f, 0, 5, HEADER);
}

static void test_writes_after_a_cut_follow_the_surviving_records(void **state) {
    fx *f = *state;
    uint64_t last = write_torn_fixture(f);
    truncate_segment(f, 1, last + 11);
    /* The next session recovers (cutting the tail) and appends 5 more. */
    session(f, 64u << 20, 100, 5);
    assert_int_equal(header_prev_end(f, 2), last);
    recs r = {0};
    rn_wal_recovery rec;
    assert_int_equal(recover(f, 0, &r, &rec), 0);
    int ids[TORN_N - 1 + 5];
    for (int i = 0; i < TORN_N - 1; i++)
        ids[i] = i;
    for (int i = 0; i < 5; i++)
        ids[TORN_N - 1 + i] = 100 + i;
    expect_payloads(&r, ids, TORN_N - 1 + 5);
    assert_int_equal(rec.torn_bytes, 0);
    recs_free(&r);
}

/* Zeroes [from, to) of segment seg, as pages that never reached the disk. */
static void zero_range(const fx *f, uint64_t seg, uint64_t from, uint64_t to) {
    char p[PATH_MAX];
    seg_path(f, seg, p, sizeof p);
    int fd = open(p, O_WRONLY);
    assert_true(fd >= 0);
    size_t n = (size_t)(to - from);
    uint8_t *zeros = calloc(1, n);
    assert_non_null(zeros);
    assert_int_equal(pwrite(fd, zeros, n, (off_t)from), (ssize_t)n);
    close(fd);
    free(zeros);
}

/* A last batch of payloads 23 (300 KB) and 24, 25: many pages. */
static uint64_t write_big_last_batch(fx *f, uint64_t *size) {
    write_acknowledged_batches(f, 0, 3);
    uint64_t start = seg_size(f, 1);
    int ids[] = {23, 24, 25};
    append_batch(f, 1, 4, ids, 3, 0, 0);
    *size = seg_size(f, 1);
    return start;
}

static void test_torn_last_batch_whose_first_page_is_missing_is_cut(void **state) {
    /* The batch's later pages reached the disk, its first (with the batch
     * header) did not: still the unfinished last batch. */
    fx *f = *state;
    uint64_t size, start = write_big_last_batch(f, &size);
    zero_range(f, 1, start, (start / 4096 + 1) * 4096);
    expect_cut(f, 3, size - start, start);
}

static void test_torn_last_batch_with_a_missing_middle_page_is_cut(void **state) {
    fx *f = *state;
    uint64_t size, start = write_big_last_batch(f, &size);
    uint64_t page = (start / 4096 + 20) * 4096;
    zero_range(f, 1, page, page + 4096);
    expect_cut(f, 3, size - start, start);
}

/* ------------------------------------------------------------------------ */
/* Tests: damage to acknowledged records and to segment headers              */

/* Segment 1 holds payloads 0..5, segment 2 payloads 6..9. Returns the offset
 * in segment 1 where record `rec_index` starts. A session's first record
 * travels alone in the first batch, the others share the second. */
static uint64_t write_two_segments(fx *f, int rec_index) {
    session(f, 64u << 20, 0, 6);
    session(f, 64u << 20, 6, 4);
    uint64_t off = HEADER + BATCH;
    for (int i = 0; i < rec_index; i++)
        off += 8 + payload_len(i) + (i == 0 ? BATCH : 0);
    return off;
}

static void expect_corrupt(fx *f) {
    recs r = {0};
    rn_wal_recovery rec;
    assert_int_equal(recover(f, 0, &r, &rec), RN_WAL_CORRUPT);
    recs_free(&r);
}

static void test_flipped_payload_byte_in_older_segment_is_corruption(void **state) {
    fx *f = *state;
    uint64_t off = write_two_segments(f, 2);
    uint64_t size1 = seg_size(f, 1);
    poke_byte(f, 1, off + 8 + payload_len(2) / 2, 0x40);
    expect_corrupt(f);
    /* Nothing was cut: corruption is reported, not repaired. */
    assert_int_equal(seg_size(f, 1), size1);
}

static void test_flipped_byte_in_last_record_of_older_segment_is_corruption(void **state) {
    /* The last record of a segment that has a successor must not be taken
     * for a torn tail: the successor's header says it was acknowledged. */
    fx *f = *state;
    uint64_t off = write_two_segments(f, 5);
    poke_byte(f, 1, off + 8 + payload_len(5) - 1, 0x01);
    expect_corrupt(f);
}

static void test_flipped_length_byte_in_older_segment_is_corruption(void **state) {
    fx *f = *state;
    uint64_t off = write_two_segments(f, 1);
    poke_byte(f, 1, off, 0x02);
    expect_corrupt(f);
}

static void test_older_segment_shorter_than_recorded_end_is_corruption(void **state) {
    fx *f = *state;
    write_two_segments(f, 0);
    truncate_segment(f, 1, seg_size(f, 1) - 1);
    expect_corrupt(f);
}

static void test_bytes_past_recorded_end_of_older_segment_are_ignored(void **state) {
    /* This is how bytes of a failed batch look after the log moved on. */
    fx *f = *state;
    write_two_segments(f, 0);
    uint8_t payload[40], frame[48];
    memset(payload, 'z', sizeof payload);
    size_t n = make_frame(frame, payload, sizeof payload);
    append_bytes(f, 1, frame, n);
    recs r = {0};
    rn_wal_recovery rec;
    assert_int_equal(recover(f, 0, &r, &rec), 0);
    expect_range(&r, 0, 10);
    recs_free(&r);
}

static void test_damaged_header_of_older_segment_is_corruption(void **state) {
    fx *f = *state;
    write_two_segments(f, 0);
    session(f, 64u << 20, 10, 2); /* segment 3 */
    poke_byte(f, 2, 20, 0x10);    /* inside segment 2's prev-end field */
    expect_corrupt(f);
}

static void write_segment_file(fx *f, uint64_t seg, const void *data, size_t len) {
    char p[PATH_MAX];
    seg_path(f, seg, p, sizeof p);
    int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, data, len), (ssize_t)len);
    close(fd);
}

/* Segment 1 holds payloads 0..4 and a newest segment 2 is replaced by `h`;
 * recovery must drop segment 2 and a new session must continue cleanly. */
static void expect_newest_dropped(fx *f, const uint8_t *h, size_t hlen) {
    session(f, 64u << 20, 0, 5);
    write_segment_file(f, 2, h, hlen);
    recs r = {0};
    rn_wal_recovery rec;
    assert_int_equal(recover(f, 0, &r, &rec), 0);
    expect_range(&r, 0, 5);
    assert_int_equal(rec.last_segment, 1);
    assert_int_equal(rec.last_valid_end, seg_size(f, 1));
    assert_false(seg_exists(f, 2));
    recs_free(&r);
    session(f, 64u << 20, 5, 3);
    assert_true(seg_exists(f, 2));
    assert_int_equal(recover(f, 0, &r, &rec), 0);
    expect_range(&r, 0, 8);
    recs_free(&r);
}

static void test_newest_segment_with_empty_file_is_dropped(void **state) {
    expect_newest_dropped(*state, (const uint8_t *)"", 0);
}

static void test_newest_segment_with_partial_header_is_dropped(void **state) {
    uint8_t h[HEADER];
    make_header(h, 2, 12345, 99);
    expect_newest_dropped(*state, h, 20);
}

static void test_newest_segment_with_bad_header_crc_and_zeros_is_dropped(void **state) {
    /* A spare renamed into place whose header write was cut short: the
     * zeros after it are the spare's. */
    uint8_t h[HEADER + 4096];
    make_header(h, 2, 12345, 99);
    h[25] ^= 0x80;
    memset(h + HEADER, 0, 4096);
    expect_newest_dropped(*state, h, sizeof h);
}

static void test_newest_segment_naming_another_number_is_dropped(void **state) {
    uint8_t h[HEADER];
    make_header(h, 7, 0, 99);
    expect_newest_dropped(*state, h, sizeof h);
}

static void test_unnamed_newest_segment_with_bad_header_and_bytes_is_damage(void **state) {
    /* Even a segment the head does not name yet holds nothing but zeros
     * after an unfinished header: bytes there mean damage. */
    fx *f = *state;
    session(f, 64u << 20, 0, 5);
    uint8_t h[HEADER + 50];
    make_header(h, 2, seg_size(f, 1), 99);
    h[25] ^= 0x80;
    memset(h + HEADER, 0x33, 50);
    write_segment_file(f, 2, h, sizeof h);
    expect_refused_unchanged(f, 2);
}

static void test_forged_header_check_accepts_a_good_header(void **state) {
    /* Control for the dropped-header tests: a well-formed forged header for
     * segment 2 recording segment 1's true end is kept. */
    fx *f = *state;
    session(f, 64u << 20, 0, 5);
    uint8_t h[HEADER];
    make_header(h, 2, seg_size(f, 1), 99);
    write_segment_file(f, 2, h, sizeof h);
    recs r = {0};
    rn_wal_recovery rec;
    assert_int_equal(recover(f, 0, &r, &rec), 0);
    expect_range(&r, 0, 5);
    assert_int_equal(rec.last_segment, 2);
    assert_true(seg_exists(f, 2));
    recs_free(&r);
}

/* ------------------------------------------------------------------------ */
/* Tests: failed syncs                                                       */

static int segment_contains(const fx *f, uint64_t seg, const uint8_t *needle, size_t n) {
    char p[PATH_MAX];
    seg_path(f, seg, p, sizeof p);
    size_t len;
    uint8_t *data = read_file(p, &len);
    int found = memmem(data, len, needle, n) != NULL;
    free(data);
    return found;
}

static void test_failed_sync_fails_batch_and_log_continues_in_new_segment(void **state) {
    fx *f = *state;
    tracker t = {0};
    rn_wal *w = open_log(f, 64u << 20, &t);
    item *a = items_new(&t, 0, 3);   /* acknowledged */
    item *b = items_new(&t, 100, 4); /* fails */
    item *c = items_new(&t, 200, 3); /* acknowledged, after the failure */
    submit_all(f, w, a, 2);
    uint64_t seg_before = rn_wal_current_segment(w);
    uint64_t written_before = rn_wal_bytes_written(w) + BATCH + 8 + a[2].len;
    submit_one_batch(f, w, &a[2], b, 4, 1);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(b[i].done, 1);
        assert_true(b[i].status < 0);
    }
    assert_int_equal(rn_wal_bytes_written(w), written_before);
    submit_all(f, w, c, 3);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(c[i].done, 1);
        assert_int_equal(c[i].status, 0);
    }
    assert_int_equal(rn_wal_current_segment(w), seg_before + 1);
    rn_wal_close(w);

    /* The failed batch's bytes did reach segment 1 (so the next check is
     * meaningful): the new segment's header excludes them. */
    assert_true(segment_contains(f, seg_before, b[1].payload, b[1].len));
    assert_true(header_prev_end(f, seg_before + 1) < seg_size(f, seg_before));

    recs r = {0};
    rn_wal_recovery rec;
    assert_int_equal(recover(f, 0, &r, &rec), 0);
    int ids[] = {0, 1, 2, 200, 201, 202};
    expect_payloads(&r, ids, 6);
    recs_free(&r);
    items_free(a, 3);
    items_free(b, 4);
    items_free(c, 3);
}

static void test_consecutive_failed_syncs_each_leave_the_segment(void **state) {
    fx *f = *state;
    tracker t = {0};
    rn_wal *w = open_log(f, 64u << 20, &t);
    item *a = items_new(&t, 0, 2);
    item *b = items_new(&t, 100, 2);
    item *d = items_new(&t, 200, 2);
    submit_all(f, w, a, 2);
    rn_wal_inject_sync_failures(w, 2);
    /* b[0] and b[1] travel in two batches (the second gathers while the
     * first is in flight); both fail. */
    submit_all(f, w, b, 2);
    assert_int_equal(t.batches, 4);
    submit_all(f, w, d, 2);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(a[i].status, 0);
        assert_true(b[i].status < 0);
        assert_int_equal(d[i].status, 0);
    }
    /* Segment 1 held a and the failed b[0]; b[1] failed in segment 2; d
     * went to segment 3. */
    assert_int_equal(rn_wal_current_segment(w), 3);
    rn_wal_close(w);
    recs r = {0};
    rn_wal_recovery rec;
    assert_int_equal(recover(f, 0, &r, &rec), 0);
    int ids[] = {0, 1, 200, 201};
    expect_payloads(&r, ids, 4);
    recs_free(&r);
    items_free(a, 2);
    items_free(b, 2);
    items_free(d, 2);
}

static void test_failed_batch_sharing_with_queued_entries_fails_only_itself(void **state) {
    /* Entries queued behind the failing batch go into the next batch and
     * succeed. */
    fx *f = *state;
    tracker t = {0};
    rn_wal *w = open_log(f, 64u << 20, &t);
    item *v = items_new(&t, 0, 20);
    rn_wal_inject_sync_failures(w, 1);
    submit_all(f, w, v, 20);
    assert_true(v[0].status < 0); /* the first batch holds only entry 0 */
    for (int i = 1; i < 20; i++)
        assert_int_equal(v[i].status, 0);
    for (int i = 0; i < 20; i++)
        assert_int_equal(v[i].order, i);
    rn_wal_close(w);
    recs r = {0};
    rn_wal_recovery rec;
    assert_int_equal(recover(f, 0, &r, &rec), 0);
    expect_range(&r, 1, 19);
    recs_free(&r);
    items_free(v, 20);
}

static void test_failed_last_batch_is_not_replayed(void **state) {
    /* The process stops (crash, or a plain close) right after a failed
     * batch, before anything else is written: its records were answered
     * with an error, so recovery must not bring them back. */
    fx *f = *state;
    tracker t = {0};
    rn_wal *w = open_log(f, 64u << 20, &t);
    item *a = items_new(&t, 0, 3);
    item *b = items_new(&t, 100, 2);
    submit_all(f, w, a, 2);
    submit_one_batch(f, w, &a[2], b, 2, 1);
    for (int i = 0; i < 2; i++)
        assert_true(b[i].status < 0);
    rn_wal_close(w);
    recs r = {0};
    rn_wal_recovery rec;
    assert_int_equal(recover(f, 0, &r, &rec), 0);
    expect_range(&r, 0, 3);
    recs_free(&r);
    items_free(a, 3);
    items_free(b, 2);
}

/* ------------------------------------------------------------------------ */
/* Tests: lost acknowledged records are found, never served as a shorter log */

static void test_newest_segment_with_damaged_header_and_records_is_damage(void **state) {
    /* Records are written only after their segment's header is durable: a
     * bad header with records behind it was damaged later, and dropping the
     * segment would drop acknowledged records. */
    fx *f = *state;
    session(f, 64u << 20, 0, 5); /* segment 1 */
    session(f, 64u << 20, 5, 6); /* segment 2, the newest, with records */
    poke_byte(f, 2, 9, 0x01);    /* the header's segment number */
    rn_wal_damage d = expect_refused_unchanged(f, 2);
    assert_true(seg_exists(f, 1));
    assert_int_equal(d.kind, RN_WAL_DAMAGED_HEADER);
    assert_int_equal(d.segment, 2);
    assert_non_null(strstr(d.what, "00000000000000000002.log"));
    /* The salt survived, so its records still read back for the report. */
    recs r = {0};
    damaged_records(f, 0, &d, &r);
    expect_range(&r, 5, 6);
    recs_free(&r);
}

static void test_deleted_newest_segment_is_detected(void **state) {
    fx *f = *state;
    session(f, 64u << 20, 0, 5);  /* segment 1 */
    session(f, 64u << 20, 5, 6);  /* segment 2 */
    session(f, 64u << 20, 11, 4); /* segment 3, the newest */
    char p[PATH_MAX];
    seg_path(f, 3, p, sizeof p);
    assert_int_equal(unlink(p), 0);
    rn_wal_damage d = expect_refused_unchanged(f, 2);
    assert_true(seg_exists(f, 1));
    assert_int_equal(d.kind, RN_WAL_MISSING_SEGMENTS);
    assert_int_equal(d.segment, 3);
    assert_int_equal(d.last_segment, 3);
    assert_non_null(strstr(d.what, "00000000000000000003.log is missing"));
}

static void test_deleted_middle_segment_names_the_records_after_it(void **state) {
    fx *f = *state;
    session(f, 64u << 20, 0, 5);  /* segment 1 */
    session(f, 64u << 20, 5, 6);  /* segment 2 */
    session(f, 64u << 20, 11, 4); /* segment 3 */
    char p[PATH_MAX];
    seg_path(f, 2, p, sizeof p);
    assert_int_equal(unlink(p), 0);
    rn_wal_damage d = expect_refused_unchanged(f, 3);
    assert_int_equal(d.kind, RN_WAL_MISSING_SEGMENTS);
    assert_int_equal(d.segment, 2);
    assert_int_equal(d.last_segment, 2);
    recs r = {0};
    damaged_records(f, 0, &d, &r);
    expect_range(&r, 11, 4);
    recs_free(&r);
    records_before(f, 0, &d, &r);
    expect_range(&r, 0, 5);
    recs_free(&r);
}

static void test_deleted_only_segment_after_a_checkpoint_is_detected(void **state) {
    /* After a checkpoint at segment 3, segment 3 is the whole log. */
    fx *f = *state;
    session(f, 64u << 20, 0, 5);  /* segment 1 */
    session(f, 64u << 20, 5, 6);  /* segment 2 */
    session(f, 64u << 20, 11, 4); /* segment 3 */
    char p[PATH_MAX];
    seg_path(f, 3, p, sizeof p);
    assert_int_equal(unlink(p), 0);
    recs r = {0};
    rn_wal_recovery rec;
    assert_int_equal(recover(f, 3, &r, &rec), RN_WAL_CORRUPT);
    assert_int_equal(r.n, 0);
    assert_int_equal(rec.damage.kind, RN_WAL_MISSING_SEGMENTS);
    assert_int_equal(rec.damage.segment, 3);
    recs_free(&r);
}

static void test_a_checkpoint_at_a_segment_never_created_is_no_loss(void **state) {
    /* A checkpoint taken right before a clean stop starts replay at the
     * segment the next batch would have opened; nothing was written there. */
    fx *f = *state;
    session(f, 64u << 20, 0, 5); /* segment 1, head 1 */
    recs r = {0};
    rn_wal_recovery rec;
    assert_int_equal(recover(f, 2, &r, &rec), 0);
    assert_int_equal(r.n, 0);
    assert_int_equal(rec.last_segment, 1);
    recs_free(&r);
}

/* Writes wal/HEAD's bytes at `off` (xor mask applied to len bytes). */
static void poke_head(const fx *f, size_t off, size_t len) {
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s/wal/HEAD", f->dir);
    int fd = open(p, O_RDWR);
    assert_true(fd >= 0);
    for (size_t i = 0; i < len; i++) {
        uint8_t c;
        assert_int_equal(pread(fd, &c, 1, (off_t)(off + i)), 1);
        c ^= 0x5a;
        assert_int_equal(pwrite(fd, &c, 1, (off_t)(off + i)), 1);
    }
    close(fd);
}

static void test_head_with_one_torn_slot_still_reads(void **state) {
    /* Creating a segment rewrites one slot; a torn write of it leaves the
     * other, which names the previous segment. */
    fx *f = *state;
    session(f, 64u << 20, 0, 5); /* segment 1: slot 1 */
    session(f, 64u << 20, 5, 5); /* segment 2: slot 0 */
    poke_head(f, 0, 24);         /* slot 0 torn: the head reads 1 */
    recs r = {0};
    rn_wal_recovery rec;
    assert_int_equal(recover(f, 0, &r, &rec), 0); /* segment 2 = head + 1 */
    expect_range(&r, 0, 10);
    recs_free(&r);
}

static void test_damaged_or_missing_head_is_refused(void **state) {
    fx *f = *state;
    session(f, 64u << 20, 0, 5);
    session(f, 64u << 20, 5, 5);
    poke_head(f, 0, 24);
    poke_head(f, 512, 24);
    rn_wal_damage d = expect_refused_unchanged(f, 2);
    assert_int_equal(d.kind, RN_WAL_DAMAGED_HEAD);
    assert_non_null(strstr(d.what, "HEAD is damaged"));
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s/wal/HEAD", f->dir);
    assert_int_equal(unlink(p), 0);
    d = expect_refused_unchanged(f, 2);
    assert_int_equal(d.kind, RN_WAL_DAMAGED_HEAD);
    assert_non_null(strstr(d.what, "HEAD is missing"));
}

static void test_flipped_byte_before_later_batches_of_newest_segment_is_damage(void **state) {
    /* A record followed by later batches was acknowledged before they were
     * written: a bad one is damage, not a torn tail. */
    fx *f = *state;
    write_acknowledged_batches(f, 0, 20);
    size_t len;
    uint8_t *p = payload_make(6, &len);
    assert_true(len > 100);
    uint64_t at = find_in_segment(f, 1, p, len);
    free(p);
    poke_byte(f, 1, at + len / 2, 0x04);
    rn_wal_damage d = expect_refused_unchanged(f, 1);
    assert_int_equal(d.kind, RN_WAL_DAMAGED_RECORDS);
    assert_int_equal(d.segment, 1);
    assert_int_equal(d.offset, at - 8 - BATCH); /* the damaged batch starts there */
    assert_int_equal(d.end, at + len);          /* the next one here */
    /* The readable records after the damage: the later batches'. */
    recs r = {0};
    damaged_records(f, 0, &d, &r);
    expect_range(&r, 7, 13);
    recs_free(&r);
    records_before(f, 0, &d, &r);
    expect_range(&r, 0, 6);
    recs_free(&r);
}

static void test_zeroed_page_before_later_batches_of_newest_segment_is_damage(void **state) {
    /* A lost write of an acknowledged region reads as zeros, like the
     * unused part of a preallocated segment: still damage when later
     * batches follow. */
    fx *f = *state;
    write_acknowledged_batches(f, 100, 30);
    size_t len;
    uint8_t *p = payload_make(110, &len);
    uint64_t at = find_in_segment(f, 1, p, len);
    free(p);
    zero_range(f, 1, at - 8 - BATCH, at + 96);
    rn_wal_damage d = expect_refused_unchanged(f, 1);
    assert_int_equal(d.kind, RN_WAL_DAMAGED_RECORDS);
    recs r = {0};
    damaged_records(f, 0, &d, &r);
    expect_range(&r, 111, 19);
    recs_free(&r);
}

static void test_bytes_past_a_damaged_last_batch_are_damage(void **state) {
    /* The batch at the end reads back only in part, and bytes follow its
     * recorded end: no crash leaves that (a later batch whose header was
     * damaged too). */
    fx *f = *state;
    write_torn_fixture(f);
    int ids[] = {40, 41};
    append_batch(f, 1, TORN_N + 1, ids, 2, 1, 1);
    const uint8_t stray[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    append_bytes(f, 1, stray, sizeof stray);
    rn_wal_damage d = expect_refused_unchanged(f, 1);
    assert_int_equal(d.kind, RN_WAL_DAMAGED_RECORDS);
    assert_non_null(strstr(d.what, "no batch explains"));
    recs r = {0};
    damaged_records(f, 0, &d, &r);
    int first[] = {40};
    expect_payloads(&r, first, 1); /* the damaged batch's readable start */
    recs_free(&r);
}

static void test_format1_log_is_adopted_only_when_empty(void **state) {
    fx *f = *state;
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s/wal", f->dir);
    assert_int_equal(mkdir(p, 0755), 0);
    assert_int_equal(rn_wal_adopt_format1(f->dir), 0);
    /* An empty log after a checkpoint at segment 7, as a clean stop of
     * format 1 leaves it: recovery and a new segment work. */
    recs r = {0};
    rn_wal_recovery rec;
    assert_int_equal(recover(f, 7, &r, &rec), 0);
    recs_free(&r);
    rn_wal_options o = {.segment_bytes = 1u << 20};
    int err = 0;
    rn_wal *w = rn_wal_open(&f->loop, f->dir, &rec, &o, &err);
    assert_non_null(w);
    rn_wal_close(w);
    assert_true(seg_exists(f, 7));
    assert_int_equal(recover(f, 7, &r, &rec), 0);
    assert_int_equal(rec.last_segment, 7);
    recs_free(&r);
    /* With a segment there, it is not taken over. */
    assert_int_equal(rn_wal_adopt_format1(f->dir), -ENOTEMPTY);
}

static void test_unwritten_sector_before_good_records_of_last_batch_is_torn(void **state) {
    /* A crash mid-batch can leave any of the batch's sectors unwritten (they
     * read as zeros): a bad record with good records after it, inside the
     * last batch, was never acknowledged. The whole batch goes, the
     * earlier batches stay. */
    fx *f = *state;
    tracker t = {0};
    rn_wal *w = open_log(f, 64u << 20, &t);
    item *lead = items_new(&t, 0, 3);
    item *v = items_new(&t, 100, 6);
    submit_each(f, w, lead, 2);
    uint64_t batch = rn_wal_bytes_written(w) + HEADER;
    submit_one_batch(f, w, &lead[2], v, 6, 0);
    rn_wal_close(w);
    uint64_t size = seg_size(f, 1);
    uint64_t mid = batch + BATCH + 8 + lead[2].len + 8 + v[0].len / 2; /* in v[0]'s payload */
    uint64_t sector = mid - mid % 512;
    assert_true(sector + 512 < size - v[5].len); /* the last record lies past it */
    zero_range(f, 1, sector > batch ? sector : batch, sector + 512);
    recs r = {0};
    rn_wal_recovery rec;
    assert_int_equal(recover(f, 0, &r, &rec), 0);
    expect_range(&r, 0, 2);
    assert_int_equal(rec.torn_offset, batch);
    assert_int_equal(rec.torn_bytes, size - batch);
    recs_free(&r);
    assert_int_equal(recover(f, 0, &r, &rec), 0);
    expect_range(&r, 0, 2);
    assert_int_equal(rec.torn_bytes, 0);
    recs_free(&r);
    items_free(lead, 3);
    items_free(v, 6);
}

#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)

int main(void) {
    const struct CMUnitTest tests[] = {
        T(test_recover_of_empty_directory_finds_nothing),
        T(test_submitted_records_are_replayed_in_order_byte_exact),
        T(test_after_sync_runs_once_per_durable_entry_before_its_callback),
        T(test_an_entry_submitted_by_a_callback_waits_for_the_batch_hook),
        T(test_concurrent_submits_share_batches_and_complete_in_order),
        T(test_records_of_successive_sessions_are_replayed_in_order),
        T(test_segment_rotation_spreads_records_and_replays_all),
        T(test_rotate_makes_next_batch_start_a_new_segment),
        T(test_drop_before_removes_older_segments),
        T(test_recover_from_segment_skips_earlier_segments),
        T(test_replay_callback_can_abort_recovery),
        T(test_torn_tail_cut_inside_last_payload),
        T(test_torn_tail_cut_inside_last_batch_header),
        T(test_torn_tail_cut_inside_last_record_frame),
        T(test_torn_tail_cut_on_batch_boundary_loses_nothing_else),
        T(test_torn_tail_of_garbage_bytes_is_cut),
        T(test_zero_tail_is_cut_and_counted_apart),
        T(test_torn_tail_partial_batch_is_cut),
        T(test_last_batch_record_written_whole_but_bad_is_damage),
        T(test_last_batch_header_written_whole_but_bad_is_damage),
        T(test_torn_tail_whole_good_batch_appended_is_replayed),
        T(test_torn_tail_leaving_only_the_header_replays_nothing),
        T(test_writes_after_a_cut_follow_the_surviving_records),
        T(test_torn_last_batch_whose_first_page_is_missing_is_cut),
        T(test_torn_last_batch_with_a_missing_middle_page_is_cut),
        T(test_flipped_payload_byte_in_older_segment_is_corruption),
        T(test_flipped_byte_in_last_record_of_older_segment_is_corruption),
        T(test_flipped_length_byte_in_older_segment_is_corruption),
        T(test_older_segment_shorter_than_recorded_end_is_corruption),
        T(test_bytes_past_recorded_end_of_older_segment_are_ignored),
        T(test_damaged_header_of_older_segment_is_corruption),
        T(test_newest_segment_with_empty_file_is_dropped),
        T(test_newest_segment_with_partial_header_is_dropped),
        T(test_newest_segment_with_bad_header_crc_and_zeros_is_dropped),
        T(test_unnamed_newest_segment_with_bad_header_and_bytes_is_damage),
        T(test_newest_segment_naming_another_number_is_dropped),
        T(test_forged_header_check_accepts_a_good_header),
        T(test_failed_sync_fails_batch_and_log_continues_in_new_segment),
        T(test_consecutive_failed_syncs_each_leave_the_segment),
        T(test_failed_batch_sharing_with_queued_entries_fails_only_itself),
        T(test_failed_last_batch_is_not_replayed),
        T(test_newest_segment_with_damaged_header_and_records_is_damage),
        T(test_deleted_newest_segment_is_detected),
        T(test_deleted_middle_segment_names_the_records_after_it),
        T(test_deleted_only_segment_after_a_checkpoint_is_detected),
        T(test_a_checkpoint_at_a_segment_never_created_is_no_loss),
        T(test_head_with_one_torn_slot_still_reads),
        T(test_damaged_or_missing_head_is_refused),
        T(test_flipped_byte_before_later_batches_of_newest_segment_is_damage),
        T(test_zeroed_page_before_later_batches_of_newest_segment_is_damage),
        T(test_bytes_past_a_damaged_last_batch_are_damage),
        T(test_format1_log_is_adopted_only_when_empty),
        T(test_unwritten_sector_before_good_records_of_last_batch_is_torn),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
