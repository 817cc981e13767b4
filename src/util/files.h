/*
 * files.h — whole small files: atomic durable rewrites and whole reads;
 * directories: durable creation of a path, directory syncs; the free space
 * of a file system.
 */
#ifndef RN_UTIL_FILES_H
#define RN_UTIL_FILES_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "util/buf.h"

/* Writes data to dir/name atomically and durably (tmp file with mode,
 * fsync, rename, fsync dir). Returns 0 only when every step succeeded, else
 * -errno of the first that failed: the file may then hold the old data or
 * the new (the rename may have happened without being durable), and the
 * caller must not rely on either. Passes the kill point
 * "<name>-before-rename" where the build has one (util/fault.h: the
 * checkpoint's). Blocking. */
int rn_atomic_write_file(const char *dir, const char *name, const void *data, size_t len,
                         mode_t mode);
/* Reads the whole file dir/name into out. Returns 0, or -errno (-ENOENT
 * when it does not exist). */
int rn_read_file(const char *dir, const char *name, rn_buf *out);
/* The same for a path. */
int rn_read_path(const char *path, rn_buf *out);

/* fsyncs the directory dir (so entries created or renamed in it survive a
 * crash). Returns 0 or -errno. */
int rn_sync_dir(const char *dir);

/* Creates the directory path and every missing parent (like mkdir -p) with
 * mode, syncing the parent of each directory it creates. An existing
 * directory is fine. Returns 0, or -errno with the path of the component
 * that failed written to failed (failed_cap bytes; may be 0): -ENOTDIR when
 * that component exists and is not a directory. Blocking. */
int rn_make_dirs(const char *path, mode_t mode, char *failed, size_t failed_cap);

/* The bytes an unprivileged writer may still allocate on the file system
 * holding path (statvfs: f_bavail × f_frsize); UINT64_MAX when it cannot be
 * asked (nothing is refused on a guess). */
uint64_t rn_free_bytes(const char *path);

#endif
