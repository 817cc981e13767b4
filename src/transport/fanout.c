/*
 * fanout.c — the helper threads of parallel fan-out. See fanout.h.
 *
 * A job is published under the mutex (items, count, a new generation) and
 * the helpers are woken. Items are claimed through one atomic word holding
 * the job's generation (high 32 bits) and the next unclaimed index (low 32
 * bits), advanced by compare-and-swap one item at a time: a thread that is
 * preempted in the middle of a job holds up only the item it is on (a
 * sending thread shares its CPUs with the receivers). A helper that
 * wakes after its job was finished, or holds the pointers of an older job,
 * fails the generation check and touches no item: every item of a job is
 * claimed before the job can finish, and the next job starts with a new
 * generation. The submitter counts finished items and sleeps on a
 * condition variable until the last item is reported.
 */
#include "transport/fanout.h"
#include "util/buf.h"

#include <assert.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

struct rn_fanout {
    pthread_mutex_t mu;
    pthread_cond_t wake; /* helpers: a new job, or stop */
    pthread_cond_t done; /* the submitter: the last item finished */
    pthread_t *threads;
    int count;
    int stopping;
    /* the current job, written under mu before the generation moves on */
    uint32_t gen;
    void (*fn)(void *item);
    char *items;
    size_t item_size, n;
    _Atomic uint64_t claim;  /* gen << 32 | next unclaimed index */
    _Atomic size_t finished; /* items of the current job done */
};

/* Runs items of job `gen` until none is left to claim. */
static void work(rn_fanout *f, uint32_t gen, void (*fn)(void *), char *items, size_t item_size,
                 size_t n) {
    for (;;) {
        uint64_t w = atomic_load(&f->claim);
        do {
            if ((uint32_t)(w >> 32) != gen || (w & UINT32_MAX) >= n)
                return;
        } while (!atomic_compare_exchange_weak(&f->claim, &w, w + 1));
        fn(items + (size_t)(w & UINT32_MAX) * item_size);
        if (atomic_fetch_add(&f->finished, 1) + 1 == n) {
            pthread_mutex_lock(&f->mu);
            pthread_cond_signal(&f->done);
            pthread_mutex_unlock(&f->mu);
        }
    }
}

static void *helper(void *arg) {
    rn_fanout *f = arg;
    uint32_t seen = 0;
    pthread_mutex_lock(&f->mu);
    for (;;) {
        while (!f->stopping && f->gen == seen)
            pthread_cond_wait(&f->wake, &f->mu);
        if (f->stopping)
            break;
        seen = f->gen;
        void (*fn)(void *) = f->fn;
        char *items = f->items;
        size_t item_size = f->item_size, n = f->n;
        pthread_mutex_unlock(&f->mu);
        work(f, seen, fn, items, item_size, n);
        pthread_mutex_lock(&f->mu);
    }
    pthread_mutex_unlock(&f->mu);
    return NULL;
}

rn_fanout *rn_fanout_new(int threads) {
    assert(threads > 0);
    rn_fanout *f = rn_xcalloc(1, sizeof *f);
    pthread_mutex_init(&f->mu, NULL);
    pthread_cond_init(&f->wake, NULL);
    pthread_cond_init(&f->done, NULL);
    f->threads = rn_xcalloc((size_t)threads, sizeof *f->threads);
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    while (f->count < threads && pthread_create(&f->threads[f->count], NULL, helper, f) == 0)
        f->count++;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (f->count == 0) {
        rn_fanout_free(f);
        return NULL;
    }
    return f;
}

void rn_fanout_run(rn_fanout *f, void (*fn)(void *item), void *items, size_t item_size, size_t n) {
    if (n == 0)
        return;
    pthread_mutex_lock(&f->mu);
    uint32_t gen = ++f->gen;
    f->fn = fn;
    f->items = items;
    f->item_size = item_size;
    f->n = n;
    atomic_store(&f->finished, 0);
    atomic_store(&f->claim, (uint64_t)gen << 32);
    pthread_cond_broadcast(&f->wake);
    pthread_mutex_unlock(&f->mu);
    work(f, gen, fn, items, item_size, n);
    if (atomic_load(&f->finished) == n)
        return;
    pthread_mutex_lock(&f->mu);
    while (atomic_load(&f->finished) < n)
        pthread_cond_wait(&f->done, &f->mu);
    pthread_mutex_unlock(&f->mu);
}

void rn_fanout_free(rn_fanout *f) {
    if (!f)
        return;
    pthread_mutex_lock(&f->mu);
    f->stopping = 1;
    pthread_cond_broadcast(&f->wake);
    pthread_mutex_unlock(&f->mu);
    for (int i = 0; i < f->count; i++)
        pthread_join(f->threads[i], NULL);
    pthread_cond_destroy(&f->done);
    pthread_cond_destroy(&f->wake);
    pthread_mutex_destroy(&f->mu);
    free(f->threads);
    free(f);
}
