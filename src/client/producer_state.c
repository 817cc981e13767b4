/*
 * producer_state.c — the producer's state file. See producer_state.h.
 *
 * Format (one field a line, "end" last, so a file cut short is refused):
 *   runnel-producer-state 2
 *   url <the stream URL>
 *   id <Producer-Id>
 *   epoch <n>
 *   claimed <0|1>
 *   incarnation <token | ->
 *   cluster_id <Ursula-Cluster-Id | ->
 *   next_seq <n>
 *   acked_tag <n>
 *   note <a> <b>
 *   pending <seq> <len> <digest> <tag> <closed 0|1>   (zero or more)
 *   end
 * Version 1 (written before the cluster id was kept) is the same without
 * the cluster_id line; it loads with the id unknown.
 */
#include "client/producer_state.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#define MAGIC "runnel-producer-state 2"
#define MAGIC_V1 "runnel-producer-state 1"

void rnc_pstate_add(rnc_pstate *s, const rnc_pstate_write *w) {
    if (s->npending == s->cap) {
        s->cap = s->cap ? s->cap * 2 : 8;
        s->pending = realloc(s->pending, s->cap * sizeof *s->pending);
        if (!s->pending)
            abort();
    }
    s->pending[s->npending++] = *w;
}

void rnc_pstate_free(rnc_pstate *s) {
    free(s->pending);
    memset(s, 0, sizeof *s);
}

/* Copies the rest of a "key value" line. */
static int take_text(const char *line, const char *key, char *out, size_t cap) {
    size_t k = strlen(key);
    if (strncmp(line, key, k) != 0 || line[k] != ' ')
        return 0;
    size_t n = strcspn(line + k + 1, "\n");
    if (n == 0 || n >= cap)
        return -1;
    memcpy(out, line + k + 1, n);
    out[n] = 0;
    return 1;
}

static int take_u64(const char *line, const char *key, uint64_t *out) {
    char v[32];
    int t = take_text(line, key, v, sizeof v);
    if (t <= 0)
        return t;
    char *end;
    errno = 0;
    unsigned long long x = strtoull(v, &end, 10);
    if (errno || *end || v[0] < '0' || v[0] > '9')
        return -1;
    *out = x;
    return 1;
}

int rnc_pstate_load(const char *path, rnc_pstate *s, char *err, size_t errcap) {
    memset(s, 0, sizeof *s);
    FILE *f = fopen(path, "r");
    if (!f) {
        if (errno == ENOENT)
            return 1;
        snprintf(err, errcap, "cannot read %s: %s", path, strerror(errno));
        return -1;
    }
    char line[2400];
    int v2 = 0, ok = fgets(line, sizeof line, f) != NULL;
    if (ok && strcmp(line, MAGIC "\n") == 0)
        v2 = 1;
    else if (!ok || strcmp(line, MAGIC_V1 "\n") != 0)
        ok = 0;
    int ended = 0, fields = 0;
    while (ok && !ended && fgets(line, sizeof line, f)) {
        uint64_t claimed = 0;
        int t;
        if (strcmp(line, "end\n") == 0) {
            ended = 1;
        } else if ((t = take_text(line, "url", s->url, sizeof s->url)) ||
                   (t = take_text(line, "id", s->id, sizeof s->id)) ||
                   (t = take_u64(line, "epoch", &s->epoch)) ||
                   (t = take_text(line, "incarnation", s->incarnation, sizeof s->incarnation)) ||
                   (v2 &&
                    (t = take_text(line, "cluster_id", s->cluster_id, sizeof s->cluster_id))) ||
                   (t = take_u64(line, "next_seq", &s->next_seq)) ||
                   (t = take_u64(line, "acked_tag", &s->acked_tag))) {
            ok = t > 0;
            fields++;
        } else if ((t = take_u64(line, "claimed", &claimed))) {
            ok = t > 0 && claimed <= 1;
            s->claimed = (int)claimed;
            fields++;
        } else if (strncmp(line, "note ", 5) == 0) {
            unsigned long long a, b;
            int used = 0;
            ok = sscanf(line + 5, "%llu %llu%n", &a, &b, &used) == 2 && line[5 + used] == '\n';
            s->note[0] = a, s->note[1] = b;
            fields++;
        } else if (strncmp(line, "pending ", 8) == 0) {
            rnc_pstate_write w = {0};
            unsigned long long seq, len, tag;
            int closed, used = 0;
            ok = sscanf(line + 8, "%llu %llu %64s %llu %d%n", &seq, &len, w.digest, &tag, &closed,
                        &used) == 5 &&
                 line[8 + used] == '\n' && strlen(w.digest) == 64 && (closed == 0 || closed == 1);
            w.seq = seq, w.len = len, w.tag = tag, w.closed = closed;
            if (ok)
                rnc_pstate_add(s, &w);
        } else {
            ok = 0;
        }
    }
    fclose(f);
    if (strcmp(s->incarnation, "-") == 0)
        s->incarnation[0] = 0;
    if (strcmp(s->cluster_id, "-") == 0)
        s->cluster_id[0] = 0;
    if (!ok || !ended || fields != (v2 ? 9 : 8)) {
        snprintf(err, errcap, "%s is not a producer state file this version wrote", path);
        rnc_pstate_free(s);
        return -1;
    }
    return 0;
}

/* fsyncs the directory holding path. */
static int sync_dir(const char *path) {
    char copy[4096];
    snprintf(copy, sizeof copy, "%s", path);
    int fd = open(dirname(copy), O_RDONLY | O_DIRECTORY);
    if (fd < 0)
        return -1;
    int r = fsync(fd);
    close(fd);
    return r;
}

int rnc_pstate_save(const char *path, const rnc_pstate *s, char *err, size_t errcap) {
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f) {
        snprintf(err, errcap, "cannot write %s: %s", tmp, strerror(errno));
        return -1;
    }
    fprintf(f, MAGIC "\nurl %s\nid %s\nepoch %" PRIu64 "\nclaimed %d\nincarnation %s\n", s->url,
            s->id, s->epoch, s->claimed, s->incarnation[0] ? s->incarnation : "-");
    fprintf(f, "cluster_id %s\n", s->cluster_id[0] ? s->cluster_id : "-");
    fprintf(f, "next_seq %" PRIu64 "\nacked_tag %" PRIu64 "\nnote %" PRIu64 " %" PRIu64 "\n",
            s->next_seq, s->acked_tag, s->note[0], s->note[1]);
    for (size_t i = 0; i < s->npending; i++) {
        const rnc_pstate_write *w = &s->pending[i];
        fprintf(f, "pending %" PRIu64 " %" PRIu64 " %s %" PRIu64 " %d\n", w->seq, w->len, w->digest,
                w->tag, w->closed);
    }
    fputs("end\n", f);
    int bad = fflush(f) != 0 || fsync(fileno(f)) != 0;
    bad |= fclose(f) != 0;
    if (bad || rename(tmp, path) != 0 || sync_dir(path) != 0) {
        snprintf(err, errcap, "cannot save %s: %s", path, strerror(errno));
        unlink(tmp);
        return -1;
    }
    return 0;
}

int rnc_pstate_lock(const char *path, char *err, size_t errcap) {
    char lock[4200];
    snprintf(lock, sizeof lock, "%s.lock", path);
    int fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) {
        snprintf(err, errcap, "cannot open %s: %s", lock, strerror(errno));
        return -1;
    }
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        snprintf(err, errcap, "%s is in use by another process", path);
        close(fd);
        return -1;
    }
    return fd;
}
