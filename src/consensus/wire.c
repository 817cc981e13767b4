/*
 * wire.c — the transport's handshake and numeric peer addresses. See wire.h.
 */
#include "consensus/wire.h"

#include <arpa/inet.h>
#include <assert.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>

int rn_wire_hello_encode(rn_buf *out, uint32_t group, uint64_t sender_id, uint64_t cluster_tag,
                         const char *address, rn_wire_auth auth) {
    assert(out != NULL && address != NULL && sender_id > 0);
    assert(auth <= RN_WIRE_AUTH_CERT);
    size_t len = strlen(address);
    if (len == 0 || len > RN_WIRE_MAX_ADDRESS)
        return -1;
    rn_buf_append_u32(out, RN_WIRE_MAGIC);
    rn_buf_append_u8(out, RN_WIRE_VERSION & 0xff);
    rn_buf_append_u8(out, RN_WIRE_VERSION >> 8);
    rn_buf_append_u8(out, (uint8_t)(len & 0xff));
    rn_buf_append_u8(out, (uint8_t)(len >> 8));
    rn_buf_append_u32(out, group);
    rn_buf_append_u32(out, (uint32_t)auth);
    rn_buf_append_u64(out, sender_id);
    rn_buf_append_u64(out, cluster_tag);
    rn_buf_append(out, address, len);
    return 0;
}

rn_wire_status rn_wire_hello_decode(const uint8_t *fixed, uint32_t groups, uint64_t cluster_tag,
                                    rn_wire_hello *h) {
    assert(fixed != NULL && h != NULL);
    rn_reader r;
    rn_reader_init(&r, fixed, RN_WIRE_FIXED_BYTES);
    uint32_t magic = rn_read_u32(&r);
    uint32_t version = rn_read_u8(&r);
    version |= (uint32_t)rn_read_u8(&r) << 8;
    uint32_t address_len = rn_read_u8(&r);
    address_len |= (uint32_t)rn_read_u8(&r) << 8;
    h->group = rn_read_u32(&r);
    uint32_t auth = rn_read_u32(&r);
    h->sender_id = rn_read_u64(&r);
    h->cluster_tag = rn_read_u64(&r);
    h->address_len = (uint16_t)address_len;
    assert(!r.failed);
    if (magic != RN_WIRE_MAGIC)
        return RN_WIRE_BAD_MAGIC;
    if (version != RN_WIRE_VERSION || auth > RN_WIRE_AUTH_CERT)
        return RN_WIRE_BAD_VERSION;
    h->auth = (rn_wire_auth)auth;
    if (h->group >= groups && h->group != RN_WIRE_CONTROL_GROUP)
        return RN_WIRE_BAD_GROUP;
    if (address_len == 0 || address_len > RN_WIRE_MAX_ADDRESS)
        return RN_WIRE_BAD_ADDRESS;
    if (h->cluster_tag != cluster_tag)
        return RN_WIRE_BAD_CLUSTER;
    if (h->sender_id == 0)
        return RN_WIRE_BAD_SENDER;
    return RN_WIRE_OK;
}

void rn_wire_confirm_encode(const rn_wire_confirm *m, uint8_t out[RN_WIRE_CONFIRM_BYTES]) {
    assert(m != NULL && out != NULL);
    assert(m->kind == RN_WIRE_CONFIRM_ASK || m->kind == RN_WIRE_CONFIRM_ANSWER);
    assert(m->kind == RN_WIRE_CONFIRM_ANSWER || !m->confirmed);
    rn_buf b = {0};
    rn_buf_append_u32(&b, (uint32_t)m->kind);
    rn_buf_append_u32(&b, m->group);
    rn_buf_append_u64(&b, m->term);
    rn_buf_append_u64(&b, m->round);
    rn_buf_append_u32(&b, m->confirmed ? 1 : 0);
    rn_buf_append_u32(&b, 0);
    assert(b.len == RN_WIRE_CONFIRM_BYTES);
    memcpy(out, b.data, RN_WIRE_CONFIRM_BYTES);
    rn_buf_free(&b);
}

int rn_wire_confirm_decode(const uint8_t in[RN_WIRE_CONFIRM_BYTES], rn_wire_confirm *m) {
    assert(in != NULL && m != NULL);
    rn_reader r;
    rn_reader_init(&r, in, RN_WIRE_CONFIRM_BYTES);
    uint32_t kind = rn_read_u32(&r);
    m->group = rn_read_u32(&r);
    m->term = rn_read_u64(&r);
    m->round = rn_read_u64(&r);
    uint32_t confirmed = rn_read_u32(&r);
    uint32_t reserved = rn_read_u32(&r);
    assert(!r.failed);
    if (kind != RN_WIRE_CONFIRM_ASK && kind != RN_WIRE_CONFIRM_ANSWER)
        return -1;
    if (confirmed > 1 || reserved != 0 || (kind == RN_WIRE_CONFIRM_ASK && confirmed != 0))
        return -1;
    m->kind = (rn_wire_confirm_kind)kind;
    m->confirmed = confirmed == 1;
    return 0;
}

const char *rn_wire_status_name(rn_wire_status s) {
    switch (s) {
    case RN_WIRE_OK:
        return "ok";
    case RN_WIRE_BAD_MAGIC:
        return "bad magic";
    case RN_WIRE_BAD_VERSION:
        return "unsupported version";
    case RN_WIRE_BAD_GROUP:
        return "unknown group";
    case RN_WIRE_BAD_ADDRESS:
        return "bad address length";
    case RN_WIRE_BAD_CLUSTER:
        return "another cluster";
    case RN_WIRE_BAD_SENDER:
        return "sender id 0";
    }
    return "?";
}

/* FNV-1a over 8-byte words with a final avalanche (splitmix64), never 0:
 * the hash util/map.c used before it was keyed, kept here unchanged because
 * nodes compare the tags they compute (a node of an older build computes
 * it this way). Deterministic, so only for the tag, never for a table. */
static uint64_t tag_hash(const void *key, size_t len) {
    const uint8_t *p = key;
    uint64_t h = 0xcbf29ce484222325ull ^ len;
    while (len >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        h = (h ^ w) * 0x100000001b3ull;
        h ^= h >> 29;
        p += 8;
        len -= 8;
    }
    while (len--)
        h = (h ^ *p++) * 0x100000001b3ull;
    h ^= h >> 30;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 27;
    h *= 0x94d049bb133111ebull;
    h ^= h >> 31;
    return h ? h : 1;
}

uint64_t rn_wire_cluster_tag(const char *cluster_id) {
    if (cluster_id == NULL || cluster_id[0] == '\0')
        return 0;
    return tag_hash(cluster_id, strlen(cluster_id));
}

/* Parses a decimal port 1..65535 that ends the string. */
static int parse_port(const char *s, uint16_t *out) {
    if (*s == '\0' || strlen(s) > 5)
        return -1;
    unsigned long v = 0;
    for (const char *p = s; *p; p++) {
        if (*p < '0' || *p > '9')
            return -1;
        v = v * 10 + (unsigned long)(*p - '0');
    }
    if (v == 0 || v > 65535 || s[0] == '0')
        return -1;
    *out = (uint16_t)v;
    return 0;
}

int rn_wire_parse_address(const char *address, struct sockaddr_storage *out) {
    assert(address != NULL && out != NULL);
    char host[64];
    const char *port;
    memset(out, 0, sizeof *out);
    if (address[0] == '[') {
        const char *close = strchr(address, ']');
        if (close == NULL || close[1] != ':' || (size_t)(close - address - 1) >= sizeof host)
            return -1;
        memcpy(host, address + 1, (size_t)(close - address - 1));
        host[close - address - 1] = '\0';
        port = close + 2;
        struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)out;
        uint16_t p;
        if (parse_port(port, &p) != 0 || inet_pton(AF_INET6, host, &a6->sin6_addr) != 1)
            return -1;
        a6->sin6_family = AF_INET6;
        a6->sin6_port = htons(p);
        return 0;
    }
    const char *colon = strrchr(address, ':');
    if (colon == NULL || (size_t)(colon - address) >= sizeof host)
        return -1;
    memcpy(host, address, (size_t)(colon - address));
    host[colon - address] = '\0';
    struct sockaddr_in *a4 = (struct sockaddr_in *)out;
    uint16_t p;
    if (parse_port(colon + 1, &p) != 0 || inet_pton(AF_INET, host, &a4->sin_addr) != 1)
        return -1;
    a4->sin_family = AF_INET;
    a4->sin_port = htons(p);
    return 0;
}
