/*
 * touches.c — TTL windows decided cluster-wide. See touches.h.
 */
#include "cluster/touches.h"
#include "protocol/params.h"
#include "util/text.h"

#include <stdint.h>
#include <stdio.h>

void rn_touches_query(rn_engine *e, char out[RN_TOUCHES_QUERY_MAX]) {
    uint64_t ids[RN_TOUCHES_PER_POLL];
    size_t n = rn_engine_take_touches(e, ids, RN_TOUCHES_PER_POLL);
    size_t at = 0;
    out[0] = '\0';
    for (size_t i = 0; i < n; i++)
        at += (size_t)snprintf(out + at, RN_TOUCHES_QUERY_MAX - at, "%s%016llx",
                               i ? "," : "?touched=", (unsigned long long)ids[i]);
}

void rn_touches_apply(rn_engine *e, const char *query, size_t len) {
    char val[RN_TOUCHES_QUERY_MAX];
    long n;
    rn_param_fault f;
    if (rn_param_query(query, len, "touched", RN_PARAM_LENIENT, val, sizeof val, &n, &f) != 0 ||
        n <= 0)
        return;
    for (long at = 0; at + 16 <= n; at += 17) {
        uint64_t id;
        if ((at + 16 < n && val[at + 16] != ',') || rn_parse_hex_u64(val + at, &id) != 0)
            return; /* not what a peer writes */
        rn_engine_touch_id(e, id);
    }
}
