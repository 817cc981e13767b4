/*
 * fault.h — fault injection for tests. Off unless the server runs with
 * --test-hooks 1 and RUNNEL_FAULT_KILL_AT names a point: then the process
 * kills itself (SIGKILL, as a crash would) the Nth time it passes that
 * point ("point" or "point:N", N counted from 1). The crash tests use this
 * to stop the server at chosen places of the commit, apply and checkpoint
 * paths; a point is a short name such as "wal-after-write".
 */
#ifndef RN_FAULT_H
#define RN_FAULT_H

/* Arms the kill point from the environment (call once, with test hooks on). */
void rn_fault_setup(void);
/* Marks a point of the code; kills the process when it is the armed one. */
void rn_fault_point(const char *name);

#endif
