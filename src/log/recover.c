/*
 * recover.c — log recovery: proves that the log still holds every
 * acknowledged batch, replays them, and cuts what a crash left unfinished;
 * when acknowledged records are lost it refuses and names the loss. See
 * wal.h for the contract and segment.h for the format.
 *
 * What must exist: every segment from the replay start up to the one
 * wal/HEAD names (one more may follow, created by a crash-interrupted
 * rotation before the head named it; it holds no records). Each segment
 * but the newest must hold intact batches exactly up to the valid end its
 * successor records. The newest holds intact batches, then possibly one
 * unfinished batch — the only bytes a crash can leave half written, since
 * the writer starts a batch only after the previous one was synced — then
 * zeros (unused preallocation). An unfinished batch is told from damage by
 * what follows it: an intact batch with a higher sequence number (so it had
 * been acknowledged), or bytes past its recorded end that no batch explains.
 *
 * Two passes: check() maps the segments and decides, replaying and
 * changing nothing; only when nothing is lost does replay() feed the
 * records to the caller and finish() cut the unfinished tail.
 */
#define _GNU_SOURCE
#include "log/segment.h"
#include "log/wal.h"
#include "util/buf.h"
#include "util/log.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define NO_LIMIT UINT64_MAX
#define SECTOR 512
static const uint8_t BATCH_MAGIC_BYTES[4] = {'R', 'N', 'B', '2'};

typedef struct {
    uint64_t number;
    int fd;
    uint8_t *map; /* NULL for an empty file */
    size_t size;
    int intact;       /* header intact and naming this number */
    rn_seg_header h;  /* its salt is read even from a damaged header */
    uint64_t limit;   /* valid end recorded by the successor, or NO_LIMIT */
    uint64_t end;     /* where its batches to replay end */
    uint64_t nonzero; /* end of the last non-zero byte (newest segment) */
    int dropped;      /* newest, its creation never finished */
} seg_view;

typedef struct {
    const char *dir;
    uint64_t from; /* replay start (0: no checkpoint) */
    seg_view *segs;
    size_t n;
    rn_wal_recovery *out;
} recovery;

static void name_of(uint64_t n, char out[32]) {
    snprintf(out, 32, "%020llu.log", (unsigned long long)n);
}

static int damage(recovery *r, rn_wal_damage_kind kind, uint64_t segment, uint64_t last,
                  uint64_t offset, uint64_t end, const char *fmt, ...)
    __attribute__((format(printf, 7, 8)));

static int damage(recovery *r, rn_wal_damage_kind kind, uint64_t segment, uint64_t last,
                  uint64_t offset, uint64_t end, const char *fmt, ...) {
    rn_wal_damage *d = &r->out->damage;
    *d = (rn_wal_damage){kind, segment, last, offset, end, ""};
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(d->what, sizeof d->what, fmt, ap);
    va_end(ap);
    return RN_WAL_CORRUPT;
}

/* Opens and maps segment v->number. Returns 0 or -errno. */
static int map_segment(const char *dir, seg_view *v) {
    assert(v->fd < 0 && !v->map); /* a view is mapped once */
    char path[PATH_MAX];
    rn_seg_path(dir, v->number, path, sizeof path);
    v->fd = open(path, O_RDWR | O_CLOEXEC);
    if (v->fd < 0)
        return -errno;
    struct stat st;
    if (fstat(v->fd, &st) < 0)
        return -errno;
    v->size = (size_t)st.st_size;
    if (v->size > 0) {
        void *m = mmap(NULL, v->size, PROT_READ, MAP_PRIVATE, v->fd, 0);
        if (m == MAP_FAILED)
            return -errno;
        v->map = m;
    }
    /* the fields, salt included, are read even from a damaged header (reports try it) */
    v->intact =
        v->map && rn_seg_decode_header(v->map, v->size, &v->h) == 0 && v->h.number == v->number;
    v->limit = NO_LIMIT;
    return 0;
}

static void unmap_segment(seg_view *v) {
    if (v->map)
        munmap(v->map, v->size);
    if (v->fd >= 0)
        close(v->fd);
    v->map = NULL;
    v->fd = -1;
}

/* End of the last non-zero byte of v at or after `from` (from when none). */
static uint64_t last_nonzero(const seg_view *v, uint64_t from) {
    assert(from <= v->size);
    uint64_t last = v->size;
    while (last > from && v->map[last - 1] == 0)
        last--;
    return last;
}

/* Checks the batch at pos of v, which must end by `stop`: its header
 * intact (with sequence number seq unless seq is 0) and every record whole
 * with a matching CRC, filling exactly the length the header records.
 * Returns 0 with *next set to the batch's end and its records added to
 * *records, or -1 when the batch is not intact. */
static int batch_at(const seg_view *v, uint64_t pos, uint64_t stop, uint64_t seq, uint64_t *next,
                    uint64_t *records) {
    /* batches start after the segment's header, within the mapped file */
    assert(v->intact && pos >= RN_SEG_HEADER && stop <= v->size);
    rn_batch_header bh;
    if (pos > stop || stop - pos < RN_BATCH_HEADER ||
        rn_batch_decode_header(v->map + pos, v->h.salt, &bh) != 0 || (seq && bh.seq != seq) ||
        bh.records == 0 || bh.bytes > stop - pos - RN_BATCH_HEADER)
        return -1;
    uint64_t end = pos + RN_BATCH_HEADER + bh.bytes, p = pos + RN_BATCH_HEADER;
    for (uint32_t i = 0; i < bh.records; i++) {
        uint32_t len;
        if (rn_record_check(v->map + p, (size_t)(end - p), &len) != 0)
            return -1;
        p += RN_RECORD_FRAME + (uint64_t)len;
    }
    if (p != end)
        return -1;
    assert(end > pos && end <= stop); /* its records fill exactly its recorded length */
    *next = end;
    *records += bh.records;
    return 0;
}

/* Calls fn for each record of the batch [pos, end) of v, which batch_at()
 * found intact. Returns 0, fn's non-zero result, or RN_WAL_CORRUPT when a
 * record no longer reads back (the file changed since). */
static int replay_batch(const seg_view *v, uint64_t pos, uint64_t end, rn_wal_replay_fn fn,
                        void *arg) {
    assert(pos >= RN_SEG_HEADER && end > pos + RN_BATCH_HEADER && end <= v->size);
    for (uint64_t p = pos + RN_BATCH_HEADER; p < end;) {
        uint32_t len;
        if (rn_record_check(v->map + p, (size_t)(end - p), &len) != 0)
            return RN_WAL_CORRUPT;
        int rc = fn(arg, v->map + p + RN_RECORD_FRAME, len);
        if (rc)
            return rc;
        p += RN_RECORD_FRAME + (uint64_t)len;
    }
    return 0;
}

/* Position of the first intact batch header of v in [from, stop) whose
 * sequence number is above min_seq, or 0 when there is none. */
static uint64_t find_batch(const seg_view *v, uint64_t from, uint64_t stop, uint64_t min_seq) {
    assert(v->map && stop <= v->size);
    while (from < stop && stop - from >= RN_BATCH_HEADER) {
        const uint8_t *hit = memmem(v->map + from, (size_t)(stop - from), BATCH_MAGIC_BYTES, 4);
        if (!hit)
            return 0;
        uint64_t at = (uint64_t)(hit - v->map);
        rn_batch_header bh;
        if (stop - at >= RN_BATCH_HEADER && rn_batch_decode_header(hit, v->h.salt, &bh) == 0 &&
            bh.seq > min_seq)
            return at;
        from = at + 1;
    }
    return 0;
}

/* The segment numbers that must exist: from the replay start up to the
 * head, at most one more. Returns 0 or RN_WAL_CORRUPT. */
static int check_numbers(recovery *r, const uint64_t *nums, int head_state, uint64_t head,
                         int torn) {
    if (head_state == RN_HEAD_DAMAGED)
        return damage(r, RN_WAL_DAMAGED_HEAD, 0, 0, 0, 0,
                      "wal/HEAD is damaged (neither of its slots reads back), so the log's "
                      "newest segments cannot be checked");
    if (head_state == 0) {
        if (r->n == 0 && r->from == 0)
            return 0; /* a new log */
        return damage(r, RN_WAL_DAMAGED_HEAD, 0, 0, 0, 0,
                      "wal/HEAD is missing although the log %s, so whether its newest segments "
                      "still exist cannot be checked",
                      r->n ? "has segments" : "continues a checkpoint");
    }
    uint64_t lo = r->from ? r->from : 1, want = lo;
    char a[32], b[32];
    for (size_t i = 0; i <= r->n; i++) {
        /* past the last segment, the head says what must still follow */
        uint64_t got = i < r->n ? nums[i] : (head >= want ? head + 1 : want);
        if (got == want) {
            want++;
            continue;
        }
        uint64_t last = got - 1;
        name_of(want, a);
        name_of(last, b);
        return damage(r, RN_WAL_MISSING_SEGMENTS, want, last, 0, 0,
                      "log segment%s %s%s%s %s missing: wal/HEAD says the log reached segment "
                      "%llu and replay starts at segment %llu, so the acknowledged records in %s "
                      "are lost",
                      last > want ? "s" : "", a, last > want ? " to " : "", last > want ? b : "",
                      last > want ? "are" : "is", (unsigned long long)head, (unsigned long long)lo,
                      last > want ? "them" : "it");
    }
    if (torn && !(r->n && nums[r->n - 1] == head + 1) && head + 1 >= lo)
        return damage(r, RN_WAL_DAMAGED_HEAD, head + 1, head + 1, 0, 0,
                      "wal/HEAD says the log reached segment %llu, but its other slot does not "
                      "read back and segment %llu, which that slot was being written to name, "
                      "does not exist: the head is damaged, and the newest segment may be lost",
                      (unsigned long long)head, (unsigned long long)head + 1);
    if (r->n && nums[r->n - 1] > head + 1) {
        name_of(nums[r->n - 1], a);
        return damage(r, RN_WAL_DAMAGED_HEAD, nums[r->n - 1], nums[r->n - 1], 0, 0,
                      "log segment %s exists but wal/HEAD says the log reached only segment %llu: "
                      "the head is damaged or older than the log",
                      a, (unsigned long long)head);
    }
    return 0;
}

/* Headers: each segment's must be intact, except the newest one's when
 * the head does not name it yet, no slot of the head was being written to
 * name it (torn), and nothing but zeros follows: its creation never
 * finished, it holds nothing. Returns 0 or RN_WAL_CORRUPT. */
static int check_headers(recovery *r, uint64_t head, int torn) {
    for (size_t i = 0; i < r->n; i++) {
        seg_view *v = &r->segs[i];
        if (v->intact)
            continue;
        uint64_t body = v->size < RN_SEG_HEADER ? v->size : RN_SEG_HEADER;
        uint64_t nonzero = v->map ? last_nonzero(v, body) - body : 0;
        if (i + 1 == r->n && v->number > head && !torn && nonzero == 0) {
            v->dropped = 1;
            continue;
        }
        char a[32];
        name_of(v->number, a);
        return damage(r, RN_WAL_DAMAGED_HEADER, v->number, v->number, 0, body,
                      "log segment %s has a damaged header (bytes 0..%llu) %s: records are "
                      "written into a segment only after its header was synced, so its "
                      "acknowledged records cannot be trusted",
                      a, (unsigned long long)body,
                      nonzero ? "and holds records after it" : "although wal/HEAD names it");
    }
    return 0;
}

/* True when every sector [a, b) of v touches holds a non-zero byte at or
 * after `from` (the start of the batch being judged): bytes an interrupted
 * write cannot have left out. A write reaches the disk sector by sector (a
 * killed process's write stops at a page boundary), and a sector it did
 * not reach reads as the segment's previous content: zeros, from the
 * preallocated spare or past the old end of file. */
static int written_whole(const seg_view *v, uint64_t from, uint64_t a, uint64_t b) {
    assert(from <= a && a < b);
    if (b > v->size)
        return 0;
    for (uint64_t s = a - a % SECTOR; s < b; s += SECTOR) {
        uint64_t lo = s < from ? from : s, hi = s + SECTOR < v->size ? s + SECTOR : v->size;
        uint64_t k = lo;
        while (k < hi && v->map[k] == 0)
            k++;
        if (k == hi)
            return 0;
    }
    return 1;
}

/* The newest segment v does not end in zeros after its last intact batch
 * (at pos, sequence number seq next). That is an unfinished last batch —
 * written only in part when the process or the machine stopped, never
 * acknowledged — only if it looks like one: no intact later batch, nothing
 * after the end its header records, and no header or record that was
 * written whole (no sector of it reads as zeros) yet fails its check.
 * Returns 0 for an unfinished batch, else RN_WAL_CORRUPT. */
static int check_unfinished(recovery *r, seg_view *v, uint64_t pos, uint64_t seq) {
    /* bytes other than zeros follow the last intact batch of the newest segment */
    assert(v->intact && pos >= RN_SEG_HEADER && pos < v->nonzero && v->nonzero <= v->size);
    char a[32];
    name_of(v->number, a);
    uint64_t later = find_batch(v, pos + 1, v->size, seq);
    if (later)
        return damage(r, RN_WAL_DAMAGED_RECORDS, v->number, v->number, pos, later,
                      "log segment %s is damaged at bytes %llu..%llu: an intact later batch "
                      "starts at byte %llu, and a batch is written only after the one before it "
                      "was synced and acknowledged",
                      a, (unsigned long long)pos, (unsigned long long)later,
                      (unsigned long long)later);
    rn_batch_header bh;
    int header = v->size - pos >= RN_BATCH_HEADER &&
                 rn_batch_decode_header(v->map + pos, v->h.salt, &bh) == 0 && bh.seq == seq;
    uint64_t bound = v->nonzero;
    if (header) {
        uint64_t bend =
            bh.bytes < v->size - pos - RN_BATCH_HEADER ? pos + RN_BATCH_HEADER + bh.bytes : v->size;
        if (bend < v->nonzero)
            return damage(r, RN_WAL_DAMAGED_RECORDS, v->number, v->number, pos, v->nonzero,
                          "log segment %s holds bytes %llu..%llu that no batch explains, after "
                          "a damaged batch at bytes %llu..%llu: a crash leaves nothing after the "
                          "batch it interrupted",
                          a, (unsigned long long)bend, (unsigned long long)v->nonzero,
                          (unsigned long long)pos, (unsigned long long)bend);
        bound = bend;
    } else if (written_whole(v, pos, pos, pos + RN_BATCH_HEADER)) {
        return damage(r, RN_WAL_DAMAGED_RECORDS, v->number, v->number, pos, v->nonzero,
                      "log segment %s is damaged at bytes %llu..%llu: the header of its last "
                      "batch was written whole but does not read back",
                      a, (unsigned long long)pos, (unsigned long long)v->nonzero);
    }
    for (uint64_t p = pos + RN_BATCH_HEADER; p < bound && bound - p >= RN_RECORD_FRAME;) {
        if (!written_whole(v, pos, p, p + RN_RECORD_FRAME))
            break; /* the rest cannot be located */
        uint64_t end = p + RN_RECORD_FRAME +
                       (uint64_t)(v->map[p] | v->map[p + 1] << 8 | v->map[p + 2] << 16 |
                                  (uint64_t)v->map[p + 3] << 24);
        if (end > bound && (!header || end > v->size))
            break; /* runs into the zeros or past the end of the file */
        uint32_t len;
        if (end > bound || (written_whole(v, pos, p, end) &&
                            rn_record_check(v->map + p, (size_t)(bound - p), &len) != 0))
            return damage(r, RN_WAL_DAMAGED_RECORDS, v->number, v->number, pos, end,
                          "log segment %s is damaged at bytes %llu..%llu: the record at byte "
                          "%llu of its last batch was written whole but does not read back",
                          a, (unsigned long long)pos, (unsigned long long)end,
                          (unsigned long long)p);
        p = end;
    }
    return 0; /* an unfinished last batch: cut by finish() */
}

/* Finds where the batches of segment i end: exactly at the valid end its
 * successor records, or, for the newest, at its last intact batch (an
 * unfinished batch after it is cut later). Returns 0 or RN_WAL_CORRUPT. */
static int check_batches(recovery *r, size_t i, int newest) {
    seg_view *v = &r->segs[i];
    /* check_headers() passed: the header is intact; the newest has no
     * successor to record where its records end */
    assert(v->intact && !v->dropped && (!newest || v->limit == NO_LIMIT));
    uint64_t stop = v->limit != NO_LIMIT && v->limit < v->size ? v->limit : v->size;
    uint64_t pos = RN_SEG_HEADER, seq = 1, next, records = 0;
    while (batch_at(v, pos, stop, seq, &next, &records) == 0) {
        pos = next;
        seq++;
    }
    v->end = pos;
    char a[32], b[32];
    name_of(v->number, a);
    if (!newest) {
        if (pos == v->limit)
            return 0;
        name_of(r->segs[i + 1].number, b);
        if (v->size < v->limit)
            return damage(r, RN_WAL_DAMAGED_RECORDS, v->number, v->number, pos, v->limit,
                          "log segment %s is %llu bytes long, but segment %s records that its "
                          "acknowledged records end at byte %llu: bytes %llu..%llu are lost",
                          a, (unsigned long long)v->size, b, (unsigned long long)v->limit,
                          (unsigned long long)pos, (unsigned long long)v->limit);
        return damage(r, RN_WAL_DAMAGED_RECORDS, v->number, v->number, pos, v->limit,
                      "log segment %s is damaged at bytes %llu..%llu: segment %s records that "
                      "its acknowledged records end at byte %llu",
                      a, (unsigned long long)pos, (unsigned long long)v->limit, b,
                      (unsigned long long)v->limit);
    }
    v->nonzero = last_nonzero(v, pos);
    if (v->nonzero == pos)
        return 0;
    return check_unfinished(r, v, pos, seq);
}

/* Decides, changing nothing: 0 when every acknowledged batch is there. */
static int check(recovery *r) {
    uint64_t head = 0;
    int torn = 0;
    int head_state = rn_head_read(r->dir, &head, &torn);
    if (head_state < 0)
        return head_state;
    uint64_t *nums;
    int rc = rn_list_segments(r->dir, r->from, &nums, &r->n);
    if (rc)
        return rc;
    rc = check_numbers(r, nums, head_state, head, torn);
    r->segs = rn_xcalloc(r->n ? r->n : 1, sizeof *r->segs);
    for (size_t i = 0; i < r->n; i++) {
        r->segs[i].number = nums[i];
        r->segs[i].fd = -1;
    }
    free(nums);
    for (size_t i = 0; i < r->n && rc == 0; i++)
        rc = map_segment(r->dir, &r->segs[i]);
    if (rc == 0)
        rc = check_headers(r, head, torn);
    size_t live = r->n - (r->n && r->segs[r->n - 1].dropped);
    for (size_t i = 0; i + 1 < live; i++)
        r->segs[i].limit = r->segs[i + 1].h.prev_end;
    for (size_t i = 0; i < live && rc == 0; i++)
        rc = check_batches(r, i, i + 1 == live);
    return rc;
}

/* Replays the batches check() found, in order. Returns 0 or fn's result. */
static int replay(recovery *r, rn_wal_replay_fn fn, void *arg) {
    for (size_t i = 0; i < r->n; i++) {
        seg_view *v = &r->segs[i];
        /* What check() proved: segments numbered without a gap, only the
         * newest possibly dropped, every other one with an intact header
         * and intact batches up to its end, which is where its successor
         * records that its acknowledged records end. */
        assert(i == 0 || v->number == r->segs[i - 1].number + 1);
        assert(!v->dropped || i + 1 == r->n);
        if (v->dropped)
            continue;
        assert(v->intact && v->end >= RN_SEG_HEADER && v->end <= v->size);
        assert(v->limit == NO_LIMIT || v->end == v->limit);
        uint64_t pos = RN_SEG_HEADER, seq = 1, next;
        while (pos < v->end) {
            if (batch_at(v, pos, v->end, seq++, &next, &r->out->records) != 0)
                return RN_WAL_CORRUPT; /* the file changed since check() */
            int rc = replay_batch(v, pos, next, fn, arg);
            if (rc)
                return rc;
            pos = next;
        }
        r->out->last_segment = v->number;
        r->out->last_valid_end = v->end;
        rn_log(RN_LOG_DEBUG, "recovery",
               "log segment %llu replayed: records end at byte %llu of %zu",
               (unsigned long long)v->number, (unsigned long long)v->end, v->size);
    }
    return 0;
}

/* Removes a newest segment whose creation never finished and cuts the
 * newest segment after its last intact batch. Returns 0 or -errno. */
static int finish(recovery *r) {
    for (size_t i = r->n; i-- > 0;) {
        seg_view *v = &r->segs[i];
        if (v->dropped) {
            char path[PATH_MAX];
            rn_seg_path(r->dir, v->number, path, sizeof path);
            if (unlink(path) < 0)
                return -errno;
            continue;
        }
        /* the newest segment: batches, then non-zero bytes cut, then zeros */
        assert(v->end <= v->nonzero && v->nonzero <= v->size);
        r->out->torn_bytes = v->nonzero - v->end;
        r->out->torn_offset = v->end;
        r->out->zero_bytes = v->size - v->nonzero;
        if (v->size > v->end && (ftruncate(v->fd, (off_t)v->end) < 0 || fsync(v->fd) < 0))
            return -errno;
        return 0;
    }
    return 0;
}

static void release(recovery *r) {
    for (size_t i = 0; i < r->n; i++)
        unmap_segment(&r->segs[i]);
    free(r->segs);
}

int rn_wal_recover(const char *dir, uint64_t from_segment, rn_wal_replay_fn fn, void *arg,
                   rn_wal_recovery *out) {
    assert(dir && fn && out);
    memset(out, 0, sizeof *out);
    /* Numbering continues after the checkpoint even when its segments are
     * gone, so a later recovery from the same checkpoint finds new ones. */
    out->last_segment = from_segment ? from_segment - 1 : 0;
    char wdir[PATH_MAX];
    rn_wal_dir(dir, wdir, sizeof wdir);
    if (mkdir(wdir, 0755) < 0 && errno != EEXIST)
        return -errno;
    recovery r = {.dir = dir, .from = from_segment, .out = out};
    int rc = check(&r);
    if (rc == 0)
        rc = replay(&r, fn, arg);
    if (rc == 0)
        rc = finish(&r);
    release(&r);
    return rc;
}

/* ---- naming a loss ---- */

/* Calls fn for every record that reads back in v from `from` to `stop`:
 * the records of each batch whose header is intact, up to its first bad
 * record, searching for the next intact batch header after a bad one. */
static int walk_readable(const seg_view *v, uint64_t from, uint64_t stop, rn_wal_replay_fn fn,
                         void *arg) {
    uint64_t p = from;
    while (p < stop && stop - p >= RN_BATCH_HEADER) {
        rn_batch_header bh;
        if (rn_batch_decode_header(v->map + p, v->h.salt, &bh) == 0) {
            uint64_t q = p + RN_BATCH_HEADER;
            uint64_t end = bh.bytes <= stop - q ? q + bh.bytes : stop;
            uint32_t len, seen = 0;
            while (seen < bh.records && rn_record_check(v->map + q, (size_t)(end - q), &len) == 0) {
                int rc = fn(arg, v->map + q + RN_RECORD_FRAME, len);
                if (rc)
                    return rc;
                q += RN_RECORD_FRAME + (uint64_t)len;
                seen++;
            }
            if (seen == bh.records && q == end) {
                p = end;
                continue;
            }
        }
        uint64_t next = find_batch(v, p + 1, stop, 0);
        if (!next)
            break;
        p = next;
    }
    return 0;
}

/* The part of segment n on the asked side of damage d: [*start, *cap)
 * (cap: UINT64_MAX for the whole segment). Returns 0 when n has none. */
static int side_of(const rn_wal_damage *d, uint64_t n, int after, uint64_t *start, uint64_t *cap) {
    uint64_t first = d->kind == RN_WAL_MISSING_SEGMENTS ? d->last_segment + 1 : d->segment;
    *start = RN_SEG_HEADER;
    *cap = UINT64_MAX;
    if (after) {
        if (n < first)
            return 0;
        if (n == d->segment && d->kind == RN_WAL_DAMAGED_RECORDS)
            *start = d->offset;
        return 1;
    }
    if (n == d->segment && d->kind == RN_WAL_DAMAGED_RECORDS) {
        *cap = d->offset;
        return 1;
    }
    return n < d->segment;
}

int rn_wal_damaged_records(const char *dir, uint64_t from_segment, const rn_wal_damage *d,
                           int after, rn_wal_replay_fn fn, void *arg) {
    assert(fn && d->kind <= RN_WAL_DAMAGED_HEAD);
    if (d->kind == RN_WAL_INTACT || d->kind == RN_WAL_DAMAGED_HEAD)
        return 0; /* a damaged head loses no record that could be named */
    uint64_t *nums;
    size_t n;
    int rc = rn_list_segments(dir, from_segment, &nums, &n);
    if (rc)
        return rc;
    for (size_t i = 0; i < n && rc == 0; i++) {
        uint64_t start, cap;
        if (!side_of(d, nums[i], after, &start, &cap))
            continue;
        seg_view v = {.number = nums[i], .fd = -1};
        rc = map_segment(dir, &v);
        uint64_t stop = v.size < cap ? v.size : cap;
        if (rc == 0 && i + 1 < n) {
            seg_view next = {.number = nums[i + 1], .fd = -1};
            if (map_segment(dir, &next) == 0 && next.intact && next.h.prev_end < stop)
                stop = next.h.prev_end; /* past it: a failed batch, never acknowledged */
            unmap_segment(&next);
        }
        if (rc == 0 && v.map)
            rc = walk_readable(&v, start, stop, fn, arg);
        unmap_segment(&v);
    }
    free(nums);
    return rc;
}

/* ---- accepting a loss ---- */

/* Where the acknowledged records of the segment before `next` end, as
 * segment `next`'s header records it; NO_LIMIT when that header does not
 * read back. */
static uint64_t recorded_end(const char *dir, uint64_t next) {
    seg_view v = {.number = next, .fd = -1};
    uint64_t limit = map_segment(dir, &v) == 0 && v.intact ? v.h.prev_end : NO_LIMIT;
    unmap_segment(&v);
    return limit;
}

int rn_wal_replay_prefix(const char *dir, uint64_t from_segment, rn_wal_replay_fn fn, void *arg,
                         rn_wal_recovery *out) {
    memset(out, 0, sizeof *out);
    uint64_t *nums, head;
    size_t n;
    int torn, rc = rn_list_segments(dir, from_segment, &nums, &n);
    if (rc)
        return rc;
    uint64_t want = from_segment ? from_segment : 1;
    int broken = 0;
    for (size_t i = 0; i < n && !broken && rc == 0 && nums[i] == want; i++, want++) {
        seg_view v = {.number = nums[i], .fd = -1};
        rc = map_segment(dir, &v);
        uint64_t limit = i + 1 < n ? recorded_end(dir, nums[i + 1]) : NO_LIMIT;
        uint64_t stop = limit < v.size ? limit : v.size;
        uint64_t pos = RN_SEG_HEADER, seq = 1, next;
        broken = rc != 0 || !v.intact;
        while (!broken && rc == 0 && batch_at(&v, pos, stop, seq, &next, &out->records) == 0) {
            rc = replay_batch(&v, pos, next, fn, arg);
            pos = next;
            seq++;
        }
        broken = broken || (limit != NO_LIMIT && pos != limit);
        unmap_segment(&v);
    }
    uint64_t last = n ? nums[n - 1] : 0;
    free(nums);
    if (rn_head_read(dir, &head, &torn) == 1 && head > last)
        last = head;
    if (from_segment && from_segment - 1 > last)
        last = from_segment - 1;
    out->last_segment = last; /* the new segment's header records no valid end */
    return rc;
}

/* ---- older formats ---- */

int rn_wal_adopt_format1(const char *dir) {
    char wdir[PATH_MAX];
    rn_wal_dir(dir, wdir, sizeof wdir);
    if (mkdir(wdir, 0755) < 0 && errno != EEXIST)
        return -errno;
    uint64_t *nums, head;
    size_t n;
    int torn;
    int rc = rn_list_segments(dir, 0, &nums, &n);
    if (rc)
        return rc;
    free(nums);
    if (n)
        return -ENOTEMPTY;
    rc = rn_head_read(dir, &head, &torn);
    if (rc < 0)
        return rc;
    return rc == 1 ? 0 : rn_head_create(dir, 0);
}
