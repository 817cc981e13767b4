/*
 * datadir.h — files of the data directory that belong to the process, not
 * to the store: the lock and the cluster id.
 */
#ifndef RN_DATADIR_H
#define RN_DATADIR_H

#include "ops/config.h"

/* Creates the data directory and takes its exclusive lock; returns the lock
 * fd (held for the process's life) or -1 after logging why not (another
 * runnel uses the directory, or it cannot be created). */
int rn_datadir_lock(const char *dir);

/* The deployment's id (extensions §10): --cluster-id when given, else the
 * one kept in <data>/cluster-id, generated (random hex) and synced at the
 * first start. Returns 0, or -1 after logging why not. */
int rn_datadir_cluster_id(const rn_config *cfg, char out[65]);

#endif
