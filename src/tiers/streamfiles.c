/*
 * streamfiles.c — stream data and index files with an LRU cache of open
 * descriptors, pins and space reserved ahead. See streamfiles.h.
 */
#define _GNU_SOURCE
#include "tiers/streamfiles.h"
#include "tiers/blocksums.h"
#include "util/list.h"
#include "util/buf.h"
#include "util/fault.h"
#include "util/files.h"
#include "util/log.h"
#include "util/metrics.h"
#include "util/map.h"
#include "util/text.h"

#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

typedef enum { RN_FILE_DATA = 0, RN_FILE_INDEX = 1, RN_FILE_SUM = 2 } rn_file_kind;
#define FILE_KINDS 4 /* map keys: stream id * FILE_KINDS + kind */

const char *const rn_stream_file_suffix[RN_STREAM_FILES] = {"dat", "idx", "sum"};

typedef struct open_file {
    uint64_t key; /* map key: stream id * FILE_KINDS + file kind */
    int fd;
    uint64_t reserved_end; /* blocks below this are known to be reserved */
    int pins;              /* pinned files are never evicted */
    rn_list_node lru;      /* on rn_streamfiles.lru: first is the most recent */
} open_file;

struct rn_streamfiles {
    char *dir;
    int dirfd;
    int max_open;
    rn_map open; /* id -> open_file */
    rn_list lru; /* open_file.lru, most recently used first */
};

static void file_path(const rn_streamfiles *st, uint64_t id, rn_file_kind kind, char *out,
                      size_t cap) {
    snprintf(out, cap, "%s/streams/%02x/%016llx.%s", st->dir, (unsigned)(id & 0xff),
             (unsigned long long)id, rn_stream_file_suffix[kind]);
}

rn_streamfiles *rn_streamfiles_open(const char *data_dir, int max_open) {
    rn_streamfiles *st = rn_xcalloc(1, sizeof *st);
    st->dir = rn_xstrdup(data_dir);
    st->max_open = max_open > 0 ? max_open : 1;
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s/streams", data_dir);
    mkdir(p, 0755);
    st->dirfd = open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    return st;
}

/* The most recently used open file (NULL: none). */
static open_file *lru_first(const rn_streamfiles *st) {
    return st->lru.first ? rn_list_entry(st->lru.first, open_file, lru) : NULL;
}

static void forget(rn_streamfiles *st, open_file *f) {
    assert(f->pins == 0); /* a pinned file belongs to an append in the log */
    rn_list_remove(&st->lru, &f->lru);
    rn_map_remove(&st->open, &f->key, sizeof f->key);
    close(f->fd);
    free(f);
}

static atomic_uint_fast64_t files_opened; /* rn_streamfiles_opened; any thread */

uint64_t rn_streamfiles_opened(void) {
    return atomic_load_explicit(&files_opened, memory_order_relaxed);
}

/* Opens one of id's files read-write, creating it (and its directory) if
 * asked. Returns the descriptor or -errno. */
static int open_file_of(const rn_streamfiles *st, uint64_t id, rn_file_kind kind, int create) {
    char p[PATH_MAX];
    file_path(st, id, kind, p, sizeof p);
    int fd = open(p, O_RDWR | O_CLOEXEC | (create ? O_CREAT : 0), 0644);
    if (fd < 0 && errno == ENOENT && create) {
        char d[PATH_MAX];
        snprintf(d, sizeof d, "%s/streams/%02x", st->dir, (unsigned)(id & 0xff));
        mkdir(d, 0755);
        fd = open(p, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    }
    if (fd < 0)
        return -errno;
    atomic_fetch_add_explicit(&files_opened, 1, memory_order_relaxed);
    return fd;
}

int rn_streamfiles_ensure(const rn_streamfiles *st, uint64_t id) {
    for (int kind = RN_FILE_DATA; kind <= RN_FILE_SUM; kind++) {
        int fd = open_file_of(st, id, (rn_file_kind)kind, 1);
        if (fd < 0)
            return fd;
        close(fd);
    }
    return 0;
}

int rn_streamfiles_take(rn_streamfiles *st, uint64_t id, int from_dirfd,
                        const char *const names[RN_STREAM_FILES]) {
    assert(st->dirfd >= 0 && from_dirfd >= 0);
    for (int kind = RN_FILE_DATA; kind <= RN_FILE_SUM; kind++) {
        char to[64];
        snprintf(to, sizeof to, "%02x/%016llx.%s", (unsigned)(id & 0xff), (unsigned long long)id,
                 rn_stream_file_suffix[kind]);
        int rc = renameat2(from_dirfd, names[kind], st->dirfd, to, RENAME_NOREPLACE);
        if (rc < 0 && errno == ENOENT) { /* the first stream with this low byte */
            char sub[8];
            snprintf(sub, sizeof sub, "%02x", (unsigned)(id & 0xff));
            mkdirat(st->dirfd, sub, 0755);
            rc = renameat2(from_dirfd, names[kind], st->dirfd, to, RENAME_NOREPLACE);
        }
        if (rc < 0 && errno == EEXIST) /* made before (an earlier process): keep it */
            rc = unlinkat(from_dirfd, names[kind], 0);
        if (rc < 0)
            return -errno;
    }
    return 0;
}

/* Returns an open descriptor for one of id's files, creating it if asked. */
static int get_fd(rn_streamfiles *st, uint64_t id, rn_file_kind kind, int create) {
    uint64_t key = id * FILE_KINDS + (uint64_t)kind;
    open_file *f = rn_map_get(&st->open, &key, sizeof key);
    if (f) {
        rn_list_remove(&st->lru, &f->lru);
        rn_list_push_front(&st->lru, &f->lru);
        return f->fd;
    }
    int fd = open_file_of(st, id, kind, create);
    if (fd < 0)
        return fd;
    if ((int)st->open.count >= st->max_open) {
        rn_list_node *n = st->lru.last;
        while (n && rn_list_entry(n, open_file, lru)->pins)
            n = n->prev;
        if (n)
            forget(st, rn_list_entry(n, open_file, lru));
    }
    f = rn_xcalloc(1, sizeof *f);
    f->key = key;
    f->fd = fd;
    rn_map_put(&st->open, &f->key, sizeof f->key, f);
    rn_list_push_front(&st->lru, &f->lru);
    return fd;
}

static void encode_u64(uint8_t b[8], uint64_t v) {
    for (int i = 0; i < 8; i++)
        b[i] = (uint8_t)(v >> (8 * i));
}

static int write_at(int fd, const void *data, size_t len, uint64_t off) {
    const uint8_t *p = data;
    while (len > 0) {
        ssize_t w = pwrite(fd, p, len, (off_t)off);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        p += w;
        off += (uint64_t)w;
        len -= (size_t)w;
    }
    return 0;
}

/* Writes data at off of the data file, then the checksums of the blocks
 * it touched. */
static int write_data(int data_fd, int sum_fd, const void *data, size_t len, uint64_t off) {
    int rc = write_at(data_fd, data, len, off);
    return rc < 0 ? rc : rn_blocksums_update(data_fd, sum_fd, data, len, off);
}

/* Writes an append through a pin: data at off of the data file, its
 * checksums, then index entry k = off + len. */
static int write_append(const rn_streamfiles_pin *pin, const void *data, size_t len, uint64_t off,
                        uint64_t k) {
    int rc = write_data(pin->data_fd, pin->sum_fd, data, len, off);
    if (rc < 0)
        return rc;
    uint8_t b[8];
    encode_u64(b, off + len);
    return write_at(pin->index_fd, b, 8, k * 8);
}

int rn_streamfiles_index_set(rn_streamfiles *st, uint64_t id, uint64_t k, uint64_t end) {
    int fd = get_fd(st, id, RN_FILE_INDEX, 1);
    if (fd < 0)
        return fd;
    uint8_t b[8];
    encode_u64(b, end);
    return write_at(fd, b, 8, k * 8);
}

int rn_streamfiles_index_get(rn_streamfiles *st, uint64_t id, uint64_t k, uint64_t *end) {
    int failing = rn_fault_fail("data-read");
    if (failing)
        return failing;
    int fd = get_fd(st, id, RN_FILE_INDEX, 0);
    if (fd < 0)
        return fd;
    uint8_t b[8];
    if (pread(fd, b, 8, (off_t)(k * 8)) != 8)
        return -EIO;
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v |= (uint64_t)b[i] << (8 * i);
    *end = v;
    return 0;
}

/* Makes sure [off, off+len) of a file has disk blocks, reserving ahead in
 * chunks that grow with the file (64 KiB up to 4 MiB) so that appends pay a
 * fallocate only now and then. Falls back to the exact range when the disk
 * is too full for a chunk. */
static int reserve(open_file *f, uint64_t off, uint64_t len) {
    uint64_t end = off + len;
    if (end <= f->reserved_end)
        return 0;
    uint64_t ahead = end < (64u << 10) ? (64u << 10) : end > (4u << 20) ? (4u << 20) : end;
    uint64_t from = f->reserved_end > off ? f->reserved_end : off;
    if (fallocate(f->fd, FALLOC_FL_KEEP_SIZE, (off_t)from, (off_t)(end + ahead - from)) == 0) {
        f->reserved_end = end + ahead;
        return 0;
    }
    if (errno == EOPNOTSUPP || errno == ENOSYS) {
        f->reserved_end = UINT64_MAX; /* file system without preallocation: best effort */
        return 0;
    }
    if (errno == ENOSPC &&
        fallocate(f->fd, FALLOC_FL_KEEP_SIZE, (off_t)from, (off_t)(end - from)) == 0) {
        f->reserved_end = end;
        return 0;
    }
    return -errno;
}

/* Opens (creating) the three files of stream id and pins them; each is
 * pinned before the next is opened, which may evict. On failure nothing
 * is pinned. Returns 0 or -errno. */
static int pin_files(rn_streamfiles *st, uint64_t id, rn_streamfiles_pin *pin) {
    *pin = (rn_streamfiles_pin){.data_fd = -1, .index_fd = -1, .sum_fd = -1};
    open_file *f[RN_STREAM_FILES];
    for (int kind = RN_FILE_DATA; kind <= RN_FILE_SUM; kind++) {
        int fd = get_fd(st, id, (rn_file_kind)kind, 1);
        if (fd < 0) {
            while (kind-- > RN_FILE_DATA)
                f[kind]->pins--;
            return fd;
        }
        f[kind] = lru_first(st); /* get_fd leaves the file first */
        f[kind]->pins++;
    }
    *pin = (rn_streamfiles_pin){f[RN_FILE_DATA]->fd, f[RN_FILE_INDEX]->fd, f[RN_FILE_SUM]->fd,
                                f[RN_FILE_DATA],     f[RN_FILE_INDEX],     f[RN_FILE_SUM]};
    return 0;
}

int rn_streamfiles_pin_append(rn_streamfiles *st, uint64_t id, uint64_t off, size_t len, uint64_t k,
                              rn_streamfiles_pin *pin) {
    int rc = pin_files(st, id, pin);
    if (rc == 0)
        rc = reserve(pin->data, off, len);
    if (rc == 0)
        rc = reserve(pin->index, k * 8, 8);
    if (rc == 0 && len > 0) { /* the checksum entries of the blocks it writes */
        uint64_t first = off / RN_BLOCKSUM_BLOCK, last = (off + len - 1) / RN_BLOCKSUM_BLOCK;
        rc = reserve(pin->sum, first * RN_BLOCKSUM_ENTRY, (last - first + 1) * RN_BLOCKSUM_ENTRY);
    }
    if (rc < 0)
        rn_streamfiles_unpin(pin);
    return rc;
}

int rn_streamfiles_append(rn_streamfiles *st, uint64_t id, const void *data, size_t len,
                          uint64_t off, uint64_t k) {
    rn_streamfiles_pin pin;
    int rc = pin_files(st, id, &pin);
    if (rc == 0) {
        rc = write_append(&pin, data, len, off, k);
        rn_streamfiles_unpin(&pin);
    }
    return rc;
}

int rn_streamfiles_write_pinned(const rn_streamfiles_pin *pin, const void *data, size_t len,
                                uint64_t off, uint64_t k) {
    return write_append(pin, data, len, off, k);
}

/* A large append's data is written a chunk at a time, each chunk's
 * writeback started at once (sync_file_range, a hint: the caller's
 * fdatasync is what makes it durable), so that the disk writes the first
 * chunks while the later ones are copied and the checksums computed. */
#define AHEAD_CHUNK (1u << 20)

int rn_streamfiles_write_piece(const rn_streamfiles_pin *pin, const void *data, size_t len,
                               uint64_t off, uint8_t *crcs) {
    assert(len > 0);
    int rc = 0;
    for (size_t done = 0; rc == 0 && done < len; done += AHEAD_CHUNK) {
        size_t n = len - done < AHEAD_CHUNK ? len - done : AHEAD_CHUNK;
        rc = write_at(pin->data_fd, (const uint8_t *)data + done, n, off + done);
        if (rc == 0) /* a hint: its failure changes nothing the fdatasync does not */
            (void)sync_file_range(pin->data_fd, (off64_t)(off + done), (off64_t)n,
                                  SYNC_FILE_RANGE_WRITE);
    }
    return rc < 0 ? rc : rn_blocksums_compute(pin->data_fd, data, len, off, crcs);
}

int rn_streamfiles_seal_ahead(const rn_streamfiles_pin *pin, uint64_t off, size_t len, uint64_t k,
                              const uint8_t *crcs) {
    int rc = rn_blocksums_put(pin->sum_fd, off, len, crcs);
    uint8_t b[8];
    encode_u64(b, off + len);
    return rc < 0 ? rc : write_at(pin->index_fd, b, 8, k * 8);
}

int rn_streamfiles_sync_ahead(const rn_streamfiles *st, uint64_t id,
                              const rn_streamfiles_pin *pin) {
    int failing = rn_fault_fail("data-sync");
    if (failing)
        return failing;
    if (fdatasync(pin->data_fd) < 0)
        return -errno;
    char dir[PATH_MAX];
    file_path(st, id, RN_FILE_DATA, dir, sizeof dir);
    *strrchr(dir, '/') = '\0';
    return rn_sync_dir(dir);
}

void rn_streamfiles_unpin(rn_streamfiles_pin *pin) {
    if (pin->data)
        pin->data->pins--;
    if (pin->index)
        pin->index->pins--;
    if (pin->sum)
        pin->sum->pins--;
    *pin = (rn_streamfiles_pin){.data_fd = -1, .index_fd = -1, .sum_fd = -1};
}

/* The descriptors of id's data file (created if asked) and checksum
 * sidecar: created when missing for a write (an older build's stream has
 * none); for a read (`writing` 0) a missing one is *sum_fd -1, so that a
 * read never creates a file (a full disk keeps serving reads). The data
 * file is pinned while the sidecar is opened, which may evict. Returns 0
 * or -errno. */
static int data_and_sums(rn_streamfiles *st, uint64_t id, int writing, int *data_fd, int *sum_fd) {
    *data_fd = get_fd(st, id, RN_FILE_DATA, writing);
    if (*data_fd < 0)
        return *data_fd;
    open_file *data = lru_first(st);
    data->pins++;
    *sum_fd = get_fd(st, id, RN_FILE_SUM, writing);
    data->pins--;
    if (*sum_fd == -ENOENT && !writing)
        *sum_fd = -1;
    return *sum_fd < -1 ? *sum_fd : 0;
}

int rn_streamfiles_restore_sums(rn_streamfiles *st, uint64_t id, uint64_t off, size_t len,
                                const uint8_t *crcs, uint64_t k) {
    int data_fd, sum_fd;
    int rc = data_and_sums(st, id, 1, &data_fd, &sum_fd);
    if (rc == 0)
        rc = rn_blocksums_put(sum_fd, off, len, crcs);
    return rc < 0 ? rc : rn_streamfiles_index_set(st, id, k, off + len);
}

/* rn_streamfiles_read, also counting the blocks verified in *verified;
 * flags: rn_blocksums_read's. */
static ssize_t read_checked(rn_streamfiles *st, uint64_t id, void *out, size_t len, uint64_t off,
                            int flags, uint64_t *bad, uint64_t *verified) {
    int failing = rn_fault_fail("data-read");
    if (failing)
        return failing;
    int data_fd, sum_fd;
    int rc = data_and_sums(st, id, 0, &data_fd, &sum_fd);
    if (rc < 0)
        return rc;
    uint64_t at = 0;
    ssize_t got = rn_blocksums_read(data_fd, sum_fd, out, len, off, flags, &at, verified);
    rn_metric.data_blocks_verified += *verified;
    if (got == -EUCLEAN) {
        char p[PATH_MAX];
        file_path(st, id, RN_FILE_DATA, p, sizeof p);
        rn_log(RN_LOG_ERROR, "stream_data_damaged",
               "stream %016llx: bytes %llu..%llu of %s do not match their checksum in %.*ssum",
               (unsigned long long)id, (unsigned long long)at,
               (unsigned long long)(at + RN_BLOCKSUM_BLOCK), p, (int)(strlen(p) - 3), p);
        if (bad)
            *bad = at;
    }
    return got;
}

ssize_t rn_streamfiles_read(rn_streamfiles *st, uint64_t id, void *out, size_t len, uint64_t off,
                            uint64_t *bad) {
    uint64_t verified = 0;
    return read_checked(st, id, out, len, off, 0, bad, &verified);
}

ssize_t rn_streamfiles_read_cached(rn_streamfiles *st, uint64_t id, void *out, size_t len,
                                   uint64_t off, uint64_t *bad) {
    uint64_t verified = 0;
    ssize_t got = read_checked(st, id, out, len, off, RWF_NOWAIT, bad, &verified);
    return got == -EAGAIN ? -EINPROGRESS : got;
}

void rn_streamfiles_paths(const rn_streamfiles *st, uint64_t id, char data[PATH_MAX],
                          char sum[PATH_MAX]) {
    file_path(st, id, RN_FILE_DATA, data, PATH_MAX);
    file_path(st, id, RN_FILE_SUM, sum, PATH_MAX);
}

/* Reads [off, off + len) of the file at path, a piece at a time, into
 * nothing but the page cache. */
static int read_through(const char *path, uint64_t off, uint64_t len) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? 0 : -errno; /* a sidecar older builds did not write */
    enum { PIECE = 256 * 1024 };
    uint8_t *buf = rn_xmalloc(PIECE);
    int rc = 0;
    for (uint64_t at = off; at < off + len;) {
        size_t n = off + len - at < PIECE ? (size_t)(off + len - at) : PIECE;
        ssize_t r = pread(fd, buf, n, (off_t)at);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            rc = r < 0 ? -errno : 0;
            break;
        }
        at += (uint64_t)r;
    }
    free(buf);
    close(fd);
    return rc;
}

int rn_streamfiles_warm(const char *data_path, const char *sum_path, uint64_t off, size_t len) {
    uint64_t first = off / RN_BLOCKSUM_BLOCK,
             end = (off + len + RN_BLOCKSUM_BLOCK - 1) / RN_BLOCKSUM_BLOCK;
    int rc = read_through(data_path, first * RN_BLOCKSUM_BLOCK, (end - first) * RN_BLOCKSUM_BLOCK);
    int sums = read_through(sum_path, first * RN_BLOCKSUM_ENTRY, (end - first) * RN_BLOCKSUM_ENTRY);
    return rc < 0 ? rc : sums;
}

ssize_t rn_streamfiles_read_verified(rn_streamfiles *st, uint64_t id, void *out, size_t len,
                                     uint64_t off) {
    uint64_t verified = 0;
    ssize_t got = read_checked(st, id, out, len, off, 0, NULL, &verified);
    if (got < 0)
        return got;
    uint64_t first = off / RN_BLOCKSUM_BLOCK,
             end = (off + len + RN_BLOCKSUM_BLOCK - 1) / RN_BLOCKSUM_BLOCK;
    return (size_t)got == len && verified == end - first ? got : -ENODATA;
}

int rn_streamfiles_truncate(rn_streamfiles *st, uint64_t id, uint64_t len, uint64_t appends) {
    uint64_t lengths[2] = {[RN_FILE_DATA] = len, [RN_FILE_INDEX] = appends * 8};
    for (int kind = RN_FILE_DATA; kind <= RN_FILE_INDEX; kind++) {
        int fd = get_fd(st, id, (rn_file_kind)kind, 0);
        if (fd == -ENOENT)
            continue; /* nothing was written: nothing to cut */
        if (fd < 0)
            return fd;
        if (ftruncate(fd, (off_t)lengths[kind]) < 0)
            return -errno;
        lru_first(st)->reserved_end = 0; /* truncation may free reserved blocks */
    }
    int data_fd = get_fd(st, id, RN_FILE_DATA, 0), sum_fd;
    if (data_fd == -ENOENT)
        return 0; /* no data file: no checksums to cut */
    int rc = data_fd < 0 ? data_fd : data_and_sums(st, id, 1, &data_fd, &sum_fd);
    return rc < 0 ? rc : rn_blocksums_cut(data_fd, sum_fd, len);
}

int64_t rn_streamfiles_first_hole(rn_streamfiles *st, uint64_t id, uint64_t from, uint64_t to) {
    if (from >= to)
        return (int64_t)to;
    int fd = get_fd(st, id, RN_FILE_DATA, 0);
    if (fd == -ENOENT)
        return (int64_t)from;
    if (fd < 0)
        return fd;
    off_t at = lseek(fd, (off_t)from, SEEK_HOLE); /* the end of the file counts as one */
    if (at < 0)
        return errno == ENXIO ? (int64_t)from : -errno;
    return (uint64_t)at < to ? (int64_t)at : (int64_t)to;
}

int rn_streamfiles_punch(rn_streamfiles *st, uint64_t id, uint64_t off, uint64_t len) {
    /* whole checksum blocks only: the block holding the range's end keeps
     * the bytes past it, which its checksum covers with those before */
    uint64_t from = off / RN_BLOCKSUM_BLOCK * RN_BLOCKSUM_BLOCK;
    uint64_t to = (off + len) / RN_BLOCKSUM_BLOCK * RN_BLOCKSUM_BLOCK;
    if (from >= to)
        return 0;
    int fd, sum_fd;
    int rc = data_and_sums(st, id, 1, &fd, &sum_fd);
    if (rc < 0)
        return rc;
    if (fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)from, (off_t)(to - from)) <
        0)
        return errno == EOPNOTSUPP ? 0 : -errno; /* reclaiming is best effort */
    return rn_blocksums_forget(sum_fd, from, to);
}

/* The gap record's directory and name. */
static void gap_place(const rn_streamfiles *st, uint64_t id, char *dir, size_t dcap, char *name,
                      size_t ncap) {
    snprintf(dir, dcap, "%s/streams/%02x", st->dir, (unsigned)(id & 0xff));
    snprintf(name, ncap, "%016llx.gap", (unsigned long long)id);
}

void rn_streamfiles_remove(rn_streamfiles *st, uint64_t id) {
    for (int kind = RN_FILE_DATA; kind <= RN_FILE_SUM; kind++) {
        uint64_t key = id * FILE_KINDS + (uint64_t)kind;
        open_file *f = rn_map_get(&st->open, &key, sizeof key);
        if (f)
            forget(st, f);
        char p[PATH_MAX];
        file_path(st, id, (rn_file_kind)kind, p, sizeof p);
        unlink(p);
    }
    rn_streamfiles_gap none = {0};
    rn_streamfiles_gap_put(st, id, &none);
}

/* 1 with *id when name is a stream file's ("<16 hex digits>.dat", .idx,
 * .sum or .gap). */
static int stream_file_id(const char *name, uint64_t *id) {
    if (strlen(name) != 20 || name[16] != '.' ||
        (strcmp(name + 17, "dat") != 0 && strcmp(name + 17, "idx") != 0 &&
         strcmp(name + 17, "sum") != 0 && strcmp(name + 17, "gap") != 0))
        return 0;
    return rn_parse_hex_u64(name, id) == 0;
}

int rn_streamfiles_sweep(rn_streamfiles *st, int (*kept)(void *ctx, uint64_t id), void *ctx) {
    int rc = 0;
    for (unsigned sub = 0; sub < 256; sub++) {
        char dir[PATH_MAX];
        snprintf(dir, sizeof dir, "%s/streams/%02x", st->dir, sub);
        DIR *d = opendir(dir);
        if (!d) {
            if (errno != ENOENT && !rc)
                rc = -errno;
            continue;
        }
        struct dirent *de;
        uint64_t id;
        while ((de = readdir(d)))
            if (stream_file_id(de->d_name, &id) && (id & 0xff) == sub && !kept(ctx, id))
                rn_streamfiles_remove(st, id); /* its other files too: readdir skips them */
        closedir(d);
    }
    return rc;
}

int rn_streamfiles_extent(rn_streamfiles *st, uint64_t id, uint64_t *data_len, uint64_t *entries) {
    uint64_t size[2] = {0, 0};
    for (int kind = RN_FILE_DATA; kind <= RN_FILE_INDEX; kind++) {
        char p[PATH_MAX];
        file_path(st, id, (rn_file_kind)kind, p, sizeof p);
        struct stat sb;
        if (stat(p, &sb) == 0)
            size[kind] = (uint64_t)sb.st_size;
        else if (errno != ENOENT)
            return -errno;
    }
    *data_len = size[RN_FILE_DATA];
    *entries = size[RN_FILE_INDEX] / 8;
    return 0;
}

int rn_streamfiles_write(rn_streamfiles *st, uint64_t id, const void *data, size_t len,
                         uint64_t off) {
    int fd, sum_fd;
    int rc = data_and_sums(st, id, 1, &fd, &sum_fd);
    return rc < 0 ? rc : write_data(fd, sum_fd, data, len, off);
}

int rn_streamfiles_gap_get(rn_streamfiles *st, uint64_t id, rn_streamfiles_gap *g) {
    char dir[PATH_MAX], name[64];
    gap_place(st, id, dir, sizeof dir, name, sizeof name);
    rn_buf b = {0};
    int rc = rn_read_file(dir, name, &b);
    if (rc == 0) {
        rn_reader r;
        rn_reader_init(&r, b.data, b.len);
        g->from = rn_read_u64(&r);
        g->to = rn_read_u64(&r);
        g->kfrom = rn_read_u64(&r);
        g->kto = rn_read_u64(&r);
        g->held = r.p == r.end ? 0 : rn_read_u64(&r); /* a record before `held`: none */
        rc = r.failed || r.p != r.end ? -EBADMSG : 0;
    }
    rn_buf_free(&b);
    return rc;
}

int rn_streamfiles_gap_put(rn_streamfiles *st, uint64_t id, const rn_streamfiles_gap *g) {
    char dir[PATH_MAX], name[64];
    gap_place(st, id, dir, sizeof dir, name, sizeof name);
    if (g->from >= g->to && g->kfrom >= g->kto && !g->held) {
        char p[PATH_MAX + 64];
        snprintf(p, sizeof p, "%s/%s", dir, name);
        return unlink(p) == 0 || errno == ENOENT ? 0 : -errno;
    }
    rn_buf b = {0};
    rn_buf_append_u64(&b, g->from);
    rn_buf_append_u64(&b, g->to);
    rn_buf_append_u64(&b, g->kfrom);
    rn_buf_append_u64(&b, g->kto);
    if (g->held)
        rn_buf_append_u64(&b, g->held);
    mkdir(dir, 0755);
    int rc = rn_atomic_write_file(dir, name, b.data, b.len, 0644);
    rn_buf_free(&b);
    return rc;
}

int rn_streamfiles_sync_stream(const rn_streamfiles *st, uint64_t id) {
    for (int kind = RN_FILE_DATA; kind <= RN_FILE_SUM; kind++) {
        char p[PATH_MAX];
        file_path(st, id, (rn_file_kind)kind, p, sizeof p);
        int fd = open(p, O_RDONLY | O_CLOEXEC);
        if (fd < 0 && errno == ENOENT)
            continue;
        if (fd < 0)
            return -errno;
        int rc = fdatasync(fd) < 0 ? -errno : 0;
        close(fd);
        if (rc < 0)
            return rc;
    }
    return 0;
}

int rn_streamfiles_sync(rn_streamfiles *st) {
    return syncfs(st->dirfd) < 0 ? -errno : 0;
}

void rn_streamfiles_close(rn_streamfiles *st) {
    if (!st)
        return;
    while (lru_first(st))
        forget(st, lru_first(st));
    rn_map_free(&st->open);
    if (st->dirfd >= 0)
        close(st->dirfd);
    free(st->dir);
    free(st);
}
