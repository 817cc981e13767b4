/*
 * backup_refs.c — the cold bodies the backups at the destination
 * reference. See backup_refs.h.
 *
 * A refresh lists the destination, then reads and decodes its state
 * objects one at a time, each on a worker thread (an object of a node
 * with a million streams is about 100 MB), into a new set, which replaces
 * the current one only once complete. One refresh runs at a time; one asked for meanwhile
 * starts when it ends.
 */
#include "ops/backup_refs.h"
#include "engine/engine.h"
#include "ops/backup_format.h"
#include "util/buf.h"
#include "util/log.h"
#include "util/map.h"

#include <assert.h>
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct {
    char *key;
    uint64_t size;
} state_object;

struct rn_backup_refs {
    uv_loop_t *loop;
    rn_store *dest;
    uv_timer_t timer;
    rn_map keys;  /* the last refresh's: key -> its copy (the value) */
    rn_map pins;  /* the backup being taken's: the same */
    int complete; /* the last refresh succeeded */
    int running, again, stopped;
    uint64_t started;     /* refreshes started (the running one's number) */
    int releasing;        /* the pins go once a refresh numbered above... */
    uint64_t unpin_after; /* ... this one succeeded */
    state_object *states; /* the running refresh's listing */
    size_t nstates, next; /* ... and the next one to read */
    rn_map fresh;         /* the running refresh's set */
    int failed;           /* a reason was logged for it */
    int logged_failure;   /* the last refresh's failure was logged */
};

static void refresh(rn_backup_refs *r);

/* Adds key to m (a copy). Returns 0, or -1 when m holds max keys. */
static int add_key(rn_map *m, const char *key, size_t max) {
    size_t len = strlen(key);
    if (rn_map_get(m, key, len))
        return 0;
    if (m->count >= max)
        return -1;
    char *copy = rn_xstrdup(key);
    rn_map_put(m, copy, len, copy);
    return 0;
}

/* Logs why the running refresh failed: every cold body stays. */
__attribute__((format(printf, 2, 3))) static void fail(rn_backup_refs *r, const char *fmt, ...) {
    char why[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    if (!r->stopped) /* stopping ends the destination's calls failed */
        rn_log(RN_LOG_ERROR, "backup-refs", "%s: keeping every cold body", why);
    r->failed = 1;
}

static void refresh_end(rn_backup_refs *r) {
    for (size_t i = 0; i < r->nstates; i++)
        free(r->states[i].key);
    free(r->states);
    r->states = NULL;
    r->nstates = r->next = 0;
    if (r->failed) {
        rn_map_free_values(&r->fresh);
        r->complete = 0;
        r->logged_failure = 1;
    } else {
        rn_map_free_values(&r->keys);
        r->keys = r->fresh;
        memset(&r->fresh, 0, sizeof r->fresh);
        r->complete = 1;
        if (r->logged_failure)
            rn_log(RN_LOG_INFO, "backup-refs",
                   "the backups' references are known again: %zu cold bodies", r->keys.count);
        r->logged_failure = 0;
        if (r->releasing && r->started > r->unpin_after) {
            rn_map_free_values(&r->pins);
            r->releasing = 0;
        }
    }
    r->running = 0;
    if (r->again) {
        r->again = 0;
        refresh(r);
    }
}

static void read_next(rn_backup_refs *r);

/* One state object read and decoded on a worker: the loop thread only
 * adds the cold body keys it names to the set. */
typedef struct {
    uv_work_t work;
    rn_backup_refs *r;
    const state_object *object;
    int fd;
    uint64_t fd_off;
    int rc;         /* < 0: the read failed (-errno); 1: it does not decode */
    char **bodies;  /* the cold body keys it names (copies) */
    size_t nbodies; /* at most RN_BACKUP_REFS_MAX_KEYS + 1 */
} state_job;

static void decode_work(uv_work_t *w) {
    state_job *j = w->data;
    rn_buf data = {0};
    j->rc = rn_backup_read_fd(j->fd, j->fd_off, (size_t)j->object->size, &data);
    uint64_t backup_id;
    const uint8_t *image;
    size_t image_len, n = 0;
    rn_backup_stream *streams = NULL;
    rn_restore *img = NULL;
    if (j->rc == 0 &&
        (rn_backup_state_decode(data.data, data.len, &backup_id, &image, &image_len) != 0 ||
         !(img = rn_restore_decode(image, image_len, &streams, &n))))
        j->rc = 1;
    j->bodies = rn_xcalloc(n ? n : 1, sizeof *j->bodies);
    for (size_t i = 0; i < n && j->nbodies <= RN_BACKUP_REFS_MAX_KEYS; i++)
        if (streams[i].has_body && streams[i].body_cold)
            j->bodies[j->nbodies++] = rn_xstrdup(streams[i].body_key);
    free(streams);
    rn_restore_free(img);
    rn_buf_free(&data);
}

static void decode_done(uv_work_t *w, int status) {
    (void)status; /* never cancelled */
    state_job *j = w->data;
    rn_backup_refs *r = j->r;
    close(j->fd);
    if (j->rc < 0)
        fail(r, "backup state object %s cannot be read: %s", j->object->key, strerror(-j->rc));
    else if (j->rc)
        fail(r, "backup state object %s does not decode (remove or repair it)", j->object->key);
    for (size_t i = 0; i < j->nbodies; i++) {
        if (!r->failed && add_key(&r->fresh, j->bodies[i], RN_BACKUP_REFS_MAX_KEYS) != 0)
            fail(r, "the backups reference more than %d cold bodies", RN_BACKUP_REFS_MAX_KEYS);
        free(j->bodies[i]);
    }
    free(j->bodies);
    free(j);
    read_next(r);
}

static void state_opened(void *arg, int fd, uint64_t fd_off) {
    rn_backup_refs *r = arg;
    const state_object *s = &r->states[r->next++];
    if (fd == -ENOENT) { /* removed since the listing: retired */
        read_next(r);
        return;
    }
    if (fd < 0) {
        fail(r, "backup state object %s cannot be read: %s", s->key, strerror(-fd));
        read_next(r);
        return;
    }
    state_job *j = rn_xcalloc(1, sizeof *j);
    *j = (state_job){.r = r, .object = s, .fd = fd, .fd_off = fd_off};
    j->work.data = j;
    uv_queue_work(r->loop, &j->work, decode_work, decode_done);
}

static void read_next(rn_backup_refs *r) {
    if (r->stopped) /* the destination takes no more calls */
        r->failed = 1;
    if (r->failed || r->next == r->nstates) {
        refresh_end(r);
        return;
    }
    const state_object *s = &r->states[r->next];
    if (s->size > RN_BACKUP_REFS_MAX_STATE) {
        fail(r, "backup state object %s is larger than %llu bytes", s->key,
             (unsigned long long)RN_BACKUP_REFS_MAX_STATE);
        refresh_end(r);
        return;
    }
    r->dest->ops->open(r->dest, s->key, 0, s->size, state_opened, r);
}

/* A listing entry: keeps "<name>/state" objects. */
static void listed_one(void *arg, const char *key, uint64_t size) {
    rn_backup_refs *r = arg;
    const char *slash = strchr(key, '/');
    if (!slash || strcmp(slash, "/state") != 0 || !rn_backup_name_valid(key, (size_t)(slash - key)))
        return;
    if (r->nstates >= RN_BACKUP_REFS_MAX_KEYS) {
        if (!r->failed)
            fail(r, "the backup destination holds more than %d backups", RN_BACKUP_REFS_MAX_KEYS);
        return;
    }
    r->states = rn_xrealloc(r->states, (r->nstates + 1) * sizeof *r->states);
    r->states[r->nstates++] = (state_object){rn_xstrdup(key), size};
}

static void listed(void *arg, int status) {
    rn_backup_refs *r = arg;
    if (status < 0)
        fail(r, "the backup destination cannot be listed: %s", strerror(-status));
    read_next(r);
}

static void refresh(rn_backup_refs *r) {
    if (r->stopped)
        return;
    if (r->running) {
        r->again = 1;
        return;
    }
    r->running = 1;
    r->failed = 0;
    r->started++;
    r->dest->ops->walk(r->dest, "", listed_one, listed, r);
}

static void on_timer(uv_timer_t *timer) {
    refresh(timer->data);
}

rn_backup_refs *rn_backup_refs_new(uv_loop_t *loop, rn_store *dest, uint64_t refresh_ms) {
    assert(refresh_ms > 0 && dest->ops->walk);
    rn_backup_refs *r = rn_xcalloc(1, sizeof *r);
    r->loop = loop;
    r->dest = dest;
    uv_timer_init(loop, &r->timer);
    r->timer.data = r;
    uv_timer_start(&r->timer, on_timer, refresh_ms, refresh_ms);
    refresh(r);
    return r;
}

int rn_backup_refs_hold(const rn_backup_refs *r, const char *key) {
    size_t len = strlen(key);
    return !r->complete || rn_map_get(&r->keys, key, len) || rn_map_get(&r->pins, key, len);
}

void rn_backup_refs_pin(rn_backup_refs *r, const char *key) {
    add_key(&r->pins, key, SIZE_MAX); /* one backup's instant: bounded by the streams */
    r->releasing = 0;                 /* a backup runs: its pins stay until it ended */
}

void rn_backup_refs_backup_ended(rn_backup_refs *r) {
    r->releasing = 1;
    r->unpin_after = r->started; /* the running refresh may have listed before the end */
    refresh(r);
}

void rn_backup_refs_stop(rn_backup_refs *r) {
    if (!r)
        return;
    r->stopped = 1;
    uv_close((uv_handle_t *)&r->timer, NULL);
}

void rn_backup_refs_free(rn_backup_refs *r) {
    if (!r)
        return;
    rn_map_free_values(&r->keys);
    rn_map_free_values(&r->pins);
    rn_map_free_values(&r->fresh);
    for (size_t i = 0; i < r->nstates; i++)
        free(r->states[i].key);
    free(r->states);
    free(r);
}
