/*
 * blobs.c — the local directory's objects as files: durable writes, reads,
 * listings and sweeps, each a blocking call. See blobs.h.
 */
#include "tiers/blobs.h"
#include "util/buf.h"
#include "util/fault.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct rn_blobs {
    char *root;
};

static int make_dirs(char *path) {
    for (char *p = path + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = 0;
        int rc = mkdir(path, 0755);
        *p = '/';
        if (rc < 0 && errno != EEXIST)
            return -errno;
    }
    return mkdir(path, 0755) < 0 && errno != EEXIST ? -errno : 0;
}

rn_blobs *rn_blobs_open(const char *dir) {
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s", dir);
    if (make_dirs(path) < 0)
        return NULL;
    rn_blobs *b = rn_xcalloc(1, sizeof *b);
    b->root = rn_xstrdup(dir);
    return b;
}

void rn_blobs_close(rn_blobs *b) {
    if (!b)
        return;
    free(b->root);
    free(b);
}

/* Writes the file path of key into out (cap bytes); returns 0, or
 * -ENAMETOOLONG when it does not fit (never a cut path naming another file). */
static int key_path(const rn_blobs *b, const char *key, char *out, size_t cap) {
    int n = snprintf(out, cap, "%s/%s", b->root, key);
    return n >= 0 && (size_t)n < cap ? 0 : -ENAMETOOLONG;
}

static int fsync_parent(const char *path) {
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (!slash)
        return 0;
    *slash = 0;
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    int rc = fsync(fd) < 0 ? -errno : 0;
    close(fd);
    return rc;
}

/* Opens the temporary file for key (creating its directories). */
static int open_tmp(rn_blobs *b, const char *key, char *path, size_t cap, char *tmp, size_t tcap) {
    int rc = key_path(b, key, path, cap);
    if (rc < 0)
        return rc;
    snprintf(tmp, tcap, "%s.tmp", path);
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash) {
        *slash = 0;
        rc = make_dirs(dir);
        if (rc < 0)
            return rc;
    }
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    return fd < 0 ? -errno : fd;
}

/* Syncs and closes fd, then renames tmp into place durably (or removes it
 * when rc already reports a failure). */
static int finish_tmp(int fd, int rc, const char *tmp, const char *path) {
    if (rc == 0 && fdatasync(fd) < 0)
        rc = -errno;
    close(fd);
    if (rc == 0 && rename(tmp, path) < 0)
        rc = -errno;
    if (rc == 0)
        rc = fsync_parent(path);
    if (rc < 0)
        unlink(tmp);
    return rc;
}

static int write_all(int fd, const uint8_t *p, size_t len) {
    while (len > 0) {
        ssize_t w = write(fd, p, len);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        p += w;
        len -= (size_t)w;
    }
    return 0;
}

int rn_blobs_concat(rn_blobs *b, const char *key, const char *const *src, size_t n,
                    void (*observe)(void *arg, const uint8_t *data, size_t len), void *arg) {
    char path[PATH_MAX], tmp[PATH_MAX + 8];
    int fd = open_tmp(b, key, path, sizeof path, tmp, sizeof tmp);
    if (fd < 0)
        return fd;
    enum { PIECE = 1 << 20 };
    uint8_t *buf = rn_xmalloc(PIECE);
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        int in = rn_blobs_open_read(b, src[i]);
        if (in < 0) {
            rc = in;
            break;
        }
        for (;;) {
            ssize_t got = read(in, buf, PIECE);
            if (got < 0 && errno == EINTR)
                continue;
            if (got <= 0) {
                rc = got < 0 ? -errno : 0;
                break;
            }
            if (observe)
                observe(arg, buf, (size_t)got);
            rc = write_all(fd, buf, (size_t)got);
            if (rc)
                break;
        }
        close(in);
    }
    free(buf);
    return finish_tmp(fd, rc, tmp, path);
}

/* A walk of the files under a prefix at any depth: visit() sees each file;
 * with prune, a directory left empty after its walk is removed. A listing
 * that fails is remembered and the walk goes on. */
typedef struct {
    rn_blobs *b;
    int prune;
    void (*visit)(const char *key, const char *path, const struct stat *sb, void *arg);
    void *arg;
    int failure; /* the first listing's -errno */
} walk_state;

static int walk_one(const char *key, void *arg);

static int walk_dir(walk_state *w, const char *prefix) {
    int rc = rn_blobs_list(w->b, prefix, walk_one, w);
    if (rc < 0 && !w->failure)
        w->failure = rc;
    return w->failure;
}

static int walk_one(const char *key, void *arg) {
    walk_state *w = arg;
    char path[PATH_MAX];
    struct stat sb;
    if (key_path(w->b, key, path, sizeof path) < 0 || stat(path, &sb) < 0)
        return 0; /* gone meanwhile */
    if (!S_ISDIR(sb.st_mode)) {
        w->visit(key, path, &sb, w->arg);
        return 0;
    }
    char sub[PATH_MAX];
    snprintf(sub, sizeof sub, "%s/", key);
    walk_dir(w, sub);
    if (w->prune)
        rmdir(path); /* only succeeds once empty */
    return 0;
}

typedef struct {
    int64_t older_than;
    long removed;
} sweep_state;

static void sweep_file(const char *key, const char *path, const struct stat *sb, void *arg) {
    sweep_state *st = arg;
    (void)key;
    if ((int64_t)sb->st_mtime >= st->older_than)
        return;
    rn_fault_point("sweep-before-unlink");
    if (unlink(path) == 0) {
        st->removed++;
        rn_fault_point("sweep-after-unlink");
    }
}

long rn_blobs_sweep(rn_blobs *b, const char *prefix, int64_t older_than) {
    sweep_state st = {older_than, 0};
    walk_state w = {b, 1, sweep_file, &st, 0};
    int rc = walk_dir(&w, prefix);
    char path[PATH_MAX];
    if (*prefix && key_path(b, prefix, path, sizeof path) == 0)
        rmdir(path); /* the prefix's own directory too, once empty */
    return rc < 0 ? rc : st.removed;
}

typedef struct {
    void (*each)(void *arg, const char *key, uint64_t size);
    void *arg;
} walk_report;

static void report_file(const char *key, const char *path, const struct stat *sb, void *arg) {
    walk_report *r = arg;
    (void)path;
    r->each(r->arg, key, (uint64_t)sb->st_size);
}

int rn_blobs_walk(rn_blobs *b, const char *prefix,
                  void (*each)(void *arg, const char *key, uint64_t size), void *arg) {
    walk_report r = {each, arg};
    walk_state w = {b, 0, report_file, &r, 0};
    return walk_dir(&w, prefix);
}

int rn_blobs_begin(rn_blobs *b, const char *key) {
    char path[PATH_MAX], tmp[PATH_MAX + 8];
    return open_tmp(b, key, path, sizeof path, tmp, sizeof tmp);
}

int rn_blobs_end(rn_blobs *b, const char *key, int fd, int rc) {
    char path[PATH_MAX], tmp[PATH_MAX + 8];
    int prc = key_path(b, key, path, sizeof path);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    return finish_tmp(fd, prc < 0 ? prc : rc, tmp, path);
}

int rn_blobs_put(rn_blobs *b, const char *key, const void *data, size_t len) {
    char path[PATH_MAX], tmp[PATH_MAX + 8];
    int fd = open_tmp(b, key, path, sizeof path, tmp, sizeof tmp);
    if (fd < 0)
        return fd;
    return finish_tmp(fd, write_all(fd, data, len), tmp, path);
}

int rn_blobs_open_read(rn_blobs *b, const char *key) {
    char path[PATH_MAX];
    int rc = key_path(b, key, path, sizeof path);
    if (rc < 0)
        return rc;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    return fd < 0 ? -errno : fd;
}

int64_t rn_blobs_size(rn_blobs *b, const char *key) {
    char path[PATH_MAX];
    int rc = key_path(b, key, path, sizeof path);
    if (rc < 0)
        return rc;
    struct stat st;
    if (stat(path, &st) < 0)
        return -errno;
    return S_ISDIR(st.st_mode) ? -EISDIR : (int64_t)st.st_size;
}

int rn_blobs_delete(rn_blobs *b, const char *key) {
    int injected = rn_fault_fail("blob-delete");
    if (injected)
        return injected;
    char path[PATH_MAX];
    int rc = key_path(b, key, path, sizeof path);
    if (rc < 0)
        return rc;
    return unlink(path) < 0 && errno != ENOENT ? -errno : 0;
}

int rn_blobs_list(rn_blobs *b, const char *prefix, int (*fn)(const char *key, void *arg),
                  void *arg) {
    char path[PATH_MAX];
    int rc = key_path(b, prefix, path, sizeof path);
    if (rc < 0)
        return rc;
    DIR *d = opendir(path);
    if (!d)
        return errno == ENOENT ? 0 : -errno;
    struct dirent *de;
    while (rc == 0 && (de = readdir(d))) {
        size_t n = strlen(de->d_name);
        if (de->d_name[0] == '.' || (n > 4 && strcmp(de->d_name + n - 4, ".tmp") == 0))
            continue;
        char key[PATH_MAX];
        int len = snprintf(key, sizeof key, "%s%s", prefix, de->d_name);
        rc = len >= 0 && (size_t)len < sizeof key ? fn(key, arg) : -ENAMETOOLONG;
    }
    closedir(d);
    return rc > 0 ? 0 : rc;
}
