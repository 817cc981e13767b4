/*
 * checkpoint.c — the checkpoint: an image of every applied stream's
 * metadata and the namespaces, as of a log rotation, so that recovery
 * replays only the log segments after it.
 *
 * After checkpoint_bytes of log, the log's batch hook (run between batches,
 * when nothing is in flight) serializes the state and rotates the log; a
 * worker then syncs the file system (making every stream file durable up
 * to the rotation), writes <dir>/checkpoint atomically (util/files.c:
 * checkpoint.tmp, fsync, rename, directory fsync), and only when every one
 * of those steps succeeded are the segments before the rotation dropped; a
 * step that failed (a directory that could not even be opened at the file
 * descriptor limit included) fails the checkpoint and the log keeps them.
 *
 * Image: magic "RNCKPT03", u64 first segment to replay, u64 next id, u64
 * stream count, the streams (encode_stream), u64 namespace count, the
 * namespaces (lstr each), u64 count of streams with history in the cold
 * store and (u64 id, u64 cold end) for each, u32 CRC-32C of everything
 * before it. An "RNCKPT02" image (before history tiering) has no cold
 * ends and still loads. The cold ends are not in encode_stream because
 * manifests (replica.c) reuse it and cluster mode does not tier history.
 * A state holding fences (bucket purges, fences.c) is written as
 * "RNCKPT04": the fences follow the cold ends (engine_encode_fences).
 * Without fences the image stays "RNCKPT03", which builds from before
 * fences read; a build from before them refuses an "RNCKPT04" image, as
 * it must (it would let creates into a purged bucket again).
 */
#include "engine/engine_int.h"
#include "util/clock.h"
#include "util/crc32c.h"
#include "util/fault.h"
#include "util/files.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char CHECKPOINT_MAGIC_V4[8] = {'R', 'N', 'C', 'K', 'P', 'T', '0', '4'};
static const char CHECKPOINT_MAGIC[8] = {'R', 'N', 'C', 'K', 'P', 'T', '0', '3'};
static const char CHECKPOINT_MAGIC_V2[8] = {'R', 'N', 'C', 'K', 'P', 'T', '0', '2'};

typedef struct checkpoint_job {
    uv_work_t req;
    rn_engine *engine;
    rn_buf image;     /* serialized checkpoint */
    uint64_t segment; /* first log segment not covered */
    int status;
} checkpoint_job;

/* ---- the image ---- */

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
    rn_producer *p = rn_stream_add_producer(s, id, n);
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

static int cmp_producer_id(const void *a, const void *b) {
    const rn_producer *x = *(rn_producer *const *)a, *y = *(rn_producer *const *)b;
    int c = memcmp(x->id, y->id, x->id_len < y->id_len ? x->id_len : y->id_len);
    return c ? c : (x->id_len > y->id_len) - (x->id_len < y->id_len);
}

static int cmp_text(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* A stream record's source field: 0, the source's id, or for a fork apart
 * from its source (cluster mode) bit 63, the fork's depth in bits 56-62
 * and the source's id below (ids stay below 2^56). */
#define SOURCE_DEPTH_SHIFT 56
#define SOURCE_ID_MASK ((1ull << SOURCE_DEPTH_SHIFT) - 1)

static uint64_t source_field(const rn_stream *s) {
    if (s->apart_source)
        return RN_CMD_SOURCE_APART | (uint64_t)s->fork_depth << SOURCE_DEPTH_SHIFT |
               s->apart_source;
    return s->source ? s->source->id : 0;
}

/* The soft-deleted byte's bit 1: the stream's pins follow it (u32 count,
 * then u64 fork id, i64 time each); never set where no stream has one, so
 * an image without pins is what it was before them. */
#define PINS_FOLLOW 2u

static void encode_pins(const rn_stream *s, rn_buf *b) {
    rn_buf_append_u32(b, s->npins);
    for (uint32_t k = 0; k < s->npins; k++) {
        rn_buf_append_u64(b, s->pins[k].fork_id);
        rn_buf_append_u64(b, (uint64_t)s->pins[k].time_ms);
    }
}

static int decode_pins(rn_reader *r, rn_stream *s) {
    uint32_t n = rn_read_u32(r);
    if (r->failed || n > (r->end - r->p) / 16)
        return -1;
    s->pins = rn_xcalloc(n ? n : 1, sizeof *s->pins);
    for (uint32_t k = 0; k < n; k++) {
        s->pins[k].fork_id = rn_read_u64(r);
        s->pins[k].time_ms = (int64_t)rn_read_u64(r);
    }
    s->npins = n;
    return r->failed ? -1 : 0;
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
    rn_buf_append_u64(b, source_field(s));
    rn_buf_append_u64(b, s->fork_offset);
    rn_buf_append_u8(b, (uint8_t)((s->soft_deleted ? 1u : 0u) | (s->npins ? PINS_FOLLOW : 0u)));
    if (s->npins)
        encode_pins(s, b);
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
    /* in id order: the same bytes wherever the stream's state is the same */
    rn_producer **all = rn_xcalloc(s->producers.count ? s->producers.count : 1, sizeof *all);
    size_t i = 0, n = 0;
    void *v;
    while (rn_map_next(&s->producers, &i, &v))
        all[n++] = v;
    qsort(all, n, sizeof *all, cmp_producer_id);
    for (size_t k = 0; k < n; k++)
        encode_producer(all[k], b);
    free(all);
}

/* Decodes one stream into st, or returns NULL for a malformed record; its
 * fork source id goes to *source_id for linking once every stream is
 * loaded. now starts its TTL window. */
rn_stream *engine_decode_stream(rn_state *st, rn_reader *r, int64_t now, uint64_t *source_id) {
    size_t path_len, ct_len;
    const char *path = (const char *)rn_read_lstr(r, &path_len);
    uint64_t id = rn_read_u64(r);
    uint64_t incarnation = rn_read_u64(r);
    const char *ct = (const char *)rn_read_lstr(r, &ct_len);
    if (r->failed || rn_state_stream(st, id) || rn_state_at(st, path, path_len)) {
        r->failed = 1; /* malformed, or listed twice: damaged */
        return NULL;
    }
    rn_stream *s = rn_state_add(st, id, path, path_len, ct, ct_len);
    s->incarnation = incarnation;
    s->ttl_s = (int64_t)rn_read_u64(r);
    s->expires_at_ms = (int64_t)rn_read_u64(r);
    s->created_ms = (int64_t)rn_read_u64(r);
    s->last_access_ms = now;
    s->tail = rn_read_u64(r);
    s->appends = rn_read_u64(r);
    *source_id = rn_read_u64(r);
    s->fork_offset = rn_read_u64(r);
    uint8_t flags = rn_read_u8(r);
    s->soft_deleted = flags & 1u;
    if ((flags & PINS_FOLLOW) && decode_pins(r, s))
        r->failed = 1;
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
 * or -1 when a source is missing or the chain loops. */
int engine_link_forks(rn_state *st, rn_stream **loaded, const uint64_t *sources, uint64_t n) {
    for (uint64_t k = 0; k < n; k++) {
        if (sources[k] & RN_CMD_SOURCE_APART) { /* held by its pin in the source's group */
            loaded[k]->apart_source = sources[k] & SOURCE_ID_MASK;
            loaded[k]->fork_depth =
                (uint32_t)((sources[k] & ~RN_CMD_SOURCE_APART) >> SOURCE_DEPTH_SHIFT);
            if (!loaded[k]->apart_source || !loaded[k]->fork_depth)
                return -1;
            continue;
        }
        if (!sources[k])
            continue;
        rn_stream *src = rn_state_stream(st, sources[k]);
        if (!src)
            return -1;
        loaded[k]->source = src;
        src->refcount++;
    }
    for (uint64_t k = 0; k < n; k++) {
        if (loaded[k]->apart_source)
            continue;
        uint32_t depth = 0;
        const rn_stream *p = loaded[k];
        for (; p->source && depth <= RN_MAX_FORK_DEPTH; p = p->source)
            depth++;
        if (depth > RN_MAX_FORK_DEPTH)
            return -1; /* a cycle: the checkpoint is damaged */
        loaded[k]->fork_depth = depth + (p->apart_source ? p->fork_depth : 0);
    }
    return 0;
}

/* Writes count over the u64 placeholder at b->data + at (a list's length,
 * known once the list is written). */
static void set_count(rn_buf *b, size_t at, uint64_t count) {
    for (int k = 0; k < 8; k++)
        b->data[at + k] = (uint8_t)(count >> (8 * k));
}

void engine_encode_streams(const rn_state *st, rn_stream_pick pick, void *arg, rn_buf *b) {
    size_t count_at = b->len;
    rn_buf_append_u64(b, 0);
    uint64_t count = 0;
    size_t n;
    rn_stream **all = rn_state_streams_by_id(st, &n);
    for (size_t k = 0; k < n; k++) {
        rn_stream *s = all[k];
        if (s->pending_create || (pick && !pick(s, arg)))
            continue;
        encode_stream(s, b);
        count++;
    }
    free(all);
    set_count(b, count_at, count);
}

void engine_encode_namespaces(const rn_state *st, rn_buf *b) {
    rn_buf_append_u64(b, st->namespaces.count);
    char **all = rn_xcalloc(st->namespaces.count ? st->namespaces.count : 1, sizeof *all);
    size_t i = 0, n = 0;
    void *v;
    while (rn_map_next(&st->namespaces, &i, &v))
        all[n++] = v;
    qsort(all, n, sizeof *all, cmp_text);
    for (size_t k = 0; k < n; k++)
        rn_buf_append_lstr(b, all[k], strlen(all[k]));
    free(all);
}

void engine_decode_namespaces(rn_state *st, rn_reader *r) {
    uint64_t n = rn_read_u64(r);
    for (uint64_t j = 0; j < n && !r->failed; j++) {
        size_t len;
        const char *id = (const char *)rn_read_lstr(r, &len);
        if (id && len)
            rn_state_add_namespace(st, id, len);
    }
}

void engine_encode_cold_ends(const rn_state *st, rn_stream_pick pick, void *arg, rn_buf *b) {
    size_t count_at = b->len;
    rn_buf_append_u64(b, 0);
    uint64_t count = 0;
    size_t n;
    rn_stream **all = rn_state_streams_by_id(st, &n);
    for (size_t k = 0; k < n; k++) {
        rn_stream *s = all[k];
        if (s->pending_create || !s->cold_end || (pick && !pick(s, arg)))
            continue;
        rn_buf_append_u64(b, s->id);
        rn_buf_append_u64(b, s->cold_end);
        count++;
    }
    free(all);
    set_count(b, count_at, count);
}

void engine_decode_cold_ends(rn_state *st, rn_reader *r) {
    uint64_t n = rn_read_u64(r);
    for (uint64_t j = 0; j < n && !r->failed; j++) {
        uint64_t id = rn_read_u64(r), end = rn_read_u64(r);
        rn_stream *s = rn_state_stream(st, id);
        if (!s || end > s->tail)
            r->failed = 1;
        else
            s->cold_end = end;
    }
}

static int cmp_fence(const void *a, const void *b) {
    return strcmp((*(const rn_fence *const *)a)->ns, (*(const rn_fence *const *)b)->ns);
}

/* The fences, sorted by namespace (the maps' order differs between
 * processes). */
static const rn_fence **sorted_fences(const rn_state *st, size_t *n) {
    const rn_fence **all = rn_xcalloc(st->fences.count ? st->fences.count : 1, sizeof *all);
    size_t i = 0;
    void *v;
    *n = 0;
    while (rn_map_next(&st->fences, &i, &v))
        all[(*n)++] = v;
    qsort(all, *n, sizeof *all, cmp_fence);
    return all;
}

void engine_encode_fences(const rn_state *st, int scope, rn_buf *b) {
    size_t n, count = 0;
    const rn_fence **all = sorted_fences(st, &n);
    size_t count_at = b->len;
    rn_buf_append_u64(b, 0);
    for (size_t k = 0; k < n; k++) {
        const rn_fence *f = all[k];
        if (scope >= 0 && !rn_fence_covers(f, (uint64_t)scope))
            continue;
        rn_buf_append_lstr(b, f->ns, f->ns_len);
        rn_buf_append_u64(b, (uint64_t)f->time_ms);
        if (scope < 0) {
            rn_buf_append_u8(b, f->all);
            rn_buf_append(b, f->groups, sizeof f->groups);
        }
        count++;
    }
    free(all);
    set_count(b, count_at, count);
}

void engine_decode_fences(rn_state *st, int scope, rn_reader *r) {
    uint64_t n = rn_read_u64(r);
    for (uint64_t j = 0; j < n && !r->failed; j++) {
        size_t len;
        const char *ns = (const char *)rn_read_lstr(r, &len);
        int64_t time_ms = (int64_t)rn_read_u64(r);
        uint8_t all = scope < 0 ? rn_read_u8(r) : 0;
        const uint8_t *groups = scope < 0 ? rn_read_bytes(r, 32) : NULL;
        if (r->failed || !ns || !len) {
            r->failed = 1;
            break;
        }
        if (scope >= 0 || all)
            rn_state_add_fence(st, ns, len, scope >= 0 ? (uint16_t)scope : RN_FENCE_ALL, time_ms);
        for (unsigned g = 0; scope < 0 && g < 256; g++)
            if ((groups[g >> 3] >> (g & 7)) & 1)
                rn_state_add_fence(st, ns, len, (uint16_t)g, time_ms);
    }
}

void engine_image_encode(const rn_state *st, uint64_t segment, rn_buf *b) {
    int fenced = st->fences.count > 0;
    rn_buf_append(b, fenced ? CHECKPOINT_MAGIC_V4 : CHECKPOINT_MAGIC, 8);
    rn_buf_append_u64(b, segment);
    rn_buf_append_u64(b, st->next_id);
    engine_encode_streams(st, NULL, NULL, b);
    engine_encode_namespaces(st, b);
    engine_encode_cold_ends(st, NULL, NULL, b);
    if (fenced)
        engine_encode_fences(st, -1, b);
    rn_buf_append_u32(b, rn_crc32c(0, b->data, b->len));
}

int engine_image_decode(rn_state *st, const uint8_t *data, size_t size, int64_t now,
                        uint64_t *segment, uint64_t *streams) {
    int v2 = size >= 8 && memcmp(data, CHECKPOINT_MAGIC_V2, 8) == 0;
    int v4 = size >= 8 && memcmp(data, CHECKPOINT_MAGIC_V4, 8) == 0;
    if (size < 36 || (!v2 && !v4 && memcmp(data, CHECKPOINT_MAGIC, 8) != 0))
        return -EBADMSG;
    rn_reader tail;
    rn_reader_init(&tail, data + size - 4, 4);
    if (rn_read_u32(&tail) != rn_crc32c(0, data, size - 4))
        return -EBADMSG;
    rn_reader r;
    rn_reader_init(&r, data + 8, size - 12);
    uint64_t first = rn_read_u64(&r);
    st->next_id = rn_read_u64(&r);
    uint64_t count = rn_read_u64(&r);
    uint64_t k = 0;
    uint64_t *sources = rn_xcalloc(count ? count : 1, sizeof *sources);
    rn_stream **loaded = rn_xcalloc(count ? count : 1, sizeof *loaded);
    for (; k < count; k++) {
        loaded[k] = engine_decode_stream(st, &r, now, &sources[k]);
        if (!loaded[k])
            break;
    }
    engine_decode_namespaces(st, &r);
    if (!v2 && k == count)
        engine_decode_cold_ends(st, &r);
    if (v4 && k == count)
        engine_decode_fences(st, -1, &r);
    int rc = -EBADMSG;
    if (k == count && !r.failed && engine_link_forks(st, loaded, sources, count) == 0) {
        *segment = first;
        *streams = count;
        rc = 0;
    }
    free(sources);
    free(loaded);
    return rc;
}

/* ---- the file ---- */

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

int engine_checkpoint_load(rn_engine *e, uint64_t *segment, uint64_t *streams) {
    assert(e->state.by_path.count == 0);
    *segment = 0;
    *streams = 0;
    char path[PATH_MAX];
    checkpoint_path(e, path, sizeof path, ".tmp");
    unlink(path);
    checkpoint_path(e, path, sizeof path, "");
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? 0 : -errno;
    struct stat st;
    if (fstat(fd, &st) < 0) {
        int rc = -errno;
        close(fd);
        return rc;
    }
    size_t size = (size_t)st.st_size;
    uint8_t *data = rn_xmalloc(size ? size : 1);
    ssize_t got = read_all(fd, data, size);
    close(fd);
    int rc = got < 0 ? (int)got : (size_t)got != size ? -EBADMSG : 0;
    if (rc == 0)
        rc = engine_image_decode(&e->state, data, size, rn_now_ms(), segment, streams);
    free(data);
    return rc;
}

int engine_checkpoint_write(const char *dir, const rn_buf *image) {
    return rn_atomic_write_file(dir, "checkpoint", image->data, image->len, 0644);
}

/* Syncs the file system, then writes the image atomically (worker thread,
 * or the loop thread at close). */
static void checkpoint_work(uv_work_t *req) {
    checkpoint_job *job = req->data;
    rn_engine *e = job->engine;
    job->status = rn_streamfiles_sync(e->files);
    if (job->status)
        return;
    rn_fault_point("checkpoint-after-syncfs");
    job->status = engine_checkpoint_write(e->dir, &job->image);
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

/* Rotates the log and serializes all applied streams as of the rotation.
 * Must run when no log batch is in flight (rn_wal_rotate). */
static checkpoint_job *start_job(rn_engine *e) {
    checkpoint_job *job = rn_xcalloc(1, sizeof *job);
    job->engine = e;
    job->req.data = job;
    job->segment = rn_wal_rotate(e->wal);
    engine_image_encode(&e->state, job->segment, &job->image);
    e->log_bytes_at_checkpoint = rn_wal_bytes_written(e->wal);
    return job;
}

void engine_checkpoint_maybe(void *arg) {
    rn_engine *e = arg;
    if (e->checkpoint ||
        (rn_wal_bytes_written(e->wal) - e->log_bytes_at_checkpoint < e->cfg.checkpoint_bytes &&
         !e->checkpoint_wanted))
        return;
    e->checkpoint_wanted = 0;
    e->checkpoint = start_job(e);
    uv_queue_work(e->loop, &e->checkpoint->req, checkpoint_work, checkpoint_done);
}

int engine_checkpoint_start(rn_engine *e) {
    if (!e->wal || e->checkpoint || rn_wal_busy(e->wal))
        return -EBUSY;
    e->checkpoint_wanted = 0;
    e->checkpoint = start_job(e);
    uv_queue_work(e->loop, &e->checkpoint->req, checkpoint_work, checkpoint_done);
    return 0;
}

int engine_checkpoint_final(rn_engine *e) {
    assert(!e->checkpoint && !rn_wal_busy(e->wal));
    checkpoint_job *job = start_job(e);
    checkpoint_work(&job->req);
    int status = job->status;
    if (status == 0)
        rn_wal_drop_before(e->wal, job->segment);
    rn_buf_free(&job->image);
    free(job);
    return status;
}
