/*
 * restore.c — `runnel restore --from DEST --name NAME --data-dir DIR
 * [serve options]`: builds a new data directory from a backup
 * (backup_format.h), offline.
 *
 * The directory must be new or empty. A marker file, INCOMPLETE_MARKER,
 * comes first: a name no server writes, so `runnel serve` refuses the
 * directory until the restore removed it. The stream files and snapshot
 * bodies are written and synced; then the engine rewrites the history of
 * every stream (ext §2.4) with tokens derived from the backup's id and
 * writes the checkpoint; then the marker goes. A restore of the same backup
 * into a new directory gives the same tokens whatever the number of
 * attempts. A restored deployment is a deployment of its own (a new
 * cluster id, or the cluster's given one): it writes only its own keys, in
 * an S3 cold store of its own (--s3-prefix), which the restore claims for
 * it first (tiers/s3store.h: only a prefix nobody owns and that holds no
 * object, or one this cluster id owns); the bodies the backup references
 * in the backed-up server's S3 cold store (--source-s3-prefix) are copied
 * into it by the store itself (UploadPartCopy), never used in place, so
 * that neither deployment overwrites or removes the other's objects. The
 * store operations run on this process's loop, one at a time, waited
 * for. With serve's cluster options the directory is one node's of
 * a new cluster (restore_cluster.h): the streams are re-placed (new ids),
 * their files written under those ids, and the groups' first snapshots
 * take the checkpoint's place.
 */
#include "engine/engine.h"
#include "ops/backup_cmd.h"
#include "ops/backup_format.h"
#include "ops/coldstore.h"
#include "ops/config.h"
#include "ops/datadir.h"
#include "ops/restore_cluster.h"
#include "cluster/cluster_config.h"
#include "tiers/tiers.h"
#include "util/clock.h"
#include "util/files.h"
#include "util/log.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define INCOMPLETE_MARKER "RESTORE-INCOMPLETE"

typedef struct {
    uv_loop_t *loop;
    const rn_config *cfg;
    rn_store *src;
    rn_tiers *tiers;
    rn_store *bucket;          /* the whole bucket: copies of referenced bodies */
    const char *source_prefix; /* --source-s3-prefix: where they are, or NULL */
    int claimed;               /* the S3 cold store's prefix is this restore's now */
    const char *name;
    char err[1024];
} restore;

/* One store operation being waited for. */
typedef struct {
    int done, status, fd;
    uint64_t fd_off;
    const char *key;
    int64_t size; /* of key, found by a listing (-1: not found) */
} waiter;

static void wait_for(restore *r, const waiter *w) {
    while (!w->done)
        uv_run(r->loop, UV_RUN_ONCE);
}

static void on_entry(void *arg, const char *key, uint64_t size) {
    waiter *w = arg;
    if (strcmp(key, w->key) == 0)
        w->size = (int64_t)size;
}

static void on_status(void *arg, int status) {
    waiter *w = arg;
    w->status = status;
    w->done = 1;
}

static void on_size(void *arg, int64_t size) {
    waiter *w = arg;
    w->size = size;
    w->status = size < 0 ? (int)size : 0;
    w->done = 1;
}

static void on_open(void *arg, int fd, uint64_t fd_off) {
    waiter *w = arg;
    w->fd = fd;
    w->fd_off = fd_off;
    w->status = fd < 0 ? fd : 0;
    w->done = 1;
}

/* The whole object key of the backup store, len bytes long, into out. */
static int fetch(restore *r, const char *key, uint64_t len, rn_buf *out) {
    waiter w = {.fd = -1};
    r->src->ops->open(r->src, key, 0, len, on_open, &w);
    wait_for(r, &w);
    if (w.status < 0) {
        snprintf(r->err, sizeof r->err, "backup object %s cannot be read: %s", key,
                 strerror(-w.status));
        return -1;
    }
    int rc = rn_backup_read_fd(w.fd, w.fd_off, (size_t)len, out);
    close(w.fd);
    if (rc < 0)
        snprintf(r->err, sizeof r->err, "backup object %s is shorter than %llu bytes: %s", key,
                 (unsigned long long)len, strerror(-rc));
    return rc < 0 ? -1 : 0;
}

/* The backup's state object into out. */
static int fetch_state(restore *r, rn_buf *out) {
    char key[RN_BACKUP_KEY_MAX], prefix[RN_BACKUP_NAME_MAX + 2];
    rn_backup_state_key(r->name, key);
    snprintf(prefix, sizeof prefix, "%s/", r->name);
    waiter w = {.fd = -1, .key = key, .size = -1};
    r->src->ops->list(r->src, prefix, on_entry, on_status, &w);
    wait_for(r, &w);
    if (w.status < 0) {
        snprintf(r->err, sizeof r->err, "the backup destination cannot be listed: %s",
                 strerror(-w.status));
        return -1;
    }
    if (w.size < 0) {
        snprintf(r->err, sizeof r->err,
                 "backup %s does not exist or is not complete (it has no state object)", r->name);
        return -1;
    }
    return fetch(r, key, (uint64_t)w.size, out);
}

/* Copies part `part` of stream b ([from, to)) from the backup: data into
 * the data file of stream `to_id`, index entries into its index. */
static int copy_range(restore *r, const rn_backup_stream *b, uint64_t to_id, rn_backup_part part,
                      uint64_t from, uint64_t to, rn_buf *piece) {
    rn_streamfiles *files = rn_tiers_streamfiles(r->tiers);
    for (uint64_t pos = from; pos < to;) {
        uint64_t end = rn_backup_piece_end(part, pos, to);
        char key[RN_BACKUP_KEY_MAX];
        rn_backup_piece_key(r->name, part, b->id, pos, key);
        uint64_t unit = part == RN_BACKUP_INDEX ? 8 : 1;
        if (fetch(r, key, (end - pos) * unit, piece) != 0)
            return -1;
        int rc = 0;
        if (part == RN_BACKUP_DATA) {
            rc = rn_streamfiles_write(files, to_id, piece->data, piece->len, pos);
        } else {
            rn_reader rd;
            rn_reader_init(&rd, piece->data, piece->len);
            for (uint64_t k = pos; k < end && rc == 0; k++)
                rc = rn_streamfiles_index_set(files, to_id, k, rn_read_u64(&rd));
        }
        if (rc < 0) {
            snprintf(r->err, sizeof r->err, "stream files of id %016llx cannot be written: %s",
                     (unsigned long long)to_id, strerror(-rc));
            return -1;
        }
        pos = end;
    }
    return 0;
}

/* Copies the body b references in the backed-up server's S3 cold store
 * into this deployment's as key (the store copies it: no byte comes here). */
static int copy_referenced(restore *r, const rn_backup_stream *b, const char *key) {
    if (!r->source_prefix) {
        snprintf(r->err, sizeof r->err,
                 "the backup references snapshot body %s in the backed-up server's S3 cold "
                 "store: name that store's prefix with --source-s3-prefix (the body is copied "
                 "into this deployment's --s3-prefix)",
                 b->body_key);
        return -1;
    }
    char from[1100], to[1100];
    const char *src[1] = {from};
    snprintf(from, sizeof from, "%s%s", r->source_prefix, b->body_key);
    snprintf(to, sizeof to, "%s%s", r->cfg->s3_prefix, key);
    waiter w = {.fd = -1};
    r->bucket->ops->concat(r->bucket, to, src, 1, UINT64_MAX, NULL, NULL, on_size, &w);
    wait_for(r, &w);
    if (w.status < 0 || (uint64_t)w.size != b->body_size) {
        snprintf(r->err, sizeof r->err,
                 "snapshot body %s, which the backup references in the cold store at "
                 "--source-s3-prefix \"%s\", cannot be copied from there: %s",
                 b->body_key, r->source_prefix,
                 w.status < 0 ? strerror(-w.status) : "its size is not the one the backup names");
        return -1;
    }
    return 0;
}

/* 1 when the backup holds b's body (a cluster's backup copies the S3 cold
 * store's bodies too: backup.h), 0 when it only references it, -1 (r->err
 * set) when the backup cannot tell. */
static int body_held(restore *r, const rn_backup_stream *b) {
    char piece_key[RN_BACKUP_KEY_MAX];
    rn_backup_piece_key(r->name, RN_BACKUP_BODY, b->id, 0, piece_key);
    waiter w = {.fd = -1};
    r->src->ops->open(r->src, piece_key, 0, 1, on_open, &w);
    wait_for(r, &w);
    if (w.fd >= 0)
        close(w.fd);
    if (w.status < 0 && w.status != -ENOENT)
        snprintf(r->err, sizeof r->err, "backup object %s cannot be read: %s", piece_key,
                 strerror(-w.status));
    return w.status == 0 ? 1 : w.status == -ENOENT ? 0 : -1;
}

/* Writes the body the backup holds into this deployment's S3 cold store
 * as key: each piece goes up as an object of this node's beside it (the
 * nodes of a cluster restore the same body), the store concatenates them
 * into key, then they are removed. */
static int upload_held(restore *r, const rn_backup_stream *b, const char *key, rn_buf *piece) {
    char to[1100];
    snprintf(to, sizeof to, "%s%s", r->cfg->s3_prefix, key);
    size_t n = 0;
    char **parts = NULL;
    int rc = 0;
    for (uint64_t pos = 0; rc == 0 && pos < b->body_size;) {
        uint64_t end = rn_backup_piece_end(RN_BACKUP_BODY, pos, b->body_size);
        char piece_key[RN_BACKUP_KEY_MAX];
        rn_backup_piece_key(r->name, RN_BACKUP_BODY, b->id, pos, piece_key);
        if ((rc = fetch(r, piece_key, end - pos, piece)) != 0)
            break;
        parts = rn_xrealloc(parts, (n + 1) * sizeof *parts);
        parts[n] = rn_xmalloc(sizeof to + 48);
        snprintf(parts[n], sizeof to + 48, "%s.restore-%llu-%016llx", to,
                 (unsigned long long)r->cfg->node_id, (unsigned long long)pos);
        waiter w = {.fd = -1};
        r->bucket->ops->put(r->bucket, parts[n++], piece->data, piece->len, on_status, &w);
        wait_for(r, &w);
        rc = w.status;
        pos = end;
    }
    if (rc == 0 && n == 0) { /* an empty body */
        waiter w = {.fd = -1};
        r->bucket->ops->put(r->bucket, to, "", 0, on_status, &w);
        wait_for(r, &w);
        rc = w.status;
    } else if (rc == 0) {
        waiter w = {.fd = -1};
        r->bucket->ops->concat(r->bucket, to, (const char *const *)parts, n, UINT64_MAX, NULL, NULL,
                               on_size, &w);
        wait_for(r, &w);
        rc = w.status < 0 ? w.status : (uint64_t)w.size == b->body_size ? 0 : -EIO;
    }
    if (n) { /* a part left behind is a name the orphan sweep never takes for a body */
        waiter w = {.fd = -1};
        r->bucket->ops->remove(r->bucket, (const char *const *)parts, n, on_status, &w);
        wait_for(r, &w);
    }
    for (size_t i = 0; i < n; i++)
        free(parts[i]);
    free(parts);
    if (rc < 0 && !r->err[0])
        snprintf(r->err, sizeof r->err,
                 "snapshot body %s cannot be written into the S3 cold store: %s", key,
                 strerror(-rc));
    return rc < 0 ? -1 : 0;
}

/* The snapshot body of b: copied into the tiers as key, from the backup or
 * (a body the backup only references) from the source's cold store. */
static int restore_body(restore *r, const rn_backup_stream *b, const char *key, rn_buf *piece) {
    if (b->body_cold && !rn_tiers_keeps_parts(r->tiers)) {
        snprintf(r->err, sizeof r->err,
                 "the backup holds a snapshot body of the cold store (%s): restore with the "
                 "--cold-store options the backed-up server ran with",
                 b->body_key);
        return -1;
    }
    if (rn_tiers_body_shared(r->tiers, b->body_cold)) {
        int held = b->body_size ? body_held(r, b) : 1; /* an empty body has no piece */
        return held < 0 ? -1 : held ? upload_held(r, b, key, piece) : copy_referenced(r, b, key);
    }
    int fd = rn_tiers_body_intake_begin(r->tiers, b->body_cold, key);
    int rc = fd < 0 ? fd : 0;
    for (uint64_t pos = 0; rc == 0 && pos < b->body_size;) {
        uint64_t end = rn_backup_piece_end(RN_BACKUP_BODY, pos, b->body_size);
        char piece_key[RN_BACKUP_KEY_MAX];
        rn_backup_piece_key(r->name, RN_BACKUP_BODY, b->id, pos, piece_key);
        if (fetch(r, piece_key, end - pos, piece) != 0)
            rc = -EIO;
        else if (pwrite(fd, piece->data, piece->len, (off_t)pos) != (ssize_t)piece->len)
            rc = errno ? -errno : -EIO;
        pos = end;
    }
    if (fd >= 0)
        rc = rn_tiers_body_intake_end(r->tiers, b->body_cold, key, fd, rc) ? -EIO : rc;
    if (rc < 0 && !r->err[0])
        snprintf(r->err, sizeof r->err, "snapshot body %s cannot be written: %s", key,
                 strerror(-rc));
    return rc < 0 ? -1 : 0;
}

/* Writes every stream's files (under its id in the cluster, in cluster
 * mode) and body, then commits. Returns 0 or -1 with r->err. */
static int run(restore *r, const char *dir, size_t *count) {
    rn_buf state = {0}, piece = {0};
    rn_backup_stream *streams = NULL;
    rn_restore *img = NULL;
    uint64_t backup_id;
    const uint8_t *image;
    size_t image_len, n = 0;
    int rc = fetch_state(r, &state);
    if (rc == 0 &&
        (rn_backup_state_decode(state.data, state.len, &backup_id, &image, &image_len) != 0 ||
         !(img = rn_restore_decode(image, image_len, &streams, &n)))) {
        snprintf(r->err, sizeof r->err, "backup %s: its state object is damaged", r->name);
        rc = -1;
    }
    int cluster = r->cfg->node_id != 0;
    uint64_t *to_ids = rn_xcalloc(n ? n : 1, sizeof *to_ids);
    for (size_t i = 0; i < n; i++)
        to_ids[i] = streams[i].id;
    if (rc == 0 && cluster)
        rn_restore_cluster_place(r->cfg, img, streams, n, to_ids);
    rn_streamfiles *files = rn_tiers_streamfiles(r->tiers);
    for (size_t i = 0; i < n && rc == 0; i++) {
        const rn_backup_stream *b = &streams[i];
        if (b->tail > b->data_from || b->appends) {
            int e = rn_streamfiles_ensure(files, to_ids[i]);
            if (e < 0) {
                snprintf(r->err, sizeof r->err, "stream files cannot be created: %s", strerror(-e));
                rc = -1;
            }
        }
        if (rc == 0)
            rc = copy_range(r, b, to_ids[i], RN_BACKUP_DATA, b->data_from, b->tail, &piece);
        if (rc == 0)
            rc = copy_range(r, b, to_ids[i], RN_BACKUP_INDEX, 0, b->appends, &piece);
        if (rc == 0 && b->has_body) {
            /* a copied body takes its stream's new id in its name (peers
             * find the stream by it, the orphan sweep asks about it) */
            char key[RN_TIERS_KEY_MAX];
            snprintf(key, sizeof key, "%s", b->body_key);
            if (!rn_tiers_body_key_valid(b->body_key)) {
                snprintf(r->err, sizeof r->err, "backup %s: its state object is damaged", r->name);
                rc = -1;
            } else if (to_ids[i] != b->id) {
                rn_tiers_body_key_rebase(b->body_key, to_ids[i], key);
                rn_restore_body_key(img, to_ids[i], key);
            }
            if (rc == 0)
                rc = restore_body(r, b, key, &piece);
        }
    }
    if (rc == 0 && (rc = rn_streamfiles_sync(files)) != 0)
        snprintf(r->err, sizeof r->err, "the stream files cannot be synced: %s", strerror(-rc));
    if (rc == 0 && cluster) {
        rc = rn_restore_cluster_commit(r->loop, r->cfg, img, backup_id, r->err, sizeof r->err);
    } else if (rc == 0) {
        uint64_t base = rn_backup_serial_base(rn_restore_min_serial(img), backup_id);
        if ((rc = rn_restore_commit(img, dir, base, rn_now_ms())) != 0)
            snprintf(r->err, sizeof r->err, "the restored checkpoint cannot be written: %s",
                     strerror(-rc));
    }
    *count = n;
    free(to_ids);
    rn_restore_free(img);
    free(streams);
    rn_buf_free(&state);
    rn_buf_free(&piece);
    return rc == 0 ? 0 : -1;
}

/* 1 when dir does not exist or is empty. */
static int fresh(const char *dir) {
    DIR *d = opendir(dir);
    if (!d)
        return errno == ENOENT;
    struct dirent *de;
    int empty = 1;
    while (empty && (de = readdir(d)))
        empty = strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0;
    closedir(d);
    return empty;
}

static int usage(FILE *out) {
    fprintf(out, "usage: runnel restore --from DEST --name NAME --data-dir DIR [options]\n"
                 "  builds the new (or empty) data directory DIR from backup NAME at DEST (a\n"
                 "  directory, or s3:PREFIX over the --s3-* options). Every restored stream's\n"
                 "  history is rewritten: a new Stream-Incarnation, its token in the backup as\n"
                 "  Stream-Previous-Incarnation, its tail as Stream-Inherited-Offset, its\n"
                 "  producers closed by history; restoring the same backup again gives the same\n"
                 "  tokens. Options: those of runnel serve (--data-dir, --cold-store, --s3-*).\n"
                 "  The restored deployment writes only its own keys: with --cold-store=s3\n"
                 "  its --s3-prefix must be new (or its cluster's), and --source-s3-prefix\n"
                 "  PREFIX names the backed-up server's S3 cold store in the same bucket,\n"
                 "  whose snapshot bodies the backup references: they are copied.\n"
                 "  Then start runnel serve on DIR with the same --cold-store options.\n"
                 "  Into a new cluster: give each node's restore serve's --node-id,\n"
                 "  --cluster-id, --peer (every node) and --groups, the same but --node-id for\n"
                 "  every node, then start every node with those options. A fork whose source\n"
                 "  the group count puts in another group is refused.\n");
    return 2;
}

/* Claims this deployment's cold store (a new prefix, or its cluster's)
 * and opens the whole bucket for the copies of referenced bodies. */
static int claim_cold(restore *r) {
    waiter w = {.fd = -1};
    rn_tiers_cold_claim(r->tiers, 1, on_status, &w);
    wait_for(r, &w);
    if (w.status < 0) {
        char why[160];
        if (!rn_tiers_cold_why(r->tiers, why, sizeof why))
            snprintf(why, sizeof why, "%s", strerror(-w.status));
        snprintf(r->err, sizeof r->err,
                 w.status == -EEXIST
                     ? "the S3 prefix \"%s\" is not the restored deployment's to write (%s): "
                       "give it an --s3-prefix of its own, and the backed-up server's as "
                       "--source-s3-prefix"
                     : "the S3 cold store at prefix \"%s\" cannot be claimed (%s)",
                 r->cfg->s3_prefix, why);
        return -1;
    }
    r->claimed = rn_tiers_body_shared(r->tiers, 1);
    if (!r->claimed)
        return 0;
    return rn_s3_backend_open(r->loop, r->cfg, "the S3 bucket", "", NULL, &r->bucket, r->err,
                              sizeof r->err);
}

int rn_restore_cmd(int argc, char **argv) {
    const char *from = NULL, *name = NULL, *source_prefix = NULL;
    char **rest = rn_xcalloc((size_t)argc + 1, sizeof *rest);
    int nrest = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            free(rest);
            usage(stdout);
            return 0;
        } else if ((strcmp(a, "--from") == 0 || strcmp(a, "--name") == 0) && i + 1 < argc) {
            *(a[2] == 'f' ? &from : &name) = argv[++i];
        } else if (strncmp(a, "--from=", 7) == 0) {
            from = a + 7;
        } else if (strncmp(a, "--name=", 7) == 0) {
            name = a + 7;
        } else if (strcmp(a, "--source-s3-prefix") == 0 && i + 1 < argc) {
            source_prefix = argv[++i];
        } else if (strncmp(a, "--source-s3-prefix=", 19) == 0) {
            source_prefix = a + 19;
        } else {
            rest[nrest++] = argv[i];
        }
    }
    rn_config cfg;
    char err[1024];
    int rc = rn_config_load(&cfg, RN_CONFIG_SERVE, nrest, rest, err, sizeof err);
    free(rest);
    if (rc == 1)
        return 0;
    if (rc == 0 && rn_cluster_config_check(&cfg, err, sizeof err) != 0) {
        rc = -1;
    } else if (rc == 0 && cfg.join) {
        snprintf(err, sizeof err,
                 "--join is for a node added to a running cluster, which gets "
                 "its streams from the cluster: restore the other nodes");
        rc = -1;
    }
    size_t splen = source_prefix ? strlen(source_prefix) : 0;
    if (rc < 0 || !from || !name || !rn_backup_name_valid(name, strlen(name)) ||
        (splen && source_prefix[splen - 1] != '/') || splen > 511) {
        fprintf(stderr, "runnel restore: %s\n",
                rc < 0  ? err
                : !from ? "--from DEST is required"
                : !name || !rn_backup_name_valid(name, strlen(name))
                    ? "--name NAME is required: 1 to 64 of A-Z a-z 0-9 . _ -"
                    : "--source-s3-prefix must be empty or end in \"/\" (at most 511 bytes)");
        return usage(stderr);
    }
    rn_log_setup(strcmp(cfg.log_format, "json") == 0, rn_log_level_parse(cfg.log_level));
    if (!fresh(cfg.data_dir)) {
        fprintf(stderr,
                "runnel restore: %s is not empty: a restore builds a new data directory (remove "
                "what an interrupted restore left, or name another directory)\n",
                cfg.data_dir);
        return 1;
    }
    int lock_fd = rn_datadir_lock(cfg.data_dir);
    if (lock_fd < 0)
        return 1;
    static const char note[] = "runnel restore is building this data directory, or was "
                               "interrupted: remove the directory and restore again\n";
    uint64_t key; /* the new deployment's own, for what it creates later (not the restore's) */
    if (rn_atomic_write_file(cfg.data_dir, INCOMPLETE_MARKER, note, sizeof note - 1, 0644) < 0 ||
        rn_datadir_check_format(cfg.data_dir) != 0 ||
        rn_datadir_incarnation_key(cfg.data_dir, &key) != 0) {
        fprintf(stderr, "runnel restore: %s cannot be written\n", cfg.data_dir);
        return 1;
    }
    char cluster_id[65];
    if (rn_datadir_cluster_id(&cfg, cluster_id) != 0) {
        fprintf(stderr, "runnel restore: %s: no cluster id can be made or written\n", cfg.data_dir);
        return 1;
    }
    restore r = {
        .loop = uv_default_loop(), .cfg = &cfg, .name = name, .source_prefix = source_prefix};
    rn_store *cold = NULL;
    rn_tiers_config tc = {.data_dir = cfg.data_dir,
                          .cold_store = cfg.cold_store != RN_COLD_NONE,
                          .max_open_files = 64,
                          .parts_grace_ms = cfg.parts_grace_ms};
    if (rn_backup_store_open(r.loop, &cfg, from, &r.src, r.err, sizeof r.err) == 0 &&
        rn_cold_backend_open(r.loop, &cfg, cluster_id, &cold, r.err, sizeof r.err) == 0) {
        tc.cold_backend = cold;
        r.tiers = rn_tiers_open(r.loop, &tc, r.err, sizeof r.err);
        if (r.tiers)
            cold = NULL;
    }
    size_t count = 0;
    rc = r.tiers && claim_cold(&r) == 0 ? run(&r, cfg.data_dir, &count) : -1;
    char marker[sizeof cfg.data_dir + 32];
    snprintf(marker, sizeof marker, "%s/" INCOMPLETE_MARKER, cfg.data_dir);
    if (rc == 0 && (unlink(marker) != 0 || rn_sync_dir(cfg.data_dir) != 0)) {
        snprintf(r.err, sizeof r.err, INCOMPLETE_MARKER " cannot be removed: %s", strerror(errno));
        rc = -1;
    }
    if (rc == 0)
        printf("restored %zu streams from backup %s into %s; every stream's history was "
               "rewritten (new Stream-Incarnation)\n",
               count, name, cfg.data_dir);
    else
        fprintf(stderr, "runnel restore: %s; %s is not a store (it keeps %s)%s\n", r.err,
                cfg.data_dir, INCOMPLETE_MARKER,
                r.claimed ? ", and the S3 prefix it claimed belongs to that directory's "
                            "deployment: restore again into a new prefix, or remove the "
                            "objects under it first"
                          : "");
    if (r.tiers)
        rn_tiers_stop(r.tiers);
    if (cold && cold->ops->stop)
        cold->ops->stop(cold);
    if (r.src && r.src->ops->stop)
        r.src->ops->stop(r.src);
    if (r.bucket)
        r.bucket->ops->stop(r.bucket);
    uv_run(r.loop, UV_RUN_DEFAULT);
    rn_tiers_close(r.tiers);
    if (cold)
        cold->ops->close(cold);
    if (r.src)
        r.src->ops->close(r.src);
    if (r.bucket)
        r.bucket->ops->close(r.bucket);
    uv_loop_close(r.loop);
    close(lock_fd);
    return rc == 0 ? 0 : 1;
}
