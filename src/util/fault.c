/*
 * fault.c — test-only kill points and failing reads. See fault.h.
 *
 * The armed point and its counter are written before any worker thread
 * starts and read afterwards; the counter may be bumped from the loop and
 * a worker at once, so it is atomic, as is the failing-reads switch.
 */
#include "util/fault.h"

#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char armed[64];
static long armed_nth;
static atomic_long passes;
static atomic_int reads_fail;

void rn_fault_setup(void) {
    const char *v = getenv("RUNNEL_FAULT_KILL_AT");
    if (!v || !*v)
        return;
    const char *colon = strchr(v, ':');
    size_t n = colon ? (size_t)(colon - v) : strlen(v);
    if (n >= sizeof armed)
        return;
    memcpy(armed, v, n);
    armed[n] = 0;
    armed_nth = colon ? atol(colon + 1) : 1;
    if (armed_nth < 1)
        armed_nth = 1;
}

void rn_fault_point(const char *name) {
    if (!armed[0] || strcmp(name, armed) != 0)
        return;
    if (atomic_fetch_add(&passes, 1) + 1 == armed_nth) {
        static const char msg[] = "runnel: fault injection: killed at a kill point\n";
        if (write(2, msg, sizeof msg - 1) < 0) {
            /* nothing to do: the process is going away */
        }
        raise(SIGKILL);
    }
}

void rn_fault_fail_reads(int on) {
    atomic_store(&reads_fail, on != 0);
}

int rn_fault_read(void) {
    return atomic_load(&reads_fail) ? -EIO : 0;
}
