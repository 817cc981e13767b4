/*
 * producer_state.h — the durable state of a producer (a small text file):
 * its stream, id, epoch, whether the epoch's claim holds, the incarnation
 * it writes to, the deployment that holds it (Ursula-Cluster-Id, extensions
 * §10: another id is another deployment), the next seq, the tag through which every write holds,
 * and each write that may not hold yet (seq, length, digest, tag). Bodies are not stored: a resumed
 * producer gets them from its caller again and checks them against the recorded length and digest.
 *
 * A save replaces the file atomically and durably: a temporary file is
 * written and fsynced, renamed over the file, and the directory fsynced.
 * A lock file beside it (flock) keeps a second process off the state.
 */
#ifndef RN_CLIENT_PRODUCER_STATE_H
#define RN_CLIENT_PRODUCER_STATE_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    uint64_t seq, len, tag;
    char digest[65];
    int closed; /* a write with Stream-Closed: true */
} rnc_pstate_write;

typedef struct {
    char url[2048];
    char id[256];
    uint64_t epoch;
    int claimed; /* the epoch's seq 0 is known to hold */
    char incarnation[32];
    char cluster_id[72]; /* Ursula-Cluster-Id; "" while unknown */
    uint64_t next_seq;
    uint64_t acked_tag;
    uint64_t note[2];          /* the caller's two numbers (runnel_producer_set_note) */
    rnc_pstate_write *pending; /* in seq order */
    size_t npending, cap;
} rnc_pstate;

/* Loads path into s. Returns 0, 1 when the file does not exist (s is
 * empty), or -1 with a reason in err for an unreadable or malformed file. */
int rnc_pstate_load(const char *path, rnc_pstate *s, char *err, size_t errcap);

/* Writes s to path durably (see above). Returns 0, or -1 with err. */
int rnc_pstate_save(const char *path, const rnc_pstate *s, char *err, size_t errcap);

/* Takes the lock of path's state (path + ".lock"); returns its descriptor,
 * or -1 with err (another process holds it, or it cannot be created). */
int rnc_pstate_lock(const char *path, char *err, size_t errcap);

/* Appends a pending write (grows the array). */
void rnc_pstate_add(rnc_pstate *s, const rnc_pstate_write *w);
void rnc_pstate_free(rnc_pstate *s);

#endif
