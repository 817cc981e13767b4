/*
 * topk.h — the k smallest keys of a sequence offered in any order, all
 * above a bound: a page of a sorted listing made from an unsorted walk
 * (the operator's listings of buckets, streams and subscriptions walk hash
 * maps) in O(n log k) time and O(k) memory, never the whole listing.
 *
 * Keys are byte strings compared as memcmp does, a shorter one first when
 * it is a prefix of the other. A key is borrowed: it must stay valid and
 * unchanged until rn_topk_free; or, in a selection made with
 * rn_topk_init_owned (one offered over several loop turns, whose keys may
 * go meanwhile), copied.
 */
#ifndef RN_TOPK_H
#define RN_TOPK_H

#include <stddef.h>

typedef struct {
    const char *key;
    size_t len;
    void *item;
} rn_topk_entry;

typedef struct {
    rn_topk_entry *heap; /* a max-heap of the kept entries until rn_topk_sort */
    size_t n, k;
    const char *after; /* only keys above it are kept (NULL: every key) */
    size_t after_len;
    int owned; /* keys are copies, each kept once */
} rn_topk;

/* Compares two keys (negative, zero, positive). */
int rn_topk_cmp(const char *a, size_t alen, const char *b, size_t blen);

/* Starts a selection of at most k >= 1 keys above `after` (borrowed; NULL:
 * no bound). */
void rn_topk_init(rn_topk *t, size_t k, const char *after, size_t after_len);
/* The same, keeping a copy of each key (freed by rn_topk_free and when
 * it drops out) and a key offered again while kept once: a walk over
 * loop turns may visit a stream twice. */
void rn_topk_init_owned(rn_topk *t, size_t k, const char *after, size_t after_len);
/* Offers a key with its item: kept while it is above the bound and among
 * the k smallest offered so far. A key offered twice is kept twice (once
 * in an owned selection). */
void rn_topk_offer(rn_topk *t, const char *key, size_t len, void *item);
/* Sorts the kept entries ascending into t->heap[0..n) and returns n (no
 * offer after this). */
size_t rn_topk_sort(rn_topk *t);
void rn_topk_free(rn_topk *t);

#endif
