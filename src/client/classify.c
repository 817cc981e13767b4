/*
 * classify.c — runnel_classify: the five outcomes of a write (extensions
 * §11.1), written from the document.
 *
 *   - no answer, a 1xx, a 3xx other than 307/308: unknown;
 *   - 307, 308: redirected (§5.7: nothing applied at this target);
 *   - a 2xx: applied only with the typed answer the server always sends for
 *     the write's kind (a producer's 204 receipt, or one with
 *     Producer-Outcome: receipt-evicted, is a repeat); a 2xx without it came
 *     from a layer outside the server and says nothing: unknown. A delete
 *     and a bucket create have no typed answer: their 2xx is applied;
 *   - a 4xx other than 408: refused;
 *   - a 408 or a 5xx: refused only when its code is one the table of
 *     §11.1 lists for that status as sent only when nothing applied; any
 *     other code, an unknown code or none: unknown.
 */
#include "client/internal.h"

#include <string.h>

/* §11.1, "Codes that prove a refusal", by status. */
static const char *const PROOF_408[] = {"BODY_TOO_SLOW", NULL};
static const char *const PROOF_501[] = {"NO_COLD_STORE", NULL};
static const char *const PROOF_503[] = {
    "NO_LEADER",
    "WAL_DISK_PRESSURE",
    "RAFT_LOG_PRESSURE",
    "INGRESS_BODY_BYTES_LIMIT_REACHED",
    "COLD_BACKPRESSURE",
    "RAFT_UNCOMMITTED_BACKPRESSURE",
    "APPLY_STOPPED",
    "GROUP_RESTARTING",
    "HISTORY_PENDING",
    "JSON_BOUNDARY_UNVERIFIED",
    "SNAPSHOT_COMMITS_BUSY",
    /* an intermediary that forwarded nothing */
    "AUTHENTICATION_UNAVAILABLE",
    "AUTHORIZATION_UNAVAILABLE",
    "NO_UPSTREAM",
    "UPSTREAM_UNREACHABLE",
    "UPLOAD_BUDGET_EXHAUSTED",
    NULL,
};

int runnel_code_proves_refusal(int status, const char *code) {
    const char *const *list = status == 408   ? PROOF_408
                              : status == 501 ? PROOF_501
                              : status == 503 ? PROOF_503
                                              : NULL;
    if (!list || !code || !code[0])
        return 0;
    for (; *list; list++)
        if (strcmp(*list, code) == 0)
            return 1;
    return 0;
}

/* The producer receipt: where the write's bytes start and end. */
static int has_receipt(const runnel_answer *a) {
    return a->offset[0] && a->next_offset[0];
}

static int receipt_evicted(const runnel_answer *a) {
    const char *v = a->producer_outcome;
    size_t n = strcspn(v, ";");
    while (n && (v[n - 1] == ' ' || v[n - 1] == '\t'))
        n--;
    return n == 15 && memcmp(v, "receipt-evicted", 15) == 0;
}

static runnel_outcome classify_2xx(runnel_write_kind kind, const runnel_answer *a) {
    switch (kind) {
    case RUNNEL_WRITE_PRODUCER:
        if (a->status == 204 && receipt_evicted(a))
            return RUNNEL_REPEAT;
        if (!has_receipt(a))
            return RUNNEL_UNKNOWN;
        /* 204 is a repeat; a close-only write that applies now answers 204
         * too, and reads as one (both hold). */
        return a->status == 204 ? RUNNEL_REPEAT : RUNNEL_APPLIED;
    case RUNNEL_WRITE_APPEND:
        return a->next_offset[0] ? RUNNEL_APPLIED : RUNNEL_UNKNOWN;
    case RUNNEL_WRITE_CREATE:
    case RUNNEL_WRITE_DISCARD:
        return a->incarnation[0] ? RUNNEL_APPLIED : RUNNEL_UNKNOWN;
    case RUNNEL_WRITE_PUBLISH:
        return a->snapshot_offset[0] && a->snapshot_digest[0] ? RUNNEL_APPLIED : RUNNEL_UNKNOWN;
    case RUNNEL_WRITE_PART:
        return a->snapshot_part[0] ? RUNNEL_APPLIED : RUNNEL_UNKNOWN;
    case RUNNEL_WRITE_RETENTION:
        return a->retained_offset[0] && a->incarnation[0] ? RUNNEL_APPLIED : RUNNEL_UNKNOWN;
    case RUNNEL_WRITE_DELETE:
    case RUNNEL_WRITE_BUCKET_CREATE:
        return RUNNEL_APPLIED; /* no typed answer: the status proves it */
    }
    return RUNNEL_UNKNOWN;
}

runnel_outcome runnel_classify(runnel_write_kind kind, const runnel_answer *a) {
    int s = a->status;
    if (s == 307 || s == 308)
        return RUNNEL_REDIRECTED;
    if (s >= 200 && s <= 299)
        return classify_2xx(kind, a);
    if (s >= 400 && s <= 499 && s != 408)
        return RUNNEL_REFUSED;
    if (s == 408 || (s >= 500 && s <= 599))
        return runnel_code_proves_refusal(s, a->error_code) ? RUNNEL_REFUSED : RUNNEL_UNKNOWN;
    return RUNNEL_UNKNOWN; /* no answer, 1xx, other 3xx, anything else */
}

const char *runnel_outcome_name(runnel_outcome o) {
    switch (o) {
    case RUNNEL_APPLIED:
        return "applied";
    case RUNNEL_REPEAT:
        return "repeat";
    case RUNNEL_REFUSED:
        return "refused";
    case RUNNEL_REDIRECTED:
        return "redirected";
    case RUNNEL_UNKNOWN:
        return "unknown";
    }
    return "unknown";
}
