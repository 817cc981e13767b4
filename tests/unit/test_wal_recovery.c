/*
 * test_wal_recovery.c - unit tests of log recovery (src/log/recover.c):
 * unfinished last batches are cut; anything that lost acknowledged records
 * is refused with the damage described, nothing replayed and nothing on
 * disk changed; the records after a damage are named; format-1 logs are
 * taken over only when empty.
 *
 * How: sessions write real logs (wal_fixture.h), then crashes and damage are
 * simulated by editing the files between sessions: cutting or extending the
 * newest segment, zeroing sectors (what an interrupted write leaves),
 * flipping bytes of acknowledged batches, deleting segments or the log head,
 * writing damaged segment headers, appending batches built from the
 * documented format.
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "wal_fixture.h"

/* ------------------------------------------------------------------------ */
/* Helpers                                                                   */

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
