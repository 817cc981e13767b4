/*
 * placement.c — groups of stream keys and cluster-wide ids. See placement.h.
 */
#include "cluster/placement.h"
#include "engine/state.h"
#include "util/buf.h"
#include "util/files.h"
#include "util/log.h"
#include "util/text.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SERIAL_LIMIT (1ull << 36) /* (serial << 16) stays below 2^52 */

unsigned rn_placement_group(const char *key, size_t len, unsigned groups) {
    assert(groups >= 1 && groups <= 256);
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < len; i++) {
        h ^= (uint8_t)key[i];
        h *= 0x100000001b3ull;
    }
    return (unsigned)(h % groups);
}

int rn_placement_stream_in_group(const rn_stream *s, void *arg) {
    return rn_placement_id_group(s->id) == *(const unsigned *)arg;
}

/* Makes block b the current one: the file then names b + 1, the first
 * block a later start may use. Returns 0 or -errno. */
static int reserve(rn_id_issuer *is, uint64_t block) {
    char line[32];
    int n = snprintf(line, sizeof line, "%llu\n", (unsigned long long)(block + 1));
    int rc = rn_atomic_write_file(is->dir, "cluster-ids", line, (size_t)n, 0644);
    if (rc < 0)
        return rc;
    is->next = block * RN_ID_BLOCK;
    is->limit = is->next + RN_ID_BLOCK;
    if (is->next == 0)
        is->next = 1; /* serial 0 would make id 0 possible for group 0 of node 0 */
    return 0;
}

int rn_id_issuer_open(rn_id_issuer *is, const char *dir, unsigned node, char *err, size_t errcap) {
    assert(node >= 1 && node <= 255);
    memset(is, 0, sizeof *is);
    is->dir = rn_xstrdup(dir);
    is->node = node;
    rn_buf b = {0};
    int rc = rn_read_file(dir, "cluster-ids", &b);
    uint64_t block = 0;
    size_t len = b.len;
    while (len && (b.data[len - 1] == '\n'))
        len--;
    if (rc == 0 &&
        rn_parse_strict_u64((const char *)b.data, len, SERIAL_LIMIT / RN_ID_BLOCK, &block) != 0) {
        snprintf(err, errcap, "%s/cluster-ids is damaged; refusing to start", dir);
        rn_buf_free(&b);
        rn_id_issuer_close(is); /* a refused issuer holds nothing */
        return -1;
    }
    rn_buf_free(&b);
    if (rc < 0 && rc != -ENOENT) {
        snprintf(err, errcap, "cannot read %s/cluster-ids: %s", dir, strerror(-rc));
        rn_id_issuer_close(is);
        return -1;
    }
    if (block >= SERIAL_LIMIT / RN_ID_BLOCK || (rc = reserve(is, block)) < 0) {
        snprintf(err, errcap, "cannot reserve stream ids in %s/cluster-ids: %s", dir,
                 block >= SERIAL_LIMIT / RN_ID_BLOCK ? "every serial is used" : strerror(-rc));
        rn_id_issuer_close(is);
        return -1;
    }
    return 0;
}

void rn_id_issuer_close(rn_id_issuer *is) {
    free(is->dir);
    is->dir = NULL;
}

uint64_t rn_id_issue(rn_id_issuer *is, unsigned group) {
    assert(group < 256);
    if (is->next == is->limit) {
        uint64_t block = is->limit / RN_ID_BLOCK;
        int rc = block < SERIAL_LIMIT / RN_ID_BLOCK ? reserve(is, block) : -ENOSPC;
        if (rc < 0) {
            rn_log(RN_LOG_ERROR, "cluster_ids", "cannot reserve more stream ids: %s",
                   strerror(-rc));
            return 0;
        }
    }
    uint64_t serial = is->next++;
    return (serial << 16) | ((uint64_t)is->node << 8) | group;
}
