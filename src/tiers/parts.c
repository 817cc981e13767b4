/*
 * parts.c — snapshot parts staged in the cold store (ext §2.2 "Upload in
 * Parts"). See tiers.h.
 *
 * A part is the object "parts/<stream id>/<incarnation>/<part id>", durable
 * before it is reported staged. The parts of an incarnation are counted in
 * memory (from a listing the first time the incarnation is used, then kept
 * up to date as parts come and go) so that surfaces can decide bounds from a
 * request head. The counts of incarnations nobody is using are forgotten at
 * each sweep, which also removes parts older than the grace period: the
 * next use lists again.
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

/* The staged parts of one stream incarnation. */
typedef struct {
    uint64_t key[2]; /* map key: stream id, incarnation */
    uint64_t count, bytes;
    int counting; /* the store is listing them: the counts are not known yet */
    int claimed;  /* a commit or discard holds them */
    count_waiter *waiters;
    char dir[64]; /* where its parts are: the prefix of its listing */
} staged;

static void parts_dir(uint64_t stream, uint64_t inc, char *out, size_t cap) {
    snprintf(out, cap, PARTS_PREFIX "%016llx/%llu/", (unsigned long long)stream,
             (unsigned long long)inc);
}

static void part_key(uint64_t stream, uint64_t inc, const char *id, char out[PART_KEY_MAX]) {
    char dir[64];
    parts_dir(stream, inc, dir, sizeof dir);
    snprintf(out, PART_KEY_MAX, "%s%s", dir, id);
}

static staged *find(rn_tiers *t, uint64_t stream, uint64_t inc) {
    uint64_t key[2] = {stream, inc};
    return rn_map_get(&t->staged, key, sizeof key);
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

/* The record of (stream, inc), listed on first use. */
static staged *staged_for(rn_tiers *t, uint64_t stream, uint64_t inc) {
    assert(t->cold); /* parts need a cold store: rn_tiers_keeps_parts() */
    staged *st = find(t, stream, inc);
    if (st)
        return st;
    st = rn_xcalloc(1, sizeof *st);
    st->key[0] = stream;
    st->key[1] = inc;
    st->counting = 1;
    rn_map_put(&t->staged, st->key, sizeof st->key, st);
    parts_dir(stream, inc, st->dir, sizeof st->dir);
    t->cold->ops->list(t->cold, st->dir, count_one, counted, st);
    return st;
}

/* Forgets the counts of (stream, inc) and ends its claim: the next use
 * lists its parts again (after a commit used some, or a discard failed). A
 * record still being listed stays: its listing is already fresh. */
static void forget(rn_tiers *t, uint64_t stream, uint64_t inc) {
    staged *st = find(t, stream, inc);
    if (!st)
        return;
    st->claimed = 0;
    if (st->counting)
        return;
    rn_map_remove(&t->staged, st->key, sizeof st->key);
    free(st);
}

int rn_tiers_parts_staged(rn_tiers *t, uint64_t stream, uint64_t inc, uint64_t *count,
                          uint64_t *bytes) {
    const staged *st = staged_for(t, stream, inc);
    if (st->counting)
        return -EAGAIN;
    *count = st->count;
    *bytes = st->bytes;
    return 0;
}

void rn_tiers_parts_count(rn_tiers *t, uint64_t stream, uint64_t inc, rn_tiers_count_fn done,
                          void *arg) {
    staged *st = staged_for(t, stream, inc);
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

int rn_tiers_parts_known(const rn_tiers *t, uint64_t stream, uint64_t inc, uint64_t *count,
                         uint64_t *bytes) {
    uint64_t key[2] = {stream, inc};
    const staged *st = t->cold ? rn_map_get(&t->staged, key, sizeof key) : NULL;
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
    staged **gone = rn_xcalloc(t->staged.count + 1, sizeof *gone);
    size_t n = 0, i = 0;
    void *v;
    while (rn_map_next(&t->staged, &i, &v)) {
        staged *st = v;
        if (st->key[0] == stream && !st->claimed && !st->counting)
            gone[n++] = st;
    }
    for (size_t k = 0; k < n; k++) {
        rn_map_remove(&t->staged, gone[k]->key, sizeof gone[k]->key);
        free(gone[k]);
    }
    free(gone);
    char *prefix = rn_xmalloc(64);
    snprintf(prefix, 64, PARTS_PREFIX "%016llx/", (unsigned long long)stream);
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
    staged *st = find(j->t, j->stream, j->inc);
    if (st && status < 0)
        st->bytes -= j->len < st->bytes ? j->len : st->bytes;
    else if (st)
        st->count++;
    j->done(j->arg, status, j->id);
    free(j);
}

void rn_tiers_part_stage(rn_tiers *t, uint64_t stream, uint64_t inc, const void *data, size_t len,
                         rn_tiers_part_fn done, void *arg) {
    staged *st = staged_for(t, stream, inc);
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

int rn_tiers_parts_claim(rn_tiers *t, uint64_t stream, uint64_t inc) {
    staged *st = staged_for(t, stream, inc);
    if (st->claimed)
        return -EBUSY;
    st->claimed = 1;
    return 0;
}

void rn_tiers_parts_unclaim(rn_tiers *t, uint64_t stream, uint64_t inc) {
    staged *st = find(t, stream, inc);
    assert(st && st->claimed);
    st->claimed = 0;
}

static void assert_claimed(rn_tiers *t, uint64_t stream, uint64_t inc) {
    const staged *st = find(t, stream, inc);
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
    assert_claimed(t, stream, inc);
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
    staged *st = find(j->t, j->stream, j->inc);
    if (status < 0) {
        forget(j->t, j->stream, j->inc); /* some may remain: count them anew */
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

void rn_tiers_parts_discard(rn_tiers *t, uint64_t stream, uint64_t inc, rn_tiers_status_fn done,
                            void *arg) {
    parts_job *j = parts_job_new(t, stream, inc);
    j->done = done;
    j->arg = arg;
    parts_dir(stream, inc, j->dir, sizeof j->dir);
    t->cold->ops->list(t->cold, j->dir, collect_part, listed_for_discard, j);
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
    assert_claimed(t, stream, inc);
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
    (void)status;                    /* a part that stays is swept after the grace period */
    forget(j->t, j->stream, j->inc); /* the next use counts what is left */
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
        rn_map_remove(&t->staged, idle[k]->key, sizeof idle[k]->key);
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
