/*
 * fault.h — fault injection for tests; everything here is inert unless the
 * server runs with --test-hooks.
 *
 * Kill points: with RUNNEL_FAULT_KILL_AT naming a point ("point" or
 * "point:N", N counted from 1), the process kills itself (SIGKILL, as a
 * crash would) the Nth time it passes that point. The crash tests use this
 * to stop the server at chosen places of the commit, apply and checkpoint
 * paths; a point is a short name such as "wal-after-write". Every atomic
 * file write (util/files.c) passes "<file>-before-rename", such as
 * "checkpoint-before-rename".
 *
 * Failure points: a test arms one (POST /__runnel/test/fail) so that its
 * next N passes fail with a chosen errno, as the storage under it would:
 *   "boundary-read"  the read of the byte before a JSON boundary (engine)
 *   "blob-delete"    the unlink of a blob (tiers/blobs.c)
 *   "log-reserve"    the step before a command is logged, as a full disk
 *                    refuses it there (engine)
 *   "apply-reserve"  the step before a replica applies a committed command,
 *                    as a full disk refuses it there (engine, cluster mode)
 *   "data-read"  a read of the data directory: stream files (tiers/streamfiles.c)
 *                and the readiness probe (ops/probe.c); armed with a large
 *                N, the file system fails every read
 *   "dir-sync"   the sync of a directory (util/files.c rn_sync_dir), failing
 *                as its open does at the file descriptor limit (EMFILE)
 *   "copy-stall" the local store's copy of a parts commit (tiers/localdir.c
 *                concat, on a worker) does not fail but waits 2 s first,
 *                as a slow store would: commits held in their copy
 *   "log-stall"  a Raft log write of a cluster node (cluster/appends.c) does
 *                not fail but waits, retried every 250 ms while the point
 *                is armed, as a stalled disk would make it (the chaos
 *                harness's slow-disk fault; cluster_disk throttles a real
 *                disk)
 *   "fork-create-after-pin"  a fork's create apart from its source
 *                stops after the source's group pinned it, as if its node
 *                stopped there: 503, the pin left to the orphan sweep
 *                (engine/apart.c, cluster mode)
 *   "gap-piece"  a piece fetched for a replica's gap is taken as not
 *                answered, asked again FETCH_RETRY_MS later
 *                (cluster/fetch.c): a slow copy
 *   "data-sync"  the sync of a large append's bytes in its stream file,
 *                before its log record (engine/ahead.c): the write is
 *                refused, nothing logged
 *   "read-index" a leader's answer to a follower's ReadIndex ask is 503
 *                NO_LEADER, as when it could not confirm its leadership
 *                (cluster/read_index.c): the follower asks again
 *   "leader-noop" a new leader does not propose its term's first entry
 *                yet (consensus/reads.c), each loop turn a pass: armed
 *                with a large N, it leads without serving, as between its
 *                election and that entry's commit, until disarmed
 */
#ifndef RN_FAULT_H
#define RN_FAULT_H

/* Arms the kill point from the environment (call once, with test hooks on,
 * before any thread starts). Returns 0, or -1 after printing why to stderr
 * when RUNNEL_FAULT_KILL_AT names no kill point of this build or its pass
 * count is not a canonical decimal from 1 (the caller refuses to start: a
 * misspelt or removed point would otherwise never fire, and its test would
 * prove nothing). */
int rn_fault_setup(void);
/* Marks a point of the code; kills the process when it is the armed one.
 * `name` must be one of the kill points listed in fault.c. */
void rn_fault_point(const char *name);
/* True when name is one of those kill points (for code whose point's name
 * is made at run time). */
int rn_fault_is_kill_point(const char *name);

/* Makes the next n passes of failure point `name` (one of those listed
 * above) fail with -err; n = 0 disarms it. Returns 0, or -1 for a name that
 * is no failure point. Any thread. */
int rn_fault_arm(const char *name, int n, int err);
/* At a failure point: 0 when it is not armed, else uses up one armed pass
 * and returns the negative errno to fail with. Any thread; costs one atomic
 * load while nothing is armed. */
int rn_fault_fail(const char *name);

#endif
