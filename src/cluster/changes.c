/*
 * changes.c — the journal of stream paths changed on this node (see
 * changes.h): a map from path to its last change, and two lists in the
 * order of their sequence numbers, one of the live paths and one of the
 * removed ones, so that the paths changed since a point are found by
 * walking back from the lists' ends, and the oldest removal is the first
 * to forget.
 */
#include "cluster/changes.h"
#include "util/list.h"
#include "util/map.h"
#include "util/buf.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

typedef struct {
    char *path; /* key in the map */
    size_t len;
    uint64_t seq; /* of its last change */
    int removed;
    rn_list_node link; /* in live or removed */
} change;

struct rn_changes {
    rn_map by_path; /* path -> change */
    rn_list live, removed;
    size_t removed_count, max_removed;
    uint64_t incarnation, seq;
    uint64_t forgotten; /* the sequence number of the last removal forgotten, 0: none */
    int keeping;        /* rn_changes_keep was called */
};

static uint64_t new_incarnation(uint64_t old) {
    uint64_t inc = old;
    while (inc == 0 || inc == old)
        if (getrandom(&inc, sizeof inc, 0) != (ssize_t)sizeof inc)
            abort(); /* the kernel's generator cannot fail once seeded */
    return inc;
}

rn_changes *rn_changes_new(size_t max_removed) {
    assert(max_removed >= 1);
    rn_changes *c = rn_xcalloc(1, sizeof *c);
    c->max_removed = max_removed;
    c->incarnation = new_incarnation(0);
    return c;
}

static void drop_all(rn_changes *c) {
    size_t i = 0;
    void *v;
    while (rn_map_next(&c->by_path, &i, &v)) {
        change *ch = v;
        free(ch->path);
        free(ch);
    }
    rn_map_free(&c->by_path);
    memset(&c->by_path, 0, sizeof c->by_path);
    c->live = c->removed = (rn_list){0};
    c->removed_count = 0;
}

void rn_changes_free(rn_changes *c) {
    if (!c)
        return;
    drop_all(c);
    free(c);
}

void rn_changes_forget_all(rn_changes *c) {
    drop_all(c);
    c->incarnation = new_incarnation(c->incarnation);
    c->seq = c->forgotten = 0;
}

uint64_t rn_changes_incarnation(const rn_changes *c) {
    return c->incarnation;
}

uint64_t rn_changes_seq(const rn_changes *c) {
    return c->seq;
}

static rn_list *list_of(rn_changes *c, const change *ch) {
    return ch->removed ? &c->removed : &c->live;
}

void rn_changes_keep(rn_changes *c) {
    c->keeping = 1;
}

void rn_changes_note(rn_changes *c, const char *path, size_t len, int removed) {
    if (!c->keeping)
        return;
    change *ch = rn_map_get(&c->by_path, path, len);
    if (ch) {
        rn_list_remove(list_of(c, ch), &ch->link);
        c->removed_count -= ch->removed;
    } else {
        ch = rn_xcalloc(1, sizeof *ch);
        ch->path = rn_xstrndup(path, len);
        ch->len = len;
        rn_map_put(&c->by_path, ch->path, ch->len, ch);
    }
    ch->seq = ++c->seq;
    ch->removed = removed != 0;
    c->removed_count += ch->removed;
    rn_list_push_back(list_of(c, ch), &ch->link);
    while (c->removed_count > c->max_removed) { /* forget the oldest removal */
        change *old = rn_list_entry(c->removed.first, change, link);
        rn_list_remove(&c->removed, &old->link);
        c->removed_count--;
        c->forgotten = old->seq;
        rn_map_remove(&c->by_path, old->path, old->len);
        free(old->path);
        free(old);
    }
}

int rn_changes_since(const rn_changes *c, uint64_t since,
                     void (*fn)(const char *path, size_t len, int removed, void *arg), void *arg) {
    if (since > c->seq || since < c->forgotten)
        return 0;
    const rn_list *lists[2] = {&c->live, &c->removed};
    for (int k = 0; k < 2; k++)
        for (rn_list_node *n = lists[k]->last; n; n = n->prev) {
            const change *ch = rn_list_entry(n, change, link);
            if (ch->seq <= since)
                break;
            fn(ch->path, ch->len, ch->removed, arg);
        }
    return 1;
}
