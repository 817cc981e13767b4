/*
 * backup.c — taking a backup on a running server. See backup.h.
 *
 * A job walks its streams in order, and each stream's parts in order
 * (data, index, body; backup_format.h): it reads one piece on the loop
 * thread, hands it to the destination's put, and reads the next when the
 * put reported, so one piece (RN_BACKUP_PIECE) is in memory at a time. A
 * body is read through a descriptor the tiers open, which keeps the bytes
 * even if a later snapshot supersedes it meanwhile. A piece of history in
 * the cold store whose chunk the read cache lacks is fetched into it
 * (asynchronously, on the loop) and read again. Then the state object goes
 * last.
 */
#include "ops/backup.h"
#include "ops/backup_format.h"
#include "ops/backup_refs.h"
#include "protocol/params.h"
#include "protocol/reply.h"
#include "util/log.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

typedef struct job job;

struct rn_backups {
    rn_engine *engine;
    rn_tiers *tiers;
    rn_store *dest;
    rn_backup_refs *refs;
    rn_backup_settle_fn settle; /* cluster mode: the wait before the instant */
    void *settle_ctx;
    job *running; /* the backup being taken, or NULL */
};

struct job {
    rn_backups *owner;
    rn_request *req;
    char name[RN_BACKUP_NAME_MAX + 1];
    char key[RN_BACKUP_KEY_MAX];
    int exists; /* the listing found the name's state object */
    int begun;  /* the instant was taken: its cold bodies are pinned */
    uint64_t backup_id;
    rn_buf image;
    rn_backup_stream *streams;
    size_t n, i;         /* streams, and the one being copied */
    rn_backup_part part; /* its part being copied */
    uint64_t pos;        /* the part's next position */
    int body_fd;         /* its body, open (or -1) */
    uint64_t body_fd_off;
    rn_buf piece;        /* the object being written */
    unsigned cold_waits; /* fetches of cold history for the current piece */
    uint64_t objects, bytes, bodies_copied, bodies_referenced;
};

static void step(job *j);

/* 1 when the backup names b's body by key rather than copying it: a body
 * of a shared cold store, on a single node (backup.h). */
static int body_referenced(const rn_backups *b, const rn_backup_stream *s) {
    return s->has_body && !b->settle && rn_tiers_body_shared(b->tiers, s->body_cold);
}

/* How long a cluster node waits for its groups to settle. */
#define SETTLE_TIMEOUT_MS 10000

/* Fetches of one piece's cold chunks after which the backup gives up: a
 * read cache whose chunks other readers evict as fast as they come. */
#define COLD_WAITS_MAX 32

static void finish(job *j, int status, rn_error e) {
    if (status == 200) {
        rn_buf h = {0}, body = {0};
        rn_reply_common(&h);
        rn_buf_append_str(&h, "Content-Type: application/json\r\nCache-Control: no-store\r\n");
        rn_buf_appendf(&body,
                       "{\"name\":\"%s\",\"streams\":%zu,\"objects\":%llu,\"bytes\":%llu,"
                       "\"bodies_copied\":%llu,\"bodies_referenced\":%llu}\n",
                       j->name, j->n, (unsigned long long)j->objects, (unsigned long long)j->bytes,
                       (unsigned long long)j->bodies_copied,
                       (unsigned long long)j->bodies_referenced);
        rn_http_respond(j->req, 200, &h, &body);
        rn_log(RN_LOG_INFO, "backup", "backup %s taken: %zu streams, %llu objects, %llu bytes",
               j->name, j->n, (unsigned long long)j->objects, (unsigned long long)j->bytes);
    } else {
        rn_log(RN_LOG_WARN, "backup", "backup %s failed: %s (%s)", j->name, rn_error_code(e),
               status < 0 ? strerror(-status) : "");
        rn_buf extra = {0};
        if (rn_error_status(e) == 503 || e == RN_E_COLD_STORE_FAILED)
            rn_buf_append_str(&extra, "Retry-After: 1\r\n");
        rn_reply_error(j->req, e, extra.len ? &extra : NULL);
        rn_buf_free(&extra);
    }
    if (j->body_fd >= 0)
        close(j->body_fd);
    if (j->begun)
        rn_backup_refs_backup_ended(j->owner->refs);
    j->owner->running = NULL;
    rn_request_release(j->req);
    rn_buf_free(&j->image);
    rn_buf_free(&j->piece);
    free(j->streams);
    free(j);
}

static void piece_written(void *arg, int status) {
    job *j = arg;
    if (status < 0) {
        finish(j, status, RN_E_BACKUP_STORE_FAILED);
        return;
    }
    j->objects++;
    j->bytes += j->piece.len;
    j->piece.len = 0;
    step(j);
}

static void put_piece(job *j) {
    rn_store *d = j->owner->dest;
    d->ops->put(d, j->key, j->piece.data, j->piece.len, piece_written, j);
}

static void state_written(void *arg, int status) {
    job *j = arg;
    finish(j, status < 0 ? status : 200, RN_E_BACKUP_STORE_FAILED);
}

static void body_opened(void *arg, int fd, uint64_t fd_off) {
    job *j = arg;
    if (fd < 0) { /* superseded or deleted since the instant: gone */
        finish(j, fd, fd == -ENOENT ? RN_E_BACKUP_INTERRUPTED : RN_E_INTERNAL);
        return;
    }
    j->body_fd = fd;
    j->body_fd_off = fd_off;
    step(j);
}

static void cold_fetched(void *arg, int status) {
    job *j = arg;
    if (status < 0)
        finish(j, status, status == -EAGAIN ? RN_E_COLD_BACKPRESSURE : RN_E_COLD_STORE_FAILED);
    else
        step(j); /* reads the piece again */
}

/* Reads the body's next piece into j->piece. Returns 0 or -errno. */
static int read_body_piece(job *j, uint64_t end) {
    size_t len = (size_t)(end - j->pos);
    rn_buf_reserve(&j->piece, len);
    size_t got = 0;
    while (got < len) {
        ssize_t r = pread(j->body_fd, j->piece.data + got, len - got,
                          (off_t)(j->body_fd_off + j->pos + got));
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return r < 0 ? -errno : -EIO;
        got += (size_t)r;
    }
    j->piece.len = len;
    return 0;
}

/* Starts copying the next piece of the current part of stream b (or its
 * body's opening): 1 when it did (or the job finished), 0 when the part
 * is done. An empty body has no piece. */
static int next_piece(job *j, const rn_backup_stream *b) {
    rn_tiers *t = j->owner->tiers;
    int body = j->part == RN_BACKUP_BODY;
    if (body && (!b->has_body || body_referenced(j->owner, b)))
        return 0;
    uint64_t limit = j->part == RN_BACKUP_DATA    ? b->tail
                     : j->part == RN_BACKUP_INDEX ? b->appends
                                                  : b->body_size;
    if (j->pos >= limit)
        return 0;
    if (body && j->body_fd < 0) {
        rn_tiers_body_read(t, b->body_cold, b->body_key, 0, b->body_size, body_opened, j);
        return 1;
    }
    uint64_t end = rn_backup_piece_end(j->part, j->pos, limit);
    int rc = body ? read_body_piece(j, end)
                  : rn_engine_backup_read(j->owner->engine, b, j->part == RN_BACKUP_INDEX, j->pos,
                                          end, &j->piece);
    if (rc == -ENODATA && j->cold_waits++ < COLD_WAITS_MAX) {
        rn_engine_cold_fetch(j->owner->engine, cold_fetched, j);
        return 1;
    }
    if (rc < 0) {
        finish(j, rc,
               rc == -ESTALE    ? RN_E_BACKUP_INTERRUPTED
               : rc == -ENODATA ? RN_E_COLD_BACKPRESSURE
                                : RN_E_INTERNAL);
        return 1;
    }
    j->cold_waits = 0;
    rn_backup_piece_key(j->name, j->part, b->id, j->pos, j->key);
    j->pos = end;
    put_piece(j);
    return 1;
}

/* Copies the next piece, or moves on to the next part, stream, or the
 * state object. */
static void step(job *j) {
    while (j->i < j->n) {
        const rn_backup_stream *b = &j->streams[j->i];
        if (next_piece(j, b))
            return;
        if (j->part == RN_BACKUP_BODY) {
            if (body_referenced(j->owner, b))
                j->bodies_referenced++;
            else if (b->has_body)
                j->bodies_copied++;
            if (j->body_fd >= 0)
                close(j->body_fd);
            j->body_fd = -1;
            j->i++;
            j->part = RN_BACKUP_DATA;
            j->pos = j->i < j->n ? j->streams[j->i].data_from : 0;
        } else {
            j->part = j->part == RN_BACKUP_DATA ? RN_BACKUP_INDEX : RN_BACKUP_BODY;
            j->pos = 0;
        }
    }
    rn_backup_state_encode(j->backup_id, &j->image, &j->piece);
    rn_backup_state_key(j->name, j->key);
    rn_store *d = j->owner->dest;
    d->ops->put(d, j->key, j->piece.data, j->piece.len, state_written, j);
}

/* The instant: the state as of now, then the copy. */
static void begin(job *j) {
    if (getrandom(&j->backup_id, sizeof j->backup_id, 0) != (ssize_t)sizeof j->backup_id) {
        finish(j, -EIO, RN_E_INTERNAL);
        return;
    }
    rn_engine_backup_state(j->owner->engine, &j->image, &j->streams, &j->n);
    j->begun = 1;
    for (size_t i = 0; i < j->n; i++)
        if (body_referenced(j->owner, &j->streams[i]))
            rn_backup_refs_pin(j->owner->refs, j->streams[i].body_key);
    j->pos = j->n ? j->streams[0].data_from : 0;
    step(j);
}

static void listed_one(void *arg, const char *key, uint64_t size) {
    job *j = arg;
    (void)size;
    if (strcmp(key, j->key) == 0)
        j->exists = 1;
}

static void settled(void *arg, int status) {
    job *j = arg;
    if (status < 0)
        finish(j, status, status == -EXDEV ? RN_E_BACKUP_NOT_WHOLE : RN_E_NO_LEADER);
    else
        begin(j);
}

static void listed(void *arg, int status) {
    job *j = arg;
    rn_backups *b = j->owner;
    if (status < 0)
        finish(j, status, RN_E_BACKUP_STORE_FAILED);
    else if (j->exists)
        finish(j, -EEXIST, RN_E_BACKUP_EXISTS);
    else if (b->settle)
        b->settle(b->settle_ctx, SETTLE_TIMEOUT_MS, settled, j);
    else
        begin(j);
}

rn_backups *rn_backups_new(uv_loop_t *loop, rn_engine *e, rn_tiers *t, rn_store *dest,
                           uint64_t refresh_ms) {
    rn_backups *b = rn_xcalloc(1, sizeof *b);
    b->engine = e;
    b->tiers = t;
    b->dest = dest;
    b->refs = rn_backup_refs_new(loop, dest, refresh_ms);
    return b;
}

void rn_backups_settle_with(rn_backups *b, rn_backup_settle_fn settle, void *ctx) {
    b->settle = settle;
    b->settle_ctx = ctx;
}

int rn_backups_hold(const rn_backups *b, const char *key) {
    return rn_backup_refs_hold(b->refs, key);
}

void rn_backups_handle(rn_backups *b, rn_request *req, const char *query, size_t query_len) {
    char name[RN_BACKUP_NAME_MAX + 2];
    long len;
    rn_param_fault f;
    if (rn_param_query(query, query_len, "name", RN_E_INVALID_BACKUP_NAME, name, sizeof name, &len,
                       &f)) {
        rn_reply_param_fault(req, &f);
        return;
    }
    if (len < 0 || !rn_backup_name_valid(name, (size_t)len)) {
        rn_reply_error(req, RN_E_INVALID_BACKUP_NAME, NULL);
        return;
    }
    if (b->running) {
        rn_buf extra = {0};
        rn_buf_append_str(&extra, "Retry-After: 5\r\n");
        rn_reply_error(req, RN_E_BACKUP_IN_PROGRESS, &extra);
        return;
    }
    job *j = rn_xcalloc(1, sizeof *j);
    j->owner = b;
    j->req = req;
    rn_request_hold(req);
    memcpy(j->name, name, (size_t)len);
    j->body_fd = -1;
    b->running = j;
    rn_backup_state_key(j->name, j->key);
    char prefix[RN_BACKUP_NAME_MAX + 2];
    snprintf(prefix, sizeof prefix, "%s/", j->name);
    b->dest->ops->list(b->dest, prefix, listed_one, listed, j);
}

void rn_backups_stop(rn_backups *b) {
    if (!b)
        return;
    rn_backup_refs_stop(b->refs);
    if (b->dest->ops->stop)
        b->dest->ops->stop(b->dest);
}

void rn_backups_free(rn_backups *b) {
    if (!b)
        return;
    assert(!b->running);
    rn_backup_refs_free(b->refs);
    b->dest->ops->close(b->dest);
    free(b);
}
