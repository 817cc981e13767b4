/*
 * wal.c — segment files, record framing, group commit and recovery for the
 * write-ahead log. See wal.h for the format and the guarantees.
 *
 * Threading: all fields are owned by the loop thread except `job`, which is
 * handed to the log's own writer thread one batch at a time (the batch
 * write, fdatasync and the entries' after_sync hooks; the handover fields
 * are under `lock`), and which reports back through the `job_done` async
 * handle. The loop thread never touches the job while it is in flight.
 * Background work that may take long (the spare segment) runs in libuv's
 * pool.
 */
#define _GNU_SOURCE
#include "log/wal.h"
#include "util/fault.h"
#include "util/buf.h"
#include "util/crc32c.h"
#include "util/log.h"
#include "util/metrics.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#ifndef IOV_MAX
#define IOV_MAX 1024
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define HEADER_BYTES 32
static const uint8_t MAGIC[8] = {'R', 'N', 'W', 'A', 'L', 0, 0, 1};

typedef struct {
    rn_wal *wal;
    rn_wal_entry *head; /* the batch, in submission order */
    /* Segment to open before writing (0: keep the current one). */
    uint64_t open_segment;
    uint64_t open_prev_valid_end;
    int opened;        /* the worker created open_segment */
    int use_spare;     /* create open_segment from the prepared spare */
    uint64_t sealed;   /* after a failure, the segment the worker moved to (0: none) */
    int status;        /* 0 or negative errno, set by the worker */
    uint64_t bytes;    /* bytes the batch appended */
    int fail_injected; /* test hook: report EIO without syncing */
    uint64_t records;  /* entries in the batch */
    uint64_t write_us; /* time of the write and its fdatasync */
} wal_job;

struct rn_wal {
    uv_loop_t *loop;
    char *dir;
    int fd;             /* current segment, -1 when the next batch must open one */
    uint64_t segment;   /* number of the segment `fd` refers to */
    uint64_t valid_end; /* bytes of that segment holding acknowledged records */
    uint64_t segment_bytes;
    uint64_t total_written;
    int rotate_requested;
    int pending_failures; /* test hook */
    rn_wal_entry *queue_head, *queue_tail;
    wal_job job;
    int in_flight;
    /* The writer: a thread of its own runs the batch jobs, so a batch never
     * waits behind other work in libuv's pool (blob writes, checkpoints,
     * file creation). Started by the first batch, on the loop thread. */
    int writer_started;
    pthread_t writer;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    int job_ready; /* under lock: a job waits for the writer */
    int stopping;  /* under lock: the writer is to exit */
    uv_async_t job_done;
    rn_wal_batch_hook hook;
    void *hook_arg;
    /* The spare: a zero-filled, synced file the next segment is renamed
     * from, so fdatasync of a segment never has to journal block
     * allocations (see prepare_spare). */
    uv_work_t spare_work;
    int spare_state;  /* SPARE_NONE, SPARE_PREPARING or SPARE_READY */
    int preallocate;  /* use spares at all (rn_wal_options) */
    int preallocated; /* the current segment came from a spare */
    int spare_status;
};

enum { SPARE_NONE, SPARE_PREPARING, SPARE_READY };

static void spare_path(const char *dir, char *out, size_t cap) {
    snprintf(out, cap, "%s/wal/spare.tmp", dir);
}

static void segment_path(const char *dir, uint64_t n, char *out, size_t cap) {
    snprintf(out, cap, "%s/wal/%020llu.log", dir, (unsigned long long)n);
}

static void encode_header(uint8_t h[HEADER_BYTES], uint64_t seg, uint64_t prev_end) {
    rn_buf b = {0};
    rn_buf_append(&b, MAGIC, 8);
    rn_buf_append_u64(&b, seg);
    rn_buf_append_u64(&b, prev_end);
    rn_buf_append_u32(&b, rn_crc32c(0, b.data, 24));
    rn_buf_append_u32(&b, 0);
    memcpy(h, b.data, HEADER_BYTES);
    rn_buf_free(&b);
}

/* Parses a segment header; returns 0 when it is intact. */
static int decode_header(const uint8_t *h, size_t len, uint64_t *seg, uint64_t *prev_end) {
    if (len < HEADER_BYTES || memcmp(h, MAGIC, 8) != 0)
        return -1;
    rn_reader r;
    rn_reader_init(&r, h + 8, 24);
    *seg = rn_read_u64(&r);
    *prev_end = rn_read_u64(&r);
    uint32_t crc = rn_read_u32(&r);
    return crc == rn_crc32c(0, h, 24) ? 0 : -1;
}

static int fsync_dir(const char *path) {
    int fd = open(path, O_RDONLY | O_DIRECTORY);
    if (fd < 0)
        return -errno;
    int rc = fsync(fd) < 0 ? -errno : 0;
    close(fd);
    return rc;
}

/* Creates segment n with its header, durably (file and directory synced),
 * from the prepared spare when use_spare is set. Returns the fd or a
 * negative errno. Runs on the worker thread or at open. */
static int create_segment(const char *dir, uint64_t n, uint64_t prev_end, int use_spare) {
    char path[PATH_MAX], spare[PATH_MAX];
    segment_path(dir, n, path, sizeof path);
    spare_path(dir, spare, sizeof spare);
    int fd = -1;
    if (use_spare && rename(spare, path) == 0) {
        rn_fault_point("wal-after-spare-rename");
        fd = open(path, O_WRONLY | O_CLOEXEC);
    }
    if (fd < 0)
        fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return -errno;
    uint8_t h[HEADER_BYTES];
    encode_header(h, n, prev_end);
    int rc = 0;
    if (pwrite(fd, h, HEADER_BYTES, 0) != HEADER_BYTES)
        rc = errno ? -errno : -EIO;
    else if (fdatasync(fd) < 0)
        rc = -errno;
    if (rc == 0) {
        char wdir[PATH_MAX];
        snprintf(wdir, sizeof wdir, "%s/wal", dir);
        rc = fsync_dir(wdir);
    }
    if (rc < 0) {
        close(fd);
        unlink(path);
        return rc;
    }
    return fd;
}

/* Writes all iovecs at `off`, handling short writes and IOV_MAX. */
static int write_all(int fd, struct iovec *iov, int cnt, uint64_t off) {
    while (cnt > 0) {
        int n = cnt > IOV_MAX ? IOV_MAX : cnt;
        ssize_t w = pwritev(fd, iov, n, (off_t)off);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        off += (uint64_t)w;
        size_t left = (size_t)w;
        while (cnt > 0 && left >= iov->iov_len) {
            left -= iov->iov_len;
            iov++;
            cnt--;
        }
        if (cnt > 0 && left) {
            iov->iov_base = (uint8_t *)iov->iov_base + left;
            iov->iov_len -= left;
        }
    }
    return 0;
}

/* Writes and syncs the job's batch (the writer thread). */
static void batch_work(wal_job *job) {
    rn_wal *wal = job->wal;
    job->status = 0;
    job->bytes = 0;
    job->opened = 0;
    job->sealed = 0;
    if (job->open_segment) {
        int fd =
            create_segment(wal->dir, job->open_segment, job->open_prev_valid_end, job->use_spare);
        if (fd < 0) {
            /* Nothing of the batch was written: on a full disk that is a
             * refusal, not an unknown outcome. */
            job->status = fd; /* -ENOSPC is RN_WAL_NOT_WRITTEN_FULL */
            return;
        }
        wal->fd = fd; /* the loop thread does not read fd while a job runs */
        wal->valid_end = HEADER_BYTES;
        job->opened = 1;
    }
    uint64_t t0 = uv_hrtime();
    size_t count = 0;
    job->records = 0;
    for (rn_wal_entry *e = job->head; e; e = e->next) {
        count += 1 + (size_t)e->pieces;
        job->records++;
    }
    struct iovec *iov = rn_xmalloc(count * sizeof *iov);
    size_t k = 0;
    for (rn_wal_entry *e = job->head; e; e = e->next) {
        iov[k++] = (struct iovec){e->frame, 8};
        for (int i = 0; i < e->pieces; i++) {
            iov[k++] = e->piece[i];
            job->bytes += e->piece[i].iov_len;
        }
        job->bytes += 8;
    }
    int rc = write_all(wal->fd, iov, (int)count, wal->valid_end);
    free(iov);
    rn_fault_point("wal-after-write");
    if (rc == 0 && job->fail_injected)
        rc = -EIO;
    if (rc == 0 && fdatasync(wal->fd) < 0)
        rc = -errno;
    if (rc == RN_WAL_NOT_WRITTEN_FULL)
        rc = -EIO; /* some of the batch may be on disk: its outcome is unknown */
    rn_fault_point("wal-after-sync");
    job->write_us = (uv_hrtime() - t0) / 1000;
    job->status = rc;
    for (rn_wal_entry *e = job->head; e; e = e->next)
        e->after_sync_status = rc == 0 && e->after_sync ? e->after_sync(e) : 0;
    if (rc != 0) {
        /* Bytes of the failed batch may be on disk, and recovery replays the
         * newest segment up to its first bad record. Start the next segment
         * now, recording where the acknowledged records end, so that the
         * failed records are ignored even if nothing is written after them;
         * the callbacks run after that header is durable. If this fails too,
         * the next batch opens the segment (the failed records are then only
         * ignored once a later batch got that far). */
        uint64_t cur = job->opened ? job->open_segment : wal->segment;
        int fd = create_segment(wal->dir, cur + 1, wal->valid_end, 0);
        if (fd >= 0) {
            close(wal->fd);
            wal->fd = fd;
            wal->valid_end = HEADER_BYTES;
            job->sealed = cur + 1;
        }
    }
}

static void start_batch(rn_wal *wal);

/* Zero-fills and syncs the spare file on a worker thread. A segment renamed
 * from it already owns written blocks for its whole length, so the appends'
 * fdatasync only flushes data: no block allocation or size change has to
 * be journaled, and (on ext4 with data=ordered) no journal commit drags the
 * stream files' dirty pages into every sync. */
static void spare_work(uv_work_t *w) {
    rn_wal *wal = w->data;
    char path[PATH_MAX];
    spare_path(wal->dir, path, sizeof path);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        wal->spare_status = -errno;
        return;
    }
    /* Each piece is written back before the next is written, so the disk
     * never holds more than one piece of zeros ahead of a log sync (one
     * fdatasync of the whole file at the end made log syncs wait behind
     * the entire segment: appends stalled ~1 s per rotation). */
    enum { PIECE = 1 << 20 };
    uint8_t *zeros = rn_xcalloc(1, PIECE);
    int rc = 0;
    for (uint64_t off = 0; rc == 0 && off < wal->segment_bytes; off += PIECE) {
        size_t n = wal->segment_bytes - off < PIECE ? (size_t)(wal->segment_bytes - off) : PIECE;
        if (pwrite(fd, zeros, n, (off_t)off) != (ssize_t)n)
            rc = errno ? -errno : -EIO;
        else if (sync_file_range(fd, (off_t)off, (off_t)n,
                                 SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE |
                                     SYNC_FILE_RANGE_WAIT_AFTER) != 0)
            rc = -errno;
    }
    free(zeros);
    if (rc == 0 && fdatasync(fd) < 0)
        rc = -errno;
    close(fd);
    if (rc < 0)
        unlink(path);
    wal->spare_status = rc;
}

static void spare_done(uv_work_t *w, int status) {
    rn_wal *wal = w->data;
    wal->spare_state = status == 0 && wal->spare_status == 0 ? SPARE_READY : SPARE_NONE;
}

/* Starts preparing the spare unless one exists or is being prepared. */
static void prepare_spare(rn_wal *wal) {
    if (!wal->preallocate || wal->spare_state != SPARE_NONE)
        return;
    wal->spare_state = SPARE_PREPARING;
    wal->spare_work.data = wal;
    uv_queue_work(wal->loop, &wal->spare_work, spare_work, spare_done);
}

/* The writer thread: runs each job handed over by start_batch() and
 * reports it to the loop through job_done. */
static void *writer_main(void *arg) {
    rn_wal *wal = arg;
    pthread_mutex_lock(&wal->lock);
    for (;;) {
        while (!wal->job_ready && !wal->stopping)
            pthread_cond_wait(&wal->wake, &wal->lock);
        if (wal->stopping)
            break;
        wal->job_ready = 0;
        pthread_mutex_unlock(&wal->lock);
        batch_work(&wal->job);
        uv_async_send(&wal->job_done);
        pthread_mutex_lock(&wal->lock);
    }
    pthread_mutex_unlock(&wal->lock);
    return NULL;
}

static void batch_done(uv_async_t *async) {
    rn_wal *wal = async->data;
    wal_job *job = &wal->job;
    int status = job->status;
    uv_unref((uv_handle_t *)&wal->job_done); /* an idle log keeps no loop alive */
    if (job->opened) {
        wal->segment = job->open_segment;
        wal->preallocated = job->use_spare;
    }
    if (job->sealed) {
        wal->segment = job->sealed;
        wal->preallocated = 0;
    }
    rn_metric.wal_batches++;
    rn_metric.wal_records += job->records;
    rn_metric_sync(job->write_us);
    rn_log(RN_LOG_DEBUG, "wal_batch",
           "%llu records, %llu bytes, segment %llu, write and sync %llu us%s",
           (unsigned long long)job->records, (unsigned long long)job->bytes,
           (unsigned long long)wal->segment, (unsigned long long)job->write_us,
           status == 0 ? "" : ", FAILED");
    if (status == 0) {
        rn_metric.wal_bytes += job->bytes;
        wal->valid_end += job->bytes;
        wal->total_written += job->bytes;
    } else {
        rn_metric.wal_sync_failures++;
        if (!job->sealed && wal->fd >= 0) {
            /* The segment's tail is now unknown: never append to it again. */
            close(wal->fd);
            wal->fd = -1;
        }
    }
    rn_wal_entry *e = job->head;
    job->head = NULL;
    while (e) {
        rn_wal_entry *next = e->next;
        e->done(e, status);
        e = next;
    }
    /* Only now is the batch over: a callback may submit (an HTTP answer
     * runs the next pipelined request), and that entry must wait for the
     * hook, which needs no batch in flight. */
    if (wal->hook)
        wal->hook(wal->hook_arg);
    wal->in_flight = 0;
    start_batch(wal);
}

static void start_batch(rn_wal *wal) {
    if (wal->in_flight)
        return;
    /* Never while a batch is in flight: the new spare would truncate the
     * spare that batch may be renaming into a segment. A later batch
     * switches to it once it is ready. */
    prepare_spare(wal);
    if (!wal->queue_head)
        return;
    wal_job *job = &wal->job;
    job->head = wal->queue_head;
    wal->queue_head = wal->queue_tail = NULL;
    job->open_segment = 0;
    if (wal->fd < 0 || wal->rotate_requested || wal->valid_end >= wal->segment_bytes ||
        (!wal->preallocated && wal->spare_state == SPARE_READY)) {
        if (wal->fd >= 0) {
            close(wal->fd);
            wal->fd = -1;
        }
        job->open_segment = wal->segment + 1;
        job->open_prev_valid_end = wal->valid_end;
        job->use_spare = wal->spare_state == SPARE_READY;
        if (job->use_spare)
            wal->spare_state = SPARE_NONE; /* the batch consumes it */
        wal->rotate_requested = 0;
    }
    job->fail_injected = 0;
    if (wal->pending_failures > 0) {
        wal->pending_failures--;
        job->fail_injected = 1;
    }
    if (!wal->writer_started) {
        uv_async_init(wal->loop, &wal->job_done, batch_done);
        wal->job_done.data = wal;
        pthread_mutex_init(&wal->lock, NULL);
        pthread_cond_init(&wal->wake, NULL);
        if (pthread_create(&wal->writer, NULL, writer_main, wal) != 0)
            abort(); /* no thread for the log: nothing can be made durable */
        wal->writer_started = 1;
    }
    wal->in_flight = 1;
    uv_ref((uv_handle_t *)&wal->job_done);
    pthread_mutex_lock(&wal->lock);
    wal->job_ready = 1;
    pthread_cond_signal(&wal->wake);
    pthread_mutex_unlock(&wal->lock);
}

void rn_wal_submit(rn_wal *wal, rn_wal_entry *e) {
    size_t len = 0;
    uint32_t crc;
    for (int i = 0; i < e->pieces; i++)
        len += e->piece[i].iov_len;
    uint8_t lenbytes[4] = {(uint8_t)len, (uint8_t)(len >> 8), (uint8_t)(len >> 16),
                           (uint8_t)(len >> 24)};
    crc = rn_crc32c(0, lenbytes, 4);
    for (int i = 0; i < e->pieces; i++)
        crc = rn_crc32c(crc, e->piece[i].iov_base, e->piece[i].iov_len);
    memcpy(e->frame, lenbytes, 4);
    for (int i = 0; i < 4; i++)
        e->frame[4 + i] = (uint8_t)(crc >> (8 * i));
    e->next = NULL;
    if (wal->queue_tail)
        wal->queue_tail->next = e;
    else
        wal->queue_head = e;
    wal->queue_tail = e;
    start_batch(wal);
}

/* ---- recovery ---- */

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Lists segment numbers >= from, sorted. Caller frees *out. */
static int list_segments(const char *dir, uint64_t from, uint64_t **out, size_t *count) {
    char wdir[PATH_MAX];
    snprintf(wdir, sizeof wdir, "%s/wal", dir);
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

/* Replays one mapped segment up to `limit` bytes (UINT64_MAX: until the first
 * bad record). Returns the end of the last good record in *end. */
static int replay_segment(const uint8_t *map, size_t size, uint64_t limit, rn_wal_replay_fn fn,
                          void *arg, uint64_t *end, uint64_t *records) {
    size_t pos = HEADER_BYTES;
    size_t stop = limit < size ? (size_t)limit : size;
    while (pos + 8 <= stop) {
        rn_reader r;
        rn_reader_init(&r, map + pos, 8);
        uint32_t len = rn_read_u32(&r);
        uint32_t crc = rn_read_u32(&r);
        if (len > RN_WAL_MAX_RECORD || pos + 8 + len > stop)
            break;
        uint32_t want = rn_crc32c(rn_crc32c(0, map + pos, 4), map + pos + 8, len);
        if (want != crc)
            break;
        int rc = fn(arg, map + pos + 8, len);
        if (rc)
            return rc;
        pos += 8 + len;
        (*records)++;
    }
    *end = pos;
    return 0;
}

int rn_wal_recover(const char *dir, uint64_t from_segment, rn_wal_replay_fn fn, void *arg,
                   rn_wal_recovery *out) {
    memset(out, 0, sizeof *out);
    /* Numbering continues after the checkpoint even when its segments are
     * gone, so a later recovery from the same checkpoint finds new ones. */
    out->last_segment = from_segment ? from_segment - 1 : 0;
    char wdir[PATH_MAX];
    snprintf(wdir, sizeof wdir, "%s/wal", dir);
    if (mkdir(wdir, 0755) < 0 && errno != EEXIST)
        return -errno;
    uint64_t *segs;
    size_t n;
    int rc = list_segments(dir, from_segment, &segs, &n);
    if (rc)
        return rc;
    /* A newest segment whose header never became durable holds nothing
     * acknowledged: drop it. */
    while (n > 0) {
        char path[PATH_MAX];
        segment_path(dir, segs[n - 1], path, sizeof path);
        uint8_t h[HEADER_BYTES];
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        ssize_t got = fd >= 0 ? pread(fd, h, HEADER_BYTES, 0) : -1;
        if (fd >= 0)
            close(fd);
        uint64_t seg, prev;
        if (got == HEADER_BYTES && decode_header(h, HEADER_BYTES, &seg, &prev) == 0 &&
            seg == segs[n - 1])
            break;
        unlink(path);
        n--;
    }
    /* Segments are created one after the other, the first one after a
     * checkpoint being from_segment itself (1 without one): a missing number
     * is a lost segment, acknowledged records and all. */
    for (size_t i = 0; i < n && rc == 0; i++)
        if (segs[i] != (i ? segs[i - 1] + 1 : from_segment ? from_segment : 1))
            rc = RN_WAL_CORRUPT;
    for (size_t i = 0; i < n && rc == 0; i++) {
        char path[PATH_MAX];
        segment_path(dir, segs[i], path, sizeof path);
        int fd = open(path, O_RDWR | O_CLOEXEC);
        if (fd < 0) {
            rc = -errno;
            break;
        }
        struct stat st;
        fstat(fd, &st);
        size_t size = (size_t)st.st_size;
        uint8_t *map = NULL;
        if (size > 0) {
            map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
            if (map == MAP_FAILED) {
                rc = -errno;
                close(fd);
                break;
            }
        }
        uint64_t seg, prev;
        if (!map || decode_header(map, size, &seg, &prev) != 0 || seg != segs[i]) {
            rc = RN_WAL_CORRUPT;
        } else {
            /* The valid end of this segment is recorded by its successor. */
            uint64_t limit = UINT64_MAX;
            if (i + 1 < n) {
                char next[PATH_MAX];
                segment_path(dir, segs[i + 1], next, sizeof next);
                int nfd = open(next, O_RDONLY | O_CLOEXEC);
                uint8_t h[HEADER_BYTES];
                uint64_t nseg;
                if (nfd >= 0 && pread(nfd, h, HEADER_BYTES, 0) == HEADER_BYTES &&
                    decode_header(h, HEADER_BYTES, &nseg, &limit) == 0) {
                } else {
                    rc = RN_WAL_CORRUPT;
                }
                if (nfd >= 0)
                    close(nfd);
            }
            uint64_t end = 0;
            if (rc == 0)
                rc = replay_segment(map, size, limit, fn, arg, &end, &out->records);
            if (rc == 0 && limit != UINT64_MAX && end != limit)
                rc = RN_WAL_CORRUPT;
            if (rc == 0 && i + 1 == n) {
                /* Zeros past the records are the segment's preallocation,
                 * not a torn write: count only what lies before them. */
                size_t last = size;
                while (last > end && map[last - 1] == 0)
                    last--;
                out->torn_bytes = last - end;
                out->zero_bytes = size - last;
                if (end < size && (ftruncate(fd, (off_t)end) < 0 || fsync(fd) < 0))
                    rc = -errno;
            }
            out->last_segment = segs[i];
            out->last_valid_end = end;
            rn_log(RN_LOG_DEBUG, "recovery",
                   "log segment %llu replayed: records end at byte %llu of %zu",
                   (unsigned long long)segs[i], (unsigned long long)end, size);
        }
        if (map)
            munmap(map, size);
        close(fd);
    }
    free(segs);
    return rc;
}

rn_wal *rn_wal_open(uv_loop_t *loop, const char *dir, const rn_wal_recovery *rec,
                    const rn_wal_options *opts, int *err) {
    rn_wal *wal = rn_xcalloc(1, sizeof *wal);
    wal->loop = loop;
    wal->dir = rn_xstrdup(dir);
    wal->segment_bytes = opts->segment_bytes;
    wal->preallocate = opts->preallocate;
    wal->job.wal = wal;
    uint64_t seg = rec->last_segment + 1;
    int fd = create_segment(dir, seg, rec->last_segment ? rec->last_valid_end : 0, 0);
    if (fd < 0) {
        *err = fd;
        free(wal->dir);
        free(wal);
        return NULL;
    }
    wal->fd = fd;
    wal->segment = seg;
    wal->valid_end = HEADER_BYTES;
    return wal; /* the first batch starts the writer and the spare */
}

uint64_t rn_wal_current_segment(const rn_wal *wal) {
    return wal->segment;
}

void rn_wal_set_batch_hook(rn_wal *wal, rn_wal_batch_hook hook, void *arg) {
    wal->hook = hook;
    wal->hook_arg = arg;
}

uint64_t rn_wal_rotate(rn_wal *wal) {
    wal->rotate_requested = 1;
    return wal->segment + 1;
}

void rn_wal_drop_before(rn_wal *wal, uint64_t segment) {
    uint64_t *segs;
    size_t n;
    if (list_segments(wal->dir, 0, &segs, &n) != 0)
        return;
    for (size_t i = 0; i < n && segs[i] < segment; i++) {
        char path[PATH_MAX];
        segment_path(wal->dir, segs[i], path, sizeof path);
        unlink(path);
    }
    free(segs);
}

int rn_wal_busy(const rn_wal *wal) {
    return wal->in_flight || wal->queue_head != NULL || wal->spare_state == SPARE_PREPARING;
}

uint64_t rn_wal_bytes_written(const rn_wal *wal) {
    return wal->total_written;
}

void rn_wal_inject_sync_failures(rn_wal *wal, int n) {
    wal->pending_failures = n;
}

static void on_job_done_closed(uv_handle_t *h) {
    rn_wal *wal = h->data;
    wal->writer_started = 0;
}

void rn_wal_close(rn_wal *wal) {
    if (!wal)
        return;
    while (wal->spare_state == SPARE_PREPARING) /* its worker still uses wal */
        uv_run(wal->loop, UV_RUN_ONCE);
    if (wal->writer_started) {
        pthread_mutex_lock(&wal->lock);
        wal->stopping = 1;
        pthread_cond_signal(&wal->wake);
        pthread_mutex_unlock(&wal->lock);
        pthread_join(wal->writer, NULL);
        pthread_mutex_destroy(&wal->lock);
        pthread_cond_destroy(&wal->wake);
        uv_close((uv_handle_t *)&wal->job_done, on_job_done_closed);
        while (wal->writer_started) /* libuv holds the handle until closed */
            uv_run(wal->loop, UV_RUN_ONCE);
    }
    if (wal->fd >= 0)
        close(wal->fd);
    free(wal->dir);
    free(wal);
}
