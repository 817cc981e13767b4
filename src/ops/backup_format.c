/*
 * backup_format.c — a backup's names, pieces and state object, and its
 * destination store. See backup_format.h.
 */
#include "ops/backup_format.h"
#include "ops/coldstore.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static const char STATE_MAGIC[8] = {'R', 'N', 'B', 'A', 'C', 'K', 'U', 'P'};

int rn_backup_name_valid(const char *name, size_t len) {
    if (len == 0 || len > RN_BACKUP_NAME_MAX || name[0] == '.')
        return 0;
    for (size_t i = 0; i < len; i++) {
        char c = name[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-'))
            return 0;
    }
    return 1;
}

void rn_backup_piece_key(const char *name, rn_backup_part part, uint64_t id, uint64_t pos,
                         char out[RN_BACKUP_KEY_MAX]) {
    static const char *const dirs[] = {"data", "index", "body"};
    snprintf(out, RN_BACKUP_KEY_MAX, "%s/%s/%016llx-%016llx", name, dirs[part],
             (unsigned long long)id, (unsigned long long)pos);
}

void rn_backup_state_key(const char *name, char out[RN_BACKUP_KEY_MAX]) {
    snprintf(out, RN_BACKUP_KEY_MAX, "%s/state", name);
}

uint64_t rn_backup_piece_end(rn_backup_part part, uint64_t pos, uint64_t end) {
    uint64_t unit = part == RN_BACKUP_INDEX ? RN_BACKUP_PIECE / 8 : RN_BACKUP_PIECE;
    uint64_t next = (pos / unit + 1) * unit;
    return next < end ? next : end;
}

void rn_backup_state_encode(uint64_t backup_id, const rn_buf *image, rn_buf *out) {
    rn_buf_append(out, STATE_MAGIC, sizeof STATE_MAGIC);
    rn_buf_append_u64(out, backup_id);
    rn_buf_append(out, image->data, image->len);
}

int rn_backup_state_decode(const uint8_t *data, size_t len, uint64_t *backup_id,
                           const uint8_t **image, size_t *image_len) {
    if (len < 16 || memcmp(data, STATE_MAGIC, sizeof STATE_MAGIC) != 0)
        return -1;
    rn_reader r;
    rn_reader_init(&r, data + 8, 8);
    *backup_id = rn_read_u64(&r);
    *image = data + 16;
    *image_len = len - 16;
    return 0;
}

uint64_t rn_backup_serial_base(uint64_t min_serial, uint64_t backup_id) {
    return min_serial + (1ull << 40) + (backup_id & ((1ull << 40) - 1));
}

int rn_backup_read_fd(int fd, uint64_t off, size_t len, rn_buf *out) {
    out->len = 0;
    rn_buf_reserve(out, len ? len : 1);
    while (out->len < len) {
        ssize_t n = pread(fd, out->data + out->len, len - out->len, (off_t)(off + out->len));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return n < 0 ? -errno : -EIO;
        out->len += (size_t)n;
    }
    return 0;
}

int rn_backup_store_open(uv_loop_t *loop, const rn_config *cfg, const char *dest, rn_store **out,
                         char *err, size_t errcap) {
    *out = NULL;
    if (strncmp(dest, "s3:", 3) == 0) {
        const char *prefix = dest + 3;
        size_t n = strlen(prefix);
        if (n && prefix[n - 1] != '/') {
            snprintf(err, errcap, "backup destination %s: the S3 prefix must be empty or end in /",
                     dest);
            return -1;
        }
        return rn_s3_backend_open(loop, cfg, "the S3 backup store", prefix, NULL, out, err, errcap);
    }
    if (!dest[0]) {
        snprintf(err, errcap, "the backup destination is empty");
        return -1;
    }
    *out = rn_localdir_open(loop, dest);
    if (!*out) {
        snprintf(err, errcap, "backup destination %s cannot be created or opened", dest);
        return -1;
    }
    return 0;
}
