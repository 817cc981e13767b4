/*
 * fuzz_wal_recovery.c — libFuzzer harness for log recovery (rn_wal_recover,
 * log/wal.h).
 *
 * How: the input describes a valid log and then damages it.
 *  - A log of 1..3 consecutive segments (first number 1..3), each with 0..4
 *    records of 0..510 bytes, is built in memory in the documented format:
 *    32-byte header {magic "RNWAL\0\0\1", u64 segment, u64 previous
 *    segment's valid length, u32 crc32c of the first 24 bytes, u32 0}, then
 *    records {u32 len, u32 crc32c(len bytes || payload), payload}, all
 *    little-endian, every record acknowledged (each header records the
 *    length of its predecessor's records). Optionally every segment ends in
 *    zeros, like one written into a preallocated spare file. Payloads are
 *    pseudo-random and distinct per record. CRCs come from a bitwise CRC-32C
 *    written here, not from util/crc32c.c. At start-up the harness checks
 *    once that this format is byte for byte what the real writer
 *    (rn_wal_open + rn_wal_submit on a libuv loop) produces.
 *  - Up to 16 damage operations from the input are applied: XOR a byte, set
 *    a byte, truncate a segment, append input bytes to a segment, append a
 *    well-formed record of input bytes (like a failed batch whose bytes
 *    reached the disk past the successor's recorded valid end), delete a
 *    segment file. Recovery starts at segment 0 (no checkpoint: the log
 *    starts at segment 1) or, as after a checkpoint, at the log's first or
 *    second segment.
 *  - The files are written to a directory under /dev/shm (one per process,
 *    emptied before each run and removed at exit) and rn_wal_recover runs.
 *
 * What must hold:
 *  1. No crash, no ASan/UBSan report, no leak.
 *  2. The outcome equals a reference model of the documented recovery
 *     written here over the in-memory images: trailing segments whose header
 *     is bad are dropped; a gap in the segment numbers (a lost segment:
 *     numbering starts at the starting segment, or 1) is RN_WAL_CORRUPT;
 *     each segment replays its records until its successor's recorded valid
 *     length, where a bad record or a different end is RN_WAL_CORRUPT; the
 *     newest segment replays until its first bad record and its tail is cut,
 *     trailing zeros counted as unused preallocation, the rest as torn.
 *     Compared: the return code (0 or RN_WAL_CORRUPT; nothing else can
 *     happen on tmpfs), every replayed payload in order (so only records
 *     whose CRC matches are replayed), the recovery figures, and the files
 *     afterwards (dropped segments unlinked, the newest cut, nothing else
 *     changed).
 *  3. Independently of the model: the replayed records, up to the first one
 *     that the damage touched, are exactly the written records from the
 *     starting segment on, in order (a prefix; never a record that was not
 *     written, never one skipped). A record the damage touched may only be
 *     replayed if its frame is intact (the model checks the CRC).
 *  4. After a successful recovery, recovering again replays the same records
 *     and cuts nothing; opening the log (rn_wal_open, which starts the next
 *     segment) and recovering once more also succeeds with the same records.
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

#define HEADER 32
#define MAX_SEGS 3
#define MAX_RECS_PER_SEG 4
#define MAX_OPS 16
#define MAX_REPLAYED 4096
#define PREALLOCATED 256
#define NO_LIMIT UINT64_MAX

static char dir[PATH_MAX];

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

/* ---- in-memory segment images ---- */

typedef struct {
    uint64_t number;
    int exists;
    uint8_t *data;
    size_t len, cap;
    uint8_t *dirty; /* per byte: changed or added by the damage */
    size_t orig_len;
} image;

typedef struct {
    size_t seg; /* image index */
    size_t pos; /* frame offset in the segment */
    uint32_t len;
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

static void encode_header(uint8_t h[HEADER], uint64_t seg, uint64_t prev_end) {
    static const uint8_t magic[8] = {'R', 'N', 'W', 'A', 'L', 0, 0, 1};
    memcpy(h, magic, 8);
    put_u64(h + 8, seg);
    put_u64(h + 16, prev_end);
    put_u32(h + 24, crc32c_bitwise(0, h, 24));
    put_u32(h + 28, 0);
}

static void append_record(image *im, const uint8_t *payload, uint32_t len) {
    uint8_t frame[8];
    put_u32(frame, len);
    put_u32(frame + 4, crc32c_bitwise(crc32c_bitwise(0, frame, 4), payload, len));
    img_append(im, frame, 8);
    img_append(im, payload, len);
}

/* Header intact (magic, crc); fills seg/prev_end. */
static int header_ok(const image *im, uint64_t *seg, uint64_t *prev_end) {
    static const uint8_t magic[8] = {'R', 'N', 'W', 'A', 'L', 0, 0, 1};
    if (im->len < HEADER || memcmp(im->data, magic, 8) != 0 ||
        get_u32(im->data + 24) != crc32c_bitwise(0, im->data, 24))
        return 0;
    *seg = get_u64(im->data + 8);
    *prev_end = get_u64(im->data + 16);
    return 1;
}

/* ---- files ---- */

static void seg_path(uint64_t n, char *out, size_t cap) {
    snprintf(out, cap, "%s/wal/%020llu.log", dir, (unsigned long long)n);
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

    image want = {0};
    uint8_t h[HEADER];
    encode_header(h, 1, 0);
    img_append(&want, h, HEADER);
    append_record(&want, NULL, 0);
    append_record(&want, (const uint8_t *)"hello", 5);
    append_record(&want, big, 300);
    char path[PATH_MAX + 40];
    seg_path(1, path, sizeof path);
    size_t n;
    uint8_t *got = read_whole(path, &n);
    if (!got || n != want.len || memcmp(got, want.data, n) != 0)
        FAIL("the writer's segment differs from the documented format built here");
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

static void model_recover(const image *img, size_t nseg, uint64_t from, model *m) {
    memset(m, 0, sizeof *m);
    m->truncated_seg = MAX_SEGS;
    m->last_segment = from ? from - 1 : 0;
    size_t segs[MAX_SEGS], ns = 0;
    for (size_t k = 0; k < nseg; k++)
        if (img[k].exists && img[k].number >= from)
            segs[ns++] = k;
    uint64_t seg, prev;
    while (ns > 0 &&
           !(header_ok(&img[segs[ns - 1]], &seg, &prev) && seg == img[segs[ns - 1]].number)) {
        m->unlinked[segs[ns - 1]] = 1;
        ns--;
    }
    for (size_t i = 0; i < ns; i++) { /* numbers are consecutive from `from` (or 1) */
        if (img[segs[i]].number != (i ? img[segs[i - 1]].number + 1 : from ? from : 1)) {
            m->rc = RN_WAL_CORRUPT;
            return;
        }
    }
    for (size_t i = 0; i < ns; i++) {
        const image *im = &img[segs[i]];
        if (!header_ok(im, &seg, &prev) || seg != im->number) {
            m->rc = RN_WAL_CORRUPT;
            return;
        }
        uint64_t limit = NO_LIMIT;
        if (i + 1 < ns && !header_ok(&img[segs[i + 1]], &seg, &limit)) {
            m->rc = RN_WAL_CORRUPT;
            return;
        }
        size_t stop = limit < im->len ? (size_t)limit : im->len;
        size_t pos = HEADER;
        while (pos + 8 <= stop) {
            uint32_t len = get_u32(im->data + pos);
            if (len > RN_WAL_MAX_RECORD || pos + 8 + len > stop ||
                get_u32(im->data + pos + 4) !=
                    crc32c_bitwise(crc32c_bitwise(0, im->data + pos, 4), im->data + pos + 8, len))
                break;
            if (m->count == MAX_REPLAYED)
                FAIL("model: too many records");
            m->rec[m->count++] = (record_loc){segs[i], pos, len};
            pos += 8 + len;
        }
        if (limit != NO_LIMIT && pos != limit) {
            m->rc = RN_WAL_CORRUPT;
            return;
        }
        if (i + 1 == ns) { /* trailing zeros are unused preallocation, not torn */
            size_t last = im->len;
            while (last > pos && im->data[last - 1] == 0)
                last--;
            m->torn_bytes = last - pos;
            m->zero_bytes = im->len - last;
            m->truncated_seg = segs[i];
            m->new_len = pos;
        }
        m->last_segment = im->number;
        m->last_valid_end = pos;
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

static void check_files(const image *img, size_t nseg, const model *m) {
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
        const image *im = &img[r->seg];
        size_t end = r->pos + 8 + r->len;
        int touched = end > im->orig_len;
        for (size_t b = r->pos; !touched && b < end; b++)
            touched = im->dirty[b];
        if (touched)
            return;
        size_t want = first + i;
        if (want >= norig || orig[want].seg != r->seg || orig[want].pos != r->pos)
            FAIL("replayed record %zu is the undamaged record at segment %llu offset %zu, "
                 "but the written record %zu comes next",
                 i, (unsigned long long)im->number, r->pos, want);
    }
}

/* Builds the log, damages it, writes it out; returns the number of images. */
static size_t build(input *in, image *img, record_loc *orig, size_t *norig, uint64_t *from) {
    uint8_t b0 = take(in);
    size_t nseg = 1 + b0 % MAX_SEGS;
    int preallocated = b0 >> 6 & 1; /* segments end in zeros, as when written into spares */
    /* Without a checkpoint (from 0) the log starts at segment 1; after one it
     * starts at the checkpoint's segment, or later ones are replayed. */
    unsigned from_choice = (unsigned)(b0 >> 4) % 3;
    uint64_t start = from_choice == 0 ? 1 : 1 + (uint64_t)(b0 >> 2) % 3;
    *from = from_choice == 0 ? 0 : from_choice == 1 ? start : start + 1;
    uint32_t seed = 0x9E3779B9u ^ take(in);
    *norig = 0;
    uint64_t prev_end = start > 1 ? 4096 : 0; /* the checkpointed predecessor's */
    for (size_t k = 0; k < nseg; k++) {
        image *im = &img[k];
        im->number = start + k;
        im->exists = 1;
        uint8_t h[HEADER];
        encode_header(h, im->number, prev_end);
        img_append(im, h, HEADER);
        size_t cnt = take(in) % (MAX_RECS_PER_SEG + 1);
        for (size_t r = 0; r < cnt; r++) {
            uint32_t len = (uint32_t)take(in) * 2;
            uint8_t payload[512];
            for (uint32_t j = 0; j < len; j++) {
                seed ^= seed << 13;
                seed ^= seed >> 17;
                seed ^= seed << 5;
                payload[j] = (uint8_t)seed;
            }
            if (len >= 4)
                put_u32(payload, (uint32_t)*norig); /* distinct per record */
            orig[(*norig)++] = (record_loc){k, im->len, len};
            append_record(im, payload, len);
        }
        prev_end = im->len; /* the acknowledged end, before any preallocated zeros */
        if (preallocated) {
            static const uint8_t zeros[PREALLOCATED];
            img_append(im, zeros, PREALLOCATED);
        }
        im->orig_len = im->len;
    }
    for (int op = 0; op < MAX_OPS && in->n > 0; op++) {
        uint8_t code = take(in);
        image *im = &img[(code >> 3) % nseg];
        size_t pos = take(in) | (size_t)take(in) << 8;
        uint8_t val = take(in);
        switch (code % 6) {
        case 0: /* XOR a byte */
        case 1: /* set a byte */
            if (im->len) {
                size_t at = pos % im->len;
                uint8_t nv = code % 6 == 0 ? im->data[at] ^ val : val;
                im->dirty[at] |= nv != im->data[at];
                im->data[at] = nv;
            }
            break;
        case 2: /* truncate */
            im->len = pos % (im->len + 1);
            break;
        case 3: /* append input bytes */
            for (unsigned j = 0; j < val % 64u; j++) {
                uint8_t c = take(in);
                img_append(im, &c, 1);
                im->dirty[im->len - 1] = 1;
            }
            break;
        case 4: { /* append a well-formed record of input bytes (a failed batch
                   * that reached the disk, or a forged record) */
            uint8_t payload[64];
            uint32_t len = val % 64u;
            for (uint32_t j = 0; j < len; j++)
                payload[j] = take(in);
            size_t at = im->len;
            append_record(im, payload, len);
            memset(im->dirty + at, 1, im->len - at);
            break;
        }
        default: /* delete the file */
            im->exists = 0;
            break;
        }
    }
    empty_wal_dir();
    for (size_t k = 0; k < nseg; k++) {
        if (!img[k].exists)
            continue;
        char path[PATH_MAX + 40];
        seg_path(img[k].number, path, sizeof path);
        write_file(path, img[k].data, img[k].len);
    }
    return nseg;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static image img[MAX_SEGS];
    static record_loc orig[MAX_SEGS * MAX_RECS_PER_SEG];
    static model m;
    static replay_log log;
    for (size_t k = 0; k < MAX_SEGS; k++) {
        img[k].len = 0;
        img[k].exists = 0;
        if (img[k].dirty)
            memset(img[k].dirty, 0, img[k].cap);
    }
    input in = {data, size};
    size_t norig;
    uint64_t from;
    char wdir[PATH_MAX + 8];
    snprintf(wdir, sizeof wdir, "%s/wal", dir);
    mkdir(wdir, 0755);
    size_t nseg = build(&in, img, orig, &norig, &from);

    model_recover(img, nseg, from, &m);
    rn_wal_recovery rec;
    int rc = rn_wal_recover(dir, from, on_replay, &log, &rec);
    if (rc != m.rc)
        FAIL("rn_wal_recover returned %d, the model says %d", rc, m.rc);
    check_replay(&log, &m, img, "recovery");
    check_files(img, nseg, &m);
    check_prefix(&m, img, orig, norig, from);
    replay_log_free(&log);
    if (rc != 0)
        return 0;
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
    rc = rn_wal_recover(dir, from, on_replay, &log, &again);
    if (rc != 0 || again.torn_bytes != 0 || again.zero_bytes != 0 ||
        again.last_segment != rec.last_segment || again.last_valid_end != rec.last_valid_end)
        FAIL("second recovery: rc %d torn %llu", rc, (unsigned long long)again.torn_bytes);
    check_replay(&log, &m, img, "second recovery");
    replay_log_free(&log);

    /* The log opens after it (new segment) and still recovers. */
    int err = 0;
    rn_wal_options opts = {.segment_bytes = 1u << 20};
    rn_wal *wal = rn_wal_open(uv_default_loop(), dir, &rec, &opts, &err);
    if (!wal)
        FAIL("rn_wal_open after recovery failed: %d", err);
    rn_wal_close(wal);
    rc = rn_wal_recover(dir, from, on_replay, &log, &again);
    if (rc != 0 || again.last_segment != rec.last_segment + 1 || again.last_valid_end != HEADER)
        FAIL("recovery after rn_wal_open: rc %d, last segment %llu (expected %llu)", rc,
             (unsigned long long)again.last_segment, (unsigned long long)rec.last_segment + 1);
    check_replay(&log, &m, img, "recovery after rn_wal_open");
    replay_log_free(&log);
    return 0;
}
