/*
 * parts.c — snapshot parts staged in the cold store (ext §2.2 "Upload in
 * Parts"). See tiers.h.
 *
 * A part is the object "parts/<stream id>/<incarnation>/<part id>", durable
 * before it is reported staged. The parts of a stream, every incarnation's,
 * are counted in memory (from a walk of its prefix the first time the
 * stream is used, then kept up to date as parts come and go) so that
 * surfaces can decide bounds from a request head: a rewrite does not reset
 * the bound. The counts of streams nobody is using are forgotten at each
 * sweep, which also removes parts older than the grace period: the next
 * use walks again. With rn_tiers_parts_epoch (a cluster, whose nodes share
 * the store), a count made under another epoch (before this node led the
 * stream's group this time) is not trusted either: another leader may have
 * staged or used parts since.
 */
#include "tiers/tiers_int.h"
#include "util/buf.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#define PARTS_PREFIX "parts/"
#define PART_ID_LEN 32
#define PART_KEY_MAX 160

/* A caller waiting for the counts of an incarnation still being listed. */
typedef struct count_waiter {
    rn_tiers_count_fn done;
    void *arg;
    struct count_waiter *next;
} count_waiter;

/* The staged parts of one stream, every incarnation's. */
typedef struct {
    uint64_t key;   /* map key: the stream id */
    uint64_t epoch; /* rn_tiers_parts_epoch's when the walk started */
    uint64_t count, bytes;
    int counting; /* the store is walking them: the counts are not known yet */
    int claimed;  /* a commit or discard holds them */
    count_waiter *waiters;
    char dir[64]; /* where its parts are: the prefix of its walk */
} staged;

static void stream_dir(uint64_t stream, char *out, size_t cap) {
    snprintf(out, cap, PARTS_PREFIX "%016llx/", (unsigned long long)stream);
}

static void part_key(uint64_t stream, uint64_t inc, const char *id, char out[PART_KEY_MAX]) {
    snprintf(out, PART_KEY_MAX, PARTS_PREFIX "%016llx/%llu/%s", (unsigned long long)stream,
             (unsigned long long)inc, id);
}

static staged *find(rn_tiers *t, uint64_t stream) {
    return rn_map_get(&t->staged, &stream, sizeof stream);
}

static void count_one(void *arg, const char *key, uint64_t size) {
    staged *st = arg;
    (void)key;
    st->count++;
    st->bytes += size;
}

/* The listing is over: its counts are known, the waiters hear them. A
 * failed listing leaves what it counted. */
static void counted(void *arg, int status) {
    staged *st = arg;
    (void)status;
    st->counting = 0;
    count_waiter *w = st->waiters;
    st->waiters = NULL;
    while (w) {
        count_waiter *next = w->next;
        w->done(w->arg, st->count, st->bytes);
        free(w);
        w = next;
    }
}

/* Forgets the counts of stream and ends its claim: the next use walks its
 * parts again (after a commit used some, or a discard failed). A record
 * still being walked stays: its walk is already fresh. */
static void forget(rn_tiers *t, uint64_t stream) {
    staged *st = find(t, stream);
    if (!st)
        return;
    st->claimed = 0;
    if (st->counting)
        return;
    rn_map_remove(&t->staged, &st->key, sizeof st->key);
    free(st);
}

/* The record of stream, walked on first use, and again when it was counted
 * under another epoch and nothing holds it. */
static staged *staged_for(rn_tiers *t, uint64_t stream) {
    assert(t->cold); /* parts need a cold store: rn_tiers_keeps_parts() */
    uint64_t epoch = t->parts_epoch ? t->parts_epoch(t->parts_epoch_ctx, stream) : 0;
    staged *st = find(t, stream);
    if (st && st->epoch != epoch && !st->claimed)
        forget(t, stream);
    if ((st = find(t, stream)))
        return st;
    st = rn_xcalloc(1, sizeof *st);
    st->key = stream;
    st->epoch = epoch;
    st->counting = 1;
    rn_map_put(&t->staged, &st->key, sizeof st->key, st);
    stream_dir(stream, st->dir, sizeof st->dir);
    t->cold->ops->walk(t->cold, st->dir, count_one, counted, st);
    return st;
}

void rn_tiers_parts_epoch(rn_tiers *t, uint64_t (*epoch)(void *ctx, uint64_t stream), void *ctx) {
    t->parts_epoch = epoch;
    t->parts_epoch_ctx = ctx;
}

int rn_tiers_parts_staged(rn_tiers *t, uint64_t stream, uint64_t *count, uint64_t *bytes) {
    const staged *st = staged_for(t, stream);
    if (st->counting)
        return -EAGAIN;
    *count = st->count;
    *bytes = st->bytes;
    return 0;
}

void rn_tiers_parts_count(rn_tiers *t, uint64_t stream, rn_tiers_count_fn done, void *arg) {
    staged *st = staged_for(t, stream);
    if (!st->counting) {
        done(arg, st->count, st->bytes);
        return;
    }
    count_waiter *w = rn_xcalloc(1, sizeof *w);
    w->done = done;
    w->arg = arg;
    w->next = st->waiters;
    st->waiters = w;
}

int rn_tiers_parts_known(const rn_tiers *t, uint64_t stream, uint64_t *count, uint64_t *bytes) {
    const staged *st = t->cold ? rn_map_get(&t->staged, &stream, sizeof stream) : NULL;
    if (!st || st->counting)
        return -ENOENT;
    *count = st->count;
    *bytes = st->bytes;
    return 0;
}

static void parts_dropped(void *arg, int status) {
    char *prefix = arg;
    if (status < 0)
        rn_log(RN_LOG_WARN, "parts",
               "removing the staged parts under %s failed (%s); the sweep "
               "removes them after its grace",
               prefix, strerror(-status));
    free(prefix);
}

void rn_tiers_parts_drop(rn_tiers *t, uint64_t stream) {
    if (!t->cold || (!t->started && t->cold->network))
        return; /* recovery cannot reach a network store */
    const staged *st = find(t, stream);
    if (!st || !st->claimed) /* a claim's holder ends it; its parts go all the same */
        forget(t, stream);
    char *prefix = rn_xmalloc(64);
    stream_dir(stream, prefix, 64);
    t->cold->ops->sweep(t->cold, prefix, INT64_MAX, parts_dropped, prefix);
}

/* ---- stage ---- */

typedef struct {
    rn_tiers *t;
    uint64_t stream, inc;
    size_t len;
    char id[PART_ID_LEN + 1];
    char key[PART_KEY_MAX];
    rn_tiers_part_fn done;
    void *arg;
} stage_job;

static void part_written(void *arg, int status) {
    stage_job *j = arg;
    staged *st = find(j->t, j->stream);
    if (st && status < 0)
        st->bytes -= j->len < st->bytes ? j->len : st->bytes;
    else if (st)
        st->count++;
    j->done(j->arg, status, j->id);
    free(j);
}

void rn_tiers_part_stage(rn_tiers *t, uint64_t stream, uint64_t inc, const void *data, size_t len,
                         rn_tiers_part_fn done, void *arg) {
    staged *st = staged_for(t, stream);
    st->bytes += len; /* counted while it uploads */
    stage_job *j = rn_xcalloc(1, sizeof *j);
    *j = (stage_job){.t = t, .stream = stream, .inc = inc, .len = len, .done = done, .arg = arg};
    uint8_t rnd[PART_ID_LEN / 2];
    if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd)
        memset(rnd, 0, sizeof rnd);
    for (size_t i = 0; i < sizeof rnd; i++)
        snprintf(j->id + 2 * i, 3, "%02x", rnd[i]);
    part_key(stream, inc, j->id, j->key);
    t->cold->ops->put(t->cold, j->key, data, len, part_written, j);
}

/* ---- claims ---- */

int rn_tiers_parts_claim(rn_tiers *t, uint64_t stream) {
    staged *st = staged_for(t, stream);
    if (st->claimed)
        return -EBUSY;
    st->claimed = 1;
    return 0;
}

void rn_tiers_parts_unclaim(rn_tiers *t, uint64_t stream) {
    staged *st = find(t, stream);
    assert(st && st->claimed);
    st->claimed = 0;
}

static void assert_claimed(rn_tiers *t, uint64_t stream) {
    const staged *st = find(t, stream);
    assert(st && st->claimed); /* a claim keeps its record: sweeps skip it */
    (void)st;
}

/* Parts keys of one operation on (stream, inc), owned by it. */
typedef struct {
    rn_tiers *t;
    uint64_t stream, inc;
    char **keys;
    size_t n, cap;
    rn_tiers_status_fn done;
    rn_tiers_assembled_fn assembled;
    void *arg;
    char dir[64]; /* the parts' prefix */
    char body_key[RN_TIERS_KEY_MAX];
} parts_job;

static parts_job *parts_job_new(rn_tiers *t, uint64_t stream, uint64_t inc) {
    assert_claimed(t, stream);
    parts_job *j = rn_xcalloc(1, sizeof *j);
    j->t = t;
    j->stream = stream;
    j->inc = inc;
    return j;
}

static void add_key(parts_job *j, const char *key) {
    if (j->n == j->cap) {
        j->cap = j->cap ? 2 * j->cap : 16;
        j->keys = rn_xrealloc(j->keys, j->cap * sizeof *j->keys);
    }
    j->keys[j->n++] = rn_xstrdup(key);
}

static void add_part(parts_job *j, const char *id) {
    assert(!strchr(id, '/')); /* an id names a part, never another path */
    char key[PART_KEY_MAX];
    part_key(j->stream, j->inc, id, key);
    add_key(j, key);
}

static void parts_job_free(parts_job *j) {
    for (size_t i = 0; i < j->n; i++)
        free(j->keys[i]);
    free(j->keys);
    free(j);
}

/* ---- discard ---- */

static void discarded(void *arg, int status) {
    parts_job *j = arg;
    staged *st = find(j->t, j->stream);
    if (status < 0) {
        forget(j->t, j->stream); /* some may remain: count them anew */
    } else if (st) {
        st->claimed = 0;
        st->count = 0;
        st->bytes = 0;
    }
    j->done(j->arg, status);
    parts_job_free(j);
}

static void collect_part(void *arg, const char *key, uint64_t size) {
    (void)size;
    add_key(arg, key);
}

static void listed_for_discard(void *arg, int status) {
    parts_job *j = arg;
    if (status < 0) {
        discarded(j, status);
        return;
    }
    j->t->cold->ops->remove(j->t->cold, (const char *const *)j->keys, j->n, discarded, j);
}

void rn_tiers_parts_discard(rn_tiers *t, uint64_t stream, rn_tiers_status_fn done, void *arg) {
    parts_job *j = parts_job_new(t, stream, 0);
    j->done = done;
    j->arg = arg;
    stream_dir(stream, j->dir, sizeof j->dir);
    t->cold->ops->walk(t->cold, j->dir, collect_part, listed_for_discard, j);
}

/* ---- assemble, release ---- */

static void parts_assembled(void *arg, int64_t size) {
    parts_job *j = arg;
    assert(j->t->copies > 0);
    j->t->copies--;
    j->assembled(j->arg, size < 0 ? (int)size : 0, 1, j->body_key, size < 0 ? 0 : (uint64_t)size);
    parts_job_free(j);
}

void rn_tiers_parts_assemble(rn_tiers *t, uint64_t stream, uint64_t inc, const char *const *ids,
                             size_t n, uint64_t max_bytes, rn_tiers_observe_fn observe,
                             void *observe_arg, rn_tiers_assembled_fn done, void *arg) {
    assert_claimed(t, stream);
    if (t->copies >= RN_TIERS_MAX_COMMIT_COPIES) {
        done(arg, -EBUSY, 1, "", 0); /* refused before the copy */
        return;
    }
    t->copies++;
    parts_job *j = parts_job_new(t, stream, inc);
    for (size_t i = 0; i < n; i++)
        add_part(j, ids[i]);
    j->assembled = done;
    j->arg = arg;
    rn_tiers_body_key(t, stream, j->body_key);
    t->cold->ops->concat(t->cold, j->body_key, (const char *const *)j->keys, j->n, max_bytes,
                         observe, observe_arg, parts_assembled, j);
}

static void released(void *arg, int status) {
    parts_job *j = arg;
    (void)status;            /* a part that stays is swept after the grace period */
    forget(j->t, j->stream); /* the next use counts what is left */
    parts_job_free(j);
}

void rn_tiers_parts_release(rn_tiers *t, uint64_t stream, uint64_t inc, const char *const *ids,
                            size_t n) {
    parts_job *j = parts_job_new(t, stream, inc);
    for (size_t i = 0; i < n; i++)
        add_part(j, ids[i]);
    t->cold->ops->remove(t->cold, (const char *const *)j->keys, j->n, released, j);
}

/* ---- sweep ---- */

static void parts_swept(void *arg, int status) {
    rn_tiers *t = arg;
    if (status < 0) /* what stays is tried again at the next sweep */
        rn_log_throttled(&t->parts_failures, 60000, RN_LOG_WARN, "parts_sweep",
                         "sweeping stale staged parts failed (%s); trying again",
                         strerror(-status));
    staged **idle = rn_xcalloc(t->staged.count + 1, sizeof *idle);
    size_t n = 0, i = 0;
    void *v;
    while (rn_map_next(&t->staged, &i, &v)) {
        staged *st = v;
        if (!st->claimed && !st->counting)
            idle[n++] = st;
    }
    for (size_t k = 0; k < n; k++) {
        rn_map_remove(&t->staged, &idle[k]->key, sizeof idle[k]->key);
        free(idle[k]);
    }
    free(idle);
}

void rn_tiers_parts_sweep(rn_tiers *t) {
    int64_t older_than = (int64_t)time(NULL) - (int64_t)(t->parts_grace_ms / 1000);
    t->cold->ops->sweep(t->cold, PARTS_PREFIX, older_than, parts_swept, t);
}

void rn_tiers_parts_free(rn_tiers *t) {
    size_t i = 0;
    void *v;
    while (rn_map_next(&t->staged, &i, &v)) {
        staged *st = v;
        assert(!st->waiters); /* no call is in flight at close */
        free(st);
    }
    rn_map_free(&t->staged);
}
