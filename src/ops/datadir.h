/*
 * datadir.h — files of the data directory that belong to the process, not
 * to the store: the directory itself, the lock, the format marker, the
 * cluster id and the incarnation key.
 */
#ifndef RN_DATADIR_H
#define RN_DATADIR_H

#include "ops/config.h"

/* Creates the data directory with every missing parent (each new entry
 * synced), refuses it when it holds a name Runnel never writes (an empty
 * directory or one Runnel wrote is fine; the message names the first few
 * such files and how many more), and takes its exclusive lock. Returns the
 * lock fd (held for the process's life) or -1 after logging why not (it
 * cannot be created or read, holds other files, or another runnel uses it);
 * a refused directory is left untouched. */
int rn_datadir_lock(const char *dir);

/* The on-disk format this build reads and writes. Raise it with any change
 * a build of the previous format would misread (log records, checkpoints,
 * file layout), and say in docs/ARCHITECTURE.md what changed. */
#define RN_DATA_FORMAT 3

/* Checks <data>/FORMAT ("runnel data format N"): 0 when N is this build's
 * format. Writes it (durably) when absent from a new directory. Format 1
 * (the log without batch headers and wal/HEAD; also a directory with data
 * written before the marker existed) is taken over when its log is empty,
 * as a clean stop leaves it: the log gets its head and FORMAT says 3.
 * Format 2 (before records stored ahead) is taken over as it is.
 * Returns -1 after logging why not when N is another format, format 1 with
 * records in its log, or the file is damaged: the server must not start on
 * data it would misread, and nothing is changed then. */
int rn_datadir_check_format(const char *dir);

/* The deployment's id (extensions §10): --cluster-id when given, else the
 * one kept in <data>/cluster-id, generated (random hex) and synced at the
 * first start. Returns 0, or -1 after logging why not. */
int rn_datadir_cluster_id(const rn_config *cfg, char out[65]);

/* The deployment's incarnation key (engine.h: mixed into every
 * Stream-Incarnation token): the one kept in <data>/incarnation-key (16
 * lowercase hex digits), or, when there is none, a random one drawn and
 * written durably before any token can be issued, so a directory made
 * afresh never hands out the tokens of the one it replaces. A directory
 * that already holds a store written by a build without the key gets 0,
 * the key its tokens came from (written too). Returns 0, or -1 after
 * logging why not (the file is damaged, or cannot be read or written). */
int rn_datadir_incarnation_key(const char *dir, uint64_t *key);

#endif
