/*
 * list.h — an intrusive doubly linked list: the element embeds an
 * rn_list_node, the list is two pointers, nothing is allocated.
 *
 * A zeroed rn_list is empty and a zeroed node is unlinked, so both may live
 * in calloc'ed structures without an init call. A node is in at most one
 * list at a time, and only its owner knows which (a node's pointers do not
 * tell whether it is linked: the only node of a list has none either).
 * A walk that saves a node's next pointer before visiting it may remove
 * the visited node (and link new ones at the head, which it does not visit).
 */
#ifndef RN_LIST_H
#define RN_LIST_H

#include <assert.h>
#include <stddef.h>

typedef struct rn_list_node {
    struct rn_list_node *prev, *next;
} rn_list_node;

typedef struct {
    rn_list_node *first, *last;
} rn_list;

/* The element that embeds node as its member `member`. */
#define rn_list_entry(node, type, member) ((type *)((char *)(node)-offsetof(type, member)))

static inline int rn_list_empty(const rn_list *l) {
    return l->first == NULL;
}

/* Links n (unlinked) at the head of l. */
static inline void rn_list_push_front(rn_list *l, rn_list_node *n) {
    assert(n->prev == NULL && n->next == NULL && l->first != n);
    n->next = l->first;
    if (l->first)
        l->first->prev = n;
    else
        l->last = n;
    l->first = n;
}

/* Links n (unlinked) at the tail of l. */
static inline void rn_list_push_back(rn_list *l, rn_list_node *n) {
    assert(n->prev == NULL && n->next == NULL && l->first != n);
    n->prev = l->last;
    if (l->last)
        l->last->next = n;
    else
        l->first = n;
    l->last = n;
}

/* Unlinks n, which is in l, and leaves it unlinked. */
static inline void rn_list_remove(rn_list *l, rn_list_node *n) {
    assert(n->prev ? n->prev->next == n : l->first == n);
    assert(n->next ? n->next->prev == n : l->last == n);
    if (n->prev)
        n->prev->next = n->next;
    else
        l->first = n->next;
    if (n->next)
        n->next->prev = n->prev;
    else
        l->last = n->prev;
    n->prev = n->next = NULL;
}

#endif
