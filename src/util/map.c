/*
 * map.c — open-addressing hash map with backward-shift deletion. See map.h.
 */
#include "util/map.h"
#include "util/buf.h"

#include <stdlib.h>
#include <string.h>

uint64_t rn_hash_bytes(const void *key, size_t len) {
    /* FNV-1a over 8-byte words with a final avalanche (splitmix64). */
    const uint8_t *p = key;
    uint64_t h = 0xcbf29ce484222325ull ^ len;
    while (len >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        h = (h ^ w) * 0x100000001b3ull;
        h ^= h >> 29;
        p += 8;
        len -= 8;
    }
    while (len--)
        h = (h ^ *p++) * 0x100000001b3ull;
    h ^= h >> 30;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 27;
    h *= 0x94d049bb133111ebull;
    h ^= h >> 31;
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
    size_t i = find_slot(m, rn_hash_bytes(key, len), key, len);
    return m->slots[i].hash ? m->slots[i].value : NULL;
}

void *rn_map_put(rn_map *m, const void *key, size_t len, void *value) {
    if ((m->count + 1) * 10 > m->cap * 7)
        grow(m);
    uint64_t h = rn_hash_bytes(key, len);
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
    size_t i = find_slot(m, rn_hash_bytes(key, len), key, len);
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
