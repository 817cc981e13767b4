/*
 * backup_format.h — a backup's layout at its destination, shared by the
 * server that writes it (backup.c) and the restore that reads it
 * (restore.c). The destination is a store (tiers/store.h): a local
 * directory, or an S3 prefix over the --s3-* settings.
 *
 * Under <name>/ (ids, offsets and entry numbers as 16 hex digits):
 *   data/<id>-<offset>   stream id's own bytes from offset to the next piece
 *   index/<id>-<entry>   its append-index entries from entry, u64 LE each
 *   body/<id>-<offset>   its latest snapshot's body from offset, when the
 *                        body is not in a shared cold store (an S3 cold
 *                        store's bodies are referenced by the state only)
 *   state                written last (a backup without it is incomplete):
 *                        "RNBACKUP", u64 backup id (random; the restore's
 *                        tokens derive from it), then the engine's image
 *                        of every stream (rn_engine_backup_state)
 * A range is cut into pieces at multiples of RN_BACKUP_PIECE bytes (of
 * the index file, for entries), so one piece is one object.
 */
#ifndef RN_OPS_BACKUP_FORMAT_H
#define RN_OPS_BACKUP_FORMAT_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "ops/config.h"
#include "tiers/store.h"
#include "util/buf.h"

#define RN_BACKUP_PIECE (1u << 20)
#define RN_BACKUP_NAME_MAX 64
#define RN_BACKUP_KEY_MAX (RN_BACKUP_NAME_MAX + 48)

typedef enum { RN_BACKUP_DATA, RN_BACKUP_INDEX, RN_BACKUP_BODY } rn_backup_part;

/* 1 when name (len bytes) is 1 to 64 of A-Z a-z 0-9 . _ -, not starting
 * with ".". */
int rn_backup_name_valid(const char *name, size_t len);
/* The key of the piece of `part` of stream id starting at pos (a byte
 * offset; for the index, an entry number). */
void rn_backup_piece_key(const char *name, rn_backup_part part, uint64_t id, uint64_t pos,
                         char out[RN_BACKUP_KEY_MAX]);
void rn_backup_state_key(const char *name, char out[RN_BACKUP_KEY_MAX]);
/* Where the piece of `part` starting at pos ends, in a range ending at
 * end (pos < end). */
uint64_t rn_backup_piece_end(rn_backup_part part, uint64_t pos, uint64_t end);

/* The state object: the header, then image. */
void rn_backup_state_encode(uint64_t backup_id, const rn_buf *image, rn_buf *out);
/* Returns 0 with the backup id and the image inside data, or -1 when data
 * is not a state object. */
int rn_backup_state_decode(const uint8_t *data, size_t len, uint64_t *backup_id,
                           const uint8_t **image, size_t *image_len);
/* The first serial of a restore's tokens: above min_serial (what the source
 * had issued) by 2^40 and a part of the backup id, so that neither the
 * source's later ids nor another backup's restore issue the same. */
uint64_t rn_backup_serial_base(uint64_t min_serial, uint64_t backup_id);

/* Reads len bytes at off of fd (an object a store opened) into out, which
 * it replaces. Returns 0, or -errno (-EIO: the object is shorter). */
int rn_backup_read_fd(int fd, uint64_t off, size_t len, rn_buf *out);

/* Opens the store `dest` names: "s3:PREFIX" (PREFIX empty or ending in
 * "/") over cfg's --s3-* settings, else a local directory (created when
 * missing). Returns 0, or -1 with the reason in err. */
int rn_backup_store_open(uv_loop_t *loop, const rn_config *cfg, const char *dest, rn_store **out,
                         char *err, size_t errcap);

#endif
