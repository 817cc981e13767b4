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

/* Every kill point the code passes; a name outside this list is refused
 * at start, and passing one is a programming error. */
static const char *const kill_points[] = {
    "wal-after-write",        "wal-after-sync",          "wal-after-spare-rename",
    "apply-before-store",     "checkpoint-after-syncfs", "checkpoint-before-rename",
    "checkpoint-before-drop", "publish-after-blob",      "commit-after-assemble",
    "retain-before-punch",    "retain-after-punch",      "delete-before-remove",
    "delete-after-remove",    "tier-before-put",         "tier-after-put",
    "tier-after-record",      "tier-before-punch",       "tier-after-punch",
    "sweep-before-unlink",    "sweep-after-unlink",      "orphan-before-remove",
    "orphan-after-remove",    "ahead-after-write",       "ahead-after-sync",
    "arriving-after-piece"};
#define N_KILL_POINTS (sizeof kill_points / sizeof kill_points[0])

static char armed[64];
static long armed_nth;
static atomic_long passes;

static int is_kill_point(const char *name, size_t len) {
    for (size_t i = 0; i < N_KILL_POINTS; i++)
        if (strlen(kill_points[i]) == len && memcmp(kill_points[i], name, len) == 0)
            return 1;
    return 0;
}

int rn_fault_is_kill_point(const char *name) {
    return is_kill_point(name, strlen(name));
}

int rn_fault_setup(void) {
    const char *v = getenv("RUNNEL_FAULT_KILL_AT");
    if (!v || !*v)
        return 0;
    const char *colon = strchr(v, ':');
    size_t n = colon ? (size_t)(colon - v) : strlen(v);
    if (!is_kill_point(v, n)) {
        fprintf(stderr,
                "runnel: RUNNEL_FAULT_KILL_AT names no kill point of this build: %.*s (known:",
                (int)n, v);
        for (size_t i = 0; i < N_KILL_POINTS; i++)
            fprintf(stderr, " %s", kill_points[i]);
        fprintf(stderr, ")\n");
        return -1;
    }
    long nth = 1;
    if (colon) {
        const char *d = colon + 1;
        size_t digits = strspn(d, "0123456789");
        if (digits == 0 || digits > 9 || d[digits] != 0 || d[0] == '0') {
            fprintf(stderr,
                    "runnel: RUNNEL_FAULT_KILL_AT: the pass count must be a decimal from 1: %s\n",
                    v);
            return -1;
        }
        nth = atol(d);
    }
    memcpy(armed, v, n);
    armed[n] = 0;
    armed_nth = nth;
    return 0;
}

void rn_fault_point(const char *name) {
    assert(is_kill_point(name, strlen(name)));
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

static failure_point points[] = {
    {.name = "boundary-read"}, {.name = "blob-delete"}, {.name = "log-reserve"},
    {.name = "apply-reserve"}, {.name = "data-read"},   {.name = "dir-sync"},
    {.name = "copy-stall"},    {.name = "log-stall"},   {.name = "fork-create-after-pin"},
    {.name = "gap-piece"},     {.name = "data-sync"},   {.name = "read-index"},
    {.name = "leader-noop"}};
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
