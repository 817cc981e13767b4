/*
 * wal_fixture.c - helpers shared by the log's unit tests. See
 * wal_fixture.h.
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
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/crc32c.h"
#include "tmpdir.h"
#include "wal_fixture.h"

int setup(void **state) {
    fx *f = calloc(1, sizeof *f);
    assert_non_null(f);
    strcpy(f->dir, "/tmp/runnel-wal-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    assert_int_equal(uv_loop_init(&f->loop), 0);
    *state = f;
    return 0;
}

int teardown(void **state) {
    fx *f = *state;
    assert_int_equal(uv_loop_close(&f->loop), 0);
    rm_tree(f->dir);
    free(f);
    return 0;
}

void seg_path(const fx *f, uint64_t n, char *out, size_t cap) {
    snprintf(out, cap, "%s/wal/%020llu.log", f->dir, (unsigned long long)n);
}

int seg_exists(const fx *f, uint64_t n) {
    char p[PATH_MAX];
    seg_path(f, n, p, sizeof p);
    return access(p, F_OK) == 0;
}

uint64_t seg_size(const fx *f, uint64_t n) {
    char p[PATH_MAX];
    seg_path(f, n, p, sizeof p);
    struct stat st;
    assert_int_equal(stat(p, &st), 0);
    return (uint64_t)st.st_size;
}

size_t count_segments(const fx *f) {
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

uint8_t *read_file(const char *path, size_t *len) {
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

void append_bytes(const fx *f, uint64_t seg, const void *data, size_t len) {
    char p[PATH_MAX];
    seg_path(f, seg, p, sizeof p);
    int fd = open(p, O_WRONLY | O_APPEND);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, data, len), (ssize_t)len);
    close(fd);
}

void poke_byte(const fx *f, uint64_t seg, uint64_t off, uint8_t xor_mask) {
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

void truncate_segment(const fx *f, uint64_t seg, uint64_t len) {
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
uint64_t header_prev_end(const fx *f, uint64_t n) {
    return header_field(f, n, 16);
}

uint64_t seg_salt(const fx *f, uint64_t n) {
    return header_field(f, n, 24);
}

/* Builds a header as segment.h documents it (used to forge damaged ones). */
void make_header(uint8_t h[HEADER], uint64_t seg, uint64_t prev_end, uint64_t salt) {
    static const uint8_t magic[8] = {'R', 'N', 'W', 'A', 'L', 0, 0, 2};
    memcpy(h, magic, 8);
    put_u64(h + 8, seg);
    put_u64(h + 16, prev_end);
    put_u64(h + 24, salt);
    put_u32(h + 32, rn_crc32c(0, h, 32));
    put_u32(h + 36, 0);
}

/* Builds one record frame {len, crc, payload}; returns its size. */
size_t make_frame(uint8_t *out, const uint8_t *payload, uint32_t len) {
    put_u32(out, len);
    put_u32(out + 4, rn_crc32c(rn_crc32c(0, out, 4), payload, len));
    memcpy(out + 8, payload, len);
    return 8 + (size_t)len;
}

/* Builds a batch header for a segment with this salt. */
void make_batch_header(uint8_t h[BATCH], uint64_t salt, uint32_t records, uint64_t seq,
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

/* Payload i: deterministic bytes; length varies, including 0 and a large one. */
size_t payload_len(int i) {
    if (i % 17 == 5)
        return 0;
    if (i == 23)
        return 300000;
    return (size_t)(1 + (i * 37) % 257);
}

uint8_t *payload_make(int i, size_t *len) {
    *len = payload_len(i);
    uint8_t *p = malloc(*len ? *len : 1);
    assert_non_null(p);
    for (size_t k = 0; k < *len; k++)
        p[k] = (uint8_t)(i * 131 + k * 7 + (k >> 8));
    return p;
}

int collect(void *arg, const uint8_t *payload, size_t len) {
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

void recs_free(recs *r) {
    for (size_t i = 0; i < r->n; i++)
        free(r->data[i]);
    free(r->data);
    free(r->len);
    memset(r, 0, sizeof *r);
}

/* Asserts that r holds exactly the payloads with the given indices, in order. */
void expect_payloads(const recs *r, const int *ids, size_t n) {
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

void expect_range(const recs *r, int first, int count) {
    int *ids = malloc((size_t)(count > 0 ? count : 1) * sizeof *ids);
    assert_non_null(ids);
    for (int i = 0; i < count; i++)
        ids[i] = first + i;
    expect_payloads(r, ids, (size_t)count);
    free(ids);
}

int recover(fx *f, uint64_t from, recs *r, rn_wal_recovery *rec) {
    return rn_wal_recover(f->dir, from, collect, r, rec);
}

void item_done(rn_wal_entry *e, int status) {
    item *it = e->arg;
    it->done++;
    it->status = status;
    it->order = it->t->completed++;
    it->batch = it->t->batches;
    it->after_sync_status = e->after_sync_status;
}

void count_batch(void *arg) {
    tracker *t = arg;
    t->batches++;
}

/* Prepares items for payload ids first..first+n-1; entries use 1..4 pieces. */
item *items_new(tracker *t, int first, int n) {
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

void items_free(item *v, int n) {
    for (int i = 0; i < n; i++)
        free(v[i].payload);
    free(v);
}

/* Recovers (discarding records) and opens the log for writing. */
rn_wal *open_log(fx *f, uint64_t segment_bytes, tracker *t) {
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

void run(fx *f) {
    uv_run(&f->loop, UV_RUN_DEFAULT);
}

/* Submits items one batch at a time (each waits for the previous). */
void submit_each(fx *f, rn_wal *w, item *v, int n) {
    for (int i = 0; i < n; i++) {
        rn_wal_submit(w, &v[i].entry);
        run(f);
        assert_int_equal(v[i].done, 1);
    }
}

/* Submits all items before running the loop. */
void submit_all(fx *f, rn_wal *w, item *v, int n) {
    for (int i = 0; i < n; i++)
        rn_wal_submit(w, &v[i].entry);
    run(f);
}

/* Submits v[0..n) so that they travel in one batch: `lead` is submitted
 * first and starts a batch at once, v gather behind it. With `fail`, the
 * batch holding v (not the lead's) is made to fail. */
void submit_one_batch(fx *f, rn_wal *w, item *lead, item *v, int n, int fail) {
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
void session(fx *f, uint64_t segment_bytes, int first, int n) {
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
