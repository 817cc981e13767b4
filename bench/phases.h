/*
 * phases.h — two building blocks that several scenarios share: filling a
 * stream with a given number of bytes (closed-loop appends of a fixed chunk
 * size with producer headers) and replaying a stream from offset -1 by
 * following Stream-Next-Offset until Stream-Up-To-Date.
 *
 * Both run on an idle connection they are given (and rebind to their own
 * handlers), and call `done` when finished;
 * errors stop the run (bn_expect). A replay that gets an empty, not
 * up-to-date answer, or one without Stream-Next-Offset, is a protocol error
 * (it could otherwise loop forever).
 */
#ifndef BN_PHASES_H
#define BN_PHASES_H

#include <stdint.h>

#include "http_client.h"

typedef struct bn_fill {
    bn_conn *c;
    const char *path;
    int producer;
    uint64_t seq;
    uint64_t remaining; /* bytes still to append */
    size_t chunk;
    const char *body; /* at least `chunk` bytes */
    void (*done)(struct bn_fill *f);
    void *user;
} bn_fill;

/* Appends `total` bytes to path in `chunk`-sized appends (the last one may
 * be shorter) from body, as producer `producer`. c must be idle. */
void bn_fill_start(bn_fill *f, bn_conn *c, const char *path, int producer, uint64_t total,
                   size_t chunk, const char *body, void (*done)(bn_fill *f));

typedef struct bn_replay {
    bn_conn *c;
    const char *path;
    uint64_t bytes;
    uint64_t requests;
    uint64_t t_start_ns;
    uint64_t t_end_ns;
    void (*done)(struct bn_replay *r);
    void *user;
} bn_replay;

/* Reads path from offset -1 to the tail. c must be idle. */
void bn_replay_start(bn_replay *r, bn_conn *c, const char *path, void (*done)(bn_replay *r));

#endif
