/*
 * files.c — whole small files: an atomic, durable rewrite (temporary file,
 * fsync, rename, fsync of the directory, so a crash leaves the old file or
 * the new one, never a part), a whole read, `mkdir -p` with each new
 * directory's entry synced, and a file system's free bytes. Every step's
 * failure is the caller's: a write whose directory could not be synced
 * (not even opened, as at the file descriptor limit) is not durable and is
 * reported so. See files.h.
 */
#include "util/files.h"
#include "util/fault.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

static int write_all(int fd, const uint8_t *p, size_t n) {
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return -errno;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

int rn_atomic_write_file(const char *dir, const char *name, const void *data, size_t len,
                         mode_t mode) {
    char tmp[PATH_MAX], dst[PATH_MAX];
    if ((size_t)snprintf(tmp, sizeof tmp, "%s/%s.tmp", dir, name) >= sizeof tmp ||
        (size_t)snprintf(dst, sizeof dst, "%s/%s", dir, name) >= sizeof dst)
        return -ENAMETOOLONG;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
    if (fd < 0)
        return -errno;
    int rc = fchmod(fd, mode) < 0 ? -errno : write_all(fd, data, len);
    if (rc == 0 && fsync(fd) < 0)
        rc = -errno;
    if (close(fd) < 0 && rc == 0)
        rc = -errno;
    if (rc == 0) {
        char point[NAME_MAX + 16];
        snprintf(point, sizeof point, "%s-before-rename", name);
        if (rn_fault_is_kill_point(point))
            rn_fault_point(point);
    }
    if (rc == 0 && rename(tmp, dst) < 0)
        rc = -errno;
    if (rc != 0) {
        unlink(tmp);
        return rc;
    }
    return rn_sync_dir(dir);
}

int rn_sync_dir(const char *dir) {
    int injected = rn_fault_fail("dir-sync");
    if (injected)
        return injected;
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    int rc = fsync(fd) < 0 ? -errno : 0;
    close(fd);
    return rc;
}

/* Creates the directory path (whose parent exists) unless it exists; syncs
 * the parent when it was created. 0, or -errno (-ENOTDIR: path exists and is
 * not a directory). */
static int make_one_dir(char *path, mode_t mode) {
    if (mkdir(path, mode) < 0) {
        if (errno != EEXIST)
            return -errno;
        struct stat st;
        if (stat(path, &st) < 0)
            return -errno;
        return S_ISDIR(st.st_mode) ? 0 : -ENOTDIR;
    }
    char *slash = strrchr(path, '/');
    if (!slash)
        return rn_sync_dir(".");
    if (slash == path)
        return rn_sync_dir("/");
    *slash = 0;
    int rc = rn_sync_dir(path);
    *slash = '/';
    return rc;
}

int rn_make_dirs(const char *path, mode_t mode, char *failed, size_t failed_cap) {
    assert(path && *path);
    char p[PATH_MAX];
    size_t n = strlen(path);
    if (n >= sizeof p) {
        if (failed_cap)
            snprintf(failed, failed_cap, "%s", path);
        return -ENAMETOOLONG;
    }
    memcpy(p, path, n + 1);
    int rc = 0;
    for (size_t i = 1; rc == 0 && i <= n; i++) {
        /* each prefix ending a component: before a '/', and the whole path */
        if ((i < n && (p[i] != '/' || p[i - 1] == '/')) || (i == n && p[i - 1] == '/'))
            continue;
        char saved = p[i];
        p[i] = 0;
        rc = make_one_dir(p, mode);
        if (rc < 0 && failed_cap)
            snprintf(failed, failed_cap, "%s", p);
        p[i] = saved;
    }
    return rc;
}

int rn_read_file(const char *dir, const char *name, rn_buf *out) {
    char path[PATH_MAX];
    if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, name) >= sizeof path)
        return -ENAMETOOLONG;
    return rn_read_path(path, out);
}

int rn_read_path(const char *path, rn_buf *out) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    int rc = 0;
    for (;;) {
        rn_buf_reserve(out, 65536);
        ssize_t r = read(fd, out->data + out->len, out->cap - out->len);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            rc = r < 0 ? -errno : 0;
            break;
        }
        out->len += (size_t)r;
    }
    close(fd);
    return rc;
}

uint64_t rn_free_bytes(const char *path) {
    struct statvfs vfs;
    if (statvfs(path, &vfs) != 0)
        return UINT64_MAX;
    return (uint64_t)vfs.f_bavail * vfs.f_frsize;
}
