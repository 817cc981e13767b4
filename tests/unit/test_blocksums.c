/*
 * test_blocksums.c - unit tests for src/tiers/blocksums.{h,c} through the
 * stream files (src/tiers/streamfiles.c): the checksum sidecar's format,
 * reads refusing a damaged block, recovery's cut recomputing the
 * block that a crash left open, and a large append written ahead of its
 * log record (the entries it reports, and replay restoring them).
 *
 * How: a store in a fresh temporary directory; appends written as the
 * engine writes them, then the data file and the sidecar are changed
 * behind the store's back (a flipped byte, data written without its
 * checksum, data lost under its checksum) the way damage or a crash would.
 * Expected entries are computed here with rn_crc32c over the bytes the
 * test wrote, never read back from the code under test.
 */
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
#include <unistd.h>

#include "tiers/blocksums.h"
#include "tiers/streamfiles.h"
#include "tmpdir.h"
#include "util/crc32c.h"

#define ID 0x1234
#define BLK RN_BLOCKSUM_BLOCK

typedef struct {
    char dir[PATH_MAX];
    rn_streamfiles *st;
    uint8_t bytes[3 * BLK];
} fx;

static int setup(void **state) {
    fx *f = calloc(1, sizeof *f);
    snprintf(f->dir, sizeof f->dir, "/tmp/runnel-sums-XXXXXX");
    if (!mkdtemp(f->dir)) {
        free(f);
        return -1;
    }
    f->st = rn_streamfiles_open(f->dir, 4);
    for (size_t i = 0; i < sizeof f->bytes; i++)
        f->bytes[i] = (uint8_t)(i * 131 + 7);
    *state = f;
    return 0;
}

static int teardown(void **state) {
    fx *f = *state;
    rn_streamfiles_close(f->st);
    rm_tree(f->dir);
    free(f);
    return 0;
}

static void path_of(const fx *f, const char *suffix, char *out, size_t cap) {
    snprintf(out, cap, "%s/streams/%02x/%016llx.%s", f->dir, (unsigned)(ID & 0xff),
             (unsigned long long)ID, suffix);
}

/* Writes len bytes at off of one of the stream's files, behind the store. */
static void poke(const fx *f, const char *suffix, const void *data, size_t len, off_t off) {
    char p[PATH_MAX + 64];
    path_of(f, suffix, p, sizeof p);
    int fd = open(p, O_WRONLY);
    assert_true(fd >= 0);
    assert_int_equal(pwrite(fd, data, len, off), (ssize_t)len);
    close(fd);
}

static void cut_file(const fx *f, const char *suffix, off_t len) {
    char p[PATH_MAX + 64];
    path_of(f, suffix, p, sizeof p);
    assert_int_equal(truncate(p, len), 0);
}

/* Appends f->bytes [from, to) in appends of `step` bytes. */
static void append_bytes(fx *f, size_t from, size_t to, size_t step, uint64_t *k) {
    for (size_t at = from; at < to; at += step) {
        size_t n = to - at < step ? to - at : step;
        assert_int_equal(rn_streamfiles_append(f->st, ID, f->bytes + at, n, at, (*k)++), 0);
    }
}

static rn_blocksum entry_at(const fx *f, uint64_t b) {
    char p[PATH_MAX + 64];
    path_of(f, "sum", p, sizeof p);
    int fd = open(p, O_RDONLY);
    assert_true(fd >= 0);
    uint8_t raw[RN_BLOCKSUM_ENTRY];
    assert_int_equal(pread(fd, raw, sizeof raw, (off_t)(b * RN_BLOCKSUM_ENTRY)), sizeof raw);
    close(fd);
    return rn_blocksum_decode(raw);
}

static void test_the_sidecar_holds_one_crc32c_and_length_per_block(void **state) {
    fx *f = *state;
    uint64_t k = 0;
    size_t total = 2 * BLK + 1808;
    append_bytes(f, 0, total, 1000, &k); /* appends straddle block edges */
    /* the layout: u32 crc, u32 len, little-endian */
    uint8_t raw[RN_BLOCKSUM_ENTRY];
    rn_blocksum_encode(raw, (rn_blocksum){0x11223344, 0x0506});
    const uint8_t want_raw[] = {0x44, 0x33, 0x22, 0x11, 0x06, 0x05, 0x00, 0x00};
    assert_memory_equal(raw, want_raw, sizeof raw);
    for (uint64_t b = 0; b < 3; b++) {
        size_t len = b < 2 ? BLK : total - 2 * BLK;
        rn_blocksum e = entry_at(f, b);
        assert_int_equal(e.len, len);
        assert_int_equal(e.crc, rn_crc32c(0, f->bytes + b * BLK, len));
    }
    char p[PATH_MAX + 64];
    path_of(f, "sum", p, sizeof p);
    FILE *sf = fopen(p, "rb");
    assert_non_null(sf);
    assert_int_equal(fseek(sf, 0, SEEK_END), 0);
    assert_int_equal(ftell(sf), 3 * RN_BLOCKSUM_ENTRY);
    fclose(sf);
}

static void test_a_flipped_byte_is_refused_and_other_blocks_still_read(void **state) {
    fx *f = *state;
    uint64_t k = 0;
    append_bytes(f, 0, 3 * BLK, 5000, &k);
    uint8_t flipped = f->bytes[BLK + 10] ^ 0x01;
    poke(f, "dat", &flipped, 1, BLK + 10);
    uint8_t out[3 * BLK];
    uint64_t bad = 0;
    /* a read of one byte elsewhere in the damaged block still checks it whole */
    assert_int_equal(rn_streamfiles_read(f->st, ID, out, 1, BLK + 4000, &bad), -EUCLEAN);
    assert_int_equal(bad, BLK);
    bad = 0;
    assert_int_equal(rn_streamfiles_read(f->st, ID, out, sizeof out, 0, &bad), -EUCLEAN);
    assert_int_equal(bad, BLK);
    assert_int_equal(rn_streamfiles_read(f->st, ID, out, BLK, 0, NULL), BLK);
    assert_memory_equal(out, f->bytes, BLK);
    assert_int_equal(rn_streamfiles_read(f->st, ID, out, BLK, 2 * BLK, NULL), BLK);
    assert_memory_equal(out, f->bytes + 2 * BLK, BLK);
    /* a repair's write makes the block whole again */
    assert_int_equal(rn_streamfiles_write(f->st, ID, f->bytes + BLK, BLK, BLK), 0);
    assert_int_equal(rn_streamfiles_read(f->st, ID, out, sizeof out, 0, NULL), sizeof out);
    assert_memory_equal(out, f->bytes, sizeof out);
}

static void test_a_damaged_entry_is_refused(void **state) {
    fx *f = *state;
    uint64_t k = 0;
    append_bytes(f, 0, BLK, BLK, &k);
    uint8_t raw[RN_BLOCKSUM_ENTRY];
    rn_blocksum_encode(raw, (rn_blocksum){0, BLK + 1}); /* longer than a block */
    poke(f, "sum", raw, sizeof raw, 0);
    uint8_t out[BLK];
    assert_int_equal(rn_streamfiles_read(f->st, ID, out, 10, 0, NULL), -EUCLEAN);
}

/* A crash wrote an append's data but not its checksum: the cut to the
 * recovered tail recomputes the open block from the file. */
static void test_the_cut_recomputes_an_open_block_behind_its_data(void **state) {
    fx *f = *state;
    uint64_t k = 0;
    append_bytes(f, 0, 5000, 5000, &k);
    poke(f, "dat", f->bytes + 5000, 1000, 5000); /* no checksum for these */
    uint8_t out[6000];
    assert_int_equal(rn_streamfiles_read(f->st, ID, out, 6000, 0, NULL), 6000); /* unchecked */
    poke(f, "dat", f->bytes + 100, 1, 4096 + 100 + 1); /* and the covered prefix still checks */
    assert_int_equal(rn_streamfiles_read(f->st, ID, out, 20, 4990, NULL), -EUCLEAN);
    poke(f, "dat", f->bytes + 4096 + 100 + 1, 1, 4096 + 100 + 1);
    assert_int_equal(rn_streamfiles_truncate(f->st, ID, 6000, 1), 0);
    rn_blocksum e = entry_at(f, 1);
    assert_int_equal(e.len, 6000 - BLK);
    assert_int_equal(e.crc, rn_crc32c(0, f->bytes + BLK, 6000 - BLK));
    assert_int_equal(rn_streamfiles_read(f->st, ID, out, 6000, 0, NULL), 6000);
    assert_memory_equal(out, f->bytes, 6000);
}

/* A crash kept an append's checksum but lost its data: the cut to the
 * recovered tail makes the good bytes before it read again. */
static void test_the_cut_recomputes_an_open_block_ahead_of_its_data(void **state) {
    fx *f = *state;
    uint64_t k = 0;
    append_bytes(f, 0, 6000, 3000, &k);
    cut_file(f, "dat", 5000);
    uint8_t out[5000];
    assert_int_equal(rn_streamfiles_read(f->st, ID, out, 5000, 0, NULL), -EUCLEAN);
    assert_int_equal(rn_streamfiles_truncate(f->st, ID, 5000, 1), 0);
    assert_int_equal(rn_streamfiles_read(f->st, ID, out, 5000, 0, NULL), 5000);
    assert_memory_equal(out, f->bytes, 5000);
    /* the next append extends the recomputed entry */
    append_bytes(f, 5000, 7000, 2000, &k);
    rn_blocksum e = entry_at(f, 1);
    assert_int_equal(e.len, 7000 - BLK);
    assert_int_equal(e.crc, rn_crc32c(0, f->bytes + BLK, 7000 - BLK));
}

/* An older build's stream has no sidecar: its bytes read unverified (the
 * read creates none), and the blocks appends touch afterwards are checked. */
static void test_a_stream_without_a_sidecar_reads_unverified(void **state) {
    fx *f = *state;
    uint64_t k = 0;
    append_bytes(f, 0, 5000, 5000, &k);
    rn_streamfiles_close(f->st);
    char p[PATH_MAX + 64];
    path_of(f, "sum", p, sizeof p);
    assert_int_equal(unlink(p), 0);
    f->st = rn_streamfiles_open(f->dir, 4);
    uint8_t flipped = f->bytes[10] ^ 0x80;
    poke(f, "dat", &flipped, 1, 10);
    uint8_t out[5000];
    assert_int_equal(rn_streamfiles_read(f->st, ID, out, 5000, 0, NULL), 5000);
    assert_int_equal(access(p, F_OK), -1); /* a read makes no file (a full disk still reads) */
    append_bytes(f, 5000, 6000, 1000, &k);
    poke(f, "dat", f->bytes + 5500, 1, 5501);
    assert_int_equal(rn_streamfiles_read(f->st, ID, out, 10, 5990, NULL), -EUCLEAN);
}

/* Retention gives back whole blocks only: the block holding the new
 * retained offset keeps its bytes and still checks. */
static void test_a_punch_keeps_the_block_it_ends_in(void **state) {
    fx *f = *state;
    uint64_t k = 0;
    append_bytes(f, 0, 3 * BLK, BLK, &k);
    assert_int_equal(rn_streamfiles_punch(f->st, ID, 0, BLK + 100), 0);
    uint8_t out[BLK];
    assert_int_equal(rn_streamfiles_read(f->st, ID, out, BLK - 100, BLK + 100, NULL), BLK - 100);
    assert_memory_equal(out, f->bytes + BLK + 100, BLK - 100);
    assert_int_equal(rn_streamfiles_read(f->st, ID, out, 100, 0, NULL), 100); /* unverified */
    assert_int_equal(entry_at(f, 0).len, 0);
}

/* The CRC-32C of block b of f->bytes up to end, as the test computes it. */
static uint32_t crc_of_block(const fx *f, uint64_t b, uint64_t end) {
    uint64_t bs = b * BLK, to = bs + BLK < end ? bs + BLK : end;
    return rn_crc32c(0, f->bytes + bs, (size_t)(to - bs));
}

/* Written in two pieces, the second from a block boundary (as a body taken
 * while it arrives is, engine/arriving.c): the checksums are those of the
 * whole range. */
static void test_a_large_append_written_ahead_reports_and_restores_its_entries(void **state) {
    fx *f = *state;
    uint64_t k = 0;
    append_bytes(f, 0, 1000, 1000, &k); /* the first block's bytes below the append */
    const uint64_t off = 1000, end = 2 * BLK + 500, len = end - off;
    rn_streamfiles_pin pin;
    assert_int_equal(rn_streamfiles_pin_append(f->st, ID, off, len, k, &pin), 0);
    uint8_t crcs[3 * 4] = {0};
    assert_int_equal(rn_blocksums_blocks(off, len), 3);
    assert_int_equal(rn_streamfiles_write_piece(&pin, f->bytes + off, BLK - off, off, crcs), 0);
    assert_int_equal(rn_streamfiles_write_piece(&pin, f->bytes + BLK, end - BLK, BLK, crcs + 4), 0);
    assert_int_equal(rn_streamfiles_seal_ahead(&pin, off, len, k, crcs), 0);
    assert_int_equal(rn_streamfiles_sync_ahead(f->st, ID, &pin), 0);
    rn_streamfiles_unpin(&pin);
    for (uint64_t b = 0; b < 3; b++) { /* each block up to the append's end exactly */
        uint32_t want = crc_of_block(f, b, end);
        uint32_t got = (uint32_t)crcs[b * 4] | (uint32_t)crcs[b * 4 + 1] << 8 |
                       (uint32_t)crcs[b * 4 + 2] << 16 | (uint32_t)crcs[b * 4 + 3] << 24;
        assert_int_equal(got, want);
        rn_blocksum e = entry_at(f, b);
        assert_int_equal(e.crc, want);
        assert_int_equal(e.len, b < 2 ? BLK : end - 2 * BLK);
    }
    uint64_t idx;
    assert_int_equal(rn_streamfiles_index_get(f->st, ID, k, &idx), 0);
    assert_int_equal(idx, end);
    /* replay after a crash that lost the sidecar's and the index's pages:
     * the record's entries come back as they were, without reading the data */
    cut_file(f, "sum", 0);
    cut_file(f, "idx", 0);
    assert_int_equal(rn_streamfiles_restore_sums(f->st, ID, off, len, crcs, k), 0);
    for (uint64_t b = 0; b < 3; b++) {
        rn_blocksum e = entry_at(f, b);
        assert_int_equal(e.crc, crc_of_block(f, b, end));
        assert_int_equal(e.len, b < 2 ? BLK : end - 2 * BLK);
    }
    assert_int_equal(rn_streamfiles_index_get(f->st, ID, k, &idx), 0);
    assert_int_equal(idx, end);
    uint8_t out[3 * BLK];
    assert_int_equal(rn_streamfiles_read(f->st, ID, out, len, off, NULL), (ssize_t)len);
    assert_memory_equal(out, f->bytes + off, len);
    /* a byte the disk changed since the record reads as damage */
    uint8_t flipped = (uint8_t)(f->bytes[BLK + 7] ^ 0x40);
    poke(f, "dat", &flipped, 1, BLK + 7);
    uint64_t bad = 0;
    assert_int_equal(rn_streamfiles_read(f->st, ID, out, len, off, &bad), -EUCLEAN);
    assert_int_equal(bad, BLK);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_the_sidecar_holds_one_crc32c_and_length_per_block,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_flipped_byte_is_refused_and_other_blocks_still_read,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_damaged_entry_is_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_the_cut_recomputes_an_open_block_behind_its_data,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_the_cut_recomputes_an_open_block_ahead_of_its_data,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_stream_without_a_sidecar_reads_unverified, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_a_punch_keeps_the_block_it_ends_in, setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_a_large_append_written_ahead_reports_and_restores_its_entries, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
