/*
 * segment.c — encoding and decoding of the log's on-disk format: segment
 * headers, batch headers, record frames and the log head. See segment.h.
 */
#define _GNU_SOURCE
#include "log/segment.h"
#include "log/wal.h"
#include "util/buf.h"
#include "util/clock.h"
#include "util/crc32c.h"
#include "util/files.h"

#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

static const uint8_t SEG_MAGIC[8] = {'R', 'N', 'W', 'A', 'L', 0, 0, 2};
static const uint8_t HEAD_MAGIC[8] = {'R', 'N', 'W', 'H', 'E', 'A', 'D', '2'};
#define BATCH_MAGIC 0x32424e52u /* "RNB2" */
#define HEAD_SLOT 24
#define HEAD_SLOT_STRIDE 512

/* Copies a finished encoding of exactly n bytes into out. */
static void take_encoding(rn_buf *b, uint8_t *out, size_t n) {
    memcpy(out, b->data, n);
    rn_buf_free(b);
}

void rn_wal_dir(const char *dir, char *out, size_t cap) {
    snprintf(out, cap, "%s/wal", dir);
}

void rn_seg_path(const char *dir, uint64_t n, char *out, size_t cap) {
    snprintf(out, cap, "%s/wal/%020llu.log", dir, (unsigned long long)n);
}

void rn_seg_encode_header(uint8_t h[RN_SEG_HEADER], const rn_seg_header *v) {
    assert(v->number >= 1); /* segments are numbered from 1 */
    rn_buf b = {0};
    rn_buf_append(&b, SEG_MAGIC, 8);
    rn_buf_append_u64(&b, v->number);
    rn_buf_append_u64(&b, v->prev_end);
    rn_buf_append_u64(&b, v->salt);
    rn_buf_append_u32(&b, rn_crc32c(0, b.data, 32));
    rn_buf_append_u32(&b, 0);
    take_encoding(&b, h, RN_SEG_HEADER);
}

int rn_seg_decode_header(const uint8_t *h, size_t len, rn_seg_header *out) {
    memset(out, 0, sizeof *out);
    if (len < RN_SEG_HEADER)
        return -1;
    rn_reader r;
    rn_reader_init(&r, h + 8, RN_SEG_HEADER - 8);
    out->number = rn_read_u64(&r);
    out->prev_end = rn_read_u64(&r);
    out->salt = rn_read_u64(&r);
    uint32_t crc = rn_read_u32(&r);
    return memcmp(h, SEG_MAGIC, 8) == 0 && crc == rn_crc32c(0, h, 32) ? 0 : -1;
}

static uint32_t batch_crc(const uint8_t *h, uint64_t salt) {
    rn_buf s = {0};
    rn_buf_append_u64(&s, salt);
    uint32_t crc = rn_crc32c(rn_crc32c(0, s.data, 8), h, 24);
    rn_buf_free(&s);
    return crc;
}

void rn_batch_encode_header(uint8_t h[RN_BATCH_HEADER], uint64_t salt, const rn_batch_header *v) {
    /* a batch holds records, and its numbers start at 1 in each segment */
    assert(v->records >= 1 && v->seq >= 1 && v->bytes >= (uint64_t)v->records * RN_RECORD_FRAME);
    rn_buf b = {0};
    rn_buf_append_u32(&b, BATCH_MAGIC);
    rn_buf_append_u32(&b, v->records);
    rn_buf_append_u64(&b, v->seq);
    rn_buf_append_u64(&b, v->bytes);
    rn_buf_append_u32(&b, batch_crc(b.data, salt));
    rn_buf_append_u32(&b, 0);
    take_encoding(&b, h, RN_BATCH_HEADER);
}

int rn_batch_decode_header(const uint8_t *h, uint64_t salt, rn_batch_header *out) {
    rn_reader r;
    rn_reader_init(&r, h, RN_BATCH_HEADER);
    uint32_t magic = rn_read_u32(&r);
    out->records = rn_read_u32(&r);
    out->seq = rn_read_u64(&r);
    out->bytes = rn_read_u64(&r);
    uint32_t crc = rn_read_u32(&r);
    return magic == BATCH_MAGIC && crc == batch_crc(h, salt) ? 0 : -1;
}

int rn_record_check(const uint8_t *p, size_t avail, uint32_t *len) {
    if (avail < RN_RECORD_FRAME)
        return -1;
    rn_reader r;
    rn_reader_init(&r, p, RN_RECORD_FRAME);
    uint32_t n = rn_read_u32(&r), crc = rn_read_u32(&r);
    if (n > RN_WAL_MAX_RECORD || n > avail - RN_RECORD_FRAME ||
        crc != rn_crc32c(rn_crc32c(0, p, 4), p + RN_RECORD_FRAME, n))
        return -1;
    *len = n;
    return 0;
}

void rn_record_frame(uint8_t frame[RN_RECORD_FRAME], uint32_t len, uint32_t payload_crc) {
    for (int i = 0; i < 4; i++) {
        frame[i] = (uint8_t)(len >> (8 * i));
        frame[4 + i] = (uint8_t)(payload_crc >> (8 * i));
    }
}

uint64_t rn_seg_new_salt(void) {
    uint64_t salt;
    if (getrandom(&salt, sizeof salt, 0) != (ssize_t)sizeof salt)
        salt = (uint64_t)rn_mono_ms() * 0x9E3779B97F4A7C15ull ^ (uint64_t)getpid() << 32;
    return salt;
}

static void encode_slot(uint8_t s[HEAD_SLOT], uint64_t segment) {
    rn_buf b = {0};
    rn_buf_append(&b, HEAD_MAGIC, 8);
    rn_buf_append_u64(&b, segment);
    rn_buf_append_u32(&b, rn_crc32c(0, b.data, 16));
    rn_buf_append_u32(&b, 0);
    take_encoding(&b, s, HEAD_SLOT);
}

/* The segment a slot names; 0 when the slot is not intact. */
static int decode_slot(const uint8_t *s, uint64_t *segment) {
    rn_reader r;
    rn_reader_init(&r, s + 8, HEAD_SLOT - 8);
    *segment = rn_read_u64(&r);
    uint32_t crc = rn_read_u32(&r);
    return memcmp(s, HEAD_MAGIC, 8) == 0 && crc == rn_crc32c(0, s, 16);
}

int rn_head_read(const char *dir, uint64_t *segment, int *torn) {
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/wal/%s", dir, RN_HEAD_FILE);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? 0 : -errno;
    uint8_t file[2 * HEAD_SLOT_STRIDE];
    ssize_t got = pread(fd, file, sizeof file, 0);
    int rc = got < 0 ? -errno : 0;
    close(fd);
    if (rc)
        return rc;
    int found = 0;
    *torn = 0;
    for (size_t off = 0; off <= HEAD_SLOT_STRIDE; off += HEAD_SLOT_STRIDE) {
        uint64_t v;
        if (off + HEAD_SLOT > (size_t)got || !decode_slot(file + off, &v)) {
            *torn = 1;
            continue;
        }
        if (!found || v > *segment)
            *segment = v;
        found = 1;
    }
    return found ? 1 : RN_HEAD_DAMAGED;
}

int rn_head_create(const char *dir, uint64_t segment) {
    uint8_t file[2 * HEAD_SLOT_STRIDE] = {0};
    encode_slot(file, segment);
    encode_slot(file + HEAD_SLOT_STRIDE, segment);
    char wdir[PATH_MAX];
    rn_wal_dir(dir, wdir, sizeof wdir);
    return rn_atomic_write_file(wdir, RN_HEAD_FILE, file, sizeof file, 0644);
}

int rn_head_write(int fd, uint64_t segment) {
    assert(fd >= 0 && segment >= 1);
    uint8_t s[HEAD_SLOT];
    encode_slot(s, segment);
    off_t at = (off_t)(segment & 1) * HEAD_SLOT_STRIDE;
    if (pwrite(fd, s, sizeof s, at) != (ssize_t)sizeof s)
        return errno ? -errno : -EIO;
    return fdatasync(fd) < 0 ? -errno : 0;
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

int rn_list_segments(const char *dir, uint64_t from, uint64_t **out, size_t *count) {
    char wdir[PATH_MAX];
    rn_wal_dir(dir, wdir, sizeof wdir);
    DIR *d = opendir(wdir);
    if (!d)
        return -errno;
    size_t n = 0, cap = 16;
    uint64_t *v = rn_xmalloc(cap * sizeof *v);
    struct dirent *de;
    while ((de = readdir(d))) {
        unsigned long long num;
        char tail[8];
        if (strlen(de->d_name) != 24 || sscanf(de->d_name, "%20llu%4s", &num, tail) != 2 ||
            strcmp(tail, ".log") != 0 || num < from)
            continue;
        if (n == cap)
            v = rn_xrealloc(v, (cap *= 2) * sizeof *v);
        v[n++] = num;
    }
    closedir(d);
    qsort(v, n, sizeof *v, cmp_u64);
    *out = v;
    *count = n;
    return 0;
}
