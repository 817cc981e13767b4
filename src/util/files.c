/*
 * files.c — whole small files: an atomic, durable rewrite (temporary file,
 * fsync, rename, fsync of the directory, so a crash leaves the old file or
 * the new one, never a part) and a whole read. See files.h.
 */
#include "util/files.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <sys/stat.h>
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
    if (rc == 0 && rename(tmp, dst) < 0)
        rc = -errno;
    if (rc != 0) {
        unlink(tmp);
        return rc;
    }
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        return -errno;
    rc = fsync(dfd) < 0 ? -errno : 0;
    close(dfd);
    return rc;
}

int rn_read_file(const char *dir, const char *name, rn_buf *out) {
    char path[PATH_MAX];
    if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, name) >= sizeof path)
        return -ENAMETOOLONG;
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
