/*
 * toy_fsm.c — the test node's state machine. See toy_fsm.h.
 */
#include "toy_fsm.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "util/buf.h"
#include "util/siphash.h"

void toy_init(toy_fsm *t, unsigned groups) {
    t->groups = rn_xcalloc(groups, sizeof *t->groups);
    t->n_groups = groups;
}

static void clear_group(toy_group *g) {
    for (size_t i = 0; i < g->n; i++)
        free(g->values[i]);
    free(g->values);
    memset(g, 0, sizeof *g);
}

void toy_free(toy_fsm *t) {
    for (unsigned i = 0; i < t->n_groups; i++)
        clear_group(&t->groups[i]);
    free(t->groups);
    t->groups = NULL;
}

static void keep(toy_group *g, const void *data, size_t len) {
    if (g->n == g->cap) {
        g->cap = g->cap ? g->cap * 2 : 64;
        g->values = rn_xrealloc(g->values, g->cap * sizeof *g->values);
    }
    g->values[g->n++] = rn_xstrndup(data, len);
}

/* Replicas compare digests: a fixed key makes SipHash deterministic. */
static const uint8_t DIGEST_KEY[16] = {0};

uint64_t *toy_apply(toy_fsm *t, unsigned group, uint64_t index, const void *data, size_t len) {
    assert(group < t->n_groups);
    toy_group *g = &t->groups[group];
    assert(index > g->last_index);
    uint64_t link[3] = {g->digest, index, rn_siphash24(DIGEST_KEY, data, len)};
    g->digest = rn_siphash24(DIGEST_KEY, link, sizeof link);
    g->count++;
    g->last_index = index;
    if (len <= TOY_MAX_KEPT)
        keep(g, data, len);
    uint64_t *position = rn_xmalloc(sizeof *position);
    *position = g->count;
    return position;
}

void toy_snapshot(const toy_fsm *t, unsigned group, void **out, size_t *len) {
    assert(group < t->n_groups);
    const toy_group *g = &t->groups[group];
    rn_buf b = {0};
    rn_buf_append_u64(&b, g->count);
    rn_buf_append_u64(&b, g->digest);
    rn_buf_append_u64(&b, g->last_index);
    rn_buf_append_u64(&b, g->n);
    for (size_t i = 0; i < g->n; i++)
        rn_buf_append_lstr(&b, g->values[i], strlen(g->values[i]));
    *out = rn_buf_steal(&b, len);
}

int toy_restore(toy_fsm *t, unsigned group, uint64_t index, const void *data, size_t len) {
    assert(group < t->n_groups);
    rn_reader r;
    rn_reader_init(&r, data, len);
    toy_group fresh = {0};
    fresh.count = rn_read_u64(&r);
    fresh.digest = rn_read_u64(&r);
    fresh.last_index = rn_read_u64(&r);
    uint64_t n = rn_read_u64(&r);
    if (r.failed || n > len || fresh.last_index > index)
        return -1;
    for (uint64_t i = 0; i < n && !r.failed; i++) {
        size_t vlen;
        const uint8_t *v = rn_read_lstr(&r, &vlen);
        if (!r.failed)
            keep(&fresh, v, vlen);
    }
    if (r.failed || r.p != r.end) {
        clear_group(&fresh);
        return -1;
    }
    clear_group(&t->groups[group]);
    t->groups[group] = fresh;
    return 0;
}
