/*
 * map.h — an open-addressing hash map from byte-string keys to pointers.
 *
 * Linear probing with backward-shift deletion (no tombstones), power-of-two
 * capacity, grown at 70% load. The map does not own keys: each key must stay
 * valid (usually it lives inside the value object) until its entry is removed.
 *
 * Keys are hashed with SipHash-2-4 under a key the process draws at random
 * on first use (getrandom), so names a client chooses (stream paths,
 * producer ids) cannot be made to collide: with a fixed hash they could be
 * chosen to share one probe run and make every lookup walk all of them.
 * Slot order and hashes therefore differ from one process to the next;
 * nothing may depend on them beyond the process.
 */
#ifndef RN_MAP_H
#define RN_MAP_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    uint64_t hash; /* 0 marks an empty slot */
    const void *key;
    size_t key_len;
    void *value;
} rn_map_slot;

typedef struct {
    rn_map_slot *slots;
    size_t cap; /* power of two, or 0 before first insert */
    size_t count;
} rn_map;

/* Returns the value stored under key, or NULL. */
void *rn_map_get(const rn_map *m, const void *key, size_t len);
/* Inserts or replaces; returns the previous value or NULL. */
void *rn_map_put(rn_map *m, const void *key, size_t len, void *value);
/* Removes key; returns the removed value or NULL. */
void *rn_map_remove(rn_map *m, const void *key, size_t len);
/* Frees the slot array (not keys or values). */
void rn_map_free(rn_map *m);
/* Frees every value with free(), then the slot array: m is empty after. */
void rn_map_free_values(rn_map *m);

/* Iteration: for (size_t i = 0; rn_map_next(m, &i, &v);) visits every value.
 * The map must not be modified during iteration. */
int rn_map_next(const rn_map *m, size_t *cursor, void **value);

#endif
