/*
 * fetch.h — filling a replica's gaps from its peers: the stream bytes and
 * append-index entries a restored manifest names and this node's files
 * lack (engine.h, "Gaps"; a node that fell behind gets the leader's
 * snapshot, a manifest, never stream bytes).
 *
 * For each stream with a gap, in order: the data gap from its first byte,
 * then the index gap, in pieces of at most RN_REPLICA_FETCH_MAX bytes, each
 * asked of a peer over HTTP (GET /__runnel/cluster/bytes/{id}?from=&to=,
 * /__runnel/cluster/index/{id}?from=&to=: cluster_http.c serves them) and
 * written through the engine, which syncs it before the gap's record
 * shrinks. The group's leader is asked first, then the other peers in
 * turn; a failed piece is asked again after FETCH_RETRY_MS. At most
 * FETCH_JOBS streams are filled at once, so memory is bounded by that many
 * pieces. A stream deleted or cut meanwhile ends its job. A fork that keeps
 * its inherited range here (engine/inherit.c) asks for that part of its gap
 * as its source's bytes, of the nodes of the source's group.
 *
 * Pacing: with a rate (bytes/s), each piece and each body books its share
 * of the node's fetch time before it is asked for (pieces shrink to a
 * quarter second's worth), so a new replica or a node catching up takes
 * at most that much of its peers' disks and the network, and foreground
 * requests keep theirs. A body is booked as a whole and moves at the
 * network's pace.
 */
#ifndef RN_CLUSTER_FETCH_H
#define RN_CLUSTER_FETCH_H

#include <stdint.h>
#include <uv.h>

#include "engine/engine.h"
#include "net/outbound.h"

typedef struct rn_fetcher rn_fetcher;

/* The base URL of the peer to ask for a piece of `group`'s streams on the
 * attempt-th try (0: the leader), or NULL when none is known now. */
typedef const char *(*rn_fetch_source)(void *ctx, unsigned group, unsigned attempt);

/* bytes_per_s: the pacing rate; 0: none. */
rn_fetcher *rn_fetcher_new(uv_loop_t *loop, rn_engine *engine, struct rn_tiers *tiers,
                           rn_outbound *http, rn_fetch_source source, void *source_ctx,
                           uint64_t bytes_per_s);
/* Starts filling every gap of the group's streams, and fetching every
 * snapshot body they name that is not here (after a restore). */
void rn_fetcher_scan(rn_fetcher *f, unsigned group);
/* Stream id published a snapshot (its PUBLISH applied here): its body is
 * fetched unless it is here (the leader wrote it; a follower fetches it:
 * GET /__runnel/cluster/blob?cold=&key=, written to the store's temporary
 * file as it comes, synced and renamed into place on a worker). */
void rn_fetcher_published(rn_fetcher *f, uint64_t id);
/* Stream id got a gap (damaged bytes found by a read or the scrub): it is
 * filled unless a job for it is under way (which fills it anyway). */
void rn_fetcher_gap(rn_fetcher *f, uint64_t id);
/* Streams with a gap or a missing snapshot body, waiting or being
 * fetched. */
unsigned rn_fetcher_pending(const rn_fetcher *f);
/* The same for the streams of one group. */
unsigned rn_fetcher_pending_group(const rn_fetcher *f, unsigned group);
/* Stops (fetches in flight are cancelled) and frees; run the loop after
 * so its timer finishes closing. */
void rn_fetcher_free(rn_fetcher *f);

#endif
