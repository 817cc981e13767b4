/*
 * micro_wal.c — `runnel-micro-wal`: appends/s through the write-ahead log
 * (src/log/wal.h) alone, without HTTP or the engine.
 *
 * Recovers an empty log in a fresh temporary directory under --dir, opens
 * it, and keeps --concurrency records of --record-bytes bytes submitted:
 * each completion callback (the record is durable: its batch was written
 * and fdatasync'ed) resubmits the entry until --seconds passed. Reports
 * records/s and MB/s of payload (batch sizes are internal to the log and
 * not visible through its interface). The log always
 * syncs; pointing --dir at a tmpfs (/dev/shm) measures the same code with a
 * sync that costs next to nothing — label it so, it is not "without sync".
 * The temporary directory is removed afterwards.
 * Usage: runnel-micro-wal [--dir D] [--concurrency K] [--record-bytes S] [--seconds T] [--json]
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

#include "log/wal.h"
#include "util/buf.h"

static struct {
    rn_wal *wal;
    double seconds;
    uint64_t t0, t_end, done;
    int inflight;
    int stopping;
} s;

static void on_logged(rn_wal_entry *e, int status) {
    if (status != 0) {
        fprintf(stderr, "runnel-micro-wal: record failed: %s\n", uv_strerror(status));
        exit(1);
    }
    s.done++;
    uint64_t now = uv_hrtime();
    if ((double)(now - s.t0) / 1e9 < s.seconds) {
        rn_wal_submit(s.wal, e);
        return;
    }
    s.t_end = now;
    s.inflight--;
}

static int no_replay(void *arg, const uint8_t *payload, size_t len) {
    return 0;
}

static void remove_tree(const char *dir) {
    char wdir[4096], path[8192];
    snprintf(wdir, sizeof wdir, "%s/wal", dir);
    DIR *d = opendir(wdir);
    if (d) {
        for (struct dirent *de; (de = readdir(d));) {
            if (de->d_name[0] == '.')
                continue;
            snprintf(path, sizeof path, "%s/%s", wdir, de->d_name);
            unlink(path);
        }
        closedir(d);
        rmdir(wdir);
    }
    rmdir(dir);
}

int main(int argc, char **argv) {
    const char *base = "/tmp";
    int k = 64, json = 0;
    size_t bytes = 256;
    s.seconds = 3;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0)
            json = 1;
        else if (i + 1 < argc && strcmp(argv[i], "--dir") == 0)
            base = argv[++i];
        else if (i + 1 < argc && strcmp(argv[i], "--concurrency") == 0)
            k = atoi(argv[++i]);
        else if (i + 1 < argc && strcmp(argv[i], "--record-bytes") == 0)
            bytes = (size_t)atol(argv[++i]);
        else if (i + 1 < argc && strcmp(argv[i], "--seconds") == 0)
            s.seconds = atof(argv[++i]);
        else {
            fprintf(stderr, "usage: runnel-micro-wal [--dir D] [--concurrency K] "
                            "[--record-bytes S] [--seconds T] [--json]\n");
            return 2;
        }
    }
    if (k < 1 || bytes < 1 || bytes > RN_WAL_MAX_RECORD || s.seconds <= 0) {
        fprintf(stderr, "runnel-micro-wal: bad --concurrency, --record-bytes or --seconds\n");
        return 2;
    }
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/runnel-micro-wal-XXXXXX", base);
    if (!mkdtemp(dir)) {
        perror("runnel-micro-wal: mkdtemp");
        return 1;
    }
    uv_loop_t *loop = uv_default_loop();
    rn_wal_recovery rec;
    int err = rn_wal_recover(dir, 0, no_replay, NULL, &rec);
    rn_wal_options opts = {.segment_bytes = 64u << 20};
    if (err == 0)
        s.wal = rn_wal_open(loop, dir, &rec, &opts, &err);
    if (!s.wal) {
        fprintf(stderr, "runnel-micro-wal: cannot open the log in %s: %s\n", dir, uv_strerror(err));
        remove_tree(dir);
        return 1;
    }
    uint8_t *payload = rn_xmalloc(bytes);
    memset(payload, 'x', bytes);
    rn_wal_entry *entries = rn_xcalloc((size_t)k, sizeof *entries);
    s.t0 = uv_hrtime();
    s.inflight = k;
    for (int i = 0; i < k; i++) {
        entries[i].piece[0] = (struct iovec){payload, bytes};
        entries[i].pieces = 1;
        entries[i].done = on_logged;
        rn_wal_submit(s.wal, &entries[i]);
    }
    uv_run(loop, UV_RUN_DEFAULT);
    double secs = (double)(s.t_end - s.t0) / 1e9;
    rn_wal_close(s.wal);
    remove_tree(dir);
    double rps = (double)s.done / secs;
    if (json)
        printf("{\"dir\":\"%s\",\"concurrency\":%d,\"record_bytes\":%zu,\"records\":%llu,"
               "\"records_per_s\":%.0f,\"mb_per_s\":%.2f}\n",
               base, k, bytes, (unsigned long long)s.done, rps, rps * (double)bytes / 1e6);
    else
        printf("dir %s  concurrency %d  record %zu B: %llu records in %.2f s = %.0f records/s, "
               "%.2f MB/s\n",
               base, k, bytes, (unsigned long long)s.done, secs, rps, rps * (double)bytes / 1e6);
    free(entries);
    free(payload);
    return 0;
}
