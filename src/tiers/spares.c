/*
 * spares.c — the reserve of empty stream file sets (spares.h).
 *
 * Sets are named s<seq>.dat, .idx and .sum, seq counting from 0 in each
 * process; the ready ones wait in a ring, oldest first. One refill at a
 * time runs on libuv's pool: it makes up to BATCH sets with numbers the
 * loop chose (the first one also removes every file an earlier process
 * left), and its completion adds those it made to the ring. Renaming a
 * file allocates no inode: about 20 us against 40 us to create one on a
 * quiet machine (BENCHMARKS.md, issue 31), and it does not wait for the
 * pool, so taking a set is done on the loop thread.
 */
#define _GNU_SOURCE
#include "tiers/spares.h"
#include "util/buf.h"
#include "util/log.h"
#include "util/metrics.h"

#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define BATCH 64 /* sets one refill makes at most */

struct rn_spares {
    uv_loop_t *loop;
    rn_streamfiles *files;
    int dirfd; /* <data>/spares */
    unsigned target;
    uint64_t *ready; /* ring of ready set numbers, capacity target */
    unsigned head, count;
    uint64_t next_seq;
    int cleared; /* an earlier process's files are gone */
    int started, stopped, refilling;
    uv_work_t work;
    /* the refill in flight: sets [first, first + want); made by the worker */
    uint64_t first;
    unsigned want, made;
    int error; /* the worker's first failure (-errno), or 0 */
};

static void set_name(uint64_t seq, int kind, char *out, size_t cap) {
    snprintf(out, cap, "s%llu.%s", (unsigned long long)seq, rn_stream_file_suffix[kind]);
}

rn_spares *rn_spares_open(uv_loop_t *loop, rn_streamfiles *files, const char *data_dir,
                          unsigned target) {
    assert(loop && files && data_dir && target > 0);
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s/spares", data_dir);
    int fd = mkdir(dir, 0755) < 0 && errno != EEXIST
                 ? -1
                 : open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
        rn_log(RN_LOG_WARN, "start", "no spare stream files (%s: %s)", dir, strerror(errno));
        return NULL;
    }
    rn_spares *sp = rn_xcalloc(1, sizeof *sp);
    sp->loop = loop;
    sp->files = files;
    sp->dirfd = fd;
    sp->target = target;
    sp->ready = rn_xcalloc(target, sizeof *sp->ready);
    sp->work.data = sp;
    return sp;
}

/* Removes every file of the reserve's directory (an earlier process's). */
static int clear_dir(int dirfd) {
    int fd = dup(dirfd);
    DIR *d = fd < 0 ? NULL : fdopendir(fd);
    if (!d) {
        if (fd >= 0)
            close(fd);
        return -errno;
    }
    struct dirent *de;
    while ((de = readdir(d)))
        if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
            unlinkat(dirfd, de->d_name, 0);
    closedir(d);
    return 0;
}

/* On the pool: makes the sets of the refill in flight, stopping at the
 * first failure (a set it could not finish is removed). */
static void refill_work(uv_work_t *w) {
    rn_spares *sp = w->data;
    if (!sp->cleared && (sp->error = clear_dir(sp->dirfd)) < 0)
        return;
    for (; sp->made < sp->want; sp->made++) {
        uint64_t seq = sp->first + sp->made;
        for (int kind = 0; kind < RN_STREAM_FILES; kind++) {
            char name[48];
            set_name(seq, kind, name, sizeof name);
            int fd = openat(sp->dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
            if (fd < 0) {
                sp->error = -errno;
                for (int k = 0; k < kind; k++) {
                    set_name(seq, k, name, sizeof name);
                    unlinkat(sp->dirfd, name, 0);
                }
                return;
            }
            close(fd);
        }
    }
}

static void refill(rn_spares *sp);

static void refill_done(uv_work_t *w, int status) {
    rn_spares *sp = w->data;
    assert(sp->refilling && sp->count + sp->made <= sp->target);
    sp->refilling = 0;
    sp->cleared = 1;
    for (unsigned i = 0; i < sp->made; i++)
        sp->ready[(sp->head + sp->count++) % sp->target] = sp->first + i;
    rn_metric.spare_file_sets_made += sp->made;
    if (status < 0 || sp->error < 0) { /* tried again at the next take */
        rn_log(RN_LOG_WARN, "files", "making spare stream files: %s",
               strerror(status < 0 ? -status : -sp->error));
        return;
    }
    refill(sp);
}

/* Starts a refill unless one runs, the reserve is full, or it stopped. */
static void refill(rn_spares *sp) {
    if (!sp->started || sp->stopped || sp->refilling || sp->count == sp->target)
        return;
    unsigned want = sp->target - sp->count;
    sp->want = want < BATCH ? want : BATCH;
    sp->first = sp->next_seq;
    sp->next_seq += sp->want;
    sp->made = 0;
    sp->error = 0;
    sp->refilling = 1;
    if (uv_queue_work(sp->loop, &sp->work, refill_work, refill_done) < 0)
        sp->refilling = 0;
}

void rn_spares_start(rn_spares *sp) {
    if (!sp)
        return;
    sp->started = 1;
    refill(sp);
}

void rn_spares_stop(rn_spares *sp) {
    if (sp)
        sp->stopped = 1;
}

void rn_spares_close(rn_spares *sp) {
    if (!sp)
        return;
    assert(!sp->refilling); /* the loop ran after rn_spares_stop */
    close(sp->dirfd);
    free(sp->ready);
    free(sp);
}

int rn_spares_take(rn_spares *sp, uint64_t id) {
    if (!sp)
        return 0;
    if (sp->count == 0) {
        rn_metric.spare_file_sets_missed++;
        refill(sp);
        return 0;
    }
    uint64_t seq = sp->ready[sp->head];
    sp->head = (sp->head + 1) % sp->target;
    sp->count--;
    char names[RN_STREAM_FILES][48];
    for (int kind = 0; kind < RN_STREAM_FILES; kind++)
        set_name(seq, kind, names[kind], sizeof names[kind]);
    const char *const list[RN_STREAM_FILES] = {names[0], names[1], names[2]};
    int rc = rn_streamfiles_take(sp->files, id, sp->dirfd, list);
    if (rc < 0) /* what was not moved goes */
        for (int kind = 0; kind < RN_STREAM_FILES; kind++)
            unlinkat(sp->dirfd, names[kind], 0);
    refill(sp);
    if (rc < 0)
        return rc;
    rn_metric.spare_file_sets_taken++;
    return 1;
}
