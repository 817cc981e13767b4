/*
 * history.c — stream history in the cold store (see tiers.h): the read
 * cache of history objects and the flush that writes them.
 *
 * The read cache keeps each fetched chunk as the descriptor the store's
 * open gave (the S3 store: an unnamed temporary file under cold-reads/;
 * the local directory: the object's own file), and each chunk the flush
 * just wrote as a memfd copy, at most cache_bytes of them, the least
 * recently read closed first. One fetch per chunk runs at
 * a time, whoever asks (later askers wait on it), and at most
 * FETCHES_MAX run at all. A read that finds its chunk missing names it
 * (rn_tiers_history_missed), so a caller on the loop thread can fetch it
 * and run again: the engine's reads stay synchronous.
 *
 * The flush moves one chunk at a time: on each tick it asks the source
 * for a due chunk, reads it from the stream file, puts it under its key,
 * and has the source record the move; a failed put or record is retried
 * (the source names the same chunk again) after a backoff. A chunk's key
 * names its stream and index only, so a put repeated after a crash or a
 * failure writes the same object again.
 */
#define _GNU_SOURCE /* memfd_create */
#include "tiers/tiers_int.h"
#include "util/backoff.h"
#include "util/buf.h"
#include "util/clock.h"
#include "util/fault.h"
#include "util/list.h"
#include "util/log.h"
#include "util/text.h"

#include <assert.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define FETCHES_MAX 8
#define TICK_MS 100
#define RETRY_BASE_MS 100
#define RETRY_CAP_MS 5000

typedef struct waiter {
    rn_tiers_status_fn done;
    void *arg;
    struct waiter *next;
} waiter;

/* A chunk in the cache, or on its way there (fd < 0). */
typedef struct {
    uint64_t key[2]; /* stream id, chunk index: the map's key */
    struct rn_history *h;
    int fd;
    uint64_t fd_off;
    waiter *waiters;  /* while fetching */
    rn_list_node lru; /* once cached: most recently read first */
    char name[64];    /* its object's key, borrowed by the store while fetching */
} chunk;

struct rn_history {
    rn_tiers *t;
    size_t max_chunks;
    rn_map chunks; /* key -> chunk, cached and fetching */
    rn_list lru;
    size_t cached, fetching;
    int has_miss;
    uint64_t miss_id, miss_index;
    /* the flush */
    rn_tiers_history_source src;
    uv_timer_t timer;
    int flushing, stopped;
    int busy;          /* a put or a record is in flight */
    uint64_t retry_at; /* monotonic ms before which no put starts */
    uint32_t failures; /* in a row */
    int put_status;    /* the last put's, while puts fail (rn_tiers_history_failing) */
    char put_why[160]; /* ... and the store's words for it */
    uint8_t *buf;      /* the chunk being put */
    uint64_t id, off;  /* ... and which it is */
    char key[64];      /* ... and its object's key, borrowed by the store */
    rn_log_throttle failed_log;
    rn_tiers_history_stats stats;
};

static void history_key(uint64_t id, uint64_t index, char out[64]) {
    snprintf(out, 64, RN_TIERS_HISTORY_PREFIX "%016llx/%016llx", (unsigned long long)id,
             (unsigned long long)index);
}

struct rn_history *rn_history_new(rn_tiers *t, uint64_t cache_bytes) {
    struct rn_history *h = rn_xcalloc(1, sizeof *h);
    h->t = t;
    if (cache_bytes < RN_HISTORY_CACHE_MIN)
        cache_bytes = RN_HISTORY_CACHE_MIN;
    h->max_chunks = (size_t)(cache_bytes / RN_CHUNK_BYTES);
    return h;
}

/* ---- the read cache ---- */

static void evict(struct rn_history *h, chunk *c) {
    assert(c->fd >= 0);
    rn_list_remove(&h->lru, &c->lru);
    rn_map_remove(&h->chunks, c->key, sizeof c->key);
    close(c->fd);
    h->cached--;
    h->stats.cached_bytes -= RN_CHUNK_BYTES;
    free(c);
}

static void fetched(void *arg, int fd, uint64_t fd_off) {
    chunk *c = arg;
    struct rn_history *h = c->h;
    h->fetching--;
    waiter *w = c->waiters;
    c->waiters = NULL;
    int status = fd < 0 ? fd : 0;
    if (fd < 0) {
        h->stats.fetch_failures++;
        rn_map_remove(&h->chunks, c->key, sizeof c->key);
        free(c);
    } else {
        c->fd = fd;
        c->fd_off = fd_off;
        rn_list_push_front(&h->lru, &c->lru);
        h->cached++;
        h->stats.cached_bytes += RN_CHUNK_BYTES;
        while (h->cached > h->max_chunks)
            evict(h, rn_list_entry(h->lru.last, chunk, lru));
    }
    while (w) {
        waiter *next = w->next;
        w->done(w->arg, status);
        free(w);
        w = next;
    }
}

void rn_tiers_history_fetch(rn_tiers *t, uint64_t id, uint64_t off, rn_tiers_status_fn done,
                            void *arg) {
    struct rn_history *h = t->history;
    if (!h) {
        if (done)
            done(arg, -EIO);
        return;
    }
    uint64_t key[2] = {id, off / RN_CHUNK_BYTES};
    chunk *c = rn_map_get(&h->chunks, key, sizeof key);
    if (c && c->fd >= 0) {
        if (done)
            done(arg, 0);
        return;
    }
    if (!c && h->fetching >= FETCHES_MAX) {
        if (done)
            done(arg, -EAGAIN);
        return;
    }
    int start = !c;
    if (start) {
        c = rn_xcalloc(1, sizeof *c);
        memcpy(c->key, key, sizeof key);
        c->h = h;
        c->fd = -1;
        rn_map_put(&h->chunks, c->key, sizeof c->key, c);
        h->fetching++;
        h->stats.fetches++;
    }
    if (done) {
        waiter *w = rn_xmalloc(sizeof *w);
        *w = (waiter){.done = done, .arg = arg, .next = c->waiters};
        c->waiters = w;
    }
    if (start) {
        history_key(id, key[1], c->name);
        t->cold->ops->open(t->cold, c->name, 0, RN_CHUNK_BYTES, fetched, c);
    }
}

void rn_tiers_history_read_ahead(rn_tiers *t, uint64_t id, uint64_t from, uint64_t to) {
    struct rn_history *h = t->history;
    if (!h)
        return;
    size_t most = h->max_chunks / 4;
    for (uint64_t index = from / RN_CHUNK_BYTES; most > 0 && index * RN_CHUNK_BYTES < to;
         index++, most--)
        rn_tiers_history_fetch(t, id, index * RN_CHUNK_BYTES, NULL, NULL);
}

int rn_tiers_history_read(rn_tiers *t, uint64_t id, uint64_t off, size_t len, uint8_t *out) {
    struct rn_history *h = t->history;
    if (!h)
        return -ENODATA; /* history moved by a run with a cold store: its fetch fails */
    while (len > 0) {
        uint64_t key[2] = {id, off / RN_CHUNK_BYTES};
        uint64_t within = off - key[1] * RN_CHUNK_BYTES;
        size_t n = RN_CHUNK_BYTES - within < len ? (size_t)(RN_CHUNK_BYTES - within) : len;
        chunk *c = rn_map_get(&h->chunks, key, sizeof key);
        if (!c || c->fd < 0) {
            h->stats.misses++;
            h->has_miss = 1;
            h->miss_id = id;
            h->miss_index = key[1];
            return -ENODATA;
        }
        h->stats.hits++;
        rn_list_remove(&h->lru, &c->lru);
        rn_list_push_front(&h->lru, &c->lru);
        for (size_t got = 0; out && got < n;) {
            ssize_t r = pread(c->fd, out + got, n - got, (off_t)(c->fd_off + within + got));
            if (r < 0 && errno == EINTR)
                continue;
            if (r <= 0)
                return -EIO;
            got += (size_t)r;
        }
        off += n;
        len -= n;
        if (out)
            out += n;
    }
    return 0;
}

int rn_tiers_history_failing(const rn_tiers *t, const char **why) {
    const struct rn_history *h = t->history;
    if (!h || h->put_status >= 0)
        return 0;
    *why = h->put_why;
    return h->put_status;
}

int rn_tiers_history_missed(const rn_tiers *t, uint64_t *id, uint64_t *off) {
    const struct rn_history *h = t->history;
    if (!h || !h->has_miss)
        return 0;
    *id = h->miss_id;
    *off = h->miss_index * RN_CHUNK_BYTES;
    return 1;
}

void rn_tiers_history_stats_get(const rn_tiers *t, rn_tiers_history_stats *out) {
    if (t->history)
        *out = t->history->stats;
    else
        memset(out, 0, sizeof *out);
}

/* ---- removal ---- */

typedef struct {
    char prefix[64]; /* borrowed by the store until the sweep reports */
} history_drop;

static void dropped(void *arg, int status) {
    (void)status; /* what stays is an orphan */
    free(arg);
}

void rn_tiers_history_drop(rn_tiers *t, uint64_t id) {
    if (!t->history || (!t->started && t->cold->network))
        return; /* recovery cannot reach a network store */
    history_drop *d = rn_xmalloc(sizeof *d);
    snprintf(d->prefix, sizeof d->prefix, RN_TIERS_HISTORY_PREFIX "%016llx/",
             (unsigned long long)id);
    t->cold->ops->sweep(t->cold, d->prefix, INT64_MAX, dropped, d);
}

int rn_history_key_stream(const char *key, uint64_t *id) {
    static const char prefix[] = RN_TIERS_HISTORY_PREFIX;
    size_t p = sizeof prefix - 1;
    return strncmp(key, prefix, p) == 0 && strlen(key) > p + 16 && key[p + 16] == '/' &&
           rn_parse_hex_u64(key + p, id) == 0;
}

/* ---- the flush ---- */

static void tick(uv_timer_t *timer);

static void failed(struct rn_history *h, const char *what, int status) {
    h->stats.flush_failures++;
    h->failures++;
    uint64_t delay =
        rn_backoff_ms(h->failures, RETRY_BASE_MS, RETRY_CAP_MS, 0.2, rn_backoff_unit());
    h->retry_at = rn_mono_ms() + delay;
    rn_log_throttled(&h->failed_log, 10000, RN_LOG_WARN, "history",
                     "moving bytes %llu.. of stream %016llx to the cold store failed (%s: %s); "
                     "trying again in %llu ms",
                     (unsigned long long)h->off, (unsigned long long)h->id, what, strerror(-status),
                     (unsigned long long)delay);
}

static void recorded(void *arg, int status) {
    struct rn_history *h = arg;
    h->busy = 0;
    if (h->stopped)
        return;
    if (status < 0) {
        failed(h, "recording the move", status);
        return;
    }
    rn_fault_point("tier-after-record");
    h->failures = 0;
    h->stats.flushed_bytes += RN_CHUNK_BYTES;
    uv_timer_start(&h->timer, tick, 0, TICK_MS); /* the next chunk now */
}

/* Keeps a copy of a chunk just written in the read cache, in memory
 * (memfd), before its move is recorded: a reader that began on the stream
 * file's copy (an answer sent in pieces) then reads its later pieces from
 * the cache, and readers near the tail find it there. Without it, when the
 * copy cannot be made, the move goes on: such a reader's answer is cut. */
static void keep_chunk(struct rn_history *h, uint64_t id, uint64_t off, const uint8_t *data) {
    uint64_t key[2] = {id, off / RN_CHUNK_BYTES};
    if (rn_map_get(&h->chunks, key, sizeof key))
        return;
    int fd = memfd_create("runnel-history", MFD_CLOEXEC);
    if (fd < 0)
        return;
    for (size_t done = 0; done < RN_CHUNK_BYTES;) {
        ssize_t n = write(fd, data + done, RN_CHUNK_BYTES - done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            close(fd);
            return;
        }
        done += (size_t)n;
    }
    chunk *c = rn_xcalloc(1, sizeof *c);
    memcpy(c->key, key, sizeof key);
    c->h = h;
    c->fd = -1;
    rn_map_put(&h->chunks, c->key, sizeof c->key, c);
    h->fetching++; /* cached as a fetch that just answered */
    fetched(c, fd, 0);
}

void rn_tiers_history_keep(rn_tiers *t, uint64_t id, uint64_t off,
                           int (*read)(void *ctx, uint8_t *out), void *ctx) {
    struct rn_history *h = t->history;
    assert(off % RN_CHUNK_BYTES == 0);
    uint64_t key[2] = {id, off / RN_CHUNK_BYTES};
    if (!h || h->stopped || rn_map_get(&h->chunks, key, sizeof key))
        return;
    uint8_t *data = rn_xmalloc(RN_CHUNK_BYTES);
    if (read(ctx, data) == 0)
        keep_chunk(h, id, off, data);
    free(data);
}

static void put_done(void *arg, int status) {
    struct rn_history *h = arg;
    h->put_status = status;
    if (status < 0 && !rn_tiers_cold_why(h->t, h->put_why, sizeof h->put_why))
        snprintf(h->put_why, sizeof h->put_why, "%s", strerror(-status));
    if (h->stopped || status < 0) {
        h->busy = 0;
        if (!h->stopped)
            failed(h, "writing the object", status);
        return;
    }
    rn_fault_point("tier-after-put");
    keep_chunk(h, h->id, h->off, h->buf);
    h->src.record(h->src.ctx, h->id, h->off + RN_CHUNK_BYTES, recorded, h);
}

static void tick(uv_timer_t *timer) {
    struct rn_history *h = timer->data;
    uint64_t id, off;
    if (h->stopped)
        return;
    int due = h->src.next(h->src.ctx, &id, &off); /* every tick: it counts the backlog */
    if (!due || h->busy || rn_mono_ms() < h->retry_at)
        return;
    assert(off % RN_CHUNK_BYTES == 0);
    if (!h->buf)
        h->buf = rn_xmalloc(RN_CHUNK_BYTES);
    h->id = id;
    h->off = off;
    int rc = h->src.read(h->src.ctx, id, off, RN_CHUNK_BYTES, h->buf);
    if (rc == -EINPROGRESS)
        return; /* being read in: the next tick */
    if (rc < 0) {
        failed(h, "reading the stream file", rc);
        return;
    }
    h->busy = 1;
    rn_fault_point("tier-before-put");
    history_key(id, off / RN_CHUNK_BYTES, h->key);
    rn_tiers *t = h->t;
    t->cold->ops->put(t->cold, h->key, h->buf, RN_CHUNK_BYTES, put_done, h);
}

void rn_tiers_history_flush(rn_tiers *t, const rn_tiers_history_source *src) {
    struct rn_history *h = t->history;
    assert(h && !h->flushing);
    h->src = *src;
    h->flushing = 1;
    uv_timer_init(t->loop, &h->timer);
    h->timer.data = h;
    uv_timer_start(&h->timer, tick, TICK_MS, TICK_MS);
}

void rn_history_stop(struct rn_history *h) {
    h->stopped = 1;
    if (h->flushing)
        uv_close((uv_handle_t *)&h->timer, NULL);
}

void rn_history_free(struct rn_history *h) {
    if (!h)
        return;
    while (h->lru.first)
        evict(h, rn_list_entry(h->lru.first, chunk, lru));
    assert(h->fetching == 0); /* the store ended every fetch when it stopped */
    rn_map_free(&h->chunks);
    free(h->buf);
    free(h);
}
