/*
 * appends.c — a wrapper around libraft's raft_io append that counts the
 * appends a leader has in flight, for two libraft 0.15 defects:
 *
 * - When a leader's append fails (a disk error, or raft_close cancelling
 *   the appends still queued), libraft truncates its in-memory log from
 *   that append's first index, once per failed append. With two or more
 *   queued, the second truncation starts past the end of the log; the
 *   assertion that would stop it is compiled out in Debian's build, and
 *   the log's memory is corrupted (found by test_consensus: a stop with
 *   proposals in flight crashed inside raft_close). So consensus_stop
 *   closes a group only once its leader appends are done (cs_group's
 *   leader_appends is 0), and a failed leader append while another is
 *   still in flight stops the process before libraft corrupts itself.
 * - Followers' failed appends only answer the leader, so they are merely
 *   passed through.
 *
 * An append is a leader's when the group leads at the time libraft
 * submits it (libraft submits leader appends only while leading).
 */
#include "cluster/consensus_int.h"

#include <assert.h>
#include <stdlib.h>

#include "util/buf.h"
#include "util/log.h"

typedef struct {
    struct raft_io_append inner;  /* what the real append sees */
    struct raft_io_append *outer; /* libraft's request */
    raft_io_append_cb outer_cb;
    cs_group *group;
    bool leader;
} cs_append;

static void append_done(struct raft_io_append *inner, int status) {
    cs_append *a = inner->data;
    cs_group *g = a->group;
    struct raft_io_append *outer = a->outer;
    raft_io_append_cb cb = a->outer_cb;
    if (a->leader) {
        assert(g->leader_appends > 0);
        g->leader_appends--;
        if (status != 0 && g->leader_appends > 0) {
            rn_log(RN_LOG_ERROR, "cluster_append_failed",
                   "group %u: a leader write failed (%s) with %llu more in flight; libraft 0.15 "
                   "would corrupt its log: stopping",
                   g->index, raft_strerror(status), (unsigned long long)g->leader_appends);
            abort();
        }
    }
    free(a);
    cb(outer, status);
}

static int append(struct raft_io *io, struct raft_io_append *req, const struct raft_entry entries[],
                  unsigned n, raft_io_append_cb cb) {
    struct raft *r = io->data;
    cs_group *g = r->data;
    assert(g != NULL && g->real_append != NULL);
    cs_append *a = rn_xcalloc(1, sizeof *a);
    a->inner.data = a;
    a->outer = req;
    a->outer_cb = cb;
    a->group = g;
    a->leader = r->state == RAFT_LEADER;
    req->cb = cb;
    if (a->leader)
        g->leader_appends++;
    int rv = g->real_append(io, &a->inner, entries, n, append_done);
    if (rv != 0) {
        if (a->leader)
            g->leader_appends--;
        free(a);
    }
    return rv;
}

void cs_appends_wrap(cs_group *g) {
    assert(g->io.append != NULL && g->io.append != append);
    g->real_append = g->io.append;
    g->io.append = append;
}
