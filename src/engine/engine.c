/*
 * engine.c — stream state machine, mutation pipeline, recovery and
 * checkpoints. See engine.h for the model.
 *
 * Mutation path: rn_engine_submit() -> validate_*() against applied state ->
 * either finish() at once, or log_command() (encode, reserve file space and
 * pin the stream's files, rn_wal_submit) -> the log's worker writes the data
 * into the stream files after the sync (write_stream_files) -> on_logged()
 * -> apply() -> finish() -> drain the stream's queue.
 *
 * Recovery: load_checkpoint() restores every stream as of a snapshot, then
 * rn_wal_recover() replays later records through the same apply(); streams
 * the replay touched get their files cut to the recovered tail.
 *
 * Checkpoints: after checkpoint_bytes of log, the batch hook (run between log
 * batches, when nothing is in flight) serializes all stream metadata and
 * rotates the log; a worker thread then syncs the file system (making every
 * stream file durable), writes the checkpoint atomically, and the segments
 * before the rotation are dropped.
 */
#include "engine/engine.h"
#include "util/fault.h"
#include "engine/command.h"
#include "engine/damage_report.h"
#include "engine/store.h"
#include "tiers/blobs.h"
#include "util/blake3.h"
#include "util/clock.h"
#include "util/crc32c.h"
#include "util/json_text.h"
#include "util/log.h"
#include "util/text.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char CHECKPOINT_MAGIC[8] = {'R', 'N', 'C', 'K', 'P', 'T', '0', '2'};

#define PRODUCER_TTL_DEFAULT_MS (7 * 24 * 3600 * 1000ull) /* ext §5.4 */
#define PRODUCER_CAP_DEFAULT 4096
#define PRODUCER_CROWDED_TTL_MS (3600 * 1000ull) /* kept at least this long when crowded */
#define EXPIRE_LIST_MAX_BYTES (1u << 20)         /* producer ids per EXPIRE_PRODUCERS record */

typedef struct {
    uv_work_t req;
    rn_engine *engine;
    rn_buf image;     /* serialized checkpoint */
    uint64_t segment; /* first log segment not covered */
    int status;
} checkpoint_job;

struct rn_engine {
    uv_loop_t *loop;
    rn_engine_config cfg;
    char *dir;
    rn_store *store;
    rn_blobs *snapshots; /* snapshot bodies below the cold threshold */
    rn_blobs *cold;      /* the cold store, or NULL */
    rn_wal *wal;
    rn_map by_path; /* path -> rn_stream (includes pending creates) */
    rn_map by_id;   /* id -> rn_stream */
    uint64_t next_id;
    uint64_t log_bytes_at_checkpoint;
    checkpoint_job *checkpoint; /* in flight, or NULL */
    struct {
        rn_stream_observer fn;
        void *arg;
    } observers[RN_ENGINE_MAX_OBSERVERS];
    int observer_count;
    uint64_t blob_serial;           /* makes blob keys unique within a millisecond */
    rn_map buckets;                 /* bucket ids a stream was ever created in -> its id */
    int ops_in_log;                 /* mutations submitted, not yet applied */
    int ops_preparing;              /* mutations waiting for their stream's files */
    rn_log_throttle store_refusals; /* writes refused for their stream files */
};

static void run_op(rn_engine *e, rn_op *op);
static uint64_t incarnation_for(uint64_t n);

static void notify(rn_engine *e, rn_stream *s, rn_stream_event ev) {
    for (int i = 0; i < e->observer_count; i++)
        e->observers[i].fn(s, ev, e->observers[i].arg);
}

void rn_engine_observe(rn_engine *e, rn_stream_observer fn, void *arg) {
    if (e->observer_count == RN_ENGINE_MAX_OBSERVERS)
        abort(); /* a wiring error, not a runtime condition */
    e->observers[e->observer_count].fn = fn;
    e->observers[e->observer_count].arg = arg;
    e->observer_count++;
}

/* ---- content types and helpers ---- */

static size_t media_type_len(const char *s, size_t len) {
    size_t n = 0;
    while (n < len && s[n] != ';')
        n++;
    while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t'))
        n--;
    return n;
}

static void trim(const char **s, size_t *len) {
    while (*len && (**s == ' ' || **s == '\t')) {
        (*s)++;
        (*len)--;
    }
}

int rn_content_type_equal(const char *a, size_t alen, const char *b, size_t blen) {
    trim(&a, &alen);
    trim(&b, &blen);
    size_t an = media_type_len(a, alen), bn = media_type_len(b, blen);
    if (an != bn)
        return 0;
    char tmp[256];
    if (an >= sizeof tmp)
        return an == bn && strncasecmp(a, b, an) == 0;
    memcpy(tmp, b, bn);
    tmp[bn] = 0;
    return rn_ieq(a, an, tmp);
}

static int is_json_type(const char *ct, size_t len) {
    return rn_content_type_equal(ct, len, "application/json", 16);
}

static const char DEFAULT_TYPE[] = "application/octet-stream";

/* ---- stream objects ---- */

static rn_stream *stream_new(rn_engine *e, uint64_t id, const char *path, size_t path_len,
                             const char *ct, size_t ct_len) {
    rn_stream *s = rn_xcalloc(1, sizeof *s);
    s->id = id;
    s->path = rn_xstrndup(path, path_len);
    s->path_len = path_len;
    s->content_type = rn_xstrndup(ct, ct_len);
    s->content_type_len = ct_len;
    s->json = is_json_type(ct, ct_len);
    s->ttl_s = -1;
    s->expires_at_ms = -1;
    rn_map_put(&e->by_path, s->path, s->path_len, s);
    rn_map_put(&e->by_id, &s->id, sizeof s->id, s);
    if (id >= e->next_id)
        e->next_id = id + 1;
    return s;
}

static void producer_free(rn_producer *p) {
    free(p->id);
    free(p);
}

static void stream_free(rn_stream *s) {
    size_t i = 0;
    void *v;
    while (rn_map_next(&s->producers, &i, &v))
        producer_free(v);
    rn_map_free(&s->producers);
    free(s->path);
    free(s->content_type);
    free(s->last_seq);
    free(s->snapshot.content_type);
    free(s->snapshot.key);
    free(s);
}

struct rn_blobs *rn_engine_blobs(rn_engine *e, int cold) {
    return cold ? e->cold : e->snapshots;
}

/* Drops the stream's snapshot, deleting its body when asked. */
static void snapshot_drop(rn_engine *e, rn_stream *s, int delete_body) {
    if (!s->snapshot.present)
        return;
    if (delete_body)
        rn_blobs_delete(s->snapshot.cold ? e->cold : e->snapshots, s->snapshot.key);
    free(s->snapshot.content_type);
    free(s->snapshot.key);
    memset(&s->snapshot, 0, sizeof s->snapshot);
}

/* Removes a stream from the maps, tells observers (unless it is already
 * soft-deleted, when they were told then), frees it, releases its fork
 * source (cleaning that up too if it was soft-deleted and this was its last
 * fork, and so on up the chain), and re-runs the mutations that were waiting
 * on it (they now see no stream). */
static void stream_destroy(rn_engine *e, rn_stream *s, int remove_files) {
    rn_map_remove(&e->by_path, s->path, s->path_len);
    rn_map_remove(&e->by_id, &s->id, sizeof s->id);
    if (!s->pending_create && !s->soft_deleted)
        notify(e, s, RN_STREAM_REMOVED);
    if (remove_files) {
        rn_fault_point("delete-before-remove");
        rn_store_remove(e->store, s->id);
    }
    snapshot_drop(e, s, remove_files);
    if (remove_files)
        rn_fault_point("delete-after-remove");
    rn_op *q = s->queue_head;
    rn_stream *source = s->source;
    stream_free(s);
    if (source && --source->refcount == 0 && source->soft_deleted)
        stream_destroy(e, source, 1);
    while (q) {
        rn_op *next = q->next_queued;
        run_op(e, q);
        q = next;
    }
}

/* Deletes a stream: soft while forks still read it (its path then answers
 * 410 and blocks re-creation), else for good. */
static void stream_delete(rn_engine *e, rn_stream *s) {
    if (s->refcount > 0) {
        s->soft_deleted = 1;
        notify(e, s, RN_STREAM_REMOVED);
        return;
    }
    stream_destroy(e, s, 1);
}

/* Adds empty state for producer id (which must be absent). */
static rn_producer *producer_add(rn_stream *s, const char *id, size_t len) {
    rn_producer *p = rn_xcalloc(1, sizeof *p);
    p->id = rn_xstrndup(id, len);
    p->id_len = len;
    rn_map_put(&s->producers, p->id, p->id_len, p);
    return p;
}

static int stream_expired(const rn_stream *s, int64_t now) {
    if (s->soft_deleted)
        return 0;
    if (s->expires_at_ms >= 0 && now >= s->expires_at_ms)
        return 1;
    if (s->ttl_s >= 0 && now >= s->last_access_ms + s->ttl_s * 1000)
        return 1;
    return 0;
}

/* ---- buckets ---- */

/* Length of key's bucket part (before its first "/"), or 0 without one. */
static size_t bucket_part(const char *key, size_t len) {
    const char *slash = memchr(key, '/', len);
    return slash && slash > key ? (size_t)(slash - key) : 0;
}

/* Remembers the bucket of a created stream: buckets exist from their first
 * stream on (extensions §1.2), also after their streams are gone. */
static void note_bucket(rn_engine *e, const char *key, size_t len) {
    size_t n = bucket_part(key, len);
    if (n && !rn_map_get(&e->buckets, key, n)) {
        char *id = rn_xstrndup(key, n);
        rn_map_put(&e->buckets, id, n, id);
    }
}

int rn_engine_bucket_exists(rn_engine *e, const char *key, size_t len) {
    size_t n = bucket_part(key, len);
    return n && rn_map_get(&e->buckets, key, n) != NULL;
}

/* ---- apply: the state machine (shared by live commits and replay) ---- */

/* Makes a published snapshot the latest; the superseded body is deleted
 * (a repeat of the same key keeps it). */
static void apply_publish(rn_engine *e, rn_stream *s, const rn_cmd *c) {
    int same_key = s->snapshot.present && s->snapshot.cold == c->cold &&
                   strlen(s->snapshot.key) == c->object_key_len &&
                   memcmp(s->snapshot.key, c->object_key, c->object_key_len) == 0;
    snapshot_drop(e, s, !same_key);
    s->snapshot.present = 1;
    s->snapshot.offset = c->offset;
    memcpy(s->snapshot.digest, c->digest, 32);
    s->snapshot.size = c->snapshot_size;
    s->snapshot.content_type = rn_xstrndup(c->content_type, c->content_type_len);
    s->snapshot.content_type_len = c->content_type_len;
    s->snapshot.key = rn_xstrndup(c->object_key, c->object_key_len);
    s->snapshot.cold = c->cold;
}

/* Advances the retained offset and gives back the disk blocks below it
 * (only while no fork reads through them). */
static void apply_retain(rn_engine *e, rn_stream *s, uint64_t offset) {
    if (offset <= s->retained)
        return;
    rn_fault_point("retain-before-punch");
    if (s->refcount == 0 && offset > s->fork_offset) {
        uint64_t from = s->retained > s->fork_offset ? s->retained : s->fork_offset;
        rn_store_punch(e->store, s->id, from, offset - from);
    }
    rn_fault_point("retain-after-punch");
    s->retained = offset;
}

/* ---- producer state (ext §5) ---- */

static int epoch_above_floor(const rn_stream *s, uint64_t epoch) {
    return !s->has_floor || epoch > s->epoch_floor;
}

static void identity_from_cmd(rn_write_identity *id, const rn_cmd *c) {
    id->has_digest = c->has_digest;
    if (c->has_digest)
        memcpy(id->digest, c->producer_digest, 32);
    else
        memset(id->digest, 0, 32);
}

/* Records an applied producer write: a claim of a new epoch (seq 0) closes
 * the previous one (reported only when the server can vouch for it: state
 * above the floor, and not lost to a rewrite), then the write becomes the
 * newest, with its identity and range. */
static void apply_producer(rn_stream *s, const rn_cmd *c) {
    rn_producer *p = rn_map_get(&s->producers, c->producer_id, c->producer_id_len);
    int claim = !p || c->producer_epoch != p->epoch;
    if (!p) {
        p = producer_add(s, c->producer_id, c->producer_id_len);
    } else if (claim) {
        p->closes_epoch = p->above_floor && p->history != RN_EPOCH_LOST;
        p->closed_epoch = p->epoch;
        p->closed_seq = p->history == RN_EPOCH_REWRITTEN ? p->history_seq : p->last_seq;
    }
    if (claim) {
        p->above_floor = p->above_floor || epoch_above_floor(s, c->producer_epoch);
        p->epoch = c->producer_epoch;
        p->history = RN_EPOCH_OPEN;
        identity_from_cmd(&p->claim, c);
    }
    p->last_seq = c->producer_seq;
    p->last_ms = c->time_ms;
    identity_from_cmd(&p->newest, c);
    p->newest_start = c->offset;
    p->newest_end = c->offset + c->data_len;
    p->newest_closed = c->close;
}

/* Discards the state of the listed producers and raises the stream's epoch
 * floor to the highest epoch discarded. */
static void apply_expire_producers(rn_stream *s, const rn_cmd *c) {
    rn_reader r;
    rn_reader_init(&r, c->producer_ids, c->producer_ids_len);
    while (r.p < r.end) {
        size_t n;
        const char *id = (const char *)rn_read_lstr(&r, &n);
        rn_producer *p = id ? rn_map_get(&s->producers, id, n) : NULL;
        if (!p)
            continue;
        if (!s->has_floor || p->epoch > s->epoch_floor)
            s->epoch_floor = p->epoch;
        s->has_floor = 1;
        rn_map_remove(&s->producers, p->id, p->id_len);
        producer_free(p);
    }
}

/* A rewrite keeping the bytes below `keep` closes every producer's current
 * epoch (ext §2.4). Only the newest write's range is known, so the highest
 * surviving seq is last_seq when that write survived, last_seq - 1 when the
 * cut falls inside it (the earlier writes end before it), and unknown when
 * the cut is below it. Closure reports of older epochs are dropped: what
 * they said applied may be gone. */
static void close_epochs_by_rewrite(rn_stream *s, uint64_t keep) {
    size_t i = 0;
    void *v;
    while (rn_map_next(&s->producers, &i, &v)) {
        rn_producer *p = v;
        p->closes_epoch = 0;
        int known = p->newest_end <= keep || (keep >= p->newest_start && p->last_seq > 0);
        uint64_t seq = p->newest_end <= keep ? p->last_seq : p->last_seq - 1;
        if (!known || p->history == RN_EPOCH_LOST) {
            p->history = RN_EPOCH_LOST;
        } else if (p->history == RN_EPOCH_OPEN || seq < p->history_seq) {
            p->history = RN_EPOCH_REWRITTEN;
            p->history_seq = seq;
        }
    }
}

/* A history rewrite: a new incarnation that keeps the bytes below the kept
 * offset. The previous token is reported unless nothing was written since
 * the last rewrite (then the older report still holds, ext §2.4). */
static void apply_rewrite(rn_engine *e, rn_stream *s, const rn_cmd *c) {
    if (!s->has_previous || s->written_since_rewrite) {
        s->has_previous = 1;
        s->previous_incarnation = s->incarnation;
        s->inherited_offset = c->offset;
    } else if (c->offset < s->inherited_offset) {
        s->inherited_offset = c->offset; /* what survived both rewrites */
    }
    s->incarnation = incarnation_for(c->serial);
    if (c->serial >= e->next_id)
        e->next_id = c->serial + 1; /* never issue the serial again */
    s->written_since_rewrite = 0;
    close_epochs_by_rewrite(s, c->offset);
    if (c->offset < s->tail) {
        s->tail = c->offset;
        s->closed = 0;
        s->touched = 1;
        /* Drop index entries past the kept offset; an append the cut
         * splits becomes one that ends there. */
        uint64_t end = s->fork_offset;
        while (s->appends > 0 && rn_store_index_get(e->store, s->id, s->appends - 1, &end) == 0 &&
               end > s->tail)
            s->appends--;
        if (s->appends == 0)
            end = s->fork_offset;
        if (end < s->tail && rn_store_index_set(e->store, s->id, s->appends, s->tail) == 0)
            s->appends++;
        rn_store_truncate(e->store, s->id, s->tail, s->appends);
    }
    if (s->snapshot.present && s->snapshot.offset > s->tail)
        snapshot_drop(e, s, 1);
    if (s->retained > s->tail)
        s->retained = s->tail;
}

/* Records a command's data: at replay writes it at c->offset and records
 * the append in the index (live, the log's worker did that after the sync:
 * write_stream_files); then advances the tail. */
static int store_data(rn_engine *e, rn_stream *s, const rn_cmd *c, int replay) {
    if (!c->data_len)
        return 0;
    if (replay) {
        rn_fault_point("apply-before-store");
        int rc = rn_store_append(e->store, s->id, c->data, c->data_len, c->offset, s->appends);
        if (rc < 0)
            return rc;
    }
    s->appends++;
    s->tail = c->offset + c->data_len;
    return 0;
}

/* Applies a durable command to the state. `replay` says it comes from
 * recovery, which also writes the stream files (see store_data()). */
static int apply(rn_engine *e, const rn_cmd *c, rn_stream *pending, int replay) {
    switch (c->type) {
    case RN_CMD_CREATE: {
        rn_stream *s = pending;
        if (!s) {
            rn_stream *old = rn_map_get(&e->by_path, c->path, c->path_len);
            if (old)
                stream_destroy(e, old, 1);
            s = stream_new(e, c->stream_id, c->path, c->path_len, c->content_type,
                           c->content_type_len);
        }
        if (c->source_id) {
            rn_stream *src = rn_map_get(&e->by_id, &c->source_id, sizeof c->source_id);
            if (!src)
                return -EINVAL;
            s->source = src;
            s->fork_offset = c->offset;
            s->retained = src->retained < c->offset ? src->retained : c->offset;
            s->fork_depth = src->fork_depth + 1;
            src->refcount++;
        }
        s->pending_create = 0;
        note_bucket(e, s->path, s->path_len);
        s->incarnation = c->incarnation;
        s->ttl_s = c->ttl_s;
        s->expires_at_ms = c->expires_at_ms;
        s->created_ms = c->time_ms;
        s->last_access_ms = c->time_ms;
        s->closed = c->close;
        s->touched = 1;
        s->tail = c->offset;
        return store_data(e, s, c, replay);
    }
    case RN_CMD_APPEND: {
        rn_stream *s = rn_map_get(&e->by_id, &c->stream_id, sizeof c->stream_id);
        if (!s)
            return -ENOENT;
        int rc = store_data(e, s, c, replay);
        if (rc < 0)
            return rc;
        s->touched = 1;
        s->written_since_rewrite = 1;
        if (c->has_producer)
            apply_producer(s, c);
        if (c->has_seq) {
            free(s->last_seq);
            s->last_seq = rn_xstrndup(c->seq, c->seq_len);
            s->last_seq_len = c->seq_len;
        }
        if (c->close)
            s->closed = 1;
        return 0;
    }
    case RN_CMD_DELETE: {
        rn_stream *s = rn_map_get(&e->by_id, &c->stream_id, sizeof c->stream_id);
        if (s)
            stream_delete(e, s);
        return 0;
    }
    case RN_CMD_PUBLISH:
    case RN_CMD_RETAIN:
    case RN_CMD_REWRITE:
    case RN_CMD_EXPIRE_PRODUCERS: {
        rn_stream *s = rn_map_get(&e->by_id, &c->stream_id, sizeof c->stream_id);
        if (!s)
            return -ENOENT;
        if (c->type == RN_CMD_PUBLISH)
            apply_publish(e, s, c);
        else if (c->type == RN_CMD_RETAIN)
            apply_retain(e, s, c->offset);
        else if (c->type == RN_CMD_REWRITE)
            apply_rewrite(e, s, c);
        else
            apply_expire_producers(s, c);
        return 0;
    }
    }
    return -EINVAL;
}

/* ---- reading through fork chains ---- */

/* Copies the stream's bytes [off, off+len) into out, taking positions below
 * a fork's fork_offset from its source chain. The range must lie below the
 * tail. Returns 0 or -errno. */
static int read_range(rn_engine *e, const rn_stream *s, uint64_t off, size_t len, uint8_t *out) {
    while (len > 0 && off < s->fork_offset) {
        uint64_t inherited = s->fork_offset - off;
        size_t n = inherited < len ? (size_t)inherited : len;
        int rc = read_range(e, s->source, off, n, out);
        if (rc < 0)
            return rc;
        off += n;
        out += n;
        len -= n;
    }
    if (len == 0)
        return 0;
    ssize_t got = rn_store_read(e->store, s->id, out, len, off);
    if (got < 0)
        return (int)got;
    return (size_t)got == len ? 0 : -EIO;
}

/* Finds the append holding position x (< tail) as seen by s: [start, end).
 * An inherited append is cut at the fork offset. Returns 0 or -errno. */
static int find_append(rn_engine *e, const rn_stream *s, uint64_t x, uint64_t *start,
                       uint64_t *end) {
    if (x < s->fork_offset) {
        int rc = find_append(e, s->source, x, start, end);
        if (rc == 0 && *end > s->fork_offset)
            *end = s->fork_offset;
        return rc;
    }
    uint64_t lo = 0, hi = s->appends, v;
    while (lo < hi) { /* first entry whose end is past x */
        uint64_t mid = lo + (hi - lo) / 2;
        int rc = rn_store_index_get(e->store, s->id, mid, &v);
        if (rc < 0)
            return rc;
        if (v > x)
            hi = mid;
        else
            lo = mid + 1;
    }
    if (lo == s->appends)
        return -ERANGE;
    int rc = rn_store_index_get(e->store, s->id, lo, end);
    if (rc == 0 && lo > 0)
        rc = rn_store_index_get(e->store, s->id, lo - 1, start);
    else if (rc == 0)
        *start = s->fork_offset;
    return rc;
}

/* ---- the mutation pipeline ---- */

/* Sets the op's outcome: result, stream and the stream's state. */
static void set_outcome(rn_op *op, rn_result result, rn_stream *s) {
    op->result = result;
    op->stream = s;
    if (s) {
        op->next_offset = s->tail;
        op->stream_closed = s->closed;
    }
}

static void finish(rn_op *op, rn_result result, rn_stream *s) {
    set_outcome(op, result, s);
    op->done(op);
}

/* ---- producer rules (ext §5.3, §5.4) ---- */

#define APPLIES (-1) /* producer_rules(): the write would apply */

/* How long a producer of a stream that holds producer_cap of them must
 * have been idle before one more producer may displace it. */
static uint64_t crowded_ttl(const rn_engine *e) {
    uint64_t ttl = e->cfg.producer_ttl_ms;
    return ttl < PRODUCER_CROWDED_TTL_MS ? ttl : PRODUCER_CROWDED_TTL_MS;
}

static int idle_for(const rn_producer *p, int64_t now, uint64_t ms) {
    return now - p->last_ms >= (int64_t)ms;
}

/* The closure a claim reported, for its answer and its repeats. */
static void report_closure(rn_op *op, const rn_producer *p) {
    op->closes_epoch = p->closes_epoch;
    op->closed_epoch = p->closed_epoch;
    op->closed_seq = p->closed_seq;
}

/* Fills the answer of an applied producer write: its receipt, the epoch's
 * highest seq and, for a claim, the closure it reported. */
static void answer_applied(rn_op *op, const rn_producer *p) {
    op->ack_epoch = p->epoch;
    op->ack_seq = p->last_seq;
    op->receipt = 1;
    op->receipt_start = p->newest_start;
    op->receipt_end = p->newest_end;
    op->receipt_closed = p->newest_closed;
    if (op->producer_seq == 0)
        report_closure(op, p);
}

static int identity_matches(const rn_write_identity *held, const rn_op *op) {
    return held->has_digest == (op->has_producer_digest != 0) &&
           (!held->has_digest || memcmp(held->digest, op->producer_digest, 32) == 0);
}

/* A write (p->epoch, seq <= the epoch's highest surviving seq) repeats one
 * that applied. Where the server still holds that write's identity (the
 * newest write, or the claim) another identity is a key conflict; else the
 * answer is a repeat: the newest write's receipt, or one marked evicted. */
static int answer_repeat(rn_op *op, const rn_producer *p) {
    uint64_t seq = op->producer_seq;
    const rn_write_identity *held = seq == p->last_seq ? &p->newest : seq == 0 ? &p->claim : NULL;
    if (held && !identity_matches(held, op)) {
        op->current_epoch = p->epoch;
        return RN_ERR_KEY_CONFLICT;
    }
    int rewritten = p->history == RN_EPOCH_REWRITTEN;
    if (seq == p->last_seq && (!rewritten || p->history_seq == p->last_seq)) {
        answer_applied(op, p);
        return RN_OK_DUPLICATE;
    }
    op->ack_epoch = p->epoch;
    op->ack_seq = rewritten ? p->history_seq : p->last_seq;
    if (seq == 0)
        report_closure(op, p);
    return RN_OK_DUPLICATE;
}

/* The producer rules of ext §5.3 for an append with producer headers,
 * against the applied state of s, from the headers alone (the body is never
 * consulted). Returns APPLIES, or the answer (a repeat or a refusal) with
 * its fields set in op. Changes nothing. */
static int producer_rules(const rn_stream *s, rn_op *op) {
    const rn_producer *p = rn_map_get(&s->producers, op->producer_id, op->producer_id_len);
    uint64_t epoch = op->producer_epoch, seq = op->producer_seq;
    /* The floor binds writes that carry Stream-Incarnation (§5.4). */
    int floor_binds = op->has_incarnation && s->has_floor;
    int lifts = seq == 0 && p && epoch > p->epoch && epoch_above_floor(s, epoch);
    if (floor_binds && (p ? !p->above_floor && !lifts : epoch <= s->epoch_floor)) {
        op->current_epoch = s->epoch_floor;
        return RN_ERR_PRODUCER_EXPIRED;
    }
    if (!p) {
        if (seq == 0)
            return APPLIES;
        op->expected_seq = 0;
        return RN_ERR_SEQ_GAP;
    }
    op->current_epoch = p->epoch;
    if (epoch < p->epoch) {
        if (!p->closes_epoch || epoch != p->closed_epoch)
            return RN_ERR_STALE_EPOCH;
        report_closure(op, p);
        return RN_ERR_EPOCH_CLOSED;
    }
    if (epoch > p->epoch) {
        if (seq == 0)
            return APPLIES;
        op->expected_seq = 0;
        return RN_ERR_EPOCH_SEQ;
    }
    if (p->history == RN_EPOCH_LOST)
        return RN_ERR_STALE_EPOCH;
    if (p->history == RN_EPOCH_REWRITTEN && seq > p->history_seq) {
        op->closes_epoch = 1;
        op->closed_by_history = 1;
        op->closed_epoch = p->epoch;
        op->closed_seq = p->history_seq;
        return RN_ERR_EPOCH_CLOSED;
    }
    if (seq <= p->last_seq)
        return answer_repeat(op, p);
    if (seq == p->last_seq + 1)
        return APPLIES;
    op->expected_seq = p->last_seq + 1;
    return RN_ERR_SEQ_GAP;
}

/* The producer that a new one displaces from a stream holding producer_cap
 * of them: the least recently written one. */
static rn_producer *least_recent_producer(const rn_stream *s) {
    rn_producer *lru = NULL;
    size_t i = 0;
    void *v;
    while (rn_map_next(&s->producers, &i, &v)) {
        rn_producer *p = v;
        if (!lru || p->last_ms < lru->last_ms)
            lru = p;
    }
    return lru;
}

static void on_logged(rn_wal_entry *entry, int status);

/* The log's after_sync hook, on its worker thread: writes the command's
 * data and index entry through the files pinned at submission. */
static int write_stream_files(rn_wal_entry *entry) {
    rn_op *op = entry->arg;
    rn_fault_point("apply-before-store");
    return rn_store_write_pinned(&op->pin, op->cmd.data, op->cmd.data_len, op->cmd.offset,
                                 op->index_entry);
}

static void drain_queue(rn_engine *e, uint64_t id);

/* Answers an op whose command could not be logged (no file space, or the
 * stream's files could not be made) and lets the stream's queue go on; a
 * pending create's stream goes away (re-running its queue). */
static void refuse_unlogged(rn_engine *e, rn_op *op, rn_stream *s, int rc) {
    uint64_t id = s->id;
    int pending = s->pending_create; /* s is freed below when pending */
    int full = rc == -ENOSPC || rc == -EDQUOT;
    rn_log_throttled(&e->store_refusals, 1000, RN_LOG_ERROR, "store",
                     "a write to stream %s was refused before it was logged: its stream file "
                     "could not be %s: %s (errno %d)",
                     s->path, full ? "given disk space" : "prepared", strerror(-rc), -rc);
    s->busy = 0;
    if (pending)
        stream_destroy(e, s, 1);
    finish(op, full ? RN_ERR_DISK_FULL : RN_ERR_UNAVAILABLE, pending ? NULL : s);
    if (!pending)
        drain_queue(e, id);
}

/* Reserves file space for op->cmd's data, pins the stream's files and
 * submits the command to the log. The stream is busy until on_logged()
 * runs. */
static void submit_command(rn_engine *e, rn_op *op, rn_stream *s) {
    rn_cmd *c = &op->cmd;
    op->wal.after_sync = NULL;
    op->pin = (rn_store_pin){.data_fd = -1, .index_fd = -1};
    int refused = rn_fault_fail("log-reserve");
    if (refused) {
        refuse_unlogged(e, op, s, refused);
        return;
    }
    if (c->data_len) {
        int rc = rn_store_pin_append(e->store, s->id, c->offset, c->data_len, s->appends, &op->pin);
        if (rc < 0) {
            refuse_unlogged(e, op, s, rc);
            return;
        }
        op->index_entry = s->appends;
        op->wal.after_sync = write_stream_files;
    }
    s->busy = 1;
    op->wal.piece[0] = (struct iovec){op->head.data, op->head.len};
    op->wal.pieces = 1;
    if (c->data_len)
        op->wal.piece[op->wal.pieces++] = (struct iovec){(void *)c->data, c->data_len};
    op->wal.done = on_logged;
    op->wal.arg = op;
    e->ops_in_log++;
    rn_wal_submit(e->wal, &op->wal);
}

/* Creating a stream's two files costs the file system about a millisecond
 * (inodes, directory entries); on the loop thread a burst of first appends
 * stalled every request (500 new streams: ~0.9 s). So the first data of a
 * stream in this process goes through a worker that makes sure its files
 * exist, and the command goes on from files_ready(). */
static void ensure_files_work(uv_work_t *req) {
    rn_op *op = req->data;
    op->files_status = rn_store_ensure_files(op->engine->store, op->stream_id);
}

static void files_ready(uv_work_t *req, int status) {
    rn_op *op = req->data;
    rn_engine *e = op->engine;
    e->ops_preparing--;
    rn_stream *s = rn_map_get(&e->by_id, &op->stream_id, sizeof op->stream_id);
    int rc = status < 0 ? status : op->files_status;
    if (rc < 0) {
        refuse_unlogged(e, op, s, rc);
        return;
    }
    s->has_files = 1;
    submit_command(e, op, s);
}

/* Encodes the command and submits it to the log (after making the
 * stream's files on a worker when this is its first data). The stream is
 * busy until on_logged() runs. A fork's create is never delayed: it was
 * validated against its source, which is not busy and could meanwhile be
 * deleted or rewritten by commands logged ahead of it. */
static void log_command(rn_engine *e, rn_op *op, rn_stream *s, const rn_cmd *cmd) {
    op->cmd = *cmd;
    rn_cmd *c = &op->cmd;
    c->time_ms = rn_now_ms();
    op->head.len = 0;
    rn_cmd_encode_head(c, &op->head);
    op->stream_id = s->id;
    op->engine = e;
    if (c->data_len && !s->has_files && !c->source_id) {
        s->busy = 1; /* later mutations queue meanwhile */
        e->ops_preparing++;
        op->files_work.data = op;
        uv_queue_work(e->loop, &op->files_work, ensure_files_work, files_ready);
        return;
    }
    submit_command(e, op, s);
}

/* Re-runs waiting mutations of stream `id` until one is in the log again.
 * The stream is looked up each time: a queued delete may remove it, and
 * then stream_destroy() re-runs the rest. */
static void drain_queue(rn_engine *e, uint64_t id) {
    rn_stream *s;
    while ((s = rn_map_get(&e->by_id, &id, sizeof id)) && s->queue_head && !s->busy) {
        rn_op *q = s->queue_head;
        s->queue_head = q->next_queued;
        if (!s->queue_head)
            s->queue_tail = NULL;
        run_op(e, q);
    }
}

static void on_logged(rn_wal_entry *entry, int status) {
    rn_op *op = entry->arg;
    rn_engine *e = op->engine;
    e->ops_in_log--;
    rn_store_unpin(&op->pin);
    rn_stream *s = rn_map_get(&e->by_id, &op->stream_id, sizeof op->stream_id);
    const rn_cmd *c = &op->cmd;
    if (status != 0) {
        uint64_t id = s->id;
        int pending = s->pending_create;
        s->busy = 0;
        /* Nothing written (no room for the next segment): a refusal. */
        finish(op, status == RN_WAL_NOT_WRITTEN_FULL ? RN_ERR_DISK_FULL : RN_ERR_UNAVAILABLE,
               pending ? NULL : s);
        if (pending)
            stream_destroy(e, s, 1);
        else
            drain_queue(e, id);
        return;
    }
    if (c->type == RN_CMD_DELETE) {
        s->busy = 0;
        rn_cmd del = *c;
        uint64_t id = s->id;
        /* Apply before answering: done() may submit the next request (the
         * HTTP layer parses a pipelined one while answering), which must see
         * the stream deleted, not mutate one about to be freed. */
        apply(e, &del, NULL, 0);
        op->result = RN_OK_DELETED;
        op->stream = NULL;
        op->done(op);
        drain_queue(e, id); /* a soft-deleted stream stays; its waiters now see 410 */
        return;
    }
    int rc = entry->after_sync_status;
    if (rc == 0)
        rc = apply(e, c, s->pending_create ? s : NULL, 0);
    s->busy = 0;
    if (rc < 0) {
        /* Durable in the log but the stream file could not be written: the
         * log still holds the data and recovery rewrites it. Serving reads
         * from a short file would be wrong, so stop here. */
        rn_log(RN_LOG_ERROR, "fatal", "stream file write failed after log sync: %s", strerror(-rc));
        abort();
    }
    uint64_t id = s->id;
    static const rn_result applied[] = {
        [RN_OP_CREATE] = RN_OK_CREATED,    [RN_OP_APPEND] = RN_OK_APPENDED,
        [RN_OP_PUBLISH] = RN_OK_PUBLISHED, [RN_OP_RETAIN] = RN_OK_RETAINED,
        [RN_OP_REWRITE] = RN_OK_REWRITTEN, [RN_OP_EXPIRE_PRODUCERS] = RN_OK_PRODUCERS_EXPIRED,
    };
    /* done() may free the op (and the command in it): read what follows
     * from it first. Discarding producer state changes nothing readers see. */
    rn_stream_event ev = c->type == RN_CMD_CREATE    ? RN_STREAM_CREATED
                         : c->type == RN_CMD_REWRITE ? RN_STREAM_REWRITTEN
                                                     : RN_STREAM_CHANGED;
    int quiet = c->type == RN_CMD_EXPIRE_PRODUCERS;
    if (c->type == RN_CMD_APPEND && c->has_producer)
        answer_applied(op, rn_map_get(&s->producers, c->producer_id, c->producer_id_len));
    finish(op, applied[op->kind], s);
    s = rn_map_get(&e->by_id, &id, sizeof id);
    if (s && !quiet)
        notify(e, s, ev);
    drain_queue(e, id);
}

static void enqueue(rn_stream *s, rn_op *op) {
    op->next_queued = NULL;
    op->stream_id = s->id;
    if (s->queue_tail)
        s->queue_tail->next_queued = op;
    else
        s->queue_head = op;
    s->queue_tail = op;
}

/* Frees an internal mutation: an expiry of a stream or of producer state. */
static void expire_done(rn_op *op) {
    rn_buf_free(&op->head);
    rn_buf_free(&op->stored);
    free(op);
}

/* Starts the deletion of an expired stream (an internal mutation). */
static void start_expiry(rn_engine *e, rn_stream *s) {
    if (s->busy)
        return;
    rn_op *op = rn_xcalloc(1, sizeof *op);
    op->kind = RN_OP_DELETE;
    op->done = expire_done;
    rn_cmd c = {.type = RN_CMD_DELETE, .stream_id = s->id};
    log_command(e, op, s, &c);
}

/* Starts discarding the state of n producers of s (an internal mutation;
 * s must not be busy). The ids travel in the op's `stored` buffer. */
static void start_producer_expiry(rn_engine *e, rn_stream *s, rn_producer *const *victims,
                                  size_t n) {
    rn_op *op = rn_xcalloc(1, sizeof *op);
    op->kind = RN_OP_EXPIRE_PRODUCERS;
    op->done = expire_done;
    for (size_t k = 0; k < n; k++)
        rn_buf_append_lstr(&op->stored, victims[k]->id, victims[k]->id_len);
    rn_cmd c = {.type = RN_CMD_EXPIRE_PRODUCERS,
                .stream_id = s->id,
                .producer_ids = op->stored.data,
                .producer_ids_len = op->stored.len};
    log_command(e, op, s, &c);
}

/* Converts a body to stored form for the stream's content type. Returns 0
 * and sets *data and *len, or a result code to refuse with. */
static int prepare_body(rn_op *op, int json, int allow_empty_array, const uint8_t **data,
                        size_t *len) {
    if (!json || op->body_len == 0) {
        *data = op->body;
        *len = op->body_len;
        return 0;
    }
    op->stored.len = 0;
    rn_buf_reserve(&op->stored, op->body_len + 1);
    size_t out_len = 0, count = 0;
    rn_json_status st =
        rn_json_to_messages(op->body, op->body_len, op->stored.data, &out_len, &count, NULL);
    if (st == RN_JSON_EMPTY_ARRAY && allow_empty_array) {
        *data = NULL;
        *len = 0;
        return 0;
    }
    if (st == RN_JSON_EMPTY_ARRAY)
        return RN_ERR_JSON_EMPTY_ARRAY;
    if (st == RN_JSON_TOO_DEEP)
        return RN_ERR_JSON_TOO_DEEP;
    if (st != RN_JSON_OK)
        return RN_ERR_JSON_INVALID;
    op->stored.len = out_len;
    *data = op->stored.data;
    *len = out_len;
    return 0;
}

/* Where a fork of src asked for by op starts: the fork offset (default: the
 * source tail) plus the sub-offset. Returns 0, or the result to refuse with. */
static int resolve_fork_offset(rn_engine *e, rn_op *op, rn_stream *src, uint64_t *pos) {
    uint64_t base = op->has_fork_offset ? op->fork_offset : src->tail;
    int valid = base <= src->tail ? rn_engine_offset_valid(e, src, base) : 0;
    if (valid <= 0)
        return valid < 0 ? RN_ERR_BOUNDARY_UNVERIFIED : RN_ERR_FORK_OFFSET;
    uint64_t n = op->fork_sub_offset;
    if (n == 0) {
        *pos = base;
        return 0;
    }
    uint64_t start, end;
    if (base >= src->tail)
        return RN_ERR_SUB_OFFSET;
    if (find_append(e, src, base, &start, &end) != 0)
        return RN_ERR_BOUNDARY_UNVERIFIED; /* the append index was unreadable */
    if (!src->json) {
        if (n > end - base)
            return RN_ERR_SUB_OFFSET;
        *pos = base + n;
        return 0;
    }
    /* JSON: n whole messages of the append, counted from base. */
    uint8_t *text = rn_xmalloc((size_t)(end - base));
    int rc = rn_fault_fail("boundary-read");
    if (rc == 0)
        rc = read_range(e, src, base, (size_t)(end - base), text);
    uint64_t p = base;
    for (size_t i = 0; rc == 0 && n > 0 && i < end - base; i++) {
        if (text[i] == '\n') {
            n--;
            p = base + i + 1;
        }
    }
    free(text);
    if (rc != 0 || n > 0)
        return rc != 0 ? RN_ERR_BOUNDARY_UNVERIFIED : RN_ERR_SUB_OFFSET;
    *pos = p;
    return 0;
}

/* The incarnation token for serial n (a stream id, never reused): 2^52 plus
 * a fixed 52-bit Feistel permutation of n. Distinct serials give distinct
 * tokens, so a token never repeats within a data directory, and tokens do not
 * reveal how many streams were created. */
static uint64_t incarnation_for(uint64_t n) {
    uint64_t left = (n >> 26) & 0x3ffffff, right = n & 0x3ffffff;
    static const uint64_t keys[4] = {0x9e3779b9, 0x7f4a7c15, 0x94d049bb, 0xbf58476d};
    for (int i = 0; i < 4; i++) {
        uint64_t f = ((right ^ keys[i]) * 0x2545f4914f6cdd1dull) >> 38;
        uint64_t next = left ^ (f & 0x3ffffff);
        left = right;
        right = next;
    }
    return RN_INCARNATION_MIN + ((left << 26) | right);
}

static void run_create(rn_engine *e, rn_op *op, rn_stream *s) {
    if (s && s->soft_deleted) {
        finish(op, RN_ERR_CONFIG_MISMATCH, NULL);
        return;
    }
    const char *ct = op->content_type ? op->content_type : DEFAULT_TYPE;
    size_t ct_len = op->content_type ? op->content_type_len : sizeof DEFAULT_TYPE - 1;
    int64_t ttl_s = op->ttl_s, expires_at_ms = op->expires_at_ms;
    rn_stream *src = NULL;
    uint64_t fork_at = 0;
    if (op->fork_source) {
        src = rn_map_get(&e->by_path, op->fork_source, op->fork_source_len);
        if (src && src->busy) {
            enqueue(src, op); /* evaluate against the source's next state */
            return;
        }
        if (!src || src->pending_create || stream_expired(src, rn_now_ms())) {
            finish(op, RN_ERR_SOURCE_NOT_FOUND, NULL);
            return;
        }
        if (src->soft_deleted) {
            finish(op, RN_ERR_SOURCE_GONE, NULL);
            return;
        }
        if (src->fork_depth + 1 > RN_MAX_FORK_DEPTH) {
            finish(op, RN_ERR_FORK_DEPTH, NULL);
            return;
        }
        if (op->content_type &&
            !rn_content_type_equal(src->content_type, src->content_type_len, ct, ct_len)) {
            op->conflicting_type = src->content_type;
            op->conflicting_type_len = src->content_type_len;
            finish(op, RN_ERR_CONTENT_TYPE, NULL);
            return;
        }
        int refuse = resolve_fork_offset(e, op, src, &fork_at);
        if (refuse) {
            finish(op, (rn_result)refuse, NULL);
            return;
        }
        if (!op->content_type) {
            ct = src->content_type;
            ct_len = src->content_type_len;
        }
        if (ttl_s < 0 && expires_at_ms < 0) { /* inherit the source's expiry */
            ttl_s = src->ttl_s;
            expires_at_ms = src->expires_at_ms;
        }
    }
    if (s) {
        int same = rn_content_type_equal(s->content_type, s->content_type_len, ct, ct_len) &&
                   s->ttl_s == ttl_s && s->expires_at_ms == expires_at_ms &&
                   s->closed == (op->close != 0) && s->source == src && s->fork_offset == fork_at;
        finish(op, same ? RN_OK_EXISTS : RN_ERR_CONFIG_MISMATCH, s);
        return;
    }
    const uint8_t *data;
    size_t len;
    int refuse = prepare_body(op, is_json_type(ct, ct_len), 1, &data, &len);
    if (refuse) {
        finish(op, (rn_result)refuse, NULL);
        return;
    }
    s = stream_new(e, e->next_id, op->path, op->path_len, ct, ct_len);
    s->pending_create = 1;
    rn_cmd c = {.type = RN_CMD_CREATE,
                .stream_id = s->id,
                .path = s->path,
                .path_len = s->path_len,
                .incarnation = incarnation_for(s->id),
                .content_type = s->content_type,
                .content_type_len = s->content_type_len,
                .ttl_s = ttl_s,
                .expires_at_ms = expires_at_ms,
                .source_id = src ? src->id : 0,
                .offset = fork_at,
                .close = (uint8_t)(op->close != 0),
                .data = data,
                .data_len = len};
    log_command(e, op, s, &c);
}

/* Admits a producer the stream holds no state for. A stream holding
 * producer_cap producers displaces the least recently written one once it
 * has been idle for crowded_ttl(): returns 1 after queueing op behind that
 * discard. Returns 0 to go on, or 2 after refusing with PRODUCER_LIMIT. */
static int admit_producer(rn_engine *e, rn_op *op, rn_stream *s, int64_t now) {
    if (s->producers.count < e->cfg.producer_cap ||
        rn_map_get(&s->producers, op->producer_id, op->producer_id_len))
        return 0;
    rn_producer *lru = least_recent_producer(s);
    if (idle_for(lru, now, crowded_ttl(e))) {
        enqueue(s, op);
        start_producer_expiry(e, s, &lru, 1);
        return 1;
    }
    int64_t wait_ms = lru->last_ms + (int64_t)crowded_ttl(e) - now;
    op->retry_after_s = (uint64_t)(wait_ms + 999) / 1000;
    finish(op, RN_ERR_PRODUCER_LIMIT, s);
    return 2;
}

/* An append or close, in the order of ext §5.3 after the stream checks of
 * run_op(): idle producer state is discarded first (a logged step the op
 * waits for), then the producer rules, closure, content (type, emptiness,
 * Stream-Seq, JSON text, Producer-Digest last), and admission of a new
 * producer; a write that passes is logged. */
static void run_append(rn_engine *e, rn_op *op, rn_stream *s) {
    int64_t now = rn_now_ms();
    if (op->has_producer) {
        rn_producer *p = rn_map_get(&s->producers, op->producer_id, op->producer_id_len);
        if (p && idle_for(p, now, e->cfg.producer_ttl_ms)) {
            enqueue(s, op);
            start_producer_expiry(e, s, &p, 1);
            return;
        }
        int answer = producer_rules(s, op);
        if (answer != APPLIES) {
            finish(op, (rn_result)answer, s);
            return;
        }
    }
    if (s->closed) {
        /* Close-only without producer headers is idempotent (PROTOCOL §5.2). */
        int repeat = !op->has_producer && !op->body_len && op->close;
        finish(op, repeat ? RN_OK_DUPLICATE : RN_ERR_CLOSED, s);
        return;
    }
    if (!op->body_len && !op->close) {
        finish(op, RN_ERR_EMPTY_BODY, s);
        return;
    }
    if (op->body_len && !op->content_type) {
        finish(op, RN_ERR_MISSING_CONTENT_TYPE, s);
        return;
    }
    if (op->body_len && !rn_content_type_equal(s->content_type, s->content_type_len,
                                               op->content_type, op->content_type_len)) {
        op->conflicting_type = s->content_type;
        op->conflicting_type_len = s->content_type_len;
        finish(op, RN_ERR_CONTENT_TYPE, s);
        return;
    }
    if (op->has_seq && s->last_seq) {
        size_t n = op->seq_len < s->last_seq_len ? op->seq_len : s->last_seq_len;
        int cmp = memcmp(op->seq, s->last_seq, n);
        if (cmp < 0 || (cmp == 0 && op->seq_len <= s->last_seq_len)) {
            finish(op, RN_ERR_SEQ_REGRESSION, s);
            return;
        }
    }
    const uint8_t *data;
    size_t len;
    int refuse = prepare_body(op, s->json, 0, &data, &len);
    if (refuse) {
        finish(op, (rn_result)refuse, s);
        return;
    }
    if (op->has_producer_digest) {
        uint8_t digest[32];
        rn_blake3_hash(op->body, op->body_len, digest);
        if (memcmp(digest, op->producer_digest, 32) != 0) {
            finish(op, RN_ERR_DIGEST_MISMATCH, s);
            return;
        }
    }
    if (op->has_producer && admit_producer(e, op, s, now))
        return;
    rn_cmd c = {.type = RN_CMD_APPEND,
                .stream_id = s->id,
                .offset = s->tail,
                .close = (uint8_t)(op->close != 0),
                .data = data,
                .data_len = len,
                .has_producer = (uint8_t)op->has_producer,
                .producer_id = op->producer_id,
                .producer_id_len = op->producer_id_len,
                .producer_epoch = op->producer_epoch,
                .producer_seq = op->producer_seq,
                .has_digest = (uint8_t)(op->has_producer && op->has_producer_digest),
                .producer_digest = op->producer_digest,
                .has_seq = (uint8_t)op->has_seq,
                .seq = op->seq,
                .seq_len = op->seq_len};
    log_command(e, op, s, &c);
}

/* Snapshot publish (ext §2.2), in the section's order: retention (410),
 * tail (409 naming nothing), JSON boundary (400), latest snapshot (a repeat
 * succeeds, anything else answers 409 naming the latest). */
static void run_publish(rn_engine *e, rn_op *op, rn_stream *s) {
    uint64_t off = op->target_offset;
    if (off < s->retained) {
        finish(op, RN_ERR_BELOW_RETAINED, s);
        return;
    }
    if (off > s->tail) {
        finish(op, RN_ERR_OFFSET_BEYOND_TAIL, s);
        return;
    }
    int valid = rn_engine_offset_valid(e, s, off);
    if (valid <= 0) {
        finish(op, valid < 0 ? RN_ERR_BOUNDARY_UNVERIFIED : RN_ERR_NOT_BOUNDARY, s);
        return;
    }
    if (s->snapshot.present && off <= s->snapshot.offset) {
        int repeat = off == s->snapshot.offset && memcmp(op->digest, s->snapshot.digest, 32) == 0;
        op->repeat = repeat;
        finish(op, repeat ? RN_OK_PUBLISHED : RN_ERR_SNAPSHOT_CONFLICT, s);
        return;
    }
    rn_cmd c = {.type = RN_CMD_PUBLISH,
                .stream_id = s->id,
                .offset = off,
                .content_type = op->content_type,
                .content_type_len = op->content_type_len,
                .digest = op->digest,
                .snapshot_size = op->blob_size,
                .cold = (uint8_t)op->blob_cold,
                .object_key = op->blob_key,
                .object_key_len = op->blob_key_len};
    log_command(e, op, s, &c);
}

/* Retention (ext §2.2): aligned, not past the latest snapshot, forward
 * only (a boundary at or below the current one changes nothing). */
static void run_retain(rn_engine *e, rn_op *op, rn_stream *s) {
    uint64_t off = op->target_offset;
    if (off <= s->retained) {
        finish(op, RN_OK_RETAINED, s);
        return;
    }
    int valid = off <= s->tail ? rn_engine_offset_valid(e, s, off) : 0;
    if (valid <= 0) {
        finish(op, valid < 0 ? RN_ERR_BOUNDARY_UNVERIFIED : RN_ERR_NOT_BOUNDARY, s);
        return;
    }
    if (!s->snapshot.present || off > s->snapshot.offset) {
        finish(op, RN_ERR_RETENTION_PAST_SNAPSHOT, s);
        return;
    }
    rn_cmd c = {.type = RN_CMD_RETAIN, .stream_id = s->id, .offset = off};
    log_command(e, op, s, &c);
}

/* History rewrite to target_offset (an operator action). Refused for a
 * stream that forks read through, whose bytes must not change under them. */
static void run_rewrite(rn_engine *e, rn_op *op, rn_stream *s) {
    if (op->target_offset > s->tail || s->refcount > 0) {
        finish(op, RN_ERR_CONFIG_MISMATCH, s);
        return;
    }
    rn_cmd c = {.type = RN_CMD_REWRITE,
                .stream_id = s->id,
                .serial = e->next_id++,
                .offset = op->target_offset};
    log_command(e, op, s, &c);
}

static void run_op(rn_engine *e, rn_op *op) {
    rn_stream *s = rn_map_get(&e->by_path, op->path, op->path_len);
    if (s && s->busy) {
        enqueue(s, op);
        return;
    }
    if (s && s->soft_deleted && op->kind != RN_OP_CREATE) {
        finish(op, RN_ERR_GONE, NULL);
        return;
    }
    if (op->has_incarnation && !(s && stream_expired(s, rn_now_ms()))) {
        /* RFC 9110 order: a missing stream stays 404, except that a create
         * with the precondition creates nothing and answers 412. */
        rn_stream *live = s && !s->soft_deleted ? s : NULL;
        if ((live && live->incarnation != op->incarnation) || (!live && op->kind == RN_OP_CREATE)) {
            finish(op, RN_ERR_INCARNATION, live);
            return;
        }
    }
    if (s && stream_expired(s, rn_now_ms())) {
        enqueue(s, op);
        start_expiry(e, s);
        return;
    }
    if (op->kind == RN_OP_CREATE) {
        run_create(e, op, s);
        return;
    }
    if (!s) {
        finish(op, RN_ERR_NOT_FOUND, NULL);
        return;
    }
    rn_engine_touch(e, s);
    switch (op->kind) {
    case RN_OP_DELETE: {
        rn_cmd c = {.type = RN_CMD_DELETE, .stream_id = s->id};
        log_command(e, op, s, &c);
        return;
    }
    case RN_OP_PUBLISH:
        run_publish(e, op, s);
        return;
    case RN_OP_RETAIN:
        run_retain(e, op, s);
        return;
    case RN_OP_REWRITE:
        run_rewrite(e, op, s);
        return;
    default:
        run_append(e, op, s);
    }
}

void rn_engine_submit(rn_engine *e, rn_op *op) {
    op->engine = e;
    op->stream = NULL;
    run_op(e, op);
}

int rn_engine_answer_early(rn_engine *e, rn_op *op) {
    if (op->kind != RN_OP_APPEND || !op->has_producer || !op->has_incarnation)
        return 0;
    int64_t now = rn_now_ms();
    rn_stream *s = rn_map_get(&e->by_path, op->path, op->path_len);
    if (!s || s->busy || s->pending_create || s->soft_deleted || stream_expired(s, now) ||
        s->incarnation != op->incarnation)
        return 0;
    const rn_producer *p = rn_map_get(&s->producers, op->producer_id, op->producer_id_len);
    if (p && idle_for(p, now, e->cfg.producer_ttl_ms))
        return 0; /* its discard is a logged step that comes first */
    rn_op probe = *op;
    int answer = producer_rules(s, &probe);
    if (answer != RN_OK_DUPLICATE && answer != RN_ERR_KEY_CONFLICT)
        return 0;
    *op = probe;
    rn_engine_touch(e, s);
    set_outcome(op, (rn_result)answer, s);
    return 1;
}

/* ---- reads ---- */

rn_stream *rn_engine_find(rn_engine *e, const char *path, size_t len) {
    rn_stream *s = rn_map_get(&e->by_path, path, len);
    if (!s || s->pending_create || s->soft_deleted)
        return NULL;
    if (stream_expired(s, rn_now_ms())) {
        start_expiry(e, s);
        return NULL;
    }
    return s;
}

void rn_engine_foreach(rn_engine *e, void (*fn)(rn_stream *s, void *arg), void *arg) {
    int64_t now = rn_now_ms();
    size_t i = 0;
    void *v;
    while (rn_map_next(&e->by_path, &i, &v)) {
        rn_stream *s = v;
        if (!s->pending_create && !s->soft_deleted && !stream_expired(s, now))
            fn(s, arg);
    }
}

int rn_engine_is_gone(rn_engine *e, const char *path, size_t len) {
    rn_stream *s = rn_map_get(&e->by_path, path, len);
    return s && s->soft_deleted;
}

void rn_engine_touch(rn_engine *e, rn_stream *s) {
    (void)e;
    s->last_access_ms = rn_now_ms();
}

int rn_engine_offset_valid(rn_engine *e, rn_stream *s, uint64_t offset) {
    if (offset > s->tail)
        return 0;
    if (!s->json || offset == 0 || offset == s->tail || offset == s->retained)
        return 1; /* the retained offset: retention cleared the byte before it */
    uint8_t c;
    int rc = rn_fault_fail("boundary-read");
    if (rc == 0)
        rc = read_range(e, s, offset - 1, 1, &c);
    return rc < 0 ? rc : c == '\n';
}

long rn_engine_read(rn_engine *e, rn_stream *s, uint64_t offset, size_t max, int whole_messages,
                    rn_buf *out) {
    if (offset >= s->tail)
        return 0;
    uint64_t avail = s->tail - offset;
    size_t want = avail < max ? (size_t)avail : max;
    size_t start = out->len;
    for (;;) {
        rn_buf_reserve(out, want);
        int rc = read_range(e, s, offset, want, out->data + start);
        if (rc < 0)
            return rc;
        out->len = start + want;
        if (!s->json || !whole_messages || (want == avail && want <= max))
            return (long)want;
        /* Within max: cut at the last message end. A first message longer
         * than max comes alone: the read grows until its end. */
        size_t cut = 0;
        if (want <= max) {
            cut = want;
            while (cut > 0 && out->data[start + cut - 1] != '\n')
                cut--;
        } else {
            const uint8_t *lf = memchr(out->data + start + max, '\n', want - max);
            cut = lf ? (size_t)(lf - (out->data + start)) + 1 : 0;
        }
        if (cut > 0 || want == avail) { /* stored messages end in LF: cut > 0 here */
            out->len = start + (cut ? cut : want);
            return (long)(cut ? cut : want);
        }
        want = want * 2 < avail ? want * 2 : (size_t)avail;
        out->len = start;
    }
}

/* Discards, with one logged command per stream, the state of producers
 * that wrote nothing for producer_ttl_ms (at most EXPIRE_LIST_MAX_BYTES of
 * ids per stream and sweep; the rest go in the next sweep). */
static void sweep_producers(rn_engine *e, int64_t now) {
    rn_producer **idle = NULL;
    size_t cap = 0, i = 0;
    void *v;
    while (rn_map_next(&e->by_path, &i, &v)) {
        rn_stream *s = v;
        if (s->pending_create || s->busy || s->soft_deleted || !s->producers.count)
            continue;
        size_t n = 0, bytes = 0, j = 0;
        void *pv;
        while (rn_map_next(&s->producers, &j, &pv) && bytes < EXPIRE_LIST_MAX_BYTES) {
            rn_producer *p = pv;
            if (!idle_for(p, now, e->cfg.producer_ttl_ms))
                continue;
            if (n == cap)
                idle = rn_xrealloc(idle, (cap = cap ? cap * 2 : 16) * sizeof *idle);
            idle[n++] = p;
            bytes += p->id_len + 4;
        }
        if (n)
            start_producer_expiry(e, s, idle, n);
    }
    free(idle);
}

void rn_engine_sweep_expired(rn_engine *e) {
    int64_t now = rn_now_ms();
    rn_stream **victims = NULL;
    size_t n = 0, cap = 0, i = 0;
    void *v;
    while (rn_map_next(&e->by_path, &i, &v)) {
        rn_stream *s = v;
        if (!s->pending_create && !s->busy && stream_expired(s, now)) {
            if (n == cap)
                victims = rn_xrealloc(victims, (cap = cap ? cap * 2 : 16) * sizeof *victims);
            victims[n++] = s;
        }
    }
    for (size_t k = 0; k < n; k++)
        start_expiry(e, victims[k]);
    free(victims);
    sweep_producers(e, now);
}

/* ---- checkpoints ---- */

static void encode_identity(const rn_write_identity *id, rn_buf *b) {
    rn_buf_append_u8(b, id->has_digest);
    if (id->has_digest)
        rn_buf_append(b, id->digest, 32);
}

static void decode_identity(rn_reader *r, rn_write_identity *id) {
    id->has_digest = rn_read_u8(r);
    const uint8_t *d = id->has_digest ? rn_read_bytes(r, 32) : NULL;
    if (d)
        memcpy(id->digest, d, 32);
}

/* A producer's state: lstr id, u64 epoch, last_seq, last_ms, the newest
 * write (identity, u64 start, u64 end, u8 closed), the claim's identity,
 * u8 above_floor, u8 closes_epoch, u64 closed_epoch, closed_seq, u8
 * history, u64 history_seq. An identity is u8 has_digest [32 bytes]. */
static void encode_producer(const rn_producer *p, rn_buf *b) {
    rn_buf_append_lstr(b, p->id, p->id_len);
    rn_buf_append_u64(b, p->epoch);
    rn_buf_append_u64(b, p->last_seq);
    rn_buf_append_u64(b, (uint64_t)p->last_ms);
    encode_identity(&p->newest, b);
    rn_buf_append_u64(b, p->newest_start);
    rn_buf_append_u64(b, p->newest_end);
    rn_buf_append_u8(b, p->newest_closed);
    encode_identity(&p->claim, b);
    rn_buf_append_u8(b, p->above_floor);
    rn_buf_append_u8(b, p->closes_epoch);
    rn_buf_append_u64(b, p->closed_epoch);
    rn_buf_append_u64(b, p->closed_seq);
    rn_buf_append_u8(b, p->history);
    rn_buf_append_u64(b, p->history_seq);
}

/* Decodes one producer into s; returns 0, or -1 for a malformed record. */
static int decode_producer(rn_reader *r, rn_stream *s) {
    size_t n;
    const char *id = (const char *)rn_read_lstr(r, &n);
    if (!id || rn_map_get(&s->producers, id, n))
        return -1;
    rn_producer *p = producer_add(s, id, n);
    p->epoch = rn_read_u64(r);
    p->last_seq = rn_read_u64(r);
    p->last_ms = (int64_t)rn_read_u64(r);
    decode_identity(r, &p->newest);
    p->newest_start = rn_read_u64(r);
    p->newest_end = rn_read_u64(r);
    p->newest_closed = rn_read_u8(r);
    decode_identity(r, &p->claim);
    p->above_floor = rn_read_u8(r);
    p->closes_epoch = rn_read_u8(r);
    p->closed_epoch = rn_read_u64(r);
    p->closed_seq = rn_read_u64(r);
    p->history = rn_read_u8(r);
    p->history_seq = rn_read_u64(r);
    return r->failed || p->history > RN_EPOCH_LOST ? -1 : 0;
}

static void encode_stream(const rn_stream *s, rn_buf *b) {
    rn_buf_append_lstr(b, s->path, s->path_len);
    rn_buf_append_u64(b, s->id);
    rn_buf_append_u64(b, s->incarnation);
    rn_buf_append_lstr(b, s->content_type, s->content_type_len);
    rn_buf_append_u64(b, (uint64_t)s->ttl_s);
    rn_buf_append_u64(b, (uint64_t)s->expires_at_ms);
    rn_buf_append_u64(b, (uint64_t)s->created_ms);
    rn_buf_append_u64(b, s->tail);
    rn_buf_append_u64(b, s->appends);
    rn_buf_append_u64(b, s->source ? s->source->id : 0);
    rn_buf_append_u64(b, s->fork_offset);
    rn_buf_append_u8(b, (uint8_t)s->soft_deleted);
    rn_buf_append_u64(b, s->retained);
    rn_buf_append_u8(b, (uint8_t)s->snapshot.present);
    if (s->snapshot.present) {
        rn_buf_append_u64(b, s->snapshot.offset);
        rn_buf_append(b, s->snapshot.digest, 32);
        rn_buf_append_u64(b, s->snapshot.size);
        rn_buf_append_lstr(b, s->snapshot.content_type, s->snapshot.content_type_len);
        rn_buf_append_lstr(b, s->snapshot.key, strlen(s->snapshot.key));
        rn_buf_append_u8(b, (uint8_t)s->snapshot.cold);
    }
    rn_buf_append_u8(b, (uint8_t)s->has_previous);
    rn_buf_append_u64(b, s->previous_incarnation);
    rn_buf_append_u64(b, s->inherited_offset);
    rn_buf_append_u8(b, (uint8_t)s->written_since_rewrite);
    rn_buf_append_u8(b, (uint8_t)s->closed);
    rn_buf_append_u8(b, s->last_seq != NULL);
    if (s->last_seq)
        rn_buf_append_lstr(b, s->last_seq, s->last_seq_len);
    rn_buf_append_u8(b, (uint8_t)s->has_floor);
    rn_buf_append_u64(b, s->epoch_floor);
    rn_buf_append_u32(b, (uint32_t)s->producers.count);
    size_t i = 0;
    void *v;
    while (rn_map_next(&s->producers, &i, &v))
        encode_producer(v, b);
}

/* Decodes one stream, or returns NULL for a malformed record; its fork
 * source id goes to *source_id for linking once every stream is loaded. */
static rn_stream *decode_stream(rn_engine *e, rn_reader *r, int64_t now, uint64_t *source_id) {
    size_t path_len, ct_len;
    const char *path = (const char *)rn_read_lstr(r, &path_len);
    uint64_t id = rn_read_u64(r);
    uint64_t incarnation = rn_read_u64(r);
    const char *ct = (const char *)rn_read_lstr(r, &ct_len);
    if (r->failed)
        return NULL;
    rn_stream *s = stream_new(e, id, path, path_len, ct, ct_len);
    s->incarnation = incarnation;
    s->ttl_s = (int64_t)rn_read_u64(r);
    s->expires_at_ms = (int64_t)rn_read_u64(r);
    s->created_ms = (int64_t)rn_read_u64(r);
    s->last_access_ms = now;
    s->tail = rn_read_u64(r);
    s->appends = rn_read_u64(r);
    *source_id = rn_read_u64(r);
    s->fork_offset = rn_read_u64(r);
    s->soft_deleted = rn_read_u8(r);
    s->retained = rn_read_u64(r);
    if (rn_read_u8(r)) {
        s->snapshot.present = 1;
        s->snapshot.offset = rn_read_u64(r);
        const uint8_t *d = rn_read_bytes(r, 32);
        if (d)
            memcpy(s->snapshot.digest, d, 32);
        s->snapshot.size = rn_read_u64(r);
        size_t n;
        const char *t = (const char *)rn_read_lstr(r, &n);
        s->snapshot.content_type = rn_xstrndup(t ? t : "", n);
        s->snapshot.content_type_len = n;
        t = (const char *)rn_read_lstr(r, &n);
        s->snapshot.key = rn_xstrndup(t ? t : "", n);
        s->snapshot.cold = rn_read_u8(r);
    }
    s->has_previous = rn_read_u8(r);
    s->previous_incarnation = rn_read_u64(r);
    s->inherited_offset = rn_read_u64(r);
    s->written_since_rewrite = rn_read_u8(r);
    s->closed = rn_read_u8(r);
    if (rn_read_u8(r)) {
        size_t n;
        const char *q = (const char *)rn_read_lstr(r, &n);
        s->last_seq = rn_xstrndup(q ? q : "", n);
        s->last_seq_len = n;
    }
    s->has_floor = rn_read_u8(r);
    s->epoch_floor = rn_read_u64(r);
    uint32_t np = rn_read_u32(r);
    for (uint32_t k = 0; k < np && !r->failed; k++)
        if (decode_producer(r, s))
            r->failed = 1;
    return r->failed ? NULL : s;
}

/* Points every loaded fork at its source and counts references. Returns 0,
 * or -1 when a source is missing. */
static int link_forks(rn_engine *e, rn_stream **loaded, const uint64_t *sources, uint64_t n) {
    for (uint64_t k = 0; k < n; k++) {
        if (!sources[k])
            continue;
        rn_stream *src = rn_map_get(&e->by_id, &sources[k], sizeof sources[k]);
        if (!src)
            return -1;
        loaded[k]->source = src;
        src->refcount++;
    }
    for (uint64_t k = 0; k < n; k++) {
        uint32_t depth = 0;
        for (rn_stream *p = loaded[k]->source; p && depth <= RN_MAX_FORK_DEPTH; p = p->source)
            depth++;
        if (depth > RN_MAX_FORK_DEPTH)
            return -1; /* a cycle: the checkpoint is damaged */
        loaded[k]->fork_depth = depth;
    }
    return 0;
}

static ssize_t read_all(int fd, uint8_t *out, size_t len) {
    size_t got = 0;
    while (got < len) {
        ssize_t r = read(fd, out + got, len - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return r < 0 ? -errno : (ssize_t)got;
        got += (size_t)r;
    }
    return (ssize_t)got;
}

static void checkpoint_path(const rn_engine *e, char *out, size_t cap, const char *suffix) {
    snprintf(out, cap, "%s/checkpoint%s", e->dir, suffix);
}

/* Loads the checkpoint if there is one; returns the first log segment to
 * replay (0 when there is no checkpoint) or -1 on a damaged checkpoint.
 * Removes the image a crash left half-written (checkpoint.tmp). */
static int64_t load_checkpoint(rn_engine *e, uint64_t *streams) {
    char path[PATH_MAX];
    checkpoint_path(e, path, sizeof path, ".tmp");
    unlink(path);
    checkpoint_path(e, path, sizeof path, "");
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? 0 : -1;
    struct stat st;
    fstat(fd, &st);
    size_t size = (size_t)st.st_size;
    uint8_t *data = rn_xmalloc(size);
    ssize_t got = read_all(fd, data, size);
    close(fd);
    int64_t result = -1;
    if (got == (ssize_t)size && size >= 36 && memcmp(data, CHECKPOINT_MAGIC, 8) == 0) {
        rn_reader tail;
        rn_reader_init(&tail, data + size - 4, 4);
        if (rn_read_u32(&tail) == rn_crc32c(0, data, size - 4)) {
            rn_reader r;
            rn_reader_init(&r, data + 8, size - 12);
            uint64_t segment = rn_read_u64(&r);
            e->next_id = rn_read_u64(&r);
            uint64_t count = rn_read_u64(&r);
            int64_t now = rn_now_ms();
            uint64_t k = 0;
            uint64_t *sources = rn_xcalloc(count ? count : 1, sizeof *sources);
            rn_stream **loaded = rn_xcalloc(count ? count : 1, sizeof *loaded);
            for (; k < count; k++) {
                loaded[k] = decode_stream(e, &r, now, &sources[k]);
                if (!loaded[k])
                    break;
            }
            uint64_t nbuckets = rn_read_u64(&r);
            for (uint64_t j = 0; j < nbuckets && !r.failed; j++) {
                size_t n;
                const char *id = (const char *)rn_read_lstr(&r, &n);
                if (id && n && !rn_map_get(&e->buckets, id, n)) {
                    char *copy = rn_xstrndup(id, n);
                    rn_map_put(&e->buckets, copy, n, copy);
                }
            }
            if (k == count && !r.failed && link_forks(e, loaded, sources, count) == 0) {
                result = (int64_t)segment;
                *streams = count;
            }
            free(sources);
            free(loaded);
        }
    }
    free(data);
    return result;
}

static void checkpoint_work(uv_work_t *req) {
    checkpoint_job *job = req->data;
    rn_engine *e = job->engine;
    job->status = rn_store_sync(e->store);
    if (job->status)
        return;
    rn_fault_point("checkpoint-after-syncfs");
    char tmp[PATH_MAX], final[PATH_MAX];
    checkpoint_path(e, tmp, sizeof tmp, ".tmp");
    checkpoint_path(e, final, sizeof final, "");
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        job->status = -errno;
        return;
    }
    size_t off = 0;
    while (off < job->image.len) {
        ssize_t w = write(fd, job->image.data + off, job->image.len - off);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            job->status = -errno;
            break;
        }
        off += (size_t)w;
    }
    if (!job->status && fdatasync(fd) < 0)
        job->status = -errno;
    close(fd);
    rn_fault_point("checkpoint-before-rename");
    if (!job->status && rename(tmp, final) < 0)
        job->status = -errno;
    if (job->status) {
        unlink(tmp); /* a partial image must not hold the space a full disk needs */
        return;
    }
    int dfd = open(e->dir, O_RDONLY | O_DIRECTORY);
    if (dfd >= 0) {
        if (fsync(dfd) < 0)
            job->status = -errno;
        close(dfd);
    }
}

static void checkpoint_done(uv_work_t *req, int status) {
    checkpoint_job *job = req->data;
    rn_engine *e = job->engine;
    if (status == 0 && job->status == 0) {
        rn_fault_point("checkpoint-before-drop");
        rn_wal_drop_before(e->wal, job->segment);
    } else
        rn_log(RN_LOG_ERROR, "checkpoint", "checkpoint failed: %s",
               strerror(-(status ? status : job->status)));
    rn_buf_free(&job->image);
    free(job);
    e->checkpoint = NULL;
}

/* Serializes all applied streams. Must run when no log batch is in flight. */
static checkpoint_job *snapshot(rn_engine *e) {
    checkpoint_job *job = rn_xcalloc(1, sizeof *job);
    job->engine = e;
    job->req.data = job;
    job->segment = rn_wal_rotate(e->wal);
    rn_buf *b = &job->image;
    rn_buf_append(b, CHECKPOINT_MAGIC, 8);
    rn_buf_append_u64(b, job->segment);
    rn_buf_append_u64(b, e->next_id);
    size_t count_at = b->len;
    rn_buf_append_u64(b, 0);
    uint64_t count = 0;
    size_t i = 0;
    void *v;
    while (rn_map_next(&e->by_path, &i, &v)) {
        rn_stream *s = v;
        if (s->pending_create)
            continue;
        encode_stream(s, b);
        count++;
    }
    for (int k = 0; k < 8; k++)
        b->data[count_at + k] = (uint8_t)(count >> (8 * k));
    rn_buf_append_u64(b, e->buckets.count);
    i = 0;
    while (rn_map_next(&e->buckets, &i, &v))
        rn_buf_append_lstr(b, v, strlen(v));
    rn_buf_append_u32(b, rn_crc32c(0, b->data, b->len));
    e->log_bytes_at_checkpoint = rn_wal_bytes_written(e->wal);
    return job;
}

static void maybe_checkpoint(void *arg) {
    rn_engine *e = arg;
    if (e->checkpoint ||
        rn_wal_bytes_written(e->wal) - e->log_bytes_at_checkpoint < e->cfg.checkpoint_bytes)
        return;
    e->checkpoint = snapshot(e);
    uv_queue_work(e->loop, &e->checkpoint->req, checkpoint_work, checkpoint_done);
}

/* ---- open / close ---- */

typedef struct {
    rn_engine *e;
    rn_blobs *store;
    int cold;
    rn_map referenced; /* key -> stream */
} orphan_sweep;

static int sweep_key(const char *key, void *arg) {
    orphan_sweep *o = arg;
    if (!rn_map_get(&o->referenced, key, strlen(key)))
        rn_blobs_delete(o->store, key);
    return 0;
}

/* Deletes snapshot bodies no stream references: written before a crash kept
 * their publish out of the log, or superseded during replay. */
static void sweep_orphan_snapshots(rn_engine *e) {
    for (int cold = 0; cold <= 1; cold++) {
        orphan_sweep o = {.e = e, .store = cold ? e->cold : e->snapshots, .cold = cold};
        if (!o.store)
            continue;
        size_t i = 0;
        void *v;
        while (rn_map_next(&e->by_path, &i, &v)) {
            rn_stream *s = v;
            if (s->snapshot.present && s->snapshot.cold == cold)
                rn_map_put(&o.referenced, s->snapshot.key, strlen(s->snapshot.key), s);
        }
        rn_blobs_list(o.store, RN_SNAPSHOT_PREFIX, sweep_key, &o);
        rn_map_free(&o.referenced);
    }
}

void rn_engine_blob_key(rn_engine *e, const rn_stream *s, char out[RN_BLOB_KEY_MAX]) {
    snprintf(out, RN_BLOB_KEY_MAX, "%s%016llx-%016llx", RN_SNAPSHOT_PREFIX,
             (unsigned long long)s->id,
             (unsigned long long)(((uint64_t)rn_now_ms() << 16) ^ e->blob_serial++));
}

static int replay_record(void *arg, const uint8_t *rec, size_t len) {
    rn_engine *e = arg;
    rn_cmd c;
    if (rn_cmd_decode(rec, len, &c) != 0)
        return RN_WAL_CORRUPT;
    int rc = apply(e, &c, NULL, 1);
    return rc == -ENOENT ? 0 : rc;
}

/* Names a stream the checkpoint restored (for the damage report). */
static const char *checkpointed_path(void *arg, uint64_t id, size_t *len) {
    rn_engine *e = arg;
    rn_stream *s = rn_map_get(&e->by_id, &id, sizeof id);
    if (!s)
        return NULL;
    *len = s->path_len;
    return s->path;
}

/* The message of a log recovery that failed with rc. The engine is not
 * used afterwards (a refusal replays nothing). */
static void refuse_recovery(rn_engine *e, uint64_t from, const rn_wal_recovery *rec, int rc,
                            char *err, size_t errcap) {
    int n = snprintf(err, errcap, "log recovery in %s refused to start: ", e->dir);
    size_t used = n > 0 && (size_t)n < errcap ? (size_t)n : 0;
    if (rc == RN_WAL_CORRUPT && rec->damage.kind != RN_WAL_INTACT)
        rn_damage_report(e->dir, from, &rec->damage, checkpointed_path, e, err + used,
                         errcap - used);
    else
        snprintf(err + used, errcap - used, "%s",
                 rc == RN_WAL_CORRUPT ? "a log record that reads back does not decode"
                                      : strerror(-rc));
}

rn_engine *rn_engine_open(uv_loop_t *loop, const rn_engine_config *cfg, rn_recovery_stats *stats,
                          char *err, size_t errcap) {
    memset(stats, 0, sizeof *stats);
    rn_engine *e = rn_xcalloc(1, sizeof *e);
    e->loop = loop;
    e->cfg = *cfg;
    e->dir = rn_xstrdup(cfg->data_dir);
    e->next_id = 1;
    e->store = rn_store_open(cfg->data_dir, cfg->max_open_files);
    char blob_dir[PATH_MAX];
    snprintf(blob_dir, sizeof blob_dir, "%s/snapshots", cfg->data_dir);
    e->snapshots = rn_blobs_open(blob_dir);
    if (cfg->cold_store) {
        snprintf(blob_dir, sizeof blob_dir, "%s/cold", cfg->data_dir);
        e->cold = rn_blobs_open(blob_dir);
    }
    if (!e->snapshots || (cfg->cold_store && !e->cold)) {
        snprintf(err, errcap, "cannot create the snapshot stores in %s", cfg->data_dir);
        rn_engine_close(e);
        return NULL;
    }
    if (!e->cfg.producer_ttl_ms)
        e->cfg.producer_ttl_ms = PRODUCER_TTL_DEFAULT_MS;
    if (!e->cfg.producer_cap)
        e->cfg.producer_cap = PRODUCER_CAP_DEFAULT;
    int64_t from = load_checkpoint(e, &stats->checkpoint_streams);
    if (from < 0) {
        snprintf(err, errcap, "checkpoint file in %s is damaged; refusing to start", cfg->data_dir);
        rn_engine_close(e);
        return NULL;
    }
    if (from)
        rn_log(RN_LOG_DEBUG, "recovery",
               "checkpoint loaded: %llu streams; log replay from segment %lld",
               (unsigned long long)stats->checkpoint_streams, (long long)from);
    else
        rn_log(RN_LOG_DEBUG, "recovery", "no checkpoint; replaying the whole log");
    rn_wal_recovery rec;
    int rc = rn_wal_recover(cfg->data_dir, (uint64_t)from, replay_record, e, &rec);
    if (rc != 0) {
        refuse_recovery(e, (uint64_t)from, &rec, rc, err, errcap);
        rn_engine_close(e);
        return NULL;
    }
    if (rec.torn_bytes)
        rn_log(RN_LOG_WARN, "recovery",
               "cut %llu bytes of an unfinished batch at byte %llu of log segment %llu: a "
               "crash interrupted its write, so none of its writes had been acknowledged",
               (unsigned long long)rec.torn_bytes, (unsigned long long)rec.torn_offset,
               (unsigned long long)rec.last_segment);
    size_t i = 0;
    void *v;
    while (rn_map_next(&e->by_path, &i, &v)) {
        rn_stream *s = v;
        /* Cut bytes of unrecovered records. A stream with no appends of
         * its own has none: its files are only written for appends. */
        if (s->touched && s->appends)
            rn_store_truncate(e->store, s->id, s->tail, s->appends);
        s->touched = 0;
        s->last_access_ms = rn_now_ms();
    }
    rn_log(RN_LOG_DEBUG, "recovery",
           "log replayed: %llu records, up to segment %llu byte %llu; %llu torn bytes cut",
           (unsigned long long)rec.records, (unsigned long long)rec.last_segment,
           (unsigned long long)rec.last_valid_end, (unsigned long long)rec.torn_bytes);
    sweep_orphan_snapshots(e);
    stats->streams = e->by_path.count;
    stats->records_replayed = rec.records;
    stats->torn_bytes = rec.torn_bytes;
    rn_wal_options wo = {.segment_bytes = cfg->wal_segment_bytes, .preallocate = 1};
    e->wal = rn_wal_open(loop, cfg->data_dir, &rec, &wo, &rc);
    if (!e->wal) {
        snprintf(err, errcap, "cannot open the log in %s: %s", cfg->data_dir, strerror(-rc));
        rn_engine_close(e);
        return NULL;
    }
    rn_wal_set_batch_hook(e->wal, maybe_checkpoint, e);
    rn_log(RN_LOG_DEBUG, "recovery", "%zu streams; new log segment %llu opened", e->by_path.count,
           (unsigned long long)rn_wal_current_segment(e->wal));
    return e;
}

void rn_engine_inject_sync_failures(rn_engine *e, int n) {
    rn_wal_inject_sync_failures(e->wal, n);
}

int rn_engine_busy(const rn_engine *e) {
    return e->ops_in_log > 0 || e->ops_preparing > 0 || e->checkpoint != NULL;
}

void rn_engine_close(rn_engine *e) {
    if (!e)
        return;
    if (e->wal && !e->checkpoint && !rn_wal_busy(e->wal)) {
        /* A final checkpoint makes the next start replay nothing. */
        checkpoint_job *job = snapshot(e);
        checkpoint_work(&job->req);
        if (job->status == 0)
            rn_wal_drop_before(e->wal, job->segment);
        rn_buf_free(&job->image);
        free(job);
    }
    size_t i = 0;
    void *v;
    while (rn_map_next(&e->by_id, &i, &v))
        stream_free(v);
    rn_map_free(&e->by_path);
    rn_map_free(&e->by_id);
    i = 0;
    while (rn_map_next(&e->buckets, &i, &v))
        free(v);
    rn_map_free(&e->buckets);
    rn_wal_close(e->wal);
    rn_store_close(e->store);
    rn_blobs_close(e->snapshots);
    rn_blobs_close(e->cold);
    free(e->dir);
    free(e);
}
