/*
 * placement.h — where a stream lives in a cluster: its Raft group, a hash
 * of its key, and the ids this node issues for new streams.
 *
 * Group. FNV-1a (64-bit) of the stream key's bytes, modulo the group
 * count. Fixed forever: a stream's group is never stored, it is derived
 * from the key on every request, so a change would move every stream.
 *
 * Ids. A stream id (and a rewrite's serial) must be unique in the whole
 * cluster: stream files, incarnation tokens and fork links are keyed by
 * it, and the leaders of different groups issue them independently. An id
 * is (serial << 16) | (node << 8) | group: the issuing node's id keeps
 * nodes apart, and serials of one node never repeat, because each start
 * reserves a new block of serials in <data>/cluster-ids (written durably
 * before the first id of the block is issued). Ids stay below 2^52, the
 * domain of incarnation tokens (state.h). A node id is never reused for
 * an empty data directory (a replacement gets a new id).
 */
#ifndef RN_CLUSTER_PLACEMENT_H
#define RN_CLUSTER_PLACEMENT_H

#include <stddef.h>
#include <stdint.h>

/* The group of a stream key (groups 1..256). */
unsigned rn_placement_group(const char *key, size_t len, unsigned groups);

struct rn_stream;
/* An rn_stream_pick (engine.h): true when s is in the group *(unsigned *)arg
 * (its id's group). */
int rn_placement_stream_in_group(const struct rn_stream *s, void *arg);

/* The group an id was issued for. */
static inline unsigned rn_placement_id_group(uint64_t id) {
    return (unsigned)(id & 0xff);
}

/* Serials one reservation covers. */
#define RN_ID_BLOCK (1ull << 20)

typedef struct {
    char *dir;      /* where cluster-ids lives */
    unsigned node;  /* 1..255 */
    uint64_t next;  /* next serial to issue */
    uint64_t limit; /* first serial past the reserved block */
} rn_id_issuer;

/* Reads <dir>/cluster-ids and reserves the next block. Returns 0, or -1
 * with a message in err (the file is damaged or cannot be written; there
 * is nothing to close then). */
int rn_id_issuer_open(rn_id_issuer *is, const char *dir, unsigned node, char *err, size_t errcap);
void rn_id_issuer_close(rn_id_issuer *is);

/* A new id for group; reserves the next block (a durable file write on
 * this thread) when the current one is used up. Returns 0 only when no
 * block can be reserved (serials exhausted or the file cannot be written):
 * the caller then issues nothing. */
uint64_t rn_id_issue(rn_id_issuer *is, unsigned group);

#endif
