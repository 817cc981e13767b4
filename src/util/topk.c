/*
 * topk.c — the k smallest keys above a bound, by a max-heap of k
 * entries. See topk.h.
 */
#include "util/topk.h"
#include "util/buf.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

int rn_topk_cmp(const char *a, size_t alen, const char *b, size_t blen) {
    int c = memcmp(a, b, alen < blen ? alen : blen);
    return c ? c : (alen > blen) - (alen < blen);
}

static int less(const rn_topk_entry *x, const rn_topk_entry *y) {
    return rn_topk_cmp(x->key, x->len, y->key, y->len) < 0;
}

static void swap(rn_topk_entry *x, rn_topk_entry *y) {
    rn_topk_entry t = *x;
    *x = *y;
    *y = t;
}

/* Restores the max-heap below position i. */
static void sift_down(rn_topk_entry *h, size_t n, size_t i) {
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, top = i;
        if (l < n && less(&h[top], &h[l]))
            top = l;
        if (r < n && less(&h[top], &h[r]))
            top = r;
        if (top == i)
            return;
        swap(&h[i], &h[top]);
        i = top;
    }
}

void rn_topk_init(rn_topk *t, size_t k, const char *after, size_t after_len) {
    assert(k >= 1);
    memset(t, 0, sizeof *t);
    t->k = k;
    t->heap = rn_xcalloc(k, sizeof *t->heap);
    t->after = after;
    t->after_len = after_len;
}

void rn_topk_init_owned(rn_topk *t, size_t k, const char *after, size_t after_len) {
    rn_topk_init(t, k, after, after_len);
    t->owned = 1;
}

/* 1 when key is among the kept (an owned selection's check, O(k); only
 * for a key about to be kept, which a long walk offers about k log(n/k)
 * times). */
static int kept(const rn_topk *t, const char *key, size_t len) {
    for (size_t i = 0; i < t->n; i++)
        if (rn_topk_cmp(key, len, t->heap[i].key, t->heap[i].len) == 0)
            return 1;
    return 0;
}

void rn_topk_offer(rn_topk *t, const char *key, size_t len, void *item) {
    if (t->after && rn_topk_cmp(key, len, t->after, t->after_len) <= 0)
        return;
    rn_topk_entry e = {.key = key, .len = len, .item = item};
    if (t->owned) {
        if ((t->n == t->k && !less(&e, &t->heap[0])) || kept(t, key, len))
            return;
        e.key = rn_xstrndup(key, len);
    }
    if (t->n < t->k) { /* sift up */
        size_t i = t->n++;
        t->heap[i] = e;
        while (i > 0 && less(&t->heap[(i - 1) / 2], &t->heap[i])) {
            swap(&t->heap[i], &t->heap[(i - 1) / 2]);
            i = (i - 1) / 2;
        }
    } else if (less(&e, &t->heap[0])) { /* replaces the largest kept */
        if (t->owned)
            free((char *)t->heap[0].key);
        t->heap[0] = e;
        sift_down(t->heap, t->n, 0);
    }
}

static int cmp_entry(const void *a, const void *b) {
    const rn_topk_entry *x = a, *y = b;
    return rn_topk_cmp(x->key, x->len, y->key, y->len);
}

size_t rn_topk_sort(rn_topk *t) {
    qsort(t->heap, t->n, sizeof *t->heap, cmp_entry);
    return t->n;
}

void rn_topk_free(rn_topk *t) {
    for (size_t i = 0; t->owned && i < t->n; i++)
        free((char *)t->heap[i].key);
    free(t->heap);
    t->heap = NULL;
    t->n = 0;
}
