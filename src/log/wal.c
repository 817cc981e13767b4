/*
 * wal.c — the log's writer: segment files, group commit, space reservation
 * and the spare segment. The format is in segment.h, recovery in
 * recover.c; see wal.h for the guarantees.
 *
 * Threading: all fields are owned by the loop thread except `job`, which is
 * handed to the log's own writer thread one batch at a time (the batch
 * write, fdatasync and the entries' after_sync hooks; the handover fields
 * are under `lock`), and which reports back through the `job_done` async
 * handle. The loop thread never touches the job, nor the current segment's
 * fields (fd, salt, valid_end, batch_seq, allocated_end) while it is in
 * flight. Background work that may take long (the spare segment) runs in
 * libuv's pool.
 */
#define _GNU_SOURCE
#include "log/wal.h"
#include "log/segment.h"
#include "util/buf.h"
#include "util/clock.h"
#include "util/crc32c.h"
#include "util/fault.h"
#include "util/files.h"
#include "util/log.h"
#include "util/metrics.h"

#include <assert.h>
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
#include <sys/statvfs.h>
#include <unistd.h>

/* Space reserved ahead of a segment's records, so a batch rarely pays a
 * fallocate of its own. */
#define RESERVE_AHEAD (1u << 20)
/* A spare is prepared only while the file system has this many times the
 * segment size free: its zeros must not take the last free space. */
#define SPARE_ROOM_FACTOR 2
/* After a spare failed, the next attempt waits this long. */
#define SPARE_RETRY_MS 10000
/* Refusals for lack of log space are reported at most this often. */
#define FULL_LOG_REPORT_MS 1000

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
    uint64_t seq;      /* the batch's sequence number in its segment */
    uint64_t segment;  /* where the batch went (or was to go) ... */
    uint64_t offset;   /* ... and at which byte */
    const char *step;  /* what failed: "creating the segment", "writing", ... */
    uint8_t header[RN_BATCH_HEADER];
} wal_job;

struct rn_wal {
    uv_loop_t *loop;
    char *dir;
    int fd;                 /* current segment, -1 when the next batch must open one */
    uint64_t segment;       /* number of the segment `fd` refers to */
    uint64_t valid_end;     /* bytes of that segment holding acknowledged records */
    uint64_t salt;          /* of that segment (segment.h) */
    uint64_t batch_seq;     /* sequence number of its last acknowledged batch */
    uint64_t allocated_end; /* its bytes below this own disk blocks */
    int head_fd;            /* wal/HEAD, rewritten as segments are created */
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
    uint64_t spare_retry_at; /* monotonic ms: no new spare before this */
    rn_log_throttle full_report;
};

enum { SPARE_NONE, SPARE_PREPARING, SPARE_READY };

static void spare_path(const char *dir, char *out, size_t cap) {
    snprintf(out, cap, "%s/wal/spare.tmp", dir);
}

/* Creates segment n with its header, durably (file and directory synced),
 * from the prepared spare when use_spare is set, then names it in the log
 * head. Sets the segment's salt in *salt. Returns the fd or a negative
 * errno; nothing of a batch has been written either way. Runs on the
 * writer thread or at open. */
static int create_segment(rn_wal *wal, uint64_t n, uint64_t prev_end, int use_spare,
                          uint64_t *salt) {
    assert(n >= 1 && wal->head_fd >= 0);
    /* the previous segment's records end after its header, or it is unknown */
    assert(prev_end == 0 || prev_end >= RN_SEG_HEADER);
    assert(!use_spare || wal->preallocate);
    char path[PATH_MAX], spare[PATH_MAX];
    rn_seg_path(wal->dir, n, path, sizeof path);
    spare_path(wal->dir, spare, sizeof spare);
    int fd = -1;
    if (use_spare && rename(spare, path) == 0) {
        rn_fault_point("wal-after-spare-rename");
        fd = open(path, O_WRONLY | O_CLOEXEC);
    }
    if (fd < 0)
        fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return -errno;
    rn_seg_header sh = {.number = n, .prev_end = prev_end, .salt = rn_seg_new_salt()};
    uint8_t h[RN_SEG_HEADER];
    rn_seg_encode_header(h, &sh);
    int rc = 0;
    if (pwrite(fd, h, RN_SEG_HEADER, 0) != RN_SEG_HEADER)
        rc = errno ? -errno : -EIO;
    else if (fdatasync(fd) < 0)
        rc = -errno;
    if (rc == 0) {
        char wdir[PATH_MAX];
        rn_wal_dir(wal->dir, wdir, sizeof wdir);
        rc = rn_sync_dir(wdir);
    }
    if (rc < 0) {
        close(fd);
        unlink(path); /* the head does not name it yet */
        return rc;
    }
    /* The head names the segment only once it is durable, and records go
     * into it only after the head does: recovery then knows that every
     * segment up to the head must exist with an intact header. If this
     * write fails the head may or may not name n; the file stays (it holds
     * no records) and the next attempt creates n again. */
    rc = rn_head_write(wal->head_fd, n);
    if (rc < 0) {
        close(fd);
        return rc;
    }
    *salt = sh.salt;
    return fd;
}

/* Writes all iovecs at `off`, handling short writes and IOV_MAX. */
static int write_all(int fd, struct iovec *iov, int cnt, uint64_t off) {
    assert(fd >= 0 && cnt > 0 && off >= RN_SEG_HEADER);
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

/* Makes the current segment own disk blocks up to `end` before a batch is
 * written there, so that a full disk refuses the batch before any of it is
 * written instead of failing its write half way. Reserves RESERVE_AHEAD
 * more (not past the rotation point) when there is room. Returns 0 or
 * -errno. */
static int reserve_log_space(rn_wal *wal, uint64_t end) {
    if (end <= wal->allocated_end)
        return 0;
    uint64_t ahead = end + RESERVE_AHEAD;
    if (ahead > wal->segment_bytes)
        ahead = end > wal->segment_bytes ? end : wal->segment_bytes;
    uint64_t from = wal->allocated_end;
    if (fallocate(wal->fd, FALLOC_FL_KEEP_SIZE, (off_t)from, (off_t)(ahead - from)) == 0) {
        wal->allocated_end = ahead;
        return 0;
    }
    if (errno == EOPNOTSUPP || errno == ENOSYS) {
        wal->allocated_end = UINT64_MAX; /* no preallocation here: best effort */
        return 0;
    }
    if ((errno == ENOSPC || errno == EDQUOT) && ahead > end &&
        fallocate(wal->fd, FALLOC_FL_KEEP_SIZE, (off_t)from, (off_t)(end - from)) == 0) {
        wal->allocated_end = end;
        return 0;
    }
    return -errno;
}

/* A failure before anything of the batch was written: a refusal when the
 * disk is full, else the error. */
static int not_written(int rc) {
    return rc == -ENOSPC || rc == -EDQUOT ? RN_WAL_NOT_WRITTEN_FULL : rc;
}

/* Writes the batch header and the records of the job's batch at the end
 * of the current segment and syncs them (the writer thread). */
static void write_batch(rn_wal *wal, wal_job *job) {
    /* a batch goes at the end of an open segment, after its header */
    assert(wal->fd >= 0 && wal->valid_end >= RN_SEG_HEADER);
    assert(job->head && job->records >= 1);
    size_t count = 1;
    for (rn_wal_entry *e = job->head; e; e = e->next)
        count += 1 + (size_t)e->pieces;
    struct iovec *iov = rn_xmalloc(count * sizeof *iov);
    size_t k = 1;
    uint64_t record_bytes = 0;
    for (rn_wal_entry *e = job->head; e; e = e->next) {
        iov[k++] = (struct iovec){e->frame, RN_RECORD_FRAME};
        record_bytes += RN_RECORD_FRAME;
        for (int i = 0; i < e->pieces; i++) {
            iov[k++] = e->piece[i];
            record_bytes += e->piece[i].iov_len;
        }
    }
    assert(k == count);
    job->seq = wal->batch_seq + 1;
    rn_batch_header bh = {
        .records = (uint32_t)job->records, .seq = job->seq, .bytes = record_bytes};
    rn_batch_encode_header(job->header, wal->salt, &bh);
    iov[0] = (struct iovec){job->header, RN_BATCH_HEADER};
    job->bytes = RN_BATCH_HEADER + record_bytes;
    job->step = "reserving its space";
    int rc = reserve_log_space(wal, wal->valid_end + job->bytes);
    if (rc < 0) {
        free(iov);
        job->status = not_written(rc);
        return;
    }
    job->step = "writing";
    rc = write_all(wal->fd, iov, (int)count, wal->valid_end);
    free(iov);
    rn_fault_point("wal-after-write");
    if (rc == 0 && job->fail_injected)
        rc = -EIO;
    if (rc == 0) {
        job->step = "syncing";
        if (fdatasync(wal->fd) < 0)
            rc = -errno;
    }
    if (rc == RN_WAL_NOT_WRITTEN_FULL)
        rc = -EIO; /* some of the batch may be on disk: its outcome is unknown */
    rn_fault_point("wal-after-sync");
    job->status = rc;
}

/* Runs one batch (the writer thread): opens the segment it goes to when
 * asked, writes and syncs it, runs the entries' after_sync hooks, and after
 * a failed write moves the log to a new segment. */
static void batch_work(wal_job *job) {
    rn_wal *wal = job->wal;
    assert(job->head); /* a batch is never empty */
    /* the batch continues the open segment or opens the next one */
    assert(job->open_segment ? job->open_segment == wal->segment + 1 : wal->fd >= 0);
    job->status = 0;
    job->bytes = 0;
    job->opened = 0;
    job->sealed = 0;
    job->records = 0;
    for (rn_wal_entry *e = job->head; e; e = e->next)
        job->records++;
    job->write_us = 0;
    job->segment = job->open_segment ? job->open_segment : wal->segment;
    job->offset = RN_SEG_HEADER;
    if (job->open_segment) {
        job->step = "creating the segment";
        int fd = create_segment(wal, job->open_segment, job->open_prev_valid_end, job->use_spare,
                                &wal->salt);
        if (fd < 0) {
            job->status = not_written(fd);
            return;
        }
        wal->fd = fd; /* the loop thread does not read these while a job runs */
        wal->valid_end = RN_SEG_HEADER;
        wal->batch_seq = 0;
        wal->allocated_end = job->use_spare ? wal->segment_bytes : RN_SEG_HEADER;
        job->opened = 1;
    }
    job->offset = wal->valid_end;
    uint64_t t0 = uv_hrtime();
    write_batch(wal, job);
    job->write_us = (uv_hrtime() - t0) / 1000;
    int rc = job->status;
    for (rn_wal_entry *e = job->head; e; e = e->next)
        e->after_sync_status = rc == 0 && e->after_sync ? e->after_sync(e) : 0;
    if (rc != 0 && rc != RN_WAL_NOT_WRITTEN_FULL) {
        /* Bytes of the failed batch may be on disk, and recovery replays the
         * newest segment up to its last intact batch. Start the next segment
         * now, recording where the acknowledged records end, so that the
         * failed records are ignored even if nothing is written after them;
         * the callbacks run after that header is durable. If this fails too,
         * the next batch opens the segment (until then the failed batch is
         * the newest segment's last, which recovery may replay if it reached
         * the disk whole: the answers said its outcome was unknown). */
        uint64_t cur = job->opened ? job->open_segment : wal->segment;
        assert(job->offset == wal->valid_end); /* nothing of it counted as written */
        uint64_t salt;
        int fd = create_segment(wal, cur + 1, wal->valid_end, 0, &salt);
        if (fd >= 0) {
            close(wal->fd);
            wal->fd = fd;
            wal->salt = salt;
            wal->valid_end = RN_SEG_HEADER;
            wal->batch_seq = 0;
            wal->allocated_end = RN_SEG_HEADER;
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
    assert(wal->spare_state == SPARE_PREPARING);
    int rc = status ? status : wal->spare_status;
    wal->spare_state = rc == 0 ? SPARE_READY : SPARE_NONE;
    if (rc != 0) {
        wal->spare_retry_at = rn_mono_ms() + SPARE_RETRY_MS;
        rn_log(RN_LOG_WARN, "wal",
               "could not prepare a spare log segment: %s (errno %d); segments are written "
               "without preallocation until one is ready",
               strerror(-rc), -rc);
    }
}

/* True when the file system holding the log has room for a spare and more
 * (a spare's zeros must not take the space that appends need). */
static int room_for_spare(const rn_wal *wal) {
    char wdir[PATH_MAX];
    rn_wal_dir(wal->dir, wdir, sizeof wdir);
    struct statvfs vfs;
    if (statvfs(wdir, &vfs) != 0)
        return 0;
    return (uint64_t)vfs.f_bavail * vfs.f_frsize / SPARE_ROOM_FACTOR >= wal->segment_bytes;
}

/* Starts preparing the spare unless one exists or is being prepared, a
 * failed one is too recent, or the disk is too full for one. */
static void prepare_spare(rn_wal *wal) {
    assert(!wal->in_flight); /* a batch may be renaming the spare into a segment */
    if (!wal->preallocate || wal->spare_state != SPARE_NONE || rn_mono_ms() < wal->spare_retry_at ||
        !room_for_spare(wal))
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

/* Logs a failed batch at error level: every write or sync failure, and
 * refusals for lack of space at most once per FULL_LOG_REPORT_MS (the
 * line counts the ones held back). Loop thread. */
static void report_failure(rn_wal *wal, const wal_job *job) {
    int err = job->status == RN_WAL_NOT_WRITTEN_FULL ? ENOSPC : -job->status;
    const char *name = strerror(err);
    if (job->status == RN_WAL_NOT_WRITTEN_FULL) {
        rn_log_throttled(&wal->full_report, FULL_LOG_REPORT_MS, RN_LOG_ERROR, "wal",
                         "log batch of %llu record%s for segment %llu refused while %s: %s "
                         "(errno %d); nothing of it was written, its writes are refused",
                         (unsigned long long)job->records, job->records == 1 ? "" : "s",
                         (unsigned long long)job->segment, job->step, name, err);
        return;
    }
    int written = strcmp(job->step, "writing") == 0 || strcmp(job->step, "syncing") == 0;
    char next[96] = "";
    if (job->sealed)
        snprintf(next, sizeof next, "; the log continues in segment %llu",
                 (unsigned long long)job->sealed);
    rn_log(RN_LOG_ERROR, "wal",
           "log batch of %llu record%s (%llu bytes) for segment %llu at byte %llu failed while "
           "%s: %s (errno %d)%s; %s%s",
           (unsigned long long)job->records, job->records == 1 ? "" : "s",
           (unsigned long long)job->bytes, (unsigned long long)job->segment,
           (unsigned long long)job->offset, job->step, name, err,
           job->fail_injected ? " (injected by the test hook)" : "",
           written ? "some of it may be on disk, its writes are answered as of unknown outcome"
                   : "nothing of it was written",
           next);
}

static void batch_done(uv_async_t *async) {
    rn_wal *wal = async->data;
    wal_job *job = &wal->job;
    int status = job->status;
    assert(wal->in_flight && job->head);
    /* a segment is sealed only after a batch that may have left bytes */
    assert(!job->sealed || (status != 0 && status != RN_WAL_NOT_WRITTEN_FULL));
    uv_unref((uv_handle_t *)&wal->job_done); /* an idle log keeps no loop alive */
    if (job->opened) {
        wal->segment = job->open_segment;
        wal->preallocated = job->use_spare;
    }
    if (job->sealed) {
        wal->segment = job->sealed;
        wal->preallocated = 0;
    }
    if (status != RN_WAL_NOT_WRITTEN_FULL) {
        rn_metric.wal_batches++;
        rn_metric.wal_records += job->records;
        rn_metric_sync(job->write_us);
    }
    rn_log(RN_LOG_DEBUG, "wal_batch",
           "%llu records, %llu bytes, segment %llu, write and sync %llu us%s",
           (unsigned long long)job->records, (unsigned long long)job->bytes,
           (unsigned long long)wal->segment, (unsigned long long)job->write_us,
           status == 0                         ? ""
           : status == RN_WAL_NOT_WRITTEN_FULL ? ", REFUSED (disk full)"
                                               : ", FAILED");
    if (status == 0) {
        /* it went right after the last acknowledged batch, numbered next */
        assert(job->offset == wal->valid_end && job->seq == wal->batch_seq + 1);
        assert(job->bytes > RN_BATCH_HEADER);
        rn_metric.wal_bytes += job->bytes;
        wal->valid_end += job->bytes;
        wal->batch_seq = job->seq;
        wal->total_written += job->bytes;
    } else {
        rn_metric.wal_sync_failures += status != RN_WAL_NOT_WRITTEN_FULL;
        report_failure(wal, job);
        /* After a refusal nothing was written and the segment goes on; after
         * a failure its tail is unknown: never append to it again. */
        if (status != RN_WAL_NOT_WRITTEN_FULL && !job->sealed && wal->fd >= 0) {
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
    assert(!job->head); /* the last batch's entries were all handed back */
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
        assert(!job->use_spare || wal->preallocate);
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
    assert(!wal->job_ready); /* the writer took the last job before reporting it */
    wal->job_ready = 1;
    pthread_cond_signal(&wal->wake);
    pthread_mutex_unlock(&wal->lock);
}

void rn_wal_submit(rn_wal *wal, rn_wal_entry *e) {
    assert(e->done && e->pieces >= 0 && e->pieces <= RN_WAL_MAX_PIECES);
    size_t len = 0;
    uint32_t crc;
    for (int i = 0; i < e->pieces; i++)
        len += e->piece[i].iov_len;
    assert(len <= RN_WAL_MAX_RECORD); /* recovery would take a longer one for damage */
    uint8_t lenbytes[4] = {(uint8_t)len, (uint8_t)(len >> 8), (uint8_t)(len >> 16),
                           (uint8_t)(len >> 24)};
    crc = rn_crc32c(0, lenbytes, 4);
    for (int i = 0; i < e->pieces; i++)
        crc = rn_crc32c(crc, e->piece[i].iov_base, e->piece[i].iov_len);
    rn_record_frame(e->frame, (uint32_t)len, crc);
    e->next = NULL;
    if (wal->queue_tail)
        wal->queue_tail->next = e;
    else
        wal->queue_head = e;
    wal->queue_tail = e;
    start_batch(wal);
    assert(wal->in_flight); /* entries wait only behind a batch in flight */
}

/* Opens wal/HEAD for the segments this log creates. A log that has none
 * yet (a new data directory) gets one naming `last`, the segment recovery
 * ended with; so does one with a torn slot (recovery found the segment that
 * slot was naming), so the slot left standing is never one a later torn
 * write could be mistaken for. Returns 0 or -errno. */
static int open_head(rn_wal *wal, uint64_t last) {
    uint64_t head;
    int torn;
    int rc = rn_head_read(wal->dir, &head, &torn);
    if (rc == 0 || (rc == 1 && torn))
        rc = rn_head_create(wal->dir, rc == 1 && head > last ? head : last);
    else if (rc == RN_HEAD_DAMAGED)
        rc = -EIO; /* recovery refuses this first */
    else if (rc == 1)
        rc = 0;
    if (rc < 0)
        return rc;
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/wal/%s", wal->dir, RN_HEAD_FILE);
    wal->head_fd = open(path, O_RDWR | O_CLOEXEC);
    return wal->head_fd < 0 ? -errno : 0;
}

rn_wal *rn_wal_open(uv_loop_t *loop, const char *dir, const rn_wal_recovery *rec,
                    const rn_wal_options *opts, int *err) {
    assert(opts->segment_bytes > RN_SEG_HEADER);
    rn_wal *wal = rn_xcalloc(1, sizeof *wal);
    wal->loop = loop;
    wal->dir = rn_xstrdup(dir);
    wal->segment_bytes = opts->segment_bytes;
    wal->preallocate = opts->preallocate;
    wal->job.wal = wal;
    wal->fd = wal->head_fd = -1;
    uint64_t seg = rec->last_segment + 1;
    int rc = open_head(wal, rec->last_segment);
    if (rc == 0) {
        rc = create_segment(wal, seg, rec->last_segment ? rec->last_valid_end : 0, 0, &wal->salt);
        wal->fd = rc;
    }
    if (rc < 0) {
        *err = rc;
        if (wal->head_fd >= 0)
            close(wal->head_fd);
        free(wal->dir);
        free(wal);
        return NULL;
    }
    wal->segment = seg;
    wal->valid_end = wal->allocated_end = RN_SEG_HEADER;
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
    assert(!wal->job.head); /* no batch in flight (or inside the batch hook) */
    wal->rotate_requested = 1;
    return wal->segment + 1;
}

void rn_wal_drop_before(rn_wal *wal, uint64_t segment) {
    uint64_t *segs;
    size_t n;
    if (rn_list_segments(wal->dir, 0, &segs, &n) != 0)
        return;
    for (size_t i = 0; i < n && segs[i] < segment; i++) {
        char path[PATH_MAX];
        rn_seg_path(wal->dir, segs[i], path, sizeof path);
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
    assert(!wal->in_flight);
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
    if (wal->head_fd >= 0)
        close(wal->head_fd);
    free(wal->dir);
    free(wal);
}
