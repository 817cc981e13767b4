/*
 * fault.c — test-only kill points and failure points. See fault.h.
 *
 * The armed kill point and its counter are written before any worker
 * thread starts and read afterwards; the counter may be bumped from the
 * loop and a worker at once, so it is atomic. Failure points are armed from
 * the loop and passed on any thread: their counters are atomic, and
 * `any_armed` lets an unarmed pass skip them.
 */
#include "util/fault.h"

#include <assert.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char armed[64];
static long armed_nth;
static atomic_long passes;

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

/* ---- failure points ---- */

typedef struct {
    const char *name;
    atomic_int left; /* passes still to fail */
    atomic_int err;
} failure_point;

static failure_point points[] = {{.name = "boundary-read"},
                                 {.name = "blob-delete"},
                                 {.name = "log-reserve"},
                                 {.name = "data-read"},
                                 {.name = "dir-sync"}};
static atomic_int any_armed;

static failure_point *find_point(const char *name) {
    for (size_t i = 0; i < sizeof points / sizeof points[0]; i++)
        if (strcmp(points[i].name, name) == 0)
            return &points[i];
    return NULL;
}

int rn_fault_arm(const char *name, int n, int err) {
    assert(n >= 0 && err > 0);
    failure_point *p = find_point(name);
    if (!p)
        return -1;
    atomic_store(&p->err, err);
    atomic_store(&p->left, n);
    if (n > 0)
        atomic_store(&any_armed, 1);
    return 0;
}

int rn_fault_fail(const char *name) {
    if (!atomic_load_explicit(&any_armed, memory_order_relaxed))
        return 0;
    failure_point *p = find_point(name);
    assert(p); /* a pass names one of the points above */
    int left = atomic_load(&p->left);
    while (left > 0 && !atomic_compare_exchange_weak(&p->left, &left, left - 1)) {
    }
    return left > 0 ? -atomic_load(&p->err) : 0;
}
