/*
 * fault.h — fault injection for tests. Off unless the server runs with
 * --test-hooks 1:
 *  - kill points: when RUNNEL_FAULT_KILL_AT names a point, the process
 *    kills itself (SIGKILL, as a crash would) the Nth time it passes that
 *    point ("point" or "point:N", N counted from 1). The crash tests use
 *    this to stop the server at chosen places of the commit, apply and
 *    checkpoint paths; a point is a short name such as "wal-after-write".
 *  - failing reads: while switched on (the test hook POST
 *    /__runnel/test/fail-reads?on=1), every read of the data directory
 *    that asks rn_fault_read() fails with EIO, as on a file system whose
 *    device fails reads (stream files, the readiness probe).
 */
#ifndef RN_FAULT_H
#define RN_FAULT_H

/* Arms the kill point from the environment (call once, with test hooks on). */
void rn_fault_setup(void);
/* Marks a point of the code; kills the process when it is the armed one. */
void rn_fault_point(const char *name);

/* Switches failing reads on or off. Any thread. */
void rn_fault_fail_reads(int on);
/* 0, or -EIO while reads are made to fail: call before a read of the data
 * directory and fail with it. Any thread. */
int rn_fault_read(void);

#endif
