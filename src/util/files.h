/*
 * files.h — whole small files: atomic durable rewrites and whole reads.
 */
#ifndef RN_UTIL_FILES_H
#define RN_UTIL_FILES_H

#include <stddef.h>
#include <sys/types.h>

#include "util/buf.h"

/* Writes data to dir/name atomically and durably (tmp file with mode,
 * fsync, rename, fsync dir). Returns 0 or -errno. Blocking. */
int rn_atomic_write_file(const char *dir, const char *name, const void *data, size_t len,
                         mode_t mode);
/* Reads the whole file dir/name into out. Returns 0, or -errno (-ENOENT
 * when it does not exist). */
int rn_read_file(const char *dir, const char *name, rn_buf *out);

#endif
