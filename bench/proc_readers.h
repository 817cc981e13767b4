/*
 * proc_readers.h — readers that are other programs: child processes of one
 * command line (the stream's URL appended as its last argument) whose
 * stdout is read on the run's loop and cut into fixed-size records.
 *
 * The fanout scenario uses it to measure a client program (`runnel tail
 * -f`) beside runnel-bench's own SSE readers: the pipes are read by the
 * same loop as the sockets, so a record's arrival is timed exactly as an
 * SSE event's is. stdin of a child is /dev/null, its stderr is ours.
 *
 * A child that exits, or closes its stdout, before bn_procs_stop() is a run
 * error (reported, the run stops). bn_run_stop() kills (SIGKILL) every child
 * still running; uv_run() returns once they are reaped.
 */
#ifndef BN_PROC_READERS_H
#define BN_PROC_READERS_H

#include <stddef.h>
#include <stdint.h>

/* Called for each complete record rec[0..len) (len is the record size)
 * that reader `reader` (0..n-1) wrote, in order. */
typedef void (*bn_record_fn)(void *arg, int reader, const char *rec, size_t len);

/* Starts n (>= 1) children of `cmd` (split at spaces; no quoting) followed
 * by url. Their output is cut into `record`-byte records (record >= 1)
 * handed to fn. Returns 0, or -1 after reporting why (the run is stopped). */
int bn_procs_start(const char *cmd, const char *url, int n, size_t record, bn_record_fn fn,
                   void *arg);

/* Bytes read so far from reader i, including an incomplete last record. */
uint64_t bn_procs_bytes(int i);

/* Ends the children (SIGTERM) and calls done() once every one of them has
 * been reaped and its pipe closed (at once when there are none). Call at
 * most once, before bn_run_stop(). */
void bn_procs_stop(void (*done)(void));

/* User + system CPU seconds of the children reaped so far (all of this
 * process's children are readers). */
double bn_procs_cpu_s(void);

#endif
