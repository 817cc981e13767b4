/*
 * config_peers.c — the values of --peer (N=RAFTADDR,URL[,PEERURL]). See
 * config_peers.h.
 */
#include "ops/config_peers.h"
#include "util/text.h"

#include <stdio.h>
#include <string.h>

/* Copies a peer's URL (without its trailing slashes) into out[512]: an
 * http(s):// URL of characters a header may carry unquoted. Returns -1
 * (with err naming what) for anything else. */
static int peer_url(uint64_t id, const char *what, const char *url, size_t url_len, char out[512],
                    const char *source, char *err, size_t errcap) {
    while (url_len && url[url_len - 1] == '/')
        url_len--;
    int url_ok = url_len < 512 &&
                 (rn_iprefix(url, url_len, "http://") || rn_iprefix(url, url_len, "https://"));
    for (size_t i = 0; url_ok && i < url_len; i++)
        url_ok = url[i] > ' ' && url[i] < 0x7f && url[i] != '"' && url[i] != '\\' && url[i] != ',';
    if (!url_ok) { /* the slashes dropped, a scheme alone no longer matches it */
        snprintf(err, errcap,
                 "%s: peer %llu: %s must be an http:// or https:// URL of printable ASCII "
                 "(got \"%.*s\")",
                 source, (unsigned long long)id, what, (int)url_len, url);
        return -1;
    }
    memcpy(out, url, url_len);
    out[url_len] = 0;
    return 0;
}

int rn_config_add_peer(rn_config *cfg, const char *v, size_t n, const char *source, char *err,
                       size_t errcap) {
    const char *eq = memchr(v, '=', n);
    const char *comma = eq ? memchr(eq, ',', n - (size_t)(eq - v)) : NULL;
    uint64_t id;
    if (!eq || !comma || rn_parse_strict_u64(v, (size_t)(eq - v), 255, &id) || id == 0) {
        snprintf(err, errcap,
                 "%s: peer must be N=RAFTADDR,URL[,PEERURL] with N from 1 to 255 (got \"%.*s\")",
                 source, (int)n, v);
        return -1;
    }
    const char *raft = eq + 1, *url = comma + 1, *end = v + n;
    const char *second = memchr(url, ',', (size_t)(end - url));
    size_t raft_len = (size_t)(comma - raft);
    rn_peer_config *p = &cfg->peers[cfg->n_peers];
    if (cfg->n_peers == RN_MAX_PEERS) {
        snprintf(err, errcap, "%s: more than %d peers", source, RN_MAX_PEERS);
        return -1;
    }
    if (raft_len == 0 || raft_len >= sizeof p->raft) {
        snprintf(err, errcap, "%s: peer %llu: RAFTADDR must be host:port (got \"%.*s\")", source,
                 (unsigned long long)id, (int)raft_len, raft);
        return -1;
    }
    memset(p, 0, sizeof *p);
    if (peer_url(id, "URL", url, (size_t)((second ? second : end) - url), p->url, source, err,
                 errcap) ||
        (second && peer_url(id, "PEERURL", second + 1, (size_t)(end - second - 1), p->peer_url,
                            source, err, errcap)))
        return -1;
    p->id = id;
    memcpy(p->raft, raft, raft_len);
    p->raft[raft_len] = 0;
    cfg->n_peers++;
    return 0;
}
