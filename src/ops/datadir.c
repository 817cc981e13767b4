/*
 * datadir.c — the data directory's own files: the LOCK that keeps a second
 * server out, and the cluster id kept across restarts. See datadir.h.
 */
#include "ops/datadir.h"
#include "util/log.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

/* Creates the data directory and takes its lock; returns the lock fd. */
int rn_datadir_lock(const char *dir) {
    if (mkdir(dir, 0755) < 0 && errno != EEXIST) {
        rn_log(RN_LOG_ERROR, "start", "cannot create data directory %s: %s", dir, strerror(errno));
        return -1;
    }
    char path[PATH_MAX + 8];
    snprintf(path, sizeof path, "%s/LOCK", dir);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
        rn_log(RN_LOG_ERROR, "start", "cannot open %s: %s", path, strerror(errno));
        return -1;
    }
    if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
        rn_log(RN_LOG_ERROR, "start",
               "data directory %s is in use by another runnel process; refusing to start", dir);
        close(fd);
        return -1;
    }
    return fd;
}

static int cluster_id_valid(const char *id) {
    size_t n = strlen(id);
    if (n < 1 || n > 64)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)id[i]) && id[i] != '.' && id[i] != '_' && id[i] != '-')
            return 0;
    return 1;
}

/* The deployment's id (ext §10): --cluster-id when given, else the one kept
 * in <data>/cluster-id, generated (random hex) and synced at the first
 * start. Returns 0, or -1 after logging why not. */
int rn_datadir_cluster_id(const rn_config *cfg, char out[65]) {
    if (cfg->cluster_id[0]) {
        if (!cluster_id_valid(cfg->cluster_id)) {
            rn_log(RN_LOG_ERROR, "start",
                   "--cluster-id must be 1 to 64 characters from A-Z a-z 0-9 . _ -");
            return -1;
        }
        memcpy(out, cfg->cluster_id, strlen(cfg->cluster_id) + 1); /* valid: at most 64 */
        return 0;
    }
    char path[PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/cluster-id", cfg->data_dir);
    FILE *f = fopen(path, "r");
    if (f) {
        int ok = fgets(out, 65, f) != NULL;
        fclose(f);
        out[strcspn(out, "\r\n")] = 0;
        if (ok && cluster_id_valid(out))
            return 0;
        rn_log(RN_LOG_ERROR, "start", "%s is damaged; refusing to start", path);
        return -1;
    }
    uint8_t raw[8];
    int rfd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (rfd < 0 || read(rfd, raw, sizeof raw) != (ssize_t)sizeof raw) {
        rn_log(RN_LOG_ERROR, "start", "cannot read /dev/urandom for a cluster id");
        if (rfd >= 0)
            close(rfd);
        return -1;
    }
    close(rfd);
    snprintf(out, 65, "runnel-%02x%02x%02x%02x%02x%02x%02x%02x", raw[0], raw[1], raw[2], raw[3],
             raw[4], raw[5], raw[6], raw[7]);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    int ok = fd >= 0 && write(fd, out, strlen(out)) == (ssize_t)strlen(out) && fsync(fd) == 0;
    if (fd >= 0)
        close(fd);
    if (!ok) {
        rn_log(RN_LOG_ERROR, "start", "cannot write %s: %s", path, strerror(errno));
        return -1;
    }
    return 0;
}
