/*
 * fuzz_wal_recovery.c — libFuzzer harness for log recovery (rn_wal_recover,
 * log/wal.h; format in log/segment.h).
 *
 * How: the input describes a valid log and then damages it.
 *  - A log of 1..3 consecutive segments (first number 1..3), each with 0..3
 *    batches of 1..3 records of 0..510 bytes, is built in memory in the
 *    documented format: a 40-byte header {magic "RNWAL\0\0\2", u64 segment,
 *    u64 previous segment's valid length, u64 salt, u32 crc32c of the first
 *    32 bytes, u32 0}, then batches {32-byte header {"RNB2", u32 records,
 *    u64 sequence number from 1, u64 bytes of records, u32 crc32c(salt ||
 *    first 24 bytes), u32 0}, records {u32 len, u32 crc32c(len bytes ||
 *    payload), payload}}, all little-endian; every batch acknowledged (each
 *    header records the length of its predecessor's batches). wal/HEAD has
 *    two 24-byte slots {"RNWHEAD2", u64 segment, u32 crc32c of the first 16
 *    bytes, u32 0} at offsets 0 and 512 naming the newest segment and the
 *    one before (or, when the newest segment is empty, possibly only the one
 *    before: a crash between creating a segment and naming it). Optionally
 *    every segment ends in zeros, like one written into a preallocated
 *    spare file. Salts come from the input; payloads are pseudo-random and
 *    distinct per record. CRCs come from a bitwise CRC-32C written here,
 *    not from util/crc32c.c. At start-up the harness checks once that this
 *    format is byte for byte what the real writer (rn_wal_open +
 *    rn_wal_submit on a libuv loop) produces, with the writer's salt.
 *  - Up to 16 damage operations from the input are applied: XOR a byte, set
 *    a byte, truncate a segment, append input bytes to a segment, append a
 *    well-formed batch of input bytes with the segment's next sequence
 *    number (like a failed batch that reached the disk past the successor's
 *    recorded valid end), delete a segment file, XOR a byte of wal/HEAD,
 *    delete wal/HEAD. Recovery starts at segment 0 (no checkpoint: the log
 *    starts at segment 1) or, as after a checkpoint, at the log's first or
 *    second segment.
 *  - The files are written to a directory under /dev/shm (one per process,
 *    emptied before each run and removed at exit) and rn_wal_recover runs.
 *
 * What must hold:
 *  1. No crash, no ASan/UBSan report, no leak.
 *  2. The outcome equals a reference model of the documented recovery
 *     written here over the in-memory images (model_recover): the head
 *     must be intact (or absent from a new log), the segments from the
 *     starting one up to the head must all exist, one more at most (which
 *     must exist when a slot of the head does not read back); a
 *     header must be intact unless it is the newest segment's, the head
 *     does not name it, no slot is torn and only zeros follow (the segment
 *     is then removed); each segment holds intact
 *     batches exactly up to its successor's recorded valid length; the
 *     newest holds intact batches, then nothing but zeros, or an unfinished
 *     batch, which is cut: no intact later batch follows it, only zeros lie
 *     after the end its header records, and no header or record of it that
 *     was written whole (every 512-byte sector it touches holds a non-zero
 *     byte of the batch) fails its check. Anything else is RN_WAL_CORRUPT.
 *     Compared: the return code (0 or RN_WAL_CORRUPT; nothing else can
 *     happen on tmpfs), every replayed payload in order, the recovery
 *     figures, and the files afterwards (a dropped segment unlinked, the
 *     newest cut, nothing else changed; after RN_WAL_CORRUPT nothing at
 *     all changed).
 *  3. Independently of the model: the replayed records, up to the first one
 *     that the damage touched, are exactly the written records from the
 *     starting segment on, in order (a prefix; never a record that was not
 *     written, never one skipped).
 *  4. Independently of the model, nothing acknowledged is lost silently:
 *     after a successful recovery, every written record is replayed except
 *     those of the newest segment's last batch (which a crash may leave
 *     unfinished) — unless the damage truncated the newest segment (a cut
 *     at a batch boundary looks like an end the log cannot tell apart) or
 *     deleted the head and every segment of a log without a checkpoint
 *     (which looks like a new log).
 *  5. After a successful recovery, recovering again replays the same records
 *     and cuts nothing; opening the log (rn_wal_open, which starts the next
 *     segment) and recovering once more also succeeds with the same records.
 *     After a refusal, rn_wal_damaged_records runs on both sides of the
 *     damage without a sanitizer report.
 */
#define _GNU_SOURCE
#include "log/wal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <sanitizer/common_interface_defs.h>
#include <uv.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void remove_dir(void);

/* Reports a failed check; the directory goes too (libFuzzer exits without
 * running atexit handlers after a crash). */
#define FAIL(...)                                                                                  \
    do {                                                                                           \
        fprintf(stderr, "fuzz_wal_recovery: " __VA_ARGS__);                                        \
        fputc('\n', stderr);                                                                       \
        remove_dir();                                                                              \
        abort();                                                                                   \
    } while (0)

#define HEADER 40
#define BATCH 32
#define HEAD_BYTES 1024
#define MAX_SEGS 3
#define MAX_BATCHES_PER_SEG 3
#define MAX_RECS_PER_BATCH 3
#define MAX_WRITTEN (MAX_SEGS * MAX_BATCHES_PER_SEG * MAX_RECS_PER_BATCH)
#define MAX_OPS 16
#define MAX_REPLAYED 4096
#define PREALLOCATED 256
#define NO_LIMIT UINT64_MAX

static char dir[PATH_MAX];
static int trace; /* RUNNEL_FUZZ_TRACE=1: describe each input's log and damage on stderr */

#define TRACE(...)                                                                                 \
    do {                                                                                           \
        if (trace)                                                                                 \
            fprintf(stderr, __VA_ARGS__);                                                          \
    } while (0)

/* ---- little-endian helpers and a bitwise CRC-32C (Castagnoli) ---- */

static uint32_t crc32c_bitwise(uint32_t crc, const uint8_t *p, size_t n) {
    crc = ~crc;
    for (size_t i = 0; i < n; i++) {
        crc ^= p[i];
        for (int k = 0; k < 8; k++)
            crc = (crc >> 1) ^ (0x82F63B78u & (0u - (crc & 1)));
    }
    return ~crc;
}

static void put_u32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void put_u64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get_u32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t get_u64(const uint8_t *p) {
    return (uint64_t)get_u32(p) | (uint64_t)get_u32(p + 4) << 32;
}

/* ---- in-memory images ---- */

typedef struct {
    uint64_t number;
    int exists;
    uint64_t salt;
    uint64_t batches; /* written, for the next sequence number */
    uint8_t *data;
    size_t len, cap;
    uint8_t *dirty; /* per byte: changed or added by the damage */
    size_t orig_len;
} image;

typedef struct {
    size_t seg;   /* image index */
    size_t pos;   /* frame offset in the segment */
    uint32_t len; /* payload length */
} record_loc;

static void img_reserve(image *im, size_t n) {
    if (n <= im->cap)
        return;
    size_t cap = im->cap ? im->cap : 256;
    while (cap < n)
        cap *= 2;
    im->data = realloc(im->data, cap);
    im->dirty = realloc(im->dirty, cap);
    memset(im->dirty + im->cap, 0, cap - im->cap);
    im->cap = cap;
}

static void img_append(image *im, const uint8_t *p, size_t n) {
    if (n == 0)
        return;
    img_reserve(im, im->len + n);
    memcpy(im->data + im->len, p, n);
    im->len += n;
}

static void encode_header(uint8_t h[HEADER], uint64_t seg, uint64_t prev_end, uint64_t salt) {
    static const uint8_t magic[8] = {'R', 'N', 'W', 'A', 'L', 0, 0, 2};
    memcpy(h, magic, 8);
    put_u64(h + 8, seg);
    put_u64(h + 16, prev_end);
    put_u64(h + 24, salt);
    put_u32(h + 32, crc32c_bitwise(0, h, 32));
    put_u32(h + 36, 0);
}

static uint32_t batch_crc(const uint8_t *h, uint64_t salt) {
    uint8_t s[8];
    put_u64(s, salt);
    return crc32c_bitwise(crc32c_bitwise(0, s, 8), h, 24);
}

static void encode_batch_header(uint8_t h[BATCH], uint64_t salt, uint32_t records, uint64_t seq,
                                uint64_t bytes) {
    put_u32(h, 0x32424e52u);
    put_u32(h + 4, records);
    put_u64(h + 8, seq);
    put_u64(h + 16, bytes);
    put_u32(h + 24, batch_crc(h, salt));
    put_u32(h + 28, 0);
}

static size_t frame_size(uint32_t len) {
    return 8 + (size_t)len;
}

static void append_record(image *im, const uint8_t *payload, uint32_t len) {
    uint8_t frame[8];
    put_u32(frame, len);
    put_u32(frame + 4, crc32c_bitwise(crc32c_bitwise(0, frame, 4), payload, len));
    img_append(im, frame, 8);
    img_append(im, payload, len);
}

/* Header intact (magic, crc, number). */
static int header_ok(const image *im) {
    static const uint8_t magic[8] = {'R', 'N', 'W', 'A', 'L', 0, 0, 2};
    return im->len >= HEADER && memcmp(im->data, magic, 8) == 0 &&
           get_u32(im->data + 32) == crc32c_bitwise(0, im->data, 32) &&
           get_u64(im->data + 8) == im->number;
}

/* Batch header at pos intact for this salt; fills its fields. */
static int batch_header_ok(const image *im, size_t pos, uint64_t salt, uint32_t *records,
                           uint64_t *seq, uint64_t *bytes) {
    if (pos > im->len || im->len - pos < BATCH)
        return 0;
    const uint8_t *h = im->data + pos;
    if (get_u32(h) != 0x32424e52u || get_u32(h + 24) != batch_crc(h, salt))
        return 0;
    *records = get_u32(h + 4);
    *seq = get_u64(h + 8);
    *bytes = get_u64(h + 16);
    return 1;
}

/* ---- the head ---- */

typedef struct {
    int exists;
    uint8_t data[HEAD_BYTES];
} head_image;

static void encode_slot(uint8_t *s, uint64_t segment) {
    memcpy(s, "RNWHEAD2", 8);
    put_u64(s + 8, segment);
    put_u32(s + 16, crc32c_bitwise(0, s, 16));
    put_u32(s + 20, 0);
}

/* 1 with *head set (*torn: a slot does not read back), 0 when absent, -1
 * when no slot is intact. */
static int head_value(const head_image *h, uint64_t *head, int *torn) {
    *torn = 0;
    if (!h->exists)
        return 0;
    int found = 0;
    for (int k = 0; k < 2; k++) {
        const uint8_t *s = h->data + 512 * k;
        if (memcmp(s, "RNWHEAD2", 8) != 0 || get_u32(s + 16) != crc32c_bitwise(0, s, 16)) {
            *torn = 1;
            continue;
        }
        uint64_t v = get_u64(s + 8);
        if (!found || v > *head)
            *head = v;
        found = 1;
    }
    return found ? 1 : -1;
}

/* ---- files ---- */

static void seg_path(uint64_t n, char *out, size_t cap) {
    snprintf(out, cap, "%s/wal/%020llu.log", dir, (unsigned long long)n);
}

static void head_path(char *out, size_t cap) {
    snprintf(out, cap, "%s/wal/HEAD", dir);
}

/* Removes every file in dir/wal (the directory stays). */
static void empty_wal_dir(void) {
    char wdir[PATH_MAX + 8];
    snprintf(wdir, sizeof wdir, "%s/wal", dir);
    DIR *d = opendir(wdir);
    if (!d)
        return;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.')
            continue;
        char p[PATH_MAX + 300];
        snprintf(p, sizeof p, "%s/%s", wdir, de->d_name);
        unlink(p);
    }
    closedir(d);
}

static void remove_dir(void) {
    empty_wal_dir();
    char wdir[PATH_MAX + 8];
    snprintf(wdir, sizeof wdir, "%s/wal", dir);
    rmdir(wdir);
    rmdir(dir);
}

static void write_file(const char *path, const uint8_t *p, size_t n) {
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0 || (n && write(fd, p, n) != (ssize_t)n))
        FAIL("cannot write %s: %s", path, strerror(errno));
    close(fd);
}

/* Reads a whole file; returns NULL when it does not exist. */
static uint8_t *read_whole(const char *path, size_t *n) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    struct stat st;
    fstat(fd, &st);
    *n = (size_t)st.st_size;
    uint8_t *p = malloc(*n ? *n : 1);
    if (*n && pread(fd, p, *n, 0) != (ssize_t)*n)
        FAIL("cannot read %s", path);
    close(fd);
    return p;
}

/* ---- the real writer produces the format built here ---- */

static int writer_done;

static void on_written(rn_wal_entry *e, int status) {
    if (status != 0)
        FAIL("rn_wal_submit failed: %d", status);
    (void)e;
    writer_done++;
}

static int ignore_record(void *arg, const uint8_t *p, size_t n) {
    (void)arg;
    (void)p;
    (void)n;
    return 0;
}

static void check_writer_format(void) {
    uv_loop_t loop;
    uv_loop_init(&loop);
    rn_wal_recovery rec;
    if (rn_wal_recover(dir, 0, ignore_record, NULL, &rec) != 0)
        FAIL("recovery of an empty directory failed");
    rn_wal_options opts = {.segment_bytes = 1u << 20};
    int err = 0;
    rn_wal *wal = rn_wal_open(&loop, dir, &rec, &opts, &err);
    if (!wal)
        FAIL("rn_wal_open failed: %d", err);
    static uint8_t big[300];
    for (size_t i = 0; i < sizeof big; i++)
        big[i] = (uint8_t)(i * 7 + 1);
    rn_wal_entry e[3];
    memset(e, 0, sizeof e);
    e[0].pieces = 0; /* an empty record */
    e[1].pieces = 1;
    e[1].piece[0] = (struct iovec){(void *)"hello", 5};
    e[2].pieces = 2;
    e[2].piece[0] = (struct iovec){big, 100};
    e[2].piece[1] = (struct iovec){big + 100, 200};
    /* e[0] starts a batch at once; e[1] and e[2] gather behind it. */
    for (int i = 0; i < 3; i++) {
        e[i].done = on_written;
        rn_wal_submit(wal, &e[i]);
    }
    for (int i = 0; i < 1000 && writer_done < 3; i++)
        uv_run(&loop, UV_RUN_ONCE);
    if (writer_done != 3)
        FAIL("the writer did not finish");
    rn_wal_close(wal);
    uv_loop_close(&loop);

    char path[PATH_MAX + 40];
    seg_path(1, path, sizeof path);
    size_t n;
    uint8_t *got = read_whole(path, &n);
    if (!got || n < HEADER)
        FAIL("the writer left no segment 1");
    uint64_t salt = get_u64(got + 24);
    image want = {0};
    uint8_t h[HEADER], b[BATCH];
    encode_header(h, 1, 0, salt);
    img_append(&want, h, HEADER);
    encode_batch_header(b, salt, 1, 1, frame_size(0));
    img_append(&want, b, BATCH);
    append_record(&want, NULL, 0);
    encode_batch_header(b, salt, 2, 2, frame_size(5) + frame_size(300));
    img_append(&want, b, BATCH);
    append_record(&want, (const uint8_t *)"hello", 5);
    append_record(&want, big, 300);
    if (n != want.len || memcmp(got, want.data, n) != 0)
        FAIL("the writer's segment differs from the documented format built here");
    free(got);
    head_path(path, sizeof path);
    got = read_whole(path, &n);
    head_image hi = {.exists = 1};
    uint64_t head = 0;
    int torn;
    if (!got || n != HEAD_BYTES)
        FAIL("the writer's wal/HEAD is missing or not %d bytes", HEAD_BYTES);
    memcpy(hi.data, got, n);
    if (head_value(&hi, &head, &torn) != 1 || head != 1 || torn)
        FAIL("the writer's wal/HEAD does not name segment 1 as documented");
    free(got);
    free(want.data);
    free(want.dirty);
    empty_wal_dir();
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    snprintf(dir, sizeof dir, "%s/runnel-fuzz-wal-XXXXXX", base);
    if (!mkdtemp(dir))
        FAIL("mkdtemp: %s", strerror(errno));
    atexit(remove_dir);
    __sanitizer_set_death_callback(remove_dir);
    trace = getenv("RUNNEL_FUZZ_TRACE") != NULL;
    check_writer_format();
    return 0;
}

/* ---- input ---- */

typedef struct {
    const uint8_t *p;
    size_t n;
} input;

static uint8_t take(input *in) {
    if (in->n == 0)
        return 0;
    in->n--;
    return *in->p++;
}

static uint64_t take_u64(input *in) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | take(in);
    return v;
}

/* ---- recovery output ---- */

typedef struct {
    uint8_t *payload;
    size_t len;
} replayed;

typedef struct {
    replayed rec[MAX_REPLAYED];
    size_t count;
} replay_log;

static int on_replay(void *arg, const uint8_t *p, size_t n) {
    replay_log *log = arg;
    if (log->count == MAX_REPLAYED)
        FAIL("more than %d records replayed", MAX_REPLAYED);
    replayed *r = &log->rec[log->count++];
    r->payload = malloc(n ? n : 1);
    if (n)
        memcpy(r->payload, p, n);
    r->len = n;
    return 0;
}

static void replay_log_free(replay_log *log) {
    for (size_t i = 0; i < log->count; i++)
        free(log->rec[i].payload);
    log->count = 0;
}

/* ---- the reference model ---- */

typedef struct {
    int rc;
    record_loc rec[MAX_REPLAYED];
    size_t count;
    uint64_t last_segment, last_valid_end, torn_bytes, zero_bytes;
    int unlinked[MAX_SEGS];
    size_t truncated_seg; /* image cut to new_len, or MAX_SEGS */
    size_t new_len;
} model;

static size_t last_nonzero(const image *im, size_t from) {
    size_t last = im->len;
    while (last > from && im->data[last - 1] == 0)
        last--;
    return last;
}

/* An intact batch at pos with sequence number seq ending by stop: records
 * appended to m (when m is given); returns its end, or 0. */
static size_t model_batch(const image *im, size_t k, size_t pos, size_t stop, uint64_t seq,
                          model *m) {
    uint32_t records;
    uint64_t s, bytes;
    if (pos > stop || stop - pos < BATCH ||
        !batch_header_ok(im, pos, im->salt, &records, &s, &bytes) || s != seq || records == 0 ||
        bytes > stop - pos - BATCH)
        return 0;
    size_t end = pos + BATCH + (size_t)bytes, p = pos + BATCH;
    record_loc found[MAX_REPLAYED];
    for (uint32_t i = 0; i < records; i++) {
        if (end - p < 8 || i >= MAX_REPLAYED)
            return 0;
        uint32_t len = get_u32(im->data + p);
        if (len > RN_WAL_MAX_RECORD || len > end - p - 8 ||
            get_u32(im->data + p + 4) !=
                crc32c_bitwise(crc32c_bitwise(0, im->data + p, 4), im->data + p + 8, len))
            return 0;
        found[i] = (record_loc){k, p, len};
        p += 8 + (size_t)len;
    }
    if (p != end)
        return 0;
    for (uint32_t i = 0; m && i < records; i++) {
        if (m->count == MAX_REPLAYED)
            FAIL("model: too many records");
        m->rec[m->count++] = found[i];
    }
    return end;
}

/* Every 512-byte sector that [a, b) touches holds a non-zero byte at or
 * after `from`; b within the image. */
static int model_written(const image *im, size_t from, size_t a, size_t b) {
    if (b > im->len)
        return 0;
    for (size_t sec = a - a % 512; sec < b; sec += 512) {
        size_t lo = sec < from ? from : sec, hi = sec + 512 < im->len ? sec + 512 : im->len;
        int nz = 0;
        for (size_t k = lo; k < hi && !nz; k++)
            nz = im->data[k] != 0;
        if (!nz)
            return 0;
    }
    return 1;
}

/* The newest segment's bytes after its intact batches (at pos; next
 * sequence number seq; last non-zero byte ends at nonzero) look like an
 * unfinished batch: no intact later batch header with a higher sequence
 * number; with an intact header, nothing after its recorded end; else no
 * header written whole; and no record written whole that fails. */
static int model_unfinished(const image *im, size_t pos, uint64_t seq, size_t nonzero) {
    uint32_t r;
    uint64_t s, b;
    for (size_t q = pos + 1; q + BATCH <= im->len; q++)
        if (batch_header_ok(im, q, im->salt, &r, &s, &b) && s > seq)
            return 0;
    int header = batch_header_ok(im, pos, im->salt, &r, &s, &b) && s == seq;
    size_t bound = nonzero;
    if (header) {
        size_t bend = b < im->len - pos - BATCH ? pos + BATCH + (size_t)b : im->len;
        if (bend < nonzero)
            return 0;
        bound = bend;
    } else if (model_written(im, pos, pos, pos + BATCH)) {
        return 0;
    }
    for (size_t p = pos + BATCH; p < bound && bound - p >= 8;) {
        if (!model_written(im, pos, p, p + 8))
            break;
        uint64_t end = p + 8 + (uint64_t)get_u32(im->data + p);
        if (end > bound && (!header || end > im->len))
            break;
        if (end > bound)
            return 0;
        uint32_t len = get_u32(im->data + p);
        if (model_written(im, pos, p, (size_t)end) &&
            (len > RN_WAL_MAX_RECORD ||
             get_u32(im->data + p + 4) !=
                 crc32c_bitwise(crc32c_bitwise(0, im->data + p, 4), im->data + p + 8, len)))
            return 0;
        p = (size_t)end;
    }
    return 1;
}

static void model_check(const image *img, size_t nseg, const head_image *hi, uint64_t from,
                        model *m) {
    memset(m, 0, sizeof *m);
    m->truncated_seg = MAX_SEGS;
    m->last_segment = from ? from - 1 : 0;
    size_t segs[MAX_SEGS], ns = 0;
    for (size_t k = 0; k < nseg; k++)
        if (img[k].exists && img[k].number >= from)
            segs[ns++] = k;
    uint64_t head = 0;
    int torn;
    int hs = head_value(hi, &head, &torn);
    if (hs < 0 || (hs == 0 && (ns || from))) {
        m->rc = RN_WAL_CORRUPT;
        return;
    }
    if (hs == 0)
        return; /* a new log */
    uint64_t want = from ? from : 1;
    for (size_t i = 0; i < ns; i++, want++)
        if (img[segs[i]].number != want) {
            m->rc = RN_WAL_CORRUPT;
            return;
        }
    if (head >= want || (ns && img[segs[ns - 1]].number > head + 1)) {
        m->rc = RN_WAL_CORRUPT;
        return;
    }
    /* a torn slot was naming head + 1, which then exists */
    if (torn && head + 1 >= (from ? from : 1) && !(ns && img[segs[ns - 1]].number == head + 1)) {
        m->rc = RN_WAL_CORRUPT;
        return;
    }
    size_t live = ns;
    for (size_t i = 0; i < ns; i++) {
        const image *im = &img[segs[i]];
        if (header_ok(im))
            continue;
        size_t body = im->len < HEADER ? im->len : HEADER;
        if (i + 1 == ns && im->number > head && !torn && last_nonzero(im, body) == body) {
            m->unlinked[segs[i]] = 1;
            live = ns - 1;
            continue;
        }
        m->rc = RN_WAL_CORRUPT;
        return;
    }
    for (size_t i = 0; i < live; i++) {
        const image *im = &img[segs[i]];
        uint64_t limit = i + 1 < live ? get_u64(img[segs[i + 1]].data + 16) : NO_LIMIT;
        size_t stop = limit < im->len ? (size_t)limit : im->len;
        size_t pos = HEADER, next;
        uint64_t seq = 1;
        while ((next = model_batch(im, segs[i], pos, stop, seq, m)) != 0) {
            pos = next;
            seq++;
        }
        if (limit != NO_LIMIT) {
            if (pos != limit) {
                m->rc = RN_WAL_CORRUPT;
                return;
            }
        } else {
            size_t nonzero = last_nonzero(im, pos);
            if (nonzero > pos && !model_unfinished(im, pos, seq, nonzero)) {
                m->rc = RN_WAL_CORRUPT;
                return;
            }
            m->torn_bytes = nonzero - pos;
            m->zero_bytes = im->len - nonzero;
            m->truncated_seg = segs[i];
            m->new_len = pos;
        }
        m->last_segment = im->number;
        m->last_valid_end = pos;
    }
}

/* The model's outcome: a refusal replays nothing and changes nothing. */
static void model_recover(const image *img, size_t nseg, const head_image *hi, uint64_t from,
                          model *m) {
    model_check(img, nseg, hi, from, m);
    if (m->rc != 0) {
        m->count = 0;
        memset(m->unlinked, 0, sizeof m->unlinked);
        m->truncated_seg = MAX_SEGS;
    }
}

/* ---- checks ---- */

static void check_replay(const replay_log *log, const model *m, const image *img,
                         const char *what) {
    if (log->count != m->count)
        FAIL("%s: %zu records replayed, the model says %zu", what, log->count, m->count);
    for (size_t i = 0; i < m->count; i++) {
        const record_loc *r = &m->rec[i];
        if (log->rec[i].len != r->len ||
            (r->len && memcmp(log->rec[i].payload, img[r->seg].data + r->pos + 8, r->len) != 0))
            FAIL("%s: record %zu differs from the model's (segment %llu offset %zu)", what, i,
                 (unsigned long long)img[r->seg].number, r->pos);
    }
}

static void check_files(const image *img, size_t nseg, const head_image *hi, const model *m) {
    for (size_t k = 0; k < nseg; k++) {
        char path[PATH_MAX + 40];
        seg_path(img[k].number, path, sizeof path);
        size_t n = 0;
        uint8_t *got = read_whole(path, &n);
        int want_exists = img[k].exists && !m->unlinked[k];
        size_t want_len = k == m->truncated_seg ? m->new_len : img[k].len;
        if (!want_exists && got)
            FAIL("segment %llu should have been removed", (unsigned long long)img[k].number);
        if (want_exists && (!got || n != want_len || memcmp(got, img[k].data, n) != 0))
            FAIL("segment %llu: %s, %zu bytes, expected %zu bytes of its old content",
                 (unsigned long long)img[k].number, got ? "present" : "missing", n, want_len);
        free(got);
    }
    char path[PATH_MAX + 40];
    head_path(path, sizeof path);
    size_t n = 0;
    uint8_t *got = read_whole(path, &n);
    if (!!got != hi->exists || (got && (n != HEAD_BYTES || memcmp(got, hi->data, n) != 0)))
        FAIL("recovery changed wal/HEAD");
    free(got);
}

static int touched(const image *im, const record_loc *r) {
    size_t end = r->pos + 8 + r->len;
    if (end > im->orig_len)
        return 1;
    for (size_t b = r->pos; b < end; b++)
        if (im->dirty[b])
            return 1;
    return 0;
}

/* Property 3: up to the first damaged record, the replayed records are the
 * written ones from the starting segment on, in order. */
static void check_prefix(const model *m, const image *img, const record_loc *orig, size_t norig,
                         uint64_t from) {
    size_t first = 0;
    while (first < norig && img[orig[first].seg].number < from)
        first++;
    for (size_t i = 0; i < m->count; i++) {
        const record_loc *r = &m->rec[i];
        if (touched(&img[r->seg], r))
            return;
        size_t want = first + i;
        if (want >= norig || orig[want].seg != r->seg || orig[want].pos != r->pos)
            FAIL("replayed record %zu is the undamaged record at segment %llu offset %zu, "
                 "but the written record %zu comes next",
                 i, (unsigned long long)img[r->seg].number, r->pos, want);
    }
}

/* Property 4: after a successful recovery, every written record from the
 * starting segment on was replayed, but those from orig index
 * first_of_last on (loss_allowed_from). */
static void check_nothing_lost(const replay_log *log, const image *img, const record_loc *orig,
                               size_t norig, size_t first_of_last, uint64_t from) {
    size_t first = 0;
    while (first < norig && img[orig[first].seg].number < from)
        first++;
    if (first_of_last < first)
        return;
    size_t must = first_of_last - first;
    if (log->count < must)
        FAIL("recovery succeeded with %zu records but %zu acknowledged records (all but the "
             "newest segment's last batch) were written: a loss went unnoticed",
             log->count, must);
    for (size_t i = 0; i < must; i++) {
        const record_loc *o = &orig[first + i];
        if (log->rec[i].len != o->len ||
            (o->len && memcmp(log->rec[i].payload, img[o->seg].data + o->pos + 8, o->len) != 0))
            FAIL("replayed record %zu is not the written record it should be", i);
    }
}

/* ---- building and damaging ---- */

typedef struct built built;
static int loss_allowed_from(const built *b, const image *img, size_t *first);

struct built {
    size_t nseg;
    uint64_t from;
    size_t norig;
    size_t last_batch[MAX_SEGS]; /* per image: orig index of its last batch's first record */
    size_t end_of[MAX_SEGS];     /* per image: orig index after its records */
    int truncated[MAX_SEGS];     /* per image: a damage op cut it */
};

/* Property 4's exception: the written records a successful recovery may
 * lose start at *first (orig index): the last batch of the newest segment
 * that still has records, when no later segment with an undamaged header
 * says where its acknowledged records end. Returns 0 when the property
 * cannot be asked: that segment was truncated (a cut at a batch boundary
 * looks like an end). */
static int loss_allowed_from(const built *b, const image *img, size_t *first) {
    size_t e = b->nseg;
    while (e > 0 && !(img[e - 1].exists && b->end_of[e - 1] > b->last_batch[e - 1]))
        e--;
    if (e == 0) {
        *first = b->norig;
        return 1;
    }
    size_t k = e - 1;
    int fenced = 0;
    for (size_t j = e; j < b->nseg; j++) {
        int undamaged = img[j].exists && img[j].len >= HEADER;
        for (size_t x = 0; undamaged && x < HEADER; x++)
            undamaged = !img[j].dirty[x];
        fenced |= undamaged;
    }
    *first = fenced ? b->end_of[k] : b->last_batch[k];
    return !b->truncated[k];
}

/* Appends a batch of `records` pseudo-random records (lengths from the
 * input) to image k, noting where each went in orig. */
static void append_batch(image *img, size_t k, input *in, uint32_t records, uint32_t *seed,
                         record_loc *orig, size_t *norig) {
    image *im = &img[k];
    uint8_t payload[MAX_RECS_PER_BATCH][512];
    uint32_t lens[MAX_RECS_PER_BATCH];
    uint64_t bytes = 0;
    for (uint32_t r = 0; r < records; r++) {
        lens[r] = (uint32_t)take(in) * 2;
        for (uint32_t j = 0; j < lens[r]; j++) {
            *seed ^= *seed << 13;
            *seed ^= *seed >> 17;
            *seed ^= *seed << 5;
            payload[r][j] = (uint8_t)*seed;
        }
        if (lens[r] >= 4)
            put_u32(payload[r], (uint32_t)*norig + r); /* distinct per record */
        bytes += frame_size(lens[r]);
    }
    uint8_t h[BATCH];
    encode_batch_header(h, im->salt, records, ++im->batches, bytes);
    img_append(im, h, BATCH);
    for (uint32_t r = 0; r < records; r++) {
        orig[(*norig)++] = (record_loc){k, im->len, lens[r]};
        append_record(im, payload[r], lens[r]);
    }
}

static void build(input *in, image *img, head_image *hi, record_loc *orig, built *b) {
    uint8_t b0 = take(in);
    b->nseg = 1 + b0 % MAX_SEGS;
    int preallocated = b0 >> 6 & 1; /* segments end in zeros, as when written into spares */
    /* Without a checkpoint (from 0) the log starts at segment 1; after one it
     * starts at the checkpoint's segment, or later ones are replayed. */
    unsigned from_choice = (unsigned)(b0 >> 4) % 3;
    uint64_t start = from_choice == 0 ? 1 : 1 + (uint64_t)(b0 >> 2) % 3;
    b->from = from_choice == 0 ? 0 : from_choice == 1 ? start : start + 1;
    int head_behind = b0 >> 7 & 1; /* a crash between creating the newest and naming it */
    uint32_t seed = 0x9E3779B9u ^ take(in);
    b->norig = 0;
    memset(b->truncated, 0, sizeof b->truncated);
    uint64_t prev_end = start > 1 ? 4096 : 0; /* the checkpointed predecessor's */
    for (size_t k = 0; k < b->nseg; k++) {
        image *im = &img[k];
        im->number = start + k;
        im->exists = 1;
        im->salt = take_u64(in);
        im->batches = 0;
        uint8_t h[HEADER];
        encode_header(h, im->number, prev_end, im->salt);
        img_append(im, h, HEADER);
        size_t nb = take(in) % (MAX_BATCHES_PER_SEG + 1);
        b->last_batch[k] = b->norig;
        for (size_t j = 0; j < nb; j++) {
            b->last_batch[k] = b->norig;
            append_batch(img, k, in, 1 + take(in) % MAX_RECS_PER_BATCH, &seed, orig, &b->norig);
        }
        b->end_of[k] = b->norig;
        TRACE("segment %llu: %zu batches, %zu bytes, records up to %zu\n",
              (unsigned long long)im->number, nb, im->len, b->norig);
        prev_end = im->len; /* the acknowledged end, before any preallocated zeros */
        if (preallocated) {
            static const uint8_t zeros[PREALLOCATED];
            img_append(im, zeros, PREALLOCATED);
        }
        im->orig_len = im->len;
    }
    uint64_t newest = img[b->nseg - 1].number;
    uint64_t head = head_behind && img[b->nseg - 1].batches == 0 ? newest - 1 : newest;
    hi->exists = 1;
    memset(hi->data, 0, HEAD_BYTES);
    encode_slot(hi->data + 512 * (head & 1), head);
    encode_slot(hi->data + 512 * ((head + 1) & 1), head ? head - 1 : 0);
    TRACE("from %llu, head %llu, preallocated %d\n", (unsigned long long)b->from,
          (unsigned long long)head, preallocated);
    for (int op = 0; op < MAX_OPS && in->n > 0; op++) {
        uint8_t code = take(in);
        size_t which = (code >> 3) % b->nseg;
        image *im = &img[which];
        size_t pos = take(in) | (size_t)take(in) << 8;
        uint8_t val = take(in);
        TRACE("op %u on image %zu (segment %llu): pos %zu val %u\n", (unsigned)(code % 8), which,
              (unsigned long long)im->number, pos, (unsigned)val);
        switch (code % 8) {
        case 0: /* XOR a byte */
        case 1: /* set a byte */
            if (im->len) {
                size_t at = pos % im->len;
                uint8_t nv = code % 8 == 0 ? im->data[at] ^ val : val;
                im->dirty[at] |= nv != im->data[at];
                im->data[at] = nv;
            }
            break;
        case 2: /* truncate */
            im->len = pos % (im->len + 1);
            b->truncated[which] = 1;
            break;
        case 3: /* append input bytes */
            for (unsigned j = 0; j < val % 64u; j++) {
                uint8_t c = take(in);
                img_append(im, &c, 1);
                im->dirty[im->len - 1] = 1;
            }
            break;
        case 4: { /* append a well-formed batch of input bytes (a failed batch
                   * that reached the disk, or a forged one) */
            uint8_t payload[64];
            uint32_t len = val % 64u;
            for (uint32_t j = 0; j < len; j++)
                payload[j] = take(in);
            size_t at = im->len;
            uint8_t h[BATCH];
            encode_batch_header(h, im->salt, 1, ++im->batches, frame_size(len));
            img_append(im, h, BATCH);
            append_record(im, payload, len);
            memset(im->dirty + at, 1, im->len - at);
            break;
        }
        case 5: /* delete the file */
            im->exists = 0;
            break;
        case 6: /* XOR a byte of the head */
            hi->data[pos % HEAD_BYTES] ^= val;
            break;
        default: /* delete the head */
            hi->exists = 0;
            break;
        }
    }
    empty_wal_dir();
    for (size_t k = 0; k < b->nseg; k++) {
        if (!img[k].exists)
            continue;
        char path[PATH_MAX + 40];
        seg_path(img[k].number, path, sizeof path);
        write_file(path, img[k].data, img[k].len);
    }
    if (hi->exists) {
        char path[PATH_MAX + 40];
        head_path(path, sizeof path);
        write_file(path, hi->data, HEAD_BYTES);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static image img[MAX_SEGS];
    static head_image hi;
    static record_loc orig[MAX_WRITTEN];
    static model m;
    static replay_log log;
    for (size_t k = 0; k < MAX_SEGS; k++) {
        img[k].len = 0;
        img[k].exists = 0;
        if (img[k].dirty)
            memset(img[k].dirty, 0, img[k].cap);
    }
    input in = {data, size};
    char wdir[PATH_MAX + 8];
    snprintf(wdir, sizeof wdir, "%s/wal", dir);
    mkdir(wdir, 0755);
    built b;
    build(&in, img, &hi, orig, &b);

    model_recover(img, b.nseg, &hi, b.from, &m);
    rn_wal_recovery rec;
    int rc = rn_wal_recover(dir, b.from, on_replay, &log, &rec);
    if (rc != m.rc)
        FAIL("rn_wal_recover returned %d, the model says %d (%s)", rc, m.rc, rec.damage.what);
    if (rc != 0 && log.count != 0)
        FAIL("a refused recovery replayed %zu records", log.count);
    check_replay(&log, &m, img, "recovery");
    check_files(img, b.nseg, &hi, &m);
    check_prefix(&m, img, orig, b.norig, b.from);
    size_t may_lose;
    if (rc == 0 && hi.exists && loss_allowed_from(&b, img, &may_lose))
        check_nothing_lost(&log, img, orig, b.norig, may_lose, b.from);
    replay_log_free(&log);
    if (rc != 0) {
        if (rec.damage.kind == RN_WAL_INTACT || !rec.damage.what[0])
            FAIL("a refusal without a description of the damage");
        for (int after = 0; after <= 1; after++) {
            if (rn_wal_damaged_records(dir, b.from, &rec.damage, after, on_replay, &log) != 0)
                FAIL("rn_wal_damaged_records failed");
            replay_log_free(&log);
        }
        check_files(img, b.nseg, &hi, &m);
        return 0;
    }
    if (rec.records != m.count || rec.last_segment != m.last_segment ||
        rec.last_valid_end != m.last_valid_end || rec.torn_bytes != m.torn_bytes ||
        rec.zero_bytes != m.zero_bytes)
        FAIL("recovery figures: records %llu last_segment %llu last_valid_end %llu torn %llu "
             "zeros %llu; model %zu %llu %llu %llu %llu",
             (unsigned long long)rec.records, (unsigned long long)rec.last_segment,
             (unsigned long long)rec.last_valid_end, (unsigned long long)rec.torn_bytes,
             (unsigned long long)rec.zero_bytes, m.count, (unsigned long long)m.last_segment,
             (unsigned long long)m.last_valid_end, (unsigned long long)m.torn_bytes,
             (unsigned long long)m.zero_bytes);

    /* Recovering again changes nothing. */
    rn_wal_recovery again;
    rc = rn_wal_recover(dir, b.from, on_replay, &log, &again);
    if (rc != 0 || again.torn_bytes != 0 || again.zero_bytes != 0 ||
        again.last_segment != rec.last_segment || again.last_valid_end != rec.last_valid_end)
        FAIL("second recovery: rc %d torn %llu (%s)", rc, (unsigned long long)again.torn_bytes,
             again.damage.what);
    check_replay(&log, &m, img, "second recovery");
    replay_log_free(&log);

    /* The log opens after it (new segment) and still recovers. */
    int err = 0;
    rn_wal_options opts = {.segment_bytes = 1u << 20};
    rn_wal *wal = rn_wal_open(uv_default_loop(), dir, &rec, &opts, &err);
    if (!wal)
        FAIL("rn_wal_open after recovery failed: %d", err);
    rn_wal_close(wal);
    rc = rn_wal_recover(dir, b.from, on_replay, &log, &again);
    if (rc != 0 || again.last_segment != rec.last_segment + 1 || again.last_valid_end != HEADER)
        FAIL("recovery after rn_wal_open: rc %d, last segment %llu (expected %llu): %s", rc,
             (unsigned long long)again.last_segment, (unsigned long long)rec.last_segment + 1,
             again.damage.what);
    check_replay(&log, &m, img, "recovery after rn_wal_open");
    replay_log_free(&log);
    return 0;
}
