/*
 * datadir.c — the data directory itself and its own files: its creation
 * (with every missing parent), the check that it holds only Runnel's files,
 * the LOCK that keeps a second server out, FORMAT naming the on-disk format,
 * and the cluster id kept across restarts. FORMAT and cluster-id are
 * written once, atomically (temporary file, fsync, rename, fsync of the
 * directory), so a crash while writing them leaves either nothing or the
 * whole file. See datadir.h.
 */
#include "ops/datadir.h"
#include "log/wal.h"
#include "util/files.h"
#include "util/log.h"
#include "util/text.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

/* The top-level names Runnel writes in a data directory (docs/ARCHITECTURE.md
 * "Data directory layout"): a directory holding anything else is not one
 * Runnel wrote. A new top-level file or directory must be added here.
 * lost+found is accepted too: a file system mounted as the data directory
 * has it at its root. */
static const char *const RUNNEL_NAMES[] = {
    "LOCK",
    "FORMAT",
    "FORMAT.tmp",
    "cluster-id",
    "cluster-id.tmp",
    "incarnation-key",
    "incarnation-key.tmp",
    "checkpoint",
    "checkpoint.tmp",
    "wal",
    "streams",
    "spares", /* empty stream files made ahead (tiers/spares.h) */
    "snapshots",
    "cold",
    "cold-reads", /* ranged reads of an S3 cold store (ops/coldstore.c) */
    "subs",
    /* cluster mode (src/cluster/cluster.h) */
    "raft",
    "cluster-node",
    "cluster-node.tmp",
    "cluster-ids",
    "cluster-ids.tmp",
    "cluster-members", /* written before the metadata group held the nodes */
    "cluster-members.tmp",
    "cluster-recovering", /* cluster/recovery.h */
    "cluster-recovering.tmp",
    "cluster-recovered",
    "cluster-recovered.tmp",
    /* the disk reserve (cluster/health.h) and the incarnations (cluster/identity.h) */
    "reserve",
    "cluster-incarnation",
    "cluster-incarnation.tmp",
    "cluster-incarnations",
    "cluster-incarnations.tmp",
};

/* Foreign names the refusal lists (the alphabetically first). */
enum { FOREIGN_SHOWN = 5 };

static int runnel_name(const char *name) {
    for (size_t i = 0; i < sizeof RUNNEL_NAMES / sizeof RUNNEL_NAMES[0]; i++)
        if (strcmp(name, RUNNEL_NAMES[i]) == 0)
            return 1;
    return strcmp(name, "lost+found") == 0;
}

/* Keeps name among the alphabetically first FOREIGN_SHOWN names in shown. */
static void keep_first_names(char shown[][NAME_MAX + 1], size_t *n, const char *name) {
    size_t at = *n;
    while (at > 0 && strcmp(name, shown[at - 1]) < 0)
        at--;
    if (at == FOREIGN_SHOWN)
        return;
    size_t last = *n < FOREIGN_SHOWN ? (*n)++ : FOREIGN_SHOWN - 1;
    memmove(shown[at + 1], shown[at], (last - at) * sizeof shown[0]);
    snprintf(shown[at], sizeof shown[0], "%s", name);
}

/* Refuses a directory that is neither empty nor Runnel's: 0 when every
 * entry is a name Runnel writes, else -1 after logging the first foreign
 * names and how many more there are. Reads the directory only. */
static int check_only_runnel_files(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) {
        rn_log(RN_LOG_ERROR, "start", "cannot read data directory %s: %s", dir, strerror(errno));
        return -1;
    }
    char shown[FOREIGN_SHOWN][NAME_MAX + 1];
    size_t nshown = 0, foreign = 0;
    struct dirent *de;
    errno = 0;
    while ((de = readdir(d))) {
        if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0 &&
            !runnel_name(de->d_name)) {
            foreign++;
            keep_first_names(shown, &nshown, de->d_name);
        }
        errno = 0;
    }
    int read_errno = errno;
    closedir(d);
    if (read_errno) {
        rn_log(RN_LOG_ERROR, "start", "cannot read data directory %s: %s", dir,
               strerror(read_errno));
        return -1;
    }
    if (foreign == 0)
        return 0;
    rn_buf names = {0};
    for (size_t i = 0; i < nshown; i++) {
        if (i)
            rn_buf_append_str(&names, ", ");
        for (const char *c = shown[i]; *c; c++) /* a name stays on its log line */
            rn_buf_append_byte(&names, (unsigned char)*c < 0x20 || *c == 0x7f ? '?' : *c);
    }
    if (foreign > nshown)
        rn_buf_appendf(&names, " and %zu more", foreign - nshown);
    rn_log(RN_LOG_ERROR, "start",
           "data directory %s holds files runnel did not write: %.*s; refusing to start (give "
           "an empty or new directory, or one runnel wrote)",
           dir, (int)names.len, (const char *)names.data);
    rn_buf_free(&names);
    return -1;
}

/* Creates the data directory (and its parents), checks it holds nothing
 * but Runnel's files and takes its lock; returns the lock fd. */
int rn_datadir_lock(const char *dir) {
    char failed[PATH_MAX];
    int rc = rn_make_dirs(dir, 0755, failed, sizeof failed);
    if (rc < 0) {
        if (rc == -ENOTDIR)
            rn_log(RN_LOG_ERROR, "start",
                   "cannot create data directory %s: %s exists and is not a directory", dir,
                   failed);
        else
            rn_log(RN_LOG_ERROR, "start", "cannot create data directory %s: mkdir %s: %s", dir,
                   failed, strerror(-rc));
        return -1;
    }
    if (check_only_runnel_files(dir) != 0)
        return -1;
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

/* Reads the first line of <dir>/<name> (up to its line end) into out, of
 * cap bytes; a longer line is cut, which no valid content is. Returns 1 when
 * read, 0 when the file does not exist, -1 after logging why it cannot be
 * read. */
static int read_first_line(const char *dir, const char *name, char *out, size_t cap) {
    rn_buf b = {0};
    int rc = rn_read_file(dir, name, &b);
    if (rc < 0) {
        rn_buf_free(&b);
        if (rc == -ENOENT)
            return 0;
        rn_log(RN_LOG_ERROR, "start", "cannot read %s/%s: %s", dir, name, strerror(-rc));
        return -1;
    }
    size_t n = 0;
    while (n < b.len && n + 1 < cap && b.data[n] != '\n' && b.data[n] != '\r')
        n++;
    memcpy(out, b.data, n);
    out[n] = 0;
    rn_buf_free(&b);
    return 1;
}

/* Writes <dir>/<name> holding text (atomically and durably). Returns 0, or
 * -1 after logging why not. */
static int write_marker(const char *dir, const char *name, const char *text) {
    int rc = rn_atomic_write_file(dir, name, text, strlen(text), 0644);
    if (rc < 0)
        rn_log(RN_LOG_ERROR, "start", "cannot write %s/%s: %s", dir, name, strerror(-rc));
    return rc < 0 ? -1 : 0;
}

/* True when dir holds data of a server (a checkpoint or a log), which a
 * directory without FORMAT then got from a build older than the marker. */
static int holds_data(const char *dir) {
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/checkpoint", dir);
    if (access(path, F_OK) == 0)
        return 1;
    snprintf(path, sizeof path, "%s/wal", dir);
    return access(path, F_OK) == 0;
}

/* Takes over a directory of data format 1 whose log is empty. Returns 0
 * or -1 after logging why not. */
static int upgrade_format1(const char *dir, const char *line) {
    int rc = rn_wal_adopt_format1(dir);
    if (rc == -ENOTEMPTY) {
        rn_log(RN_LOG_ERROR, "start",
               "%s holds data format 1 with records in its log (wal/), which this build "
               "(format %d) would misread; refusing to start: stop the directory cleanly with "
               "the build that wrote it (a clean stop leaves the log empty), then start this "
               "build",
               dir, RN_DATA_FORMAT);
        return -1;
    }
    if (rc < 0) {
        rn_log(RN_LOG_ERROR, "start", "cannot prepare the log of %s for format %d: %s", dir,
               RN_DATA_FORMAT, strerror(-rc));
        return -1;
    }
    if (write_marker(dir, "FORMAT", line) != 0)
        return -1;
    rn_log(RN_LOG_INFO, "start", "%s: data format 1 with an empty log taken over as format %d", dir,
           RN_DATA_FORMAT);
    return 0;
}

int rn_datadir_check_format(const char *dir) {
    char line[128], ours[64];
    snprintf(ours, sizeof ours, "runnel data format %d\n", RN_DATA_FORMAT);
    int got = read_first_line(dir, "FORMAT", line, sizeof line);
    if (got < 0)
        return -1;
    if (got == 0)
        return holds_data(dir) ? upgrade_format1(dir, ours) : write_marker(dir, "FORMAT", ours);
    static const char prefix[] = "runnel data format ";
    size_t plen = sizeof prefix - 1;
    uint64_t format = 0;
    if (strncmp(line, prefix, plen) != 0 ||
        rn_parse_strict_u64(line + plen, strlen(line + plen), 1000000, &format) != 0) {
        rn_log(RN_LOG_ERROR, "start", "%s/FORMAT is damaged or not runnel's; refusing to start",
               dir);
        return -1;
    }
    if (format == 1)
        return upgrade_format1(dir, ours);
    if (format == 2) { /* format 3 only added records (a large append stored ahead) */
        if (write_marker(dir, "FORMAT", ours) != 0)
            return -1;
        rn_log(RN_LOG_INFO, "start", "%s: data format 2 taken over as format %d", dir,
               RN_DATA_FORMAT);
        return 0;
    }
    if (format != RN_DATA_FORMAT) {
        rn_log(RN_LOG_ERROR, "start",
               "%s holds data format %llu and this build reads format %d; refusing to start "
               "(run the build that wrote it)",
               dir, (unsigned long long)format, RN_DATA_FORMAT);
        return -1;
    }
    return 0;
}

/* Fills out with n random bytes. Returns 0, or -1 after logging why not
 * (naming what they were for). */
static int random_bytes(uint8_t *out, size_t n, const char *what) {
    int rfd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (rfd < 0 || read(rfd, out, n) != (ssize_t)n) {
        rn_log(RN_LOG_ERROR, "start", "cannot read /dev/urandom for %s", what);
        if (rfd >= 0)
            close(rfd);
        return -1;
    }
    close(rfd);
    return 0;
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
    char line[128];
    int got = read_first_line(cfg->data_dir, "cluster-id", line, sizeof line);
    if (got < 0)
        return -1;
    if (got == 1) {
        if (cluster_id_valid(line)) {
            memcpy(out, line, strlen(line) + 1); /* valid: at most 64 */
            return 0;
        }
        rn_log(RN_LOG_ERROR, "start", "%s/cluster-id is damaged; refusing to start", cfg->data_dir);
        return -1;
    }
    uint8_t raw[8];
    if (random_bytes(raw, sizeof raw, "a cluster id") != 0)
        return -1;
    snprintf(out, 65, "runnel-%02x%02x%02x%02x%02x%02x%02x%02x", raw[0], raw[1], raw[2], raw[3],
             raw[4], raw[5], raw[6], raw[7]);
    return write_marker(cfg->data_dir, "cluster-id", out);
}

/* True when dir holds a store: a checkpoint, a log, stream files or a
 * cluster node's Raft files (written by any build). */
static int holds_store(const char *dir) {
    static const char *const names[] = {"checkpoint", "wal", "streams", "raft"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char path[PATH_MAX];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        if (access(path, F_OK) == 0)
            return 1;
    }
    return 0;
}

int rn_datadir_incarnation_key(const char *dir, uint64_t *key) {
    char line[128];
    int got = read_first_line(dir, "incarnation-key", line, sizeof line);
    if (got < 0)
        return -1;
    if (got == 1) {
        if (strlen(line) == 16 && rn_parse_hex_u64(line, key) == 0)
            return 0;
        rn_log(RN_LOG_ERROR, "start", "%s/incarnation-key is damaged; refusing to start", dir);
        return -1;
    }
    uint8_t raw[8];
    if (holds_store(dir)) {
        *key = 0; /* the key of the tokens a build before the key issued */
        rn_log(RN_LOG_INFO, "start",
               "%s holds a store from a build without an incarnation key: its tokens keep "
               "coming from key 0",
               dir);
    } else if (random_bytes(raw, sizeof raw, "an incarnation key") != 0) {
        return -1;
    } else {
        memcpy(key, raw, sizeof *key);
    }
    char text[32];
    snprintf(text, sizeof text, "%016llx\n", (unsigned long long)*key);
    return write_marker(dir, "incarnation-key", text);
}
