/*
 * sends.c — a wrapper around libraft's raft_io send that corrects one
 * kind of follower answer, for a libraft 0.15 defect that stalls a
 * follower's replication for good:
 *
 * A follower rejects an AppendEntries whose previous index it no longer
 * holds in its log, even when that index is below its own snapshot
 * (checkLogMatchingProperty: no entry there, so "reject"). The leader,
 * probing, then lowers the follower's next index by one per heartbeat.
 * It lands there when it knows nothing of the follower: a leader elected
 * while the follower was down has match index 0, and its failed sends to
 * the dead follower set the next index to match + 1 = 1, so it sends its
 * own snapshot. If that snapshot is older than the follower's, the
 * follower declines it ("have more recent snapshot") and answers success
 * at the leader's snapshot index; the leader probes from there, below the
 * follower's log, down to 1, sends the snapshot again, and so on: the
 * follower never receives another entry nor the commit index (seen in
 * consensus.test.mjs: a restarted node at commit 531 with its log at 535
 * and snapshot 531, the leader at 537 with snapshot 479, for a minute).
 *
 * The correction: a follower's rejection of a previous index below its
 * snapshot and outside its log becomes a success at its snapshot index.
 * That is true: a snapshot holds only applied, hence committed, entries,
 * and committed entries are the same in every leader's log. The leader
 * then continues from the follower's snapshot index (or sends its newer
 * snapshot if it no longer holds that index). Not while a leader's
 * snapshot is being installed, nor after that failed: libraft then shows
 * the new snapshot index in the log already, with last_stored at 0 (the
 * snapshot is not on disk). Every other message passes through unchanged.
 */
#include "consensus/consensus_int.h"

#include <assert.h>

#include "util/log.h"

static int send_answer(struct raft_io *io, struct raft_io_send *req,
                       const struct raft_message *message, raft_io_send_cb cb) {
    struct raft *r = io->data;
    cs_group *g = r->data;
    assert(g != NULL && g->real_send != NULL);
    const struct raft_append_entries_result *result = &message->append_entries_result;
    if (message->type != RAFT_IO_APPEND_ENTRIES_RESULT || r->state != RAFT_FOLLOWER ||
        result->rejected == 0 || result->rejected >= r->log.snapshot.last_index ||
        result->rejected > r->log.offset || r->last_stored < r->log.snapshot.last_index)
        return g->real_send(io, req, message, cb);
    /* the real send encodes the message before it returns */
    struct raft_message corrected = *message;
    corrected.append_entries_result.rejected = 0;
    corrected.append_entries_result.last_log_index = r->log.snapshot.last_index;
    rn_log(
        RN_LOG_INFO, "cluster_probe_below_snapshot",
        "group %u: the leader probed index %llu, below our snapshot %llu: answered success there",
        g->index, (unsigned long long)result->rejected,
        (unsigned long long)r->log.snapshot.last_index);
    return g->real_send(io, req, &corrected, cb);
}

void cs_sends_wrap(cs_group *g) {
    assert(g->io.send != NULL && g->io.send != send_answer);
    g->real_send = g->io.send;
    g->io.send = send_answer;
}
