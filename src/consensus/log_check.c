/*
 * log_check.c — the Raft log's segments checked before libraft loads them:
 * an unfinished last write told from damage. See log_check.h.
 */
#include "consensus/log_check.h"
#include "util/buf.h"
#include "util/files.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SECTOR 512u
#define FORMAT 1u
#define PREAMBLE 8u      /* the two CRCs */
#define ENTRY_HEADER 16u /* term, type, 3 bytes, length */
#define MAX_OPEN 64u     /* open segments looked at per group (libraft keeps a few) */

/* ---- libraft's checksum and batches ---- */

static uint32_t crc_table[256];

static void crc_init(void) {
    if (crc_table[1])
        return;
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i << 24;
        for (int k = 0; k < 8; k++)
            c = c & 0x80000000u ? (c << 1) ^ 0x04c11db7u : c << 1;
        crc_table[i] = c;
    }
}

static uint32_t raft_crc(const uint8_t *p, size_t n) {
    uint32_t crc = 0;
    while (n--)
        crc = (crc << 8) ^ crc_table[((crc >> 24) ^ *p++) & 255];
    return crc;
}

static uint32_t le32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t le64(const uint8_t *p) {
    return le32(p) | (uint64_t)le32(p + 4) << 32;
}

/* A batch's extent as its header says, when the header fits the file: its
 * entry count and total length; 0 when it does not. */
static size_t batch_extent(const uint8_t *b, size_t len, size_t off, uint64_t *n_out) {
    if (off + PREAMBLE + 8 > len)
        return 0;
    uint64_t n = le64(b + off + PREAMBLE);
    if (n == 0 || n > len / (4 * sizeof(uint64_t)))
        return 0;
    size_t header = 8 + ENTRY_HEADER * (size_t)n;
    if (header > len - off - PREAMBLE)
        return 0;
    uint64_t data = 0;
    for (uint64_t i = 0; i < n; i++)
        data += le32(b + off + PREAMBLE + 8 + ENTRY_HEADER * i + 12);
    *n_out = n;
    return PREAMBLE + header + data;
}

/* The length of the valid batch at off (both checksums hold, all of it in
 * the file) and its entry count, or 0. */
static size_t valid_batch(const uint8_t *b, size_t len, size_t off, uint64_t *n) {
    size_t ext = batch_extent(b, len, off, n);
    if (!ext || ext > len - off)
        return 0;
    size_t header = 8 + ENTRY_HEADER * (size_t)*n;
    if (le32(b + off) != raft_crc(b + off + PREAMBLE, header) ||
        le32(b + off + 4) != raft_crc(b + off + PREAMBLE + header, ext - PREAMBLE - header))
        return 0;
    return ext;
}

/* What a segment holds. */
typedef struct {
    size_t batches;        /* valid batches before the first failure */
    int bad;               /* a failure that is not the zeros after the last batch */
    size_t bad_at;         /* its offset */
    int zero_sector;       /* some sector of the failing batch reads as zeros (unfinished) */
    size_t after, entries; /* valid batches (and their entries) found after it */
} scan;

/* Valid batches at any 8-byte offset from off on, each skipped over. */
static void count_after(const uint8_t *b, size_t len, size_t off, scan *s) {
    for (size_t y = off; y + PREAMBLE + 8 <= len;) {
        uint64_t n;
        size_t l = valid_batch(b, len, y, &n);
        if (l) {
            s->after++;
            s->entries += n;
            y += l;
        } else {
            y += 8;
        }
    }
}

/* Whether a sector the failing batch at off reaches holds only zeros over
 * the batch's part of it (a sector the write did not reach). */
static int has_zero_sector(const uint8_t *b, size_t len, size_t off) {
    uint64_t n;
    size_t ext = batch_extent(b, len, off, &n);
    size_t end = ext && ext <= len - off ? off + ext : off + PREAMBLE + 8;
    if (end > len)
        end = len;
    for (size_t s = off - off % SECTOR; s < end; s += SECTOR) {
        size_t from = s < off ? off : s, to = s + SECTOR < end ? s + SECTOR : end;
        if (rn_bytes_zero(b + from, to - from))
            return 1;
    }
    return 0;
}

static void scan_segment(const uint8_t *b, size_t len, scan *s) {
    memset(s, 0, sizeof *s);
    size_t off = sizeof(uint64_t);
    while (off < len) {
        uint64_t n;
        size_t l = valid_batch(b, len, off, &n);
        if (l) {
            s->batches++;
            off += l;
            continue;
        }
        if (rn_bytes_zero(b + off, len - off))
            return; /* the preallocated rest */
        s->bad = 1;
        s->bad_at = off;
        s->zero_sector = has_zero_sector(b, len, off);
        count_after(b, len, off + 8, s);
        return;
    }
}

/* ---- the group directories ---- */

typedef struct {
    unsigned long long counter;
    char name[64];
} open_file;

static int by_counter(const void *a, const void *b) {
    const open_file *x = a, *y = b;
    return x->counter < y->counter ? -1 : x->counter > y->counter;
}

static const char RECOVER[] =
    "; refusing to start rather than cut committed entries. Recover the node from its peers: "
    "remove it from the cluster (DELETE /__runnel/cluster/members/ID), then start a node with "
    "a new id, an empty data directory and --join, and add it (docs/CLUSTER.md, \"Membership\"); "
    "or put back an intact copy of the file";

/* Reads dir/name; -2 with err on failure. */
static int read_segment(const char *dir, const char *name, rn_buf *out, char *err, size_t cap) {
    int rc = rn_read_file(dir, name, out);
    if (rc < 0) {
        snprintf(err, cap, "cannot read %s/%s: %s", dir, name, strerror(-rc));
        return -2;
    }
    return 0;
}

/* A closed segment holds valid batches from its header to its end. */
static int check_closed(const char *dir, const char *name, unsigned g, char *err, size_t cap) {
    rn_buf b = {0};
    if (read_segment(dir, name, &b, err, cap) != 0)
        return -2;
    int rc = 0;
    if (b.len >= sizeof(uint64_t) && le64(b.data) == FORMAT) {
        scan s;
        scan_segment(b.data, b.len, &s);
        if (s.bad) {
            snprintf(err, cap,
                     "group %u: closed Raft log segment %s/%s is damaged at byte %zu (a batch "
                     "fails its checksum; %zu valid batches of %zu entries follow)%s",
                     g, dir, name, s.bad_at, s.after, s.entries, RECOVER);
            rc = -1;
        }
    }
    rn_buf_free(&b);
    return rc;
}

/* The open segments, oldest first: only the last write of the newest one
 * holding batches may be unfinished. */
static int check_open(const char *dir, open_file *files, size_t n, unsigned g, char *err,
                      size_t cap) {
    const char *bad_file = NULL;
    scan bad = {0};
    size_t later = 0; /* valid batches in open segments after the failing one */
    for (size_t i = 0; i < n; i++) {
        rn_buf b = {0};
        if (read_segment(dir, files[i].name, &b, err, cap) != 0)
            return -2;
        scan s = {0};
        if (b.len >= sizeof(uint64_t) && le64(b.data) == FORMAT)
            scan_segment(b.data, b.len, &s);
        rn_buf_free(&b);
        if (bad_file) {
            later += s.batches + s.after;
        } else if (s.bad) {
            bad_file = files[i].name;
            bad = s;
        }
    }
    if (!bad_file || (bad.after == 0 && later == 0 && bad.zero_sector))
        return 0; /* intact, or an unfinished last write */
    if (bad.after || later)
        snprintf(err, cap,
                 "group %u: open Raft log segment %s/%s is damaged at byte %zu: a batch fails "
                 "its checksum and %zu valid batches (%zu entries) follow it in that file, %zu "
                 "in later open segments, so it is not the unfinished last write of a crash%s",
                 g, dir, bad_file, bad.bad_at, bad.after, bad.entries, later, RECOVER);
    else
        snprintf(err, cap,
                 "group %u: open Raft log segment %s/%s is damaged at byte %zu: its last batch "
                 "fails its checksum although every sector of it was written, so it is not the "
                 "unfinished last write of a crash%s",
                 g, dir, bad_file, bad.bad_at, RECOVER);
    return -1;
}

static int check_group(const char *data_dir, unsigned g, char *err, size_t cap) {
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/raft/g%02u", data_dir, g);
    DIR *d = opendir(dir);
    if (!d) {
        if (errno == ENOENT)
            return 0; /* a group never started */
        snprintf(err, cap, "cannot read %s: %s", dir, strerror(errno));
        return -2;
    }
    open_file files[MAX_OPEN] = {{0}};
    size_t n_open = 0;
    int rc = 0;
    struct dirent *e;
    while (rc == 0 && (e = readdir(d))) {
        unsigned long long a, b;
        char tail;
        size_t len = strlen(e->d_name);
        if (sscanf(e->d_name, "open-%llu%c", &a, &tail) == 1 && n_open < MAX_OPEN &&
            len < sizeof files[0].name) {
            files[n_open].counter = a;
            memcpy(files[n_open].name, e->d_name, len + 1);
            n_open++;
        } else if (sscanf(e->d_name, "%llu-%llu%c", &a, &b, &tail) == 2) {
            rc = check_closed(dir, e->d_name, g, err, cap);
        }
    }
    closedir(d);
    if (rc != 0)
        return rc;
    qsort(files, n_open, sizeof files[0], by_counter);
    return check_open(dir, files, n_open, g, err, cap);
}

int rn_raft_log_check(const char *data_dir, unsigned groups, char *err, size_t errcap) {
    crc_init();
    for (unsigned g = 0; g < groups; g++) {
        int rc = check_group(data_dir, g, err, errcap);
        if (rc != 0)
            return rc;
    }
    return 0;
}
