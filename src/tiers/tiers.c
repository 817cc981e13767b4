/*
 * tiers.c — the tiers service: its stores and their layout, its lifecycle,
 * and snapshot bodies. See tiers.h; staged parts are in parts.c.
 *
 * Layout under the data directory: streams/ (the stream files,
 * streamfiles.c); snapshots/ (the local snapshot store: bodies below
 * COLD_THRESHOLD, or all of them without a cold store); cold/ (the cold
 * store: larger bodies and staged parts). In both stores a body is
 * "snapshots/<stream id>-<time and serial>", so it is never overwritten.
 */
#include "tiers/tiers_int.h"
#include "tiers/blobs.h"
#include "util/buf.h"
#include "util/clock.h"
#include "util/text.h"

#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define COLD_THRESHOLD (1u << 20) /* bodies this large go to the cold store */
#define BODY_PREFIX RN_TIERS_BODY_PREFIX

static rn_store *store_of(const rn_tiers *t, int cold) {
    assert(!cold || t->cold); /* a cold body exists only with a cold store */
    return cold ? t->cold : t->local;
}

static rn_store *open_store(uv_loop_t *loop, const char *data_dir, const char *name) {
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s/%s", data_dir, name);
    return rn_localdir_open(loop, dir);
}

rn_tiers *rn_tiers_open(uv_loop_t *loop, const rn_tiers_config *cfg, char *err, size_t errcap) {
    rn_tiers *t = rn_xcalloc(1, sizeof *t);
    t->loop = loop;
    t->parts_grace_ms = cfg->parts_grace_ms;
    t->files = rn_streamfiles_open(cfg->data_dir, cfg->max_open_files);
    if (cfg->spare_files)
        t->spares = rn_spares_open(loop, t->files, cfg->data_dir, cfg->spare_files);
    t->local = open_store(loop, cfg->data_dir, "snapshots");
    assert(cfg->cold_store || !cfg->cold_backend);
    if (cfg->cold_store)
        t->cold = cfg->cold_backend ? cfg->cold_backend : open_store(loop, cfg->data_dir, "cold");
    if (t->cold)
        t->history = rn_history_new(t, cfg->history_cache_bytes);
    if (!t->local || (cfg->cold_store && !t->cold)) {
        snprintf(err, errcap, "cannot create the snapshot stores in %s", cfg->data_dir);
        if (t->cold && t->cold->ops->stop)
            t->cold = NULL; /* the caller's: it must stop it and run the loop first */
        rn_tiers_close(t);
        return NULL;
    }
    return t;
}

static void on_sweep(uv_timer_t *timer) {
    rn_tiers_parts_sweep(timer->data);
    rn_tiers_orphans_sweep(timer->data);
}

void rn_tiers_start(rn_tiers *t) {
    assert(!t->started);
    t->started = 1;
    rn_spares_start(t->spares);
    uv_timer_init(t->loop, &t->sweep);
    t->sweep.data = t;
    if (!t->cold)
        return; /* nothing to sweep */
    uint64_t every = t->parts_grace_ms / 4 ? t->parts_grace_ms / 4 : 1;
    uv_timer_start(&t->sweep, on_sweep, every, every);
}

void rn_tiers_stop(rn_tiers *t) {
    t->stopped = 1;
    rn_spares_stop(t->spares);
    if (t->started)
        uv_close((uv_handle_t *)&t->sweep, NULL);
    if (t->history)
        rn_history_stop(t->history);
    if (t->cold && t->cold->ops->stop)
        t->cold->ops->stop(t->cold);
}

void rn_tiers_close(rn_tiers *t) {
    if (!t)
        return;
    rn_tiers_parts_free(t);
    rn_tiers_orphans_free(t);
    rn_history_free(t->history);
    rn_spares_close(t->spares);
    rn_streamfiles_close(t->files);
    if (t->local)
        t->local->ops->close(t->local);
    if (t->cold)
        t->cold->ops->close(t->cold);
    free(t);
}

void rn_tiers_cold_claim(rn_tiers *t, int fresh, rn_tiers_status_fn done, void *arg) {
    if (!t->cold || !t->cold->ops->claim)
        done(arg, 0);
    else
        t->cold->ops->claim(t->cold, fresh, done, arg);
}

size_t rn_tiers_cold_why(rn_tiers *t, char *out, size_t cap) {
    if (!t->cold || !t->cold->ops->why) {
        if (cap)
            out[0] = '\0';
        return 0;
    }
    return t->cold->ops->why(t->cold, out, cap);
}

int rn_tiers_take_spare_files(rn_tiers *t, uint64_t id) {
    return rn_spares_take(t->spares, id);
}

rn_streamfiles *rn_tiers_streamfiles(rn_tiers *t) {
    return t->files;
}

int rn_tiers_keeps_parts(const rn_tiers *t) {
    return t->cold != NULL;
}

void rn_tiers_body_key(rn_tiers *t, uint64_t stream, char out[RN_TIERS_KEY_MAX]) {
    snprintf(out, RN_TIERS_KEY_MAX, BODY_PREFIX "%016llx-%016llx", (unsigned long long)stream,
             (unsigned long long)(((uint64_t)rn_now_ms() << 16) ^ t->body_serial++));
}

/* ---- writing a body ---- */

typedef struct {
    int cold;
    char key[RN_TIERS_KEY_MAX];
    rn_tiers_body_fn done;
    void *arg;
} body_write;

static void body_written(void *arg, int status) {
    body_write *w = arg;
    w->done(w->arg, status, w->cold, w->key);
    free(w);
}

void rn_tiers_body_write(rn_tiers *t, uint64_t stream_id, const void *data, size_t len,
                         rn_tiers_body_fn done, void *arg) {
    body_write *w = rn_xcalloc(1, sizeof *w);
    w->cold = t->cold && len >= COLD_THRESHOLD;
    rn_tiers_body_key(t, stream_id, w->key);
    w->done = done;
    w->arg = arg;
    rn_store *st = store_of(t, w->cold);
    st->ops->put(st, w->key, data, len, body_written, w);
}

/* A read on its way: the key is the read's own (the caller's may go). */
typedef struct {
    char key[RN_TIERS_KEY_MAX];
    rn_tiers_read_fn done;
    void *arg;
} body_read;

static void body_opened(void *arg, int fd, uint64_t fd_off) {
    body_read *r = arg;
    r->done(r->arg, fd, fd_off);
    free(r);
}

void rn_tiers_body_read(rn_tiers *t, int cold, const char *key, uint64_t off, uint64_t len,
                        rn_tiers_read_fn done, void *arg) {
    body_read *r = rn_xcalloc(1, sizeof *r);
    snprintf(r->key, sizeof r->key, "%s", key);
    r->done = done;
    r->arg = arg;
    rn_store *st = store_of(t, cold);
    st->ops->open(st, r->key, off, len, body_opened, r);
}

/* ---- removing bodies ---- */

typedef struct {
    char key[RN_TIERS_KEY_MAX];
    const char *keys[1];
} body_drop;

static void body_dropped(void *arg, int status) {
    (void)status; /* a body that stays is swept at the next start */
    free(arg);
}

void rn_tiers_body_drop(rn_tiers *t, int cold, const char *key) {
    if (store_of(t, cold)->network && (!t->started || t->drop_by_sweep_only))
        return; /* recovery cannot reach it, or a backup may name it: the orphan sweep decides */
    body_drop *d = rn_xcalloc(1, sizeof *d);
    snprintf(d->key, sizeof d->key, "%s", key);
    d->keys[0] = d->key;
    rn_store *st = store_of(t, cold);
    st->ops->remove(st, d->keys, 1, body_dropped, d);
}

void rn_tiers_drop_by_sweep_only(rn_tiers *t) {
    assert(!t->started && t->referenced);
    t->drop_by_sweep_only = 1;
}

typedef struct {
    rn_tiers *t;
    int cold;
    int (*referenced)(void *ctx, int cold, const char *key);
    void *ctx;
    int listed;
} body_sweep;

static void sweep_body(void *arg, const char *key, uint64_t size) {
    body_sweep *b = arg;
    (void)size;
    if (!b->referenced(b->ctx, b->cold, key))
        rn_tiers_body_drop(b->t, b->cold, key);
}

static void bodies_listed(void *arg, int status) {
    body_sweep *b = arg;
    (void)status; /* what a failed listing missed waits for the next start */
    b->listed = 1;
}

void rn_tiers_sweep_bodies(rn_tiers *t, int (*referenced)(void *ctx, int cold, const char *key),
                           void *ctx) {
    assert(!t->started); /* recovery only: nothing may be publishing */
    for (int cold = 0; cold <= 1; cold++) {
        if (cold && (!t->cold || t->cold->network))
            continue; /* a network store's orphans: rn_tiers_watch_bodies */
        body_sweep b = {t, cold, referenced, ctx, 0};
        rn_store *st = store_of(t, cold);
        st->ops->list(st, BODY_PREFIX, sweep_body, bodies_listed, &b);
        assert(b.listed); /* stores list at once during recovery (store.h) */
    }
}

/* ---- snapshot bodies on replicas ---- */

int rn_tiers_body_key_valid(const char *key) {
    static const char prefix[] = BODY_PREFIX;
    size_t n = strlen(key), p = sizeof prefix - 1;
    if (n != p + 33 || memcmp(key, prefix, p) != 0 || key[p + 16] != '-')
        return 0;
    for (size_t i = 0; i < 33; i++)
        if (i != 16 && !isxdigit((unsigned char)key[p + i]))
            return 0;
    return 1;
}

int rn_tiers_body_key_stream(const char *key, uint64_t *id) {
    return rn_tiers_body_key_valid(key) && rn_parse_hex_u64(key + sizeof BODY_PREFIX - 1, id) == 0;
}

void rn_tiers_body_key_rebase(const char *key, uint64_t stream, char out[RN_TIERS_KEY_MAX]) {
    assert(rn_tiers_body_key_valid(key));
    snprintf(out, RN_TIERS_KEY_MAX, BODY_PREFIX "%016llx%s", (unsigned long long)stream,
             key + sizeof BODY_PREFIX - 1 + 16);
}

/* The local files holding bodies of the store `cold` names, or NULL when
 * that store is not this node's directory. */
static rn_blobs *local_files(const rn_tiers *t, int cold) {
    if (cold && !t->cold)
        return NULL;
    return rn_localdir_files(store_of(t, cold));
}

int rn_tiers_body_present(rn_tiers *t, int cold, const char *key) {
    assert(rn_tiers_body_key_valid(key));
    if (cold && !t->cold)
        return 0; /* a cold body without a cold store here: cannot be kept */
    rn_blobs *files = local_files(t, cold);
    return !files || rn_blobs_size(files, key) >= 0;
}

int rn_tiers_body_shared(const rn_tiers *t, int cold) {
    return cold && t->cold && !local_files(t, cold);
}

int rn_tiers_body_intake_begin(rn_tiers *t, int cold, const char *key) {
    assert(rn_tiers_body_key_valid(key));
    rn_blobs *files = local_files(t, cold);
    return files ? rn_blobs_begin(files, key) : -EOPNOTSUPP;
}

int rn_tiers_body_intake_end(rn_tiers *t, int cold, const char *key, int fd, int status) {
    rn_blobs *files = local_files(t, cold);
    assert(files && fd >= 0);
    return rn_blobs_end(files, key, fd, status);
}
