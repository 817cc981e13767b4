/*
 * map.c — open-addressing hash map with backward-shift deletion, keyed by
 * SipHash under a per-process random key. See map.h.
 */
#include "util/map.h"
#include "util/buf.h"
#include "util/siphash.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

static uint8_t hash_key[16];
static pthread_once_t hash_key_once = PTHREAD_ONCE_INIT;

static void draw_hash_key(void) {
    if (getrandom(hash_key, sizeof hash_key, 0) != (ssize_t)sizeof hash_key) {
        fprintf(stderr, "runnel: getrandom failed: %s\n", strerror(errno));
        abort();
    }
}

/* The slot hash of a key (never 0: 0 marks an empty slot). */
static uint64_t hash_of(const void *key, size_t len) {
    pthread_once(&hash_key_once, draw_hash_key);
    uint64_t h = rn_siphash24(hash_key, key, len);
    return h ? h : 1;
}

static int slot_matches(const rn_map_slot *s, uint64_t h, const void *key, size_t len) {
    return s->hash == h && s->key_len == len && memcmp(s->key, key, len) == 0;
}

static size_t find_slot(const rn_map *m, uint64_t h, const void *key, size_t len) {
    size_t mask = m->cap - 1;
    for (size_t i = h & mask;; i = (i + 1) & mask) {
        if (m->slots[i].hash == 0 || slot_matches(&m->slots[i], h, key, len))
            return i;
    }
}

static void grow(rn_map *m) {
    rn_map bigger = {rn_xcalloc(m->cap ? m->cap * 2 : 16, sizeof(rn_map_slot)),
                     m->cap ? m->cap * 2 : 16, 0};
    for (size_t i = 0; i < m->cap; i++) {
        rn_map_slot *s = &m->slots[i];
        if (s->hash) {
            size_t j = find_slot(&bigger, s->hash, s->key, s->key_len);
            bigger.slots[j] = *s;
            bigger.count++;
        }
    }
    free(m->slots);
    *m = bigger;
}

void *rn_map_get(const rn_map *m, const void *key, size_t len) {
    if (!m->cap)
        return NULL;
    size_t i = find_slot(m, hash_of(key, len), key, len);
    return m->slots[i].hash ? m->slots[i].value : NULL;
}

void *rn_map_put(rn_map *m, const void *key, size_t len, void *value) {
    if ((m->count + 1) * 10 > m->cap * 7)
        grow(m);
    uint64_t h = hash_of(key, len);
    size_t i = find_slot(m, h, key, len);
    rn_map_slot *s = &m->slots[i];
    void *old = s->hash ? s->value : NULL;
    if (!s->hash)
        m->count++;
    *s = (rn_map_slot){h, key, len, value};
    return old;
}

void *rn_map_remove(rn_map *m, const void *key, size_t len) {
    if (!m->cap)
        return NULL;
    size_t mask = m->cap - 1;
    size_t i = find_slot(m, hash_of(key, len), key, len);
    if (!m->slots[i].hash)
        return NULL;
    void *old = m->slots[i].value;
    /* Backward-shift: move later entries of the probe run into the hole. */
    size_t hole = i;
    for (size_t j = (i + 1) & mask; m->slots[j].hash; j = (j + 1) & mask) {
        size_t home = m->slots[j].hash & mask;
        int between = hole <= j ? (home > hole && home <= j) : (home > hole || home <= j);
        if (!between) {
            m->slots[hole] = m->slots[j];
            hole = j;
        }
    }
    m->slots[hole].hash = 0;
    m->count--;
    return old;
}

void rn_map_free(rn_map *m) {
    free(m->slots);
    m->slots = NULL;
    m->cap = m->count = 0;
}

void rn_map_free_values(rn_map *m) {
    size_t i = 0;
    void *v;
    while (rn_map_next(m, &i, &v))
        free(v);
    rn_map_free(m);
}

int rn_map_next(const rn_map *m, size_t *cursor, void **value) {
    for (; *cursor < m->cap; (*cursor)++) {
        if (m->slots[*cursor].hash) {
            *value = m->slots[(*cursor)++].value;
            return 1;
        }
    }
    return 0;
}
