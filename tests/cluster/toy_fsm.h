/*
 * toy_fsm.h — the deterministic state machine of runnel-consensus-node:
 * per group, an append-only list of the values applied, a count and a
 * digest chained over (index, value), so replicas that applied the same
 * entries at the same indexes in the same order have equal digests.
 *
 * Values longer than TOY_MAX_KEPT bytes (benchmark payloads) count in the
 * digest and the count but are not kept in the list. The manifest
 * (snapshot) is the whole state: count, digest, last index and the list.
 */
#ifndef RN_TEST_TOY_FSM_H
#define RN_TEST_TOY_FSM_H

#include <stddef.h>
#include <stdint.h>

#define TOY_MAX_KEPT 64

typedef struct {
    char **values;
    size_t n, cap;
    uint64_t count; /* entries applied (kept or not) */
    uint64_t digest;
    uint64_t last_index;
} toy_group;

typedef struct {
    toy_group *groups;
    unsigned n_groups;
} toy_fsm;

void toy_init(toy_fsm *t, unsigned groups);
void toy_free(toy_fsm *t);

/* Applies a value at index; returns the value's position in the group
 * (its count after the apply) as a malloc'd uint64_t. */
uint64_t *toy_apply(toy_fsm *t, unsigned group, uint64_t index, const void *data, size_t len);

/* The group's manifest in a malloc'd buffer. */
void toy_snapshot(const toy_fsm *t, unsigned group, void **out, size_t *len);

/* Replaces the group's state with a manifest's. Returns 0, or -1 for a
 * manifest that does not parse (state unchanged). */
int toy_restore(toy_fsm *t, unsigned group, uint64_t index, const void *data, size_t len);

#endif
